//! Answers to unacceptable segments, bounded so that no exchange of ACKs can loop.
//!
//! RFC 9293 answers an unacceptable segment with an ACK, RFC 7323 a PAWS-failed one, RFC
//! 5961 sends challenge ACKs. Two stacks whose views of each other disagree (a forged
//! segment moved one side's TS.Recent or RCV.NXT) could then find each other's ACKs
//! unacceptable and answer them forever. What makes that impossible here:
//!
//! - a segment occupying no sequence space (a bare ACK, perhaps itself an answer) is
//!   answered at most once per `invalid_ack_interval_ms` per connection, challenge ACKs
//!   included (Linux `tcp_oow_rate_limited`, `tcp_invalid_ratelimit`); a segment with data
//!   or FIN is answered while the connection's per-second budget of answers lasts
//!   (`challenge_acks_per_s`, shared with the challenge ACKs): the answer occupies no
//!   sequence space and cannot itself be answered more than once per interval, and the
//!   budget keeps a flood of forged data segments (guessed sequence numbers, one ACK out
//!   per frame in) from turning the connection into an amplifier, while a peer that
//!   resends data we hold (its ACK lost) still gets answers: a window's worth of
//!   segments is far below the budget;
//! - our pure ACKs carry the highest sequence number sent (`output.rs`), not the
//!   go-back-N resend point, so they never sit below the peer's RCV.NXT, where our own
//!   stack would find them unacceptable;
//! - a duplicate ACK (no data, no FIN, nothing newly acknowledged) never moves TS.Recent,
//!   so a forged one cannot make PAWS drop the peer's real segments.
//!
//! Every other segment that makes us transmit either carries new sequence space or
//! acknowledges some (bounded by the data), or is a RST, which is never answered with
//! anything but a (limited) challenge ACK.

use iwarp_types::{Duration, Instant};

use crate::conn::TcpConn;
use crate::segment::TcpSegment;

impl TcpConn {
    /// Sends a challenge ACK unless the per-second budget is spent (RFC 5961 section 7)
    /// or an ACK answered an unacceptable segment less than `invalid_ack_interval_ms` ago
    /// (as Linux: a challenge ACK is itself such an answer).
    pub(crate) fn challenge_ack(&mut self, now: Instant) {
        if self.answers.has_room(now, self.cfg.challenge_acks_per_s)
            && self.invalid_ack_allowed(now)
        {
            self.answers.take();
            self.counters.challenge_acks += 1;
            self.ack_pending = true;
        }
    }

    /// Answers an unacceptable segment (out of window, PAWS-failed, acknowledging data
    /// never sent) with an ACK, as RFC 9293 and RFC 7323 ask, but without ever feeding an
    /// endless exchange or a flood: a segment occupying sequence space (data, FIN) is
    /// answered while the second's budget lasts (our answer occupies none, so it cannot
    /// be the start of a loop, and the peer may need it after losing our ACK), while a
    /// segment occupying none (an ACK, maybe itself an answer to ours) is answered at most
    /// once per `invalid_ack_interval_ms` (Linux `tcp_oow_rate_limited`).
    pub(crate) fn ack_unacceptable(&mut self, now: Instant, seg: &TcpSegment<'_>) {
        if seg.seg_len() > 0 {
            if self.answers.try_take(now, self.cfg.challenge_acks_per_s) {
                self.ack_pending = true;
            } else {
                self.counters.invalid_acks_suppressed += 1;
            }
        } else if self.invalid_ack_allowed(now) {
            self.ack_pending = true;
        }
    }

    /// Whether an ACK may answer an unacceptable segment now (and if so, records it).
    fn invalid_ack_allowed(&mut self, now: Instant) -> bool {
        let interval = Duration::from_millis(self.cfg.invalid_ack_interval_ms);
        match self.last_invalid_ack {
            Some(t) if now.saturating_since(t) < interval => {
                self.counters.invalid_acks_suppressed += 1;
                false
            }
            _ => {
                self.last_invalid_ack = Some(now);
                true
            }
        }
    }
}
