//! A simulated host: one [`Engine`] with its [`VecMemory`] arenas, plus the verbs
//! helpers scenarios need (PD, CQ, QP, MR set-up; completions collected per CQ) and the
//! connection-management dance between two hosts of a [`Sim`].

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use iwarp_engine::{
    AcceptParams, ConnectParams, Counters, Engine, EngineConfig, Event, PrivateData,
};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::{QpAttr, QpInfo};
use iwarp_types::{
    Access, ConnId, CqId, Cqe, Duration, Instant, PdId, QpId, QpState, RecvWr, RegionId, SendWr,
    SgList, Sge, SrqId, Stag, VecMemory, VerbError,
};

use crate::link::LinkConfig;
use crate::rng::SimRng;
use crate::sim::{Node, Sim};

/// CQEs polled from one CQ per call.
const POLL_BATCH: usize = 64;
/// Completions kept per CQ before the oldest are dropped (a test that never looks).
const CQES_KEPT_MAX: usize = 1 << 20;

/// One engine and the memory it reads and writes.
pub struct Host {
    /// The engine.
    pub engine: Engine,
    /// Caller-owned memory arenas.
    pub mem: VecMemory,
    /// CQs drained automatically after every input, with what they produced.
    cqes: BTreeMap<CqId, VecDeque<Cqe>>,
    mac: [u8; 6],
}

impl core::fmt::Debug for Host {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Host")
            .field("mac", &self.mac)
            .field("ip", &self.ip())
            .finish()
    }
}

/// The configuration of host `i` of a simulation: MAC 02:00:00:00:00:(i+1), IPv4
/// 198.18.0.(i+1)/24 (RFC 2544 benchmarking range), seeds (ISN secret, STag seed) drawn from `rng`.
pub fn host_config(i: usize, rng: &mut SimRng) -> EngineConfig {
    let n = u8::try_from(i + 1).expect("at most 254 hosts");
    let mut isn_secret = [0u8; 16];
    rng.fill_bytes(&mut isn_secret);
    EngineConfig {
        mac: [0x02, 0, 0, 0, 0, n],
        ipv4: Ipv4Addr::new(198, 18, 0, n),
        isn_secret,
        stag_seed: rng.next_u64(),
        ..EngineConfig::default()
    }
}

impl Host {
    /// A host running `cfg`.
    pub fn new(cfg: EngineConfig) -> Host {
        let mac = cfg.mac;
        Host {
            engine: Engine::new(cfg),
            mem: VecMemory::new(),
            cqes: BTreeMap::new(),
            mac,
        }
    }

    /// Our IPv4 address.
    pub fn ip(&self) -> Ipv4Addr {
        self.engine.config().ipv4
    }

    /// The engine counters.
    pub fn counters(&mut self) -> Counters {
        self.engine.counters().clone()
    }

    /// Adds a zero-filled arena.
    pub fn add_arena(&mut self, len: usize) -> RegionId {
        self.mem.add_arena(len)
    }

    /// The bytes of an arena.
    pub fn arena(&self, r: RegionId) -> &[u8] {
        self.mem.arena(r)
    }

    /// The bytes of an arena, mutable.
    pub fn arena_mut(&mut self, r: RegionId) -> &mut [u8] {
        self.mem.arena_mut(r)
    }

    /// Allocates a PD.
    pub fn alloc_pd(&mut self) -> PdId {
        self.engine.rnic_mut().alloc_pd().expect("alloc_pd")
    }

    /// Creates a CQ whose completions the simulator collects (see [`Host::take_cqes`]).
    pub fn create_cq(&mut self, depth: u32) -> CqId {
        let (cq, _) = self.engine.rnic_mut().create_cq(depth).expect("create_cq");
        self.cqes.insert(cq, VecDeque::new());
        cq
    }

    /// Creates a CQ the test polls itself (not collected by the simulator).
    pub fn create_cq_manual(&mut self, depth: u32) -> CqId {
        self.engine
            .rnic_mut()
            .create_cq(depth)
            .expect("create_cq")
            .0
    }

    /// Creates a QP.
    pub fn create_qp(&mut self, attr: &QpAttr) -> QpId {
        self.engine.rnic_mut().create_qp(attr).expect("create_qp").0
    }

