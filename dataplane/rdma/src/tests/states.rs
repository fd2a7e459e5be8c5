//! The QP state diagram (verbs 6.2): Modify QP transitions valid and invalid, posting
//! rules per state, LLP events, graceful close, RTR, destroy.

use iwarp_types::{
    AsyncEventKind, ConnId, QpState, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag,
    TermCode, VerbError, WcStatus,
};

use super::pair::*;
use crate::mem::MwType;
use crate::{LlpEvent, LlpParams, LlpRequest, LlpRole, QpModify, RtrKind};

fn to(state: QpState) -> QpModify {
    QpModify {
        state: Some(state),
        ..QpModify::default()
    }
}

fn state(s: &Side) -> QpState {
    s.rnic.query_qp(s.qp).unwrap().state
}

fn idle_side() -> Side {
    Side::new(
        3,
        &Opts {
            establish: false,
            ..Opts::default()
        },
    )
}

fn qp_events(s: &mut Side) -> Vec<AsyncEventKind> {
    s.events().into_iter().map(|e| e.kind).collect()
}

#[test]
fn idle_transitions() {
    let mut s = idle_side();
    assert_eq!(state(&s), QpState::Idle);
    assert_eq!(
        s.rnic.modify_qp(s.qp, &to(QpState::Terminate)),
        Err(VerbError::InvalidStateTransition)
    );
    assert_eq!(
        s.rnic.modify_qp(s.qp, &to(QpState::Closing)),
        Err(VerbError::InvalidStateTransition)
    );
    assert_eq!(
        s.rnic.modify_qp(s.qp, &to(QpState::Rts)),
        Err(VerbError::InvalidConnection)
    );
    let m = QpModify {
        ord: Some(2),
        ird: Some(3),
        sq_depth: Some(100),
        ..QpModify::default()
    };
    s.rnic.modify_qp(s.qp, &m).unwrap();
    let a = s.rnic.query_qp(s.qp).unwrap().attr;
    assert_eq!((a.ord, a.ird, a.sq_depth), (2, 3, 100));
    let too_big = QpModify {
        ord: Some(1000),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(s.qp, &too_big),
        Err(VerbError::OrdTooLarge)
    );
    let too_big = QpModify {
        ird: Some(1000),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(s.qp, &too_big),
        Err(VerbError::IrdTooLarge)
    );
    // Posting in Idle queues without processing.
    let (st, va) = s.reg(64, ALL);
    s.post(1, SendOp::Send, sgl(st, va, 8), SIG);
    s.post_recv(2, st, va, 8);
    assert_eq!(s.take_ulpdu(1024), None);
    assert!(s.cqes().is_empty());
    let shrink = QpModify {
        sq_depth: Some(0),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(s.qp, &shrink),
        Err(VerbError::QueueShrinkFailed)
    );
    // Idle -> Error flushes, Error -> Idle, Error -> RTS refused.
    s.rnic.modify_qp(s.qp, &to(QpState::Error)).unwrap();
    let c = s.cqes();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Flushed), (2, WcStatus::Flushed)]
    );
    assert_eq!(
        s.rnic.qp_poll_llp_request(s.qp),
        None,
        "no LLP effect from Idle"
    );
    for bad in [
        QpState::Rts,
        QpState::Terminate,
        QpState::Closing,
        QpState::Error,
    ] {
        assert_eq!(
            s.rnic.modify_qp(s.qp, &to(bad)),
            Err(VerbError::InvalidStateTransition)
        );
    }
    let attr_in_error = QpModify {
        state: Some(QpState::Idle),
        ord: Some(1),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(s.qp, &attr_in_error),
        Err(VerbError::CannotChangeAttribute)
    );
    s.rnic.modify_qp(s.qp, &to(QpState::Idle)).unwrap();
    let p = LlpParams {
        ird: 1,
        ord: 1,
        role: LlpRole::Initiator,
        rtr: None,
    };
    s.rnic.qp_establish(s.qp, ConnId(4), p).unwrap();
    assert_eq!(state(&s), QpState::Rts);
    assert_eq!(
        s.rnic.qp_establish(s.qp, ConnId(4), p),
        Err(VerbError::InvalidStateTransition)
    );
}

