//! The load generator's client: opens `qps` connections to a loadgen server, keeps
//! `depth` WRs outstanding on each for a warmup and a measurement window, then closes
//! them gracefully and leaves a [`Report`].
//!
//! Set-up (PD, CQs, one MR over the arena, every QP) happens in [`LoadgenClient::new`];
//! nothing is allocated afterwards. The data path (posting and completions) is in
//! `client_data.rs`.
//!
//! Phases: `Connecting` (at most `max_connecting` connects in flight; traffic starts on
//! each QP as soon as it is established) → `Running` (from the moment every connect
//! resolved: `warmup`, then the window of `duration`) → `Draining` (no new WRs; the
//! outstanding ones complete and the server has nothing more to send, bounded by
//! `drain_timeout`) → `Closing` (graceful disconnect of every QP, bounded by
//! `close_timeout`, then RST) → `Done` (every verbs object released). An orderly
//! shutdown drains too before it closes.
//!
//! A graceful close needs both ends quiet (`client_close.rs` says why and how). How
//! each QP's connection ended is in [`Report::close`].

use iwarp_engine::{CmError, ConnectParams, Engine, Event, PrivateData};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_runtime::App;
use iwarp_types::{Access, ConnId, Cqe, EventResource, Instant, Memory, PdId, QpId, Stag};

use crate::messages::{AcceptInfo, Hello, Op, RejectReason};
use crate::pattern::SCRATCH_LEN;
use crate::report::Report;
use crate::res::{conn_slot, qp_slot, CqSet, SlotMap};
use crate::spec::{Arena, ClientSpec, Layout, SetupError};

#[path = "client_close.rs"]
mod close;

/// Completions taken from a CQ per `poll_cq` call.
pub const CQ_BATCH: usize = 64;
/// `poll_cq` calls per CQ per `poll` at most (bounds the work of one loop iteration).
pub(crate) const CQ_BATCHES_PER_POLL: usize = 16;
/// QPs disconnected (or released) per `poll` at most while closing.
pub(crate) const CLOSE_STEP: u32 = 256;

/// Placeholder entries of the preallocated completion buffer.
/// Where a client run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Opening connections.
    Connecting,
    /// Every connect resolved: warmup, then the measurement window.
    Running,
    /// The window ended; outstanding WRs complete.
    Draining,
    /// Disconnecting every QP.
    Closing,
    /// Every QP closed and every verbs object released; the report is final.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpPhase {
    /// Not connected yet.
    Idle,
    /// Connect issued.
    Connecting,
    /// Established: traffic flows.
    Up,
    /// We asked for the close (or the QP broke); waiting for the engine's event.
    Closing,
    /// Gone (or never connected).
    Closed,
}

pub(crate) struct QpSlot {
    pub qp: QpId,
    pub conn: Option<ConnId>,
    pub state: QpPhase,
    /// An error completion or failed post: post nothing more.
    pub broken: bool,
    pub connect_at: Instant,
    pub rkey: Stag,
    pub rbase: u64,
    /// Next sequence number to post.
    pub next_seq: u64,
    /// Every sequence number below this one completed.
    pub done_seq: u64,
    /// SEND credits.
    pub credits: u32,
}

/// A loadgen client: one per (peer, spec) on a core. See the module docs.
pub struct LoadgenClient {
    pub(crate) spec: ClientSpec,
    pub(crate) arena: Arena,
    pub(crate) layout: Layout,
    pd: PdId,
    mr: Option<Stag>,
    pub(crate) lkey: Stag,
    pub(crate) cqs: CqSet,
    pub(crate) qps: Vec<QpSlot>,
    /// Post time (ns) of each slot of each QP: `qps x depth`.
    pub(crate) post_ns: Vec<u64>,
    /// Events still owed to each slot before its message completes (verify runs).
    pub(crate) pending: Vec<u8>,
    qp_map: SlotMap,
    conn_map: SlotMap,
    pub(crate) phase: Phase,
    next_connect: u32,
    connecting: u32,
    closed: u32,
    cursor: u32,
    /// Data WRs posted and not completed, over every QP.
    pub(crate) outstanding: u64,
    started: Option<Instant>,
    first_connect: Option<Instant>,
    pub(crate) measure_start: Instant,
    pub(crate) measure_end: Instant,
    deadline: Instant,
    last_now: Instant,
    pub(crate) cqes: Vec<Cqe>,
    pub(crate) scratch: Vec<u8>,
    pub(crate) report: Report,
    pub(crate) signal_every: u64,
    port_filter: Option<Box<dyn Fn(u16) -> bool + Send>>,
}

