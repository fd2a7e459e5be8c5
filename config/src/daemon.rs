//! `[daemon]`, `[eal]` and `[cores]`: who the daemon is, how DPDK starts, where it runs.

use serde::{Deserialize, Serialize};

use crate::error::{ensure, ConfigError};

/// Longest daemon name: it becomes part of the DPDK file prefix and of socket paths.
pub const NAME_LEN_MAX: usize = 32;
/// Longest unix socket path (`sun_path` is 108 bytes with the terminating NUL).
pub const SOCKET_PATH_LEN_MAX: usize = 107;
/// Most dataplane cores one daemon runs.
pub const DATAPLANE_CORES_MAX: usize = 64;
/// Highest CPU id accepted in a core list.
pub const CPU_ID_MAX: u32 = 4095;

/// How much the daemon logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Start-up, shutdown and state changes (default).
    #[default]
    Info,
    /// Per-connection events.
    Debug,
    /// Everything.
    Trace,
}

/// How log lines are written on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text per event: time (RFC 3339, UTC), level, daemon, message, fields
    /// (default).
    #[default]
    Text,
    /// One JSON object per line (for journald, Loki, jq).
    Json,
}

/// `[daemon]`: identity, logging, statistics, shutdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonSection {
    /// Name of this daemon: the DPDK file prefix, the default stats socket and memif
    /// socket names, and log lines carry it. Two daemons on one host need distinct names.
    pub name: String,
    /// Log level.
    pub log_level: LogLevel,
    /// Log line format.
    pub log_format: LogFormat,
    /// Path of the statistics socket. Absent: `/run/iwarpd/<name>.sock`; empty: no socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats_socket: Option<String>,
    /// Print counters every this many milliseconds (0: only at exit).
    pub stats_interval_ms: u64,
    /// TCP address (`IP:PORT`) where the counters are served as OpenMetrics text
    /// (`GET /metrics`, for Prometheus). Absent: no metrics endpoint (default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// How long an orderly shutdown (SIGINT/SIGTERM) may take to flush and close QPs
    /// before ports are stopped anyway, milliseconds.
    pub shutdown_grace_ms: u64,
}

impl Default for DaemonSection {
    fn default() -> DaemonSection {
        DaemonSection {
            name: "iwarpd".to_string(),
            log_level: LogLevel::Info,
            log_format: LogFormat::Text,
            stats_socket: None,
            stats_interval_ms: 0,
            metrics_listen: None,
            shutdown_grace_ms: 2_000,
        }
    }
}

impl DaemonSection {
    /// The statistics socket path, resolved: `None` if disabled (empty string).
    pub fn stats_socket_path(&self) -> Option<String> {
        match &self.stats_socket {
            None => Some(format!("/run/iwarpd/{}.sock", self.name)),
            Some(p) if p.is_empty() => None,
            Some(p) => Some(p.clone()),
        }
    }

    /// The metrics endpoint's address, parsed: `None` if off. Call after validation
    /// (an address that does not parse is `None` too).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_listen.as_deref()?.parse().ok()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(a) = &self.metrics_listen {
            let parsed = a.parse::<std::net::SocketAddr>();
            ensure(
                parsed.as_ref().is_ok_and(|s| s.port() != 0),
                "daemon.metrics_listen",
                format!("`{a}` must be an IP address and a port 1..=65535, such as \"127.0.0.1:9464\" or \"[::1]:9464\" (leave it unset for no endpoint)"),
            )?;
        }
        let n = &self.name;
        ensure(
            !n.is_empty() && n.len() <= NAME_LEN_MAX,
            "daemon.name",
            format!("must be 1..={NAME_LEN_MAX} characters"),
        )?;
        let ok_chars = n
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            && n.as_bytes()[0].is_ascii_alphanumeric();
        ensure(
            ok_chars,
            "daemon.name",
            format!("`{n}`: only letters, digits, `-` and `_`, starting with a letter or digit (it becomes a file prefix and part of socket paths)"),
        )?;
        if let Some(p) = self.stats_socket_path() {
            ensure(
                p.starts_with('/'),
                "daemon.stats_socket",
                format!("`{p}` must be an absolute path (or empty for no socket)"),
            )?;
            ensure(
                p.len() <= SOCKET_PATH_LEN_MAX,
                "daemon.stats_socket",
                format!(
                    "`{p}` is longer than a unix socket path may be ({SOCKET_PATH_LEN_MAX} bytes)"
                ),
            )?;
        }
        ensure(
            self.stats_interval_ms == 0 || (100..=3_600_000).contains(&self.stats_interval_ms),
            "daemon.stats_interval_ms",
            "must be 0 (off) or 100..=3600000",
        )?;
        ensure(
            self.shutdown_grace_ms <= 600_000,
            "daemon.shutdown_grace_ms",
            "must be at most 600000 (10 minutes)",
        )
    }
}

