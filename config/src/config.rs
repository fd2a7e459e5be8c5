//! The whole file: [`Config`], its defaults, and reading it from TOML text with
//! command-line overrides applied.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::control::ControlSection;
use crate::daemon::{CoresSection, DaemonSection, EalSection};
use crate::device::Device;
use crate::error::ConfigError;
use crate::extras::{CaptureSection, LoadgenSection};
use crate::limits::{IpSection, LimitsSection};
use crate::mpa::MpaSection;
use crate::overrides::Override;
use crate::port::PortSection;
use crate::tcp::TcpSection;

/// Largest configuration file read (a sanity bound: real files are a few KiB).
pub const FILE_LEN_MAX: u64 = 1 << 20;

/// Everything one iwarpd reads at start-up. `Config::default()` runs on a machine
/// without a NIC: one dataplane core (the last CPU), one memif server port.
///
/// Build one with [`Config::load`] or [`Config::from_toml_str`] (then
/// [`Config::validate`]), or all at once with [`Config::build`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[daemon]`: name, logging, statistics, shutdown.
    pub daemon: DaemonSection,
    /// `[eal]`: DPDK environment, hugepages.
    pub eal: EalSection,
    /// `[cores]`: dataplane and control CPUs, QP placement.
    pub cores: CoresSection,
    /// `[[port]]`: one entry per port (at least one).
    #[serde(rename = "port")]
    pub ports: Vec<PortSection>,
    /// `[limits]`: bounds of each engine.
    pub limits: LimitsSection,
    /// `[ip]`: IPv4 and ARP.
    pub ip: IpSection,
    /// `[mpa]`: MPA parameters.
    pub mpa: MpaSection,
    /// `[tcp]`: TCP tunables.
    pub tcp: TcpSection,
    /// `[capture]`: pcap capture.
    pub capture: CaptureSection,
    /// `[loadgen]`: load generator server.
    pub loadgen: LoadgenSection,
    /// `[control]`: the verbs socket for applications.
    pub control: ControlSection,
}

impl Default for Config {
    fn default() -> Config {
        let daemon = DaemonSection::default();
        let ports = vec![PortSection::new(Device::default_memif(&daemon.name))];
        Config {
            daemon,
            eal: EalSection::default(),
            cores: CoresSection::default(),
            ports,
            limits: LimitsSection::default(),
            ip: IpSection::default(),
            mpa: MpaSection::default(),
            tcp: TcpSection::default(),
            capture: CaptureSection::default(),
            loadgen: LoadgenSection::default(),
            control: ControlSection::default(),
        }
    }
}

