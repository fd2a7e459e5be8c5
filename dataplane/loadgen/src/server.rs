//! The load generator's server: listens on a port, accepts loadgen hellos (rejecting
//! bad ones with a reason), gives each data connection a target buffer of `depth` slots
//! and serves it until the client disconnects; then the QP, its MR and the buffer are
//! released for the next client. Runs for as long as the daemon does.
//!
//! Per connection: WRITE gets an MR with remote write over its slots; READ one with
//! remote read (slots filled with the pattern when verifying); SEND gets `depth`
//! receives over its slots and returns credits in small SENDs every `depth / 2`
//! messages consumed; a verified WRITE gets `depth` control receives for the client's
//! "check slot k = seq s" SENDs, each answered by an ack once the slot was checked.
//!
//! `wr_id` layout: connection index (24 bits) | generation (8 bits) | kind (4 bits) |
//! slot (28 bits); a completion of an earlier connection in the same slot is ignored.

use iwarp_engine::{AcceptParams, Engine, Event, PrivateData};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_runtime::App;
use iwarp_types::{
    Access, AsyncEventKind, ConnId, Cqe, EventResource, Instant, Memory, PdId, QpId, RecvWr,
    SgList, Sge, Stag,
};

use crate::client::CQ_BATCH;

#[path = "server_data.rs"]
mod data;
use crate::messages::{AcceptInfo, Hello, Op, ParseError, RejectReason, CTL_LEN};
use crate::pattern::{self, SCRATCH_LEN};
use crate::report::ServerReport;
use crate::res::{conn_slot, qp_slot, CqSet, SlotMap};
use crate::spec::{Arena, Layout, ServerConfig, SetupError};

const KIND_DATA_RX: u64 = 0;
const KIND_CTL_RX: u64 = 1;
const KIND_CTL_TX: u64 = 2;
const SLOT_MASK: u64 = 0x0fff_ffff;
/// `poll_cq` calls per CQ per `poll` at most.
const CQ_BATCHES_PER_POLL: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnPhase {
    Free,
    Accepted,
    Up,
}

#[derive(Clone, Copy, Debug)]
struct PendingAck {
    slot: u32,
    seq: u64,
    ok: bool,
}

struct SConn {
    phase: ConnPhase,
    gen: u8,
    conn: ConnId,
    qp: QpId,
    hello: Hello,
    layout: Layout,
    buffer: Option<u32>,
    mr: Option<Stag>,
    /// Next SEND sequence number expected (verify).
    expected_seq: u64,
    /// Receives consumed and reposted since the last credit message.
    consumed: u32,
    /// Verify mismatches since the last credit message.
    bad: u32,
    /// Control send slots free.
    tx_free: u32,
    tx_next: u64,
    /// Acks waiting for a free control send slot: ring in `acks` at `buffer x max_depth`.
    ack_head: u32,
    ack_len: u32,
}

/// A loadgen server on one port of one core. See the module docs.
pub struct LoadgenServer {
    cfg: ServerConfig,
    arena: Arena,
    pd: PdId,
    local_mr: Option<Stag>,
    lkey: Stag,
    cqs: CqSet,
    conns: Vec<SConn>,
    free_conns: Vec<u32>,
    free_buffers: Vec<u32>,
    acks: Vec<PendingAck>,
    qp_map: SlotMap,
    conn_map: SlotMap,
    cqes: Vec<Cqe>,
    scratch: Vec<u8>,
    report: ServerReport,
    shutting_down: bool,
    released: bool,
}

/// Asynchronous events of an orderly close: the close completed, or it came while
/// receives were posted (a server always has receives posted).
pub(crate) fn routine_async(kind: AsyncEventKind) -> bool {
    matches!(
        kind,
        AsyncEventKind::LlpCloseComplete | AsyncEventKind::BadLlpClose
    )
}

fn wr_id(c: usize, gen: u8, kind: u64, slot: u64) -> u64 {
    ((c as u64) << 40) | (u64::from(gen) << 32) | (kind << 28) | (slot & SLOT_MASK)
}