impl LoadgenClient {
    /// Validates `spec`, checks `arena` (at least [`ClientSpec::required_arena_bytes`]
    /// inside `mem`), and creates the PD, CQs, the MR over the arena and every QP
    /// (Idle) on `engine`. Everything is released again on error.
    pub fn new<M: Memory>(
        spec: ClientSpec,
        arena: Arena,
        engine: &mut Engine,
        mem: &M,
    ) -> Result<LoadgenClient, SetupError> {
        let limits = engine.rnic().limits();
        spec.validate(&limits)?;
        let need = spec.required_arena_bytes();
        arena.check(need, mem)?;
        let region_len = mem.region_len(arena.region).unwrap_or(0);
        let layout = spec.layout();
        let depth = if spec.op == Op::Connect {
            1
        } else {
            spec.depth
        };
        let rq_depth = if spec.uses_ctl() { spec.depth } else { 1 };
        let ord = if spec.op == Op::Read {
            spec.depth.min(limits.max_ord).max(1)
        } else {
            1.min(limits.max_ord)
        };
        let r = engine.rnic_mut();
        let pd = r.alloc_pd().map_err(|err| SetupError::Verb {
            what: "alloc_pd",
            err,
        })?;
        let mut cqs = match CqSet::create(r, spec.qps, spec.sq_depth() + rq_depth) {
            Ok(c) => c,
            Err(e) => {
                let _ = r.dealloc_pd(pd);
                return Err(e);
            }
        };
        let mut mr = None;
        let mut qps: Vec<QpSlot> = Vec::with_capacity(spec.qps as usize);
        fn fail(
            r: &mut iwarp_rdma::Rnic,
            (qps, mr, cqs, pd): (&[QpSlot], Option<Stag>, &mut CqSet, PdId),
            what: &'static str,
            err: iwarp_types::VerbError,
        ) -> SetupError {
            for q in qps {
                let _ = r.destroy_qp(q.qp);
            }
            if let Some(m) = mr {
                let _ = r.dealloc_stag(m);
            }
            cqs.destroy(r);
            let _ = r.dealloc_pd(pd);
            SetupError::Verb { what, err }
        }
        if need > 0 {
            let attr = MrAttr {
                pd,
                region: arena.region,
                region_offset: arena.offset,
                len: need,
                va: 0,
                zero_based: true,
                // A READ's sink is named in the Read Request and written by the Read
                // Response (a tagged message): it needs remote write.
                access: if spec.op == Op::Read {
                    Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE
                } else {
                    Access::LOCAL_READ | Access::LOCAL_WRITE
                },
                key: 0x4c,
                remote_access_flag: spec.op == Op::Read,
            };
            match r.reg_mr(&attr, Some(region_len)) {
                Ok(s) => mr = Some(s),
                Err(err) => return Err(fail(r, (&qps, mr, &mut cqs, pd), "reg_mr", err)),
            }
        }
        for i in 0..spec.qps {
            let cq = cqs.cq_for(i);
            let attr = QpAttr {
                sq_depth: spec.sq_depth(),
                rq_depth,
                ord,
                ird: 1.min(limits.max_ird),
                inbound_write: true,
                ..QpAttr::new(pd, cq)
            };
            match r.create_qp(&attr) {
                Ok((qp, _)) => qps.push(QpSlot {
                    qp,
                    conn: None,
                    state: QpPhase::Idle,
                    broken: false,
                    connect_at: Instant::ZERO,
                    rkey: Stag::ZERO,
                    rbase: 0,
                    next_seq: 0,
                    done_seq: 0,
                    credits: 0,
                }),
                Err(err) => return Err(fail(r, (&qps, mr, &mut cqs, pd), "create_qp", err)),
            }
        }
        let mut qp_map = SlotMap::new(limits.max_qps as usize, qp_slot);
        for (i, q) in qps.iter().enumerate() {
            qp_map.insert(q.qp.0, i as u32);
        }
        let slots = spec.qps as usize * depth as usize;
        let verify = spec.verifying();
        Ok(LoadgenClient {
            layout,
            pd,
            mr,
            lkey: mr.unwrap_or(Stag::ZERO),
            cqs,
            qps,
            post_ns: vec![0; slots],
            pending: vec![0; if verify { slots } else { 0 }],
            qp_map,
            conn_map: SlotMap::new(engine.config().max_conns, conn_slot),
            phase: Phase::Connecting,
            next_connect: 0,
            connecting: 0,
            closed: 0,
            cursor: 0,
            outstanding: 0,
            started: None,
            first_connect: None,
            measure_start: Instant(u64::MAX),
            measure_end: Instant(u64::MAX),
            deadline: Instant(u64::MAX),
            last_now: Instant::ZERO,
            cqes: vec![Cqe::EMPTY; CQ_BATCH],
            scratch: vec![0; if verify { SCRATCH_LEN } else { 0 }],
            report: Report::new(spec.op, spec.payload_size(), spec.qps, spec.depth, verify),
            signal_every: if verify {
                1
            } else {
                u64::from(spec.signal_every)
            },
            port_filter: None,
            arena,
            spec,
        })
    }

