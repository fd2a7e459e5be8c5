//! Inbound RDMA Read Requests (IRD, source validation, IRQ) and RDMA Read Responses
//! (matched against the ORQ head, placed into the sink, completing the Read WR).
//!
//! Codes for cases the RFCs leave open (documented choices): a Read Response with no Read
//! outstanding gives 0x0206 (unexpected opcode); a Response whose STag differs from the
//! Request's sink STag gives 0x1100 and one whose offset or length differs gives 0x1101
//! (as Linux siw); a Read Request on a QP with inbound Reads disabled gives 0x1201 (verbs
//! figure 24); a Read Request beyond IRD gives 0x1203; a Read Response on a QP with inbound
//! Writes and Read Responses disabled gives 0x1102 (tagged access, as an RDMA Write).

use iwarp_types::{Memory, SendOp, Stag, TermCode, WcStatus};
use iwarp_wire::ddp::Repr;
use iwarp_wire::mpa::RxCrc;
use iwarp_wire::rdmap::ReadRequestRepr;

use crate::ctx::{Ctx, Loc};
use crate::mem::{term_code_read_source, term_code_tagged_sink, RemoteOp};
use crate::qp::rx::{crc_ok, place, RxResult};
use crate::qp::{IrqEntry, Qp, RtrKind, TermCause, QN_READ};

impl Qp {
    pub(crate) fn rx_read_req(
        &mut self,
        ctx: &mut Ctx<'_>,
        h: &Repr,
        msn: u32,
        mo: u32,
        rr: &ReadRequestRepr,
        ulpdu: &[u8],
    ) -> RxResult {
        let local = TermCause::Local;
        if !h.last {
            return self.inbound_error(ctx, TermCode::RDMAP_CATASTROPHIC_STREAM, ulpdu, local);
        }
        if msn != self.rx_msn[QN_READ] {
            return self.inbound_error(ctx, TermCode::DDP_UNTAGGED_MSN_RANGE, ulpdu, local);
        }
        if mo != 0 {
            return self.inbound_error(ctx, TermCode::DDP_UNTAGGED_INVALID_MO, ulpdu, local);
        }
        if !self.attr.inbound_read || self.ird == 0 {
            return self.inbound_error(ctx, TermCode::DDP_UNTAGGED_INVALID_QN, ulpdu, local);
        }
        if self.irq.len() >= (self.ird as usize).min(self.irq_cap) {
            return self.inbound_error(ctx, TermCode::DDP_UNTAGGED_MSN_RANGE, ulpdu, local);
        }
        let loc = if rr.size == 0 {
            // RFC 5040 5.2.1: a zero-length Read validates nothing.
            Loc::EMPTY
        } else {
            let len = u64::from(rr.size);
            match ctx.resolve_remote(
                rr.src_stag,
                rr.src_to,
                len,
                RemoteOp::Read,
                self.id,
                self.attr.pd,
            ) {
                Ok(loc) => loc,
                Err(e) => {
                    let code = term_code_read_source(e);
                    return self.inbound_error(ctx, code, ulpdu, local);
                }
            }
        };
        self.rx_msn[QN_READ] = msn.wrapping_add(1);
        if rr.size == 0 && self.rtr_expected == Some(RtrKind::Read) {
            self.rtr_expected = None;
            self.rtr_received = true;
        }
        self.irq_push(IrqEntry {
            sink_stag: rr.sink_stag,
            sink_to: rr.sink_to,
            size: rr.size,
            loc,
            sent: 0,
            src_stag: rr.src_stag,
            src_to: rr.src_to,
            msn,
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rx_read_resp(
        &mut self,
        ctx: &mut Ctx<'_>,
        h: &Repr,
        stag: Stag,
        to: u64,
        payload: &[u8],
        ulpdu: &[u8],
        crc: &mut RxCrc<'_>,
        mem: &mut dyn Memory,
    ) -> RxResult {
        let local = TermCause::Local;
        let Some(o) = self.orq.front().copied() else {
            let code = TermCode::RDMAP_UNEXPECTED_OPCODE;
            return self.refuse(ctx, crc, code, ulpdu, local);
        };
        let len = payload.len() as u32;
        let Some(seq) = o.seq else {
            // The answer to our zero-length Read RTR.
            if len != 0 || !h.last {
                let code = TermCode::DDP_TAGGED_BASE_BOUNDS;
                return self.refuse(ctx, crc, code, ulpdu, local);
            }
            crc_ok(crc)?;
            self.orq.pop_front();
            // A graceful disconnect may have been waiting for this ORQ entry.
            self.check_drained(ctx);
            return Ok(());
        };
        let end = u64::from(o.placed) + u64::from(len);
        if o.size > 0 || len > 0 {
            if !self.attr.inbound_write {
                let code = TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED;
                return self.refuse(ctx, crc, code, ulpdu, local);
            }
            if stag != o.stag {
                let code = TermCode::DDP_TAGGED_INVALID_STAG;
                return self.refuse(ctx, crc, code, ulpdu, local);
            }
            if to != o.next_to || end > u64::from(o.size) || (h.last && end != u64::from(o.size)) {
                let code = TermCode::DDP_TAGGED_BASE_BOUNDS;
                return self.refuse(ctx, crc, code, ulpdu, local);
            }
        } else if !h.last {
            let code = TermCode::DDP_TAGGED_BASE_BOUNDS;
            return self.refuse(ctx, crc, code, ulpdu, local);
        }
        if len > 0 {
            let pd = self.attr.pd;
            let loc =
                match ctx.resolve_remote(stag, to, u64::from(len), RemoteOp::Write, self.id, pd) {
                    Ok(loc) => loc,
                    Err(e) => {
                        let code = term_code_tagged_sink(e);
                        return self.refuse(ctx, crc, code, ulpdu, local);
                    }
                };
            if place(mem, loc, payload, crc).is_err() {
                let code = TermCode::DDP_LOCAL_CATASTROPHIC;
                return self.refuse(ctx, crc, code, ulpdu, local);
            }
            self.counters.bytes_in[iwarp_wire::rdmap::Opcode::ReadResponse as usize] +=
                u64::from(len);
        }
        // Placed (maybe in the pass that computed the CRC): nothing else before the check.
        crc_ok(crc)?;
        if let Some(f) = self.orq.front_mut() {
            f.placed = end as u32;
            f.next_to = o.next_to.wrapping_add(u64::from(len));
        }
        if !h.last {
            return Ok(());
        }
        self.orq.pop_front();
        // The Read completes now (RFC 5040 5.5 rule 19), with its local invalidate.
        let inv = self.sq.get(seq).and_then(|e| match e.wr.op {
            SendOp::Read {
                invalidate_local: true,
                ..
            } => Some(e.wr.sgl.as_slice().first().map_or(Stag(0), |s| s.lkey)),
            _ => None,
        });
        let status = match inv {
            Some(lkey) => match ctx.invalidate_local(lkey, self.id, self.attr.pd) {
                Ok(()) => WcStatus::Success,
                Err(s) => s,
            },
            None => WcStatus::Success,
        };
        if status == WcStatus::Success {
            self.sq_finish(ctx, seq, status);
        } else {
            self.local_wqe_error(ctx, seq, status);
        }
        self.check_drained(ctx);
        Ok(())
    }
}
