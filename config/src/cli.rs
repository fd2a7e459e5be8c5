//! The command line of `iwarpd` (clap derive). The lead's binary parses [`Cli`] and
//! calls [`Cli::load_config`]; every option's help names the file key it sets.
//!
//! The options' doc comments are clap's help text, printed verbatim by `iwarpd --help`:
//! they keep their brackets and angle brackets (`[0,1]`, `<name>`) instead of rustdoc's
//! escapes, so rustdoc's link and HTML checks are off in this file.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use core::net::{Ipv4Addr, SocketAddrV4};
use core::str::FromStr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::daemon::{format_cpu_list, parse_cpu_list, LogLevel};
use crate::device::Device;
use crate::error::{ensure, ConfigError};
use crate::overrides::Override;
use crate::Config;

const ABOUT: &str =
    "iwarpd: a software iWARP RNIC (TCP + MPA + DDP + RDMAP) on DPDK poll-mode cores";

const LONG_ABOUT: &str =
    "iwarpd: a software iWARP RNIC (TCP + MPA + DDP + RDMAP) on DPDK poll-mode cores.

Configuration comes from one TOML file (--config), then the flags below, then every
--set KEY=VALUE in order. Without a file the defaults run on a machine without a NIC: one
dataplane core on the last CPU, one memif server port (net_memif0,role=server,
socket=/run/iwarpd/<name>.memif) at 198.18.0.1/24, hugepages if reserved, else --no-huge.
`iwarpd config-keys` lists every key of the file with its default and meaning;
config/examples/ holds example files.";

/// `iwarpd [OPTIONS] [COMMAND]`.
#[derive(Clone, Debug, Parser)]
#[command(name = "iwarpd", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    /// Configuration file (TOML). Default: none, every key at its default.
    #[arg(short, long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// Override any key of the file, e.g. port.0.mtu=9000, tcp.sack=false,
    /// cores.dataplane=[0,1]. Repeatable; applied after the file and the other flags, in
    /// order. Values are TOML literals; anything else is taken as a string.
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub set: Vec<String>,

    /// Daemon name (daemon.name; default "iwarpd"): DPDK file prefix and socket names.
    #[arg(long, value_name = "NAME", global = true)]
    pub name: Option<String>,

    /// Dataplane CPUs as a CPU list, e.g. 1 or 0,2-3 (cores.dataplane; default: the last CPU).
    #[arg(long, value_name = "CPUS", global = true)]
    pub core: Option<CpuList>,

    /// Device of port 0: a PCI address or a vdev string (port.0.device; default the
    /// daemon's memif server).
    #[arg(long, value_name = "DEVICE", global = true)]
    pub device: Option<Device>,

    /// IPv4 address of port 0, optionally with its prefix length: 198.18.0.2/24
    /// (port.0.ipv4 and port.0.prefix_len; default 198.18.0.1/24).
    #[arg(long, value_name = "IPV4[/LEN]", global = true)]
    pub ip: Option<IfAddr>,

    /// IP MTU of port 0, 576..=9000 (port.0.mtu; default 1500).
    #[arg(long, value_name = "BYTES", global = true)]
    pub mtu: Option<u32>,

    /// Write what the ports send and receive to this pcap file (capture.path; default off).
    #[arg(long, value_name = "FILE", global = true)]
    pub capture: Option<String>,

    /// Log level (daemon.log_level; default info).
    #[arg(long, value_name = "LEVEL", global = true)]
    pub log_level: Option<LogLevel>,

    /// Print every configuration key with its default and meaning, then exit.
    #[arg(long)]
    pub help_config: bool,

    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Run the daemon until SIGINT/SIGTERM (the default).
    Run,
    /// Run the load generator client against a peer iwarpd whose [loadgen] server
    /// listens, print goodput, message rate and latency percentiles, and exit.
    Loadgen(LoadgenArgs),
    /// Read and validate the configuration; print a summary; exit 0 if it is valid.
    CheckConfig,
    /// Print the effective configuration (file, flags and --set applied) as TOML.
    PrintConfig,
    /// Print every configuration key with its default and meaning.
    ConfigKeys,
    /// Print the counters of a running daemon (read from its stats socket).
    Stats(StatsArgs),
    /// List the PCI network controllers: driver bound, NUMA node, kernel interface,
    /// whether iwarpd can drive them, and the command that makes one drivable.
    ListDevices,
}

