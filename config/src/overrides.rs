//! Command-line overrides: `--set key=value` edits the TOML document before it is read,
//! so every key of the file can be overridden.
//!
//! Keys are dotted paths with array indices either way: `port.0.mtu` or `port[0].mtu`.
//! Values are TOML literals (`9000`, `true`, `[0, 1]`, `"x"`); anything that is not a
//! TOML literal is taken as a string, so `port.0.ipv4=198.18.0.2` and
//! `port.0.device=net_memif0,role=client,socket=/run/x` need no quotes. Index `n` of an
//! array with `n` entries appends one (`port.1.device=...` adds a second port).

use core::fmt;

use crate::device::Device;
use crate::error::ConfigError;
use crate::port::PortSection;

/// Most path segments of a key.
const DEPTH_MAX: usize = 8;
/// Largest array index an override may name.
const INDEX_MAX: usize = 1024;

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// One `key=value` override.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    path: Vec<Segment>,
    value: toml::Value,
    /// The value as written, for keys that hold strings.
    raw: Option<String>,
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.field(), self.value)
    }
}

impl Override {
    /// Parses `key=value`.
    pub fn parse(s: &str) -> Result<Override, ConfigError> {
        let (key, raw) = s
            .split_once('=')
            .ok_or_else(|| ConfigError::new(s, "an override is key=value, e.g. port.0.mtu=9000"))?;
        let path = parse_path(key.trim())?;
        let raw = raw.trim();
        let value = parse_value(raw);
        Ok(Override {
            path,
            value,
            raw: Some(raw.to_string()),
        })
    }

    /// An override of `key` (dotted path) with a typed value.
    pub fn new(key: &str, value: impl Into<toml::Value>) -> Result<Override, ConfigError> {
        Ok(Override {
            path: parse_path(key)?,
            value: value.into(),
            raw: None,
        })
    }

    /// The key in the form errors use: `port[0].mtu`.
    pub fn field(&self) -> String {
        format_path(&self.path)
    }

    /// Applies the override to a TOML document.
    pub fn apply(&self, doc: &mut toml::Table) -> Result<(), ConfigError> {
        let field = self.field();
        let err = |msg: String| ConfigError::new(field.clone(), msg);
        if matches!(self.path.first(), Some(Segment::Key(k)) if k == "port")
            && !doc.contains_key("port")
        {
            // The default port becomes explicit so that `port.0.mtu=...` edits it.
            doc.insert("port".to_string(), default_ports(doc));
        }
        let (last, parents) = self
            .path
            .split_last()
            .ok_or_else(|| err("empty key".into()))?;
        let mut cur = TargetMut::Table(doc);
        for (i, seg) in parents.iter().enumerate() {
            let next_is_index = matches!(self.path[i + 1], Segment::Index(_));
            let fresh = || {
                if next_is_index {
                    toml::Value::Array(Vec::new())
                } else {
                    toml::Value::Table(toml::Table::new())
                }
            };
            let child = match (cur, seg) {
                (TargetMut::Table(t), Segment::Key(k)) => t.entry(k.clone()).or_insert_with(fresh),
                (TargetMut::Array(a), Segment::Index(n)) => {
                    if *n == a.len() {
                        a.push(fresh());
                    }
                    let len = a.len();
                    a.get_mut(*n)
                        .ok_or_else(|| err(format!("index {n} is out of range (the array has {len} entries; {len} appends one)")))?
                }
                (_, seg) => {
                    return Err(err(format!(
                        "`{}` does not fit here",
                        format_path(std::slice::from_ref(seg))
                    )))
                }
            };
            cur = match child {
                toml::Value::Table(t) => TargetMut::Table(t),
                toml::Value::Array(a) => TargetMut::Array(a),
                _ => {
                    return Err(err(format!(
                        "`{}` is not a table or an array",
                        format_path(&self.path[..=i])
                    )))
                }
            };
        }
        match (cur, last) {
            (TargetMut::Table(t), Segment::Key(k)) => {
                let value = self.coerce(t.get(k), &field);
                t.insert(k.clone(), value);
            }
            (TargetMut::Array(a), Segment::Index(n)) => {
                let value = self.coerce(a.get(*n), &field);
                if *n == a.len() {
                    a.push(value);
                } else {
                    let len = a.len();
                    *a.get_mut(*n).ok_or_else(|| {
                        err(format!("index {n} is out of range ({len} entries)"))
                    })? = value;
                }
            }
            _ => return Err(err("the key does not match the document's shape".into())),
        }
        Ok(())
    }

