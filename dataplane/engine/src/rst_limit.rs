//! The budget of RSTs that answer segments for no connection.
//!
//! RFC 9293 (3.10.7.1) answers a segment for a closed port or a connection that no longer
//! exists with a RST. Sent for every such frame, a flood of them (SYNs to closed ports,
//! segments forged for dead connections, random ports) turns the core into an amplifier:
//! one frame out per frame in, filling the wire the established connections use. Like
//! FreeBSD's `badport_bandlim` (and the RFC 5961 budget of challenge ACKs), a core sends
//! at most `no_connection_rsts_per_s` such RSTs per second; the segments beyond are
//! dropped all the same (`DropReason::TcpNoConnection`) and counted
//! (`Counters::tcp_rsts_rate_limited`). A genuine peer loses nothing: it retransmits and
//! gets its RST in a later second.

use iwarp_types::{Duration, Instant};

/// A fixed one-second window and the RSTs sent in it.
#[derive(Clone, Debug)]
pub(crate) struct RstLimit {
    per_s: u32,
    window_start: Option<Instant>,
    sent: u32,
}

impl RstLimit {
    pub(crate) fn new(per_s: u32) -> RstLimit {
        RstLimit {
            per_s,
            window_start: None,
            sent: 0,
        }
    }

    /// Whether one more RST may leave at `now` (and if so, takes it from the budget).
    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        let fresh = match self.window_start {
            Some(start) => now.saturating_since(start) >= Duration::from_secs(1),
            None => true,
        };
        if fresh {
            self.window_start = Some(now);
            self.sent = 0;
        }
        if self.sent < self.per_s {
            self.sent += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_ms(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }

    #[test]
    fn a_second_holds_the_budget_and_the_next_second_a_new_one() {
        let mut l = RstLimit::new(3);
        let first: Vec<bool> = (0..5).map(|i| l.allow(at_ms(100 + i))).collect();
        assert_eq!(first, [true, true, true, false, false]);
        assert!(!l.allow(at_ms(1_099)), "the window opened at 100 ms");
        assert!(l.allow(at_ms(1_100)));
        assert!(l.allow(at_ms(1_101)));
        assert!(l.allow(at_ms(1_102)));
        assert!(!l.allow(at_ms(1_103)));
    }

    #[test]
    fn a_clock_that_steps_back_never_refills_early() {
        let mut l = RstLimit::new(1);
        assert!(l.allow(at_ms(5_000)));
        assert!(
            !l.allow(at_ms(4_000)),
            "saturating_since: still the same window"
        );
        assert!(l.allow(at_ms(6_000)));
    }
}
