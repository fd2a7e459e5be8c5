//! Conformance gaps closed by the audit (`docs/CONFORMANCE.md`): revoked memory during
//! outbound messages, the QP RQ Limit, Completion Event Handler identifiers, Terminate
//! records for Query QP, "Error State Entered", Bad LLP Close with inbound Reads, and IRD
//! changes in RTS.

use iwarp_types::{
    AsyncEventKind, EventResource, QpState, RecvWr, SendFlags, SendOp, SgList, Stag, TermCode,
    VerbError, WcStatus,
};
use iwarp_wire::rdmap::{Body, Segment};

use super::pair::*;
use crate::{LlpEvent, LlpRequest, QpModify};

fn state(s: &Side) -> QpState {
    s.rnic.query_qp(s.qp).unwrap().state
}

fn qp_events(s: &mut Side) -> Vec<AsyncEventKind> {
    let qp = s.qp;
    s.events()
        .into_iter()
        .filter(|e| e.resource == EventResource::Qp(qp))
        .map(|e| e.kind)
        .collect()
}

fn to(state: QpState) -> QpModify {
    QpModify {
        state: Some(state),
        ..QpModify::default()
    }
}

// --- Revoked memory (checklist 167, 182, 257; verbs 7.9, 7.10.4.1) ---

#[test]
fn source_deallocated_between_segments_terminates_instead() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(3000, ALL);
    p.a.post(1, SendOp::Send, sgl(sa, va, 3000), SIG);
    let first = p.a.take_ulpdu(1024).expect("first segment");
    assert_eq!(first.len(), 1024);
    p.a.rnic.dealloc_stag(sa).unwrap();
    // The next segment is replaced by the Terminate (a segment boundary).
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    let c = p.a.cqes();
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::InvalidStag));
    assert_eq!(state(&p.a), QpState::Terminate);
    assert!(qp_events(&mut p.a).is_empty(), "reported by the completion");
}

#[test]
fn unrelated_memory_changes_between_segments_do_not_disturb_a_message() {
    // The STag table's epoch moves (another region deallocated): the check runs again,
    // finds the source intact, and the message goes on; then the source itself goes.
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(3000, ALL);
    let (other, _) = p.a.reg(100, ALL);
    p.a.fill_pattern(va, 3000, 7);
    p.a.post(1, SendOp::Send, sgl(sa, va, 3000), SIG);
    let first = p.a.take_ulpdu(1024).expect("first segment");
    assert_eq!(first.len(), 1024);
    p.a.rnic.dealloc_stag(other).unwrap();
    let second = p.a.take_ulpdu(1024).expect("second segment");
    assert_eq!(second.len(), 1024);
    assert_eq!(&second[18..], p.a.bytes(va + 1006, 1006));
    assert_eq!(state(&p.a), QpState::Rts);
    p.a.rnic.dealloc_stag(sa).unwrap();
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
}

#[test]
fn source_revoked_before_a_retransmission_resets_the_stream() {
    for dealloc in [true, false] {
        let mut p = Pair::new();
        let (sa, va) = p.a.reg(100, ALL);
        p.a.fill_pattern(va, 100, 1);
        p.a.post(1, SendOp::Send, sgl(sa, va, 100), SIG);
        let (d, len) = p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem).unwrap();
        let mut first = vec![0u8; len];
        p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut first);
        assert_eq!(&first[18..], p.a.bytes(va, 100));
        if dealloc {
            p.a.rnic.dealloc_stag(sa).unwrap();
        } else {
            // Re-registered elsewhere under the same index and key: the old buffer is
            // no longer registered.
            let attr = crate::mem::MrAttr {
                pd: p.a.pd,
                region: p.a.arena,
                region_offset: 0x20_0000,
                len: 100,
                va,
                zero_based: false,
                access: ALL,
                key: sa.key(),
                remote_access_flag: true,
            };
            let again = p.a.rnic.rereg_mr(sa, &attr, Some(ARENA as u64)).unwrap();
            assert_eq!(again, sa);
        }
        // TCP retransmits: the bytes are not read from revoked memory.
        let mut retx = vec![0xffu8; len];
        p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut retx);
        assert!(retx.iter().all(|b| *b == 0), "poisoned: DDP version 0");
        assert!(Segment::parse(&retx).is_err(), "the peer rejects it");
        assert_eq!(state(&p.a), QpState::Error);
        assert_eq!(
            p.a.rnic.qp_poll_llp_request(p.a.qp),
            Some(LlpRequest::Reset)
        );
        let c = p.a.cqes();
        assert_eq!((c.len(), c[0].status), (1, WcStatus::InvalidStag));
        assert_eq!(p.a.rnic.qp_counters(p.a.qp).unwrap().stale_fills, 1);
        p.a.rnic.qp_ulpdu_acked(p.a.qp, &d);
        assert!(p.a.cqes().is_empty(), "no second completion");
    }
}

