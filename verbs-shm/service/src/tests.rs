//! Two engines over a lossless in-memory wire, each with a ShmService and a client
//! playing the library's part on rings in ordinary (shared) memory.

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
    SendWr, SgList, Sge, Stag, VecMemory, WcOpcode, WcStatus,
};

use crate::*;

const ARENA: usize = 1 << 16;
const PORT: u16 = 5000;

struct Side {
    eng: Engine,
    mem: VecMemory,
    svc: ShmService,
    h: ServiceHandle,
    next_id: u64,
    notices: Vec<ServiceNotice>,
    unclaimed: Vec<iwarp_engine::Event>,
    doorbells: DoorbellBlock,
    pd: PdId,
    stag: Stag,
    cq: CqId,
    cq_ring: Consumer,
    cq_region: Region,
    cq_control: CqControl,
    qp: QpId,
    sq: Producer,
    rq: Producer,
}

const QP_HANDLE: u32 = 42;
const SQ_BIT: u32 = 3;
const RQ_BIT: u32 = 70;

fn cfg(last: u8) -> EngineConfig {
    EngineConfig {
        mac: [0x02, 0, 0, 0, 0, last],
        ipv4: Ipv4Addr::new(10, 0, 0, last),
        isn_secret: [last; 16],
        stag_seed: u64::from(last),
        ..EngineConfig::default()
    }
}

impl Side {
    fn call(&mut self, req: ServiceRequest) -> Result<ServiceReply, ServiceError> {
        self.call_at(Instant(0), req)
    }

    fn call_at(&mut self, now: Instant, req: ServiceRequest) -> Result<ServiceReply, ServiceError> {
        let id = self.next_id;
        self.next_id += 1;
        assert!(self.svc.shared.requests.push((id, req)).is_ok());
        App::<VecMemory>::poll(&mut self.svc, now, &mut self.eng, &mut self.mem);
        let (rid, r) = self.svc.shared.replies.pop().expect("a reply");
        assert_eq!(rid, id);
        r
    }

