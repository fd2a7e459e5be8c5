//! Cores joined by a memory link, for tests and benchmarks: side A (198.18.0.1) and side
//! B (198.18.0.2), each with one or more cores sharing one port (one link queue per core,
//! RSS on the link and in software), each core with its own engine, memory (one arena,
//! `RegionId(0)`), control rings, forward rings, optional capture ring and a
//! [`Console`] app through which the test runs verbs on the core.
//!
//! [`Testbed`] runs every core on the calling thread with a manual clock; the
//! [`SideParts`] it is built from are `Send`, so a side can instead be built and run on
//! its own thread ([`CoreParts::build`], [`Core::run`]).

mod console;

pub use console::{Console, ConsoleCx, ConsoleHandle, Job, PortFilter};

use core::net::Ipv4Addr;
use iwarp_engine::EngineConfig;
use iwarp_types::{Duration, Instant, RegionId, VecMemory};

use crate::capture::Capture;
use crate::clock::ManualClock;
use crate::control::{control_channel, ControlError, ControlHandle, CoreControl, Done, Op};
use crate::core::{Core, CoreConfig, CoreError, CoreLinks, PortSetup};
use crate::forward::{ForwardEnds, ForwardMesh};
use crate::memlink::{MemLink, MemLinkConfig, MemPort, RxInjector};
use crate::steer::{Steering, SYMMETRIC_RSS_KEY};

/// Address of side A.
pub const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Address of side B.
pub const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The arena of every core's memory.
pub const ARENA: RegionId = RegionId(0);

/// How a testbed is built.
#[derive(Clone, Copy, Debug)]
pub struct TestbedConfig {
    /// Cores on each side (each one queue of the side's port).
    pub cores_per_side: usize,
    /// The link (its `queues` is set to `cores_per_side`).
    pub link: MemLinkConfig,
    /// The cores' configuration (`index` is set per core).
    pub core: CoreConfig,
    /// IP MTU of every engine.
    pub mtu: usize,
    /// Bytes of each core's arena.
    pub arena_bytes: usize,
    /// Buffers of each forward ring.
    pub forward_frames: usize,
    /// Capture rings (frames, snap length per core), or none.
    pub capture: Option<(usize, usize)>,
    /// Command slots of each control ring.
    pub control_commands: usize,
    /// Virtual nanoseconds one [`Testbed::step`] advances the clock.
    pub round_ns: u64,
}

impl Default for TestbedConfig {
    fn default() -> TestbedConfig {
        TestbedConfig {
            cores_per_side: 1,
            link: MemLinkConfig::default(),
            core: CoreConfig::default(),
            mtu: 1500,
            arena_bytes: 1 << 20,
            forward_frames: 256,
            capture: None,
            control_commands: 64,
            round_ns: 1_000,
        }
    }
}

/// Everything one core is built from; `Send`, so it can move to the core's thread.
pub struct CoreParts {
    /// Core configuration.
    pub cfg: CoreConfig,
    /// The engine's configuration.
    pub engine: EngineConfig,
    /// The core's link queue.
    pub io: MemPort,
    /// The port's steering.
    pub steering: Steering,
    /// Its memory.
    pub mem: VecMemory,
    control: CoreControl<VecMemory>,
    forward: ForwardEnds,
    capture: Option<crate::capture::CoreCapture>,
    console: Console<VecMemory>,
}

impl CoreParts {
    /// Builds the core (port id 0), its console started.
    pub fn build(self) -> Result<Core<VecMemory>, CoreError> {
        self.build_with_stats(None)
    }

    /// Builds the core, publishing into `stats` if given.
    pub fn build_with_stats(
        self,
        stats: Option<std::sync::Arc<crate::counters::CoreStats>>,
    ) -> Result<Core<VecMemory>, CoreError> {
        let port = PortSetup {
            port_id: 0,
            engine: self.engine,
            io: Box::new(self.io),
            steering: self.steering,
        };
        let links = CoreLinks {
            control: self.control,
            forward: self.forward,
            capture: self.capture,
            stats,
        };
        let mut core = Core::new(self.cfg, self.mem, vec![port], links)?;
        core.start_app(0, Box::new(self.console))
            .map_err(|_| CoreError::Config("max_apps: no room for the test console"))?;
        Ok(core)
    }
}