#[test]
fn read_source_revoked_mid_response_terminates_with_the_remaining_request() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(3000, ALL);
    let (sb, vb) = p.b.reg(3000, ALL);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, op, sgl(sa, va, 3000), SIG);
    assert!(p.step(true), "Read Request to b");
    assert!(p.step(false), "first Response segment to a");
    p.b.rnic.dealloc_stag(sb).unwrap();
    let t =
        p.b.sent_terminate_repr()
            .expect("Terminate instead of the Response");
    assert_eq!(t.code, TermCode::RDMAP_INVALID_STAG);
    let sent = (1024 - 14) as u32;
    let rr = t
        .rdma_header
        .expect("Terminated RDMA header (RFC 5040 4.8)");
    assert_eq!(rr.size, 3000 - sent, "bytes left");
    assert_eq!(rr.src_to, vb + u64::from(sent));
    assert_eq!(rr.sink_to, va + u64::from(sent));
    assert_eq!(
        qp_events(&mut p.b),
        [AsyncEventKind::ProtectionError(
            TermCode::RDMAP_INVALID_STAG
        )]
    );
}

#[test]
fn read_response_retransmission_after_revocation_resets() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(100, ALL);
    let (sb, vb) = p.b.reg(100, ALL);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, op, sgl(sa, va, 100), SIG);
    assert!(p.step(true));
    let (d, len) = p.b.rnic.qp_next_ulpdu(p.b.qp, 1024, &p.b.mem).unwrap();
    let mut buf = vec![0u8; len];
    p.b.rnic.fill_ulpdu(p.b.qp, &d, &p.b.mem, &mut buf);
    p.b.rnic.dealloc_stag(sb).unwrap();
    p.b.rnic.fill_ulpdu(p.b.qp, &d, &p.b.mem, &mut buf);
    assert!(buf.iter().all(|b| *b == 0));
    assert_eq!(state(&p.b), QpState::Error);
    assert_eq!(
        p.b.rnic.qp_poll_llp_request(p.b.qp),
        Some(LlpRequest::Reset)
    );
    assert_eq!(
        qp_events(&mut p.b),
        [AsyncEventKind::ProtectionError(
            TermCode::RDMAP_INVALID_STAG
        )]
    );
}

// --- QP RQ Limit (checklist 98; verbs 6.3.8) ---

