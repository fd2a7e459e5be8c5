//! iwarpd's counters in DPDK telemetry (`eal.telemetry`): `dpdk-telemetry.py -f NAME`
//! answers `/iwarp/counters` (every core and port summed), `/iwarp/core,N` (core N) and
//! `/iwarp/port,N` (port index N, summed over cores) with dicts of the same counters
//! `iwarpd stats` and the metrics endpoint show, read from the cores' published
//! snapshots on DPDK's telemetry thread.

use std::sync::Arc;

use iwarp_dpdk::telemetry::{register as register_cmd, Source};
use iwarp_runtime::{CoreStats, Snapshot};

/// The counters of a snapshot: the cores' loop counters, then every port summed.
fn values(s: &Snapshot) -> Vec<(String, u64)> {
    let mut v = vec![("cores".to_string(), s.cores)];
    s.core.for_each(|n, x| v.push((n.to_string(), x)));
    s.total().for_each(|p, n, x| v.push((format!("{p}{n}"), x)));
    v
}

/// The index in a command's parameter, below `n`.
fn index(param: Option<&str>, n: usize, what: &str) -> Result<usize, String> {
    let p = param.ok_or_else(|| format!("{what} index missing (/iwarp/{what},N)"))?;
    match p.trim().parse::<usize>() {
        Ok(i) if i < n => Ok(i),
        _ => Err(format!("{what} {p}: not in 0..{n}")),
    }
}

/// Registers the `/iwarp/...` commands. Errors name the command.
pub fn register(cores: Vec<Arc<CoreStats>>, port_ids: Vec<u16>) -> Result<(), String> {
    let cores = Arc::new(cores);
    let all: Source = {
        let cores = Arc::clone(&cores);
        Arc::new(move |_| {
            let snaps: Vec<Snapshot> = cores.iter().map(|c| c.snapshot()).collect();
            Ok(values(&Snapshot::sum(snaps.iter())))
        })
    };
    let core: Source = {
        let cores = Arc::clone(&cores);
        Arc::new(move |param| {
            let i = index(param, cores.len(), "core")?;
            Ok(values(&cores[i].snapshot()))
        })
    };
    let port: Source = {
        let cores = Arc::clone(&cores);
        Arc::new(move |param| {
            let i = index(param, port_ids.len(), "port")?;
            let snaps: Vec<Snapshot> = cores.iter().map(|c| c.snapshot()).collect();
            let sum = Snapshot::sum(snaps.iter());
            let mut v = Vec::new();
            if let Some(c) = sum.port(port_ids[i]) {
                c.for_each(|p, n, x| v.push((format!("{p}{n}"), x)));
            }
            Ok(v)
        })
    };
    for (cmd, help, source) in [
        (
            "/iwarp/counters",
            "iwarpd counters, every core and port summed. No parameters.",
            all,
        ),
        (
            "/iwarp/core",
            "iwarpd counters of one dataplane core. Parameter: the core index.",
            core,
        ),
        (
            "/iwarp/port",
            "iwarpd counters of one port, summed over cores. Parameter: the port index.",
            port,
        ),
    ] {
        register_cmd(cmd, help, source).map_err(|e| format!("telemetry {cmd}: {e}"))?;
    }
    Ok(())
}
