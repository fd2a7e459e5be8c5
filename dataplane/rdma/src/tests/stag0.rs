//! The STag of zero (verbs 7.2.1, 8.1.3.2.1; checklist rows 123-127, 91): privileged local
//! "physical" addressing of caller arenas, never remote, never a verb input.

use iwarp_types::{
    Access, QpState, RecvWr, SendFlags, SendOp, SgList, Sge, Stag, TermCode, VerbError, WcStatus,
};

use super::pair::*;
use crate::mem::{stag0_addr, MrAttr, MwType, SharedMrAttr};

/// A one-element STag-0 SGL naming `len` bytes at arena offset `off` of side `s`.
fn phys(s: &Side, off: u64, len: u32) -> SgList {
    SgList::single(Sge {
        addr: stag0_addr(s.arena, off).unwrap(),
        length: len,
        lkey: Stag::ZERO,
    })
}

fn state(s: &Side) -> QpState {
    s.rnic.query_qp(s.qp).unwrap().state
}

#[test]
fn privileged_send_and_receive_by_physical_address() {
    let mut p = Pair::new();
    let src = 0x20_0000u64;
    let dst = 0x30_0000u64;
    for (i, b) in p.a.mem.arena_mut(p.a.arena)[src as usize..src as usize + 3000]
        .iter_mut()
        .enumerate()
    {
        *b = (i % 251) as u8;
    }
    let wr = RecvWr {
        wr_id: 7,
        sgl: phys(&p.b, dst, 4000),
    };
    p.b.rnic.post_recv(p.b.qp, &wr).unwrap();
    p.a.post(1, SendOp::Send, phys(&p.a, src, 3000), SIG);
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let c = p.b.cqes();
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].byte_len),
        (7, WcStatus::Success, 3000)
    );
    let (s, d) = (src as usize, dst as usize);
    assert_eq!(
        &p.b.mem.arena(p.b.arena)[d..d + 3000],
        &p.a.mem.arena(p.a.arena)[s..s + 3000]
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
}

#[test]
fn privileged_write_source_by_physical_address() {
    let mut p = Pair::new();
    let (sb, vb) = p.b.reg(512, ALL);
    p.a.mem.arena_mut(p.a.arena)[0x10_0000..0x10_0200].fill(0x3c);
    let op = SendOp::Write {
        remote_to: vb,
        rkey: sb,
    };
    p.a.post(1, op, phys(&p.a, 0x10_0000, 512), SIG);
    p.run();
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
    assert!(p.b.bytes(vb, 512).iter().all(|b| *b == 0x3c));
}

#[test]
fn physical_range_outside_the_arena_is_a_bounds_error() {
    let mut p = Pair::new();
    let end = ARENA as u64;
    p.a.post(1, SendOp::Send, phys(&p.a, end - 10, 11), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::BaseBounds);
}

#[test]
fn non_privileged_qp_gets_a_protection_error() {
    let o = Opts {
        privileged: false,
        ..Opts::default()
    };
    let mut p = Pair::with(o);
    p.a.post(1, SendOp::Send, phys(&p.a, 0x1000, 8), SIG);
    p.a.post(2, SendOp::Send, phys(&p.a, 0x1000, 0), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    let c = p.a.cqes();
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::InvalidStag));
    assert_eq!(state(&p.a), QpState::Terminate);

    // A receive naming STag 0 on a non-privileged QP fails when it is used.
    let wr = RecvWr {
        wr_id: 9,
        sgl: phys(&p.b, 0x1000, 64),
    };
    p.b.rnic.post_recv(p.b.qp, &wr).unwrap();
    let (sa, va) = p.b.reg(8, ALL);
    let _ = (sa, va);
    let mut q = Pair::with(o);
    q.b.rnic.post_recv(q.b.qp, &wr).unwrap();
    let (sa, va) = q.a.reg(8, ALL);
    q.a.post(1, SendOp::Send, sgl(sa, va, 8), SIG);
    q.run();
    let c = q.b.cqes();
    assert_eq!((c[0].wr_id, c[0].status), (9, WcStatus::InvalidStag));
    assert_eq!(q.errors, [(true, TermCode::RDMAP_LOCAL_CATASTROPHIC)]);
}

#[test]
fn srq_wqe_with_stag0_fails_only_on_a_non_privileged_qp() {
    for privileged in [true, false] {
        let mut p = Pair::with(Opts {
            srq: true,
            privileged,
            ..Opts::default()
        });
        let srq = p.b.rnic.query_qp(p.b.qp).unwrap().attr.srq.unwrap();
        let wr = RecvWr {
            wr_id: 4,
            sgl: phys(&p.b, 0x3f_0000, 64),
        };
        p.b.rnic.post_srq_recv(srq, &wr).unwrap();
        let (sa, va) = p.a.reg(16, ALL);
        p.a.fill_pattern(va, 16, 5);
        p.a.post(1, SendOp::Send, sgl(sa, va, 16), SIG);
        p.run();
        let c = p.b.cqes();
        if privileged {
            assert_eq!(c[0].status, WcStatus::Success);
            let got = p.b.mem.arena(p.b.arena)[0x3f_0000..0x3f_0010].to_vec();
            assert_eq!(got, p.a.bytes(va, 16));
        } else {
            assert_eq!(c[0].status, WcStatus::InvalidStag);
            assert_eq!(state(&p.b), QpState::Terminate);
        }
    }
}