#[test]
fn establish_checks_negotiated_limits() {
    let mut s = idle_side();
    let p = LlpParams {
        ird: 5,
        ord: 1,
        role: LlpRole::Initiator,
        rtr: None,
    };
    assert_eq!(
        s.rnic.qp_establish(s.qp, ConnId(1), p),
        Err(VerbError::IrdTooLarge)
    );
    let p = LlpParams {
        ird: 1,
        ord: 5,
        role: LlpRole::Initiator,
        rtr: None,
    };
    assert_eq!(
        s.rnic.qp_establish(s.qp, ConnId(1), p),
        Err(VerbError::OrdTooLarge)
    );
    assert_eq!(state(&s), QpState::Idle);
}

#[test]
fn rts_transitions() {
    let mut s = Side::new(1, &Opts::default());
    assert_eq!(
        s.rnic.modify_qp(s.qp, &to(QpState::Idle)),
        Err(VerbError::InvalidStateTransition)
    );
    s.rnic
        .modify_qp(
            s.qp,
            &QpModify {
                ord: Some(1),
                ..QpModify::default()
            },
        )
        .unwrap();
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().attr.ord, 1);
    // RTS -> Terminate: a bare Local Catastrophic Terminate, no async event.
    s.rnic.modify_qp(s.qp, &to(QpState::Terminate)).unwrap();
    let t = s.sent_terminate_repr().unwrap();
    assert_eq!(
        t,
        iwarp_wire::rdmap::TerminateRepr::bare(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert!(qp_events(&mut s).is_empty());
    for any in [
        QpState::Idle,
        QpState::Rts,
        QpState::Error,
        QpState::Closing,
        QpState::Terminate,
    ] {
        assert_eq!(
            s.rnic.modify_qp(s.qp, &to(any)),
            Err(VerbError::InvalidStateTransition)
        );
    }
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sgl: SgList::new(),
        flags: SIG,
    };
    assert_eq!(s.rnic.post_send(s.qp, &wr), Err(VerbError::InvalidQpState));
    // The Terminate was acknowledged: the reset that follows is no Bad Close.
    s.rnic.qp_llp_event(s.qp, LlpEvent::Reset);
    assert_eq!(state(&s), QpState::Error);
    assert!(qp_events(&mut s).is_empty());
    assert_eq!(
        s.rnic.query_qp(s.qp).unwrap().terminate.unwrap().code,
        TermCode::RDMAP_LOCAL_CATASTROPHIC
    );

    // A reset before the Terminate was acknowledged: Bad Close.
    let mut s = Side::new(1, &Opts::default());
    s.rnic.modify_qp(s.qp, &to(QpState::Terminate)).unwrap();
    s.rnic.qp_llp_event(s.qp, LlpEvent::Reset);
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(qp_events(&mut s), [AsyncEventKind::BadClose]);
}

/// A side whose QP has an SQ of 2 and an RQ of 1, and a one-byte SGE of its memory.
fn side_for_posting() -> (Side, Sge) {
    let mut s = Side::new(
        1,
        &Opts {
            sq_depth: 2,
            rq_depth: 1,
            ..Opts::default()
        },
    );
    let (st, va) = s.reg(64, ALL);
    let sge = Sge {
        addr: va,
        length: 1,
        lkey: st,
    };
    (s, sge)
}