    /// Keys that hold strings get the raw text, whatever it looks like (`name=123`).
    fn coerce(&self, existing: Option<&toml::Value>, field: &str) -> toml::Value {
        let wants_string = match existing {
            Some(v) => v.is_str(),
            None => crate::keys::holds_string(field),
        };
        match (&self.raw, wants_string, &self.value) {
            (Some(raw), true, v) if !v.is_str() => toml::Value::String(raw.clone()),
            _ => self.value.clone(),
        }
    }
}

enum TargetMut<'a> {
    Table(&'a mut toml::Table),
    Array(&'a mut Vec<toml::Value>),
}

/// The default `[[port]]` for the document's current daemon name.
fn default_ports(doc: &toml::Table) -> toml::Value {
    let name = doc
        .get("daemon")
        .and_then(|d| d.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("iwarpd");
    let port = PortSection::new(Device::default_memif(name));
    match toml::Value::try_from(&port) {
        Ok(v) => toml::Value::Array(vec![v]),
        Err(_) => toml::Value::Array(Vec::new()),
    }
}

fn parse_path(key: &str) -> Result<Vec<Segment>, ConfigError> {
    let err = |msg: &str| ConfigError::new(key, msg.to_string());
    if key.is_empty() {
        return Err(err("empty key"));
    }
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() && rest.is_empty() {
            return Err(err("empty segment in the key"));
        }
        if !name.is_empty() {
            if name.bytes().all(|c| c.is_ascii_digit()) {
                out.push(Segment::Index(
                    parse_index(name).ok_or_else(|| err("index too large"))?,
                ));
            } else if name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
            {
                out.push(Segment::Key(name.to_string()));
            } else {
                return Err(err("a key holds only letters, digits, `_` and `-`"));
            }
        }
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(|| err("`[` without `]`"))?;
            let n = parse_index(&rest[1..close]).ok_or_else(|| err("bad array index"))?;
            out.push(Segment::Index(n));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(err("text after `]`"));
            }
        }
    }
    if out.len() > DEPTH_MAX {
        return Err(err("key too deep"));
    }
    if matches!(out.first(), Some(Segment::Index(_))) {
        return Err(err("a key starts with a section name"));
    }
    Ok(out)
}

fn parse_index(s: &str) -> Option<usize> {
    s.parse::<usize>().ok().filter(|n| *n <= INDEX_MAX)
}

/// `port[0].mtu` from segments.
pub(crate) fn format_path(path: &[Segment]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(n) => out.push_str(&format!("[{n}]")),
        }
    }
    out
}