/// Whether DPDK's memory comes from hugepages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HugepageMode {
    /// Use hugepages (`--in-memory`) if any are reserved, else fall back to `--no-huge`
    /// with a warning (default).
    #[default]
    Auto,
    /// Use hugepages; refuse to start without them.
    Required,
    /// Never use hugepages (`--no-huge -m <no_huge_memory_mb>`).
    Off,
}

/// EAL options iwarpd sets itself; `eal.extra_args` may not repeat them.
pub const EAL_OPTIONS_OWNED: &[&str] = &[
    "-l",
    "--lcores",
    "-c",
    "--main-lcore",
    "--file-prefix",
    "--in-memory",
    "--no-huge",
    "-m",
    "--socket-mem",
    "--vdev",
    "-a",
    "--allow",
    "-b",
    "--block",
    "--no-pci",
    "--no-shconf",
];

/// `[eal]`: how DPDK's environment is started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EalSection {
    /// Hugepage use: `auto`, `required` or `off`.
    pub hugepages: HugepageMode,
    /// Memory for DPDK in no-huge mode, MiB (`-m`).
    pub no_huge_memory_mb: u32,
    /// More EAL arguments, passed as given after iwarpd's own (e.g. `--log-level=pmd.net.memif:debug`).
    pub extra_args: Vec<String>,
    /// DPDK telemetry: the socket `dpdk-telemetry.py` reads, with iwarpd's counters under
    /// `/iwarp/...` (off: `--no-telemetry`).
    pub telemetry: bool,
}

impl Default for EalSection {
    fn default() -> EalSection {
        EalSection {
            hugepages: HugepageMode::Auto,
            no_huge_memory_mb: 512,
            extra_args: Vec::new(),
            telemetry: true,
        }
    }
}

impl EalSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure(
            (64..=1 << 20).contains(&self.no_huge_memory_mb),
            "eal.no_huge_memory_mb",
            "must be in 64..=1048576",
        )?;
        for (i, arg) in self.extra_args.iter().enumerate() {
            let field = format!("eal.extra_args[{i}]");
            ensure(!arg.is_empty(), &field, "empty argument")?;
            let opt = arg.split('=').next().unwrap_or_default();
            // `-l0-3` style short options with the value attached count as well.
            let owned = EAL_OPTIONS_OWNED.iter().find(|o| {
                opt == **o
                    || (o.len() == 2
                        && !o.starts_with("--")
                        && opt.starts_with(**o)
                        && !opt.starts_with("--"))
            });
            if let Some(o) = owned {
                return Err(ConfigError::new(
                    field,
                    format!("`{arg}`: iwarpd sets `{o}` itself (from [daemon], [eal], [cores] and [[port]])"),
                ));
            }
        }
        Ok(())
    }
}

/// How new QPs are spread over the dataplane cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QpPlacement {
    /// The core with the fewest QPs (default).
    #[default]
    LeastLoaded,
    /// Cores in turn.
    RoundRobin,
    /// A hash of the connection's 4-tuple (what RSS would pick).
    Hash,
}

/// `[cores]`: which CPUs run what.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoresSection {
    /// CPUs that run a busy-polling dataplane core each. Empty: one core, the last
    /// online CPU.
    pub dataplane: Vec<u32>,
    /// CPUs the control thread may run on. Empty: the online CPUs that run no dataplane
    /// core (every online CPU when each one runs a dataplane core).
    pub control: Vec<u32>,
    /// QP placement: `least-loaded`, `round-robin` or `hash`.
    pub qp_placement: QpPlacement,
}

