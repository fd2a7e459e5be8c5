//! The service's test kit: two engines over an in-memory wire, each with a
//! [`ShmService`] and a client playing the library's part on rings in ordinary memory.
//! The service's own tests and the `service_rings` fuzz target (`dataplane/fuzz-targets`)
//! use it (feature `testkit`).

use core::net::{Ipv4Addr, SocketAddrV4};

use iwarp_engine::{AcceptParams, ConnectParams, Engine, EngineConfig, PrivateData};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_runtime::App;
use iwarp_shm_ring::{
    decode_cqe, encode_recv_wr, encode_send_wr, Consumer, CqControl, DoorbellBlock, Producer,
    Region, RingLayout, CQE_SLOT_SIZE, DOORBELL_BLOCK_BYTES,
};
use iwarp_types::{
    Access, CqId, Cqe, Duration, Instant, PdId, QpId, QpState, RecvWr, RegionId, SendFlags, SendOp,
    SendWr, SgList, Sge, Stag, VecMemory,
};

use crate::{
    service_channel, CmNotice, RingSpec, ServiceError, ServiceHandle, ServiceNotice, ServiceReply,
    ServiceRequest, ShmService, WorkRing,
};

pub const ARENA: usize = 1 << 16;
pub const PORT: u16 = 5000;

/// One engine, its service and its client's objects (a PD, an MR over the first half of
/// the arena, a CQ, a QP with SQ and RQ rings).
pub struct Side {
    pub eng: Engine,
    pub mem: VecMemory,
    pub svc: ShmService,
    pub h: ServiceHandle,
    pub next_id: u64,
    pub notices: Vec<ServiceNotice>,
    pub unclaimed: Vec<iwarp_engine::Event>,
    pub doorbells: DoorbellBlock,
    pub pd: PdId,
    pub stag: Stag,
    pub cq: CqId,
    pub cq_ring: Consumer,
    pub cq_region: Region,
    pub cq_control: CqControl,
    pub qp: QpId,
    pub sq: Producer,
    pub rq: Producer,
}

pub const QP_HANDLE: u32 = 42;
pub const SQ_BIT: u32 = 3;
pub const RQ_BIT: u32 = 70;

/// The engine configuration of side `last` (10.0.0.`last`).
pub fn cfg(last: u8) -> EngineConfig {
    EngineConfig {
        mac: [0x02, 0, 0, 0, 0, last],
        ipv4: Ipv4Addr::new(10, 0, 0, last),
        isn_secret: [last; 16],
        stag_seed: u64::from(last),
        ..EngineConfig::default()
    }
}

impl Side {
    pub fn call(&mut self, req: ServiceRequest) -> Result<ServiceReply, ServiceError> {
        self.call_at(Instant(0), req)
    }

    pub fn call_at(
        &mut self,
        now: Instant,
        req: ServiceRequest,
    ) -> Result<ServiceReply, ServiceError> {
        let id = self.next_id;
        self.next_id += 1;
        assert!(self.svc.shared.requests.push((id, req)).is_ok());
        App::<VecMemory>::poll(&mut self.svc, now, &mut self.eng, &mut self.mem);
        let (rid, r) = self.svc.shared.replies.pop().expect("a reply");
        assert_eq!(rid, id);
        r
    }