#[test]
fn post_immediate_errors() {
    let (mut s, sge) = side_for_posting();
    let wr = |op, sgl| SendWr {
        wr_id: 1,
        op,
        sgl,
        flags: SendFlags::NONE,
    };
    let two = SgList::from_slice(&[sge, sge]).unwrap();
    let read = SendOp::Read {
        remote_to: 0,
        rkey: Stag(1),
        invalidate_local: false,
    };
    assert_eq!(
        s.rnic.post_send(s.qp, &wr(read, two)),
        Err(VerbError::InvalidModifier)
    );
    assert_eq!(
        s.rnic.post_send(s.qp, &wr(read, SgList::new())),
        Err(VerbError::InvalidModifier)
    );
    let bad_flags = SendWr {
        flags: SendFlags(1 << 9),
        ..wr(SendOp::Send, SgList::new())
    };
    assert_eq!(
        s.rnic.post_send(s.qp, &bad_flags),
        Err(VerbError::InvalidModifier)
    );
    s.rnic.post_send(s.qp, &wr(SendOp::Send, two)).unwrap();
    s.rnic
        .post_send(s.qp, &wr(SendOp::Send, SgList::new()))
        .unwrap();
    assert_eq!(
        s.rnic.post_send(s.qp, &wr(SendOp::Send, two)),
        Err(VerbError::TooManyWrsPosted)
    );
    let rwr = RecvWr {
        wr_id: 1,
        sgl: SgList::single(sge),
    };
    s.rnic.post_recv(s.qp, &rwr).unwrap();
    assert_eq!(
        s.rnic.post_recv(s.qp, &rwr),
        Err(VerbError::TooManyWrsPosted)
    );
    assert_eq!(
        s.rnic
            .post_send(iwarp_types::QpId(0xdead), &wr(SendOp::Send, two)),
        Err(VerbError::InvalidQp)
    );

    let mut s = Side::new(1, &Opts::default());
    let mut attr = s.rnic.query_qp(s.qp).unwrap().attr;
    attr.max_send_sge = 1;
    attr.max_recv_sge = 1;
    let (qp2, _) = s.rnic.create_qp(&attr).unwrap();
    assert_eq!(
        s.rnic.post_send(qp2, &wr(SendOp::Send, two)),
        Err(VerbError::TooManySges)
    );
    let rwr2 = RecvWr { wr_id: 1, sgl: two };
    assert_eq!(s.rnic.post_recv(qp2, &rwr2), Err(VerbError::TooManySges));
}

/// `post_send_with` refuses what `post_send` refuses, with the same errors, and posts
/// nothing then: not before its writer ran (state, depth), not after (its writer's own
/// error, a WR `post_send` would refuse). What it posts is what the writer wrote.
#[test]
fn post_in_place_checks_as_post_send_does() {
    use crate::PostError;
    let (mut s, sge) = side_for_posting();
    let two = SgList::from_slice(&[sge, sge]).unwrap();
    let wr = |id, op, sgl| SendWr {
        wr_id: id,
        op,
        sgl,
        flags: SendFlags::NONE,
    };
    let read = SendOp::Read {
        remote_to: 0,
        rkey: Stag(1),
        invalidate_local: false,
    };
    let write = |w: SendWr| {
        move |into: &mut SendWr| -> Result<(), ()> {
            *into = w;
            Ok(())
        }
    };
    assert_eq!(
        s.rnic.post_send_with(s.qp, write(wr(1, read, two))),
        Err(PostError::Written(VerbError::InvalidModifier))
    );
    assert_eq!(
        s.rnic.post_send_with(s.qp, |_: &mut SendWr| Err(7)),
        Err(PostError::Write(7))
    );
    let bad_flags = SendWr {
        flags: SendFlags(1 << 9),
        ..wr(1, SendOp::Send, SgList::new())
    };
    assert_eq!(
        s.rnic.post_send_with(s.qp, write(bad_flags)),
        Err(PostError::Written(VerbError::InvalidModifier))
    );
    // Nothing of the refused ones was posted: both places are free.
    s.rnic
        .post_send_with(s.qp, write(wr(10, SendOp::Send, two)))
        .unwrap();
    s.rnic
        .post_send_with(s.qp, write(wr(11, SendOp::Send, SgList::single(sge))))
        .unwrap();
    let mut called = false;
    assert_eq!(
        s.rnic.post_send_with(s.qp, |_: &mut SendWr| {
            called = true;
            Ok::<(), ()>(())
        }),
        Err(PostError::Verb(VerbError::TooManyWrsPosted))
    );
    assert!(
        !called,
        "the writer of a WR that cannot be posted is not called"
    );
    assert_eq!(
        s.rnic
            .post_send_with(iwarp_types::QpId(0xdead), write(wr(1, SendOp::Send, two))),
        Err(PostError::Verb(VerbError::InvalidQp))
    );
    let q = s.rnic.qps.get(s.qp.0).unwrap();
    let posted: Vec<_> =
        q.sq.q
            .iter()
            .map(|e| (e.seq, e.wr.wr_id, e.wr.sgl.len()))
            .collect();
    assert_eq!(posted, [(0, 10, 2), (1, 11, 1)]);
}