    /// Registers `[offset, offset + len)` of arena `region` as a zero-based MR with `access`.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        region: RegionId,
        offset: u64,
        len: u64,
        access: Access,
    ) -> Stag {
        self.try_reg_mr(pd, region, offset, len, access, 0)
            .expect("reg_mr")
    }

    /// Registers `[offset, offset + len)` of arena `region` as a VA-based MR whose first
    /// byte has tagged offset `va` (windows can only be bound in VA-based regions).
    pub fn reg_mr_va(
        &mut self,
        pd: PdId,
        region: RegionId,
        offset: u64,
        len: u64,
        va: u64,
        access: Access,
    ) -> Stag {
        let attr = MrAttr {
            pd,
            region,
            region_offset: offset,
            len,
            va,
            zero_based: false,
            access,
            key: 0,
            remote_access_flag: access.has_remote() || access.contains(Access::MW_BIND),
        };
        let region_len = iwarp_types::Memory::region_len(&self.mem, region);
        self.engine
            .rnic_mut()
            .reg_mr(&attr, region_len)
            .expect("reg_mr (VA-based)")
    }

    /// Registers an MR (zero-based) with a key; the verb's result.
    pub fn try_reg_mr(
        &mut self,
        pd: PdId,
        region: RegionId,
        offset: u64,
        len: u64,
        access: Access,
        key: u8,
    ) -> Result<Stag, VerbError> {
        let attr = MrAttr {
            pd,
            region,
            region_offset: offset,
            len,
            va: 0,
            zero_based: true,
            access,
            key,
            remote_access_flag: access.has_remote() || access.contains(Access::MW_BIND),
        };
        let region_len = iwarp_types::Memory::region_len(&self.mem, region);
        self.engine.rnic_mut().reg_mr(&attr, region_len)
    }

    /// Posts a send-queue WR.
    pub fn post_send(&mut self, qp: QpId, wr: &SendWr) -> Result<(), VerbError> {
        self.engine.post_send(qp, wr)
    }

    /// Posts a receive WR.
    pub fn post_recv(&mut self, qp: QpId, wr: &RecvWr) -> Result<(), VerbError> {
        self.engine.post_recv(qp, wr)
    }

    /// Posts a receive WR on an SRQ.
    pub fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr) -> Result<(), VerbError> {
        self.engine.rnic_mut().post_srq_recv(srq, wr)
    }

    /// The QP's state and attributes.
    pub fn query_qp(&self, qp: QpId) -> QpInfo {
        self.engine.rnic().query_qp(qp).expect("query_qp")
    }

    /// The QP's state.
    pub fn qp_state(&self, qp: QpId) -> QpState {
        self.query_qp(qp).state
    }

    /// Completions collected from `cq` so far (removed).
    pub fn take_cqes(&mut self, cq: CqId) -> Vec<Cqe> {
        self.cqes
            .get_mut(&cq)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// Completions collected from `cq` and not taken yet.
    pub fn cqes(&self, cq: CqId) -> &VecDeque<Cqe> {
        static EMPTY: VecDeque<Cqe> = VecDeque::new();
        self.cqes.get(&cq).unwrap_or(&EMPTY)
    }

    /// Number of completions waiting in `cq`'s collection.
    pub fn cqe_count(&self, cq: CqId) -> usize {
        self.cqes(cq).len()
    }

    fn drain_cqs(&mut self) {
        let mut buf = [Cqe::EMPTY; POLL_BATCH];
        let Host { engine, cqes, .. } = self;
        for (cq, log) in cqes.iter_mut() {
            loop {
                let n = engine.rnic_mut().poll_cq(*cq, &mut buf).unwrap_or(0);
                for c in &buf[..n] {
                    if log.len() >= CQES_KEPT_MAX {
                        log.pop_front();
                    }
                    log.push_back(*c);
                }
                if n < buf.len() {
                    break;
                }
            }
        }
    }
}

impl Node for Host {
    type Event = Event;

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.engine.handle_frame(now, frame, &mut self.mem);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now, &mut self.mem);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.engine.poll_transmit(now, buf, &self.mem)
    }

    fn transmit_burst(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        max: usize,
        out: &mut dyn FnMut(&[u8]),
    ) -> usize {
        // One transmit pass, as the daemon's lcore loop sends: connections keep their
        // turn for several segments.
        let mut pass = self.engine.transmitter(now, &self.mem);
        crate::sim::send_frames(buf, max, out, |buf| pass.next(buf))
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.engine.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn housekeeping(&mut self, _now: Instant) {
        self.drain_cqs();
    }
}

