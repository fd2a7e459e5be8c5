//! One dataplane core: per port an engine and a port queue, the core's memory, its apps,
//! counters and control rings, and the loop that drives them.
//!
//! One iteration ([`Core::run_once`]): receive a burst per port (the apps'
//! `before_frames` once the burst is off the device) and steer each frame
//! (handle it, forward it to its owner, or handle and copy it for ARP); frames forwarded
//! by other cores; a bounded number of control commands; due timers; the apps' `poll`;
//! engine events (to the first app that takes them; one nobody takes is counted, and a
//! connect request nobody takes is rejected); transmit until the engine has nothing, the port has no buffer or the
//! per-iteration bound is reached, then flush. Nothing here allocates, locks or makes a
//! system call per iteration (tables are sized at construction).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iwarp_engine::{ConfigError, Engine, EngineConfig};
use iwarp_types::{Duration, Instant, Memory, QpId};

use crate::app::App;
use crate::capture::CoreCapture;
use crate::clock::Clock;
use crate::control::{AppId, CoreControl};
use crate::counters::{CorePlain, CoreStats, PortCounters, Snapshot};
use crate::forward::ForwardEnds;
use crate::io::FrameIo;
use crate::steer::Steering;

/// Bounds and pacing of one core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreConfig {
    /// This core's global index (steering and forward rings use it).
    pub index: usize,
    /// Frames received per port per iteration at most.
    pub rx_burst: usize,
    /// Frames transmitted per port per iteration at most (so receive is never starved).
    pub tx_frames_max: usize,
    /// Frames taken from each inbound forward ring per iteration at most.
    pub forward_burst: usize,
    /// Control commands executed per iteration at most.
    pub commands_per_iteration: usize,
    /// Engine events handled per port per iteration at most.
    pub events_per_iteration: usize,
    /// Apps the core hosts at most.
    pub max_apps: usize,
    /// Counters are published at most this often (nanoseconds).
    pub stats_interval_ns: u64,
    /// Grace period of a shutdown requested by the stop flag (milliseconds).
    pub default_grace_ms: u64,
    /// After a forced abort at the end of the grace period, how long the loop keeps
    /// running to send the RSTs (milliseconds).
    pub abort_linger_ms: u64,
    /// Yield the thread when an iteration did nothing (tests on shared machines; a
    /// dataplane core spins).
    pub idle_yield: bool,
}

impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig {
            index: 0,
            rx_burst: 64,
            tx_frames_max: 64,
            forward_burst: 32,
            commands_per_iteration: 8,
            events_per_iteration: 64,
            max_apps: 16,
            stats_interval_ns: 1_000_000,
            default_grace_ms: 5_000,
            abort_linger_ms: 50,
            idle_yield: false,
        }
    }
}

/// A core could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreError {
    /// An engine configuration is invalid.
    Engine(ConfigError),
    /// A core configuration field is unusable.
    Config(&'static str),
    /// The port's frames are smaller than the engine's MTU needs.
    FrameTooSmall {
        /// Global port id.
        port: u16,
        /// What the port offers.
        port_len: usize,
        /// What the engine needs.
        engine_len: usize,
    },
}

impl core::fmt::Display for CoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CoreError::Engine(e) => write!(f, "{e}"),
            CoreError::Config(field) => write!(f, "invalid core config: {field}"),
            CoreError::FrameTooSmall {
                port,
                port_len,
                engine_len,
            } => write!(
                f,
                "port {port}: frames of {port_len} bytes, the MTU needs {engine_len}"
            ),
        }
    }
}

impl std::error::Error for CoreError {}

/// One port served by a core.
pub struct PortSetup {
    /// Global port id.
    pub port_id: u16,
    /// The engine's configuration (seeds differ per core).
    pub engine: EngineConfig,
    /// This core's queue pair of the port.
    pub io: Box<dyn FrameIo>,
    /// How the port spreads frames over cores.
    pub steering: Steering,
}

/// A core's rings to the rest of the daemon.
pub struct CoreLinks<M> {
    /// The control rings (core end).
    pub control: CoreControl<M>,
    /// Forward rings to and from the other cores.
    pub forward: ForwardEnds,
    /// Capture ring, if capture may be enabled.
    pub capture: Option<CoreCapture>,
    /// Where to publish the counters, if the caller made it (so the control thread holds
    /// it before the core starts); its ports must be the core's port ids in order.
    /// `None`: the core makes its own ([`Core::stats`]).
    pub stats: Option<Arc<CoreStats>>,
}

