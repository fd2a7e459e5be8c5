//! State changes: association with an LLP stream (Idle to RTS), LLP events, graceful
//! close, and Modify QP (verbs 6.1.3, 6.2, figures 4-11).

use iwarp_types::{AsyncEventKind, ConnId, QpState, VerbError};

use crate::ctx::Ctx;
use crate::qp::{LlpEvent, LlpParams, LlpRequest, LlpRole, Qp, QpModify, TermCause};
use iwarp_types::TermCode;

/// Engine-wide limits Modify QP checks against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpLimits {
    pub max_ord: u32,
    pub max_ird: u32,
    pub max_sq_wr: u32,
    pub max_rq_wr: u32,
}

impl Qp {
    /// Idle to RTS on `conn` with the negotiated IRD/ORD (verbs 6.2.1.2): the stream state
    /// is reset; an Initiator with an RTR sends it first; a Responder sends nothing before
    /// the first inbound FPDU (RFC 5044 7.1.2).
    pub(crate) fn establish(&mut self, conn: ConnId, p: LlpParams) -> Result<(), VerbError> {
        if self.state != QpState::Idle {
            return Err(VerbError::InvalidStateTransition);
        }
        if p.ird > self.attr.ird {
            return Err(VerbError::IrdTooLarge);
        }
        if p.ord > self.attr.ord {
            return Err(VerbError::OrdTooLarge);
        }
        self.reset_stream();
        self.ird = p.ird;
        self.ord = p.ord;
        self.conn = Some(conn);
        self.state = QpState::Rts;
        match p.role {
            LlpRole::Initiator => self.rtr_tx = p.rtr,
            LlpRole::Responder => {
                self.rtr_expected = p.rtr;
                self.hold_tx = true;
            }
        }
        Ok(())
    }

    /// An LLP event (verbs figures 8, 9, 11).
    pub(crate) fn llp_event(&mut self, ctx: &mut Ctx<'_>, ev: LlpEvent) {
        let id = self.id;
        match (self.state, ev) {
            (QpState::Rts, LlpEvent::PeerClosed) => {
                if self.sq.is_empty() && self.irq.is_empty() && self.rx_send.is_none() {
                    // Clean remote close: Closing, our FIN follows.
                    self.state = QpState::Closing;
                    self.llp_request = Some(LlpRequest::Close);
                    self.rq_flush(ctx);
                } else {
                    // Bad LLP Close: a Terminate can still go out on the half-open stream.
                    let code = TermCode::RDMAP_CATASTROPHIC_STREAM;
                    self.enter_terminate(ctx, code, None, TermCause::Completion);
                    ctx.qp_event(id, AsyncEventKind::BadLlpClose);
                }
            }
            (QpState::Rts | QpState::Closing, LlpEvent::Reset) => {
                self.enter_error(ctx, None);
                ctx.qp_event(id, AsyncEventKind::LlpConnectionReset);
            }
            (QpState::Rts | QpState::Closing, LlpEvent::TimedOut) => {
                self.enter_error(ctx, None);
                ctx.qp_event(id, AsyncEventKind::LlpConnectionLost);
            }
            (QpState::Rts | QpState::Closing, LlpEvent::Closed) => {
                if self.sq.is_empty() && self.irq.is_empty() {
                    self.rq_flush(ctx);
                    self.state = QpState::Idle;
                    self.conn = None;
                    self.llp_request = None;
                    self.reset_stream();
                    ctx.qp_event(id, AsyncEventKind::LlpCloseComplete);
                } else {
                    self.enter_error(ctx, None);
                    ctx.qp_event(id, AsyncEventKind::BadClose);
                }
            }
            (QpState::Terminate, LlpEvent::Reset | LlpEvent::TimedOut | LlpEvent::Closed) => {
                let cause = self.term_cause;
                let undelivered = !self.term_acked && ev != LlpEvent::Closed;
                self.enter_error(ctx, None);
                if undelivered && cause != Some(TermCause::Received) {
                    ctx.qp_event(id, AsyncEventKind::BadClose);
                } else if matches!(
                    cause,
                    Some(TermCause::Received | TermCause::Local | TermCause::Llp)
                ) {
                    // Verbs 6.2.3 forbids "Error State Entered" only when Terminate was
                    // entered by Modify QP or by an error reported in a completion; after
                    // a received Terminate or an inbound error it tells the consumer the
                    // QP is now in Error, flushed, and may be modified to Idle (d1).
                    ctx.qp_event(id, AsyncEventKind::QpErrorStateEntered);
                }
            }
            _ => {}
        }
    }

    /// Graceful local close: Closing once the SQ, the IRQ and the ORQ drained.
    pub(crate) fn disconnect(&mut self, ctx: &mut Ctx<'_>) -> Result<(), VerbError> {
        if self.state != QpState::Rts {
            return Err(VerbError::InvalidQpState);
        }
        self.close_when_drained = true;
        self.check_drained(ctx);
        Ok(())
    }

    /// Moves a draining QP to Closing when nothing is outstanding.
    pub(crate) fn check_drained(&mut self, ctx: &mut Ctx<'_>) {
        if self.close_when_drained
            && self.state == QpState::Rts
            && self.sq.is_empty()
            && self.irq.is_empty()
            && self.orq.is_empty()
            && self.tx_cur.is_none()
        {
            self.close_when_drained = false;
            self.state = QpState::Closing;
            self.llp_request = Some(LlpRequest::Close);
            self.rq_flush(ctx);
        }
    }