    fn new(last: u8) -> Side {
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
    fn turn(&mut self, now: Instant) -> Vec<Vec<u8>> {
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

    fn post_send(&mut self, wr: &SendWr) {
        self.sq.push(&encode_send_wr(wr)).unwrap();
        self.doorbells.ring(SQ_BIT);
    }

    fn cqes(&mut self) -> Vec<Cqe> {
        let mut out = Vec::new();
        let mut b = [0u8; CQE_SLOT_SIZE];
        while self.cq_ring.pop(&mut b).unwrap() {
            out.push(decode_cqe(&b).unwrap());
        }
        out
    }
}

struct World {
    a: Side,
    b: Side,
    now: Instant,
    /// Which of B's frames are lost on the way to A.
    b_drop: fn(&[u8]) -> bool,
}

impl World {
    fn new() -> World {
        World {
            a: Side::new(1),
            b: Side::new(2),
            now: Instant(1_000_000_000),
            b_drop: |_| false,
        }
    }

    fn step(&mut self) {
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

    fn run_until(&mut self, mut f: impl FnMut(&mut World) -> bool) -> bool {
        for _ in 0..5000 {
            self.step();
            if f(self) {
                return true;
            }
        }
        false
    }

    /// A connects to B through the services; both QPs end in RTS.
    fn connect(&mut self) {
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

fn sgl(addr: u64, len: u32, lkey: Stag) -> SgList {
    SgList::from_slice(&[Sge {
        addr,
        length: len,
        lkey,
    }])
    .unwrap()
}

fn qp_state(s: &mut Side) -> QpState {
    let qp = s.qp;
    match s.call(ServiceRequest::QueryQp { client: 1, qp }).unwrap() {
        ServiceReply::QpInfo(i) => i.state,
        r => panic!("{r:?}"),
    }
}

#[test]
fn send_and_write_complete_into_the_client_ring() {
    let mut w = World::new();
    w.connect();
    // B posts a receive through its RQ ring.
    let stag_b = w.b.stag;
    w.b.rq
        .push(&encode_recv_wr(&RecvWr {
            wr_id: 0xb0,
            sgl: sgl(0x100, 256, stag_b),
        }))
        .unwrap();
    w.b.doorbells.ring(RQ_BIT);
    // The receive reaches B's engine before A's Send does.
    w.step();
    w.a.mem.arena_mut(RegionId(0))[0..5].copy_from_slice(b"hello");
    w.a.mem.arena_mut(RegionId(0))[64..69].copy_from_slice(b"world");
    w.a.cq_control.arm(false);
    let stag_a = w.a.stag;
    w.a.post_send(&SendWr {
        wr_id: 0xa1,
        op: SendOp::Send,
        sgl: sgl(0, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    w.a.post_send(&SendWr {
        wr_id: 0xa2,
        op: SendOp::Write {
            remote_to: 0x800,
            rkey: stag_b,
        },
        sgl: sgl(64, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    let mut got_a = Vec::new();
    let mut got_b = Vec::new();
    assert!(w.run_until(|w| {
        got_a.extend(w.a.cqes());
        got_b.extend(w.b.cqes());
        got_a.len() == 2 && got_b.len() == 1
    }));
    assert_eq!(got_a[0].wr_id, 0xa1);
    assert_eq!(got_a[0].status, WcStatus::Success);
    assert_eq!(got_a[0].qp, QpId(QP_HANDLE));
    assert_eq!(got_a[1].wr_id, 0xa2);
    assert_eq!(got_a[1].opcode, WcOpcode::Write);
    assert_eq!(got_a[1].qp, QpId(QP_HANDLE));
    assert_eq!(got_b[0].wr_id, 0xb0);
    assert_eq!(got_b[0].opcode, WcOpcode::Recv);
    assert_eq!(got_b[0].byte_len, 5);
    assert_eq!(got_b[0].qp, QpId(QP_HANDLE));
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x100..0x105], b"hello");
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x800..0x805], b"world");
    // The CQEs are in the ring as soon as the engine made them (while it handled the
    // frame); the wake-up follows when the engine's events are drained (the next turn
    // here, later in the same loop iteration in the daemon). A few turns more: still one.
    for _ in 0..3 {
        w.step();
    }
    // The armed CQ fired exactly once.
    let wakes =
        w.a.notices
            .iter()
            .filter(|n| matches!(n, ServiceNotice::CqWake { client: 1, cq: 9 }))
            .count();
    assert_eq!(wakes, 1);
    assert_eq!(w.a.cq_control.events(), 1);
}

#[test]
fn bad_slots_complete_in_error_and_change_nothing_else() {
    let mut w = World::new();
    w.connect();
    let stag_a = w.a.stag;
    let good = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_to: 0,
            rkey: w.b.stag,
        },
        sgl: sgl(0, 8, stag_a),
        flags: SendFlags::SIGNALED,
    };
    // Bad opcode.
    let mut slot = encode_send_wr(&SendWr { wr_id: 11, ..good });
    slot[8] = 99;
    w.a.sq.push(&slot).unwrap();
    // Too many SGEs.
    let mut slot = encode_send_wr(&SendWr { wr_id: 12, ..good });
    slot[9] = 7;
    w.a.sq.push(&slot).unwrap();
    // A foreign STag.
    w.a.sq
        .push(&encode_send_wr(&SendWr {
            wr_id: 13,
            sgl: sgl(0, 8, Stag(0x7777_7711)),
            ..good
        }))
        .unwrap();
    // Out of the MR's bounds (the MR covers half the arena).
    w.a.sq
        .push(&encode_send_wr(&SendWr {
            wr_id: 14,
            sgl: sgl(ARENA as u64 / 2 - 4, 8, stag_a),
            ..good
        }))
        .unwrap();
    // A FastReg naming an arena the client does not have.
    w.a.sq
        .push(&encode_send_wr(&SendWr {
            wr_id: 15,
            op: SendOp::FastReg {
                stag: Stag(0x100),
                region: RegionId(8),
                region_offset: 0,
                len: 64,
                va: 0,
                access: Access::LOCAL_READ,
                zero_based: true,
            },
            sgl: SgList::new(),
            flags: SendFlags::SIGNALED,
        }))
        .unwrap();
    // Then a good one.
    w.a.post_send(&SendWr { wr_id: 16, ..good });
    let mut got = Vec::new();
    assert!(w.run_until(|w| {
        got.extend(w.a.cqes());
        got.len() >= 6
    }));
    let by_id = |id: u64| got.iter().find(|c| c.wr_id == id).copied().unwrap();
    assert_eq!(by_id(11).status, WcStatus::InvalidWqe);
    assert_eq!(by_id(12).status, WcStatus::InvalidWqe);
    assert_ne!(by_id(13).status, WcStatus::Success);
    assert_ne!(by_id(14).status, WcStatus::Success);
    assert_eq!(by_id(15).status, WcStatus::InvalidPd);
    for id in 11..=15 {
        assert_eq!(by_id(id).qp, QpId(QP_HANDLE));
    }
    // Local protection errors may move the QP to Error (verbs): only the good WR after
    // them tells; decode errors never touch the QP.
    let snap = w.a.call(ServiceRequest::Snapshot).unwrap();
    let ServiceReply::Snapshot { clients, .. } = snap else {
        panic!()
    };
    assert!(clients[0].wrs_rejected >= 3);
    let _ = qp_state(&mut w.a);
}

#[test]
fn decode_errors_leave_the_qp_in_rts() {
    let mut w = World::new();
    w.connect();
    let stag_a = w.a.stag;
    let good = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_to: 0,
            rkey: w.b.stag,
        },
        sgl: sgl(0, 8, stag_a),
        flags: SendFlags::SIGNALED,
    };
    let mut slot = encode_send_wr(&SendWr { wr_id: 21, ..good });
    slot[8] = 99;
    w.a.sq.push(&slot).unwrap();
    w.a.post_send(&SendWr { wr_id: 22, ..good });
    let mut got = Vec::new();
    assert!(w.run_until(|w| {
        got.extend(w.a.cqes());
        got.len() >= 2
    }));
    assert_eq!(got[0].wr_id, 21);
    assert_eq!(got[0].status, WcStatus::InvalidWqe);
    assert_eq!(got[1].wr_id, 22);
    assert_eq!(got[1].status, WcStatus::Success);
    assert_eq!(qp_state(&mut w.a), QpState::Rts);
}

#[test]
fn stray_doorbells_are_ignored() {
    let mut w = World::new();
    w.connect();
    assert!(w.a.doorbells.ring(4095));
    assert!(!w.a.doorbells.ring(DOORBELL_BITS_FOR_TEST));
    for _ in 0..10 {
        w.step();
    }
    assert!(w.a.cqes().is_empty());
    let ServiceReply::Snapshot { clients, .. } = w.a.call(ServiceRequest::Snapshot).unwrap() else {
        panic!()
    };
    assert_eq!(clients[0].stray_doorbells, 1);
    assert_eq!(qp_state(&mut w.a), QpState::Rts);
}

const DOORBELL_BITS_FOR_TEST: u32 = iwarp_shm_ring::DOORBELL_BITS;

#[test]
fn detach_tears_everything_down_and_the_peer_sees_a_disconnect() {
    let mut w = World::new();
    w.connect();
    let r =
        w.a.call(ServiceRequest::DetachClient { client: 1 })
            .unwrap();
    let ServiceReply::Detached(freed) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        freed,
        Freed {
            conns: 1,
            qps: 1,
            srqs: 0,
            cqs: 1,
            stags: 1,
            pds: 1,
            listeners: 0,
            failed: 0
        }
    );
    assert!(w.run_until(|w| w.b.notices.iter().any(|n| matches!(
        n,
        ServiceNotice::Cm {
            event: CmNotice::Disconnected { .. },
            ..
        }
    ))));
    assert_eq!(
        w.a.call(ServiceRequest::AllocPd { client: 1 }).unwrap_err(),
        ServiceError::UnknownClient
    );
}

#[test]
fn objects_of_another_client_are_refused() {
    let mut w = World::new();
    let doorbells = DoorbellBlock::new(Region::alloc(DOORBELL_BLOCK_BYTES)).unwrap();
    w.a.call(ServiceRequest::AttachClient {
        client: 2,
        doorbells,
    })
    .unwrap();
    let pd = w.a.pd;
    assert!(matches!(
        w.a.call(ServiceRequest::DeallocPd { client: 2, pd }),
        Err(ServiceError::Invalid(_))
    ));
    let qp = w.a.qp;
    assert!(matches!(
        w.a.call(ServiceRequest::DestroyQp { client: 2, qp }),
        Err(ServiceError::Invalid(_))
    ));
    assert_eq!(qp_state(&mut w.a), QpState::Idle);
}

#[test]
fn handle_times_out_and_sees_the_core_go() {
    let (mut h, svc) = service_channel(3, 2);
    assert_eq!(h.core(), 3);
    assert_eq!(
        h.call(ServiceRequest::Fence, std::time::Duration::from_millis(5)),
        Err(ServiceError::Timeout)
    );
    drop(svc);
    assert_eq!(
        h.call(ServiceRequest::Fence, std::time::Duration::from_millis(5)),
        Err(ServiceError::CoreGone)
    );
}

#[test]
fn reg_mr_at_replicates_the_stag_of_another_core() {
    let mut a = Side::new(1);
    let mut b = Side::new(2);
    let stag = a.stag;
    let pd = b.pd;
    let attr = MrAttr {
        pd,
        region: RegionId(0),
        region_offset: 0,
        len: 4096,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE,
        key: 0x22,
        remote_access_flag: false,
    };
    let r = b.call(ServiceRequest::RegMr {
        client: 1,
        attr,
        at: Some(Stag((stag.0 & !0xff) | 0x22)),
    });
    // B's own MR may hold that index already (same seed pattern): either the same STag or
    // a defined error, never a different STag.
    match r {
        Ok(ServiceReply::Stag(s)) => assert_eq!(s.0 >> 8, stag.0 >> 8),
        Err(ServiceError::Verb(_)) => {}
        other => panic!("{other:?}"),
    }
    let _ = &mut a;
}

/// Posts `n` signaled 8-byte WRITEs from A in chunks of 16, stepping after each chunk
/// until it completed (A's client does not poll its CQ).
fn write_signaled(w: &mut World, n: u64) {
    let (stag_a, stag_b) = (w.a.stag, w.b.stag);
    for chunk in 0..n.div_ceil(16) {
        for i in chunk * 16..((chunk + 1) * 16).min(n) {
            w.a.sq
                .push(&encode_send_wr(&SendWr {
                    wr_id: i,
                    op: SendOp::Write {
                        remote_to: 0,
                        rkey: stag_b,
                    },
                    sgl: sgl(0, 8, stag_a),
                    flags: SendFlags::SIGNALED,
                }))
                .unwrap();
        }
        w.a.doorbells.ring(SQ_BIT);
        for _ in 0..30 {
            w.step();
        }
    }
}

fn async_notice(s: &Side, object: AsyncObject, kind: iwarp_types::AsyncEventKind) -> usize {
    s.notices
        .iter()
        .filter(|n| {
            matches!(n, ServiceNotice::Async { client: 1, object: o, kind: k }
                if *o == object && *k == kind)
        })
        .count()
}

#[test]
fn a_full_cq_ring_is_a_cq_overflow_never_an_overwrite() {
    let mut w = World::new();
    w.connect();
    // 128 slots hold 127 completions (one slot is kept for a resize marker).
    write_signaled(&mut w, 144);
    let got = w.a.cqes();
    assert_eq!(got.len(), 127);
    for (i, c) in got.iter().enumerate() {
        assert_eq!((c.wr_id, c.status), (i as u64, WcStatus::Success), "{c:?}");
        assert_eq!(c.qp, QpId(QP_HANDLE));
    }
    assert!(w.a.cq_control.overflows() >= 1);
    use iwarp_types::AsyncEventKind as K;
    assert_eq!(async_notice(&w.a, AsyncObject::Cq(9), K::CqOverflow), 1);
    assert_eq!(
        async_notice(&w.a, AsyncObject::Qp(QP_HANDLE), K::CqError),
        1
    );
    assert_ne!(qp_state(&mut w.a), QpState::Rts);
    let ServiceReply::Snapshot { clients, counters } = w.a.call(ServiceRequest::Snapshot).unwrap()
    else {
        panic!()
    };
    assert_eq!(clients[0].cqes, 127);
    assert!(clients[0].cq_ring_full >= 1);
    assert_eq!(counters.rings_corrupt, 0);
}

#[test]
fn a_broken_cq_consumer_index_is_a_ring_corrupt_notice() {
    let mut w = World::new();
    w.connect();
    // The client scribbles on its CQ ring's consumer index.
    let at = core::mem::offset_of!(iwarp_shm_ring::RingHeader, consumer_index);
    assert!(w.a.cq_region.store_u64(at, 1_000_000_007));
    write_signaled(&mut w, 144);
    let corrupt =
        w.a.notices
            .iter()
            .filter(|n| {
                matches!(
                    n,
                    ServiceNotice::RingCorrupt {
                        client: 1,
                        object: AsyncObject::Cq(9)
                    }
                )
            })
            .count();
    assert_eq!(corrupt, 1);
    use iwarp_types::AsyncEventKind as K;
    assert_eq!(async_notice(&w.a, AsyncObject::Cq(9), K::CqOverflow), 0);
    assert_ne!(qp_state(&mut w.a), QpState::Rts);
    let ServiceReply::Snapshot { counters, .. } = w.a.call(ServiceRequest::Snapshot).unwrap()
    else {
        panic!()
    };
    assert_eq!(counters.rings_corrupt, 1);
    // The daemon side keeps working: the other side's ring is untouched.
    let _ = w.b.cqes();
}

#[test]
fn resize_ends_the_old_sub_ring_with_a_marker() {
    let mut w = World::new();
    w.connect();
    write_signaled(&mut w, 3);
    let lay = RingLayout::completion_queue(256).unwrap();
    let region = Region::alloc(lay.total_bytes());
    let mut new_ring = Consumer::init(region.clone(), lay).unwrap();
    let cq = w.a.cq;
    let r = w.a.call(ServiceRequest::ResizeCq {
        client: 1,
        cq,
        depth: 200,
        ring: RingSpec {
            region: region.clone(),
            entries: 256,
        },
    });
    assert!(
        matches!(r, Ok(ServiceReply::Cq { depth: 255, .. })),
        "{r:?}"
    );
    // Too small a ring for the depth: refused, nothing moves.
    let small = Region::alloc(lay.total_bytes());
    let _ = Consumer::init(small.clone(), lay).unwrap();
    let r = w.a.call(ServiceRequest::ResizeCq {
        client: 1,
        cq,
        depth: 256,
        ring: RingSpec {
            region: small,
            entries: 256,
        },
    });
    assert!(matches!(r, Err(ServiceError::Invalid(_))), "{r:?}");
    write_signaled(&mut w, 2);
    let mut b = [0u8; CQE_SLOT_SIZE];
    let mut old = Vec::new();
    while w.a.cq_ring.pop(&mut b).unwrap() {
        old.push(b);
    }
    assert_eq!(old.len(), 4);
    for (i, slot) in old[..3].iter().enumerate() {
        assert_eq!(decode_cqe(slot).unwrap().wr_id, i as u64);
    }
    assert_eq!(old[3][22], CQE_FLAG_RING_MOVED);
    let mut new = Vec::new();
    while new_ring.pop(&mut b).unwrap() {
        new.push(decode_cqe(&b).unwrap().wr_id);
    }
    // `write_signaled` numbers from 0 again.
    assert_eq!(new, [0, 1]);
}

/// A Disconnect that overtakes WRs already in the SQ ring (posted, doorbell not yet
/// served) sends them first: the graceful close drains what was posted (the last RDMA
/// WRITE of a write-latency run was lost this way, and the peer waited for it forever).
#[test]
fn disconnect_sends_the_wrs_posted_before_it() {
    let mut w = World::new();
    w.connect();
    w.a.mem.arena_mut(RegionId(0))[64..69].copy_from_slice(b"last!");
    let (stag_a, stag_b) = (w.a.stag, w.b.stag);
    // In the ring, no doorbell: the service has not seen it when Disconnect comes.
    w.a.sq
        .push(&encode_send_wr(&SendWr {
            wr_id: 0xa9,
            op: SendOp::Write {
                remote_to: 0x900,
                rkey: stag_b,
            },
            sgl: sgl(64, 5, stag_a),
            flags: SendFlags::SIGNALED,
        }))
        .unwrap();
    let qp = w.a.qp;
    w.a.call(ServiceRequest::Disconnect { client: 1, qp })
        .unwrap();
    let mut got = Vec::new();
    assert!(w.run_until(|w| {
        got.extend(w.a.cqes());
        !got.is_empty()
            && w.b.notices.iter().any(|n| {
                matches!(
                    n,
                    ServiceNotice::Cm {
                        event: CmNotice::Disconnected { .. },
                        ..
                    }
                )
            })
    }));
    assert_eq!(got[0].wr_id, 0xa9);
    assert_eq!(got[0].status, WcStatus::Success);
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x900..0x905], b"last!");
}