/// Builds a simulation of `n` hosts; `tweak(i, &mut cfg)` adjusts each configuration.
pub fn sim_of_hosts(
    n: usize,
    link: LinkConfig,
    seed: u64,
    mut tweak: impl FnMut(usize, &mut EngineConfig),
) -> Sim<Host> {
    let mut rng = SimRng::new(crate::rng::splitmix64(seed ^ 0x4057));
    let hosts = (0..n)
        .map(|i| {
            let mut cfg = host_config(i, &mut rng);
            tweak(i, &mut cfg);
            Host::new(cfg)
        })
        .collect();
    Sim::new(hosts, link, seed)
}

/// Default QP attributes for a PD and CQ.
pub fn qp_attr(pd: PdId, cq: CqId) -> QpAttr {
    QpAttr {
        sq_depth: 256,
        rq_depth: 256,
        max_send_sge: iwarp_types::MAX_SGE as u32,
        max_recv_sge: iwarp_types::MAX_SGE as u32,
        ord: 8,
        ird: 8,
        inbound_read: true,
        inbound_write: true,
        bind_enabled: true,
        privileged: true,
        fast_reg: true,
        ..QpAttr::new(pd, cq)
    }
}

/// Parameters of [`connect`].
#[derive(Clone, Copy, Debug)]
pub struct ConnectSpec {
    /// The listening port of the passive host.
    pub port: u16,
    /// Initiator's parameters.
    pub connect: ConnectParams,
    /// Responder's parameters.
    pub accept: AcceptParams,
    /// Virtual time allowed for each phase (request seen, both established).
    pub timeout: Duration,
}

impl Default for ConnectSpec {
    fn default() -> ConnectSpec {
        ConnectSpec {
            port: 4791,
            connect: ConnectParams {
                private_data: PrivateData::EMPTY,
                ird: 8,
                ord: 8,
                p2p: false,
            },
            accept: AcceptParams {
                private_data: PrivateData::EMPTY,
                ird: 8,
                ord: 8,
            },
            // TCP's whole SYN schedule (default syn_retries 6: the last SYN at 63 s,
            // giving up at 127 s) plus the MPA handshake: a lossy link may need it.
            timeout: Duration::from_secs(150),
        }
    }
}

/// What [`connect`] established.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connected {
    /// The initiator's connection.
    pub conn_a: ConnId,
    /// The responder's connection.
    pub conn_b: ConnId,
    /// Private data the initiator received in the reply.
    pub reply_private_data: PrivateData,
    /// Private data the responder received in the request.
    pub request_private_data: PrivateData,
}

/// The connection request the responder saw.
fn take_request(sim: &mut Sim<Host>, b: usize) -> Option<(ConnId, PrivateData)> {
    match sim.take_event(b, |e| matches!(e, Event::ConnectRequest { .. }))? {
        Event::ConnectRequest {
            conn, private_data, ..
        } => Some((conn, private_data)),
        _ => None,
    }
}

fn take_established(sim: &mut Sim<Host>, h: usize, qp: QpId) -> Option<(ConnId, PrivateData)> {
    match sim.take_event(
        h,
        |e| matches!(e, Event::Established { qp: q, .. } if *q == qp),
    )? {
        Event::Established {
            conn, private_data, ..
        } => Some((conn, private_data)),
        _ => None,
    }
}

/// Host `b` listens on `spec.port` (if not already), host `a` connects QP `qa` to it,
/// `b` accepts on QP `qb`; runs until both QPs are in RTS (both `Established` events).
pub fn connect(
    sim: &mut Sim<Host>,
    a: usize,
    qa: QpId,
    b: usize,
    qb: QpId,
    spec: &ConnectSpec,
) -> Connected {
    match try_connect(sim, a, qa, b, qb, spec) {
        Ok(c) => c,
        Err(e) => panic!("connect failed: {e} (IWARP_SEED=0x{:016x})", sim.seed()),
    }
}