impl LoadgenServer {
    /// Validates `cfg`, checks `arena` (at least [`ServerConfig::required_arena_bytes`]
    /// inside `mem`), creates the PD, CQs and a local MR over the arena, and listens on
    /// `cfg.port`. Everything is released again on error.
    pub fn new<M: Memory>(
        cfg: ServerConfig,
        arena: Arena,
        engine: &mut Engine,
        mem: &M,
    ) -> Result<LoadgenServer, SetupError> {
        let limits = engine.rnic().limits();
        cfg.validate(&limits)?;
        let need = cfg.required_arena_bytes();
        arena.check(need, mem)?;
        let region_len = mem.region_len(arena.region).unwrap_or(0);
        let r = engine.rnic_mut();
        let verb = |what| move |err| SetupError::Verb { what, err };
        let pd = r.alloc_pd().map_err(verb("alloc_pd"))?;
        let mut cqs = match CqSet::create(r, cfg.buffers.max(1), 2 * cfg.max_depth) {
            Ok(c) => c,
            Err(e) => {
                let _ = r.dealloc_pd(pd);
                return Err(e);
            }
        };
        let mut local_mr = None;
        if need > 0 {
            let attr = MrAttr {
                pd,
                region: arena.region,
                region_offset: arena.offset,
                len: need,
                va: 0,
                zero_based: true,
                access: Access::LOCAL_READ | Access::LOCAL_WRITE,
                key: 0x53,
                remote_access_flag: false,
            };
            match r.reg_mr(&attr, Some(region_len)) {
                Ok(s) => local_mr = Some(s),
                Err(err) => {
                    cqs.destroy(r);
                    let _ = r.dealloc_pd(pd);
                    return Err(SetupError::Verb {
                        what: "reg_mr",
                        err,
                    });
                }
            }
        }
        if let Err(e) = engine.listen(cfg.port, cfg.backlog) {
            let r = engine.rnic_mut();
            if let Some(m) = local_mr {
                let _ = r.dealloc_stag(m);
            }
            cqs.destroy(r);
            let _ = r.dealloc_pd(pd);
            return Err(SetupError::Listen(e));
        }
        let empty = SConn {
            phase: ConnPhase::Free,
            gen: 0,
            conn: ConnId(0),
            qp: QpId(0),
            hello: Hello {
                op: Op::Connect,
                verify: false,
                size: 0,
                depth: 0,
                qp_index: 0,
            },
            layout: Layout::new(0, 0, false),
            buffer: None,
            mr: None,
            expected_seq: 0,
            consumed: 0,
            bad: 0,
            tx_free: 0,
            tx_next: 0,
            ack_head: 0,
            ack_len: 0,
        };
        let mut conns = Vec::with_capacity(cfg.max_conns as usize);
        conns.resize_with(cfg.max_conns as usize, || SConn { ..empty });
        Ok(LoadgenServer {
            arena,
            pd,
            local_mr,
            lkey: local_mr.unwrap_or(Stag::ZERO),
            cqs,
            conns,
            free_conns: (0..cfg.max_conns).rev().collect(),
            free_buffers: (0..cfg.buffers).rev().collect(),
            acks: vec![
                PendingAck {
                    slot: 0,
                    seq: 0,
                    ok: true
                };
                (cfg.buffers * cfg.max_depth) as usize
            ],
            qp_map: SlotMap::new(limits.max_qps as usize, qp_slot),
            conn_map: SlotMap::new(engine.config().max_conns, conn_slot),
            cqes: vec![Cqe::EMPTY; CQ_BATCH],
            scratch: vec![0; SCRATCH_LEN],
            report: ServerReport::default(),
            shutting_down: false,
            released: false,
            cfg,
        })
    }

    /// What the server has done so far.
    pub fn report(&self) -> &ServerReport {
        &self.report
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// Offset, inside the arena, of buffer `b`.
    fn buffer_base(&self, b: u32) -> u64 {
        u64::from(b) * self.cfg.buffer_stride()
    }

    fn reject(&mut self, now: Instant, engine: &mut Engine, conn: ConnId, why: RejectReason) {
        let (b, n) = why.encode();
        let pd = PrivateData::new(&b[..n]).unwrap_or(PrivateData::EMPTY);
        let _ = engine.reject(now, conn, pd);
        self.report.rejected += 1;
    }

    fn check_hello(&self, pd: &[u8]) -> Result<(Hello, Layout), RejectReason> {
        let h = Hello::parse(pd).map_err(|e| match e {
            ParseError::BadVersion(_) => RejectReason::BadVersion,
            ParseError::BadOp(_) => RejectReason::BadOp,
            _ => RejectReason::NotHello,
        })?;
        if h.op == Op::Connect {
            return Ok((h, Layout::new(0, 0, false)));
        }
        if h.depth == 0 || h.depth > self.cfg.max_depth {
            return Err(RejectReason::BadDepth);
        }
        if h.size == 0 {
            return Err(RejectReason::BadSize);
        }
        let ctl = h.op == Op::Send || (h.op == Op::Write && h.verify);
        let layout = Layout::new(u64::from(h.size), u64::from(h.depth), ctl);
        if layout.stride > self.cfg.buffer_bytes {
            return Err(RejectReason::BadSize);
        }
        Ok((h, layout))
    }

    fn on_connect_request<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        conn: ConnId,
        private_data: &PrivateData,
    ) {
        if self.shutting_down {
            return self.reject(now, engine, conn, RejectReason::Other);
        }
        let (hello, layout) = match self.check_hello(private_data.as_slice()) {
            Ok(v) => v,
            Err(why) => return self.reject(now, engine, conn, why),
        };
        let Some(c) = self.free_conns.pop() else {
            return self.reject(now, engine, conn, RejectReason::TooManyConnections);
        };
        let buffer = if hello.op == Op::Connect {
            None
        } else {
            match self.free_buffers.pop() {
                Some(b) => Some(b),
                None => {
                    self.free_conns.push(c);
                    return self.reject(now, engine, conn, RejectReason::NoBuffer);
                }
            }
        };
        match self.open(now, engine, mem, c as usize, conn, hello, layout, buffer) {
            Ok(()) => {
                self.report.accepted += 1;
                self.report.active += 1;
            }
            Err(why) => {
                self.free_conns.push(c);
                if let Some(b) = buffer {
                    self.free_buffers.push(b);
                }
                self.reject(now, engine, conn, why);
            }
        }
    }

