//! The orderly shutdown of a daemon and its final report: the control thread tells its
//! clients and tears them down while the cores still run; then the cores see their flag,
//! close their QPs (FIN) within the grace period and return their final counters; the
//! capture is finished, the counters printed, the sockets and the EAL's files removed.

use std::path::Path;
use std::sync::atomic::Ordering;

use iwarp_runtime::Snapshot;
use tracing::{error, info, warn};

use super::{Daemon, Failure};

impl Daemon {
    /// Stops everything in order, reports, and returns `outcome` (what ended the
    /// control loop).
    pub(super) fn stop(self, outcome: Result<(), Failure>) -> Result<(), Failure> {
        let Daemon {
            cfg,
            core_stop,
            control_stop,
            control_thread,
            links,
            capture,
            mut capture_watch,
            servers,
            stats_server,
            metrics_server,
            service,
            cores,
            ports,
            eal,
            lock,
            ..
        } = self;
        service.stopping();
        control_stop.store(true, Ordering::Relaxed);
        if let Some(t) = control_thread {
            if t.join().is_err() {
                error!("the control thread panicked");
            }
        }
        core_stop.store(true, Ordering::Relaxed);
        let mut finals = Vec::with_capacity(cores.len());
        for (i, c) in cores.iter().enumerate() {
            let rc = eal.wait(c.lcore);
            match c.result.lock().ok().and_then(|mut r| r.take()) {
                Some(Ok(s)) => finals.push(s),
                Some(Err(e)) => error!("core {i}: {e}"),
                None => error!("core {i} returned {rc} without a result"),
            }
        }
        let drops: u64 = finals.iter().map(|s| s.core.capture_drops).sum();
        capture_watch.report(drops);
        match capture.stop() {
            Ok(Some(s)) => info!(
                frames = s.frames,
                capture_drops = drops,
                "capture: {} frame(s) written, {drops} not captured (ring full)",
                s.frames
            ),
            Ok(None) => {}
            Err(e) => error!("capture: {e}"),
        }
        let total = Snapshot::sum(finals.iter());
        eprintln!("{total}");
        eprint!("{}", links.render());
        for (i, p) in ports.iter().enumerate() {
            if let Ok(s) = p.port.stats() {
                info!(
                    "port {i}: ipackets {} opackets {} ibytes {} obytes {} imissed {} ierrors {} oerrors {} rx_nombuf {}, mbufs in use {}",
                    s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors, s.rx_nombuf,
                    p.pool.in_use()
                );
            }
        }
        for s in &servers {
            if let Ok(r) = s.lock() {
                if let Some(rep) = &r.server {
                    info!("load generator server:\n{rep}");
                }
            }
        }
        drop(stats_server);
        drop(metrics_server);
        drop(cores);
        drop(ports);
        drop(eal);
        remove_eal_runtime_dir(&cfg.daemon.name);
        // memif socket files (socket-abstract=no) the closed ports left; the stats and
        // verbs sockets are gone already (their owners removed them).
        for (path, key) in super::host::owned_sockets(&cfg) {
            if let Err(e) = crate::lock::remove_stale_socket(Path::new(&path), &key) {
                warn!("{e}");
            }
        }
        drop(lock);
        outcome
    }
}

/// What the EAL leaves in its runtime directory (`/var/run/dpdk/<file prefix>`, the
/// prefix being the daemon's name): the telemetry socket. Removed at an orderly exit, the
/// directory too once empty (a killed daemon leaves them; the next start reuses them).
fn remove_eal_runtime_dir(name: &str) {
    let dir = std::path::Path::new("/var/run/dpdk").join(name);
    let _ = std::fs::remove_file(dir.join("dpdk_telemetry.v2"));
    let _ = std::fs::remove_dir(&dir);
}
