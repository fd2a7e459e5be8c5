//! Regenerating the bytes of an outbound DDP segment from its descriptor: headers from the
//! WQE or the descriptor, payload read from registered memory (RFC 5041 section 4, RFC 5040
//! section 4). Called for first transmissions and retransmissions alike.

use iwarp_types::{Memory, SendOp, Stag};
use iwarp_wire::crc::crc32c_append;
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
        self.fill_with(ctx, d, mem, out, None);
    }

    /// As [`Qp::fill`], and returns the CRC32c of `out` continued from `crc`: computed
    /// while the payload is gathered (one pass over it) for Send, Write and Read Response
    /// segments, over `out` afterwards for the rest and for zero-filled segments.
    pub(crate) fn fill_crc32c(
        &mut self,
        ctx: &mut Ctx<'_>,
        d: &TxUlpdu,
        mem: &dyn Memory,
        out: &mut [u8],
        crc: u32,
    ) -> u32 {
        let mut run = crc;
        if self.fill_with(ctx, d, mem, out, Some(&mut run)) {
            run
        } else {
            crc32c_append(crc, out)
        }
    }

    /// [`Qp::fill`]; with `crc`, true when `*crc` now covers all of `out` (continued from
    /// its value), false when the caller must compute it.
    fn fill_with(
        &mut self,
        ctx: &mut Ctx<'_>,
        d: &TxUlpdu,
        mem: &dyn Memory,
        out: &mut [u8],
        crc: Option<&mut u32>,
    ) -> bool {
        if out.len() != self.tx_len(d) {
            out.fill(0);
            self.counters.stale_fills += 1;
            return false;
        }
        if let TxWhat::Sq { seq } = d.what {
            // The common case, in one lookup: a Send/Write segment whose sources were
            // resolved at the STag table's current epoch (so still valid).
            if let Some(e) = self.sq.get(seq) {
                if e.locs_epoch == Some(ctx.mem.epoch()) {
                    let fused = crc.is_some();
                    if !fill_sq(e, d, mem, out, crc) {
                        out.fill(0);
                        self.counters.stale_fills += 1;
                        return false;
                    }
                    return fused;
                }
            }
        }
        if !self.fill_source_still_valid(ctx, d) {
            // Zeros carry DDP version 0: the peer rejects the segment, places nothing.
            out.fill(0);
            self.counters.stale_fills += 1;
            return false;
        }
        let fused = crc.is_some() && matches!(d.what, TxWhat::Sq { .. } | TxWhat::ReadResp { .. });
        let ok = match d.what {
            TxWhat::Sq { seq } => self
                .sq
                .get(seq)
                .is_some_and(|e| fill_sq(e, d, mem, out, crc)),
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
                let (head, payload) = out.split_at_mut(n);
                gather(mem, loc.region, at, payload, crc, head)
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
            return false;
        }
        fused
    }
}

/// Copies `out.len()` bytes of `region` at `offset` into `out`; with `crc`, first
/// continues it over `head` (the segment's headers, already written), then over the
/// payload while copying it. False on a memory fault.
fn gather(
    mem: &dyn Memory,
    region: iwarp_types::RegionId,
    offset: u64,
    out: &mut [u8],
    crc: Option<&mut u32>,
    head: &[u8],
) -> bool {
    match crc {
        Some(c) => match mem.read_crc32c(region, offset, out, crc32c_append(*c, head)) {
            Ok(v) => {
                *c = v;
                true
            }
            Err(_) => false,
        },
        None => mem.read(region, offset, out).is_ok(),
    }
}

/// Writes segment `d` of SQ WQE `e` (headers and payload gathered from its resolved SGL)
/// into `out`; false on a memory fault. With `crc`, continues it over all of `out`, the
/// payload's share while it is copied.
fn fill_sq(
    e: &SqEntry,
    d: &TxUlpdu,
    mem: &dyn Memory,
    out: &mut [u8],
    mut crc: Option<&mut u32>,
) -> bool {
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
    let (mut head, mut dst) = out.split_at_mut(n);
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
        let at = loc.offset.wrapping_add(skip);
        if !gather(mem, loc.region, at, now, crc.as_deref_mut(), head) {
            return false;
        }
        // The headers went into the CRC with the first piece.
        head = &mut [];
        skip = 0;
        dst = rest;
    }
    if dst.is_empty() && !head.is_empty() {
        // No payload (a zero-length Send or Write): the CRC covers the headers alone.
        if let Some(c) = crc {
            *c = crc32c_append(*c, head);
        }
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
