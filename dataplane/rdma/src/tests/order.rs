//! Ordering: fences, ORD stalls, in-order completion, unsignaled rules, flush, CQ overflow.

use iwarp_types::{
    AsyncEventKind, EventResource, QpState, SendFlags, SendOp, SgList, TermCode, WcOpcode, WcStatus,
};

use super::pair::*;
use crate::mem::StagState;
use crate::{LlpRequest, QpModify};

#[test]
fn read_fence_holds_a_send_until_the_read_completes() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(8192, ALL);
    let (sb, vb) = p.b.reg(8192, ALL);
    p.b.post_recv(1, sb, vb + 4096, 100);
    let read = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, read, sgl(sa, va, 3000), SIG);
    p.a.post(
        2,
        SendOp::Send,
        sgl(sa, va, 100),
        SIG | SendFlags::READ_FENCE,
    );
    assert!(p.step(true), "the Read Request goes out");
    assert!(
        p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).is_none(),
        "fenced"
    );
    p.run();
    assert!(p.errors.is_empty());
    let c = p.a.cqes();
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    // The fenced Send carried the data the Read brought in.
    assert_eq!(p.b.bytes(vb + 4096, 100), p.b.bytes(vb, 100));
}

#[test]
fn without_fence_the_send_goes_out_but_completes_after_the_read() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(8192, ALL);
    let (sb, vb) = p.b.reg(8192, ALL);
    p.b.post_recv(1, sb, vb + 4096, 100);
    let read = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, read, sgl(sa, va, 3000), SIG);
    p.a.post(2, SendOp::Send, sgl(sa, va + 5000, 100), SIG);
    assert!(p.step(true));
    assert!(p.step(true), "the Send follows the Read Request at once");
    assert!(p.a.cqes().is_empty(), "the Send waits for the older Read");
    p.run();
    let c = p.a.cqes();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.opcode)).collect::<Vec<_>>(),
        [(1, WcOpcode::Read), (2, WcOpcode::Send)]
    );
}

#[test]
fn local_fence_waits_for_every_older_wr() {
    for fenced in [true, false] {
        let mut p = Pair::new();
        let (sa, va) = p.a.reg(100, ALL);
        let (sb, vb) = p.b.reg(100, ALL);
        p.b.post_recv(1, sb, vb, 100);
        p.a.post(1, SendOp::Send, sgl(sa, va, 100), SIG);
        let flags = if fenced {
            SIG | SendFlags::LOCAL_FENCE
        } else {
            SIG
        };
        p.a.post(2, SendOp::LocalInv { stag: sa }, SgList::new(), flags);
        let (d, len) = p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).unwrap();
        assert!(p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).is_none());
        let state = p.a.rnic.query_mr(sa).unwrap().state;
        assert_eq!(state == StagState::Valid, fenced);
        let mut buf = vec![0; len];
        p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut buf);
        if !fenced {
            // The unfenced Invalidate revoked the Send's source while the Send was in
            // progress: the Send fails with a protection error (verbs 7.8, 8.2.2.1), its
            // started segment is poisoned (zeros: the peer places nothing) and the QP
            // asks for a Reset.
            assert!(buf.iter().all(|b| *b == 0));
            assert!(p.b.inject(&buf).is_err());
            assert_eq!(
                p.a.rnic.qp_poll_llp_request(p.a.qp),
                Some(crate::LlpRequest::Reset)
            );
            let c = p.a.cqes();
            let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status)).collect();
            assert_eq!(
                got,
                [(1, WcStatus::InvalidStag), (2, WcStatus::Success)],
                "the Invalidate itself succeeded"
            );
            continue;
        }
        p.b.inject(&buf).unwrap();
        p.a.rnic.qp_ulpdu_acked(p.a.qp, &d);
        assert!(p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).is_none());
        assert_eq!(p.a.rnic.query_mr(sa).unwrap().state, StagState::Invalid);
        let c = p.a.cqes();
        assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    }
}

#[test]
fn ord_limits_outstanding_reads() {
    let mut p = Pair::with(Opts {
        ord: 1,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(4096, ALL);
    let (sb, vb) = p.b.reg(4096, ALL);
    for i in 0..3u64 {
        let read = SendOp::Read {
            remote_to: vb,
            rkey: sb,
            invalidate_local: false,
        };
        p.a.post(i, read, sgl(sa, va + i * 1000, 500), SIG);
    }
    assert!(p.step(true));
    assert!(
        p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).is_none(),
        "ORD 1 reached"
    );
    p.run();
    assert!(p.errors.is_empty());
    assert_eq!(p.a.cqes().len(), 3);
}

#[test]
fn zero_ord_read_completes_in_error() {
    let mut p = Pair::with(Opts {
        ord: 0,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(64, ALL);
    let read = SendOp::Read {
        remote_to: 0,
        rkey: sa,
        invalidate_local: false,
    };
    p.a.post(1, read, sgl(sa, va, 8), SendFlags::NONE);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::ZeroOrd);
}

#[test]
fn unsignaled_successes_give_no_completion() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    for i in 0..4 {
        p.b.post_recv(i, sb, vb, 64);
    }
    p.a.post(1, SendOp::Send, sgl(sa, va, 8), SendFlags::NONE);
    p.a.post(
        2,
        SendOp::Write {
            remote_to: vb,
            rkey: sb,
        },
        sgl(sa, va, 8),
        SendFlags::NONE,
    );
    p.a.post(3, SendOp::Send, sgl(sa, va, 8), SendFlags::NONE);
    p.a.post(4, SendOp::Send, sgl(sa, va, 8), SIG);
    p.run();
    let c = p.a.cqes();
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [4]);
    assert_eq!(p.b.cqes().len(), 3, "receives are always signaled");
}

