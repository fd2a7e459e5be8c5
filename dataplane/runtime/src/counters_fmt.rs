//! Renderings of a [`Snapshot`]: a readable table, `key=value` lines and JSON.

use core::fmt::{self, Write as _};

use crate::counters::{PortCounters, Snapshot};

impl Snapshot {
    /// Stable `key=value` lines: `core.<name>`, `port<id>.<name>`, `total.<name>`
    /// (drops as `drop_<reason>`), one per line, in a fixed order.
    pub fn to_kv(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "cores={}", self.cores);
        self.core.for_each(|n, v| {
            let _ = writeln!(out, "core.{n}={v}");
        });
        let mut port = |label: &str, c: &PortCounters| {
            c.for_each(|pre, n, v| {
                let _ = writeln!(out, "{label}.{pre}{n}={v}");
            });
        };
        for (id, c) in &self.ports {
            port(&format!("port{id}"), c);
        }
        port("total", &self.total());
        out
    }

    /// Every counter with its plain name: the loop counters, then the ports' summed
    /// (drops as `drop_<reason>`), in a fixed order: the rows of `iwarpctl counters`.
    pub fn named_values(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        self.core.for_each(|n, v| out.push((n.to_owned(), v)));
        self.total()
            .for_each(|pre, n, v| out.push((format!("{pre}{n}"), v)));
        out
    }

    /// JSON: `{"cores":n,"core":{...},"ports":{"<id>":{...}},"total":{...}}`.
    pub fn to_json(&self) -> String {
        fn obj(c: &PortCounters) -> String {
            let mut s = String::from("{");
            c.for_each(|pre, n, v| {
                if s.len() > 1 {
                    s.push(',');
                }
                let _ = write!(s, "\"{pre}{n}\":{v}");
            });
            s.push('}');
            s
        }
        let mut out = format!("{{\"cores\":{},\"core\":{{", self.cores);
        let mut first = true;
        self.core.for_each(|n, v| {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "\"{n}\":{v}");
        });
        out.push_str("},\"ports\":{");
        for (i, (id, c)) in self.ports.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "\"{id}\":{}", obj(c));
        }
        let _ = write!(out, "}},\"total\":{}}}", obj(&self.total()));
        out
    }
}

impl fmt::Display for Snapshot {
    /// A table: loop counters, then one row per port counter with a column per port and
    /// a total; rows that are zero everywhere are left out (drops included).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "cores: {}", self.cores)?;
        let load = if self.core.iterations > 0 {
            100.0 * self.core.busy_iterations as f64 / self.core.iterations as f64
        } else {
            0.0
        };
        writeln!(f, "load: {load:.1}% busy iterations")?;
        let mut err = Ok(());
        self.core.for_each(|n, v| {
            if err.is_ok() {
                err = writeln!(f, "  {n:<28} {v:>16}");
            }
        });
        err?;
        let total = self.total();
        write!(f, "  {:<28}", "port")?;
        for (id, _) in &self.ports {
            write!(f, " {:>16}", format!("port {id}"))?;
        }
        writeln!(f, " {:>16}", "total")?;
        // Collect rows from the total (same order for every port).
        let mut rows: Vec<(String, u64)> = Vec::new();
        total.for_each(|pre, n, v| rows.push((format!("{pre}{n}"), v)));
        let columns: Vec<Vec<u64>> = self
            .ports
            .iter()
            .map(|(_, c)| {
                let mut v = Vec::new();
                c.for_each(|_, _, x| v.push(x));
                v
            })
            .collect();
        for (i, (name, t)) in rows.iter().enumerate() {
            if *t == 0 {
                continue;
            }
            write!(f, "  {name:<28}")?;
            for col in &columns {
                write!(f, " {:>16}", col.get(i).copied().unwrap_or(0))?;
            }
            writeln!(f, " {t:>16}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::CorePlain;

    fn sample() -> Snapshot {
        let mut p = PortCounters::default();
        p.c.frames_rx = 7;
        p.c.forward_drops = 1;
        p.drops[0] = 2;
        Snapshot {
            cores: 1,
            core: CorePlain {
                iterations: 4,
                busy_iterations: 1,
                ..CorePlain::default()
            },
            ports: vec![(0, p), (3, p)],
        }
    }

    #[test]
    fn named_values_are_the_loop_counters_then_the_ports_summed() {
        let s = sample();
        let v = s.named_values();
        let total = s.total();
        let get = |n: &str| v.iter().find(|(k, _)| k == n).map(|(_, x)| *x);
        assert_eq!(
            get("tcp_retransmissions"),
            Some(total.c.tcp_retransmissions)
        );
        assert_eq!(get("iterations"), Some(s.core.iterations));
        assert!(v.iter().any(|(k, _)| k == "drop_no_route"));
    }

    #[test]
    fn kv_is_stable_and_complete() {
        let kv = sample().to_kv();
        assert!(kv.starts_with("cores=1\ncore.iterations=4\n"));
        assert!(kv.contains("\nport3.frames_rx=7\n"));
        assert!(kv.contains("\ntotal.frames_rx=14\n"));
        assert!(kv.contains("\ntotal.drop_eth_malformed=4\n"));
        assert!(kv.contains("\nport0.drop_no_route=0\n"));
        assert_eq!(kv, sample().to_kv());
    }

    #[test]
    fn json_and_table() {
        let j = sample().to_json();
        assert!(j.starts_with("{\"cores\":1,\"core\":{\"iterations\":4,"));
        assert!(j.contains("\"ports\":{\"0\":{\"frames_rx\":7,"));
        assert!(j.ends_with("}}"));
        assert_eq!(j.matches('{').count(), j.matches('}').count());
        let t = sample().to_string();
        assert!(t.contains("load: 25.0%"));
        assert!(t.contains("frames_rx"));
        assert!(t.contains("drop_eth_malformed"));
        assert!(!t.contains("tcp_timeouts"), "zero rows left out");
    }
}