#[test]
fn create_qp_checks() {
    let mut s = Side::new(1, &Opts::default());
    let base = s.rnic.query_qp(s.qp).unwrap().attr;
    let cases = [
        (
            crate::QpAttr {
                pd: iwarp_types::PdId(999),
                ..base
            },
            VerbError::InvalidPd,
        ),
        (
            crate::QpAttr {
                send_cq: iwarp_types::CqId(999),
                ..base
            },
            VerbError::InvalidCq,
        ),
        (
            crate::QpAttr {
                srq: Some(iwarp_types::SrqId(999)),
                ..base
            },
            VerbError::InvalidSrq,
        ),
        (
            crate::QpAttr {
                sq_depth: 1 << 30,
                ..base
            },
            VerbError::TooManyWrsRequested,
        ),
        (
            crate::QpAttr {
                max_send_sge: 7,
                ..base
            },
            VerbError::TooManySges,
        ),
        (crate::QpAttr { ord: 1000, ..base }, VerbError::OrdTooLarge),
        (crate::QpAttr { ird: 1000, ..base }, VerbError::IrdTooLarge),
    ];
    for (attr, err) in cases {
        assert_eq!(s.rnic.create_qp(&attr).map(|_| ()), Err(err));
    }
    // The PD and CQ are in use while the QP exists.
    assert_eq!(s.rnic.dealloc_pd(s.pd), Err(VerbError::PdInUse));
    assert_eq!(s.rnic.destroy_cq(s.cq), Err(VerbError::CqInUse));
}

#[test]
fn destroy_refused_while_windows_are_bound() {
    let mut s = Side::new(1, &Opts::default());
    let (mr, va) = s.reg(64, ALL);
    let mw = s.rnic.alloc_mw(s.pd, MwType::Type2).unwrap().with_key(1);
    let access = iwarp_types::Access::REMOTE_WRITE;
    s.post(
        1,
        SendOp::Bind {
            mw,
            mr,
            to: va,
            len: 8,
            access,
            zero_based: false,
        },
        SgList::new(),
        SIG,
    );
    assert_eq!(s.take_ulpdu(1024), None);
    assert_eq!(s.rnic.destroy_qp(s.qp), Err(VerbError::MwStillBound));
    s.rnic.dealloc_stag(mw).unwrap();
    s.rnic.destroy_qp(s.qp).unwrap();
    assert_eq!(s.rnic.query_qp(s.qp).map(|_| ()), Err(VerbError::InvalidQp));
    s.rnic.dealloc_stag(mr).unwrap();
    s.rnic.destroy_cq(s.cq).unwrap();
    s.rnic.dealloc_pd(s.pd).unwrap();
}

#[test]
fn clean_remote_close() {
    let mut s = Side::new(1, &Opts::default());
    let (st, va) = s.reg(64, ALL);
    s.post_recv(5, st, va, 64);
    s.rnic.qp_llp_event(s.qp, LlpEvent::PeerClosed);
    assert_eq!(state(&s), QpState::Closing);
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Close));
    assert_eq!(
        s.cqes()[0].status,
        WcStatus::Flushed,
        "RQ flushed on Closing"
    );
    // A receive posted in Closing is flushed at once; a send is refused.
    s.post_recv(6, st, va, 64);
    assert_eq!(s.cqes()[0].wr_id, 6);
    for any in [QpState::Idle, QpState::Error, QpState::Rts] {
        assert_eq!(
            s.rnic.modify_qp(s.qp, &to(any)),
            Err(VerbError::InvalidStateTransition)
        );
    }
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Idle);
    assert_eq!(qp_events(&mut s), [AsyncEventKind::LlpCloseComplete]);
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().conn, None);
}

#[test]
fn remote_close_with_work_outstanding_is_a_bad_llp_close() {
    let mut s = Side::new(1, &Opts::default());
    let (st, va) = s.reg(64, ALL);
    s.post(1, SendOp::Send, sgl(st, va, 8), SIG);
    s.rnic.qp_llp_event(s.qp, LlpEvent::PeerClosed);
    assert_eq!(state(&s), QpState::Terminate);
    assert_eq!(
        s.sent_terminate(),
        Some(TermCode::RDMAP_CATASTROPHIC_STREAM)
    );
    assert_eq!(qp_events(&mut s), [AsyncEventKind::BadLlpClose]);
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(s.cqes()[0].status, WcStatus::Flushed);
}