/// [`connect`], returning what went wrong instead of panicking.
pub fn try_connect(
    sim: &mut Sim<Host>,
    a: usize,
    qa: QpId,
    b: usize,
    qb: QpId,
    spec: &ConnectSpec,
) -> Result<Connected, String> {
    let _ = sim.node_mut(b).engine.listen(spec.port, 8);
    let now = sim.now();
    let ip_b = sim.node(b).ip();
    sim.node_mut(a)
        .engine
        .connect(now, qa, ip_b, spec.port, spec.connect)
        .map_err(|e| format!("connect: {e}"))?;
    let mut request = None;
    sim.try_run_until(spec.timeout, |s| {
        request = request.or_else(|| take_request(s, b));
        request.is_some()
    })
    .map_err(|h| format!("no connect request: {h}; events a={:?}", sim.events(a)))?;
    let (conn_b, request_private_data) = request.expect("request seen");
    let now = sim.now();
    sim.node_mut(b)
        .engine
        .accept(now, conn_b, qb, spec.accept)
        .map_err(|e| format!("accept: {e}"))?;
    let (mut ea, mut eb) = (None, None);
    sim.try_run_until(spec.timeout, |s| {
        ea = ea.or_else(|| take_established(s, a, qa));
        eb = eb.or_else(|| take_established(s, b, qb));
        ea.is_some() && eb.is_some()
    })
    .map_err(|h| {
        format!(
            "not established: {h}; events a={:?} b={:?}",
            sim.events(a),
            sim.events(b)
        )
    })?;
    let (conn_a, reply_private_data) = ea.expect("established a");
    let (conn_b2, _) = eb.expect("established b");
    if conn_b2 != conn_b {
        return Err(format!(
            "responder established {conn_b2:?}, accepted {conn_b:?}"
        ));
    }
    Ok(Connected {
        conn_a,
        conn_b,
        reply_private_data,
        request_private_data,
    })
}

/// One side of a [`Pair`]: its verbs objects and its data arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    /// Host index.
    pub host: usize,
    /// Protection domain.
    pub pd: PdId,
    /// The CQ of both work queues (collected by the simulator).
    pub cq: CqId,
    /// The QP.
    pub qp: QpId,
    /// The SRQ its receives come from, if any.
    pub srq: Option<SrqId>,
    /// The data arena.
    pub region: RegionId,
    /// An MR over the whole arena with local and remote read/write rights (and MW bind).
    pub mr: Stag,
}

impl Side {
    /// An SGE of this side's MR.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: offset,
            length: len,
            lkey: self.mr,
        }
    }

    /// A one-element SGL of this side's MR.
    pub fn sgl(&self, offset: u64, len: u32) -> SgList {
        SgList::single(self.sge(offset, len))
    }
}

/// Options of [`Pair::new`].
#[derive(Clone, Copy, Debug)]
pub struct PairOptions {
    /// Link parameters (both directions).
    pub link: LinkConfig,
    /// Arena length on each host.
    pub arena_len: usize,
    /// Give each side an SRQ (depth, limit) instead of an RQ.
    pub srq: Option<(u32, u32)>,
    /// QP attributes adjustments (applied to both sides).
    pub qp: fn(&mut QpAttr),
    /// Engine configuration adjustments (host index, config).
    pub engine: fn(usize, &mut EngineConfig),
    /// Connection parameters.
    pub connect: ConnectSpec,
}

impl Default for PairOptions {
    fn default() -> PairOptions {
        PairOptions {
            link: LinkConfig::default(),
            arena_len: 1 << 20,
            srq: None,
            qp: |_| {},
            engine: |_, _| {},
            connect: ConnectSpec::default(),
        }
    }
}

/// Two hosts with one connected QP each (host 0 initiates).
#[derive(Debug)]
pub struct Pair {
    /// The simulation.
    pub sim: Sim<Host>,
    /// Host 0's side (MPA initiator).
    pub a: Side,
    /// Host 1's side (MPA responder).
    pub b: Side,
    /// What the connection set-up returned.
    pub connected: Connected,
}