#[test]
fn accept_serves_the_receives_posted_before_it() {
    let mut w = World::new();
    let stag_b = w.b.stag;
    // In B's RQ ring, no doorbell: the service has not seen it when Accept comes, and
    // A's Send may follow the MPA Reply at once.
    w.b.rq
        .push(&encode_recv_wr(&RecvWr {
            wr_id: 0xb7,
            sgl: sgl(0x100, 256, stag_b),
        }))
        .unwrap();
    w.connect();
    w.a.mem.arena_mut(RegionId(0))[0..5].copy_from_slice(b"early");
    let stag_a = w.a.stag;
    w.a.post_send(&SendWr {
        wr_id: 0xa7,
        op: SendOp::Send,
        sgl: sgl(0, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    assert!(w.run_until(|w| {
        got_a.extend(w.a.cqes());
        got_b.extend(w.b.cqes());
        !got_a.is_empty() && !got_b.is_empty()
    }));
    assert_eq!((got_a[0].wr_id, got_a[0].status), (0xa7, WcStatus::Success));
    assert_eq!((got_b[0].wr_id, got_b[0].status), (0xb7, WcStatus::Success));
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x100..0x105], b"early");
}

/// A disconnects with a WRITE still unacknowledged (B's answers lost) and destroys its
/// QP at once, as rping and perftest do: the service answers `CloseUnderway` until the
/// FIN is out and the data acknowledged (B's FIN still held back), then destroys the QP
/// and leaves the close to TCP. B gets the WRITE and an orderly Disconnected; A never
/// sends a RST.
#[test]
fn a_qp_destroyed_during_its_close_waits_for_the_fin_and_is_never_reset() {
    let mut w = World::new();
    w.connect();
    w.a.mem.arena_mut(RegionId(0))[64..69].copy_from_slice(b"bye!!");
    let (stag_a, stag_b, qp) = (w.a.stag, w.b.stag, w.a.qp);
    w.b_drop = |_| true;
    w.a.post_send(&SendWr {
        wr_id: 0xa5,
        op: SendOp::Write {
            remote_to: 0x700,
            rkey: stag_b,
        },
        sgl: sgl(64, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    w.a.call_at(w.now, ServiceRequest::Disconnect { client: 1, qp })
        .unwrap();
    for _ in 0..3 {
        w.step();
    }
    let destroy = || ServiceRequest::DestroyQp { client: 1, qp };
    assert_eq!(
        w.a.call_at(w.now, destroy()),
        Err(ServiceError::CloseUnderway)
    );
    // B's ACKs pass, its FIN does not (TCP flags at 14 + 20 + 13, FIN = 0x01).
    w.b_drop = |f| f.get(47).is_some_and(|flags| flags & 0x01 != 0);
    let start = w.now;
    assert!(w.run_until(|w| w.a.call_at(w.now, destroy()) != Err(ServiceError::CloseUnderway)));
    assert!(w.now.saturating_since(start) < crate::exec::CLOSE_LINGER);
    assert!(qp_destroyed(&mut w.a));
    assert_eq!(w.a.svc.counters().closes_released, 1);
    assert_eq!(w.a.eng.conn_count(), 1, "TCP finishes the close alone");
    w.b_drop = |_| false;
    assert!(w.run_until(|w| w.b.notices.iter().any(|n| matches!(
        n,
        ServiceNotice::Cm {
            event: CmNotice::Disconnected { .. },
            ..
        }
    ))));
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x700..0x705], b"bye!!");
    assert_eq!(w.a.eng.counters().tcp_rsts_sent, 0);
    assert_eq!(w.b.eng.counters().tcp_rsts_sent, 0);
    assert_eq!(w.a.svc.counters().close_lingers_expired, 0);
}

/// The same with B silent for good: after the linger time the destroy goes ahead and
/// resets the connection (an answer in bounded time, never a hang).
#[test]
fn a_close_that_cannot_finish_is_reset_after_the_linger_time() {
    let mut w = World::new();
    w.connect();
    let (stag_a, stag_b, qp) = (w.a.stag, w.b.stag, w.a.qp);
    w.b_drop = |_| true;
    w.a.post_send(&SendWr {
        wr_id: 0xa6,
        op: SendOp::Write {
            remote_to: 0x700,
            rkey: stag_b,
        },
        sgl: sgl(64, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    w.a.call_at(w.now, ServiceRequest::Disconnect { client: 1, qp })
        .unwrap();
    let destroy = || ServiceRequest::DestroyQp { client: 1, qp };
    let start = w.now;
    let mut asked = 0;
    while w.a.call_at(w.now, destroy()) == Err(ServiceError::CloseUnderway) {
        asked += 1;
        assert!(asked < 20_000, "the destroy never went ahead");
        w.step();
    }
    assert!(asked > 1);
    assert!(w.now.saturating_since(start) >= crate::exec::CLOSE_LINGER);
    assert!(qp_destroyed(&mut w.a));
    w.step();
    assert!(w.a.eng.counters().tcp_rsts_sent >= 1);
    assert_eq!(w.a.svc.counters().close_lingers_expired, 1);
    assert_eq!(w.a.svc.counters().closes_released, 0);
}

fn qp_destroyed(s: &mut Side) -> bool {
    let qp = s.qp;
    matches!(
        s.call(ServiceRequest::QueryQp { client: 1, qp }),
        Err(ServiceError::Invalid(_) | ServiceError::Verb(_))
    )
}
