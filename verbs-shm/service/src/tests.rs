//! The service against a peer: rings, completions, CM, teardown (the harness is
//! [`crate::testkit`]).

use iwarp_rdma::mem::MrAttr;
use iwarp_shm_ring::{
    decode_cqe, encode_recv_wr, encode_send_wr, Consumer, DoorbellBlock, Region, RingLayout,
    CQE_SLOT_SIZE, DOORBELL_BLOCK_BYTES,
};
use iwarp_types::{
    Access, QpId, QpState, RecvWr, RegionId, SendFlags, SendOp, SendWr, SgList, Stag, WcOpcode,
    WcStatus,
};

use crate::testkit::*;
use crate::*;

#[test]
fn send_and_write_complete_into_the_client_ring() {
    let mut w = World::new();
    w.connect();
    // B posts a receive through its RQ ring.
    let stag_b = w.b.stag;
    w.b.post_recv(0xb0, 0x100, 256);
    // The receive reaches B's engine before A's Send does.
    w.step();
    w.a.mem.arena_mut(RegionId(0))[64..69].copy_from_slice(b"world");
    w.a.cq_control.arm(false);
    let stag_a = w.a.stag;
    w.a.send_bytes(0xa1, b"hello");
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

/// With B's answers lost, A WRITEs A[64..69] to B[0x700..] (`wr_id`) and asks for the
/// graceful close at once; returns A's QP.
fn write_unanswered_then_disconnect(w: &mut World, wr_id: u64) -> QpId {
    let (stag_a, stag_b, qp) = (w.a.stag, w.b.stag, w.a.qp);
    w.b_drop = |_| true;
    w.a.post_send(&SendWr {
        wr_id,
        op: SendOp::Write {
            remote_to: 0x700,
            rkey: stag_b,
        },
        sgl: sgl(64, 5, stag_a),
        flags: SendFlags::SIGNALED,
    });
    w.a.call_at(w.now, ServiceRequest::Disconnect { client: 1, qp })
        .unwrap();
    qp
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
    let qp = write_unanswered_then_disconnect(&mut w, 0xa5);
    for _ in 0..3 {
        w.step();
    }
    let destroy = || ServiceRequest::DestroyQp { client: 1, qp };
    assert_eq!(
        w.a.call_at(w.now, destroy()),
        Err(ServiceError::CloseUnderway)
    );
    // B's ACKs pass, its FIN does not.
    w.b_drop = carries_fin;
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
    let qp = write_unanswered_then_disconnect(&mut w, 0xa6);
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

fn disconnect_notices(s: &crate::testkit::Side) -> usize {
    s.notices
        .iter()
        .filter(|n| {
            matches!(
                n,
                ServiceNotice::Cm {
                    event: CmNotice::Disconnected { .. },
                    ..
                }
            )
        })
        .count()
}

/// The client hears of its peer's close when the peer's FIN arrives (as rdma_cm over siw
/// does), not when our FIN is acknowledged: here B's daemon vanishes after its FIN (only
/// FINs of B reach A), so A's close completes only by the close timeout. A's client is
/// told `Disconnected` at once, and once: not again when the engine detaches the QP.
#[test]
fn a_peer_close_is_told_at_once_and_once() {
    let mut w = World::new();
    w.connect();
    w.b_drop = |f| !carries_fin(f);
    let qp_b = w.b.qp;
    w.b.call(ServiceRequest::Disconnect {
        client: 1,
        qp: qp_b,
    })
    .unwrap();
    assert!(w.run_until(|w| disconnect_notices(&w.a) == 1));
    let qp_a = w.a.qp;
    assert!(
        w.a.eng.qp_conn(qp_a).is_some(),
        "told before the close completes (our FIN unacknowledged)"
    );
    // The close timeout ends it; the engine's Disconnected is not told again.
    w.now = iwarp_types::Instant(w.now.0 + iwarp_types::Duration::from_secs(120).0);
    assert!(w.run_until(|w| w.a.eng.qp_conn(qp_a).is_none()));
    for _ in 0..10 {
        w.step();
    }
    assert_eq!(disconnect_notices(&w.a), 1);
}

/// A receive whose doorbell B's loop has not come round to (its core descheduled, say)
/// when the Send that answers a later message arrives: `before_frames` hands it to the
/// engine before the Send is handled (fi_pingpong's last exchange got "no buffer" here).
#[test]
fn a_receive_rung_before_a_send_arrives_is_there_for_it() {
    let mut w = World::new();
    w.connect();
    w.b.post_recv(0xb1, 0x100, 256);
    w.a.send_bytes(0xa1, b"hello");
    let frames = w.a.turn(w.now);
    assert!(!frames.is_empty(), "A sent its Send");
    // B's burst: the hook first, then the frames (the core's order), no poll before.
    iwarp_runtime::App::<iwarp_types::VecMemory>::before_frames(
        &mut w.b.svc,
        w.now,
        &mut w.b.eng,
        &mut w.b.mem,
    );
    for f in &frames {
        w.b.eng.handle_frame(w.now, f, &mut w.b.mem);
    }
    let mut got_a = Vec::new();
    let mut got_b = Vec::new();
    assert!(w.run_until(|w| {
        got_a.extend(w.a.cqes());
        got_b.extend(w.b.cqes());
        got_a.len() == 1 && got_b.len() == 1
    }));
    assert_eq!(
        (got_b[0].wr_id, got_b[0].status, got_b[0].byte_len),
        (0xb1, WcStatus::Success, 5)
    );
    assert_eq!(&w.b.mem.arena(RegionId(0))[0x100..0x105], b"hello");
    assert_eq!((got_a[0].wr_id, got_a[0].status), (0xa1, WcStatus::Success));
    assert_eq!(qp_state(&mut w.b), QpState::Rts);
}