impl CoresSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure(
            self.dataplane.len() <= DATAPLANE_CORES_MAX,
            "cores.dataplane",
            format!("at most {DATAPLANE_CORES_MAX} cores"),
        )?;
        check_cpu_list(&self.dataplane, "cores.dataplane")?;
        check_cpu_list(&self.control, "cores.control")?;
        if let Some(c) = self.control.iter().find(|c| self.dataplane.contains(c)) {
            return Err(ConfigError::new(
                "cores.control",
                format!("CPU {c} also runs a dataplane core, which busy-polls and would starve the control thread"),
            ));
        }
        Ok(())
    }

    /// The dataplane CPUs on a machine whose online CPUs are `online` (see
    /// [`online_cpus`]): the configured list, each checked to be online, or the last
    /// online CPU when the list is empty.
    pub fn dataplane_cpus(&self, online: &[u32]) -> Result<Vec<u32>, ConfigError> {
        if self.dataplane.is_empty() {
            return online
                .iter()
                .max()
                .map(|c| vec![*c])
                .ok_or_else(|| ConfigError::new("cores.dataplane", "no online CPU found"));
        }
        for (name, list) in [
            ("cores.dataplane", &self.dataplane),
            ("cores.control", &self.control),
        ] {
            if let Some(c) = list.iter().find(|c| !online.contains(c)) {
                return Err(ConfigError::new(
                    name,
                    format!(
                        "CPU {c} is not online (online: {})",
                        format_cpu_list(online)
                    ),
                ));
            }
        }
        Ok(self.dataplane.clone())
    }

    /// The CPUs of the control thread (DPDK's main lcore) on a machine whose online CPUs
    /// are `online`, with dataplane cores on `dataplane`: the configured list, or else
    /// the online CPUs without a dataplane core. A dataplane core busy-polls: a control
    /// thread the scheduler puts on its CPU takes that core's time slice by slice
    /// (a client's registrations or connection churn would slow every other client's
    /// traffic on that core; issue 15, isolation). Only when every online CPU runs a
    /// dataplane core does the control thread float over all of them.
    pub fn control_cpus(&self, dataplane: &[u32], online: &[u32]) -> Vec<u32> {
        if !self.control.is_empty() {
            return self.control.clone();
        }
        let free: Vec<u32> = online
            .iter()
            .copied()
            .filter(|c| !dataplane.contains(c))
            .collect();
        if free.is_empty() {
            online.to_vec()
        } else {
            free
        }
    }
}

fn check_cpu_list(list: &[u32], field: &str) -> Result<(), ConfigError> {
    for (i, c) in list.iter().enumerate() {
        ensure(
            *c <= CPU_ID_MAX,
            field,
            format!("CPU {c} is above {CPU_ID_MAX}"),
        )?;
        ensure(
            !list[..i].contains(c),
            field,
            format!("CPU {c} is listed twice"),
        )?;
    }
    Ok(())
}

