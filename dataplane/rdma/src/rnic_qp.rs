//! QP verbs (verbs 9.2.5, 9.3.1) and the calls the engine drives QPs with (ENGINE.md
//! seam 3).

use iwarp_types::{
    ConnId, Memory, QpId, QpState, RecvWr, SendFlags, SendOp, SendWr, TermCode, VerbError, MAX_SGE,
};

use crate::qp::{
    LlpEvent, LlpParams, LlpRequest, Qp, QpAttr, QpCounters, QpInfo, QpModify, RtrKind, TermCause,
    TxUlpdu,
};
use crate::Rnic;
use iwarp_wire::mpa::RxCrc;

impl Rnic {
    /// Create QP (verbs 9.2.5.1): a QP in Idle. Returns its id and the attributes as
    /// allocated (depths at least 1).
    pub fn create_qp(&mut self, attr: &QpAttr) -> Result<(QpId, QpAttr), VerbError> {
        self.create_qp_with_rq_limit(attr, 0)
    }

    /// Create QP with a QP RQ Limit (verbs 6.3.8, 9.2.5.1; QPs with an SRQ only): a
    /// non-zero limit is armed at creation. `InvalidModifier` for a limit on a QP without
    /// an SRQ, `LimitOutOfRange` above the SRQ's size.
    pub fn create_qp_with_rq_limit(
        &mut self,
        attr: &QpAttr,
        rq_limit: u32,
    ) -> Result<(QpId, QpAttr), VerbError> {
        let lim = self.limits;
        if !self.pds.contains(attr.pd) {
            return Err(VerbError::InvalidPd);
        }
        if self.cqs.get(attr.send_cq).is_none() || self.cqs.get(attr.recv_cq).is_none() {
            return Err(VerbError::InvalidCq);
        }
        match attr.srq.map(|s| self.srqs.get(s)) {
            Some(None) => return Err(VerbError::InvalidSrq),
            Some(Some(s)) if rq_limit as usize > s.attr().max_wr => {
                return Err(VerbError::LimitOutOfRange)
            }
            None if rq_limit > 0 => return Err(VerbError::InvalidModifier),
            _ => {}
        }
        if attr.sq_depth > lim.max_sq_wr || (attr.srq.is_none() && attr.rq_depth > lim.max_rq_wr) {
            return Err(VerbError::TooManyWrsRequested);
        }
        if attr.max_send_sge > lim.max_sge
            || (attr.srq.is_none() && attr.max_recv_sge > lim.max_sge)
        {
            return Err(VerbError::TooManySges);
        }
        if attr.ord > lim.max_ord {
            return Err(VerbError::OrdTooLarge);
        }
        if attr.ird > lim.max_ird {
            return Err(VerbError::IrdTooLarge);
        }
        if self.qps.len() >= self.qps.capacity() {
            return Err(VerbError::InsufficientResources);
        }
        let mut a = *attr;
        a.sq_depth = a.sq_depth.max(1);
        a.max_send_sge = a.max_send_sge.max(1);
        if a.srq.is_some() {
            a.rq_depth = 0;
            a.max_recv_sge = 0;
        } else {
            a.rq_depth = a.rq_depth.max(1);
            a.max_recv_sge = a.max_recv_sge.max(1);
        }
        let placeholder = Qp::new(QpId(0), a, lim.max_ord, lim.max_ird);
        let handle = self
            .qps
            .insert(placeholder)
            .ok_or(VerbError::InsufficientResources)?;
        let id = QpId(handle);
        if let Some(q) = self.qps.get_mut(handle) {
            q.id = id;
            q.cqe_qp = id;
            q.rq_limit = rq_limit;
            q.rq_limit_armed = rq_limit > 0;
        }
        // References last: nothing above can fail after them.
        let _ = self.pds.acquire(a.pd);
        self.pds.add_qp(a.pd);
        let _ = self.cqs.acquire(a.send_cq);
        let _ = self.cqs.acquire(a.recv_cq);
        if let Some(srq) = a.srq {
            let _ = self.srqs.acquire(srq);
        }
        Ok((id, a))
    }

