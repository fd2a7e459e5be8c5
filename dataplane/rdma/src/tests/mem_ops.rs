//! Memory work requests end to end: Bind (type 2 WR and type 1 verb) with remote access
//! through the window, Fast-Register, Invalidate Local STag, Send with Invalidate.

use iwarp_types::{Access, SendFlags, SendOp, SgList, Stag, TermCode, WcOpcode, WcStatus};

use super::pair::*;
use crate::mem::{MwBind, MwType, StagState};

const RW: Access = Access(Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0);

#[test]
fn bind_type2_then_remote_write_and_read_through_the_window() {
    let mut p = Pair::new();
    let (mr, vb) = p.b.reg(4096, ALL);
    let mw =
        p.b.rnic
            .alloc_mw(p.b.pd, MwType::Type2)
            .unwrap()
            .with_key(0x33);
    let bind = SendOp::Bind {
        mw,
        mr,
        to: vb + 1024,
        len: 512,
        access: RW,
        zero_based: false,
    };
    p.b.post(7, bind, SgList::new(), SIG);
    p.run();
    assert_eq!(p.moved, 0, "Bind puts nothing on the wire");
    let c = p.b.cqes();
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode),
        (7, WcStatus::Success, WcOpcode::Bind)
    );

    let (sa, va) = p.a.reg(4096, ALL);
    p.a.fill_pattern(va, 512, 5);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: vb + 1024,
            rkey: mw,
        },
        sgl(sa, va, 512),
        SIG,
    );
    let read = SendOp::Read {
        remote_to: vb + 1024,
        rkey: mw,
        invalidate_local: false,
    };
    p.a.post(2, read, sgl(sa, va + 2048, 512), SIG);
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.b.bytes(vb + 1024, 512), p.a.bytes(va, 512));
    assert_eq!(p.a.bytes(va + 2048, 512), p.a.bytes(va, 512));
    assert_eq!(p.a.cqes().len(), 2);

    // One byte outside the window.
    p.a.post(
        3,
        SendOp::Write {
            remote_to: vb + 1023,
            rkey: mw,
        },
        sgl(sa, va, 2),
        SIG,
    );
    p.run();
    assert_eq!(p.errors, [(true, TermCode::DDP_TAGGED_BASE_BOUNDS)]);
}

#[test]
fn bind_type1_by_verb_then_remote_write() {
    let mut p = Pair::new();
    let (mr, vb) = p.b.reg(4096, ALL);
    let mw =
        p.b.rnic
            .alloc_mw(p.b.pd, MwType::Type1)
            .unwrap()
            .with_key(9);
    let b = MwBind {
        mw,
        mr,
        to: vb,
        len: 100,
        access: Access::REMOTE_WRITE,
        zero_based: true,
    };
    p.b.rnic.bind_mw_type1(p.b.pd, &b).unwrap();
    let (sa, va) = p.a.reg(100, ALL);
    p.a.fill_pattern(va, 100, 2);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: 0,
            rkey: mw,
        },
        sgl(sa, va, 100),
        SIG,
    );
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.b.bytes(vb, 100), p.a.bytes(va, 100));
    // The window grants no read.
    let read = SendOp::Read {
        remote_to: 0,
        rkey: mw,
        invalidate_local: false,
    };
    p.a.post(2, read, sgl(sa, va, 10), SIG);
    p.run();
    assert_eq!(p.errors, [(true, TermCode::RDMAP_ACCESS_RIGHTS)]);
}

#[test]
fn bind_errors_complete_in_error() {
    let mut p = Pair::new();
    let (mr, vb) = p.b.reg(4096, Access::LOCAL_READ | Access::LOCAL_WRITE);
    let mw =
        p.b.rnic
            .alloc_mw(p.b.pd, MwType::Type2)
            .unwrap()
            .with_key(1);
    let bind = SendOp::Bind {
        mw,
        mr,
        to: vb,
        len: 16,
        access: RW,
        zero_based: false,
    };
    p.b.post(4, bind, SgList::new(), SendFlags::NONE);
    assert_eq!(
        p.b.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    let c = p.b.cqes();
    assert_eq!((c[0].wr_id, c[0].status), (4, WcStatus::AccessViolation));
}

#[test]
fn fast_register_then_remote_write() {
    let mut p = Pair::new();
    let stag =
        p.b.rnic
            .alloc_mr_stag(p.b.pd, 8192, true)
            .unwrap()
            .with_key(0x77);
    let fr = SendOp::FastReg {
        stag,
        region: p.b.arena,
        region_offset: 65536,
        len: 4096,
        va: 0x5000,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        zero_based: false,
    };
    p.b.post(1, fr, SgList::new(), SIG);
    p.run();
    let c = p.b.cqes();
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::Success, WcOpcode::FastReg)
    );
    assert_eq!(p.b.rnic.query_mr(stag).unwrap().state, StagState::Valid);
    let (sa, va) = p.a.reg(64, ALL);
    p.a.fill_pattern(va, 64, 8);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: 0x5010,
            rkey: stag,
        },
        sgl(sa, va, 64),
        SIG,
    );
    p.run();
    assert!(p.errors.is_empty());
    assert_eq!(
        &p.b.mem.arena(p.b.arena)[65536 + 16..65536 + 80],
        p.a.bytes(va, 64)
    );
    // A second Fast-Register of a Valid STag fails.
    p.b.post(2, fr, SgList::new(), SendFlags::NONE);
    p.run();
    assert_eq!(p.b.cqes()[0].status, WcStatus::StagNotInvalid);
}