#[test]
fn qp_rq_limit_create_query_modify_and_one_shot() {
    let mut s = Side::new(
        1,
        &Opts {
            srq: true,
            ..Opts::default()
        },
    );
    let attr = s.rnic.query_qp(s.qp).unwrap().attr;
    assert_eq!(
        s.rnic.create_qp_with_rq_limit(&attr, 65).map(|_| ()),
        Err(VerbError::LimitOutOfRange),
        "above the SRQ's 64 WRs"
    );
    let (qp, _) = s.rnic.create_qp_with_rq_limit(&attr, 2).unwrap();
    let i = s.rnic.query_qp(qp).unwrap();
    assert_eq!((i.rq_limit, i.rq_limit_armed), (2, true), "armed at create");
    let q0 = s.rnic.query_qp(s.qp).unwrap();
    assert_eq!((q0.rq_limit, q0.rq_limit_armed), (0, false));

    // Not exceeded: nothing; exceeded: one event, then disarmed (one shot).
    let fire = |s: &mut Side, n| {
        s.rnic
            .with_qp(qp, None, |q, ctx| q.rq_limit_check(ctx, n))
            .unwrap()
    };
    fire(&mut s, 2);
    assert!(s.events().is_empty());
    fire(&mut s, 3);
    fire(&mut s, 4);
    let ev = s.events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].resource, EventResource::Qp(qp));
    assert_eq!(ev[0].kind, AsyncEventKind::QpRqLimitReached);
    assert!(!s.rnic.query_qp(qp).unwrap().rq_limit_armed);

    // Re-arm through Modify QP (also allowed while armed), change, range checks.
    let rearm = QpModify {
        arm_rq_limit: true,
        ..QpModify::default()
    };
    s.rnic.modify_qp(qp, &rearm).unwrap();
    s.rnic.modify_qp(qp, &rearm).unwrap();
    assert!(s.rnic.query_qp(qp).unwrap().rq_limit_armed);
    fire(&mut s, 3);
    assert_eq!(s.events().len(), 1);
    let set = |l| QpModify {
        rq_limit: Some(l),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(qp, &set(65)),
        Err(VerbError::LimitOutOfRange)
    );
    s.rnic.modify_qp(qp, &set(5)).unwrap();
    assert_eq!(s.rnic.query_qp(qp).unwrap().rq_limit, 5);
    s.rnic.modify_qp(qp, &set(0)).unwrap();
    assert!(!s.rnic.query_qp(qp).unwrap().rq_limit_armed);
    let with_state = QpModify {
        state: Some(QpState::Error),
        rq_limit: Some(1),
        ..QpModify::default()
    };
    assert_eq!(
        s.rnic.modify_qp(qp, &with_state),
        Err(VerbError::CannotChangeAttribute)
    );
}

#[test]
fn qp_rq_limit_needs_an_srq() {
    let mut s = Side::new(1, &Opts::default());
    let attr = s.rnic.query_qp(s.qp).unwrap().attr;
    assert_eq!(
        s.rnic.create_qp_with_rq_limit(&attr, 1).map(|_| ()),
        Err(VerbError::InvalidModifier)
    );
    let m = QpModify {
        rq_limit: Some(1),
        ..QpModify::default()
    };
    assert_eq!(s.rnic.modify_qp(s.qp, &m), Err(VerbError::InvalidModifier));
}

#[test]
fn qp_rq_limit_does_not_disturb_traffic() {
    // In-order delivery keeps at most one message in progress: a limit of 1 is never
    // exceeded and the QP runs as without one.
    let mut p = Pair::with(Opts {
        srq: true,
        ..Opts::default()
    });
    let srq = p.b.rnic.query_qp(p.b.qp).unwrap().attr.srq.unwrap();
    let m = QpModify {
        rq_limit: Some(1),
        ..QpModify::default()
    };
    p.b.rnic.modify_qp(p.b.qp, &m).unwrap();
    let (sb, vb) = p.b.reg(4096, ALL);
    for i in 0..4 {
        let wr = RecvWr {
            wr_id: i,
            sgl: sgl(sb, vb, 4096),
        };
        p.b.rnic.post_srq_recv(srq, &wr).unwrap();
    }
    let (sa, va) = p.a.reg(3000, ALL);
    for i in 0..4 {
        p.a.post(i, SendOp::Send, sgl(sa, va, 3000), SIG);
    }
    p.run();
    assert_eq!(p.b.cqes().len(), 4);
    assert!(qp_events(&mut p.b).is_empty());
    assert!(p.b.rnic.query_qp(p.b.qp).unwrap().rq_limit_armed);
}