    /// Creates the QP (and MR, receives) of connection slot `c` and accepts.
    #[allow(clippy::too_many_arguments)]
    fn open<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        c: usize,
        conn: ConnId,
        hello: Hello,
        layout: Layout,
        buffer: Option<u32>,
    ) -> Result<(), RejectReason> {
        let limits = engine.rnic().limits();
        let ctl = layout.ctl_tx > layout.ctl_rx;
        let depth = hello.depth.max(1);
        let attr = QpAttr {
            sq_depth: if ctl { depth } else { 1 },
            rq_depth: if ctl { depth } else { 1 },
            ord: 1.min(limits.max_ord),
            ird: limits.max_ird,
            inbound_read: hello.op == Op::Read,
            inbound_write: hello.op == Op::Write,
            ..QpAttr::new(self.pd, self.cqs.cq_for(buffer.unwrap_or(0)))
        };
        let (qp, attr) = engine
            .rnic_mut()
            .create_qp(&attr)
            .map_err(|_| RejectReason::Resources)?;
        let base = buffer.map_or(0, |b| self.buffer_base(b));
        let data_len = layout.size * layout.depth;
        let mut mr = None;
        let mut info = AcceptInfo {
            stag: 0,
            base: 0,
            len: data_len,
            credits: 0,
        };
        let undo = |engine: &mut Engine, mr: Option<Stag>| {
            let r = engine.rnic_mut();
            let _ = r.destroy_qp(qp);
            if let Some(m) = mr {
                let _ = r.dealloc_stag(m);
            }
            RejectReason::Resources
        };
        if matches!(hello.op, Op::Write | Op::Read) {
            let remote = if hello.op == Op::Write {
                Access::REMOTE_WRITE
            } else {
                Access::REMOTE_READ
            };
            let a = MrAttr {
                pd: self.pd,
                region: self.arena.region,
                region_offset: self.arena.offset + base,
                len: data_len,
                va: 0,
                zero_based: true,
                access: Access::LOCAL_READ | Access::LOCAL_WRITE | remote,
                key: (c & 0xff) as u8,
                remote_access_flag: true,
            };
            let region_len = mem.region_len(self.arena.region);
            match engine.rnic_mut().reg_mr(&a, region_len) {
                Ok(s) => {
                    mr = Some(s);
                    info.stag = s.0;
                }
                Err(_) => return Err(undo(engine, mr)),
            }
        }
        if hello.op == Op::Read && hello.verify {
            for j in 0..layout.depth {
                let at = self.arena.offset + base + layout.data(j);
                let r = pattern::fill(
                    mem,
                    self.arena.region,
                    at,
                    layout.size,
                    hello.qp_index,
                    j,
                    &mut self.scratch,
                );
                if r.is_err() {
                    return Err(undo(engine, mr));
                }
            }
        }
        let gen = self.conns[c].gen;
        if hello.op == Op::Send {
            info.credits = hello.depth;
            for k in 0..layout.depth {
                let sge = Sge {
                    addr: base + layout.data(k),
                    length: hello.size,
                    lkey: self.lkey,
                };
                let wr = RecvWr {
                    wr_id: wr_id(c, gen, KIND_DATA_RX, k),
                    sgl: SgList::single(sge),
                };
                if engine.post_recv(qp, &wr).is_err() {
                    return Err(undo(engine, mr));
                }
            }
        } else if ctl {
            for j in 0..layout.depth {
                let sge = Sge {
                    addr: base + layout.ctl_rx + j * CTL_LEN as u64,
                    length: CTL_LEN as u32,
                    lkey: self.lkey,
                };
                let wr = RecvWr {
                    wr_id: wr_id(c, gen, KIND_CTL_RX, j),
                    sgl: SgList::single(sge),
                };
                if engine.post_recv(qp, &wr).is_err() {
                    return Err(undo(engine, mr));
                }
            }
        }
        let params = AcceptParams {
            private_data: PrivateData::new(&info.encode()).unwrap_or(PrivateData::EMPTY),
            ird: attr.ird,
            ord: attr.ord,
        };
        if engine.accept(now, conn, qp, params).is_err() {
            return Err(undo(engine, mr));
        }
        self.qp_map.insert(qp.0, c as u32);
        self.conn_map.insert(conn.0, c as u32);
        let s = &mut self.conns[c];
        *s = SConn {
            phase: ConnPhase::Accepted,
            gen,
            conn,
            qp,
            hello,
            layout,
            buffer,
            mr,
            expected_seq: 0,
            consumed: 0,
            bad: 0,
            tx_free: if ctl { depth } else { 0 },
            tx_next: 0,
            ack_head: 0,
            ack_len: 0,
        };
        Ok(())
    }

    /// The connection in slot `c` ended: release its QP, MR, buffer and slot.
    fn close_conn(&mut self, engine: &mut Engine, c: usize) {
        let s = &mut self.conns[c];
        if s.phase == ConnPhase::Free {
            return;
        }
        let r = engine.rnic_mut();
        let _ = r.destroy_qp(s.qp);
        if let Some(m) = s.mr.take() {
            let _ = r.dealloc_stag(m);
        }
        if let Some(b) = s.buffer.take() {
            self.free_buffers.push(b);
        }
        self.qp_map.remove(s.qp.0);
        self.conn_map.remove(s.conn.0);
        s.phase = ConnPhase::Free;
        s.gen = s.gen.wrapping_add(1);
        self.free_conns.push(c as u32);
        self.report.active = self.report.active.saturating_sub(1);
    }

    fn release(&mut self, engine: &mut Engine) {
        if self.released {
            return;
        }
        self.released = true;
        let r = engine.rnic_mut();
        if let Some(m) = self.local_mr.take() {
            let _ = r.dealloc_stag(m);
        }
        self.cqs.destroy(r);
        let _ = r.dealloc_pd(self.pd);
    }
}