/// One side's parts: its cores, their control handles and capture.
pub struct SideParts {
    /// Per core.
    pub cores: Vec<CoreParts>,
    /// Per core, the control thread's handle.
    pub handles: Vec<ControlHandle<VecMemory>>,
    /// Per core, the test's end of its console.
    pub consoles: Vec<ConsoleHandle<VecMemory>>,
    /// Capture rings of the side's cores, if configured.
    pub capture: Option<Capture>,
    /// Per core, puts crafted frames on its receive queue.
    pub injectors: Vec<RxInjector>,
}

/// The parts of both sides.
pub struct TestbedParts {
    /// Side A (198.18.0.1).
    pub a: SideParts,
    /// Side B (198.18.0.2).
    pub b: SideParts,
}

/// An engine configuration for a core of a side.
pub fn engine_config(ip: Ipv4Addr, mac: [u8; 6], core: usize, cfg: &TestbedConfig) -> EngineConfig {
    let last = ip.octets()[3];
    let mut secret = *b"iwarp-isn-secret";
    secret[0] = last;
    secret[1] = core as u8;
    let mut e = EngineConfig {
        mac,
        ipv4: ip,
        mtu: cfg.mtu,
        checksum_offload: cfg.link.checksum_offload,
        isn_secret: secret,
        // One STag seed per side, as iwarpd gives every engine of a daemon one: MRs
        // registered through the shared-memory verbs are replicated on every core.
        stag_seed: u64::from(last) << 8,
        ..EngineConfig::default()
    };
    // The engine clamps the MSS to the MTU: ask for the most the MTU allows.
    e.tcp.mss_bytes = u16::MAX;
    e
}

impl TestbedParts {
    /// Parts of both sides.
    pub fn new(cfg: &TestbedConfig) -> Result<TestbedParts, CoreError> {
        let n = cfg.cores_per_side;
        if n == 0 {
            return Err(CoreError::Config("cores_per_side must be positive"));
        }
        let link = MemLinkConfig {
            queues: n,
            frame_len_max: cfg.link.frame_len_max.max(cfg.mtu + 14),
            ..cfg.link
        };
        let (qa, qb) = MemLink::multi_queue(&link).map_err(|e| CoreError::Config(e.field))?;
        let side = |ip: Ipv4Addr, mac, queues: Vec<MemPort>| -> Result<SideParts, CoreError> {
            let mesh = ForwardMesh::new(n, cfg.forward_frames, link.frame_len_max);
            let capture = cfg
                .capture
                .map(|(frames, snap)| Capture::new(n, frames, snap));
            let steering = Steering::new(&SYMMETRIC_RSS_KEY, link.reta_size, (0..n).collect())
                .map_err(|e| CoreError::Config(e.0))?;
            let mut cores = Vec::with_capacity(n);
            let mut handles = Vec::with_capacity(n);
            let mut consoles = Vec::with_capacity(n);
            let injectors = queues.iter().map(MemPort::injector).collect();
            for (i, io) in queues.into_iter().enumerate() {
                let (h, control) =
                    control_channel(i, cfg.control_commands, 4 * cfg.control_commands + 256);
                let mut mem = VecMemory::new();
                mem.add_arena(cfg.arena_bytes);
                let (st, local) = (steering.clone(), ip.octets());
                let filter: PortFilter =
                    Box::new(move |rip, rport, p| st.owner(local, rip.octets(), p, rport) == i);
                let (console, console_handle) = Console::new(Some(filter));
                consoles.push(console_handle);
                cores.push(CoreParts {
                    cfg: CoreConfig {
                        index: i,
                        ..cfg.core
                    },
                    engine: engine_config(ip, mac, i, cfg),
                    io,
                    steering: steering.clone(),
                    mem,
                    control,
                    forward: mesh.ends(i),
                    capture: capture.as_ref().and_then(|c| c.core_end(i)),
                    console,
                });
                handles.push(h);
            }
            Ok(SideParts {
                cores,
                handles,
                consoles,
                capture,
                injectors,
            })
        };
        Ok(TestbedParts {
            a: side(IP_A, link.mac_a, qa)?,
            b: side(IP_B, link.mac_b, qb)?,
        })
    }
}

/// A built side.
pub struct Side {
    /// Its cores.
    pub cores: Vec<Core<VecMemory>>,
    /// Their control handles.
    pub handles: Vec<ControlHandle<VecMemory>>,
    /// Their consoles.
    pub consoles: Vec<ConsoleHandle<VecMemory>>,
    /// Their capture rings, if configured.
    pub capture: Option<Capture>,
    /// Per core, puts crafted frames on its receive queue.
    pub injectors: Vec<RxInjector>,
}

