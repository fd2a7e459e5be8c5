//! The Terminate message (RFC 5040 sections 4.8, 5.4, 7.1; verbs 6.2.3, 6.4), entering
//! the Terminate and Error states, and flushing (verbs 6.2.4).

use iwarp_types::{AsyncEventKind, Cqe, QpState, RecvWr, TermCode, WcOpcode, WcStatus};
use iwarp_wire::ddp;
use iwarp_wire::rdmap::{terminate_header, TerminateRepr, MAX_TERMINATE_LEN};

use crate::ctx::Ctx;
use crate::qp::{LlpRequest, Qp, TermCause, TermRecord, QN_TERM};

/// Longest Terminate ULPDU: untagged DDP header, Terminate control, segment length,
/// copied untagged DDP header, copied RDMA Read Request header.
pub const TERM_MAX_LEN: usize = ddp::UNTAGGED_HEADER_LEN + MAX_TERMINATE_LEN;

/// The bytes of the one Terminate a stream may carry (built once, re-read on
/// retransmission).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermBuf {
    bytes: [u8; TERM_MAX_LEN],
    len: u8,
}

impl TermBuf {
    /// The Terminate ULPDU with MSN `msn` carrying `repr`.
    fn new(msn: u32, repr: &TerminateRepr) -> TermBuf {
        let mut bytes = [0u8; TERM_MAX_LEN];
        let h = terminate_header(msn).emit_bytes(&mut bytes);
        let n = repr.emit(&mut bytes[h..]);
        TermBuf {
            bytes,
            len: (h + n) as u8,
        }
    }

    /// ULPDU length.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The ULPDU bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len()]
    }
}

/// What a Terminate about `segment` carries (RFC 5040 figure 10): nothing for local
/// catastrophic and LLP errors; the segment length and DDP header otherwise; the RDMA Read
/// Request header only for remote protection errors about a Read Request.
pub(crate) fn terminate_repr(code: TermCode, segment: Option<&[u8]>) -> TerminateRepr {
    let local = code.layer == 0 && code.etype == 0;
    match segment {
        Some(seg) if !local && code.layer != 2 => {
            let mut r = TerminateRepr::about_segment(code, seg);
            if !(code.layer == 0 && code.etype == 1) {
                r.rdma_header = None;
            }
            r
        }
        _ => TerminateRepr::bare(code),
    }
}

/// The asynchronous event for an error found in an inbound segment (verbs figure 37).
pub(crate) fn event_for(code: TermCode) -> AsyncEventKind {
    match (code.layer, code.etype, code.ecode) {
        (0, 1, _) => AsyncEventKind::ProtectionError(code),
        (1, 1, e) if e != 0x04 => AsyncEventKind::ProtectionError(code),
        (1, 2, 0x02 | 0x03) => AsyncEventKind::ProtectionError(code),
        (2, _, _) => AsyncEventKind::LlpIntegrityError(code),
        _ => AsyncEventKind::RemoteOperationError(code),
    }
}

impl Qp {
    /// Moves to Terminate and queues a Terminate carrying `code` (about `segment`, the
    /// inbound DDP segment in error, if any). The first error wins; later ones are
    /// ignored. Raises the async event unless the error was reported through a CQE or
    /// asked for by Modify QP (verbs 6.2.3).
    pub(crate) fn enter_terminate(
        &mut self,
        ctx: &mut Ctx<'_>,
        code: TermCode,
        segment: Option<&[u8]>,
        cause: TermCause,
    ) {
        if !matches!(self.state, QpState::Rts | QpState::Closing) || self.term_tx.is_some() {
            return;
        }
        let msn = self.tx_msn[QN_TERM];
        self.tx_msn[QN_TERM] = msn.wrapping_add(1);
        let buf = TermBuf::new(msn, &terminate_repr(code, segment));
        let body = buf.bytes().get(ddp::UNTAGGED_HEADER_LEN..).unwrap_or(&[]);
        self.term_record = Some(TermRecord::new(code, true, body));
        self.term_tx = Some(buf);
        self.term_cause = Some(cause);
        self.state = QpState::Terminate;
        // Outbound stops on a segment boundary: the message in progress is abandoned.
        self.tx_cur = None;
        match cause {
            TermCause::Local => ctx.qp_event(self.id, event_for(code)),
            TermCause::Llp => ctx.qp_event(self.id, AsyncEventKind::LlpIntegrityError(code)),
            TermCause::Modify | TermCause::Completion | TermCause::Received => {}
        }
    }