/// A QP of `pair` side b with the given privileged / fast_reg attributes, established.
fn side_b_qp(p: &mut Pair, privileged: bool, fast_reg: bool) {
    let s = &mut p.b;
    let mut attr = s.rnic.query_qp(s.qp).unwrap().attr;
    attr.privileged = privileged;
    attr.fast_reg = fast_reg;
    let (qp2, _) = s.rnic.create_qp(&attr).unwrap();
    let params = crate::LlpParams {
        ird: 1,
        ord: 1,
        role: crate::LlpRole::Initiator,
        rtr: None,
    };
    s.rnic
        .qp_establish(qp2, iwarp_types::ConnId(2), params)
        .unwrap();
    s.qp = qp2;
}

fn fast_reg_of_side_b(p: &mut Pair) -> SendOp {
    let s = &mut p.b;
    let stag = s.rnic.alloc_mr_stag(s.pd, 4096, true).unwrap();
    SendOp::FastReg {
        stag,
        region: s.arena,
        region_offset: 0,
        len: 4096,
        va: 0,
        access: Access::LOCAL_READ,
        zero_based: true,
    }
}

#[test]
fn fast_register_needs_a_privileged_qp() {
    let mut p = Pair::new();
    side_b_qp(&mut p, false, false);
    let fr = fast_reg_of_side_b(&mut p);
    let s = &mut p.b;
    s.post(1, fr, SgList::new(), SIG);
    assert_eq!(s.sent_terminate(), Some(TermCode::RDMAP_LOCAL_CATASTROPHIC));
    assert_eq!(s.cqes()[0].status, WcStatus::QpNotPrivileged);
}

#[test]
fn fast_reg_attribute_allows_fast_register_without_stag0() {
    let mut p = Pair::new();
    side_b_qp(&mut p, false, true);
    let fr = fast_reg_of_side_b(&mut p);
    let s = &mut p.b;
    s.post(1, fr, SgList::new(), SIG);
    assert_eq!(s.sent_terminate(), None);
    assert_eq!(s.cqes()[0].status, WcStatus::Success);
    // STag 0 stays refused: a Send sourced from it is a protection error.
    let sgl = SgList::from_slice(&[iwarp_types::Sge {
        lkey: Stag::ZERO,
        addr: 0,
        length: 8,
    }])
    .unwrap();
    s.post(2, SendOp::Send, sgl, SIG);
    assert!(
        s.sent_terminate().is_some(),
        "STag 0 without privilege ends the QP"
    );
    let c = s.cqes();
    assert_eq!(c.len(), 1);
    assert_ne!(c[0].status, WcStatus::Success);
}

#[test]
fn local_invalidate_revokes_remote_access() {
    let mut p = Pair::new();
    let (mr, vb) = p.b.reg(64, ALL);
    p.b.post(1, SendOp::LocalInv { stag: mr }, SgList::new(), SIG);
    p.run();
    let c = p.b.cqes();
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(p.b.rnic.query_mr(mr).unwrap().state, StagState::Invalid);
    let (sa, va) = p.a.reg(64, ALL);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: vb,
            rkey: mr,
        },
        sgl(sa, va, 8),
        SIG,
    );
    p.run();
    assert_eq!(p.errors, [(true, TermCode::DDP_TAGGED_INVALID_STAG)]);
}

fn send_with_invalidate(se: bool) {
    let mut p = Pair::new();
    let (target, vt) = p.b.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    p.b.post_recv(3, sb, vb, 64);
    p.b.rnic.req_notify_cq(p.b.cq, true).unwrap();
    let (sa, va) = p.a.reg(64, ALL);
    let op = if se {
        SendOp::SendSeInv { inv_stag: target }
    } else {
        SendOp::SendInv { inv_stag: target }
    };
    p.a.post(1, op, sgl(sa, va, 10), SIG);
    p.run();
    assert!(p.errors.is_empty());
    let c = p.b.cqes();
    assert_eq!(
        (c[0].wr_id, c[0].byte_len, c[0].invalidated),
        (3, 10, Some(target))
    );
    assert_eq!(c[0].solicited, se);
    assert_eq!(p.b.rnic.poll_cq_event().is_some(), se);
    assert_eq!(p.b.rnic.query_mr(target).unwrap().state, StagState::Invalid);
    let want = if se {
        WcOpcode::SendSeInv
    } else {
        WcOpcode::SendInv
    };
    assert_eq!(p.a.cqes()[0].opcode, want);
    p.a.post(
        2,
        SendOp::Write {
            remote_to: vt,
            rkey: target,
        },
        sgl(sa, va, 8),
        SIG,
    );
    p.run();
    assert_eq!(p.errors, [(true, TermCode::DDP_TAGGED_INVALID_STAG)]);
}

#[test]
fn send_inv_and_send_se_inv() {
    send_with_invalidate(false);
    send_with_invalidate(true);
}

#[test]
fn read_sink_needs_remote_write() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, Access::LOCAL_READ | Access::LOCAL_WRITE);
    let (sb, vb) = p.b.reg(64, ALL);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local: false,
    };
    p.a.post(1, op, sgl(sa, va, 8), SIG);
    p.run();
    assert_eq!(
        p.errors,
        [(false, TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED)]
    );
    let _ = Stag(0);
}
