//! Inbound DDP segments: state gate, header validation, dispatch by opcode, untagged Sends
//! (RQ/SRQ consumption in MSN order, placement, remote invalidation) and RDMA Writes.
//!
//! Codes for errors RFC 5040/5041 leave open (documented choices): a tagged access-rights
//! violation, and inbound Writes disabled on the QP, give 0x1102 (RFC 5041 has no access
//! code; verbs figure 24 gives 0x1102 and tagged errors are DDP-layer errors); a Send
//! starting a new MSN while the previous one lacked its L bit gives 0x0207 (verbs figure
//! 24 "No L bit when expected");
//! a Send with Invalidate on a QP with no remote right enabled gives 0x0102.

use iwarp_types::{
    AsyncEventKind, Cqe, Memory, MemoryFault, QpState, Stag, TermCode, WcOpcode, WcStatus,
};
use iwarp_wire::ddp::{self, Model, Repr, FLG_T};
use iwarp_wire::mpa::RxCrc;
use iwarp_wire::rdmap::{Body, Opcode, Segment, TermControl, TerminateRepr};

use crate::ctx::{Ctx, Loc};
use crate::mem::{term_code_tagged_sink, RemoteOp};
use crate::qp::{Qp, RtrKind, RxSend, TermCause, QN_SEND};

/// Result of processing one inbound segment: `Err` carries the code of the Terminate the
/// QP queued, or `TermCode::LLP_CRC` when the segment's pending MPA CRC did not match
/// (then nothing but placement happened and no Terminate is queued: MPA's failure path
/// queues it).
pub(crate) type RxResult = Result<(), TermCode>;

/// Checks a pending MPA CRC (`Err(LLP_CRC)` if it does not match); `Ok` if none is.
#[inline]
pub(crate) fn crc_ok(crc: &mut RxCrc<'_>) -> RxResult {
    if crc.check() {
        Ok(())
    } else {
        Err(TermCode::LLP_CRC)
    }
}

/// Places `piece` (a slice of the received ULPDU) at `loc`: with the segment's CRC
/// pending and the piece long enough (`RxCrc::before` decides), in the pass that computes
/// the CRC over it.
pub(crate) fn place(
    mem: &mut dyn Memory,
    loc: Loc,
    piece: &[u8],
    crc: &mut RxCrc<'_>,
) -> Result<(), MemoryFault> {
    match crc.before(piece) {
        Some(acc) => {
            let acc = mem.write_crc32c(loc.region, loc.offset, piece, acc)?;
            crc.covered(piece, acc);
            Ok(())
        }
        None => mem.write(loc.region, loc.offset, piece),
    }
}

