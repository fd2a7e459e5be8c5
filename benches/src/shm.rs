//! The shared-memory verbs path in one process, for counting its work: two engines over
//! the in-memory link of [`crate::pair`] (virtual time), each with an
//! `iwarp_shm_service::ShmService` and a client that plays the `iwarp-verbs` library's
//! part on rings in ordinary memory (SQ and RQ slots written and doorbells rung, CQ slots
//! popped and decoded, as `Qp::post_send` / `Cq::poll` do). The workload is `iwarp-perf
//! send_lat`'s: A posts a signaled SEND of `size` bytes, B's receive completes, B reposts
//! it and echoes a signaled SEND of the same size, A's receive completes and A reposts it;
//! four completions per round trip. Each side's turn is one iteration of the daemon's core
//! loop (frames received, timers, the service's poll, engine events, frames sent), and
//! each client polls after its side's turn.
//!
//! Hardware counters are not available on every machine (a VM without a PMU); run
//! `iwarp-shm-pingpong` under `valgrind --tool=callgrind --toggle-collect='*measured_round_trips*'`
//! to count the instructions of the round trips alone (the set-up and a warm-up are not
//! collected), see docs/BENCHMARKS.md.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration as StdDuration;

use iwarp_engine::{AcceptParams, ConnectParams, Engine, EngineConfig, PrivateData};
use iwarp_mpa::CrcPolicy;
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_runtime::App;
use iwarp_shm_ring::{
    decode_cqe, encode_recv_wr, encode_send_wr, Consumer, CqControl, DoorbellBlock, Producer,
    Region, RingLayout, CQE_SLOT_SIZE, DOORBELL_BLOCK_BYTES,
};
use iwarp_shm_service::{
    service_channel, CmNotice, RingSpec, ServiceHandle, ServiceNotice, ServiceReply,
    ServiceRequest, ShmService, WorkRing,
};
use iwarp_types::{
    Access, Cqe, Duration, Instant, QpId, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag,
    VecMemory, WcOpcode, WcStatus,
};

use crate::pair::{BenchError, ETH_HEADER_LEN};

const CLIENT: u32 = 1;
const QP_HANDLE: u32 = 42;
const CQ_HANDLE: u32 = 9;
const SQ_BIT: u32 = 3;
const RQ_BIT: u32 = 70;
const PORT: u16 = 5000;
const ARENA: usize = 1 << 16;
/// Receives each side keeps posted.
const RECVS: u64 = 4;
/// CQ depth asked for, and the ring's entries (depth + 1 rounded up to a power of two:
/// what the control plane allocates).
const CQ_DEPTH: u32 = 64;
const CQ_ENTRIES: u32 = 128;
const MTU: usize = 9000;

fn err(what: impl core::fmt::Debug, context: &str) -> BenchError {
    BenchError(format!("{context}: {what:?}"))
}

/// One engine, its service and the client's end of the rings.
struct Side {
    eng: Engine,
    mem: VecMemory,
    svc: ShmService,
    h: ServiceHandle,
    doorbells: DoorbellBlock,
    stag: Stag,
    /// The engine's QP.
    qp: QpId,
    cq_ring: Consumer,
    sq: Producer,
    rq: Producer,
    notices: Vec<ServiceNotice>,
    /// Receive completions seen (and reposted).
    recvs: u64,
    /// Send completions seen.
    sends: u64,
    /// Scratch of one poll.
    cqes: Vec<Cqe>,
}