// --- Completion Event Handler identifiers (checklist 19, 227; verbs 9.2.3, 9.4.1) ---

#[test]
fn cq_event_handler_identifiers() {
    let limits = crate::RnicLimits {
        max_cehs: 2,
        ..crate::RnicLimits::default()
    };
    let mut r = crate::Rnic::new(crate::RnicConfig { limits, seed: 1 });
    let h1 = r.register_cq_event_handler().unwrap();
    let h2 = r.register_cq_event_handler().unwrap();
    assert!(h1 != 0 && h2 != 0 && h1 != h2, "unique, never 0");
    assert_eq!(
        r.register_cq_event_handler(),
        Err(VerbError::InsufficientResources)
    );
    let (cq, depth) = r.create_cq_with_handler(8, h2).unwrap();
    assert_eq!(depth, 8);
    assert_eq!(r.query_cq_handler(cq), Ok(h2));
    assert_eq!(r.query_cq(cq), Ok(8));
    let (plain, _) = r.create_cq(8).unwrap();
    assert_eq!(r.query_cq_handler(plain), Ok(0), "none");
    assert_eq!(
        r.create_cq_with_handler(8, 0x00ab_cdef).map(|_| ()),
        Err(VerbError::InvalidModifier),
        "Invalid CEH Identifier"
    );
    r.clear_cq_event_handler(h1).unwrap();
    assert_eq!(
        r.clear_cq_event_handler(h1),
        Err(VerbError::InvalidModifier)
    );
    assert_eq!(
        r.create_cq_with_handler(8, h1).map(|_| ()),
        Err(VerbError::InvalidModifier)
    );
    assert_eq!(
        r.query_cq_handler(iwarp_types::CqId(0x00ff_0001)),
        Err(VerbError::InvalidCq)
    );
    // Notifications of a CQ name the CQ; its handler is found by Query CQ.
    r.req_notify_cq(cq, false).unwrap();
    assert!(r.poll_cq_event().is_none());
}

// --- Terminate records (checklist 73; verbs 6.2.4, 9.2.5.2) ---

#[test]
fn sent_terminate_message_is_queryable_in_terminate_and_error() {
    let mut s = Side::new(1, &Opts::default());
    s.rnic.qp_terminate(s.qp, TermCode::LLP_CRC);
    let bytes = s.take_ulpdu(4096).unwrap();
    let t = s.rnic.query_qp(s.qp).unwrap().terminate.unwrap();
    assert!(t.local);
    assert_eq!(t.code, TermCode::LLP_CRC);
    assert_eq!(t.message(), &bytes[18..], "the body as sent");
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().terminate, Some(t));
    s.rnic.modify_qp(s.qp, &to(QpState::Idle)).unwrap();
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().terminate, None);
}

#[test]
fn terminate_received_while_in_terminate_is_recorded() {
    let mut p = Pair::new();
    p.a.rnic.modify_qp(p.a.qp, &to(QpState::Terminate)).unwrap();
    p.b.rnic.modify_qp(p.b.qp, &to(QpState::Terminate)).unwrap();
    let ta = p.a.take_ulpdu(4096).unwrap();
    let tb = p.b.take_ulpdu(4096).unwrap();
    assert!(matches!(
        Segment::parse(&tb).unwrap().body,
        Body::Terminate(_)
    ));
    assert_eq!(p.a.inject(&tb), Ok(()));
    assert_eq!(p.b.inject(&ta), Ok(()));
    for (s, theirs) in [(&mut p.a, &tb), (&mut p.b, &ta)] {
        let i = s.rnic.query_qp(s.qp).unwrap();
        assert_eq!(i.state, QpState::Terminate);
        let mine = i.terminate.unwrap();
        assert!(mine.local);
        let peer = i.terminate_received.expect("the peer's Terminate is kept");
        assert!(!peer.local);
        assert_eq!(peer.code, TermCode::RDMAP_LOCAL_CATASTROPHIC);
        assert_eq!(peer.message(), &theirs[18..]);
        assert_eq!(s.rnic.qp_counters(s.qp).unwrap().terms_received, 1);
        assert_eq!(s.take_ulpdu(4096), None, "never answered");
        assert!(qp_events(s).is_empty());
    }
    // A third one is ignored.
    assert_eq!(p.a.inject(&tb), Ok(()));
    assert_eq!(p.a.rnic.qp_counters(p.a.qp).unwrap().terms_received, 2);
}