impl Qp {
    /// One inbound DDP segment (a whole ULPDU). Its MPA CRC (`crc`) may be pending: it
    /// is checked before anything happens but placement of a payload (an RDMA Write's,
    /// a Read Response's, a Send's, in RTS), which may compute it ([`place`]).
    pub(crate) fn on_ulpdu(
        &mut self,
        ctx: &mut Ctx<'_>,
        ulpdu: &[u8],
        crc: &mut RxCrc<'_>,
        mem: &mut dyn Memory,
    ) -> RxResult {
        let raw_terminate = ulpdu.len() >= 2
            && ulpdu[0] & FLG_T == 0
            && ulpdu[1] & ddp::MASK_OPCODE == Opcode::Terminate as u8;
        if self.state != QpState::Rts || raw_terminate || self.hold_tx {
            crc_ok(crc)?;
        }
        self.counters.segs_in += 1;
        match self.state {
            QpState::Rts => {}
            QpState::Terminate if raw_terminate => {
                self.counters.segs_ignored += 1;
                self.terminate_received(ctx, ulpdu);
                return Ok(());
            }
            QpState::Closing => {
                if raw_terminate {
                    self.terminate_received(ctx, ulpdu);
                } else if is_empty_write(ulpdu) {
                    // A zero-length RDMA Write (RFC 5040 5.1) carries no data and places
                    // nothing: not "incoming data" for verbs 6.2.5, so it is dropped like
                    // any segment in Closing, without a Bad Close. A peer's nudge (engine
                    // nudge.rs) crosses our FIN this way when the FIN is late or lost.
                    self.counters.segs_ignored += 1;
                } else {
                    // Verbs 6.2.5: a segment while Closing is a Bad Close.
                    self.enter_error(ctx, Some(crate::qp::LlpRequest::Reset));
                    ctx.qp_event(self.id, AsyncEventKind::BadClose);
                }
                return Ok(());
            }
            _ => {
                self.counters.segs_ignored += 1;
                return Ok(());
            }
        }
        // The first inbound FPDU releases an MPA Responder.
        self.hold_tx = false;
        if raw_terminate {
            self.terminate_received(ctx, ulpdu);
            return Ok(());
        }
        let seg = match Segment::parse(ulpdu) {
            Ok(s) => s,
            Err(e) => {
                return self.refuse(ctx, crc, e.term_code(), ulpdu, TermCause::Local);
            }
        };
        let h = seg.header;
        let r = match (h.model, seg.body) {
            (Model::Tagged { stag, to }, Body::Payload(p)) => match h.opcode {
                Opcode::ReadResponse => self.rx_read_resp(ctx, &h, stag, to, p, ulpdu, crc, mem),
                _ => self.rx_write(ctx, &h, stag, to, p, ulpdu, crc, mem),
            },
            (
                Model::Untagged {
                    inv_stag,
                    qn,
                    msn,
                    mo,
                },
                body,
            ) => {
                if h.opcode.qn() != Some(qn) {
                    let code = TermCode::DDP_UNTAGGED_INVALID_QN;
                    return self.refuse(ctx, crc, code, ulpdu, TermCause::Local);
                }
                match body {
                    Body::ReadRequest(rr) => {
                        crc_ok(crc)?;
                        self.rx_read_req(ctx, &h, msn, mo, &rr, ulpdu)
                    }
                    Body::Payload(p) => {
                        self.rx_send(ctx, &h, inv_stag, msn, mo, p, ulpdu, crc, mem)
                    }
                    Body::Terminate(_) => crc_ok(crc),
                }
            }
            _ => crc_ok(crc),
        };
        if r.is_ok() {
            // What placed a payload checked the CRC before it acted; nothing is pending
            // now unless a path forgot (then this is still before any effect but the
            // placement and the byte counters).
            crc_ok(crc)?;
            if h.last {
                self.counters.msgs_in[(h.opcode as u8 & 7) as usize] += 1;
            }
        }
        r
    }

    /// An inbound segment is in error: once its CRC checked (a CRC error is reported
    /// instead), queue the Terminate about it and report the code.
    pub(crate) fn refuse(
        &mut self,
        ctx: &mut Ctx<'_>,
        crc: &mut RxCrc<'_>,
        code: TermCode,
        ulpdu: &[u8],
        cause: TermCause,
    ) -> RxResult {
        crc_ok(crc)?;
        self.inbound_error(ctx, code, ulpdu, cause)
    }

    /// An inbound segment is in error: queue the Terminate about it and report the code.
    pub(crate) fn inbound_error(
        &mut self,
        ctx: &mut Ctx<'_>,
        code: TermCode,
        ulpdu: &[u8],
        cause: TermCause,
    ) -> RxResult {
        self.enter_terminate(ctx, code, Some(ulpdu), cause);
        Err(code)
    }