/// Parses a Linux CPU list such as `0-3,8,10-11` (as in `/sys/devices/system/cpu/online`
/// and `taskset -c`).
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|c| *c <= CPU_ID_MAX)
                .ok_or_else(|| format!("`{t}` is not a CPU id (0..={CPU_ID_MAX})"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("`{part}`: empty range"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err("empty CPU list".to_string());
    }
    Ok(out)
}

/// Formats CPU ids as a CPU list (`0-3,8`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The online CPUs of this machine (`/sys/devices/system/cpu/online`, else
/// `0..available_parallelism`). Called once at start-up.
pub fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(&s).ok())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n as u32).collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon_err(f: impl FnOnce(&mut DaemonSection)) -> String {
        let mut d = DaemonSection::default();
        f(&mut d);
        d.validate().unwrap_err().field
    }

    #[test]
    fn daemon_rules_name_their_field() {
        DaemonSection::default().validate().unwrap();
        assert_eq!(daemon_err(|d| d.name = String::new()), "daemon.name");
        assert_eq!(daemon_err(|d| d.name = "a b".into()), "daemon.name");
        assert_eq!(daemon_err(|d| d.name = "-x".into()), "daemon.name");
        assert_eq!(daemon_err(|d| d.name = "x".repeat(33)), "daemon.name");
        assert_eq!(
            daemon_err(|d| d.stats_socket = Some("rel.sock".into())),
            "daemon.stats_socket"
        );
        assert_eq!(
            daemon_err(|d| d.stats_socket = Some(format!("/{}", "s".repeat(120)))),
            "daemon.stats_socket"
        );
        assert_eq!(
            daemon_err(|d| d.stats_interval_ms = 5),
            "daemon.stats_interval_ms"
        );
        assert_eq!(
            daemon_err(|d| d.shutdown_grace_ms = 700_000),
            "daemon.shutdown_grace_ms"
        );
        for bad in [
            "",
            "9464",
            "localhost:9464",
            "127.0.0.1",
            "127.0.0.1:0",
            "1.2.3.4:70000",
        ] {
            assert_eq!(
                daemon_err(|d| d.metrics_listen = Some(bad.into())),
                "daemon.metrics_listen",
                "{bad}"
            );
        }
    }

    #[test]
    fn metrics_listen_is_off_by_default_and_parsed() {
        let mut d = DaemonSection::default();
        assert_eq!(d.metrics_addr(), None);
        d.metrics_listen = Some("[::1]:9464".into());
        d.validate().unwrap();
        assert_eq!(d.metrics_addr(), Some("[::1]:9464".parse().unwrap()));
    }

    #[test]
    fn stats_socket_defaults_to_the_name() {
        let mut d = DaemonSection {
            name: "a1".into(),
            ..DaemonSection::default()
        };
        assert_eq!(
            d.stats_socket_path().as_deref(),
            Some("/run/iwarpd/a1.sock")
        );
        d.stats_socket = Some(String::new());
        assert_eq!(d.stats_socket_path(), None);
        d.validate().unwrap();
        d.stats_socket = Some("/tmp/s".into());
        assert_eq!(d.stats_socket_path().as_deref(), Some("/tmp/s"));
    }

    #[test]
    fn eal_rules_name_their_field() {
        EalSection::default().validate().unwrap();
        let e = EalSection {
            no_huge_memory_mb: 10,
            ..EalSection::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "eal.no_huge_memory_mb");
        let e = EalSection {
            extra_args: vec!["--log-level=lib.eal:debug".into(), "--file-prefix=x".into()],
            ..EalSection::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "eal.extra_args[1]");
        let e = EalSection {
            extra_args: vec!["-l0-1".into()],
            ..EalSection::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "eal.extra_args[0]");
        let e = EalSection {
            extra_args: vec![String::new()],
            ..EalSection::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "eal.extra_args[0]");
        let e = EalSection {
            extra_args: vec!["--log-level=8".into()],
            ..EalSection::default()
        };
        e.validate().unwrap();
    }

    #[test]
    fn core_rules_name_their_field() {
        let c = |dp: Vec<u32>, ctl: Vec<u32>| CoresSection {
            dataplane: dp,
            control: ctl,
            ..CoresSection::default()
        };
        c(vec![0, 1], vec![]).validate().unwrap();
        assert_eq!(
            c(vec![1, 1], vec![]).validate().unwrap_err().field,
            "cores.dataplane"
        );
        assert_eq!(
            c(vec![5000], vec![]).validate().unwrap_err().field,
            "cores.dataplane"
        );
        assert_eq!(
            c((0..65).collect(), vec![]).validate().unwrap_err().field,
            "cores.dataplane"
        );
        assert_eq!(
            c(vec![1], vec![0, 0]).validate().unwrap_err().field,
            "cores.control"
        );
        assert_eq!(
            c(vec![1], vec![1]).validate().unwrap_err().field,
            "cores.control"
        );
    }

    #[test]
    fn dataplane_cpus_resolve_against_the_machine() {
        let online = [0, 1, 2, 3];
        assert_eq!(
            CoresSection::default().dataplane_cpus(&online).unwrap(),
            vec![3]
        );
        let c = CoresSection {
            dataplane: vec![0, 2],
            ..CoresSection::default()
        };
        assert_eq!(c.dataplane_cpus(&online).unwrap(), vec![0, 2]);
        let c = CoresSection {
            dataplane: vec![7],
            ..CoresSection::default()
        };
        let e = c.dataplane_cpus(&online).unwrap_err();
        assert_eq!(e.field, "cores.dataplane");
        assert!(e.message.contains("0-3"), "{e}");
        let c = CoresSection {
            dataplane: vec![1],
            control: vec![9],
            ..CoresSection::default()
        };
        assert_eq!(
            c.dataplane_cpus(&online).unwrap_err().field,
            "cores.control"
        );
        assert!(CoresSection::default().dataplane_cpus(&[]).is_err());
        assert!(!online_cpus().is_empty());
    }

    #[test]
    fn control_cpus_keep_off_the_dataplane_by_default() {
        let online = [0, 1, 2, 3];
        let c = CoresSection::default();
        assert_eq!(c.control_cpus(&[1], &online), vec![0, 2, 3]);
        assert_eq!(c.control_cpus(&[2, 3], &online), vec![0, 1]);
        // Every CPU busy-polls: the control thread floats over all of them.
        assert_eq!(c.control_cpus(&[0, 1], &[0, 1]), vec![0, 1]);
        assert_eq!(c.control_cpus(&[0], &[0]), vec![0]);
        let c = CoresSection {
            control: vec![3],
            ..CoresSection::default()
        };
        assert_eq!(c.control_cpus(&[1], &online), vec![3]);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        for bad in ["", "a", "3-1", "1-", "99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
    }
}