    pub fn new(last: u8) -> Side {
        let mut eng = Engine::new(cfg(last));
        let mut mem = VecMemory::new();
        let region = mem.add_arena(ARENA);
        let (h, svc) = service_channel(0, 64);
        let doorbells = DoorbellBlock::new(Region::alloc(DOORBELL_BLOCK_BYTES)).unwrap();
        let cq_control = CqControl::new(Region::alloc(64)).unwrap();
        let lay = |l: Result<RingLayout, _>| l.unwrap();
        // The sub-ring is the CQ: depth 64 needs 65 slots (one kept for the resize
        // marker), 128 as the control plane rounds it.
        let cq_lay = lay(RingLayout::completion_queue(128));
        let cq_region = Region::alloc(cq_lay.total_bytes());
        let cq_ring = Consumer::init(cq_region.clone(), cq_lay).unwrap();
        let sq_lay = lay(RingLayout::send_queue(32));
        let sq_region = Region::alloc(sq_lay.total_bytes());
        let sq = Producer::init(sq_region.clone(), sq_lay).unwrap();
        let rq_lay = lay(RingLayout::recv_queue(32));
        let rq_region = Region::alloc(rq_lay.total_bytes());
        let rq = Producer::init(rq_region.clone(), rq_lay).unwrap();
        let _ = &mut eng;
        let mut s = Side {
            eng,
            mem,
            svc,
            h,
            next_id: 1,
            notices: Vec::new(),
            unclaimed: Vec::new(),
            doorbells: doorbells.clone(),
            pd: PdId(0),
            stag: Stag(0),
            cq: CqId(0),
            cq_ring,
            cq_region: cq_region.clone(),
            cq_control: cq_control.clone(),
            qp: QpId(0),
            sq,
            rq,
        };
        let client = 1;
        s.call(ServiceRequest::AttachClient { client, doorbells })
            .unwrap();
        let ServiceReply::Pd(pd) = s.call(ServiceRequest::AllocPd { client }).unwrap() else {
            panic!()
        };
        s.pd = pd;
        s.call(ServiceRequest::AddArena {
            client,
            arena: 7,
            region,
        })
        .unwrap();
        let access =
            Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let attr = MrAttr {
            pd,
            region,
            region_offset: 0,
            len: ARENA as u64 / 2,
            va: 0,
            zero_based: true,
            access,
            key: 0x11,
            remote_access_flag: true,
        };
        let ServiceReply::Stag(stag) = s
            .call(ServiceRequest::RegMr {
                client,
                attr,
                at: None,
            })
            .unwrap()
        else {
            panic!()
        };
        s.stag = stag;
        let ServiceReply::Cq { cq, .. } = s
            .call(ServiceRequest::CreateCq {
                client,
                cq: 9,
                depth: 64,
                ring: RingSpec {
                    region: cq_region,
                    entries: 128,
                },
                control: cq_control,
            })
            .unwrap()
        else {
            panic!()
        };
        s.cq = cq;
        let attr = QpAttr {
            sq_depth: 32,
            rq_depth: 32,
            max_send_sge: 4,
            max_recv_sge: 4,
            ord: 8,
            ird: 8,
            inbound_read: true,
            inbound_write: true,
            ..QpAttr::new(pd, cq)
        };
        let ServiceReply::Qp { qp, .. } = s
            .call(ServiceRequest::CreateQp {
                client,
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
            })
            .unwrap()
        else {
            panic!()
        };
        s.qp = qp;
        s
    }

    /// One round: service poll, then the engine's events.
    pub fn turn(&mut self, now: Instant) -> Vec<Vec<u8>> {
        App::<VecMemory>::poll(&mut self.svc, now, &mut self.eng, &mut self.mem);
        self.eng.handle_timeout(now, &mut self.mem);
        let mut frames = Vec::new();
        let mut buf = [0u8; 1514];
        while let Some(n) = self.eng.poll_transmit(now, &mut buf, &self.mem) {
            frames.push(buf[..n].to_vec());
        }
        while let Some(ev) = self.eng.poll_event() {
            if !App::<VecMemory>::on_event(&mut self.svc, now, &mut self.eng, &mut self.mem, &ev) {
                self.unclaimed.push(ev);
            }
        }
        while let Some(n) = self.h.poll_notice() {
            self.notices.push(n);
        }
        frames
    }

    pub fn post_send(&mut self, wr: &SendWr) {
        self.sq.push(&encode_send_wr(wr)).unwrap();
        self.doorbells.ring(SQ_BIT);
    }

    /// A receive of `len` bytes at `addr` of the MR, through the RQ ring and its doorbell.
    pub fn post_recv(&mut self, wr_id: u64, addr: u64, len: u32) {
        let wr = RecvWr {
            wr_id,
            sgl: sgl(addr, len, self.stag),
        };
        self.rq.push(&encode_recv_wr(&wr)).unwrap();
        self.doorbells.ring(RQ_BIT);
    }