    /// A Terminate was received: no Terminate is sent back (verbs 6.2.2.3); the WR it
    /// most likely relates to (the oldest one on the wire) completes with Remote
    /// Termination when the QP is flushed, or with Remote Access Error when the
    /// Terminate reports a protection error (`TermCode::is_remote_protection`), as
    /// hardware iWARP providers tell them apart (`IBV_WC_REM_ACCESS_ERR`).
    pub(crate) fn terminate_received(&mut self, ctx: &mut Ctx<'_>, ulpdu: &[u8]) {
        self.counters.terms_received += 1;
        let code = crate::qp::rx::parse_term_code(ulpdu);
        let body = ulpdu.get(ddp::UNTAGGED_HEADER_LEN..).unwrap_or(&[]);
        let record = TermRecord::new(code, false, body);
        if self.state == QpState::Terminate {
            // Both ends found an error: keep the peer's message next to ours (verbs
            // 6.2.4); nothing else changes (verbs figure 9: segments are ignored).
            if self.term_peer_record.is_none() && self.term_record.is_some_and(|r| r.local) {
                self.term_peer_record = Some(record);
            }
            return;
        }
        if self.state == QpState::Closing {
            self.term_record = Some(record);
            self.enter_error(ctx, Some(LlpRequest::Reset));
            ctx.qp_event(self.id, AsyncEventKind::BadClose);
            return;
        }
        let status = if code.is_remote_protection() {
            WcStatus::RemoteAccessError
        } else {
            WcStatus::RemoteTermination
        };
        self.term_related = self
            .sq
            .q
            .iter()
            .find(|e| {
                !matches!(
                    e.phase,
                    crate::qp::sq::SqPhase::Posted | crate::qp::sq::SqPhase::Done(_)
                )
            })
            .map(|e| (e.seq, status));
        self.term_record = Some(record);
        self.term_cause = Some(TermCause::Received);
        self.state = QpState::Terminate;
        self.tx_cur = None;
        self.llp_request.get_or_insert(LlpRequest::Close);
        ctx.qp_event(self.id, AsyncEventKind::TerminateReceived(code));
    }

    /// Enters Error: the LLP stream is disassociated, every outstanding WR is flushed.
    /// `request` is what the LLP must still do (Reset after an abortive Modify).
    pub(crate) fn enter_error(&mut self, ctx: &mut Ctx<'_>, request: Option<LlpRequest>) {
        if self.state == QpState::Error {
            return;
        }
        self.state = QpState::Error;
        self.conn = None;
        if request.is_some() {
            self.llp_request = request;
        }
        self.tx_cur = None;
        self.irq.clear();
        self.term_tx = None;
        self.sq_flush(ctx);
        self.rq_flush(ctx);
    }

    /// Completes every receive WR the QP holds (its RQ, and an SRQ WR it consumed) with
    /// `Flushed`. SRQ WRs not yet consumed stay in the SRQ (verbs 6.3.6).
    pub(crate) fn rq_flush(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(cur) = self.rx_send.take() {
            self.complete_recv(ctx, &cur.wr, WcStatus::Flushed);
        }
        while let Some(wr) = self.rq.pop_front() {
            self.complete_recv(ctx, &wr, WcStatus::Flushed);
        }
    }

    /// Reports a receive completion with `status` (no data: flushes and errors).
    pub(crate) fn complete_recv(&mut self, ctx: &mut Ctx<'_>, wr: &RecvWr, status: WcStatus) {
        let cqe = Cqe {
            wr_id: wr.wr_id,
            status,
            opcode: WcOpcode::Recv,
            byte_len: 0,
            qp: self.cqe_qp,
            invalidated: None,
            solicited: false,
        };
        ctx.complete(self.attr.recv_cq, cqe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_catastrophic_is_bare() {
        let seg = [
            0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9,
        ];
        let r = terminate_repr(TermCode::RDMAP_LOCAL_CATASTROPHIC, Some(&seg));
        assert_eq!(r, TerminateRepr::bare(TermCode::RDMAP_LOCAL_CATASTROPHIC));
        let b = TermBuf::new(1, &r);
        // Untagged, L, DV 1 | RV 1, opcode 7 | inv 0 | QN 2 | MSN 1 | MO 0 | control.
        assert_eq!(
            b.bytes(),
            &[0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x00, 0x00, 0, 0]
        );
    }

    #[test]
    fn ddp_error_carries_segment_header() {
        // A Send (untagged, L) with one payload byte and a bad MSN.
        let seg = [
            0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0xaa,
        ];
        let r = terminate_repr(TermCode::DDP_UNTAGGED_MSN_RANGE, Some(&seg));
        let b = TermBuf::new(1, &r);
        let t = &b.bytes()[18..];
        assert_eq!(&t[..4], &[0x12, 0x03, 0xc0, 0x00]);
        assert_eq!(
            &t[4..6],
            &[0, 1],
            "segment length: the payload after the header"
        );
        assert_eq!(&t[6..], &seg[..18]);
    }
}