impl Side {
    fn new(last: u8) -> Result<Side, BenchError> {
        let mut cfg = EngineConfig {
            mac: [0x02, 0, 0, 0, 0, last],
            ipv4: Ipv4Addr::new(198, 18, 0, last),
            isn_secret: [last; 16],
            stag_seed: u64::from(last),
            mtu: MTU,
            checksum_offload: true,
            ..EngineConfig::default()
        };
        cfg.tcp.mss_bytes = u16::MAX;
        // As config/examples/perf-loopback.toml: no delayed ACK, MPA CRC.
        cfg.tcp.delayed_ack_us = 0;
        cfg.mpa.crc = CrcPolicy::Request;
        let eng = Engine::try_new(cfg).map_err(|e| err(e, "engine config"))?;
        let mut mem = VecMemory::new();
        let region = mem.add_arena(ARENA);
        let (h, svc) = service_channel(0, 64);
        let doorbells = DoorbellBlock::new(Region::alloc(DOORBELL_BLOCK_BYTES))
            .map_err(|e| err(e, "doorbells"))?;
        let control = CqControl::new(Region::alloc(64)).map_err(|e| err(e, "CQ control"))?;
        let lay = |l: Result<RingLayout, _>, what| l.map_err(|e| err(e, what));
        let cq_lay = lay(RingLayout::completion_queue(CQ_ENTRIES), "CQ layout")?;
        let cq_region = Region::alloc(cq_lay.total_bytes());
        let cq_ring = Consumer::init(cq_region.clone(), cq_lay).map_err(|e| err(e, "CQ ring"))?;
        let sq_lay = lay(RingLayout::send_queue(32), "SQ layout")?;
        let sq_region = Region::alloc(sq_lay.total_bytes());
        let sq = Producer::init(sq_region.clone(), sq_lay).map_err(|e| err(e, "SQ ring"))?;
        let rq_lay = lay(RingLayout::recv_queue(32), "RQ layout")?;
        let rq_region = Region::alloc(rq_lay.total_bytes());
        let rq = Producer::init(rq_region.clone(), rq_lay).map_err(|e| err(e, "RQ ring"))?;
        let mut s = Side {
            eng,
            mem,
            svc,
            h,
            doorbells: doorbells.clone(),
            stag: Stag(0),
            qp: QpId(0),
            cq_ring,
            sq,
            rq,
            notices: Vec::new(),
            recvs: 0,
            sends: 0,
            cqes: Vec::with_capacity(16),
        };
        s.call(ServiceRequest::AttachClient {
            client: CLIENT,
            doorbells,
        })?;
        let ServiceReply::Pd(pd) = s.call(ServiceRequest::AllocPd { client: CLIENT })? else {
            return Err(BenchError("AllocPd: unexpected reply".into()));
        };
        s.call(ServiceRequest::AddArena {
            client: CLIENT,
            arena: 7,
            region,
        })?;
        let access =
            Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let attr = MrAttr {
            pd,
            region,
            region_offset: 0,
            len: ARENA as u64,
            va: 0,
            zero_based: true,
            access,
            key: 0x11,
            remote_access_flag: true,
        };
        let ServiceReply::Stag(stag) = s.call(ServiceRequest::RegMr {
            client: CLIENT,
            attr,
            at: None,
        })?
        else {
            return Err(BenchError("RegMr: unexpected reply".into()));
        };
        s.stag = stag;
        let ServiceReply::Cq { cq, .. } = s.call(ServiceRequest::CreateCq {
            client: CLIENT,
            cq: CQ_HANDLE,
            depth: CQ_DEPTH,
            ring: RingSpec {
                region: cq_region,
                entries: CQ_ENTRIES,
            },
            control,
        })?
        else {
            return Err(BenchError("CreateCq: unexpected reply".into()));
        };
        let attr = QpAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            sq_depth: 16,
            rq_depth: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            ord: 8,
            ird: 8,
            inbound_read: true,
            inbound_write: true,
            bind_enabled: false,
            privileged: false,
            fast_reg: false,
        };
        let r = s.call(ServiceRequest::CreateQp {
            client: CLIENT,
            qp: QP_HANDLE,
            attr,
            sq_sig_all: false,
            sq: WorkRing {
                ring: RingSpec {
                    region: sq_region,
                    entries: 32,
                },
                doorbell: SQ_BIT,
            },
            rq: Some(WorkRing {
                ring: RingSpec {
                    region: rq_region,
                    entries: 32,
                },
                doorbell: RQ_BIT,
            }),
        })?;
        let ServiceReply::Qp { qp, .. } = r else {
            return Err(err(r, "CreateQp"));
        };
        s.qp = qp;
        Ok(s)
    }

    /// A control call: the request is made by a helper thread (as the control thread
    /// would) while this thread polls the service until the reply came.
    fn call(&mut self, req: ServiceRequest) -> Result<ServiceReply, BenchError> {
        let Side {
            eng, mem, svc, h, ..
        } = self;
        let what = format!("{req:?}");
        std::thread::scope(|sc| {
            let t = sc.spawn(move || h.call(req, StdDuration::from_secs(10)));
            while !t.is_finished() {
                App::<VecMemory>::poll(svc, Instant::ZERO, eng, mem);
                std::thread::yield_now();
            }
            match t.join() {
                Ok(r) => r.map_err(|e| err(e, &what)),
                Err(_) => Err(BenchError(format!("{what}: the calling thread panicked"))),
            }
        })
    }

    fn post_recv(&mut self, wr_id: u64) {
        let wr = RecvWr {
            wr_id,
            sgl: sgl(0, ARENA as u32 / 2, self.stag),
        };
        let pushed = self.rq.push(&encode_recv_wr(&wr)).is_ok();
        debug_assert!(pushed, "the RQ ring holds the receives");
        self.doorbells.ring(RQ_BIT);
    }

    fn post_send(&mut self, wr_id: u64, len: u32) {
        let wr = SendWr {
            wr_id,
            op: SendOp::Send,
            sgl: sgl(ARENA as u64 / 2, len, self.stag),
            flags: SendFlags::SIGNALED,
        };
        let pushed = self.sq.push(&encode_send_wr(&wr)).is_ok();
        debug_assert!(pushed, "the SQ ring holds the sends");
        self.doorbells.ring(SQ_BIT);
    }

    /// `ibv_poll_cq`: pops and decodes every completion in the CQ ring.
    fn poll_cq(&mut self) -> Result<(), BenchError> {
        self.cqes.clear();
        let mut b = [0u8; CQE_SLOT_SIZE];
        while self.cq_ring.pop(&mut b).map_err(|e| err(e, "CQ ring"))? {
            self.cqes
                .push(decode_cqe(&b).map_err(|e| err(e, "CQ slot"))?);
        }
        for c in &self.cqes {
            if c.status != WcStatus::Success || c.qp != QpId(QP_HANDLE) {
                return Err(err(c, "completion"));
            }
            match c.opcode {
                WcOpcode::Recv => self.recvs += 1,
                _ => self.sends += 1,
            }
        }
        Ok(())
    }

    /// Receive completions in the last poll (their WRs are reposted by the caller).
    fn polled_recvs(&self) -> impl Iterator<Item = Cqe> + '_ {
        self.cqes
            .iter()
            .copied()
            .filter(|c| c.opcode == WcOpcode::Recv)
    }

    /// One iteration of the daemon's core loop for this side (`iwarp_runtime::Core::
    /// run_once`): the frames received, the engine's timers, the service's poll, the
    /// engine's events to the service, then the frames to send (into `tx`; returns how
    /// many). Notices are collected.
    fn turn(
        &mut self,
        now: Instant,
        rx: &[Vec<u8>],
        tx: &mut Vec<Vec<u8>>,
        buf: &mut [u8],
    ) -> usize {
        let mut pass = self.eng.receiver(now);
        for f in rx {
            pass.handle_frame(f, &mut self.mem);
        }
        drop(pass);
        if self.eng.poll_timeout().is_some_and(|t| t <= now) {
            self.eng.handle_timeout(now, &mut self.mem);
        }
        App::<VecMemory>::poll(&mut self.svc, now, &mut self.eng, &mut self.mem);
        while let Some(ev) = self.eng.poll_event() {
            App::<VecMemory>::on_event(&mut self.svc, now, &mut self.eng, &mut self.mem, &ev);
        }
        let mut n = 0;
        let mut pass = self.eng.transmitter(now, &self.mem);
        while let Some(len) = pass.next(buf) {
            if tx.len() <= n {
                tx.push(Vec::with_capacity(buf.len()));
            }
            tx[n].clear();
            tx[n].extend_from_slice(&buf[..len]);
            n += 1;
        }
        drop(pass);
        while let Some(notice) = self.h.poll_notice() {
            self.notices.push(notice);
        }
        n
    }
}