/// What the load generator does per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadgenOp {
    /// RDMA WRITE of --size bytes into the server's buffer.
    Write,
    /// RDMA READ of --size bytes from the server's buffer.
    Read,
    /// SEND of --size bytes into the server's posted receives.
    Send,
    /// Connection set-up only (TCP + MPA + ready-to-receive), then disconnect: set-up rate.
    Connect,
}

/// `iwarpd loadgen`: the client side of the load generator.
#[derive(Clone, Debug, Args)]
pub struct LoadgenArgs {
    /// The peer's load generator server, IPv4:PORT (its loadgen.listen_port).
    #[arg(long, value_name = "IP:PORT")]
    pub peer: SocketAddrV4,
    /// Operation.
    #[arg(long, value_enum, default_value_t = LoadgenOp::Write)]
    pub op: LoadgenOp,
    /// Message size in bytes; K, M, G suffixes (powers of 1024) accepted: 64, 64K, 1M.
    #[arg(long, value_name = "BYTES", default_value = "64K")]
    pub size: ByteSize,
    /// QPs (connections) opened to the peer, spread over the dataplane cores.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub qps: u32,
    /// Messages outstanding per QP.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub depth: u32,
    /// Distinct message buffers per QP the outstanding messages cycle through (default 0:
    /// one per outstanding message). Fewer keep the data in the caches, as iperf3's one
    /// buffer; not with --verify (shared buffers are overwritten in flight).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub buffers: u32,
    /// Measured run time, seconds.
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub seconds: u32,
    /// Unmeasured warm-up before the run, seconds.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub warmup_seconds: u32,
    /// Fill messages with a pattern the server checks (the server needs loadgen.verify).
    #[arg(long)]
    pub verify: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print a line every S seconds while the run goes (rate, latency p50/p99,
    /// retransmissions of that interval; kept in --json); 0: none.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub interval: u32,
}

impl LoadgenArgs {
    /// Checks the arguments against the configuration; errors name the option.
    pub fn validate(&self, cfg: &Config) -> Result<(), ConfigError> {
        ensure(
            !self.peer.ip().is_unspecified() && self.peer.port() != 0,
            "--peer",
            "needs a peer address and a non-zero port",
        )?;
        ensure(
            (1..=1 << 30).contains(&self.size.0),
            "--size",
            "must be in 1..=1G",
        )?;
        let cores = cfg.cores.dataplane.len().max(1) as u64;
        let qps_max = u64::from(cfg.limits.max_qps) * cores;
        ensure(
            (1..=qps_max).contains(&u64::from(self.qps)),
            "--qps",
            format!("must be in 1..={qps_max} (limits.max_qps per core)"),
        )?;
        ensure(
            (1..=cfg.limits.max_sq_wr).contains(&self.depth),
            "--depth",
            format!("must be in 1..={} (limits.max_sq_wr)", cfg.limits.max_sq_wr),
        )?;
        ensure(
            self.buffers <= self.depth,
            "--buffers",
            "must be at most --depth (0: one per outstanding message)",
        )?;
        ensure(
            !self.verify || self.buffers == 0 || self.buffers == self.depth,
            "--buffers",
            "cannot share buffers with --verify (messages in flight overwrite each other)",
        )?;
        if self.op == LoadgenOp::Read {
            ensure(
                self.depth <= cfg.limits.max_ord,
                "--depth",
                format!(
                    "READ depth must be at most limits.max_ord ({})",
                    cfg.limits.max_ord
                ),
            )?;
        }
        ensure(
            (1..=86_400).contains(&self.seconds),
            "--seconds",
            "must be in 1..=86400",
        )?;
        ensure(
            self.warmup_seconds <= 3600,
            "--warmup-seconds",
            "must be at most 3600",
        )
    }
}

/// `iwarpd stats`: query a running daemon.
#[derive(Clone, Debug, Args)]
pub struct StatsArgs {
    /// The daemon's stats socket. Default: daemon.stats_socket of the configuration
    /// (/run/iwarpd/<name>.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A CPU list argument (`0,2-3`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

impl FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuList, String> {
        parse_cpu_list(s).map(CpuList)
    }
}

impl core::fmt::Display for CpuList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&format_cpu_list(&self.0))
    }
}

/// An interface address argument: `198.18.0.2` or `198.18.0.2/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// The address.
    pub ipv4: Ipv4Addr,
    /// The prefix length, if given.
    pub prefix_len: Option<u8>,
}