#[test]
fn reset_and_timeout() {
    for (ev, kind) in [
        (LlpEvent::Reset, AsyncEventKind::LlpConnectionReset),
        (LlpEvent::TimedOut, AsyncEventKind::LlpConnectionLost),
    ] {
        let mut s = Side::new(1, &Opts::default());
        let (st, va) = s.reg(64, ALL);
        s.post(1, SendOp::Send, sgl(st, va, 8), SendFlags::NONE);
        s.post_recv(2, st, va, 8);
        s.rnic.qp_llp_event(s.qp, ev);
        assert_eq!(state(&s), QpState::Error);
        assert_eq!(qp_events(&mut s), [kind]);
        assert_eq!(s.cqes().len(), 2, "unsignaled WRs are flushed too");
        assert_eq!(s.take_ulpdu(1024), None);
    }
}

#[test]
fn segment_while_closing_is_a_bad_close() {
    let mut s = Side::new(1, &Opts::default());
    s.rnic.modify_qp(s.qp, &to(QpState::Closing)).unwrap();
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Close));
    assert!(
        qp_events(&mut s).is_empty(),
        "Modify to Closing raises no event"
    );
    // A one-byte RDMA Write (a zero-length one carries no data: see below).
    let seg = [0xc1u8, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0x5a];
    assert_eq!(s.inject(&seg), Ok(()));
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Reset));
    assert_eq!(qp_events(&mut s), [AsyncEventKind::BadClose]);
}

#[test]
fn zero_length_write_while_closing_is_dropped() {
    // Issue 17 (sim seeds 0x0b82b770adb821af, 0xe00b054ffad084ed, 0x1cc61bf3419810a5):
    // the peer's nudge (a zero-length Write) crossed our late FIN and made a Bad Close
    // of a close with nothing outstanding.
    let mut s = Side::new(1, &Opts::default());
    s.rnic.modify_qp(s.qp, &to(QpState::Closing)).unwrap();
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Close));
    let nudge = [0xc1u8, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(s.inject(&nudge), Ok(()));
    assert_eq!(state(&s), QpState::Closing);
    assert!(qp_events(&mut s).is_empty());
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), None);
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Idle);
    assert_eq!(qp_events(&mut s), [AsyncEventKind::LlpCloseComplete]);
}

#[test]
fn modify_to_closing_with_sq_work_is_a_bad_close() {
    let mut s = Side::new(1, &Opts::default());
    let (st, va) = s.reg(64, ALL);
    s.post(1, SendOp::Send, sgl(st, va, 8), SIG);
    s.rnic.modify_qp(s.qp, &to(QpState::Closing)).unwrap();
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Reset));
    assert_eq!(qp_events(&mut s), [AsyncEventKind::BadClose]);
    assert_eq!(s.cqes()[0].status, WcStatus::Flushed);
}

#[test]
fn graceful_disconnect_waits_for_the_sq() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    p.b.post_recv(1, sb, vb, 64);
    p.a.post(1, SendOp::Send, sgl(sa, va, 8), SIG);
    p.a.rnic.qp_disconnect(p.a.qp).unwrap();
    assert_eq!(state(&p.a), QpState::Rts);
    let wr = SendWr {
        wr_id: 2,
        op: SendOp::Send,
        sgl: SgList::new(),
        flags: SIG,
    };
    assert_eq!(
        p.a.rnic.post_send(p.a.qp, &wr),
        Err(VerbError::InvalidQpState)
    );
    p.run();
    assert_eq!(state(&p.a), QpState::Closing);
    assert_eq!(
        p.a.rnic.qp_poll_llp_request(p.a.qp),
        Some(LlpRequest::Close)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
    p.b.rnic.qp_llp_event(p.b.qp, LlpEvent::PeerClosed);
    p.a.rnic.qp_llp_event(p.a.qp, LlpEvent::Closed);
    p.b.rnic.qp_llp_event(p.b.qp, LlpEvent::Closed);
    assert_eq!((state(&p.a), state(&p.b)), (QpState::Idle, QpState::Idle));
}