    /// A signalled Send of `bytes`, written at the start of the MR first.
    pub fn send_bytes(&mut self, wr_id: u64, bytes: &[u8]) {
        self.mem.arena_mut(RegionId(0))[..bytes.len()].copy_from_slice(bytes);
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::Send,
            sgl: sgl(0, bytes.len() as u32, self.stag),
            flags: SendFlags::SIGNALED,
        });
    }

    pub fn cqes(&mut self) -> Vec<Cqe> {
        let mut out = Vec::new();
        let mut b = [0u8; CQE_SLOT_SIZE];
        while self.cq_ring.pop(&mut b).unwrap() {
            out.push(decode_cqe(&b).unwrap());
        }
        out
    }
}

/// A frame with the TCP FIN flag (TCP flags at 14 + 20 + 13, FIN = 0x01).
pub fn carries_fin(f: &[u8]) -> bool {
    f.get(47).is_some_and(|flags| flags & 0x01 != 0)
}

/// Two sides over a wire that loses what `b_drop` says of B's frames.
pub struct World {
    pub a: Side,
    pub b: Side,
    pub now: Instant,
    /// Which of B's frames are lost on the way to A.
    pub b_drop: fn(&[u8]) -> bool,
}

impl Default for World {
    fn default() -> World {
        World::new()
    }
}

impl World {
    pub fn new() -> World {
        World {
            a: Side::new(1),
            b: Side::new(2),
            now: Instant(1_000_000_000),
            b_drop: |_| false,
        }
    }

    pub fn step(&mut self) {
        let fa = self.a.turn(self.now);
        for f in fa {
            self.b.eng.handle_frame(self.now, &f, &mut self.b.mem);
        }
        let fb = self.b.turn(self.now);
        for f in fb.into_iter().filter(|f| !(self.b_drop)(f)) {
            self.a.eng.handle_frame(self.now, &f, &mut self.a.mem);
        }
        self.now = Instant(self.now.0 + Duration::from_micros(100).0);
    }

    pub fn run_until(&mut self, mut f: impl FnMut(&mut World) -> bool) -> bool {
        for _ in 0..5000 {
            self.step();
            if f(self) {
                return true;
            }
        }
        false
    }

    /// A connects to B through the services; both QPs end in RTS.
    pub fn connect(&mut self) {
        self.b
            .call(ServiceRequest::Listen {
                client: 1,
                cm_id: 100,
                port: PORT,
                backlog: 4,
            })
            .unwrap();
        let remote = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), PORT);
        let qp = self.a.qp;
        let r = self.a.call(ServiceRequest::Connect {
            client: 1,
            cm_id: 200,
            qp,
            remote,
            params: ConnectParams {
                private_data: PrivateData::new(b"hi").unwrap(),
                ird: 8,
                ord: 8,
                p2p: false,
            },
        });
        assert!(matches!(r, Ok(ServiceReply::Connecting { .. })), "{r:?}");
        let mut conn = None;
        assert!(self.run_until(|w| {
            conn = w.b.notices.iter().find_map(|n| match n {
                ServiceNotice::Cm {
                    client: 1,
                    event:
                        CmNotice::ConnectRequest {
                            listen_cm_id: 100,
                            conn,
                            ..
                        },
                } => Some(*conn),
                _ => None,
            });
            conn.is_some()
        }));
        let qp = self.b.qp;
        self.b
            .call(ServiceRequest::Accept {
                client: 1,
                cm_id: 101,
                conn: conn.unwrap(),
                qp,
                params: AcceptParams {
                    private_data: PrivateData::EMPTY,
                    ird: 8,
                    ord: 8,
                },
            })
            .unwrap();
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
        assert!(self.run_until(|w| established(&w.a) && established(&w.b)));
        assert!(self.a.unclaimed.is_empty(), "{:?}", self.a.unclaimed);
        assert!(self.b.unclaimed.is_empty(), "{:?}", self.b.unclaimed);
    }
}

/// One SGE.
pub fn sgl(addr: u64, len: u32, lkey: Stag) -> SgList {
    SgList::from_slice(&[Sge {
        addr,
        length: len,
        lkey,
    }])
    .unwrap()
}

/// The QP's state, asked through the service.
pub fn qp_state(s: &mut Side) -> QpState {
    let qp = s.qp;
    match s.call(ServiceRequest::QueryQp { client: 1, qp }).unwrap() {
        ServiceReply::QpInfo(i) => i.state,
        r => panic!("{r:?}"),
    }
}