    /// Active opens use local ports for which `f` holds (the dataplane steers the return
    /// traffic to this core with it). Set before the first `poll`.
    pub fn set_local_port_filter(&mut self, f: Box<dyn Fn(u16) -> bool + Send>) {
        self.port_filter = Some(f);
    }

    /// The spec.
    pub fn spec(&self) -> &ClientSpec {
        &self.spec
    }

    /// Where the run is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The run is over and the report final.
    pub fn finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The report so far (final once [`LoadgenClient::finished`]). Allocates (a copy of
    /// the histograms): not for the fast path.
    pub fn report(&self) -> Report {
        self.report.clone()
    }

    /// QPs established and not closed.
    pub fn qps_up(&self) -> u32 {
        self.qps.iter().filter(|q| q.state == QpPhase::Up).count() as u32
    }

    /// Measured window so far, seconds.
    fn window_seconds(&self, now: Instant) -> f64 {
        if now <= self.measure_start {
            return 0.0;
        }
        let end = now.min(self.measure_end);
        (end - self.measure_start).as_nanos() as f64 / 1e9
    }

    fn issue_connects<M: Memory>(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        while self.connecting < self.spec.max_connecting && self.next_connect < self.spec.qps {
            let i = self.next_connect as usize;
            self.next_connect += 1;
            if self.spec.uses_ctl() && !self.post_ctl_receives(engine, i) {
                self.qps[i].state = QpPhase::Closed;
                self.closed += 1;
                continue;
            }
            let hello = Hello {
                op: self.spec.op,
                verify: self.spec.verifying(),
                size: self.spec.payload_size(),
                depth: if self.spec.op == Op::Connect {
                    0
                } else {
                    self.spec.depth
                },
                qp_index: self.spec.qp_index_base + i as u32,
            };
            let info = engine.rnic().query_qp(self.qps[i].qp).ok();
            let params = ConnectParams {
                private_data: PrivateData::new(&hello.encode()).unwrap_or(PrivateData::EMPTY),
                ird: info.map_or(1, |q| q.attr.ird),
                ord: info.map_or(1, |q| q.attr.ord),
                p2p: false,
            };
            let (peer, port, qp) = (self.spec.peer, self.spec.port, self.qps[i].qp);
            let r = match &self.port_filter {
                Some(f) => engine
                    .choose_local_port(peer, port, f)
                    .ok_or(CmError::NoPort)
                    .and_then(|lp| engine.connect_from(now, qp, lp, peer, port, params)),
                None => engine.connect(now, qp, peer, port, params),
            };
            let _ = mem;
            match r {
                Ok(conn) => {
                    self.first_connect.get_or_insert(now);
                    self.conn_map.insert(conn.0, i as u32);
                    let q = &mut self.qps[i];
                    q.conn = Some(conn);
                    q.state = QpPhase::Connecting;
                    q.connect_at = now;
                    self.connecting += 1;
                }
                Err(_) => {
                    self.report.errors.connect_failed += 1;
                    self.qps[i].state = QpPhase::Closed;
                    self.closed += 1;
                }
            }
        }
    }

    fn start_running(&mut self, now: Instant) {
        self.phase = Phase::Running;
        self.measure_start = now + self.spec.warmup;
        self.measure_end = self.measure_start + self.spec.duration;
    }

    fn on_established<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        i: usize,
        private_data: &PrivateData,
    ) {
        if self.qps[i].state != QpPhase::Connecting {
            return;
        }
        self.connecting = self.connecting.saturating_sub(1);
        let need = self.layout.size * self.layout.depth;
        let info = AcceptInfo::parse(private_data.as_slice())
            .ok()
            .filter(|a| a.len >= need);
        let Some(info) = info else {
            self.report.errors.bad_accept += 1;
            let q = &mut self.qps[i];
            q.state = QpPhase::Closing;
            let _ = engine.disconnect(now, q.qp);
            return;
        };
        let setup = &mut self.report.setup;
        setup.established += 1;
        setup
            .latency
            .record((now - self.qps[i].connect_at).as_nanos());
        if let Some(t0) = self.first_connect {
            setup.window_ns = (now - t0).as_nanos();
        }
        let q = &mut self.qps[i];
        q.state = QpPhase::Up;
        q.rkey = Stag(info.stag);
        q.rbase = info.base;
        q.credits = info.credits.min(self.spec.depth);
        if self.phase == Phase::Closing {
            q.state = QpPhase::Closing;
            let _ = engine.disconnect(now, q.qp);
            return;
        }
        self.fill(now, engine, mem, i);
    }