impl FromStr for IfAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<IfAddr, String> {
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (s, None),
        };
        let ipv4 = ip
            .parse()
            .map_err(|_| format!("`{ip}` is not an IPv4 address"))?;
        let prefix_len = match len {
            Some(l) => Some(
                l.parse::<u8>()
                    .ok()
                    .filter(|n| *n <= 32)
                    .ok_or_else(|| format!("`{l}` is not a prefix length (0..=32)"))?,
            ),
            None => None,
        };
        Ok(IfAddr { ipv4, prefix_len })
    }
}

/// A byte count argument with an optional K/M/G suffix (powers of 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ByteSize, String> {
        let t = s.trim();
        let t = t
            .strip_suffix("iB")
            .or_else(|| t.strip_suffix('B'))
            .unwrap_or(t);
        let (digits, shift) = match t.char_indices().last() {
            Some((i, 'k' | 'K')) => (&t[..i], 10),
            Some((i, 'm' | 'M')) => (&t[..i], 20),
            Some((i, 'g' | 'G')) => (&t[..i], 30),
            _ => (t, 0),
        };
        digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1 << shift))
            .map(ByteSize)
            .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 64, 64K, 1M)"))
    }
}

impl core::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Cli {
    /// The overrides the flags stand for, then every `--set`, in the order applied.
    pub fn overrides(&self) -> Result<Vec<Override>, ConfigError> {
        let mut out = Vec::new();
        if let Some(n) = &self.name {
            out.push(Override::new("daemon.name", n.clone())?);
        }
        if let Some(l) = self.log_level {
            let v = l
                .to_possible_value()
                .map_or_else(|| "info".to_string(), |v| v.get_name().to_string());
            out.push(Override::new("daemon.log_level", v)?);
        }
        if let Some(c) = &self.core {
            let cpus: Vec<toml::Value> =
                c.0.iter()
                    .map(|c| toml::Value::Integer(i64::from(*c)))
                    .collect();
            out.push(Override::new("cores.dataplane", cpus)?);
        }
        if let Some(d) = &self.device {
            out.push(Override::new("port.0.device", d.to_string())?);
        }
        if let Some(ip) = self.ip {
            out.push(Override::new("port.0.ipv4", ip.ipv4.to_string())?);
            if let Some(len) = ip.prefix_len {
                out.push(Override::new("port.0.prefix_len", i64::from(len))?);
            }
        }
        if let Some(m) = self.mtu {
            out.push(Override::new("port.0.mtu", i64::from(m))?);
        }
        if let Some(p) = &self.capture {
            out.push(Override::new("capture.path", p.clone())?);
        }
        for s in &self.set {
            out.push(Override::parse(s)?);
        }
        Ok(out)
    }

    /// The validated configuration: `--config` (or the defaults), the flags, `--set`.
    pub fn load_config(&self) -> Result<Config, ConfigError> {
        Config::build(self.config.as_deref(), &self.overrides()?)
    }

