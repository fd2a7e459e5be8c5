//! Checklist rows the audit found implemented but unproven (`docs/CONFORMANCE.md`):
//! remote invalidation on a shared PD, Query RNIC, Destroy QP in any state, LLP failure in
//! Closing, message length limit, SRQ receive PD, windows in SGEs.

use iwarp_types::{
    Access, AsyncEventKind, ConnId, QpState, RecvWr, SendOp, SgList, Sge, Stag, TermCode,
    VerbError, WcStatus,
};

use super::pair::*;
use crate::mem::{MwType, StagState};
use crate::{LlpEvent, LlpParams, LlpRequest, LlpRole, QpModify};

fn to(state: QpState) -> QpModify {
    QpModify {
        state: Some(state),
        ..QpModify::default()
    }
}

/// A second QP in side `s`'s PD (same CQ), established.
fn second_qp(s: &mut Side) -> iwarp_types::QpId {
    let attr = s.rnic.query_qp(s.qp).unwrap().attr;
    let (qp, _) = s.rnic.create_qp(&attr).unwrap();
    let p = LlpParams {
        ird: 1,
        ord: 1,
        role: LlpRole::Initiator,
        rtr: None,
    };
    s.rnic.qp_establish(qp, ConnId(9), p).unwrap();
    qp
}

#[test]
fn remote_invalidate_of_a_region_shared_on_several_streams_is_refused() {
    for allow in [false, true] {
        let mut p = Pair::new();
        second_qp(&mut p.b);
        p.b.rnic.allow_remote_invalidate_in_shared_pd(allow);
        let (target, _) = p.b.reg(64, ALL);
        let (sb, vb) = p.b.reg(64, ALL);
        p.b.post_recv(3, sb, vb, 64);
        let (sa, va) = p.a.reg(64, ALL);
        p.a.post(1, SendOp::SendInv { inv_stag: target }, sgl(sa, va, 8), SIG);
        p.run();
        let state = p.b.rnic.query_mr(target).unwrap().state;
        if allow {
            assert!(p.errors.is_empty());
            assert_eq!(state, StagState::Invalid);
        } else {
            // RFC 5040 8.1.1 #7 and 5.3: "STag cannot be invalidated".
            assert_eq!(p.errors, [(true, TermCode::RDMAP_PROT_CANNOT_INVALIDATE)]);
            assert_eq!(state, StagState::Valid);
            let c = p.b.cqes();
            assert_eq!(c[0].status, WcStatus::InvalidateStagInvalid);
        }
    }
}

#[test]
fn remote_invalidate_of_a_window_bound_to_the_stream_is_allowed_in_a_shared_pd() {
    let mut p = Pair::new();
    second_qp(&mut p.b);
    let (mr, vr) = p.b.reg(64, ALL);
    let mw = p.b.rnic.alloc_mw(p.b.pd, MwType::Type2).unwrap();
    let bind = SendOp::Bind {
        mw: mw.with_key(7),
        mr,
        to: vr,
        len: 64,
        access: Access::REMOTE_WRITE,
        zero_based: false,
    };
    p.b.post(1, bind, SgList::new(), SIG);
    assert!(p.b.take_ulpdu(1024).is_none(), "Bind sends nothing");
    assert_eq!(p.b.cqes()[0].status, WcStatus::Success);
    let (sb, vb) = p.b.reg(64, ALL);
    p.b.post_recv(3, sb, vb, 64);
    let (sa, va) = p.a.reg(64, ALL);
    let op = SendOp::SendInv {
        inv_stag: mw.with_key(7),
    };
    p.a.post(1, op, sgl(sa, va, 8), SIG);
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.b.cqes()[0].invalidated, Some(mw.with_key(7)));
    assert_eq!(p.b.rnic.query_mw(mw).unwrap().state, StagState::Invalid);
}

#[test]
fn query_rnic_reports_every_attribute() {
    let s = Side::new(1, &Opts::default());
    let a = s.rnic.query_rnic();
    assert_eq!(a.limits, s.rnic.limits());
    assert!(a.limits.max_sge >= 4, "verbs 8.1.3.2: at least 4 SGEs");
    assert_eq!((a.ird_pool_total, a.ord_pool_total), (0, 0), "per QP");
    assert!(a.srq && a.srq_arrival_order && a.cq_overflow_detection);
    assert!(a.can_modify_ird && a.can_increase_ord && a.can_resize_wq);
    assert!(!a.physical_buffer_lists);
    assert!(a.vendor.starts_with("iwarp-rdma"));
}