/// A TOML literal if `raw` is one, else the string `raw`.
fn parse_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use core::net::Ipv4Addr;

    fn cfg(text: &str, sets: &[&str]) -> Result<Config, ConfigError> {
        let o: Vec<Override> = sets
            .iter()
            .map(|s| Override::parse(s))
            .collect::<Result<_, _>>()?;
        Config::from_toml_with(text, &o)
    }

    #[test]
    fn paths_and_values() {
        let o = Override::parse("port[0].mtu=9000").unwrap();
        assert_eq!(o.field(), "port[0].mtu");
        assert_eq!(o.value, toml::Value::Integer(9000));
        assert_eq!(Override::parse("port.0.mtu = 9000").unwrap(), o);
        assert_eq!(o.to_string(), "port[0].mtu=9000");
        assert_eq!(
            parse_value("[0, 1]"),
            toml::Value::Array(vec![0.into(), 1.into()])
        );
        assert_eq!(
            parse_value("198.18.0.1"),
            toml::Value::String("198.18.0.1".into())
        );
        assert_eq!(parse_value("\"x y\""), toml::Value::String("x y".into()));
        for bad in [
            "mtu",
            "=3",
            "a..b=1",
            "0.a=1",
            "a[x]=1",
            "a[1=1",
            "a[1]b=1",
            "a b=1",
            "a.99999.b=1",
        ] {
            assert!(Override::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_key_can_be_overridden() {
        let c = cfg(
            "",
            &[
                "daemon.name=123",
                "port.0.mtu=1400",
                "port.0.ipv4=198.18.0.2",
                "port.0.gateway=198.18.0.254",
                "cores.dataplane=[0, 1]",
                "tcp.sack=false",
                "mpa.rtr=[\"read\"]",
                "limits.stag_seed=1234567812345678",
                "eal.extra_args.0=--log-level=8",
            ],
        )
        .unwrap();
        assert_eq!(c.daemon.name, "123");
        assert_eq!(c.ports[0].mtu, 1400);
        assert_eq!(c.ports[0].ipv4, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(c.ports[0].gateway, Some(Ipv4Addr::new(198, 18, 0, 254)));
        assert_eq!(
            c.ports[0].device,
            Device::default_memif("123"),
            "default port named after the new name"
        );
        assert_eq!(c.cores.dataplane, vec![0, 1]);
        assert!(!c.tcp.sack);
        assert_eq!(c.limits.stag_seed.unwrap().0, 0x1234_5678_1234_5678);
        assert_eq!(c.eal.extra_args, vec!["--log-level=8".to_string()]);
        c.validate().unwrap();
    }

    #[test]
    fn overrides_edit_the_file_and_append_ports() {
        let text = "[[port]]\ndevice = \"net_ring0\"\nmtu = 1500\n";
        let c = cfg(
            text,
            &[
                "port[0].mtu=9000",
                "port.1.device=net_memif0,role=client,socket=/run/x",
                "port.1.ipv4=198.18.1.1",
            ],
        )
        .unwrap();
        assert_eq!(c.ports.len(), 2);
        assert_eq!(c.ports[0].mtu, 9000);
        assert_eq!(
            c.ports[1].device.to_string(),
            "net_memif0,role=client,socket=/run/x"
        );
        assert_eq!(c.ports[1].ipv4, Ipv4Addr::new(198, 18, 1, 1));
    }

    #[test]
    fn override_errors_name_the_key() {
        let e = cfg("", &["port.3.mtu=1"]).unwrap_err();
        assert_eq!(e.field, "port[3].mtu");
        assert!(e.message.contains("out of range"), "{e}");
        let e = cfg("", &["port.0.mtuu=1"]).unwrap_err();
        assert_eq!(e.field, "port[0].mtuu");
        assert!(e.message.contains("did you mean `mtu`"), "{e}");
        let e = cfg("", &["tcp.sack=maybe"]).unwrap_err();
        assert_eq!(e.field, "tcp.sack");
        assert_eq!(e.line, None, "no line for an override");
        let e = cfg("", &["daemon.name.x=1"]).unwrap_err();
        assert_eq!(e.field, "daemon.name");
        let e = cfg("[daemon]\nname = \"a\"\n", &["daemon.name.x=1"]).unwrap_err();
        assert_eq!(e.field, "daemon.name.x");
        let e = cfg("", &["bogus.x=1"]).unwrap_err();
        assert_eq!(e.field, "bogus");
    }

    #[test]
    fn typed_overrides() {
        let o = Override::new("port.0.mtu", 9000i64).unwrap();
        let c = Config::from_toml_with("", &[o]).unwrap();
        assert_eq!(c.ports[0].mtu, 9000);
        assert!(Override::new("", 1i64).is_err());
    }
}
