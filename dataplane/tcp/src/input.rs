//! Segment arrival (RFC 9293 section 3.10.7) with RFC 5961 and RFC 7323 checks.

use iwarp_types::{Duration, Instant};

use crate::conn::{RxSink, TcpConn, TcpEvent, TcpState};
use crate::receive::RxPlace;
use crate::segment::TcpSegment;
use crate::timer::Timer;

impl TcpConn {
    /// Processes one segment of this connection. In-order payload is handed to `sink`
    /// as slices of `seg`; out-of-order payload is buffered (bounded) and replayed.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment<'_>, sink: &mut impl RxSink) {
        self.counters.segs_in += 1;
        if self.is_predicted_data(seg) {
            self.on_predicted_data(now, seg, sink);
        } else {
            match self.state {
                TcpState::Closed => {}
                TcpState::SynSent => self.on_syn_sent(now, seg),
                _ => self.on_synchronized(now, seg, sink),
            }
        }
        self.schedule_release(now);
    }

    /// Header prediction (Van Jacobson's, in BSD stacks since 4.3BSD-Reno): the next
    /// in-order data segment of an established connection that acknowledges
    /// nothing new, with a timestamp PAWS accepts and no SACK block, outside loss
    /// recovery. Of the checks of RFC 9293 3.10.7.4 such a segment passes every one, and
    /// of the ACK processing only the window update applies: [`Self::on_predicted_data`]
    /// does exactly what `on_synchronized` would (test:
    /// `header_prediction_is_the_full_path`).
    #[inline]
    fn is_predicted_data(&self, seg: &TcpSegment<'_>) -> bool {
        #[cfg(test)]
        if self.no_prediction {
            return false;
        }
        let f = seg.flags;
        self.state == TcpState::Established
            && f.ack
            && !(f.syn || f.fin || f.rst || f.urg)
            && !seg.payload.is_empty()
            && self.ts_ok
            && !self.in_recovery
            && self.rcv_wnd > 0
            && seg.seq == self.rcv_nxt_seq()
            && seg.ack == self.snd_una_seq()
            && seg.options.sack_blocks.iter().all(Option::is_none)
            && seg
                .options
                .timestamp
                .is_some_and(|(tsval, _)| tsval.wrapping_sub(self.ts_recent) as i32 >= 0)
    }

    /// A predicted segment ([`Self::is_predicted_data`]): keepalive re-armed, the send
    /// window updated, TS.Recent taken, the payload placed.
    fn on_predicted_data(&mut self, now: Instant, seg: &TcpSegment<'_>, sink: &mut impl RxSink) {
        self.counters.segs_predicted += 1;
        self.arm_keepalive(now);
        self.update_send_window(seg);
        self.take_ts_recent(seg);
        self.process_data(now, seg, sink);
        self.take_held_fin(now);
    }

    /// RFC 9293 3.10.7.3: SYN-SENT.
    fn on_syn_sent(&mut self, now: Instant, seg: &TcpSegment<'_>) {
        let f = seg.flags;
        let mut ack_ok = false;
        if f.ack {
            // Acceptable only if it acknowledges exactly our SYN.
            if seg.ack != self.iss + 1 {
                if !f.rst {
                    self.rst_pending = Some(seg.ack);
                }
                return;
            }
            ack_ok = true;
        }
        if f.rst {
            // RFC 5961 3.2: in SYN-SENT a RST is accepted only with an acceptable ACK.
            if ack_ok {
                self.enter_closed(TcpEvent::Reset);
            }
            return;
        }
        if !f.syn {
            return;
        }
        self.take_syn_options(seg);
        self.snd_wnd = u64::from(seg.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack;
        self.ack_pending = true;
        if ack_ok {
            self.syn_pending = false;
            if self.syn_retries == 0 {
                self.rtt.sample(now.saturating_since(self.last_send));
            }
            self.established(now);
        } else {
            // Simultaneous open: answer with SYN-ACK.
            self.state = TcpState::SynReceived;
            self.syn_pending = true;
            self.arm_rto(now);
        }
    }

    fn established(&mut self, now: Instant) {
        self.state = TcpState::Established;
        self.rto_retries = 0;
        self.syn_retries = 0;
        self.timers.stop(Timer::Rto);
        self.push_event(TcpEvent::Connected);
        if self.fin_queued {
            self.fin_pending = true;
            self.state = TcpState::FinWait1;
        }
        self.arm_keepalive(now);
    }

    pub(crate) fn arm_keepalive(&mut self, now: Instant) {
        if self.cfg.keepalive.enabled
            && self.state.is_synchronized()
            && self.state != TcpState::TimeWait
        {
            let idle = Duration::from_millis(self.cfg.keepalive.idle_ms);
            self.timers.set(Timer::Keepalive, now + idle);
            self.keepalive_sent = 0;
        }
    }

    /// RFC 9293 3.10.7.4: every state past SYN-SENT.
    fn on_synchronized(&mut self, now: Instant, seg: &TcpSegment<'_>, sink: &mut impl RxSink) {
        let f = seg.flags;
        let rcv_nxt = self.rcv_nxt_seq();

        // A retransmitted SYN while our SYN-ACK is unacknowledged: send it again.
        if self.state == TcpState::SynReceived && f.syn && !f.ack && !f.rst && seg.seq == self.irs {
            self.syn_pending = true;
            return;
        }

        // Simultaneous open: the peer's SYN-ACK acknowledges our SYN.
        if self.state == TcpState::SynReceived
            && f.syn
            && f.ack
            && !f.rst
            && seg.seq == self.irs
            && seg.ack == self.iss + 1
        {
            self.syn_pending = false;
            self.snd_wnd = u64::from(seg.window);
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            self.ack_pending = true;
            self.established(now);
            return;
        }

        // PAWS (RFC 7323 section 5.3).
        if self.ts_ok && !f.rst {
            if let Some((tsval, _)) = seg.options.timestamp {
                if (tsval.wrapping_sub(self.ts_recent) as i32) < 0 {
                    self.counters.paws_drops += 1;
                    self.ack_unacceptable(now, seg);
                    return;
                }
            }
        }

        // SYN in a synchronized state, whatever its sequence number (RFC 5961 4.2).
        if f.syn && !f.rst {
            self.challenge_ack(now);
            return;
        }

        // Sequence acceptability (RFC 9293 table in 3.10.7.4).
        let len = seg.seg_len();
        let wnd = self.rcv_wnd;
        let win_end = rcv_nxt + wnd;
        let acceptable = match (len, wnd) {
            (0, 0) => seg.seq == rcv_nxt,
            (0, _) => seg.seq.in_range(rcv_nxt, win_end),
            (_, 0) => false,
            (_, _) => {
                seg.seq.in_range(rcv_nxt, win_end)
                    || (seg.seq + (len - 1)).in_range(rcv_nxt, win_end)
            }
        };
        if !acceptable {
            self.counters.out_of_window += 1;
            if !f.rst {
                self.ack_unacceptable(now, seg);
            }
            if self.state == TcpState::TimeWait && f.fin {
                // A retransmitted FIN: re-ACK and restart the 2 * MSL wait.
                self.enter_time_wait(now);
            }
            return;
        }

        // RST (RFC 5961 section 3.2). In TIME_WAIT it is ignored (RFC 1337: no
        // TIME_WAIT assassination); the 2 * MSL wait runs out on its own.
        if f.rst && self.state == TcpState::TimeWait {
            return;
        }
        if f.rst {
            if seg.seq == rcv_nxt {
                self.enter_closed(TcpEvent::Reset);
            } else {
                self.challenge_ack(now);
            }
            return;
        }

        if !f.ack {
            return;
        }

        self.arm_keepalive(now);

        // Whether this segment acknowledges something new (SYN, data or FIN).
        let una_before = (self.state, self.snd_una, self.fin_acked);
        if self.state == TcpState::SynReceived {
            if seg.ack != self.iss + 1 {
                self.rst_pending = Some(seg.ack);
                return;
            }
            self.syn_pending = false;
            self.snd_wnd = u64::from(seg.window) << self.snd_wscale;
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            if self.syn_retries == 0 {
                self.rtt.sample(now.saturating_since(self.last_send));
            }
            self.established(now);
        } else if !self.process_ack(now, seg) {
            return;
        }

        if self.state == TcpState::Closed || self.state == TcpState::TimeWait && !f.fin {
            return;
        }

        // Timestamp to echo (RFC 7323 section 4.3), taken only from a segment that
        // carries sequence space or acknowledges something new. A duplicate ACK does
        // neither: anyone who can guess a sequence number in the window could otherwise
        // forge one with a TSval far ahead, after which PAWS would drop every real
        // segment of the peer.
        let advanced = una_before != (self.state, self.snd_una, self.fin_acked);
        if self.ts_ok && (seg.seg_len() > 0 || advanced) {
            self.take_ts_recent(seg);
        }

        let data_state = matches!(
            self.state,
            TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2
        );
        let place = if !data_state {
            RxPlace::Incomplete
        } else if !seg.payload.is_empty() {
            self.process_data(now, seg, sink)
        } else {
            // No payload: where the sequence number (of a FIN) sits.
            let diff = seg.seq.diff(self.rcv_seq_of(self.rcv_nxt));
            match diff {
                0 => RxPlace::End,
                d if d > 0 => RxPlace::HeldTo(self.rcv_nxt + d as u64),
                _ => RxPlace::Incomplete,
            }
        };

        if f.fin {
            self.process_fin(now, seg, place);
        }
        if data_state {
            self.take_held_fin(now);
        }
    }

    /// TS.Recent from `seg`'s timestamp if it is not older and `seg` starts at or below
    /// the last acknowledgment sent (RFC 7323 section 4.3).
    #[inline]
    fn take_ts_recent(&mut self, seg: &TcpSegment<'_>) {
        if let Some((tsval, _)) = seg.options.timestamp {
            if seg.seq.le(self.last_ack_sent) && (tsval.wrapping_sub(self.ts_recent) as i32) >= 0 {
                self.ts_recent = tsval;
            }
        }
    }

    /// A FIN held out of order is taken once every byte before it was delivered.
    #[inline]
    fn take_held_fin(&mut self, now: Instant) {
        if !self.fin_received && self.ooo.fin() == Some(self.rcv_nxt) {
            self.take_fin(now);
        }
    }

    /// ACK processing in synchronized states. Returns false if the segment is dropped.
    fn process_ack(&mut self, now: Instant, seg: &TcpSegment<'_>) -> bool {
        let una = self.snd_una_seq();
        let max = self.snd_max_seq();
        if seg.ack.gt(max) {
            // Acknowledges something never sent: ACK and drop (RFC 9293, RFC 5961 5.2).
            self.ack_unacceptable(now, seg);
            return false;
        }
        let floor = una - (self.max_snd_wnd.min(1 << 30) as u32);
        if seg.ack.lt(floor) {
            self.challenge_ack(now);
            return false;
        }

        let adv = seg.ack.diff(una);
        let mut fin_now_acked = false;
        if adv > 0 {
            let mut data_acked = adv as u64;
            if let Some(f) = self.fin_off {
                if seg.ack == self.seq_of(f) + 1 {
                    data_acked -= 1;
                    fin_now_acked = !self.fin_acked;
                    self.fin_acked = true;
                }
            }
            self.on_new_ack(now, seg, data_acked);
        } else if adv == 0 {
            if self.sack_ok {
                self.take_sack(seg);
            }
            let outstanding = self.snd_max > self.snd_una;
            let wnd = u64::from(seg.window) << self.snd_wscale;
            if outstanding && seg.payload.is_empty() && !seg.flags.fin && wnd == self.snd_wnd {
                self.dupacks = self.dupacks.saturating_add(1);
                self.counters.dup_acks += 1;
                self.maybe_enter_recovery();
            } else if outstanding
                && self.sack_ok
                && seg.options.sack_blocks.iter().any(Option::is_some)
            {
                // RFC 6675 (section 2) counts an ACK with SACK blocks as a duplicate
                // even when it carries data or a new window: with data flowing both
                // ways the peer's SACKs ride on its data, and recovery that waited for
                // pure duplicate ACKs would wait for the retransmission timeout.
                self.maybe_enter_recovery();
            }
        }

        // Window update (RFC 9293 3.10.7.4, SND.WL1/WL2 rule), from a segment that does
        // not start beyond RCV.NXT: one held out of order is not yet processed as far as
        // its window goes (RFC 9293 3.10.7.4 lets segments with higher sequence numbers
        // wait). Otherwise a forged in-window segment with a future sequence number and
        // a zero window would set SND.WL1 ahead of everything the peer really sends, and
        // no later window update could ever pass the rule: the send side would probe a
        // closed window forever (engine_rx fuzz finding). Its ACK still counts.
        if adv >= 0 {
            self.update_send_window(seg);
        }

        if fin_now_acked {
            match self.state {
                TcpState::FinWait1 => self.state = TcpState::FinWait2,
                TcpState::Closing => self.enter_time_wait(now),
                TcpState::LastAck => {
                    self.enter_closed(TcpEvent::Closed);
                    return false;
                }
                _ => {}
            }
        }
        true
    }

    /// The send window from a segment that acknowledges nothing older than `snd.una`,
    /// by the SND.WL1/WL2 rule, if it does not start beyond RCV.NXT (see above).
    #[inline]
    fn update_send_window(&mut self, seg: &TcpSegment<'_>) {
        let newer =
            self.snd_wl1.lt(seg.seq) || (self.snd_wl1 == seg.seq && self.snd_wl2.le(seg.ack));
        let in_order = !seg.seq.gt(self.rcv_nxt_seq());
        if newer && in_order {
            let wnd = u64::from(seg.window) << self.snd_wscale;
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            if wnd > 0 {
                self.timers.stop(Timer::Persist);
                self.persist_backoff = 0;
            }
        }
    }

    /// `snd.una` advanced by `data_acked` bytes.
    fn on_new_ack(&mut self, now: Instant, seg: &TcpSegment<'_>, data_acked: u64) {
        let new_una = (self.snd_una + data_acked).min(self.snd_max);
        let acked = new_una - self.snd_una;
        self.undo_spurious_rto(seg);
        self.snd_una = new_una;
        if self.snd_nxt < new_una {
            self.snd_nxt = new_una;
        }
        self.scoreboard.advance(new_una);
        self.segmap.release(new_una, self.snd_max);
        if self.sack_ok {
            self.take_sack(seg);
        }

        // RTT sample: timestamp echo, else the timed segment (Karn: never a retransmission).
        let mut sampled = false;
        if self.ts_ok {
            if let Some((_, tsecr)) = seg.options.timestamp {
                let ticks = self.ts_now(now).wrapping_sub(tsecr);
                let rtt =
                    Duration::from_micros(u64::from(ticks).saturating_mul(self.cfg.ts_tick_us));
                // An echo from the future or older than the largest RTO is no sample.
                if tsecr != 0
                    && (ticks as i32) >= 0
                    && rtt <= Duration::from_millis(self.cfg.rto_ms_max)
                {
                    self.rtt.sample(rtt);
                    sampled = true;
                }
            }
        }
        if let Some((off, sent)) = self.rtt_probe {
            if off < new_una {
                if !sampled {
                    self.rtt.sample(now.saturating_since(sent));
                }
                self.rtt_probe = None;
            }
        }
        self.rtt.reset_backoff();
        self.rto_retries = 0;

        if self.in_recovery {
            if new_una >= self.recover {
                // Full acknowledgment: leave recovery (RFC 6582 3.2 step 3, RFC 6675).
                self.in_recovery = false;
                self.dupacks = 0;
                self.high_rxt = new_una;
            } else {
                // Partial acknowledgment.
                if !self.sack_ok {
                    // NewReno: retransmit the next segment at once.
                    self.high_rxt = new_una;
                    self.lost_end = self.segmap.end_of(new_una, self.snd_max);
                    self.rxt_force = true;
                    self.dupacks = 0;
                }
                self.high_rxt = self.high_rxt.max(new_una);
            }
        } else {
            self.dupacks = 0;
            let mss = self.eff_mss();
            self.cc.on_ack(now, acked, mss, self.rtt.srtt());
        }

        if self.has_outstanding() {
            self.arm_rto(now);
        } else {
            self.timers.stop(Timer::Rto);
        }
        if self.sack_ok && self.in_recovery {
            self.lost_end = self.lost_end.max(self.scoreboard.highest().unwrap_or(0));
        }
        self.maybe_enter_recovery();
    }

    /// The first ACK of new data after a retransmission timeout: if its timestamp echo
    /// is older than the timeout, it acknowledges an original transmission, so the
    /// timeout was spurious (RFC 3522, e.g. the peer or the path stalled without losing
    /// anything). Then the congestion state is restored and sending resumes after the
    /// highest sequence sent instead of going back over data the peer has (RFC 4015).
    fn undo_spurious_rto(&mut self, seg: &TcpSegment<'_>) {
        let Some(undo) = self.rto_undo.take() else {
            return;
        };
        let Some((_, tsecr)) = seg.options.timestamp else {
            return;
        };
        if tsecr == 0 || (tsecr.wrapping_sub(undo.tsval) as i32) >= 0 {
            return;
        }
        self.counters.spurious_rtos += 1;
        self.cc = undo.cc;
        self.snd_nxt = self.snd_max;
        if self.fin_off.is_some() {
            // The FIN went with the originals; only a real loss resends it.
            self.fin_pending = false;
        }
    }

    /// Folds the segment's SACK blocks into the scoreboard (validated against what was
    /// sent, RFC 2018 / RFC 6675).
    ///
    /// Inlined: most segments carry no block and leave at the first test.
    #[inline(always)]
    fn take_sack(&mut self, seg: &TcpSegment<'_>) {
        if !self.in_recovery && seg.options.sack_blocks.iter().all(Option::is_none) {
            return;
        }
        self.take_sack_blocks(seg);
    }

    fn take_sack_blocks(&mut self, seg: &TcpSegment<'_>) {
        let una = self.seq_of(self.snd_una);
        let max = self.seq_of(self.snd_max);
        for (l, r) in seg.options.sack_blocks.iter().flatten() {
            if l.lt(*r) && l.gt(una) && r.le(max) {
                let lo = self.snd_una + l.diff(una) as u64;
                let hi = self.snd_una + r.diff(una) as u64;
                self.scoreboard.add(lo, hi);
            }
        }
        if self.in_recovery {
            self.lost_end = self.lost_end.max(self.scoreboard.highest().unwrap_or(0));
        }
    }

    /// Enters fast retransmit / recovery on three duplicate ACKs or enough SACKed data
    /// above `snd.una` (RFC 5681, RFC 6675 IsLost, RFC 6582 `recover` guard).
    fn maybe_enter_recovery(&mut self) {
        if self.in_recovery || self.snd_max <= self.snd_una || self.snd_una < self.recover {
            return;
        }
        let mss = self.eff_mss() as u64;
        let sack_lost = self.sack_ok && self.scoreboard.sacked_above(self.snd_una) > 2 * mss;
        if self.dupacks < 3 && !sack_lost {
            return;
        }
        let flight = self.pipe();
        self.cc.on_congestion_event(flight, mss as usize);
        self.in_recovery = true;
        self.recover = self.snd_max;
        self.high_rxt = self.snd_una;
        // At least the first unacknowledged segment is lost; with SACK, every hole below
        // the highest SACKed byte.
        let first_seg_end = self.segmap.end_of(self.snd_una, self.snd_max);
        self.lost_end = if self.sack_ok {
            self.scoreboard.highest().unwrap_or(0).max(first_seg_end)
        } else {
            first_seg_end
        };
        self.rxt_force = true;
        self.counters.fast_retransmits += 1;
        self.rtt_probe = None;
    }
}
