//! Objects replicated under the STag another engine chose (`Rnic::*_at`): remote access
//! through them end to end, and the verbs around them (query, Deallocate, Reregister).

use iwarp_types::{Access, SendOp, SgList, Stag, VerbError, WcOpcode, WcStatus};

use super::pair::*;
use crate::mem::{MrAttr, MwType};

/// The "first core": the same seed and limits as `Pair`'s side b, allocating normally.
fn first_engine() -> Side {
    Side::new(2, &Opts::default())
}

/// A region of side b's arena at offset `off` (VA as `Side::reg` gives it).
fn region(b: &Side, off: u64, len: u64, key: u8) -> MrAttr {
    MrAttr {
        pd: b.pd,
        region: b.arena,
        region_offset: off,
        len,
        va: 0x1_0000_0000 + off,
        zero_based: false,
        access: ALL,
        key,
        remote_access_flag: true,
    }
}

#[test]
fn writes_land_through_a_replicated_region_window_and_fast_register_stag() {
    let mut first = first_engine();
    let mut p = Pair::new();
    assert_eq!(first.pd, p.b.pd);
    let arena = Some(ARENA as u64);

    let mr_attr = region(&p.b, 1 << 20, 4096, 0x31);
    let mr = first.rnic.reg_mr(&mr_attr, arena).unwrap();
    assert_eq!(p.b.rnic.reg_mr_at(mr, &mr_attr, arena), Ok(mr));
    let mw = first.rnic.alloc_mw(first.pd, MwType::Type2).unwrap();
    assert_eq!(p.b.rnic.alloc_mw_at(mw, p.b.pd, MwType::Type2), Ok(mw));
    let fr = first.rnic.alloc_mr_stag(first.pd, 8192, true).unwrap();
    assert_eq!(p.b.rnic.alloc_mr_stag_at(fr, p.b.pd, 8192, true), Ok(fr));
    assert_eq!(p.b.rnic.query_mr(mr), first.rnic.query_mr(mr));
    assert_eq!(p.b.rnic.query_mr(fr), first.rnic.query_mr(fr));
    assert_eq!(p.b.rnic.query_mw(mw), first.rnic.query_mw(mw));

    // b binds the window and fast-registers the STag on its own QP.
    let (mw, fr) = (mw.with_key(0x44), fr.with_key(0x55));
    let va_mr = mr_attr.va;
    let bind = SendOp::Bind {
        mw,
        mr,
        to: va_mr + 512,
        len: 256,
        access: Access::REMOTE_WRITE,
        zero_based: false,
    };
    p.b.post(1, bind, SgList::new(), SIG);
    let fast_reg = SendOp::FastReg {
        stag: fr,
        region: p.b.arena,
        region_offset: 2 << 20,
        len: 8192,
        va: 0,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        zero_based: true,
    };
    p.b.post(2, fast_reg, SgList::new(), SIG);
    p.run();
    let c = p.b.cqes();
    assert_eq!(
        c.iter().map(|c| (c.opcode, c.status)).collect::<Vec<_>>(),
        [
            (WcOpcode::Bind, WcStatus::Success),
            (WcOpcode::FastReg, WcStatus::Success)
        ]
    );

    let (sa, va) = p.a.reg(4096, ALL);
    p.a.fill_pattern(va, 4096, 3);
    let writes = [
        (mr, va_mr, 1024u32),
        (mw, va_mr + 512, 256),
        (fr, 100, 2000),
    ];
    for (i, &(rkey, remote_to, len)) in writes.iter().enumerate() {
        let op = SendOp::Write { remote_to, rkey };
        p.a.post(10 + i as u64, op, sgl(sa, va, len), SIG);
    }
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.a.cqes().len(), 3);
    assert_eq!(p.b.bytes(va_mr, 1024), p.a.bytes(va, 1024));
    assert_eq!(p.b.bytes(va_mr + 512, 256), p.a.bytes(va, 256));
    let fr_va = 0x1_0000_0000 + (2 << 20) + 100;
    assert_eq!(p.b.bytes(fr_va, 2000), p.a.bytes(va, 2000));
}

#[test]
fn verbs_on_replicas_match_the_first_engine() {
    let mut first = first_engine();
    let mut b = first_engine();
    let arena = Some(ARENA as u64);
    let attr = region(&b, 0, 64, 7);
    let s = first.rnic.reg_mr(&attr, arena).unwrap();
    assert!(!b.rnic.stag_in_use(s.index()));
    assert_eq!(
        b.rnic.reg_mr_at(s.with_key(8), &attr, arena),
        Err(VerbError::InvalidStag),
        "key differs from the attributes"
    );
    assert_eq!(
        b.rnic.reg_mr_at(Stag::ZERO.with_key(7), &attr, arena),
        Err(VerbError::InvalidStag)
    );
    assert_eq!(b.rnic.reg_mr_at(s, &attr, arena), Ok(s));
    assert!(b.rnic.stag_in_use(s.index()));
    assert_eq!(
        b.rnic.alloc_mw_at(s, b.pd, MwType::Type1),
        Err(VerbError::InsufficientResources),
        "taken"
    );
    // Reregister with a new key: the same STag on both.
    let again = MrAttr {
        key: 0x99,
        ..region(&b, 64, 128, 0)
    };
    let r = first.rnic.rereg_mr(s, &again, arena).unwrap();
    assert_eq!(b.rnic.rereg_mr(s, &again, arena), Ok(r));
    assert_eq!(b.rnic.query_mr(r), first.rnic.query_mr(r));
    // The replica's own allocations never reuse the index; Deallocate then register
    // again at the same STag works, and the PD is held meanwhile.
    let own = b.rnic.alloc_mw(b.pd, MwType::Type2).unwrap();
    assert_ne!(own.index(), s.index());
    assert_eq!(b.rnic.dealloc_pd(b.pd), Err(VerbError::PdInUse));
    b.rnic.dealloc_stag(r).unwrap();
    assert!(!b.rnic.stag_in_use(s.index()));
    assert_eq!(b.rnic.query_mr(r), Err(VerbError::InvalidStag));
    assert_eq!(b.rnic.alloc_mr_stag_at(r, b.pd, 64, false), Ok(r));
    assert_eq!(b.rnic.query_mr(r).unwrap().max_len, 64);
    b.rnic.dealloc_stag(r).unwrap();
    b.rnic.dealloc_stag(own).unwrap();
}
