//! Timer expiry: retransmission (RFC 6298), delayed ACK, persist, keepalive, TIME_WAIT,
//! release of idle loss-recovery storage.

use iwarp_types::{Duration, Instant};

use crate::conn::{RtoUndo, TcpConn, TcpEvent, TcpState};
use crate::timer::Timer;

impl TcpConn {
    /// Runs every timer that expired at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.take_expired(Timer::TimeWait, now) {
            self.enter_closed(TcpEvent::Closed);
            return;
        }
        if self.timers.take_expired(Timer::Rto, now) {
            self.on_rto(now);
        }
        if self.state == TcpState::Closed {
            return;
        }
        if self.timers.take_expired(Timer::DelayedAck, now) {
            self.ack_pending = true;
        }
        if self.timers.take_expired(Timer::Persist, now) {
            self.persist_backoff = self.persist_backoff.saturating_add(1);
            self.probe_pending = true;
            self.persist_force = true;
            self.counters.window_probes += 1;
        }
        if self.timers.take_expired(Timer::Keepalive, now) {
            self.on_keepalive(now);
        }
        if self.state == TcpState::Closed {
            return;
        }
        if self.timers.take_expired(Timer::Release, now) {
            self.release_storage(now);
        }
        self.schedule_release(now);
    }

    fn on_rto(&mut self, now: Instant) {
        if matches!(self.state, TcpState::SynSent | TcpState::SynReceived) {
            if self.syn_retries >= self.cfg.syn_retries {
                self.enter_closed(TcpEvent::TimedOut);
                return;
            }
            self.syn_retries += 1;
            self.counters.rto_expirations += 1;
            self.rtt.back_off();
            self.syn_pending = true;
            self.arm_rto(now);
            return;
        }
        if !self.has_outstanding() {
            return;
        }
        self.counters.rto_expirations += 1;
        if self.rto_retries >= self.cfg.max_retries {
            self.enter_closed(TcpEvent::TimedOut);
            return;
        }
        self.rto_retries += 1;
        let mss = self.eff_mss();
        let flight = self.snd_max - self.snd_una;
        if self.rto_retries == 1 && self.ts_ok {
            self.rto_undo = Some(RtoUndo {
                tsval: self.ts_now(now),
                cc: self.cc.clone(),
            });
        }
        self.cc.on_rto(flight, mss, self.rto_retries == 1);
        self.rtt.back_off();
        // Go back to snd.una; SACK information is discarded (RFC 2018 section 8).
        self.snd_nxt = self.snd_una;
        self.scoreboard.clear();
        self.in_recovery = false;
        self.recover = self.snd_max;
        self.dupacks = 0;
        self.rxt_force = false;
        self.rto_head = true;
        self.rtt_probe = None;
        if self.fin_off.is_some() && !self.fin_acked {
            self.fin_pending = true;
        }
        self.arm_rto(now);
    }

    fn on_keepalive(&mut self, now: Instant) {
        if !self.cfg.keepalive.enabled
            || !self.state.is_synchronized()
            || self.state == TcpState::TimeWait
        {
            return;
        }
        if self.has_outstanding() {
            // The retransmission timer watches the peer while data is outstanding.
            self.arm_keepalive(now);
            return;
        }
        if self.keepalive_sent >= self.cfg.keepalive.count {
            self.enter_closed(TcpEvent::TimedOut);
            return;
        }
        self.keepalive_sent += 1;
        self.counters.keepalive_probes += 1;
        self.probe_pending = true;
        let interval = Duration::from_millis(self.cfg.keepalive.interval_ms);
        self.timers.set(Timer::Keepalive, now + interval);
    }
}