#[test]
fn stag0_in_a_read_or_as_a_write_sink_is_a_completion_error() {
    // Privileged or not: STag 0 can never be advertised.
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let read = SendOp::Read {
        remote_to: 0,
        rkey: Stag(0x1234_5600),
        invalidate_local: false,
    };
    p.a.post(1, read, phys(&p.a, 0x1000, 64), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::InvalidStag);

    let mut p = Pair::new();
    let read = SendOp::Read {
        remote_to: 0,
        rkey: Stag::ZERO,
        invalidate_local: false,
    };
    p.a.post(1, read, sgl(sa, va, 64), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::InvalidStag);

    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let write = SendOp::Write {
        remote_to: 0,
        rkey: Stag::ZERO,
    };
    p.a.post(1, write, sgl(sa, va, 64), SIG);
    assert_eq!(
        p.a.sent_terminate(),
        Some(TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.cqes()[0].status, WcStatus::InvalidStag);

    // Zero length: nothing is validated (verbs 7.6.3), the Write goes out.
    let mut p = Pair::new();
    p.a.post(1, write, SgList::new(), SIG);
    p.run();
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
}

#[test]
fn stag0_is_never_remotely_accessible() {
    let mut p = Pair::new();
    // An RDMA Write to STag 0 (forced onto the wire by a peer that does not check).
    let mut seg = vec![0u8; 14 + 4];
    iwarp_wire::ddp::Repr {
        last: true,
        opcode: iwarp_wire::rdmap::Opcode::Write,
        model: iwarp_wire::ddp::Model::Tagged {
            stag: Stag::ZERO,
            to: stag0_addr(p.b.arena, 0x1000).unwrap(),
        },
    }
    .emit_bytes(&mut seg);
    assert_eq!(p.b.inject(&seg), Err(TermCode::DDP_TAGGED_INVALID_STAG));
    assert!(p.b.mem.arena(p.b.arena)[0x1000..0x1004]
        .iter()
        .all(|b| *b == 0));
    let ev = p.b.events();
    assert_eq!(
        ev[0].kind,
        iwarp_types::AsyncEventKind::ProtectionError(TermCode::DDP_TAGGED_INVALID_STAG),
        "affiliated asynchronous error"
    );
}

#[test]
fn stag0_is_refused_by_every_verb() {
    let mut s = Side::new(1, &Opts::default());
    let z = Stag::ZERO;
    assert_eq!(s.rnic.query_mr(z).map(|_| ()), Err(VerbError::InvalidStag));
    assert_eq!(s.rnic.query_mw(z).map(|_| ()), Err(VerbError::InvalidStag));
    assert_eq!(s.rnic.dealloc_stag(z), Err(VerbError::InvalidStag));
    let a = MrAttr {
        pd: s.pd,
        region: s.arena,
        region_offset: 0,
        len: 64,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ,
        key: 0,
        remote_access_flag: false,
    };
    assert_eq!(
        s.rnic.rereg_mr(z, &a, Some(ARENA as u64)),
        Err(VerbError::InvalidStag)
    );
    let sh = SharedMrAttr {
        pd: s.pd,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ,
        key: 0,
        remote_access_flag: false,
    };
    assert_eq!(s.rnic.reg_shared_mr(z, &sh), Err(VerbError::InvalidStag));
    let bind = crate::mem::MwBind {
        mw: z,
        mr: z,
        to: 0,
        len: 8,
        access: Access::REMOTE_READ,
        zero_based: false,
    };
    assert!(s.rnic.bind_mw_type1(s.pd, &bind).is_err());

    // Work requests: Invalidate, Fast-Register and Bind on STag 0 complete in error.
    let mw = s.rnic.alloc_mw(s.pd, MwType::Type2).unwrap();
    let ops = [
        (SendOp::LocalInv { stag: z }, WcStatus::InvalidStag),
        (
            SendOp::FastReg {
                stag: z,
                region: s.arena,
                region_offset: 0,
                len: 64,
                va: 0,
                access: Access::LOCAL_READ,
                zero_based: true,
            },
            WcStatus::InvalidStag,
        ),
        (
            SendOp::Bind {
                mw: mw.with_key(9),
                mr: z,
                to: 0,
                len: 8,
                access: Access::REMOTE_READ,
                zero_based: false,
            },
            WcStatus::InvalidRegion,
        ),
    ];
    for (op, status) in ops {
        let mut s = Side::new(1, &Opts::default());
        let mw = s.rnic.alloc_mw(s.pd, MwType::Type2).unwrap();
        let op = match op {
            SendOp::Bind {
                mr,
                to,
                len,
                access,
                zero_based,
                ..
            } => SendOp::Bind {
                mw: mw.with_key(9),
                mr,
                to,
                len,
                access,
                zero_based,
            },
            o => o,
        };
        s.post(1, op, SgList::new(), SendFlags::SIGNALED);
        assert_eq!(s.sent_terminate(), Some(TermCode::RDMAP_LOCAL_CATASTROPHIC));
        assert_eq!(s.cqes()[0].status, status, "{op:?}");
    }
}
