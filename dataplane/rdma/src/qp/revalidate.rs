//! Re-validation of outbound payload sources (verbs 7.9, 7.10.4.1; RFC 5040 8.1.1 #6):
//! an SGE is resolved when its WQE starts and an RDMA Read source when the Request
//! arrives, but the region or window may be invalidated, deallocated or re-registered
//! while the message is still being segmented or retransmitted. "In-process operations
//! fail with a protection error": the memory is checked again before every segment and
//! on every fill.
//!
//! - Before a segment is handed out (nothing of it sent yet): an SQ WQE completes with
//!   the local protection status and the Terminate (Local Catastrophic, verbs figure 23)
//!   replaces the segment; a Read Response is replaced by a Terminate with the RDMAP
//!   remote protection code and the Read Request header updated by the bytes already sent
//!   (RFC 5040 4.8, verbs 6.4 (6)).
//!
//! The check is skipped when the STag table's epoch has not moved since the WQE's SGL was
//! resolved (nothing was invalidated, deregistered, re-registered or re-bound in between,
//! so the answer cannot have changed); any change anywhere in the table re-runs it.
//! - On fill (a retransmission, or a fill after a revoking verb): the segment has started,
//!   so the bytes are zeros (DDP version 0: the peer places nothing) and the QP goes to
//!   Error asking the LLP for a Reset (verbs 6.4 (1)).

use iwarp_types::{Access, AsyncEventKind, QpState, SendOp, Stag, TermCode, WcStatus};
use iwarp_wire::ddp;
use iwarp_wire::rdmap::{Opcode, ReadRequest, ReadRequestRepr, READ_REQUEST_LEN};

use super::fill::untagged;
use super::tx::{TxUlpdu, TxWhat};
use super::{IrqEntry, LlpRequest, Qp, TermCause, QN_READ};
use crate::ctx::{Ctx, Loc};
use crate::mem::{term_code_read_source, RemoteOp};

impl Qp {
    /// Checks every SGE of Send/Write WQE `seq` against where it resolved when the WQE
    /// started.
    fn sq_source_check(&self, ctx: &Ctx<'_>, seq: u64) -> Result<(), WcStatus> {
        let Some(e) = self.sq.get(seq) else {
            return Ok(());
        };
        if matches!(
            e.wr.op,
            SendOp::Read { .. }
                | SendOp::Bind { .. }
                | SendOp::FastReg { .. }
                | SendOp::LocalInv { .. }
        ) {
            return Ok(());
        }
        if e.locs_epoch.is_some_and(|at| at == ctx.mem.epoch()) {
            // No region or window changed since `locs` were resolved: same answer.
            return Ok(());
        }
        let (pd, privileged) = (self.attr.pd, self.attr.privileged);
        for (sge, loc) in e.wr.sgl.as_slice().iter().zip(e.locs.iter()) {
            if sge.length == 0 {
                continue;
            }
            let now = ctx.resolve_local(sge, Access::LOCAL_READ, pd, privileged, None)?;
            if now != *loc {
                // The STag now names other memory (re-registered): the old buffer is gone.
                return Err(WcStatus::InvalidStag);
            }
        }
        Ok(())
    }

    /// Before the next segment of SQ WQE `seq`: false if its memory was revoked (the WQE
    /// completed in error and a Terminate is queued instead).
    pub(super) fn sq_source_still_valid(&mut self, ctx: &mut Ctx<'_>, seq: u64) -> bool {
        match self.sq_source_check(ctx, seq) {
            Ok(()) => true,
            Err(status) => {
                self.local_wqe_error(ctx, seq, status);
                false
            }
        }
    }

    /// The source of the remaining `left` bytes of IRQ entry `e`, checked again.
    fn irq_source_check(&self, ctx: &Ctx<'_>, e: &IrqEntry) -> Result<(), TermCode> {
        let left = e.size.saturating_sub(e.sent);
        if left == 0 {
            return Ok(());
        }
        let at = e.src_to.wrapping_add(u64::from(e.sent));
        let (qp, pd) = (self.id, self.attr.pd);
        match ctx.resolve_remote(e.src_stag, at, u64::from(left), RemoteOp::Read, qp, pd) {
            Ok(l) if l == shifted(e.loc, e.sent) => Ok(()),
            Ok(_) => Err(TermCode::RDMAP_INVALID_STAG),
            Err(err) => Err(term_code_read_source(err)),
        }
    }

