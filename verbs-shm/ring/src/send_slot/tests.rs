use super::*;
use iwarp_types::{SgList, Sge};

fn sgl(n: usize) -> SgList {
    let sges: Vec<Sge> = (0..n)
        .map(|i| Sge {
            addr: 0x7f00_0000_0000 + 0x1000 * i as u64,
            length: 4096 - i as u32,
            lkey: Stag::new(10 + i as u32, 0x5a),
        })
        .collect();
    SgList::from_slice(&sges).unwrap()
}

/// One work request of every operation and modifier.
fn every_op() -> Vec<SendOp> {
    let mut ops = vec![
        SendOp::Send,
        SendOp::SendSe,
        SendOp::SendInv {
            inv_stag: Stag(0xdead_be01),
        },
        SendOp::SendSeInv {
            inv_stag: Stag(0xdead_be02),
        },
        SendOp::Write {
            remote_to: u64::MAX,
            rkey: Stag(0x1234_5601),
        },
        SendOp::LocalInv {
            stag: Stag(0x0000_0a07),
        },
    ];
    for invalidate_local in [false, true] {
        ops.push(SendOp::Read {
            remote_to: 0x1000,
            rkey: Stag(0x4242_4201),
            invalidate_local,
        });
    }
    for zero_based in [false, true] {
        ops.push(SendOp::Bind {
            mw: Stag::new(5, 9),
            mr: Stag::new(6, 1),
            to: 0x10_0000,
            len: 1 << 40,
            access: Access::REMOTE_READ | Access::REMOTE_WRITE,
            zero_based,
        });
        ops.push(SendOp::FastReg {
            stag: Stag::new(7, 3),
            region: RegionId(4),
            region_offset: 8192,
            len: 1 << 21,
            va: 0x7fff_0000_1000,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::MW_BIND,
            zero_based,
        });
    }
    ops
}

fn every_wr() -> Vec<SendWr> {
    let flags = [
        SendFlags::NONE,
        SendFlags::SIGNALED,
        SendFlags::SIGNALED | SendFlags::READ_FENCE | SendFlags::LOCAL_FENCE,
    ];
    let mut wrs = Vec::new();
    for (i, op) in every_op().into_iter().enumerate() {
        for n in [0, 1, MAX_SGE] {
            for f in flags {
                wrs.push(SendWr {
                    wr_id: (i as u64) << 32 | n as u64,
                    op,
                    sgl: sgl(n),
                    flags: f,
                });
            }
        }
    }
    wrs
}

#[test]
fn round_trip_every_work_request_type() {
    let wrs = every_wr();
    let mut opcodes = std::collections::HashSet::new();
    for wr in &wrs {
        let b = encode_send_wr(wr);
        opcodes.insert(b[8]);
        assert_eq!(decode_send_wr(&b), Ok(*wr), "{wr:?}");
    }
    assert_eq!(opcodes.len(), WrOpcode::ALL.len());
}

/// Decoding into a WR that held another one (the daemon decodes into a reused WQE)
/// leaves exactly what decoding into a fresh one does: nothing of the old WR stays,
/// not even in the SGL's unused elements.
#[test]
fn decoding_in_place_overwrites_every_field() {
    let wrs = every_wr();
    for (i, wr) in wrs.iter().enumerate() {
        let mut into = wrs[(i * 7 + 3) % wrs.len()];
        into.sgl = sgl(MAX_SGE);
        assert_eq!(decode_send_wr_into(&encode_send_wr(wr), &mut into), Ok(()));
        assert_eq!(into, *wr, "{wr:?}");
    }
}

#[test]
fn encoding_matches_repr_c_fields() {
    let wr = SendWr {
        wr_id: 99,
        op: SendOp::FastReg {
            stag: Stag(0x0102_0304),
            region: RegionId(5),
            region_offset: 6,
            len: 7,
            va: 8,
            access: Access(3),
            zero_based: true,
        },
        sgl: sgl(1),
        flags: SendFlags::SIGNALED,
    };
    let b = encode_send_wr(&wr);
    assert_eq!(get_u64(&b, 0), 99);
    assert_eq!(b[8], WrOpcode::FastReg as u8);
    assert_eq!(b[9], 1);
    assert_eq!(b[10], SendSlot::ZERO_BASED);
    assert_eq!(get_u32(&b, 12), 1);
    assert_eq!(get_u32(&b, 16), 0x0102_0304);
    assert_eq!(get_u32(&b, 20), 5);
    assert_eq!(get_u64(&b, 24), 6);
    assert_eq!(get_u64(&b, 32), 7);
    assert_eq!(get_u64(&b, 40), 8);
    assert_eq!(get_u32(&b, 48), 3);
    assert_eq!(get_u64(&b, 56), 0x7f00_0000_0000);
    assert_eq!(get_u32(&b, 64), 4096);
    assert_eq!(get_u32(&b, 68), Stag::new(10, 0x5a).0);
}