    fn owns_cq(&self, cq: iwarp_types::CqId) -> bool {
        self.phase != Phase::Done && self.cqs.cqs().contains(&cq)
    }
}

impl<M: Memory> App<M> for LoadgenClient {
    fn on_event(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, event: &Event) -> bool {
        match event {
            Event::Established {
                qp, private_data, ..
            } => {
                let Some(i) = self.qp_map.get(qp.0) else {
                    return false;
                };
                self.on_established(now, engine, mem, i as usize, private_data);
                true
            }
            Event::Rejected { conn, private_data } => {
                let Some(i) = self.conn_map.get(conn.0) else {
                    return false;
                };
                let i = i as usize;
                if self.qps[i].state == QpPhase::Connecting {
                    let e = &mut self.report.errors;
                    e.rejected += 1;
                    if e.reject_reason.is_none() {
                        e.reject_reason = Some(
                            RejectReason::parse(private_data.as_slice())
                                .unwrap_or(RejectReason::Other),
                        );
                    }
                }
                self.on_closed(i);
                true
            }
            Event::ConnectFailed { conn, .. } => {
                let Some(i) = self.conn_map.get(conn.0) else {
                    return false;
                };
                let i = i as usize;
                if self.qps[i].state == QpPhase::Connecting {
                    self.report.errors.connect_failed += 1;
                }
                self.on_closed(i);
                true
            }
            // The close is complete at `Disconnected`: the QP is reused only then.
            Event::PeerClosed { qp, .. } => self.qp_map.get(qp.0).is_some(),
            Event::Disconnected { qp, .. } => {
                let Some(i) = self.qp_map.get(qp.0) else {
                    return false;
                };
                // Completions of the QP still in the CQ are taken before it is gone.
                self.poll_cqs(now, engine, mem);
                self.record_close(engine, i as usize);
                self.on_closed(i as usize);
                true
            }
            Event::Async(ev) => match ev.resource {
                EventResource::Qp(qp) => {
                    let Some(i) = self.qp_map.get(qp.0) else {
                        return false;
                    };
                    // After the window, how the close went is in the close stats.
                    let routine = crate::server::routine_async(ev.kind)
                        || self.qps[i as usize].state != QpPhase::Up
                        || self.phase >= Phase::Draining;
                    if !routine {
                        self.report.errors.async_events += 1;
                    }
                    true
                }
                EventResource::Cq(cq) => {
                    let ours = self.owns_cq(cq);
                    if ours {
                        self.report.errors.async_events += 1;
                    }
                    ours
                }
                _ => false,
            },
            Event::CqNotify(cq) => self.owns_cq(*cq),
            Event::ConnectRequest { .. } => false,
        }
    }