    /// Names `qp` in its completions: from now on they carry `id` in `Cqe::qp` instead
    /// of the QP's own id (the shared-memory service gives the client's QP handle, so
    /// a completion is written once, in the form the client reads).
    pub fn set_qp_completion_id(&mut self, qp: QpId, id: QpId) -> Result<(), VerbError> {
        let q = self.qps.get_mut(qp.0).ok_or(VerbError::InvalidQp)?;
        q.cqe_qp = id;
        Ok(())
    }

    /// True while a graceful close asked with [`Rnic::qp_disconnect`] waits for the SQ
    /// and the Read queues to drain (the QP is still RTS; Closing follows).
    pub fn qp_close_requested(&self, qp: QpId) -> bool {
        self.qps.get(qp.0).is_some_and(|q| q.close_when_drained)
    }

    /// Query QP.
    pub fn query_qp(&self, qp: QpId) -> Result<QpInfo, VerbError> {
        self.qps.get(qp.0).map(Qp::info).ok_or(VerbError::InvalidQp)
    }

    /// Modify QP (verbs 9.2.5.3, transitions of verbs 6.2): all or nothing. Idle to RTS
    /// needs an established LLP stream: the engine does it with [`Rnic::qp_establish`].
    pub fn modify_qp(&mut self, qp: QpId, m: &QpModify) -> Result<(), VerbError> {
        let lim = crate::qp::QpLimits {
            max_ord: self.limits.max_ord,
            max_ird: self.limits.max_ird,
            max_sq_wr: self.limits.max_sq_wr,
            max_rq_wr: self.limits.max_rq_wr,
        };
        self.with_qp(qp, None, |q, ctx| q.modify(ctx, m, &lim))?
    }

    /// Destroy QP (verbs 9.2.5.4): refused while memory windows are bound to it; succeeds
    /// in any other state, without completions for outstanding WRs. The engine drops (and
    /// resets) the LLP connection the QP was associated with.
    pub fn destroy_qp(&mut self, qp: QpId) -> Result<(), VerbError> {
        if self.qps.get(qp.0).is_none() {
            return Err(VerbError::InvalidQp);
        }
        if self.mem.mws_bound_to_qp(qp) > 0 {
            return Err(VerbError::MwStillBound);
        }
        if let Some(q) = self.qps.remove(qp.0) {
            self.pds.release(q.attr.pd);
            self.pds.remove_qp(q.attr.pd);
            self.cqs.release(q.attr.send_cq);
            self.cqs.release(q.attr.recv_cq);
            if let Some(srq) = q.attr.srq {
                self.srqs.release(srq);
            }
        }
        Ok(())
    }

    /// PostSQ (verbs 9.3.1.1). Immediate errors: `InvalidQp`, `InvalidQpState` (Terminate,
    /// Closing, Error), `TooManyWrsPosted`, `TooManySges`, `InvalidModifier` (an RDMA Read
    /// without exactly one local SGE). Errors found while processing the WR complete it in
    /// error instead.
    pub fn post_send(&mut self, qp: QpId, wr: &SendWr) -> Result<(), VerbError> {
        let copy = |into: &mut SendWr| {
            *into = *wr;
            Ok::<(), core::convert::Infallible>(())
        };
        self.post_send_with(qp, copy).map_err(|e| match e {
            PostError::Verb(e) | PostError::Written(e) => e,
            PostError::Write(never) => match never {},
        })
    }

    /// [`Rnic::post_send`] of a WR that `write` writes straight into the WQE (a decoder
    /// of a shared-memory slot: decoded elsewhere and copied in, the copy waited on the
    /// decoder's stores). The QP's state and depth are checked first
    /// ([`PostError::Verb`], `write` not called); an error from `write` is
    /// [`PostError::Write`]; then the WR is checked as [`Rnic::post_send`] checks it.
    /// Nothing is posted unless all pass.
    #[inline]
    pub fn post_send_with<E>(
        &mut self,
        qp: QpId,
        write: impl FnOnce(&mut SendWr) -> Result<(), E>,
    ) -> Result<(), PostError<E>> {
        let q = self.sq_ready(qp).map_err(PostError::Verb)?;
        let max_send_sge = q.attr.max_send_sge;
        let Some(wr) = q.sq.q.next_wr() else {
            return Err(PostError::Verb(VerbError::TooManyWrsPosted));
        };
        write(wr).map_err(PostError::Write)?;
        check_send_wr(max_send_sge, wr).map_err(PostError::Written)?;
        if !q.sq.commit() {
            return Err(PostError::Written(VerbError::TooManyWrsPosted));
        }
        Ok(())
    }