    /// Modify QP (verbs 9.2.5.3): all or nothing.
    pub(crate) fn modify(
        &mut self,
        ctx: &mut Ctx<'_>,
        m: &QpModify,
        lim: &QpLimits,
    ) -> Result<(), VerbError> {
        use QpState::*;
        let from = self.state;
        let to = m.state.unwrap_or(from);
        let has_attr = m.ord.is_some()
            || m.ird.is_some()
            || m.sq_depth.is_some()
            || m.rq_depth.is_some()
            || m.rq_limit.is_some()
            || m.arm_rq_limit;
        match (from, to) {
            (Idle, Idle) | (Rts, Rts) => {}
            (Idle, Rts) => return Err(VerbError::InvalidConnection),
            (Idle, Error) | (Rts, Closing) | (Rts, Terminate) | (Rts, Error) | (Error, Idle) => {
                if has_attr {
                    return Err(VerbError::CannotChangeAttribute);
                }
            }
            _ => return Err(VerbError::InvalidStateTransition),
        }
        if has_attr {
            self.check_attrs(m, lim)?;
            self.check_rq_limit(ctx, m)?;
            self.apply_attrs(m);
        }
        match (from, to) {
            (Idle, Error) => self.enter_error(ctx, None),
            (Rts, Closing) => {
                if self.sq.is_empty() && self.irq.is_empty() && self.orq.is_empty() {
                    self.state = Closing;
                    self.llp_request = Some(LlpRequest::Close);
                    self.rq_flush(ctx);
                } else {
                    // Verbs figure 11: SQ work while Closing is a Bad Close.
                    self.state = Closing;
                    self.enter_error(ctx, Some(LlpRequest::Reset));
                    ctx.qp_event(self.id, AsyncEventKind::BadClose);
                }
            }
            (Rts, Terminate) => {
                let code = TermCode::RDMAP_LOCAL_CATASTROPHIC;
                self.enter_terminate(ctx, code, None, TermCause::Modify);
            }
            (Rts, Error) => self.enter_error(ctx, Some(LlpRequest::Reset)),
            (Error, Idle) => {
                self.state = Idle;
                self.conn = None;
                self.reset_stream();
            }
            _ => {}
        }
        Ok(())
    }

    fn check_attrs(&self, m: &QpModify, lim: &QpLimits) -> Result<(), VerbError> {
        if m.ord.is_some_and(|o| o > lim.max_ord) {
            return Err(VerbError::OrdTooLarge);
        }
        if let Some(ird) = m.ird {
            if ird > lim.max_ird {
                return Err(VerbError::IrdTooLarge);
            }
            // Verbs 6.5: IRD changes in RTS only with no inbound Read outstanding.
            if self.state == QpState::Rts && !self.irq.is_empty() {
                return Err(VerbError::CannotChangeAttribute);
            }
        }
        if let Some(d) = m.sq_depth {
            if d > lim.max_sq_wr {
                return Err(VerbError::TooManyWrsRequested);
            }
            if (d as usize) < self.sq.q.len() {
                return Err(VerbError::QueueShrinkFailed);
            }
        }
        if let (Some(d), None) = (m.rq_depth, self.attr.srq) {
            if d > lim.max_rq_wr {
                return Err(VerbError::TooManyWrsRequested);
            }
            if (d as usize) < self.rq.len() {
                return Err(VerbError::QueueShrinkFailed);
            }
        }
        Ok(())
    }

    /// QP RQ Limit inputs (verbs 6.3.8): only for a QP with an SRQ, at most the SRQ's
    /// size.
    fn check_rq_limit(&self, ctx: &Ctx<'_>, m: &QpModify) -> Result<(), VerbError> {
        if m.rq_limit.is_none() && !m.arm_rq_limit {
            return Ok(());
        }
        let srq = self.attr.srq.ok_or(VerbError::InvalidModifier)?;
        let max_wr = ctx.srqs.get(srq).map_or(0, |s| s.attr().max_wr);
        if m.rq_limit.is_some_and(|l| l as usize > max_wr) {
            return Err(VerbError::LimitOutOfRange);
        }
        Ok(())
    }

    /// Messages in progress on the QP (SRQ WQEs taken and not yet completed) changed to
    /// `in_progress`: raises the one-shot QP RQ Limit event if it now exceeds the armed
    /// limit (verbs 6.3.8). Never disturbs the QP otherwise.
    pub(crate) fn rq_limit_check(&mut self, ctx: &mut Ctx<'_>, in_progress: u32) {
        if self.rq_limit_armed && in_progress > self.rq_limit {
            self.rq_limit_armed = false;
            ctx.qp_event(self.id, AsyncEventKind::QpRqLimitReached);
        }
    }

    fn apply_attrs(&mut self, m: &QpModify) {
        if let Some(l) = m.rq_limit {
            self.rq_limit = l;
            self.rq_limit_armed = l > 0;
        }
        if m.arm_rq_limit {
            self.rq_limit_armed = self.rq_limit > 0;
        }
        if let Some(o) = m.ord {
            self.ord = o;
            self.attr.ord = o;
        }
        if let Some(i) = m.ird {
            self.ird = i;
            self.attr.ird = i;
        }
        if let Some(d) = m.sq_depth {
            let d = d as usize;
            self.sq.q.grow_to(d);
            self.sq.depth = d;
        }
        if let (Some(d), None) = (m.rq_depth, self.attr.srq) {
            let d = d as usize;
            if d > self.rq.capacity() {
                self.rq.reserve_exact(d - self.rq.len());
            }
            self.rq_depth = d;
        }
    }
}