impl Config {
    /// Parses a configuration from TOML text (no validation: call [`Config::validate`]).
    /// Absent keys take their defaults; with no `[[port]]` the daemon gets the default
    /// memif port named after `daemon.name`. Unknown keys, wrong types and syntax
    /// errors are errors naming the key (and the line).
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, &[])
    }

    /// Parses TOML text with `overrides` applied to the document before it is read, so
    /// that any key can be overridden (no validation).
    pub fn from_toml_with(text: &str, overrides: &[Override]) -> Result<Config, ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let Some(span) = e.span() else {
                return ConfigError::new("file", format!("TOML syntax: {}", e.message()));
            };
            let line = line_of(text, span.start);
            // The key (or table) written on that line, so that the error names it even
            // when the parser's message does not (a too large integer, a duplicate table).
            let field = key_at_line(text, line)
                .filter(|k| k.split('.').all(|part| !part.trim().is_empty()))
                .unwrap_or_else(|| "file".to_string());
            ConfigError::new(field, format!("TOML syntax: {}", e.message())).at_line(line)
        })?;
        let from_file = |err: ConfigError| file_line(text, err);
        crate::keys::check_known(&table).map_err(from_file)?;
        for o in overrides {
            o.apply(&mut table)?;
        }
        crate::keys::check_known(&table)?;
        let has_ports = table.contains_key("port");
        let mut cfg = deserialize(&table).map_err(|e| {
            if overrides.iter().any(|o| e.field.starts_with(&o.field())) {
                e
            } else {
                from_file(e)
            }
        })?;
        if !has_ports {
            cfg.ports = vec![PortSection::new(Device::default_memif(&cfg.daemon.name))];
        }
        Ok(cfg)
    }

    /// Reads and parses the file at `path` (no validation).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::from_toml_with(&read_file(path)?, &[])
    }

    /// What `iwarpd` does at start-up: the file at `path` (or the defaults), then
    /// `overrides` in order, then [`Config::validate`].
    pub fn build(path: Option<&Path>, overrides: &[Override]) -> Result<Config, ConfigError> {
        let text = match path {
            Some(p) => read_file(p)?,
            None => String::new(),
        };
        let cfg = Config::from_toml_with(&text, overrides)?;
        cfg.validate().map_err(|e| {
            if overrides.iter().any(|o| e.field.starts_with(&o.field())) {
                e
            } else {
                file_line(&text, e)
            }
        })?;
        Ok(cfg)
    }

    /// The EAL arguments after iwarpd's own: `eal.extra_args`, then the flags the ports
    /// need and the operator did not give: `--single-file-segments` for a memif client
    /// in zero-copy mode.
    pub fn eal_extra_args(&self) -> Vec<String> {
        const SINGLE_FILE_SEGMENTS: &str = "--single-file-segments";
        let mut args = self.eal.extra_args.clone();
        if self.ports.iter().any(|p| p.device.memif_zero_copy())
            && !args.iter().any(|a| a == SINGLE_FILE_SEGMENTS)
        {
            args.push(SINGLE_FILE_SEGMENTS.to_string());
        }
        args
    }

    /// The configuration as a TOML document (`print-config`); [`Config::from_toml_str`]
    /// reads it back to an equal `Config`. Optional keys that are unset are left out.
    pub fn to_toml_string(&self) -> Result<String, ConfigError> {
        toml::to_string(self)
            .map_err(|e| ConfigError::new("file", format!("cannot write TOML: {e}")))
    }
}

/// Reads a configuration file, bounded in size.
fn read_file(path: &Path) -> Result<String, ConfigError> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| ConfigError::new("file", format!("{shown}: {e}")))?;
    if !meta.is_file() {
        return Err(ConfigError::new(
            "file",
            format!("{shown}: not a regular file"),
        ));
    }
    if meta.len() > FILE_LEN_MAX {
        return Err(ConfigError::new(
            "file",
            format!("{shown}: larger than {FILE_LEN_MAX} bytes"),
        ));
    }
    std::fs::read_to_string(path).map_err(|e| ConfigError::new("file", format!("{shown}: {e}")))
}

/// 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Adds the line of the file that sets the error's key, when it can be found.
fn file_line(text: &str, err: ConfigError) -> ConfigError {
    match (err.line, locate_line(text, &err.field)) {
        (None, Some(line)) => err.at_line(line),
        _ => err,
    }
}

/// The 1-based line where `field` (`port[1].mtu`, `tcp.sack`, `cores.dataplane[0]`) is
/// set in `text`, for files written with `[section]` / `[[port]]` headers and `key =`
/// lines (the way the examples are). A section name alone finds its header.
/// The key written on 1-based line `line` of `text`, named as errors name keys
/// (`port[0].mtu`, `daemon.name`), or the table a header line opens (`daemon`,
/// `port[1]`). `None` if the line holds neither.
pub(crate) fn key_at_line(text: &str, line: usize) -> Option<String> {
    let mut table: Option<String> = None;
    let mut entries: Vec<(String, usize)> = Vec::new();
    for (n, raw) in text.lines().enumerate().take(line) {
        let t = raw.split('#').next().unwrap_or_default().trim();
        let here = n + 1 == line;
        if t.starts_with('[') {
            let name = t
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .to_string();
            table = Some(if t.starts_with("[[") {
                let i = match entries.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, c)) => {
                        *c += 1;
                        *c - 1
                    }
                    None => {
                        entries.push((name.clone(), 1));
                        0
                    }
                };
                format!("{name}[{i}]")
            } else {
                name
            });
            if here {
                return table;
            }
            continue;
        }
        if here {
            let (lhs, _) = t.split_once('=')?;
            let key = lhs.trim().trim_matches('"');
            if key.is_empty() {
                return None;
            }
            return Some(match &table {
                Some(tb) => format!("{tb}.{key}"),
                None => key.to_string(),
            });
        }
    }
    None
}