/// A port as a core holds it.
pub(crate) struct Port {
    pub(crate) id: u16,
    pub(crate) engine: Engine,
    pub(crate) io: Box<dyn FrameIo>,
    pub(crate) steering: Steering,
    pub(crate) counters: PortCounters,
    /// Established QPs (from `Established` to `Disconnected`), whichever app owns them:
    /// the QP gauge, and what a shutdown resets when its grace period ends. Bounded by
    /// the engine's connection table.
    pub(crate) live: HashSet<QpId>,
}

/// An app and the port it is bound to.
pub(crate) struct AppSlot<M> {
    pub(crate) id: AppId,
    pub(crate) port: usize,
    pub(crate) app: Box<dyn App<M> + Send>,
}

/// Shutdown progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShutdownState {
    pub(crate) deadline: Instant,
    /// When the rest was aborted (grace period over).
    pub(crate) aborted_at: Option<Instant>,
}

/// What one iteration did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames received from the ports.
    pub rx_frames: usize,
    /// Frames taken from the forward rings.
    pub forwarded_frames: usize,
    /// Control commands executed.
    pub commands: usize,
    /// Ports whose timers ran.
    pub timers: usize,
    /// Engine events handled.
    pub events: usize,
    /// Frames transmitted.
    pub tx_frames: usize,
}

impl Work {
    /// True if the iteration did nothing (apps' `poll` aside).
    pub fn is_idle(&self) -> bool {
        *self == Work::default()
    }
}

/// One dataplane core. See the module documentation.
pub struct Core<M: Memory> {
    pub(crate) cfg: CoreConfig,
    pub(crate) mem: M,
    pub(crate) ports: Vec<Port>,
    pub(crate) apps: Vec<Option<AppSlot<M>>>,
    pub(crate) next_app_id: u32,
    pub(crate) control: CoreControl<M>,
    pub(crate) forward: ForwardEnds,
    pub(crate) capture: Option<CoreCapture>,
    pub(crate) stats: Arc<CoreStats>,
    pub(crate) loop_counters: CorePlain,
    pub(crate) next_publish: Instant,
    /// When the engines' QPs-by-state census is next refreshed.
    pub(crate) next_census: Instant,
    pub(crate) shutdown: Option<ShutdownState>,
    pub(crate) finished: bool,
}

/// Least time between two QPs-by-state censuses of the published counters (each walks
/// every QP of the engine).
pub const QP_CENSUS_INTERVAL: Duration = Duration::from_millis(100);