impl SideParts {
    /// Builds every core.
    pub fn build(self) -> Result<Side, CoreError> {
        let cores = self
            .cores
            .into_iter()
            .map(CoreParts::build)
            .collect::<Result<_, _>>()?;
        Ok(Side {
            cores,
            handles: self.handles,
            consoles: self.consoles,
            capture: self.capture,
            injectors: self.injectors,
        })
    }
}

/// Which side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Side A.
    A,
    /// Side B.
    B,
}

/// Both sides on the calling thread with a manual clock.
pub struct Testbed {
    /// Side A.
    pub a: Side,
    /// Side B.
    pub b: Side,
    /// The clock every core reads.
    pub clock: ManualClock,
    /// Virtual nanoseconds per step.
    pub round_ns: u64,
}

impl Testbed {
    /// Both sides built, the clock at 1 s.
    pub fn new(cfg: &TestbedConfig) -> Result<Testbed, CoreError> {
        let parts = TestbedParts::new(cfg)?;
        Ok(Testbed {
            a: parts.a.build()?,
            b: parts.b.build()?,
            clock: ManualClock::new(Instant(1_000_000_000)),
            round_ns: cfg.round_ns.max(1),
        })
    }

    /// A side.
    pub fn side(&mut self, w: Which) -> &mut Side {
        match w {
            Which::A => &mut self.a,
            Which::B => &mut self.b,
        }
    }

    /// One iteration of every core; then the clock advances by one round, or jumps to
    /// the earliest engine deadline when nothing happened. Returns true if work was done.
    pub fn step(&mut self) -> bool {
        let now = self.clock.now();
        let mut busy = false;
        for c in self.a.cores.iter_mut().chain(self.b.cores.iter_mut()) {
            busy |= !c.run_once(now).is_idle();
        }
        self.clock.advance(Duration::from_nanos(self.round_ns));
        if !busy {
            let next = self
                .a
                .cores
                .iter()
                .chain(self.b.cores.iter())
                .filter_map(|c| c.engine(0).and_then(|e| e.poll_timeout()))
                .min();
            if let Some(t) = next {
                self.clock.advance_to(t);
            }
        }
        busy
    }

    /// Steps until `f` holds (checked after each step), at most `rounds` steps.
    pub fn run_until(&mut self, rounds: usize, mut f: impl FnMut(&mut Testbed) -> bool) -> bool {
        for _ in 0..rounds {
            self.step();
            if f(self) {
                return true;
            }
        }
        false
    }

    /// Sends a command to a core and steps until its reply arrives (at most `rounds`
    /// steps; then `Timeout`).
    pub fn call(
        &mut self,
        w: Which,
        core: usize,
        op: Op<VecMemory>,
    ) -> Result<Done<VecMemory>, ControlError> {
        let h = self
            .side(w)
            .handles
            .get_mut(core)
            .ok_or(ControlError::NoSuchPort)?;
        let id = h.send(0, op)?;
        for _ in 0..1000 {
            self.step();
            if let Some(r) = self.side(w).handles[core].take_reply(id) {
                return r;
            }
        }
        Err(ControlError::Timeout)
    }

    /// Runs `job` on a core through its console and steps until it ran (at most 1,000
    /// steps; then panics: a test helper).
    pub fn exec<R: Send + 'static>(
        &mut self,
        w: Which,
        core: usize,
        job: impl FnOnce(&mut ConsoleCx<'_, VecMemory>) -> R + Send + 'static,
    ) -> R {
        let console = self.side(w).consoles[core].clone();
        let id = console.submit(job);
        for _ in 0..1000 {
            self.step();
            if let Some(r) = console.take_result(id) {
                return r;
            }
        }
        panic!("the job on {w:?} core {core} did not run");
    }

    /// An event of a console of side `w` matching `f`, with its core, if one is kept.
    pub fn take_event(
        &mut self,
        w: Which,
        mut f: impl FnMut(&iwarp_engine::Event) -> bool,
    ) -> Option<(usize, iwarp_engine::Event)> {
        self.side(w)
            .consoles
            .iter()
            .enumerate()
            .find_map(|(i, c)| c.take_event(&mut f).map(|e| (i, e)))
    }

    /// Steps until a console of side `w` has an event matching `f` (at most 20,000
    /// steps; then panics: a test helper).
    pub fn wait_event(
        &mut self,
        w: Which,
        mut f: impl FnMut(&iwarp_engine::Event) -> bool,
    ) -> (usize, iwarp_engine::Event) {
        for _ in 0..20_000 {
            if let Some(e) = self.take_event(w, &mut f) {
                return e;
            }
            self.step();
        }
        panic!("no matching event on {w:?}");
    }
}