pub(crate) fn locate_line(text: &str, field: &str) -> Option<usize> {
    let (section, key) = match field.split_once('.') {
        Some((s, k)) => (s, Some(k)),
        None => (field, None),
    };
    let (section, index) = match section.split_once('[') {
        Some((s, i)) => (s, i.trim_end_matches(']').parse::<usize>().ok()),
        None => (section, None),
    };
    let key = key.map(|k| k.split(['[', '.']).next().unwrap_or(k));
    let mut in_section = false;
    let mut seen_entries = 0usize;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t.split('#').next().unwrap_or(t).trim();
            let name = header.trim_start_matches('[').trim_end_matches(']').trim();
            let matches = name == section;
            in_section = if header.starts_with("[[") && matches {
                seen_entries += 1;
                index.is_none_or(|i| i + 1 == seen_entries)
            } else {
                matches
            };
            if in_section && key.is_none() {
                return Some(n + 1);
            }
            continue;
        }
        if let (true, Some(key)) = (in_section, key) {
            let lhs = t
                .split('=')
                .next()
                .unwrap_or_default()
                .trim()
                .trim_matches('"');
            if t.contains('=') && lhs == key {
                return Some(n + 1);
            }
        }
    }
    None
}

/// Splits serde's `message\nin `path`` into the message and the path.
fn split_path(e: &toml::de::Error) -> (String, Option<String>) {
    let text = e.to_string();
    let text = text.trim_end();
    match text.rsplit_once("\nin `") {
        Some((msg, path)) => (
            msg.trim().to_string(),
            Some(path.trim_end_matches('`').to_string()),
        ),
        None => (text.to_string(), None),
    }
}