fn rtr_pair(kind: RtrKind) -> Pair {
    let o = Opts {
        establish: false,
        ..Opts::default()
    };
    let mut p = Pair::with(o);
    let ini = LlpParams {
        ird: 4,
        ord: 4,
        role: LlpRole::Initiator,
        rtr: Some(kind),
    };
    let res = LlpParams {
        ird: 4,
        ord: 4,
        role: LlpRole::Responder,
        rtr: Some(kind),
    };
    p.a.rnic.qp_establish(p.a.qp, ConnId(1), ini).unwrap();
    p.b.rnic.qp_establish(p.b.qp, ConnId(1), res).unwrap();
    p
}

#[test]
fn rtr_each_kind_releases_the_responder() {
    for kind in [RtrKind::Write, RtrKind::Read, RtrKind::Send] {
        let mut p = rtr_pair(kind);
        let (sb, vb) = p.b.reg(64, ALL);
        let (sa, va) = p.a.reg(64, ALL);
        p.a.post_recv(1, sa, va, 64);
        p.b.post(1, SendOp::Send, sgl(sb, vb, 8), SIG);
        assert!(
            !p.step(false),
            "the responder sends nothing before the first FPDU"
        );
        assert!(p.step(true), "the initiator sends the RTR");
        assert!(p.b.rnic.qp_take_rtr_received(p.b.qp));
        assert!(!p.b.rnic.qp_take_rtr_received(p.b.qp), "reported once");
        p.run();
        assert!(p.errors.is_empty(), "{kind:?}: {:?}", p.errors);
        assert!(p.b.cqes().iter().all(|c| c.status == WcStatus::Success));
        let ca = p.a.cqes();
        assert_eq!(ca.len(), 1, "{kind:?}: the RTR consumed no receive");
        assert_eq!(ca[0].byte_len, 8);
    }
}

#[test]
fn graceful_disconnect_waits_for_the_read_rtr_response() {
    // Issue 17 (sim seed 0x8647c85e4a86d9bd): a disconnect posted while the zero-length
    // Read RTR (RFC 6581) was in the ORQ waited for the ORQ, but the RTR's Read Response
    // emptied it without checking the pending close: no FIN, a close that never ended.
    let mut p = rtr_pair(RtrKind::Read);
    assert!(p.step(true), "the initiator sends the RTR Read Request");
    p.a.rnic.qp_disconnect(p.a.qp).unwrap();
    assert_eq!(state(&p.a), QpState::Rts, "the RTR Read is outstanding");
    assert_eq!(p.a.rnic.qp_poll_llp_request(p.a.qp), None);
    assert!(p.step(false), "the responder answers the RTR");
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(state(&p.a), QpState::Closing);
    assert_eq!(
        p.a.rnic.qp_poll_llp_request(p.a.qp),
        Some(LlpRequest::Close)
    );
    assert!(p.a.events().is_empty());
}

#[test]
fn queue_rtr_by_hand() {
    let mut p = Pair::new();
    p.a.rnic.qp_queue_rtr(p.a.qp, RtrKind::Write).unwrap();
    let bytes = p.a.take_ulpdu(1024).unwrap();
    assert_eq!(bytes, [0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut s = idle_side();
    assert_eq!(
        s.rnic.qp_queue_rtr(s.qp, RtrKind::Read),
        Err(VerbError::InvalidQpState)
    );
}

#[test]
fn held_responder_still_runs_local_wrs_in_order() {
    let mut p = rtr_pair(RtrKind::Write);
    let (sb, vb) = p.b.reg(64, ALL);
    let (sa, va) = p.a.reg(64, ALL);
    let (victim, _) = p.b.reg(64, ALL);
    p.a.post_recv(1, sa, va, 64);
    p.b.post(1, SendOp::LocalInv { stag: victim }, SgList::new(), SIG);
    p.b.post(2, SendOp::Send, sgl(sb, vb, 8), SIG);
    p.b.post(3, SendOp::LocalInv { stag: sb }, SgList::new(), SIG);
    assert!(!p.step(false), "nothing on the wire before the first FPDU");
    let done = p.b.cqes();
    assert_eq!(done.len(), 1, "the leading local WR ran: {done:?}");
    assert_eq!((done[0].wr_id, done[0].status), (1, WcStatus::Success));
    // The Send waits for the RTR, and the Invalidate behind it waits for the Send.
    assert!(p.step(true), "the initiator sends the RTR");
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let ids: Vec<u64> = p.b.cqes().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, vec![2, 3]);
    assert_eq!(p.a.cqes()[0].byte_len, 8);
}