    fn poll(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        self.last_now = now;
        if self.phase == Phase::Done {
            return;
        }
        let started = *self.started.get_or_insert(now);
        self.poll_cqs(now, engine, mem);
        if self.phase == Phase::Connecting {
            self.issue_connects(now, engine, mem);
            if now >= started + self.spec.connect_timeout {
                // Stragglers are given up: the run goes on with what connected.
                for q in self.qps.iter_mut() {
                    if q.state == QpPhase::Connecting {
                        let _ = engine.abort(now, q.qp);
                        q.state = QpPhase::Closing;
                        self.report.errors.connect_failed += 1;
                    }
                }
                self.connecting = 0;
                self.next_connect = self.spec.qps;
            }
            if self.next_connect == self.spec.qps && self.connecting == 0 {
                self.start_running(now);
            }
        }
        if self.phase == Phase::Running && now >= self.measure_end {
            self.begin_draining(now);
        }
        if self.phase == Phase::Draining
            && ((self.outstanding == 0 && self.quiet_step()) || now >= self.deadline)
        {
            self.begin_closing(now);
        }
        if self.phase < Phase::Closing
            && self.closed == self.spec.qps
            && self.phase != Phase::Connecting
        {
            // Every QP is gone: nothing left to measure.
            self.begin_closing(now);
        }
        if self.phase == Phase::Closing {
            self.close_step(now, engine);
            if self.cursor >= self.spec.qps && self.closed >= self.spec.qps {
                self.poll_cqs(now, engine, mem);
                self.release(engine);
                self.phase = Phase::Done;
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let started = self.started.unwrap_or(self.last_now);
        match self.phase {
            Phase::Connecting => Some(started + self.spec.connect_timeout),
            Phase::Running => Some(if self.last_now < self.measure_start {
                self.measure_start
            } else {
                self.measure_end
            }),
            // The quiet check stopped at its per-poll bound, not at a QP that waits.
            Phase::Draining
                if self.outstanding == 0
                    && self
                        .qps
                        .get(self.cursor as usize)
                        .is_some_and(|q| !q.server_owes(self.spec.op, self.spec.depth)) =>
            {
                Some(self.last_now)
            }
            Phase::Draining => Some(self.deadline),
            Phase::Closing if self.cursor < self.spec.qps => Some(self.last_now),
            Phase::Closing => Some(self.deadline),
            Phase::Done => None,
        }
    }

    fn shutdown(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        let _ = (engine, mem);
        if self.phase < Phase::Draining {
            // Connects not issued yet never will be; those in flight are closed once
            // they resolve. What is outstanding drains first: a graceful close.
            self.next_connect = self.spec.qps;
            self.begin_draining(now);
        }
    }

    fn is_idle(&self) -> bool {
        self.phase == Phase::Done
    }
}