    /// The subcommand, `run` if none was given.
    pub fn action(&self) -> Command {
        self.command.clone().unwrap_or(Command::Run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        let mut v = vec!["iwarpd"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).unwrap()
    }

    #[test]
    fn the_command_line_is_well_formed_and_documented() {
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        fn check(cmd: &clap::Command) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(
                    a.get_help().is_some(),
                    "{} --{id} has no help",
                    cmd.get_name()
                );
            }
            for s in cmd.get_subcommands() {
                assert!(s.get_about().is_some(), "{} has no help", s.get_name());
                check(s);
            }
        }
        check(&cmd);
        let help = Cli::command().render_long_help().to_string();
        for flag in [
            "--config",
            "--set",
            "--name",
            "--core",
            "--device",
            "--ip",
            "--mtu",
            "--capture",
            "--help-config",
        ] {
            assert!(help.contains(flag), "{flag}");
        }
        let mut sub = Cli::command();
        let lg = sub
            .find_subcommand_mut("loadgen")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(lg.contains("[default: 64K]"), "{lg}");
        assert!(lg.contains("[default: write]"), "{lg}");
    }

    #[test]
    fn flags_become_overrides() {
        let cli = parse(&[
            "--name",
            "b",
            "--core",
            "1",
            "--device",
            "net_memif0,role=client,socket=/run/x",
            "--ip",
            "198.18.0.2/24",
            "--mtu",
            "1400",
            "--capture",
            "/tmp/c.pcap",
            "--log-level",
            "debug",
            "--set",
            "tcp.sack=false",
            "check-config",
        ]);
        assert!(matches!(cli.action(), Command::CheckConfig));
        let c = cli.load_config().unwrap();
        assert_eq!(c.daemon.name, "b");
        assert_eq!(c.daemon.log_level, LogLevel::Debug);
        assert_eq!(c.cores.dataplane, vec![1]);
        assert_eq!(
            c.ports[0].device.to_string(),
            "net_memif0,role=client,socket=/run/x"
        );
        assert_eq!(c.ports[0].ipv4, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(c.ports[0].mtu, 1400);
        assert_eq!(c.capture.path, "/tmp/c.pcap");
        assert!(!c.tcp.sack);
        // Global options go after the subcommand too; no subcommand means run.
        let cli = parse(&["print-config", "--mtu", "2000"]);
        assert_eq!(cli.mtu, Some(2000));
        assert!(matches!(parse(&[]).action(), Command::Run));
    }

    #[test]
    fn bad_flags_are_refused() {
        let bad = |args: &[&str]| {
            let mut v = vec!["iwarpd"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v).is_err()
        };
        assert!(bad(&["--device", "eth0"]));
        assert!(bad(&["--core", "x"]));
        assert!(bad(&["--ip", "1.2.3.4/40"]));
        assert!(bad(&["loadgen"]), "--peer is required");
        assert!(bad(&["loadgen", "--peer", "1.2.3.4:5", "--op", "fly"]));
        let e = parse(&["--mtu", "20"]).load_config().unwrap_err();
        assert_eq!(e.field, "port[0].mtu");
        let e = parse(&["--set", "nonsense"]).load_config().unwrap_err();
        assert_eq!(e.field, "nonsense");
        let e = parse(&["--config", "/nonexistent/x.toml"])
            .load_config()
            .unwrap_err();
        assert_eq!(e.field, "file");
    }

    #[test]
    fn loadgen_arguments() {
        let cli = parse(&[
            "loadgen",
            "--peer",
            "198.18.0.1:7000",
            "--op",
            "read",
            "--size",
            "1M",
            "--qps",
            "4",
            "--depth",
            "8",
            "--verify",
        ]);
        let Command::Loadgen(a) = cli.action() else {
            panic!()
        };
        assert_eq!(a.op, LoadgenOp::Read);
        assert_eq!(a.size, ByteSize(1 << 20));
        assert_eq!(a.seconds, 10);
        assert!(a.verify);
        let cfg = Config::default();
        a.validate(&cfg).unwrap();
        let field = |f: fn(&mut LoadgenArgs)| {
            let mut b = a.clone();
            f(&mut b);
            b.validate(&cfg).unwrap_err().field
        };
        assert_eq!(field(|b| b.size = ByteSize(0)), "--size");
        assert_eq!(field(|b| b.qps = 0), "--qps");
        assert_eq!(field(|b| b.qps = 5000), "--qps");
        assert_eq!(field(|b| b.depth = 17), "--depth");
        assert_eq!(field(|b| b.depth = 0), "--depth");
        // Shared buffers: at most the depth, and never with verification.
        assert_eq!(field(|b| b.buffers = 9), "--buffers");
        assert_eq!(field(|b| b.buffers = 2), "--buffers");
        let mut shared = a.clone();
        (shared.verify, shared.buffers) = (false, 2);
        shared.validate(&cfg).unwrap();
        (shared.verify, shared.buffers) = (true, 8);
        shared.validate(&cfg).unwrap();
        assert_eq!(field(|b| b.seconds = 0), "--seconds");
        assert_eq!(field(|b| b.warmup_seconds = 4000), "--warmup-seconds");
        assert_eq!(field(|b| b.peer = "0.0.0.0:1".parse().unwrap()), "--peer");
    }

    #[test]
    fn argument_types() {
        assert_eq!("64".parse::<ByteSize>().unwrap(), ByteSize(64));
        assert_eq!("64K".parse::<ByteSize>().unwrap(), ByteSize(65536));
        assert_eq!("64KiB".parse::<ByteSize>().unwrap(), ByteSize(65536));
        assert_eq!("2g".parse::<ByteSize>().unwrap(), ByteSize(2 << 30));
        for bad in ["", "K", "x", "99999999999999999999G", "-1"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
        assert_eq!("198.18.0.2".parse::<IfAddr>().unwrap().prefix_len, None);
        assert_eq!(
            "198.18.0.2/16".parse::<IfAddr>().unwrap().prefix_len,
            Some(16)
        );
        assert!("198.18.0/16".parse::<IfAddr>().is_err());
        assert_eq!("0,2-3".parse::<CpuList>().unwrap().to_string(), "0,2-3");
    }
}
