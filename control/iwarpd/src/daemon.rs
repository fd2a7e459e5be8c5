//! The daemon: EAL, ports, one `Core` per dataplane lcore, and the control thread that
//! serves the stats socket, starts the load generator and runs the shutdown.
//!
//! [`run`] is the life of a daemon in four steps: [`start::Checked`] (everything the
//! configuration asks of this host, before DPDK starts), [`Daemon::start`] in
//! `start.rs` (EAL, ports, cores, the apps on them, the control thread, the observers),
//! [`Daemon::serve`] (the control loop, until a signal, a core's end or the load
//! generator's), [`Daemon::stop`] in `stop.rs` (the orderly shutdown and final report).

mod host;
mod render;
mod start;
mod stop;
mod watch;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use iwarp_config::{Config, LoadgenArgs};
use iwarp_dpdk::Eal;
use iwarp_loadgen::ClientSpec;
use iwarp_runtime::{CoreStats, Snapshot};
use iwarp_shm_mem::ShmMemory;
use iwarp_types::RegionId;
use tracing::info;

use crate::apps::Shared;
use crate::capture::DaemonCapture;
use crate::link::{LinkWatch, Links};
use crate::loadgen::ClientRun;
use crate::lock::InstanceLock;
use crate::metrics::MetricsServer;
use crate::ports::OpenPort;
use crate::stats::StatsServer;

pub use host::host_checks;

/// Arena of the load generator server in each core's memory.
const SERVER_ARENA: RegionId = RegionId(0);
/// Arena of the load generator client in each core's memory.
pub const CLIENT_ARENA: RegionId = RegionId(1);
/// Target buffers of a load generator server per core.
const SERVER_BUFFERS: u32 = 64;
/// Bytes of one core's slice of a heap arena (page aligned, at least one page).
fn slice_bytes(len: u64) -> u64 {
    len.max(1).next_multiple_of(4096)
}

/// Offset of core `core`'s load generator client arena in [`CLIENT_ARENA`].
pub fn client_arena_offset(per_core: &[ClientSpec], core: usize) -> u64 {
    per_core[..core]
        .iter()
        .map(|s| slice_bytes(s.required_arena_bytes()))
        .sum()
}

/// How long a port may take to come up before the load generator gives up.
const LINK_WAIT: StdDuration = StdDuration::from_secs(15);

/// The control loop's pause between two rounds.
const CONTROL_ROUND: StdDuration = StdDuration::from_millis(5);

/// Why the daemon stopped with a failure (its message is printed once, as is).
#[derive(Debug)]
pub struct Failure {
    /// The message.
    pub message: String,
    /// The exit status.
    pub code: u8,
}

fn fail(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: 1,
    }
}

/// Per core, what the control thread keeps.
struct CoreHandle {
    lcore: u32,
    control: iwarp_runtime::ControlHandle<ShmMemory>,
    stats: Arc<CoreStats>,
    result: Arc<Mutex<Option<Result<Snapshot, String>>>>,
}

/// A running daemon: what the control loop serves and the shutdown takes apart.
struct Daemon {
    cfg: Config,
    /// The signal that asks for the orderly shutdown (0: none yet).
    signal: Arc<AtomicUsize>,
    /// Set once the control thread has torn its clients down: the cores stop.
    core_stop: Arc<AtomicBool>,
    /// Asks the control thread to tear its clients down.
    control_stop: Arc<AtomicBool>,
    control_thread: Option<JoinHandle<()>>,
    links: Arc<Links>,
    link_watch: LinkWatch,
    capture: DaemonCapture,
    capture_watch: watch::CaptureWatch,
    /// Per core, the load generator server's results.
    servers: Vec<Shared>,
    client: Option<ClientRun>,
    stats_server: Option<StatsServer>,
    metrics_server: Option<MetricsServer>,
    service: crate::notify::Service,
    cores: Vec<CoreHandle>,
    ports: Vec<OpenPort>,
    eal: Eal,
    /// Held until the very end: one daemon per name.
    lock: InstanceLock,
}

/// Runs the daemon until a signal (or, with `loadgen`, until the run is over).
pub fn run(cfg: Config, loadgen: Option<LoadgenArgs>) -> Result<(), Failure> {
    let checked = start::Checked::new(&cfg, loadgen.as_ref())?;
    let mut daemon = Daemon::start(cfg, loadgen, checked)?;
    let outcome = daemon.serve();
    daemon.stop(outcome)
}

impl Daemon {
    /// The control loop: link state, capture drops, the stats socket, the cores' health,
    /// the load generator's client, the periodic counters; until a stop signal, a core's
    /// end or the end of the load generator's run.
    fn serve(&mut self) -> Result<(), Failure> {
        let mut last_print = StdInstant::now();
        let started = StdInstant::now();
        let rss_start = crate::loadgen::rss_bytes();
        loop {
            let sig = self.signal.load(Ordering::Relaxed);
            if sig != 0 {
                info!("stopping on {}", host::signal_name(sig));
                return Ok(());
            }
            let ports = &self.ports;
            self.link_watch.poll(&self.links, &mut |i| {
                let l = ports[i].port.link();
                (l.up, l.speed_mbps)
            });
            if self.capture.rings().enabled() {
                self.capture_watch.poll(&self.cores);
            }
            if let Some(s) = &self.stats_server {
                s.serve(&mut |json| render::stats(&self.cores, &self.servers, &self.links, json));
            }
            if let Some(gone) = self
                .cores
                .iter()
                .position(|c| c.result.lock().map(|r| r.is_some()).unwrap_or(true))
            {
                let msg = match self.cores[gone].result.lock().ok().and_then(|r| r.clone()) {
                    Some(Err(e)) => e,
                    _ => "stopped".to_string(),
                };
                return Err(fail(format!("dataplane core {gone} ended: {msg}")));
            }
            if let Some(run) = &mut self.client {
                let links_up = self.ports.iter().all(|p| p.port.link().up);
                let mut controls: Vec<_> = self.cores.iter_mut().map(|c| &mut c.control).collect();
                match run.step(
                    &mut controls,
                    &self.ports,
                    links_up,
                    started,
                    LINK_WAIT,
                    rss_start,
                ) {
                    Ok(true) => return run.finish(),
                    Ok(false) => {}
                    Err(e) => return Err(e),
                }
            }
            let every = self.cfg.daemon.stats_interval_ms;
            if every > 0 && last_print.elapsed() >= StdDuration::from_millis(every) {
                last_print = StdInstant::now();
                let per: Vec<Snapshot> = self.cores.iter().map(|c| c.stats.snapshot()).collect();
                info!("counters:\n{}", Snapshot::sum(per.iter()));
            }
            std::thread::sleep(CONTROL_ROUND);
        }
    }
}