    /// Before the next Read Response segment: false if the source was revoked (a
    /// Terminate about the remaining part of the Read Request is queued instead).
    pub(super) fn irq_source_still_valid(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(e) = self.irq.front().copied() else {
            return true;
        };
        let Err(code) = self.irq_source_check(ctx, &e) else {
            return true;
        };
        let seg = read_request_copy(&e);
        self.enter_terminate(ctx, code, Some(&seg), TermCause::Local);
        false
    }

    /// On fill: false if the source of `d` was revoked; the QP then fails (see the
    /// module documentation).
    pub(super) fn fill_source_still_valid(&mut self, ctx: &mut Ctx<'_>, d: &TxUlpdu) -> bool {
        match d.what {
            TxWhat::Sq { seq } => {
                let Err(status) = self.sq_source_check(ctx, seq) else {
                    return true;
                };
                if matches!(self.state, QpState::Rts | QpState::Closing) {
                    self.sq_finish(ctx, seq, status);
                }
                self.fail_on_fill(ctx, None);
                false
            }
            TxWhat::ReadResp {
                loc,
                src_stag,
                src_to,
                ..
            } if d.len > 0 => {
                let e = IrqEntry {
                    sink_stag: Stag(0),
                    sink_to: 0,
                    size: d.offset.saturating_add(d.len),
                    loc,
                    sent: d.offset,
                    src_stag,
                    src_to,
                    msn: 0,
                };
                let Err(code) = self.irq_source_check(ctx, &e) else {
                    return true;
                };
                self.fail_on_fill(ctx, Some(code));
                false
            }
            _ => true,
        }
    }

    /// A started segment cannot be completed: Error with an LLP Reset (no Terminate),
    /// and for a Read Response the protection event (not reported by any completion).
    fn fail_on_fill(&mut self, ctx: &mut Ctx<'_>, code: Option<TermCode>) {
        if self.state == QpState::Error {
            return;
        }
        self.enter_error(ctx, Some(LlpRequest::Reset));
        if let Some(code) = code {
            ctx.qp_event(self.id, AsyncEventKind::ProtectionError(code));
        }
    }
}

/// `loc` moved `by` bytes on.
fn shifted(loc: Loc, by: u32) -> Loc {
    Loc {
        region: loc.region,
        offset: loc.offset.wrapping_add(u64::from(by)),
    }
}

/// The Read Request of IRQ entry `e` as a DDP segment, with the tagged offsets moved on
/// and the size reduced by the bytes already sent (RFC 5040 4.8: the Terminated RDMA
/// Header of a partially served Read).
fn read_request_copy(e: &IrqEntry) -> [u8; ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_LEN] {
    let mut seg = [0u8; ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_LEN];
    let h = untagged(Opcode::ReadRequest, true, QN_READ as u32, e.msn, 0, Stag(0));
    let n = h.emit_bytes(&mut seg);
    let sent = u64::from(e.sent);
    let r = ReadRequestRepr {
        sink_stag: e.sink_stag,
        sink_to: e.sink_to.wrapping_add(sent),
        size: e.size.saturating_sub(e.sent),
        src_stag: e.src_stag,
        src_to: e.src_to.wrapping_add(sent),
    };
    r.emit(&mut ReadRequest::new_unchecked(&mut seg[n..]));
    seg
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::RegionId;

    #[test]
    fn partial_read_request_copy() {
        let e = IrqEntry {
            sink_stag: Stag(0x0102_0304),
            sink_to: 0x1000,
            size: 100,
            loc: Loc {
                region: RegionId(0),
                offset: 0,
            },
            sent: 40,
            src_stag: Stag(0x0a0b_0c0d),
            src_to: 0x2000,
            msn: 3,
        };
        let seg = read_request_copy(&e);
        // Untagged, L, DV 1 | RV 1, Read Request | inv 0 | QN 1 | MSN 3 | MO 0.
        assert_eq!(
            &seg[..18],
            &[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0]
        );
        let body = &seg[18..];
        assert_eq!(&body[..4], &[1, 2, 3, 4], "sink STag");
        assert_eq!(&body[4..12], &0x1028u64.to_be_bytes(), "sink TO + 40");
        assert_eq!(&body[12..16], &60u32.to_be_bytes(), "bytes left");
        assert_eq!(&body[16..20], &[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&body[20..28], &0x2028u64.to_be_bytes(), "source TO + 40");
    }
}