#[test]
fn malformed_slots_rejected_with_wr_id() {
    let send = encode_send_wr(&SendWr {
        wr_id: 0xabc,
        op: SendOp::Send,
        sgl: sgl(2),
        flags: SendFlags::SIGNALED,
    });
    let err = |b: &[u8; SEND_SLOT_SIZE]| {
        let e = decode_send_wr(b).unwrap_err();
        assert_eq!(e.wr_id, 0xabc);
        e.kind
    };
    let mut b = send;
    b[8] = WrOpcode::ALL.len() as u8;
    assert_eq!(err(&b), SlotError::UnknownOpcode(9));
    b[8] = 0xff;
    assert_eq!(err(&b), SlotError::UnknownOpcode(0xff));
    let mut b = send;
    b[9] = 7;
    assert_eq!(err(&b), SlotError::TooManySge(7));
    let mut b = send;
    b[9] = 0xff;
    assert_eq!(err(&b), SlotError::TooManySge(0xff));
    let mut b = send;
    b[12] = 8;
    assert_eq!(err(&b), SlotError::UnknownSendFlags(8));
    let mut b = send;
    b[10] = SendSlot::INVALIDATE_LOCAL;
    assert_eq!(err(&b), SlotError::UnknownOpFlags(1));
    let mut b = send;
    b[11] = 1;
    assert_eq!(err(&b), SlotError::NonZeroField("reserved0"));
    let mut b = send;
    b[52] = 1;
    assert_eq!(err(&b), SlotError::NonZeroField("reserved1"));
    let mut b = send;
    b[191] = 1;
    assert_eq!(err(&b), SlotError::NonZeroField("reserved2"));
    let mut b = send;
    b[56 + 2 * 16 + 12] = 1;
    assert_eq!(err(&b), SlotError::NonZeroField("unused sge"));
    // Fields a Send does not use.
    for (off, name) in [
        (16, "stag"),
        (20, "aux_stag"),
        (24, "remote_to"),
        (32, "length"),
        (40, "va"),
        (48, "access"),
    ] {
        let mut b = send;
        b[off] = 1;
        assert_eq!(err(&b), SlotError::NonZeroField(name));
    }
    // Write: no access; Read: no zero-based; Bind: no va and no invalidate-local.
    let mut w = send;
    w[8] = WrOpcode::Write as u8;
    assert!(decode_send_wr(&w).is_ok());
    w[48] = 2;
    assert_eq!(err(&w), SlotError::NonZeroField("access"));
    let mut r = send;
    r[8] = WrOpcode::Read as u8;
    r[10] = SendSlot::ZERO_BASED;
    assert_eq!(err(&r), SlotError::UnknownOpFlags(SendSlot::ZERO_BASED));
    let mut bind = send;
    bind[8] = WrOpcode::Bind as u8;
    bind[48] = 0x20;
    assert_eq!(err(&bind), SlotError::UnknownAccess(0x20));
    bind[48] = 0;
    bind[40] = 1;
    assert_eq!(err(&bind), SlotError::NonZeroField("va"));
    bind[40] = 0;
    bind[10] = SendSlot::INVALIDATE_LOCAL;
    assert_eq!(
        err(&bind),
        SlotError::UnknownOpFlags(SendSlot::INVALIDATE_LOCAL)
    );
}

/// xorshift64*: a tiny deterministic generator for the mutation tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Mutated and random slots never panic, and whatever decodes re-encodes to the same
/// bytes (the encoding is canonical, so no two slots mean the same request).
#[test]
fn mutated_slots_decode_canonically_or_fail() {
    let wrs = every_wr();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut bad) = (0u32, 0u32);
    for round in 0..40_000 {
        let mut b = encode_send_wr(&wrs[round % wrs.len()]);
        for _ in 0..1 + rng.next() % 3 {
            let r = rng.next();
            let pos = (r % SEND_SLOT_SIZE as u64) as usize;
            if r & (1 << 40) != 0 {
                b[pos] ^= 1 << ((r >> 32) % 8);
            } else {
                b[pos] = (r >> 48) as u8;
            }
        }
        // Decoded in place over another WR (the daemon's way): the same answer.
        let mut dirty = wrs[(round * 7 + 3) % wrs.len()];
        let in_place = decode_send_wr_into(&b, &mut dirty).map(|()| dirty);
        assert_eq!(in_place, decode_send_wr(&b));
        match decode_send_wr(&b) {
            Ok(wr) => {
                assert_eq!(encode_send_wr(&wr), b);
                ok += 1;
            }
            Err(e) => {
                assert_eq!(e.wr_id, get_u64(&b, 0));
                bad += 1;
            }
        }
    }
    assert!(ok > 1000 && bad > 1000, "ok {ok} bad {bad}");
    for _ in 0..10_000 {
        let mut b = [0u8; SEND_SLOT_SIZE];
        for chunk in b.chunks_exact_mut(8) {
            chunk.copy_from_slice(&rng.next().to_ne_bytes());
        }
        if let Ok(wr) = decode_send_wr(&b) {
            assert_eq!(encode_send_wr(&wr), b);
        }
    }
}