    #[allow(clippy::too_many_arguments)]
    fn rx_send(
        &mut self,
        ctx: &mut Ctx<'_>,
        h: &Repr,
        inv_stag: Stag,
        msn: u32,
        mo: u32,
        payload: &[u8],
        ulpdu: &[u8],
        crc: &mut RxCrc<'_>,
        mem: &mut dyn Memory,
    ) -> RxResult {
        let local = TermCause::Local;
        let mut cur = match self.rx_send {
            Some(cur) => {
                if msn != cur.msn {
                    let code = if msn == cur.msn.wrapping_add(1) {
                        TermCode::RDMAP_CATASTROPHIC_STREAM
                    } else {
                        TermCode::DDP_UNTAGGED_MSN_RANGE
                    };
                    return self.refuse(ctx, crc, code, ulpdu, local);
                }
                if mo != cur.received {
                    let code = TermCode::DDP_UNTAGGED_INVALID_MO;
                    return self.refuse(ctx, crc, code, ulpdu, local);
                }
                cur
            }
            None => {
                if msn != self.rx_msn[QN_SEND] {
                    let code = TermCode::DDP_UNTAGGED_MSN_RANGE;
                    return self.refuse(ctx, crc, code, ulpdu, local);
                }
                if mo != 0 {
                    let code = TermCode::DDP_UNTAGGED_INVALID_MO;
                    return self.refuse(ctx, crc, code, ulpdu, local);
                }
                if payload.is_empty() || self.attr.srq.is_some() {
                    // An RTR, or a receive that would leave the SRQ (and maybe raise its
                    // limit event): only for a segment whose CRC is good. An RQ's receive
                    // may be taken first: it is flushed like any other if the CRC fails.
                    crc_ok(crc)?;
                }
                if self.rtr_expected == Some(RtrKind::Send) && payload.is_empty() && h.last {
                    // RFC 6581 zero-length Send RTR: consumes its MSN, not a receive.
                    self.rtr_expected = None;
                    self.rtr_received = true;
                    self.rx_msn[QN_SEND] = msn.wrapping_add(1);
                    return Ok(());
                }
                let taken = match self.attr.srq {
                    Some(srq) => ctx.srq_take(srq),
                    None => self.rq.pop_front().map(|wr| (wr, self.attr.pd)),
                };
                let Some((wr, pd)) = taken else {
                    let code = TermCode::DDP_UNTAGGED_NO_BUFFER;
                    return self.refuse(ctx, crc, code, ulpdu, local);
                };
                if self.attr.srq.is_some() {
                    // In-order delivery: this message is the only one in progress.
                    self.rq_limit_check(ctx, 1);
                }
                RxSend {
                    wr,
                    pd,
                    msn,
                    received: 0,
                }
            }
        };
        // The message is in progress from here: if the CRC turns out wrong, its receive
        // (not yet advanced) is flushed with the QP, never lost.
        self.rx_send = Some(cur);
        let end = u64::from(cur.received) + payload.len() as u64;
        if end > cur.wr.sgl.total_len() || end > u64::from(u32::MAX) {
            crc_ok(crc)?;
            // Verbs 8.1.2.1: the receive completes in error; RFC 5041: too long.
            self.rx_send = None;
            self.complete_recv(ctx, &cur.wr, WcStatus::BaseBounds);
            let code = TermCode::DDP_UNTAGGED_TOO_LONG;
            return self.inbound_error(ctx, code, ulpdu, TermCause::Completion);
        }
        let placed = self.place_sgl(ctx, &cur, payload, crc, mem);
        crc_ok(crc)?;
        if let Err(status) = placed {
            self.rx_send = None;
            self.complete_recv(ctx, &cur.wr, status);
            let code = TermCode::RDMAP_LOCAL_CATASTROPHIC;
            return self.inbound_error(ctx, code, ulpdu, TermCause::Completion);
        }
        cur.received += payload.len() as u32;
        self.counters.bytes_in[(h.opcode as u8 & 7) as usize] += payload.len() as u64;
        if !h.last {
            self.rx_send = Some(cur);
            return Ok(());
        }
        self.rx_send = None;
        self.rx_msn[QN_SEND] = cur.msn.wrapping_add(1);
        let mut invalidated = None;
        if h.opcode.has_inv_stag() {
            // Verbs 8.2.2.1 (1): after placement, before the receive completes; verbs 7.8:
            // the QP needs a remote right.
            let r = if self.attr.inbound_read || self.attr.inbound_write {
                ctx.invalidate_remote(inv_stag, self.id, self.attr.pd)
            } else {
                Err(TermCode::RDMAP_ACCESS_RIGHTS)
            };
            if let Err(code) = r {
                self.complete_recv(ctx, &cur.wr, WcStatus::InvalidateStagInvalid);
                return self.inbound_error(ctx, code, ulpdu, TermCause::Completion);
            }
            invalidated = Some(inv_stag);
        }
        let cqe = Cqe {
            wr_id: cur.wr.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: cur.received,
            qp: self.cqe_qp,
            invalidated,
            solicited: h.opcode.is_solicited(),
        };
        ctx.complete(self.attr.recv_cq, cqe);
        Ok(())
    }