impl<M: Memory> App<M> for LoadgenServer {
    fn on_event(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, event: &Event) -> bool {
        match event {
            Event::ConnectRequest {
                conn,
                local_port,
                private_data,
                ..
            } => {
                if *local_port != self.cfg.port || self.released {
                    return false;
                }
                self.on_connect_request(now, engine, mem, *conn, private_data);
                true
            }
            Event::Established { qp, .. } => {
                let Some(c) = self.qp_map.get(qp.0) else {
                    return false;
                };
                let s = &mut self.conns[c as usize];
                if s.phase == ConnPhase::Accepted {
                    s.phase = ConnPhase::Up;
                }
                true
            }
            // The close is complete at `Disconnected`: the slot is freed only then.
            Event::PeerClosed { qp, .. } => self.qp_map.get(qp.0).is_some(),
            Event::Disconnected { qp, .. } => {
                let Some(c) = self.qp_map.get(qp.0) else {
                    return false;
                };
                self.poll_cqs(engine, mem);
                self.report.served += 1;
                self.close_conn(engine, c as usize);
                true
            }
            Event::ConnectFailed { conn, .. } => {
                let Some(c) = self.conn_map.get(conn.0) else {
                    return false;
                };
                self.report.failed += 1;
                self.close_conn(engine, c as usize);
                true
            }
            Event::Async(ev) => match ev.resource {
                EventResource::Qp(qp) => {
                    let Some(c) = self.qp_map.get(qp.0) else {
                        return false;
                    };
                    let up = self.conns[c as usize].phase == ConnPhase::Up;
                    if up && !routine_async(ev.kind) {
                        self.report.errors += 1;
                    }
                    true
                }
                EventResource::Cq(cq) => !self.released && self.cqs.cqs().contains(&cq),
                _ => false,
            },
            Event::CqNotify(cq) => !self.released && self.cqs.cqs().contains(cq),
            Event::Rejected { .. } => false,
        }
    }

    fn poll(&mut self, _now: Instant, engine: &mut Engine, mem: &mut M) {
        if self.released {
            return;
        }
        self.poll_cqs(engine, mem);
        if self.shutting_down && self.report.active == 0 {
            self.release(engine);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn shutdown(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        let _ = mem;
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        engine.unlisten(self.cfg.port);
        for s in self.conns.iter() {
            if s.phase != ConnPhase::Free {
                let _ = engine.disconnect(now, s.qp);
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.report.active == 0
    }
}