/// Deserialises the document section by section so that an error names its key with
/// its index (`port[1].mtu`), which serde's own path does not.
fn deserialize(table: &toml::Table) -> Result<Config, ConfigError> {
    fn section<T: serde::de::DeserializeOwned>(
        name: &str,
        v: &toml::Value,
    ) -> Result<T, ConfigError> {
        v.clone().try_into::<T>().map_err(|e| {
            let (msg, path) = split_path(&e);
            // serde names a missing key only in its message.
            let missing = msg
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next())
                .map(str::to_string);
            let field = match path.or(missing) {
                Some(p) if !p.is_empty() => format!("{name}.{p}"),
                _ => name.to_string(),
            };
            ConfigError::new(field, msg)
        })
    }
    let mut cfg = Config::default();
    for (key, value) in table {
        match key.as_str() {
            "daemon" => cfg.daemon = section("daemon", value)?,
            "eal" => cfg.eal = section("eal", value)?,
            "cores" => cfg.cores = section("cores", value)?,
            "limits" => cfg.limits = section("limits", value)?,
            "ip" => cfg.ip = section("ip", value)?,
            "mpa" => cfg.mpa = section("mpa", value)?,
            "tcp" => cfg.tcp = section("tcp", value)?,
            "capture" => cfg.capture = section("capture", value)?,
            "loadgen" => cfg.loadgen = section("loadgen", value)?,
            "control" => cfg.control = section("control", value)?,
            "port" => {
                let entries = value.as_array().ok_or_else(|| {
                    ConfigError::new("port", "must be an array of tables, written [[port]]")
                })?;
                cfg.ports = entries
                    .iter()
                    .enumerate()
                    .map(|(i, v)| section(&format!("port[{i}]"), v))
                    .collect::<Result<_, _>>()?;
            }
            other => {
                return Err(ConfigError::new(other, "unknown section"));
            }
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn empty_text_is_the_default() {
        let c = Config::from_toml_str("").unwrap();
        assert_eq!(c, Config::default());
        c.validate().unwrap();
    }

    #[test]
    fn default_port_follows_the_name() {
        let c = Config::from_toml_str("[daemon]\nname = \"beta\"\n").unwrap();
        assert_eq!(c.ports.len(), 1);
        assert_eq!(c.ports[0].device, Device::default_memif("beta"));
    }

    #[test]
    fn partial_port_takes_defaults() {
        let c = Config::from_toml_str("[[port]]\ndevice = \"net_ring0\"\nipv4 = \"198.18.1.1\"\n")
            .unwrap();
        assert_eq!(c.ports[0].ipv4, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(c.ports[0].mtu, 1500);
        c.validate().unwrap();
    }

    #[test]
    fn type_errors_name_the_key_and_line() {
        let text = "[daemon]\nname = \"a\"\n\n[[port]]\ndevice = \"net_ring0\"\n[[port]]\ndevice = \"net_ring1\"\nmtu = \"big\"\n";
        let e = Config::from_toml_str(text).unwrap_err();
        assert_eq!(e.field, "port[1].mtu");
        assert_eq!(e.line, Some(8), "{e}");
        let e = Config::from_toml_str("[tcp]\nsack = 1\n").unwrap_err();
        assert_eq!(e.field, "tcp.sack");
        assert_eq!(e.line, Some(2));
        let e = Config::from_toml_str("[[port]]\ndevice = \"net_bogus0\"\n").unwrap_err();
        assert_eq!(e.field, "port[0].device");
        assert!(e.message.contains("unknown vdev driver"), "{e}");
        let e = Config::from_toml_str("[[port]]\nipv4 = \"1.2.3.4\"\n").unwrap_err();
        assert_eq!(e.field, "port[0].device");
        assert!(e.message.contains("missing"), "{e}");
        let e = Config::from_toml_str("[[port]]\ndevice = \"net_ring0\"\nipv4 = \"1.2.3\"\n")
            .unwrap_err();
        assert_eq!(e.field, "port[0].ipv4");
        let e = Config::from_toml_str("[limits]\nmax_qps = -1\n").unwrap_err();
        assert_eq!(e.field, "limits.max_qps");
        let e = Config::from_toml_str("port = 3\n").unwrap_err();
        assert_eq!(e.field, "port");
    }

    #[test]
    fn keys_are_located_in_the_text() {
        let text = "[daemon]\nname = \"a\"\n[[port]] # first\ndevice = \"net_ring0\"\n\n[[port]]\ndevice = \"net_ring1\"\nmtu = 1\n[cores]\ndataplane = [1]\n";
        assert_eq!(locate_line(text, "daemon.name"), Some(2));
        assert_eq!(locate_line(text, "port[0].device"), Some(4));
        assert_eq!(locate_line(text, "port[1].device"), Some(7));
        assert_eq!(locate_line(text, "port[1].mtu"), Some(8));
        assert_eq!(locate_line(text, "port[1]"), Some(6));
        assert_eq!(locate_line(text, "port[0].mtu"), None);
        assert_eq!(locate_line(text, "cores.dataplane"), Some(10));
        assert_eq!(locate_line(text, "cores"), Some(9));
        assert_eq!(locate_line(text, "tcp.sack"), None);
        assert_eq!(locate_line("", "file"), None);
    }

    #[test]
    fn validation_errors_give_the_line_of_the_file() {
        let dir = std::env::temp_dir().join(format!("iwarp-config-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.toml");
        std::fs::write(&p, "[[port]]\ndevice = \"net_ring0\"\nmtu = 9001\n").unwrap();
        let e = Config::build(Some(&p), &[]).unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("port[0].mtu", Some(3)));
        let o = Override::parse("port.0.mtu=9002").unwrap();
        let e = Config::build(Some(&p), &[o]).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.line),
            ("port[0].mtu", None),
            "from the override"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn syntax_errors_name_the_key_of_their_line() {
        // Issue 17 item 7: both named only `file` before.
        let e = Config::from_toml_str(
            "[daemon]\nname = \"a\"\n[[port]]\ndevice = \"net_ring0\"\n[[port]]\ndevice = \"net_ring1\"\nmtu = 99999999999999999999999\n",
        )
        .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("port[1].mtu", Some(7)), "{e}");
        let e = Config::from_toml_str("[daemon]\nname = \"a\"\n\n[daemon]\nname = \"b\"\n")
            .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("daemon", Some(4)), "{e}");
        assert!(e.to_string().contains("duplicate"), "{e}");
        let e = Config::from_toml_str("x = 99999999999999999999999\n").unwrap_err();
        assert_eq!(e.field, "x", "{e}");
        assert_eq!(key_at_line("a = 1\n", 2), None);
        // A broken header or key has no name to give: `file`.
        let e = Config::from_toml_str("[]\nx = 1\n").unwrap_err();
        assert_eq!(e.field, "file", "{e}");
    }

    #[test]
    fn log_format_is_text_or_json() {
        assert_eq!(Config::default().daemon.log_format, crate::LogFormat::Text);
        let c = Config::from_toml_str("[daemon]\nlog_format = \"json\"\n").unwrap();
        assert_eq!(c.daemon.log_format, crate::LogFormat::Json);
        let e = Config::from_toml_str("[daemon]\nlog_format = \"xml\"\n").unwrap_err();
        assert_eq!(e.field, "daemon.log_format", "{e}");
        assert!(e.to_string().contains("xml"), "{e}");
    }

    #[test]
    fn syntax_errors_give_the_line() {
        let e = Config::from_toml_str("[daemon]\nname = \"a\"\nlog_level = \n").unwrap_err();
        assert_eq!(e.field, "daemon.log_level");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e
            .to_string()
            .starts_with("config error: daemon.log_level: TOML syntax"));
    }

    #[test]
    fn zero_copy_memif_brings_single_file_segments_once() {
        let mut c = Config::default();
        assert!(c.eal_extra_args().is_empty());
        c.eal.extra_args = vec!["--log-level=8".into()];
        c.ports.push(PortSection::new(
            "net_memif1,role=client,zero-copy=yes".parse().unwrap(),
        ));
        assert_eq!(
            c.eal_extra_args(),
            ["--log-level=8", "--single-file-segments"]
        );
        c.eal.extra_args = vec!["--single-file-segments".into()];
        assert_eq!(c.eal_extra_args(), ["--single-file-segments"]);
    }

    #[test]
    fn print_config_round_trips() {
        let mut c = Config::default();
        c.daemon.name = "rt".into();
        c.ports[0].gateway = Some(Ipv4Addr::new(198, 18, 0, 254));
        c.ports[0].mac = Some("02:00:00:00:00:09".parse().unwrap());
        c.ports
            .push(PortSection::new("net_tap0,iface=t0".parse().unwrap()));
        c.cores.dataplane = vec![1];
        c.tcp.isn_secret = Some("000102030405060708090a0b0c0d0e0f".parse().unwrap());
        c.limits.stag_seed = Some("0123456789abcdef".parse().unwrap());
        c.eal.extra_args = vec!["--log-level=8".into()];
        c.capture.path = "/tmp/x.pcap".into();
        let text = c.to_toml_string().unwrap();
        let back = Config::from_toml_str(&text).unwrap();
        assert_eq!(back, c, "{text}");
        let default_text = Config::default().to_toml_string().unwrap();
        assert_eq!(
            Config::from_toml_str(&default_text).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn files_are_read_and_bounded() {
        let dir = std::env::temp_dir().join(format!("iwarp-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.toml");
        std::fs::write(&p, "[daemon]\nname = \"filed\"\n").unwrap();
        assert_eq!(Config::load(&p).unwrap().daemon.name, "filed");
        let e = Config::load(&dir.join("missing.toml")).unwrap_err();
        assert_eq!(e.field, "file");
        assert!(e.message.contains("missing.toml"));
        assert_eq!(Config::load(&dir).unwrap_err().field, "file");
        let big = dir.join("big.toml");
        std::fs::write(&big, vec![b'#'; FILE_LEN_MAX as usize + 1]).unwrap();
        assert!(Config::load(&big).unwrap_err().message.contains("larger"));
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[ip]\nttl = 0\n").unwrap();
        assert!(Config::load(&bad).is_ok());
        assert_eq!(Config::build(Some(&bad), &[]).unwrap_err().field, "ip.ttl");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
