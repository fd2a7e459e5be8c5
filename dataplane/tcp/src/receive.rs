//! The receive path of a synchronized connection: payload placed in order or held out
//! of order, delayed ACKs, and the peer's FIN (taken in order, or remembered while data
//! before it is missing).

use iwarp_types::{Duration, Instant};

use crate::conn::{RxSink, TcpConn, TcpEvent, TcpState};
use crate::ooo::OooInsert;
use crate::segment::TcpSegment;
use crate::seq::SeqNumber;
use crate::timer::Timer;

/// Where the end of a received segment stands after its payload was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxPlace {
    /// Every byte of it is delivered and its end is `rcv.nxt`: a FIN on it is taken now.
    End,
    /// All of it is held out of order, ending at this stream offset: a FIN on it waits.
    HeldTo(u64),
    /// Part of it was dropped, refused or trimmed, or it was not placed at all.
    Incomplete,
}

impl TcpConn {
    /// Places payload: in order → `sink`, else the out-of-order buffer. Returns where the
    /// segment's end now is (so whether a FIN on it can be taken or kept).
    pub(crate) fn process_data(
        &mut self,
        now: Instant,
        seg: &TcpSegment<'_>,
        sink: &mut impl RxSink,
    ) -> RxPlace {
        let rcv_nxt_seq = self.rcv_seq_of(self.rcv_nxt);
        let diff = seg.seq.diff(rcv_nxt_seq);
        // Trim what lies before rcv.nxt and beyond the window.
        let (offset, mut data) = if diff < 0 {
            let skip = diff.unsigned_abs() as usize;
            (self.rcv_nxt, seg.payload.get(skip..).unwrap_or(&[]))
        } else {
            (self.rcv_nxt + diff as u64, seg.payload)
        };
        let win_end = self.rcv_nxt + u64::from(self.rcv_wnd);
        let room = win_end.saturating_sub(offset) as usize;
        let trimmed = data.len() > room;
        if trimmed {
            data = &data[..room];
        }
        if data.is_empty() {
            // Duplicate: the peer may have missed our ACK.
            self.ack_pending = true;
            let end = diff <= 0 && !trimmed && seg.seq + seg.payload.len() as u32 == rcv_nxt_seq;
            return if end {
                RxPlace::End
            } else {
                RxPlace::Incomplete
            };
        }

        if offset > self.rcv_nxt {
            // Duplicate ACK with SACK information at once (RFC 5681 4.2).
            self.ack_pending = true;
            return match self.ooo.insert(self.rcv_nxt, offset, data) {
                OooInsert::Stored => {
                    self.counters.ooo_segments += 1;
                    if trimmed {
                        RxPlace::Incomplete
                    } else {
                        RxPlace::HeldTo(offset + data.len() as u64)
                    }
                }
                OooInsert::Dropped => {
                    self.counters.ooo_drops += 1;
                    RxPlace::Incomplete
                }
            };
        }

        let had_ooo = !self.ooo.is_empty();
        let consumed = sink.deliver(offset, data).min(data.len());
        self.rcv_nxt += consumed as u64;
        let mut complete = consumed == data.len() && !trimmed;
        if consumed < data.len() {
            self.counters.rx_refused_bytes += (data.len() - consumed) as u64;
        } else {
            complete &= self.replay_ooo(sink);
        }
        self.ooo.advance(self.rcv_nxt);
        if had_ooo {
            self.ack_pending = true;
        } else {
            self.schedule_ack(now);
        }
        if complete && self.ooo.is_empty() {
            RxPlace::End
        } else {
            RxPlace::Incomplete
        }
    }

    /// Replays buffered data now in order. Returns false if the sink refused some.
    fn replay_ooo(&mut self, sink: &mut impl RxSink) -> bool {
        // Each round consumes one whole range, so the loop is bounded by the range count.
        for _ in 0..=self.cfg.ooo_max_ranges {
            self.ooo.advance(self.rcv_nxt);
            let Some((a, b)) = self.ooo.ready(self.rcv_nxt) else {
                return true;
            };
            for part in [a, b] {
                if part.is_empty() {
                    continue;
                }
                let n = sink.deliver(self.rcv_nxt, part).min(part.len());
                self.rcv_nxt += n as u64;
                if n < part.len() {
                    self.counters.rx_refused_bytes += (part.len() - n) as u64;
                    return false;
                }
            }
        }
        true
    }

    /// Delayed ACK: every second segment at once, else after the timer.
    fn schedule_ack(&mut self, now: Instant) {
        self.delack_segs += 1;
        if self.delack_segs >= 2 || self.cfg.delayed_ack_us == 0 {
            self.ack_pending = true;
        } else if !self.timers.is_set(Timer::DelayedAck) {
            self.timers.set(
                Timer::DelayedAck,
                now + Duration::from_micros(self.cfg.delayed_ack_us),
            );
        }
    }

    /// The peer's FIN on a segment whose end is at `place`: taken if every byte before it
    /// was delivered, remembered if the segment is held out of order (RFC 9293 asks to
    /// process a FIN once the data before it is in), else left for the retransmission.
    pub(crate) fn process_fin(&mut self, now: Instant, seg: &TcpSegment<'_>, place: RxPlace) {
        let fin_seq: SeqNumber = seg.seq + seg.payload.len() as u32;
        if self.fin_received {
            // Retransmitted FIN: ACK it again.
            self.ack_pending = true;
            if self.state == TcpState::TimeWait {
                self.enter_time_wait(now);
            }
            return;
        }
        match place {
            RxPlace::End if fin_seq == self.rcv_seq_of(self.rcv_nxt) => self.take_fin(now),
            RxPlace::HeldTo(at) => {
                self.ooo.set_fin(at);
                self.counters.ooo_fins += 1;
                self.ack_pending = true;
            }
            _ => {}
        }
    }

    /// Every byte before the peer's FIN was delivered: the FIN is taken.
    pub(crate) fn take_fin(&mut self, now: Instant) {
        // Nothing follows a FIN: whatever is held beyond it is not the peer's.
        self.ooo.clear();
        self.fin_received = true;
        self.ack_pending = true;
        self.timers.stop(Timer::DelayedAck);
        self.push_event(TcpEvent::PeerClosed);
        match self.state {
            TcpState::Established | TcpState::SynReceived => self.state = TcpState::CloseWait,
            TcpState::FinWait1 => {
                if self.fin_acked {
                    self.enter_time_wait(now);
                } else {
                    self.state = TcpState::Closing;
                }
            }
            TcpState::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }
}