    /// The QP `qp` if it takes a send WR now (state and depth).
    #[inline]
    fn sq_ready(&mut self, qp: QpId) -> Result<&mut Qp, VerbError> {
        let q = self.qps.get_mut(qp.0).ok_or(VerbError::InvalidQp)?;
        if !matches!(q.state, QpState::Idle | QpState::Rts) || q.close_when_drained {
            return Err(VerbError::InvalidQpState);
        }
        if q.sq.q.len() >= q.sq.depth {
            return Err(VerbError::TooManyWrsPosted);
        }
        Ok(q)
    }

    /// PostRQ on a QP (verbs 9.3.1.2). Immediate errors: `InvalidQp`,
    /// `RqAssociatedWithSrq`, `InvalidQpState` (Terminate, Error), `TooManyWrsPosted`,
    /// `TooManySges`. In Closing the WR is accepted and flushed at once (verbs figure 11).
    pub fn post_recv(&mut self, qp: QpId, wr: &RecvWr) -> Result<(), VerbError> {
        let q = self.qps.get(qp.0).ok_or(VerbError::InvalidQp)?;
        if q.attr.srq.is_some() {
            return Err(VerbError::RqAssociatedWithSrq);
        }
        if !matches!(q.state, QpState::Idle | QpState::Rts | QpState::Closing) {
            return Err(VerbError::InvalidQpState);
        }
        if q.rq.len() >= q.rq_depth {
            return Err(VerbError::TooManyWrsPosted);
        }
        if wr.sgl.len() > q.attr.max_recv_sge as usize {
            return Err(VerbError::TooManySges);
        }
        let closing = q.state == QpState::Closing;
        self.with_qp(qp, None, |q, ctx| {
            q.rq.push_back(*wr);
            if closing {
                q.rq_flush(ctx);
            }
        })
    }

    // --- Engine-facing calls ---

    /// Associates an Idle QP with the established connection `conn` (Idle to RTS) with
    /// the negotiated IRD/ORD and RTR duties.
    pub fn qp_establish(
        &mut self,
        qp: QpId,
        conn: ConnId,
        params: LlpParams,
    ) -> Result<(), VerbError> {
        self.qps
            .get_mut(qp.0)
            .ok_or(VerbError::InvalidQp)?
            .establish(conn, params)
    }

    /// The next DDP segment to send, at most `max_ulpdu_len` bytes, and its length.
    /// Priority: Terminate, the message in progress, Read Responses, then the SQ in post
    /// order (fences, ORD). `mem` gives arena lengths to Fast-Register WRs run on the way.
    #[inline]
    pub fn qp_next_ulpdu(
        &mut self,
        qp: QpId,
        max_ulpdu_len: usize,
        mem: &dyn Memory,
    ) -> Option<(TxUlpdu, usize)> {
        // `with_qp` without its `Result` (the descriptor is not copied once more).
        let (q, mut ctx) = self.split_qp(qp, Some(mem))?;
        let r = q.next_ulpdu(&mut ctx, max_ulpdu_len);
        if ctx.cq_error {
            q.on_cq_error(&mut ctx);
        }
        r
    }