    /// Places `payload` at message offset `cur.received` of the receive SGL, checking each
    /// touched SGE (Local Write, PD) for exactly the bytes written ([`place`]: maybe in
    /// the pass that computes the pending CRC).
    fn place_sgl(
        &self,
        ctx: &mut Ctx<'_>,
        cur: &RxSend,
        payload: &[u8],
        crc: &mut RxCrc<'_>,
        mem: &mut dyn Memory,
    ) -> Result<(), WcStatus> {
        let mut skip = u64::from(cur.received);
        let mut src = payload;
        for sge in cur.wr.sgl.as_slice() {
            if src.is_empty() {
                break;
            }
            let len = u64::from(sge.length);
            if skip >= len {
                skip -= len;
                continue;
            }
            let take = ((len - skip) as usize).min(src.len());
            let piece = iwarp_types::Sge {
                addr: sge.addr.wrapping_add(skip),
                length: take as u32,
                lkey: sge.lkey,
            };
            let need = iwarp_types::Access::LOCAL_WRITE;
            let privileged = self.attr.privileged;
            let loc = if sge.lkey == Stag::ZERO {
                // STag 0: the whole SGE is one physical range, checked as such.
                let whole = ctx.resolve_local(sge, need, cur.pd, privileged, Some(&*mem))?;
                crate::ctx::Loc {
                    region: whole.region,
                    offset: whole.offset.wrapping_add(skip),
                }
            } else {
                ctx.resolve_local(&piece, need, cur.pd, privileged, Some(&*mem))?
            };
            let (now, rest) = src.split_at(take);
            place(mem, loc, now, crc).map_err(|_| WcStatus::LocalQpCatastrophic)?;
            src = rest;
            skip = 0;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rx_write(
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
        if payload.is_empty() {
            crc_ok(crc)?;
            // Zero length: no check at all (verbs 7.6.3); maybe the RFC 6581 RTR.
            if self.rtr_expected == Some(RtrKind::Write) && h.last {
                self.rtr_expected = None;
                self.rtr_received = true;
            }
            return Ok(());
        }
        if !self.attr.inbound_write {
            let code = TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED;
            return self.refuse(ctx, crc, code, ulpdu, TermCause::Local);
        }
        let len = payload.len() as u64;
        let loc = match ctx.resolve_remote(stag, to, len, RemoteOp::Write, self.id, self.attr.pd) {
            Ok(loc) => loc,
            Err(e) => {
                let code = term_code_tagged_sink(e);
                return self.refuse(ctx, crc, code, ulpdu, TermCause::Local);
            }
        };
        if place(mem, loc, payload, crc).is_err() {
            let code = TermCode::DDP_LOCAL_CATASTROPHIC;
            return self.refuse(ctx, crc, code, ulpdu, TermCause::Local);
        }
        crc_ok(crc)?;
        self.counters.bytes_in[Opcode::Write as usize] += len;
        Ok(())
    }
}

/// The code of a received Terminate (RFC layout, or siw's bitfield layout; the control
/// word alone if the rest is malformed); "unspecified" if it is too short to carry one.
pub(crate) fn parse_term_code(ulpdu: &[u8]) -> TermCode {
    let Some(body) = ulpdu.get(ddp::UNTAGGED_HEADER_LEN..) else {
        return TermCode::RDMAP_OP_UNSPECIFIED;
    };
    if let Ok((t, _)) = TerminateRepr::parse_any(body) {
        return t.code;
    }
    match body.get(..4) {
        Some(b) => TermControl::parse([b[0], b[1], b[2], b[3]]).code,
        None => TermCode::RDMAP_OP_UNSPECIFIED,
    }
}

/// A whole zero-length RDMA Write (tagged, last segment, no payload).
fn is_empty_write(ulpdu: &[u8]) -> bool {
    Segment::parse(ulpdu).is_ok_and(|seg| {
        seg.header.opcode == Opcode::Write
            && seg.header.last
            && matches!(seg.header.model, Model::Tagged { .. })
            && matches!(seg.body, Body::Payload(p) if p.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_code_of_received_terminates() {
        let hdr = [0x41u8, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0];
        let mut t = hdr.to_vec();
        t.extend_from_slice(&[0x11, 0x01, 0x00, 0x00]);
        assert_eq!(parse_term_code(&t), TermCode::DDP_TAGGED_BASE_BOUNDS);
        // D set but no header follows: the control word still counts.
        let mut t = hdr.to_vec();
        t.extend_from_slice(&[0x12, 0x02, 0x40, 0x00]);
        assert_eq!(parse_term_code(&t), TermCode::DDP_UNTAGGED_NO_BUFFER);
        assert_eq!(parse_term_code(&t[..20]), TermCode::RDMAP_OP_UNSPECIFIED);
        assert_eq!(parse_term_code(&hdr), TermCode::RDMAP_OP_UNSPECIFIED);
    }
}