fn sgl(addr: u64, length: u32, lkey: Stag) -> SgList {
    SgList::from_slice(&[Sge { addr, length, lkey }]).unwrap_or_default()
}

/// Two sides with connected QPs and receives posted.
pub struct ShmPingPong {
    a: Side,
    b: Side,
    now: Instant,
    /// Frames A sent in its last turn (`n_ab` of them), B in its last turn.
    ab: Vec<Vec<u8>>,
    n_ab: usize,
    ba: Vec<Vec<u8>>,
    n_ba: usize,
    buf: Vec<u8>,
    size: u32,
    /// Shuttle rounds so far.
    pub rounds: u64,
    /// Round trips so far.
    pub round_trips: u64,
}

impl ShmPingPong {
    /// Sets both sides up, connects them and posts the receives; messages of `size` bytes.
    pub fn new(size: u32) -> Result<ShmPingPong, BenchError> {
        if size as usize > ARENA / 2 {
            return Err(BenchError(format!("size {size} above {}", ARENA / 2)));
        }
        let mut p = ShmPingPong {
            a: Side::new(1)?,
            b: Side::new(2)?,
            now: Instant(1_000_000_000),
            ab: Vec::new(),
            n_ab: 0,
            ba: Vec::new(),
            n_ba: 0,
            buf: vec![0; MTU + ETH_HEADER_LEN],
            size,
            rounds: 0,
            round_trips: 0,
        };
        p.connect()?;
        for i in 0..RECVS {
            p.a.post_recv(i);
            p.b.post_recv(i);
        }
        // The services take the receives before the first SEND.
        p.round();
        Ok(p)
    }