/// Counters of a [`WriteLoop`], shared with the thread that started it.
#[derive(Debug, Default)]
pub struct WriteLoopStats {
    /// WRITEs posted.
    pub posted: std::sync::atomic::AtomicU64,
    /// WRITEs completed successfully.
    pub completed: std::sync::atomic::AtomicU64,
    /// WRITEs completed in error, or refused when posted.
    pub errors: std::sync::atomic::AtomicU64,
}

/// A minimal in-loop app for tests and benchmarks: keeps `depth` RDMA WRITEs of `len`
/// bytes in flight on an established QP until `count` have completed, each from offset
/// 0 of `lkey` to offset 0 of `rkey`. Takes the events of its QP; on shutdown it
/// disconnects and is idle once its QP is.
pub struct WriteLoop {
    /// The QP (established).
    pub qp: iwarp_types::QpId,
    /// Its send CQ.
    pub cq: iwarp_types::CqId,
    /// Local MR.
    pub lkey: iwarp_types::Stag,
    /// Remote MR.
    pub rkey: iwarp_types::Stag,
    /// Bytes per WRITE.
    pub len: u32,
    /// WRITEs in flight at most.
    pub depth: u32,
    /// WRITEs to complete.
    pub count: u64,
    /// Shared counters.
    pub stats: std::sync::Arc<WriteLoopStats>,
    inflight: u32,
    posted: u64,
    closed: bool,
    cqes: [iwarp_types::Cqe; 256],
}

impl WriteLoop {
    /// A loop over an established QP.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        qp: iwarp_types::QpId,
        cq: iwarp_types::CqId,
        lkey: iwarp_types::Stag,
        rkey: iwarp_types::Stag,
        len: u32,
        depth: u32,
        count: u64,
    ) -> WriteLoop {
        WriteLoop {
            qp,
            cq,
            lkey,
            rkey,
            len,
            depth,
            count,
            stats: std::sync::Arc::default(),
            inflight: 0,
            posted: 0,
            closed: false,
            cqes: [iwarp_types::Cqe::EMPTY; 256],
        }
    }
}

impl<M: iwarp_types::Memory> crate::app::App<M> for WriteLoop {
    fn on_event(
        &mut self,
        _now: Instant,
        _engine: &mut iwarp_engine::Engine,
        _mem: &mut M,
        event: &iwarp_engine::Event,
    ) -> bool {
        use iwarp_engine::Event;
        match *event {
            Event::Disconnected { qp, .. } if qp == self.qp => {
                self.closed = true;
                true
            }
            Event::Established { qp, .. } => qp == self.qp,
            _ => false,
        }
    }

    fn poll(&mut self, _now: Instant, engine: &mut iwarp_engine::Engine, _mem: &mut M) {
        use std::sync::atomic::Ordering::Relaxed;
        if let Ok(n) = engine.rnic_mut().poll_cq(self.cq, &mut self.cqes) {
            for c in &self.cqes[..n] {
                self.inflight = self.inflight.saturating_sub(1);
                if c.status == iwarp_types::WcStatus::Success {
                    self.stats.completed.fetch_add(1, Relaxed);
                } else {
                    self.stats.errors.fetch_add(1, Relaxed);
                }
            }
        }
        while !self.closed && self.inflight < self.depth && self.posted < self.count {
            let wr = iwarp_types::SendWr {
                wr_id: self.posted,
                op: iwarp_types::SendOp::Write {
                    remote_to: 0,
                    rkey: self.rkey,
                },
                sgl: iwarp_types::SgList::single(iwarp_types::Sge {
                    addr: 0,
                    length: self.len,
                    lkey: self.lkey,
                }),
                flags: iwarp_types::SendFlags::SIGNALED,
            };
            if engine.post_send(self.qp, &wr).is_err() {
                self.stats.errors.fetch_add(1, Relaxed);
                break;
            }
            self.posted += 1;
            self.inflight += 1;
            self.stats.posted.fetch_add(1, Relaxed);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn shutdown(&mut self, now: Instant, engine: &mut iwarp_engine::Engine, _mem: &mut M) {
        self.count = self.posted;
        if engine.disconnect(now, self.qp).is_err() {
            self.closed = true;
        }
    }

    fn is_idle(&self) -> bool {
        self.closed
    }
}