    /// Writes the bytes of `d` into `out` (exactly its ULPDU length), reading payload from
    /// registered memory. The same descriptor always gives the same bytes (unless the
    /// memory changed); a descriptor whose WR was flushed gives zeros (counted).
    ///
    /// The memory is re-validated first (verbs 7.9, 7.10.4.1): if a source region or
    /// window was invalidated, deallocated or re-registered since the segment was chosen
    /// (a retransmission), `out` is zero-filled (an invalid DDP header the peer rejects),
    /// the WR completes with a protection error and the QP goes to Error asking the LLP
    /// for a Reset (verbs 6.4 (1): the segment already started).
    pub fn fill_ulpdu(&mut self, qp: QpId, d: &TxUlpdu, mem: &dyn Memory, out: &mut [u8]) {
        if self
            .with_qp(qp, Some(mem), |q, ctx| q.fill(ctx, d, mem, out))
            .is_err()
        {
            out.fill(0);
        }
    }

    /// As [`Rnic::fill_ulpdu`], and returns the CRC32c of `out` continued from `crc` (the
    /// MPA CRC so far: ULPDU_Length): for Send, Write and Read Response segments it is
    /// computed while the payload is copied out of registered memory, one pass instead of
    /// a copy and a CRC.
    pub fn fill_ulpdu_crc32c(
        &mut self,
        qp: QpId,
        d: &TxUlpdu,
        mem: &dyn Memory,
        out: &mut [u8],
        crc: u32,
    ) -> u32 {
        match self.with_qp(qp, Some(mem), |q, ctx| q.fill_crc32c(ctx, d, mem, out, crc)) {
            Ok(v) => v,
            Err(_) => {
                out.fill(0);
                iwarp_wire::crc::crc32c_append(crc, out)
            }
        }
    }

    /// TCP acknowledged the FPDU of `d` (called in order): the last segment of a Send or
    /// Write completes its WR.
    pub fn qp_ulpdu_acked(&mut self, qp: QpId, d: &TxUlpdu) {
        let _ = self.with_qp(qp, None, |q, ctx| q.ulpdu_acked(ctx, d));
    }

    /// One inbound DDP segment. `Err` carries the code of the Terminate the QP queued
    /// (it then ignores further segments).
    pub fn qp_on_ulpdu(
        &mut self,
        qp: QpId,
        ulpdu: &[u8],
        mem: &mut dyn Memory,
    ) -> Result<(), TermCode> {
        self.qp_on_fpdu(qp, ulpdu, &mut RxCrc::checked(), mem)
    }

    /// As [`Rnic::qp_on_ulpdu`], for a ULPDU whose FPDU's CRC may still be pending
    /// (`iwarp_mpa::UlpduSink::on_fpdu`'s contract): the QP checks it before it acts on
    /// the segment, or while it places the payload of an RDMA Write, a Read Response or a
    /// Send (one pass over the payload). `Err(TermCode::LLP_CRC)`: the CRC did not match;
    /// nothing but placement happened and no Terminate is queued (MPA's failure path
    /// queues it, as for a CRC found wrong first).
    pub fn qp_on_fpdu(
        &mut self,
        qp: QpId,
        ulpdu: &[u8],
        crc: &mut RxCrc<'_>,
        mem: &mut dyn Memory,
    ) -> Result<(), TermCode> {
        let r = self.with_qp(qp, None, |q, ctx| q.on_ulpdu(ctx, ulpdu, crc, mem));
        r.unwrap_or_else(|_| {
            if crc.check() {
                Err(TermCode::RDMAP_CATASTROPHIC_STREAM)
            } else {
                Err(TermCode::LLP_CRC)
            }
        })
    }

    /// An LLP event on the QP's connection.
    pub fn qp_llp_event(&mut self, qp: QpId, ev: LlpEvent) {
        let _ = self.with_qp(qp, None, |q, ctx| q.llp_event(ctx, ev));
    }

    /// The engine (MPA, TCP) found an error on the stream: queue a Terminate with `code`
    /// and report an LLP integrity error carrying it (verbs figure 37: a segment size
    /// invalid is 0x1000, a CRC error 0x2002, a bad FPDU 0x2003). Nothing happens if the
    /// QP already entered Terminate (the first error wins).
    pub fn qp_terminate(&mut self, qp: QpId, code: TermCode) {
        let _ = self.with_qp(qp, None, |q, ctx| {
            q.enter_terminate(ctx, code, None, TermCause::Llp)
        });
    }