    /// A's turn: it receives what B sent in its last turn.
    fn turn_a(&mut self) {
        self.n_ab = self
            .a
            .turn(self.now, &self.ba[..self.n_ba], &mut self.ab, &mut self.buf);
    }

    /// B's turn: it receives what A sent in its last turn; the clock advances 1 µs.
    fn turn_b(&mut self) {
        self.n_ba = self
            .b
            .turn(self.now, &self.ab[..self.n_ab], &mut self.ba, &mut self.buf);
        self.now = Instant(self.now.0 + Duration::from_micros(1).0);
        self.rounds += 1;
    }

    /// One shuttle round: A's turn, then B's.
    fn round(&mut self) {
        self.turn_a();
        self.turn_b();
    }

    fn connect(&mut self) -> Result<(), BenchError> {
        self.b.call(ServiceRequest::Listen {
            client: CLIENT,
            cm_id: 100,
            port: PORT,
            backlog: 4,
        })?;
        let remote = SocketAddrV4::new(self.b.eng.config().ipv4, PORT);
        let r = self.a.call(ServiceRequest::Connect {
            client: CLIENT,
            cm_id: 200,
            qp: self.a.qp,
            remote,
            params: ConnectParams {
                private_data: PrivateData::EMPTY,
                ird: 8,
                ord: 8,
                p2p: false,
            },
        })?;
        if !matches!(r, ServiceReply::Connecting { .. }) {
            return Err(err(r, "Connect"));
        }
        let mut conn = None;
        for _ in 0..10_000 {
            self.round();
            conn = self.b.notices.iter().find_map(|n| match n {
                ServiceNotice::Cm {
                    event: CmNotice::ConnectRequest { conn, .. },
                    ..
                } => Some(*conn),
                _ => None,
            });
            if conn.is_some() {
                break;
            }
        }
        let conn = conn.ok_or_else(|| BenchError("no connection request".into()))?;
        self.b.call(ServiceRequest::Accept {
            client: CLIENT,
            cm_id: 101,
            conn,
            qp: self.b.qp,
            params: AcceptParams {
                private_data: PrivateData::EMPTY,
                ird: 8,
                ord: 8,
            },
        })?;
        let established = |s: &Side| {
            s.notices.iter().any(|n| {
                matches!(
                    n,
                    ServiceNotice::Cm {
                        event: CmNotice::Established { .. },
                        ..
                    }
                )
            })
        };
        for _ in 0..10_000 {
            self.round();
            if established(&self.a) && established(&self.b) {
                return Ok(());
            }
        }
        Err(BenchError("not established".into()))
    }

    /// One send_lat round trip: A sends, B echoes, until A's receive completed (A's and
    /// B's send completions are polled on the way, as `iwarp-perf` does). Each client
    /// polls after its own side's turn.
    pub fn round_trip(&mut self) -> Result<(), BenchError> {
        let i = self.round_trips;
        self.a.post_send(i, self.size);
        let mut echoed = false;
        for _ in 0..10_000 {
            self.turn_a();
            self.a.poll_cq()?;
            let recvs: Vec<Cqe> = self.a.polled_recvs().collect();
            if let Some(c) = recvs.first() {
                if c.byte_len != self.size || !echoed {
                    return Err(err(c, "A's receive"));
                }
                self.a.post_recv(c.wr_id);
                self.round_trips += 1;
                return Ok(());
            }
            self.turn_b();
            self.b.poll_cq()?;
            let recvs: Vec<Cqe> = self.b.polled_recvs().collect();
            for c in recvs {
                if c.byte_len != self.size || echoed {
                    return Err(err(c, "B's receive"));
                }
                self.b.post_recv(c.wr_id);
                self.b.post_send(i, self.size);
                echoed = true;
            }
        }
        Err(BenchError(format!("round trip {i} did not finish")))
    }

    /// Receive and send completions polled by A and B so far.
    pub fn completions(&self) -> (u64, u64, u64, u64) {
        (self.a.recvs, self.a.sends, self.b.recvs, self.b.sends)
    }
}

/// `n` round trips; kept out of line so that `callgrind --toggle-collect` can count it
/// alone.
#[inline(never)]
pub fn measured_round_trips(p: &mut ShmPingPong, n: u64) -> Result<(), BenchError> {
    for _ in 0..n {
        p.round_trip()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_complete_with_four_completions_each() {
        let mut p = ShmPingPong::new(64).unwrap();
        measured_round_trips(&mut p, 50).unwrap();
        // Late send completions come with the next round trip: drain them.
        for _ in 0..20 {
            p.round();
            p.a.poll_cq().unwrap();
            p.b.poll_cq().unwrap();
        }
        assert_eq!(p.completions(), (50, 50, 50, 50));
        assert!(p.rounds > 50);
    }
}
