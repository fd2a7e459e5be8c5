//! Regenerating the bytes of an outbound DDP segment from its descriptor: headers from the
//! WQE or the descriptor, payload read from registered memory (RFC 5041 section 4, RFC 5040
//! section 4). Called for first transmissions and retransmissions alike.

use iwarp_types::{Memory, SendOp, Stag};
use iwarp_wire::ddp::{Model, Repr};
use iwarp_wire::rdmap::{Opcode, ReadRequest, ReadRequestRepr};

use super::sq::SqEntry;
use super::tx::{TxUlpdu, TxWhat};
use super::{Qp, QN_READ, QN_SEND};
use crate::ctx::Ctx;

impl Qp {
    /// Writes the bytes of `d` into `out` (which must be exactly its ULPDU length). A
    /// descriptor whose WR is gone (flushed) or a memory fault yields zeros, counted.
    pub(crate) fn fill(
        &mut self,
        ctx: &mut Ctx<'_>,
        d: &TxUlpdu,
        mem: &dyn Memory,
        out: &mut [u8],
    ) {
        if out.len() != self.tx_len(d) {
            out.fill(0);
            self.counters.stale_fills += 1;
            return;
        }
        if let TxWhat::Sq { seq } = d.what {
            // The common case, in one lookup: a Send/Write segment whose sources were
            // resolved at the STag table's current epoch (so still valid).
            if let Some(e) = self.sq.get(seq) {
                if e.locs_epoch == Some(ctx.mem.epoch()) {
                    if !fill_sq(e, d, mem, out) {
                        out.fill(0);
                        self.counters.stale_fills += 1;
                    }
                    return;
                }
            }
        }
        if !self.fill_source_still_valid(ctx, d) {
            // Zeros carry DDP version 0: the peer rejects the segment, places nothing.
            out.fill(0);
            self.counters.stale_fills += 1;
            return;
        }
        let ok = match d.what {
            TxWhat::Sq { seq } => self.sq.get(seq).is_some_and(|e| fill_sq(e, d, mem, out)),
            TxWhat::ReadReq {
                sink_stag,
                sink_to,
                size,
                src_stag,
                src_to,
            } => {
                let h = untagged(Opcode::ReadRequest, true, QN_READ as u32, d.msn, 0, Stag(0));
                let n = h.emit_bytes(out);
                let r = ReadRequestRepr {
                    sink_stag,
                    sink_to,
                    size,
                    src_stag,
                    src_to,
                };
                r.emit(&mut ReadRequest::new_unchecked(&mut out[n..]));
                true
            }
            TxWhat::ReadResp { stag, to, loc, .. } => {
                let h = tagged(
                    Opcode::ReadResponse,
                    d.last,
                    stag,
                    to.wrapping_add(d.offset as u64),
                );
                let n = h.emit_bytes(out);
                let at = loc.offset.wrapping_add(d.offset as u64);
                mem.read(loc.region, at, &mut out[n..]).is_ok()
            }
            TxWhat::Terminate => match &self.term_tx {
                Some(t) => {
                    out.copy_from_slice(t.bytes());
                    true
                }
                None => false,
            },
            TxWhat::RtrWrite => {
                tagged(Opcode::Write, true, Stag(1), 0).emit_bytes(out);
                true
            }
            TxWhat::RtrSend => {
                untagged(Opcode::Send, true, QN_SEND as u32, d.msn, 0, Stag(0)).emit_bytes(out);
                true
            }
        };
        if !ok {
            out.fill(0);
            self.counters.stale_fills += 1;
        }
    }
}

/// Writes segment `d` of SQ WQE `e` (headers and payload gathered from its resolved SGL)
/// into `out`; false on a memory fault.
fn fill_sq(e: &SqEntry, d: &TxUlpdu, mem: &dyn Memory, out: &mut [u8]) -> bool {
    let n = match e.wr.op {
        SendOp::Write { remote_to, rkey } => tagged(
            Opcode::Write,
            d.last,
            rkey,
            remote_to.wrapping_add(d.offset as u64),
        )
        .emit_bytes(out),
        other => {
            let inv = match other {
                SendOp::SendInv { inv_stag } | SendOp::SendSeInv { inv_stag } => inv_stag,
                _ => Stag(0),
            };
            untagged(
                send_opcode(&other),
                d.last,
                QN_SEND as u32,
                d.msn,
                d.offset,
                inv,
            )
            .emit_bytes(out)
        }
    };
    // Gather the payload from the resolved SGL, starting at message offset d.offset.
    let mut skip = d.offset as u64;
    let mut dst = &mut out[n..];
    for (sge, loc) in e.wr.sgl.as_slice().iter().zip(e.locs.iter()) {
        if dst.is_empty() {
            break;
        }
        let sge_len = sge.length as u64;
        if skip >= sge_len {
            skip -= sge_len;
            continue;
        }
        let take = ((sge_len - skip) as usize).min(dst.len());
        let (now, rest) = dst.split_at_mut(take);
        if mem
            .read(loc.region, loc.offset.wrapping_add(skip), now)
            .is_err()
        {
            return false;
        }
        skip = 0;
        dst = rest;
    }
    dst.is_empty()
}

/// An untagged DDP header.
pub(super) fn untagged(opcode: Opcode, last: bool, qn: u32, msn: u32, mo: u32, inv: Stag) -> Repr {
    Repr {
        last,
        opcode,
        model: Model::Untagged {
            inv_stag: inv,
            qn,
            msn,
            mo,
        },
    }
}

/// A tagged DDP header.
fn tagged(opcode: Opcode, last: bool, stag: Stag, to: u64) -> Repr {
    Repr {
        last,
        opcode,
        model: Model::Tagged { stag, to },
    }
}

/// The RDMAP opcode of a Send-type operation.
pub(super) fn send_opcode(op: &SendOp) -> Opcode {
    match op {
        SendOp::SendSe => Opcode::SendSe,
        SendOp::SendInv { .. } => Opcode::SendInv,
        SendOp::SendSeInv { .. } => Opcode::SendSeInv,
        _ => Opcode::Send,
    }
}