    /// Graceful local close: RTS to Closing once the SQ and the Read queues drained.
    pub fn qp_disconnect(&mut self, qp: QpId) -> Result<(), VerbError> {
        self.with_qp(qp, None, |q, ctx| q.disconnect(ctx))?
    }

    /// Queues the zero-length RTR message of RFC 6581 (sent before anything else).
    pub fn qp_queue_rtr(&mut self, qp: QpId, kind: RtrKind) -> Result<(), VerbError> {
        let q = self.qps.get_mut(qp.0).ok_or(VerbError::InvalidQp)?;
        if q.state != QpState::Rts {
            return Err(VerbError::InvalidQpState);
        }
        q.rtr_tx = Some(kind);
        Ok(())
    }

    /// Queues a nudge: one zero-length RDMA Write, sent after the message in progress
    /// (none if one is already queued). For an MPA initiator whose peer has sent nothing
    /// since RDMA mode began: new bytes wake a responder that missed the first FPDU
    /// because it arrived before the responder's socket was attached to its QP (Linux
    /// siw, docs/INTEROP.md difference 2). RTS only.
    pub fn qp_queue_nudge(&mut self, qp: QpId) -> Result<(), VerbError> {
        let q = self.qps.get_mut(qp.0).ok_or(VerbError::InvalidQp)?;
        if q.state != QpState::Rts {
            return Err(VerbError::InvalidQpState);
        }
        q.nudge_tx = true;
        Ok(())
    }

    /// True once after the expected inbound RTR arrived (the engine may then release
    /// the MPA responder).
    pub fn qp_take_rtr_received(&mut self, qp: QpId) -> bool {
        self.qps
            .get_mut(qp.0)
            .is_some_and(|q| core::mem::take(&mut q.rtr_received))
    }

    /// What the QP asks of its LLP connection (close or reset), once.
    pub fn qp_poll_llp_request(&mut self, qp: QpId) -> Option<LlpRequest> {
        self.qps.get_mut(qp.0).and_then(|q| q.llp_request.take())
    }

    /// Traffic counters of a QP.
    pub fn qp_counters(&self, qp: QpId) -> Option<QpCounters> {
        self.qps.get(qp.0).map(|q| q.counters)
    }
}

impl Qp {
    /// A completion could not be queued: "CQ/SQ or CQ/RQ error" (verbs 4.6 #33-34).
    pub(crate) fn on_cq_error(&mut self, ctx: &mut crate::ctx::Ctx<'_>) {
        if matches!(self.state, QpState::Rts | QpState::Closing) {
            ctx.qp_event(self.id, iwarp_types::AsyncEventKind::CqError);
            let code = TermCode::RDMAP_CATASTROPHIC_STREAM;
            self.enter_terminate(ctx, code, None, TermCause::Completion);
        }
    }
}

/// Why [`Rnic::post_send_with`] posted nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError<E> {
    /// The QP takes no send WR now (the WR was not written).
    Verb(VerbError),
    /// The writer's own error.
    Write(E),
    /// The written WR was refused, as [`Rnic::post_send`] refuses it.
    Written(VerbError),
}

/// The checks of PostSQ on a WR (verbs 9.3.1.1): a Read has exactly one local SGE, at
/// most the QP's `max_send_sge` elsewhere, only defined flags.
#[inline]
fn check_send_wr(max_send_sge: u32, wr: &SendWr) -> Result<(), VerbError> {
    match wr.op {
        SendOp::Read { .. } => {
            if wr.sgl.len() != 1 {
                return Err(VerbError::InvalidModifier);
            }
        }
        SendOp::Bind { .. } | SendOp::FastReg { .. } | SendOp::LocalInv { .. } => {}
        _ => {
            if wr.sgl.len() > max_send_sge as usize || wr.sgl.len() > MAX_SGE {
                return Err(VerbError::TooManySges);
            }
        }
    }
    let known = SendFlags::SIGNALED.0 | SendFlags::READ_FENCE.0 | SendFlags::LOCAL_FENCE.0;
    if wr.flags.0 & !known != 0 {
        return Err(VerbError::InvalidModifier);
    }
    Ok(())
}