/// Creates PD, CQ, (SRQ,) QP, arena and MR on `host`.
pub fn make_side(
    sim: &mut Sim<Host>,
    host: usize,
    arena_len: usize,
    srq: Option<(u32, u32)>,
    tweak: fn(&mut QpAttr),
) -> Side {
    let h = sim.node_mut(host);
    let region = h.add_arena(arena_len);
    let pd = h.alloc_pd();
    let cq = h.create_cq(4096);
    let srq = srq.map(|(depth, limit)| {
        h.engine
            .rnic_mut()
            .create_srq(pd, depth, iwarp_types::MAX_SGE as u32, limit)
            .expect("create_srq")
            .0
    });
    let mut attr = qp_attr(pd, cq);
    attr.srq = srq;
    tweak(&mut attr);
    let qp = h.create_qp(&attr);
    let all = Access::LOCAL_READ
        | Access::LOCAL_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_WRITE
        | Access::MW_BIND;
    let mr = h.reg_mr(pd, region, 0, arena_len as u64, all);
    Side {
        host,
        pd,
        cq,
        qp,
        srq,
        region,
        mr,
    }
}

impl Pair {
    /// Two hosts, set up and connected.
    pub fn new(seed: u64, opts: PairOptions) -> Pair {
        let mut sim = sim_of_hosts(2, opts.link, seed, opts.engine);
        let a = make_side(&mut sim, 0, opts.arena_len, opts.srq, opts.qp);
        let b = make_side(&mut sim, 1, opts.arena_len, opts.srq, opts.qp);
        let connected = connect(&mut sim, 0, a.qp, 1, b.qp, &opts.connect);
        Pair {
            sim,
            a,
            b,
            connected,
        }
    }

    /// Two hosts with their objects, not connected yet.
    pub fn unconnected(seed: u64, opts: PairOptions) -> (Sim<Host>, Side, Side) {
        let mut sim = sim_of_hosts(2, opts.link, seed, opts.engine);
        let a = make_side(&mut sim, 0, opts.arena_len, opts.srq, opts.qp);
        let b = make_side(&mut sim, 1, opts.arena_len, opts.srq, opts.qp);
        (sim, a, b)
    }

    /// The host of a side.
    pub fn host(&mut self, side: Side) -> &mut Host {
        self.sim.node_mut(side.host)
    }

    /// Runs until `side`'s CQ collected at least `n` completions; returns them all.
    pub fn wait_cqes(&mut self, side: Side, n: usize, max: Duration) -> Vec<Cqe> {
        self.sim
            .run_until(max, |s| s.node(side.host).cqe_count(side.cq) >= n);
        self.host(side).take_cqes(side.cq)
    }

    /// The ULP's first message: without peer-to-peer RTR the MPA responder may not send
    /// (nor process its send queue) before the initiator's first FPDU arrived, so the
    /// initiator sends a zero-length Send that the responder receives.
    pub fn hello(&mut self) {
        let (a, b) = (self.a, self.b);
        let recv = RecvWr {
            wr_id: u64::MAX,
            sgl: SgList::new(),
        };
        match b.srq {
            Some(srq) => self.host(b).post_srq_recv(srq, &recv),
            None => self.host(b).post_recv(b.qp, &recv),
        }
        .expect("hello: post_recv");
        let wr = SendWr {
            wr_id: u64::MAX,
            op: iwarp_types::SendOp::Send,
            sgl: SgList::new(),
            flags: iwarp_types::SendFlags::SIGNALED,
        };
        self.host(a).post_send(a.qp, &wr).expect("hello: post_send");
        let ca = self.wait_cqes(a, 1, Duration::from_secs(30));
        let cb = self.wait_cqes(b, 1, Duration::from_secs(30));
        assert!(
            ca.len() == 1 && ca[0].status == iwarp_types::WcStatus::Success,
            "hello: {ca:?}"
        );
        assert!(
            cb.len() == 1 && cb[0].status == iwarp_types::WcStatus::Success,
            "hello: {cb:?}"
        );
    }

    /// Fills `len` bytes of `side`'s arena at `offset` with seeded data; returns them.
    pub fn fill_random(&mut self, side: Side, offset: usize, len: usize) -> Vec<u8> {
        let mut data = vec![0u8; len];
        self.sim.rng().fill_bytes(&mut data);
        self.host(side).arena_mut(side.region)[offset..offset + len].copy_from_slice(&data);
        data
    }

    /// The bytes of `side`'s arena.
    pub fn bytes(&self, side: Side, offset: usize, len: usize) -> &[u8] {
        &self.sim.node(side.host).arena(side.region)[offset..offset + len]
    }
}
