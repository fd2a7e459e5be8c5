//! The client's end of a run: draining (outstanding WRs, and the control messages the
//! server still owes), closing every QP gracefully (bounded by the close timeout, then
//! RST), recording how each connection ended, and releasing the verbs objects.
//!
//! A graceful close needs both ends quiet. A FIN that reaches a QP with work still on
//! its send queue is a Bad LLP Close (a Terminate, then a reset), so the client
//! disconnects only once every WR of its own completed (for verified WRITEs that
//! includes the server's acks) and, for SENDs, once the server's last credit message
//! arrived: the server returns credits [`credit_batch`] at a time and keeps fewer than
//! that, so a QP holding more than `depth - credit_batch` credits will hear nothing more.
//! The client's FIN then acknowledges everything the server sent.

use iwarp_engine::Engine;
use iwarp_types::{Instant, QpState};

use super::{LoadgenClient, Phase, QpPhase, QpSlot, CLOSE_STEP};
use crate::messages::{credit_batch, Op};

impl QpSlot {
    /// The server may still send on this QP on its own: a SEND client lacks credits
    /// the server will return (it returns them [`credit_batch`] at a time).
    pub(super) fn server_owes(&self, op: Op, depth: u32) -> bool {
        op == Op::Send
            && self.state == QpPhase::Up
            && !self.broken
            && depth.saturating_sub(self.credits) >= credit_batch(depth)
    }
}

impl LoadgenClient {
    /// No new WRs from now on; the close waits for the outstanding ones (and the
    /// server's last control messages), at most `drain_timeout`.
    pub(super) fn begin_draining(&mut self, now: Instant) {
        self.report.seconds = self.window_seconds(now);
        self.phase = Phase::Draining;
        self.cursor = 0;
        self.deadline = now + self.spec.drain_timeout;
    }

    /// Checks up to [`CLOSE_STEP`] QPs for control messages the server still owes
    /// (SEND credits); true once no QP waits for any. A quiet QP stays quiet (nothing is
    /// posted while draining), so the cursor never goes back.
    pub(super) fn quiet_step(&mut self) -> bool {
        let end = (self.cursor + CLOSE_STEP).min(self.spec.qps);
        while self.cursor < end {
            if self.qps[self.cursor as usize].server_owes(self.spec.op, self.spec.depth) {
                return false;
            }
            self.cursor += 1;
        }
        self.cursor >= self.spec.qps
    }

    /// Disconnects every QP from now on ([`LoadgenClient::close_step`] at a time), at
    /// most `close_timeout`.
    pub(super) fn begin_closing(&mut self, now: Instant) {
        if self.phase < Phase::Draining {
            self.report.seconds = self.window_seconds(now);
        }
        self.phase = Phase::Closing;
        self.cursor = 0;
        self.deadline = now + self.spec.close_timeout;
    }

    /// Disconnects up to [`CLOSE_STEP`] QPs; after the close timeout, resets the rest.
    pub(super) fn close_step(&mut self, now: Instant, engine: &mut Engine) {
        let timed_out = now >= self.deadline;
        let end = (self.cursor + CLOSE_STEP).min(self.spec.qps);
        for i in self.cursor as usize..end as usize {
            let q = &mut self.qps[i];
            match q.state {
                QpPhase::Idle => {
                    q.state = QpPhase::Closed;
                    self.closed += 1;
                }
                QpPhase::Up | QpPhase::Connecting => {
                    if engine.disconnect(now, q.qp).is_ok() {
                        q.state = QpPhase::Closing;
                    } else {
                        q.state = QpPhase::Closed;
                        self.closed += 1;
                    }
                }
                QpPhase::Closing | QpPhase::Closed => {}
            }
        }
        self.cursor = end;
        if timed_out && self.cursor >= self.spec.qps {
            for q in self.qps.iter_mut() {
                if q.state == QpPhase::Closing {
                    self.report.errors.bad_close += 1;
                    let close = &mut self.report.close;
                    close.aborted += 1;
                    if let Some(c) = engine.rnic().qp_counters(q.qp) {
                        close.terminates_sent += c.terms_sent;
                        close.terminates_received += c.terms_received;
                    }
                    let _ = engine.abort(now, q.qp);
                    q.state = QpPhase::Closed;
                    self.closed += 1;
                }
            }
        }
    }

    /// Releases every verbs object (the run is over).
    pub(super) fn release(&mut self, engine: &mut Engine) {
        let r = engine.rnic_mut();
        for q in &self.qps {
            let _ = r.destroy_qp(q.qp);
        }
        if let Some(m) = self.mr.take() {
            let _ = r.dealloc_stag(m);
        }
        self.cqs.destroy(r);
        let _ = r.dealloc_pd(self.pd);
    }

    /// QP `i`'s established connection ended: graceful if the QP is back in Idle (both
    /// FINs exchanged and acknowledged, nothing outstanding), a reset otherwise (RST,
    /// timeout, Terminate, Bad Close: the QP is in Error).
    pub(super) fn record_close(&mut self, engine: &Engine, i: usize) {
        let q = &self.qps[i];
        if q.state == QpPhase::Closed {
            return;
        }
        let r = engine.rnic();
        let close = &mut self.report.close;
        if let Some(c) = r.qp_counters(q.qp) {
            close.terminates_sent += c.terms_sent;
            close.terminates_received += c.terms_received;
        }
        match r.query_qp(q.qp).map(|info| info.state) {
            Ok(QpState::Idle) => close.graceful += 1,
            _ => {
                close.reset += 1;
                // A QP lost during the run is counted as lost instead; after the window
                // the close went wrong, whichever end started it.
                if q.state == QpPhase::Closing || self.phase >= Phase::Draining {
                    self.report.errors.bad_close += 1;
                }
            }
        }
    }

    /// The connection of QP `i` ended (failed, rejected or disconnected).
    pub(super) fn on_closed(&mut self, i: usize) {
        let phase = self.phase;
        let q = &mut self.qps[i];
        match q.state {
            QpPhase::Closed => return,
            QpPhase::Up if phase < Phase::Draining => self.report.errors.qp_lost += 1,
            QpPhase::Connecting => self.connecting = self.connecting.saturating_sub(1),
            _ => {}
        }
        let in_flight = q.next_seq - q.done_seq;
        self.outstanding = self.outstanding.saturating_sub(in_flight);
        q.done_seq = q.next_seq;
        q.state = QpPhase::Closed;
        if let Some(c) = q.conn.take() {
            self.conn_map.remove(c.0);
        }
        self.closed += 1;
    }
}
