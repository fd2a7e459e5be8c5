//! Fuzz target `service_rings`: work-request slots as the shared-memory service decodes
//! them, on a connected pair of engines (`iwarp_shm_service::testkit`).
//!
//! The input is a program: each step pushes a slot into A's SQ or RQ (a valid WR with a
//! few bytes changed, or raw bytes), rings a doorbell (the QP's or a stray one), or lets
//! the pair run. Afterwards the pair runs until quiet. Checked: nothing panics; nothing
//! lands in the half of B's arena that B never registered (0 bytes placed outside a
//! valid STag); every completion names the client's QP handle.

use iwarp_shm_ring::{encode_recv_wr, encode_send_wr, SEND_SLOT_SIZE};
use iwarp_shm_service::testkit::{sgl, World, ARENA, QP_HANDLE, RQ_BIT, SQ_BIT};
use iwarp_types::{QpId, RecvWr, RegionId, SendFlags, SendOp, SendWr, SgList, Stag};

use crate::cursor::Cursor;

/// Steps of one program (each is a few bytes of input).
const STEPS_MAX: usize = 48;
/// Rounds of the pair after the program.
const SETTLE_ROUNDS: usize = 200;

/// The body of the `service_rings` target.
pub fn service_rings(data: &[u8]) {
    let _ = run(data);
}

/// Runs one program; returns the completions of A and of B.
fn run(data: &[u8]) -> [Vec<iwarp_types::Cqe>; 2] {
    let mut c = Cursor::new(data);
    let mut w = World::new();
    w.connect();
    let (stag_a, stag_b) = (w.a.stag, w.b.stag);
    // B's receives for A's Sends.
    for i in 0..8u64 {
        let wr = RecvWr {
            wr_id: 0xb000 + i,
            sgl: sgl(0x100 * i, 0x100, stag_b),
        };
        let _ = w.b.rq.push(&encode_recv_wr(&wr));
    }
    w.b.doorbells.ring(RQ_BIT);
    // B's service takes them before A's first Send can arrive.
    w.step();
    let half = ARENA as u64 / 2;
    let sends = [
        SendOp::Send,
        SendOp::SendInv { inv_stag: stag_b },
        SendOp::Write {
            remote_to: 0x800,
            rkey: stag_b,
        },
        SendOp::Read {
            remote_to: 0x400,
            rkey: stag_b,
            invalidate_local: false,
        },
        SendOp::LocalInv { stag: stag_a },
        SendOp::FastReg {
            stag: Stag(0x100),
            region: RegionId(7), // the client's arena handle
            region_offset: 0,
            len: 64,
            va: 0,
            access: iwarp_types::Access::LOCAL_READ,
            zero_based: true,
        },
    ];
    for _ in 0..STEPS_MAX {
        if c.is_empty() {
            break;
        }
        match c.u8() % 6 {
            0 | 1 => {
                let op = sends[c.below(sends.len())];
                let len = u32::from(c.u16()) % 0x1000;
                let wr = SendWr {
                    wr_id: c.u64(),
                    op,
                    sgl: if matches!(op, SendOp::LocalInv { .. } | SendOp::FastReg { .. }) {
                        SgList::new()
                    } else {
                        sgl(u64::from(c.u16()) % half, len, stag_a)
                    },
                    flags: SendFlags(u32::from(c.u8())),
                };
                let mut slot = encode_send_wr(&wr);
                c.change_bytes(&mut slot, 3);
                if w.a.sq.push(&slot).is_ok() {
                    w.a.doorbells.ring(SQ_BIT);
                }
            }
            2 => {
                let mut slot = [0u8; SEND_SLOT_SIZE];
                slot.copy_from_slice(&padded::<SEND_SLOT_SIZE>(c.take(SEND_SLOT_SIZE)));
                if w.a.sq.push(&slot).is_ok() {
                    w.a.doorbells.ring(SQ_BIT);
                }
            }
            3 => {
                let wr = RecvWr {
                    wr_id: c.u64(),
                    sgl: sgl(u64::from(c.u16()) % half, u32::from(c.u16()), stag_a),
                };
                let mut slot = encode_recv_wr(&wr);
                c.change_bytes(&mut slot, 3);
                if w.a.rq.push(&slot).is_ok() {
                    w.a.doorbells.ring(RQ_BIT);
                }
            }
            4 => {
                let _ = w.a.doorbells.ring(u32::from(c.u8()));
            }
            _ => {
                for _ in 0..c.u8() % 16 {
                    w.step();
                }
            }
        }
    }
    for _ in 0..SETTLE_ROUNDS {
        w.step();
    }
    // B registers only the first half of its arena (A may fast-register anything of its
    // own, so only B's side is checked).
    let outside = &w.b.mem.arena(RegionId(0))[ARENA / 2..];
    assert!(
        outside.iter().all(|&b| b == 0),
        "bytes placed outside B's MR"
    );
    let got = [w.a.cqes(), w.b.cqes()];
    for cqe in got.iter().flatten() {
        assert_eq!(cqe.qp, QpId(QP_HANDLE), "{cqe:?}");
    }
    got
}

/// `bytes` then zeros, `N` in all.
fn padded<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out[..bytes.len().min(N)].copy_from_slice(&bytes[..bytes.len().min(N)]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{WcOpcode, WcStatus};

    /// A program of valid signaled WRs (template, 16-bit length, wr_id, offset, flags,
    /// no change) completes each at A, and B receives the Sends.
    #[test]
    fn valid_wrs_complete() {
        let mut program = Vec::new();
        for (t, id) in [(0u8, 1u8), (2, 2), (3, 3), (0, 4)] {
            program.extend([0, 0, t, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, id, 0, 0x10, 1, 0]);
        }
        let [a, b] = run(&program);
        let mut ids: Vec<u64> = a.iter().map(|c| c.wr_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3, 4], "{a:?}");
        assert!(a.iter().all(|c| c.status == WcStatus::Success), "{a:?}");
        let recvs = b.iter().filter(|c| c.opcode == WcOpcode::Recv).count();
        assert_eq!(recvs, 2, "{b:?}");
    }
}