// --- "Error State Entered" (checklist 63-64; verbs 6.2.3, d1) ---

#[test]
fn error_state_entered_only_when_no_other_report_covers_it() {
    // Inbound error (async ProtectionError already raised), then Error: reported.
    let mut s = Side::new(1, &Opts::default());
    let seg = [
        0xc1u8, 0x40, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ];
    assert!(s.inject(&seg).is_err());
    assert!(s.take_ulpdu(4096).is_some());
    let _ = qp_events(&mut s);
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(qp_events(&mut s), [AsyncEventKind::QpErrorStateEntered]);

    // Modify QP to Terminate: never.
    let mut s = Side::new(1, &Opts::default());
    s.rnic.modify_qp(s.qp, &to(QpState::Terminate)).unwrap();
    assert!(s.take_ulpdu(4096).is_some());
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Error);
    assert!(qp_events(&mut s).is_empty());

    // An error reported in a completion: never.
    let mut s = Side::new(1, &Opts::default());
    let (st, va) = s.reg(16, iwarp_types::Access::LOCAL_WRITE);
    s.post(1, SendOp::Send, sgl(st, va, 8), SIG);
    assert!(s.take_ulpdu(4096).is_some());
    s.rnic.qp_llp_event(s.qp, LlpEvent::Closed);
    assert_eq!(state(&s), QpState::Error);
    assert_eq!(s.cqes()[0].status, WcStatus::AccessViolation);
    assert!(qp_events(&mut s).is_empty());
}

// --- Bad LLP Close with inbound Reads, IRD in RTS (checklist 48, 112) ---

#[test]
fn remote_close_while_the_irq_holds_work_is_a_bad_llp_close() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, op, sgl(sa, va, 64), SIG);
    assert!(p.step(true), "the Read Request reaches b");
    // b's SQ is empty, its IRQ holds the Read: the peer's FIN is a Bad LLP Close.
    p.b.rnic.qp_llp_event(p.b.qp, LlpEvent::PeerClosed);
    assert_eq!(state(&p.b), QpState::Terminate);
    assert_eq!(
        p.b.sent_terminate(),
        Some(TermCode::RDMAP_CATASTROPHIC_STREAM)
    );
    assert_eq!(qp_events(&mut p.b), [AsyncEventKind::BadLlpClose]);
}

#[test]
fn ird_change_in_rts_is_refused_while_inbound_reads_are_outstanding() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, op, sgl(sa, va, 64), SIG);
    assert!(p.step(true));
    let ird = |n| QpModify {
        ird: Some(n),
        ..QpModify::default()
    };
    assert_eq!(
        p.b.rnic.modify_qp(p.b.qp, &ird(2)),
        Err(VerbError::CannotChangeAttribute)
    );
    assert_eq!(p.b.rnic.query_qp(p.b.qp).unwrap().attr.ird, 4, "unchanged");
    p.run();
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
    p.b.rnic.modify_qp(p.b.qp, &ird(2)).unwrap();
    assert_eq!(p.b.rnic.query_qp(p.b.qp).unwrap().attr.ird, 2);
    // ORD may be reduced in RTS at any time (verbs 6.5).
    let ord = QpModify {
        ord: Some(1),
        ..QpModify::default()
    };
    p.a.rnic.modify_qp(p.a.qp, &ord).unwrap();
    assert_eq!(p.a.rnic.query_qp(p.a.qp).unwrap().attr.ord, 1);
    let _ = (SendFlags::NONE, SgList::new(), Stag(0));
}