#[test]
fn modify_to_error_flushes_everything_signaled_or_not() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    p.a.post_recv(10, sa, va, 64);
    p.a.post_recv(11, sa, va, 64);
    p.a.post(1, SendOp::Send, sgl(sa, va, 8), SendFlags::NONE);
    p.a.post(2, SendOp::Send, sgl(sa, va, 8), SIG);
    assert!(p.a.take_ulpdu(1024).is_some());
    p.a.rnic
        .modify_qp(
            p.a.qp,
            &QpModify {
                state: Some(QpState::Error),
                ..QpModify::default()
            },
        )
        .unwrap();
    assert_eq!(
        p.a.rnic.qp_poll_llp_request(p.a.qp),
        Some(LlpRequest::Reset)
    );
    assert_eq!(
        p.a.take_ulpdu(1024),
        None,
        "no Terminate on Modify to Error"
    );
    let c = p.a.cqes();
    let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status)).collect();
    // The first Send was acknowledged (take_ulpdu acks) and is unsignaled: no CQE.
    assert_eq!(
        got,
        [
            (2, WcStatus::Flushed),
            (10, WcStatus::Flushed),
            (11, WcStatus::Flushed)
        ]
    );
    let info = p.a.rnic.query_qp(p.a.qp).unwrap();
    assert_eq!((info.state, info.conn), (QpState::Error, None));
    p.a.rnic
        .modify_qp(
            p.a.qp,
            &QpModify {
                state: Some(QpState::Idle),
                ..QpModify::default()
            },
        )
        .unwrap();
    p.a.post(3, SendOp::Send, sgl(sa, va, 8), SIG);
}

#[test]
fn cq_overflow_terminates_the_qp() {
    let mut p = Pair::new();
    let (cq, _) = p.a.rnic.create_cq(1).unwrap();
    let mut attr = p.a.rnic.query_qp(p.a.qp).unwrap().attr;
    attr.send_cq = cq;
    let (qp2, _) = p.a.rnic.create_qp(&attr).unwrap();
    let params = crate::LlpParams {
        ird: 1,
        ord: 1,
        role: crate::LlpRole::Initiator,
        rtr: None,
    };
    p.a.rnic
        .qp_establish(qp2, iwarp_types::ConnId(2), params)
        .unwrap();
    p.a.qp = qp2;
    let (sa, va) = p.a.reg(64, ALL);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: 0,
            rkey: sa,
        },
        sgl(sa, va, 0),
        SIG,
    );
    p.a.post(
        2,
        SendOp::Write {
            remote_to: 0,
            rkey: sa,
        },
        sgl(sa, va, 0),
        SIG,
    );
    assert!(p.a.take_ulpdu(1024).is_some());
    assert!(p.a.take_ulpdu(1024).is_some());
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_CATASTROPHIC_STREAM)
    );
    let ev: Vec<_> = p.a.events();
    assert!(ev
        .iter()
        .any(|e| e.resource == EventResource::Cq(cq) && e.kind == AsyncEventKind::CqOverflow));
    assert!(ev
        .iter()
        .any(|e| e.resource == EventResource::Qp(qp2) && e.kind == AsyncEventKind::CqError));
}

#[test]
fn fill_after_flush_gives_zeros_and_counts() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    p.a.fill_pattern(va, 64, 1);
    p.a.post(1, SendOp::Send, sgl(sa, va, 64), SIG);
    let (d, len) = p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).unwrap();
    p.a.rnic
        .modify_qp(
            p.a.qp,
            &QpModify {
                state: Some(QpState::Error),
                ..QpModify::default()
            },
        )
        .unwrap();
    let mut buf = vec![0xffu8; len];
    p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut buf);
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(p.a.rnic.qp_counters(p.a.qp).unwrap().stale_fills, 1);
    // A wrong output length is refused the same way.
    let mut short = vec![0xffu8; 3];
    p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut short);
    assert_eq!(short, [0, 0, 0]);
}

#[test]
fn srq_wrs_survive_a_qp_error() {
    let mut p = Pair::with(Opts {
        srq: true,
        ..Opts::default()
    });
    let (sb, vb) = p.b.reg(64, ALL);
    let srq = p.b.rnic.query_qp(p.b.qp).unwrap().attr.srq.unwrap();
    for i in 0..3 {
        let wr = iwarp_types::RecvWr {
            wr_id: i,
            sgl: sgl(sb, vb, 64),
        };
        p.b.rnic.post_srq_recv(srq, &wr).unwrap();
    }
    let (sa, va) = p.a.reg(64, ALL);
    p.a.post(1, SendOp::Send, sgl(sa, va, 8), SIG);
    p.run();
    assert_eq!(p.b.cqes().len(), 1);
    p.b.rnic
        .modify_qp(
            p.b.qp,
            &QpModify {
                state: Some(QpState::Error),
                ..QpModify::default()
            },
        )
        .unwrap();
    assert!(p.b.cqes().is_empty(), "unconsumed SRQ WRs are not flushed");
    assert_eq!(p.b.rnic.query_srq(srq).unwrap().max_wr, 64);
    assert_eq!(
        p.b.rnic.destroy_srq(srq),
        Err(iwarp_types::VerbError::SrqInUse)
    );
}