impl<M: Memory> Core<M> {
    /// A core serving `ports`, owning `mem`, talking to the daemon over `links`.
    pub fn new(
        cfg: CoreConfig,
        mem: M,
        ports: Vec<PortSetup>,
        links: CoreLinks<M>,
    ) -> Result<Core<M>, CoreError> {
        let positive = [
            (cfg.rx_burst, "rx_burst"),
            (cfg.tx_frames_max, "tx_frames_max"),
            (cfg.forward_burst, "forward_burst"),
            (cfg.commands_per_iteration, "commands_per_iteration"),
            (cfg.events_per_iteration, "events_per_iteration"),
        ];
        if let Some((_, field)) = positive.iter().find(|(v, _)| *v == 0) {
            return Err(CoreError::Config(field));
        }
        if ports.is_empty() {
            return Err(CoreError::Config("ports: a core serves at least one port"));
        }
        let mut out = Vec::with_capacity(ports.len());
        for p in ports {
            let engine = Engine::try_new(p.engine).map_err(CoreError::Engine)?;
            let need = engine.config().frame_len_max();
            let have = p.io.caps().frame_len_max;
            if have < need {
                return Err(CoreError::FrameTooSmall {
                    port: p.port_id,
                    port_len: have,
                    engine_len: need,
                });
            }
            let live = HashSet::with_capacity(engine.config().max_conns);
            out.push(Port {
                id: p.port_id,
                engine,
                io: p.io,
                steering: p.steering,
                counters: PortCounters::default(),
                live,
            });
        }
        let ids: Vec<u16> = out.iter().map(|p| p.id).collect();
        let stats = match links.stats {
            Some(s) => {
                let same = s.ports.iter().map(|p| p.port).eq(ids.iter().copied());
                if !same || s.core != cfg.index {
                    return Err(CoreError::Config("stats: core index or port ids differ"));
                }
                s
            }
            None => Arc::new(CoreStats::new(cfg.index, &ids)),
        };
        Ok(Core {
            stats,
            apps: (0..cfg.max_apps).map(|_| None).collect(),
            next_app_id: 1,
            control: links.control,
            forward: links.forward,
            capture: links.capture,
            loop_counters: CorePlain::default(),
            next_publish: Instant::ZERO,
            next_census: Instant::ZERO,
            shutdown: None,
            finished: false,
            ports: out,
            mem,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// The published counters (share with readers).
    pub fn stats(&self) -> Arc<CoreStats> {
        Arc::clone(&self.stats)
    }

    /// The core's memory.
    pub fn mem(&self) -> &M {
        &self.mem
    }

    /// The core's memory, mutably (set-up and tests; not while the loop runs elsewhere).
    pub fn mem_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    /// Number of ports.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// The engine of port `i` (inspection and set-up).
    pub fn engine(&self, i: usize) -> Option<&Engine> {
        self.ports.get(i).map(|p| &p.engine)
    }

    /// The engine of port `i` and the memory, mutably (set-up and tests).
    pub fn engine_mut(&mut self, i: usize) -> Option<(&mut Engine, &mut M)> {
        let mem = &mut self.mem;
        self.ports.get_mut(i).map(|p| (&mut p.engine, mem))
    }

    /// True once shutdown completed (`run` returns).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// True while shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    /// Runs the loop until shutdown completes (a `Shutdown` command, or `stop` set: then
    /// with the default grace period). Returns the final counters.
    pub fn run(&mut self, clock: &impl Clock, stop: &AtomicBool) -> Snapshot {
        while !self.finished {
            let now = clock.now();
            if self.shutdown.is_none() && stop.load(Ordering::Relaxed) {
                self.begin_shutdown(now, self.cfg.default_grace_ms);
            }
            let work = self.run_once(now);
            if self.cfg.idle_yield && work.is_idle() {
                std::thread::yield_now();
            }
        }
        self.final_snapshot(clock.now())
    }

    /// Publishes the counters and returns them (after `run`, or in tests).
    pub fn final_snapshot(&mut self, now: Instant) -> Snapshot {
        self.publish_with(now, true);
        self.stats.snapshot()
    }

    /// One iteration of the loop at `now`.
    pub fn run_once(&mut self, now: Instant) -> Work {
        let mut work = Work::default();
        if self.finished {
            return work;
        }
        // The iteration's accesses to registered memory are one batch (shared memory
        // announces this core as its reader once here instead of around every copy).
        self.mem.begin_batch();
        for i in 0..self.ports.len() {
            work.rx_frames += self.receive(now, i);
        }
        work.forwarded_frames = self.receive_forwarded(now);
        work.commands = self.run_commands(now);
        for p in &mut self.ports {
            if p.engine.poll_timeout().is_some_and(|t| t <= now) {
                p.engine.handle_timeout(now, &mut self.mem);
                work.timers += 1;
            }
        }
        for slot in self.apps.iter_mut().flatten() {
            if let Some(p) = self.ports.get_mut(slot.port) {
                slot.app.poll(now, &mut p.engine, &mut self.mem);
            }
        }
        for i in 0..self.ports.len() {
            work.events += self.route_events(now, i);
        }
        for i in 0..self.ports.len() {
            work.tx_frames += self.transmit(now, i);
        }
        if self.shutdown.is_some() {
            self.check_shutdown(now);
        }
        self.mem.end_batch();
        self.loop_counters.iterations += 1;
        if !work.is_idle() {
            self.loop_counters.busy_iterations += 1;
        }
        if now >= self.next_publish {
            self.publish(now);
        }
        work
    }

    /// Copies every counter into the published atomics. The engines' QPs-by-state
    /// census walks every QP, so it is refreshed at most every [`QP_CENSUS_INTERVAL`]
    /// (and on `Snapshot` commands and at exit); the rest is O(1) per port.
    pub(crate) fn publish(&mut self, now: Instant) {
        let census = now >= self.next_census;
        if census {
            self.next_census = now + QP_CENSUS_INTERVAL;
        }
        self.publish_with(now, census);
    }

    /// [`Core::publish`] with the QP census refreshed or not.
    pub(crate) fn publish_with(&mut self, now: Instant, census: bool) {
        for p in &mut self.ports {
            let conns = p.engine.conn_count();
            let e = if census {
                p.engine.counters()
            } else {
                p.engine.counters_fast()
            };
            p.counters.take_engine(e, conns);
            p.counters.take_checksums(&p.io.checksum_counters());
        }
        self.loop_counters.apps = self.apps.iter().flatten().count() as u64;
        let qps = self.ports.iter().map(|p| p.live.len() as u64).sum();
        self.stats.publish(
            &self.loop_counters,
            self.ports.iter().map(|p| &p.counters),
            qps,
        );
        self.next_publish = now + Duration::from_nanos(self.cfg.stats_interval_ns);
    }
}