#[test]
fn destroy_qp_succeeds_in_every_state() {
    for st in [QpState::Terminate, QpState::Closing, QpState::Error] {
        let mut s = Side::new(1, &Opts::default());
        let (m, va) = s.reg(64, ALL);
        s.post_recv(2, m, va, 8);
        if st != QpState::Closing {
            // (SQ work would turn Modify to Closing into a Bad Close.)
            s.post(1, SendOp::Send, sgl(m, va, 8), SIG);
        }
        s.rnic.modify_qp(s.qp, &to(st)).unwrap();
        assert_eq!(s.rnic.query_qp(s.qp).unwrap().state, st);
        s.rnic.destroy_qp(s.qp).unwrap();
        assert_eq!(
            s.rnic.query_qp(s.qp).map(|_| ()),
            Err(VerbError::InvalidQp),
            "the old id names nothing"
        );
        // Its resources are free again: the CQ and PD can go.
        s.rnic.dealloc_stag(m).unwrap();
        s.rnic.destroy_cq(s.cq).unwrap();
        s.rnic.dealloc_pd(s.pd).unwrap();
    }
}

#[test]
fn llp_failure_in_closing_is_connection_lost_or_reset() {
    for (ev, kind) in [
        (LlpEvent::TimedOut, AsyncEventKind::LlpConnectionLost),
        (LlpEvent::Reset, AsyncEventKind::LlpConnectionReset),
    ] {
        let mut s = Side::new(1, &Opts::default());
        s.rnic.modify_qp(s.qp, &to(QpState::Closing)).unwrap();
        assert_eq!(s.rnic.qp_poll_llp_request(s.qp), Some(LlpRequest::Close));
        s.rnic.qp_llp_event(s.qp, ev);
        let i = s.rnic.query_qp(s.qp).unwrap();
        assert_eq!((i.state, i.conn), (QpState::Error, None), "disassociated");
        let k: Vec<_> = s.events().into_iter().map(|e| e.kind).collect();
        assert_eq!(k, [kind]);
    }
}

#[test]
fn message_longer_than_2_pow_32_minus_1_is_a_completion_error() {
    let mut s = Side::new(1, &Opts::default());
    let (m, va) = s.reg(64, ALL);
    let big = Sge {
        addr: va,
        length: u32::MAX,
        lkey: m,
    };
    let list = SgList::from_slice(&[big, big]).unwrap();
    s.post(1, SendOp::Send, list, SIG);
    assert_eq!(s.sent_terminate(), Some(TermCode::RDMAP_LOCAL_CATASTROPHIC));
    assert_eq!(s.cqes()[0].status, WcStatus::InvalidLength);
}

#[test]
fn srq_receive_sges_are_checked_against_the_srq_pd() {
    let mut p = Pair::with(Opts {
        srq: true,
        ..Opts::default()
    });
    let srq = p.b.rnic.query_qp(p.b.qp).unwrap().attr.srq.unwrap();
    // A region of another PD than the SRQ's (and the QP's): refused.
    let other = p.b.rnic.alloc_pd().unwrap();
    let (m, va) = p.b.reg_in(other, 64, ALL);
    let wr = RecvWr {
        wr_id: 5,
        sgl: sgl(m, va, 64),
    };
    p.b.rnic.post_srq_recv(srq, &wr).unwrap();
    let (sa, vs) = p.a.reg(64, ALL);
    p.a.post(1, SendOp::Send, sgl(sa, vs, 8), SIG);
    p.run();
    let c = p.b.cqes();
    assert_eq!((c[0].wr_id, c[0].status), (5, WcStatus::InvalidPd));
}

#[test]
fn window_stags_are_refused_in_sges() {
    let mut p = Pair::new();
    let (mr, vr) = p.a.reg(64, ALL);
    let mw = p.a.rnic.alloc_mw(p.a.pd, MwType::Type2).unwrap();
    let bind = SendOp::Bind {
        mw: mw.with_key(3),
        mr,
        to: vr,
        len: 64,
        access: Access::REMOTE_READ,
        zero_based: false,
    };
    p.a.post(1, bind, SgList::new(), SIG);
    assert!(p.a.take_ulpdu(1024).is_none());
    p.a.post(2, SendOp::Send, sgl(mw.with_key(3), vr, 8), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    let c = p.a.cqes();
    assert_eq!((c[1].wr_id, c[1].status), (2, WcStatus::InvalidStag));
    let _ = Stag(0);
}

#[test]
fn posts_in_error_and_terminate_are_immediate_errors() {
    for st in [QpState::Terminate, QpState::Error] {
        let mut s = Side::new(1, &Opts::default());
        let (m, va) = s.reg(64, ALL);
        s.rnic.modify_qp(s.qp, &to(st)).unwrap();
        let wr = iwarp_types::SendWr {
            wr_id: 1,
            op: SendOp::Send,
            sgl: sgl(m, va, 8),
            flags: SIG,
        };
        assert_eq!(s.rnic.post_send(s.qp, &wr), Err(VerbError::InvalidQpState));
        let rwr = RecvWr {
            wr_id: 2,
            sgl: sgl(m, va, 8),
        };
        assert_eq!(s.rnic.post_recv(s.qp, &rwr), Err(VerbError::InvalidQpState));
        assert!(s.cqes().is_empty(), "nothing enqueued");
    }
}
