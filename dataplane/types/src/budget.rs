//! A budget of events per fixed one-second window: what bounds the answers a stack sends
//! to what it did not ask for (RSTs to segments for no connection, RFC 5961 challenge
//! ACKs, ACKs to unacceptable data), so that a flood of forged frames cannot turn it into
//! an amplifier.

use crate::{Duration, Instant};

/// Events taken in the current one-second window. The limit is the caller's (a
/// configuration value), so a budget is two words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SecondBudget {
    window_start: Option<Instant>,
    used: u32,
}

impl SecondBudget {
    /// A budget whose first window opens at its first use.
    pub const fn new() -> SecondBudget {
        SecondBudget {
            window_start: None,
            used: 0,
        }
    }

    /// Whether one more event fits the window of `now` under `per_s` (a new window opens
    /// once a second has passed since the current one opened; a clock that steps back
    /// stays in the current one). Takes nothing.
    pub fn has_room(&mut self, now: Instant, per_s: u32) -> bool {
        let fresh = match self.window_start {
            Some(start) => now.saturating_since(start) >= Duration::from_secs(1),
            None => true,
        };
        if fresh {
            self.window_start = Some(now);
            self.used = 0;
        }
        self.used < per_s
    }

    /// Takes one event from the window (after [`SecondBudget::has_room`] said yes).
    pub fn take(&mut self) {
        self.used = self.used.saturating_add(1);
    }

    /// [`SecondBudget::has_room`], and if so [`SecondBudget::take`].
    pub fn try_take(&mut self, now: Instant, per_s: u32) -> bool {
        let room = self.has_room(now, per_s);
        if room {
            self.take();
        }
        room
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
        let mut b = SecondBudget::new();
        let first: Vec<bool> = (0..5).map(|i| b.try_take(at_ms(100 + i), 3)).collect();
        assert_eq!(first, [true, true, true, false, false]);
        assert!(!b.try_take(at_ms(1_099), 3), "the window opened at 100 ms");
        assert!(b.try_take(at_ms(1_100), 3));
        assert!(b.try_take(at_ms(1_101), 3));
        assert!(b.try_take(at_ms(1_102), 3));
        assert!(!b.try_take(at_ms(1_103), 3));
    }

    #[test]
    fn a_clock_that_steps_back_never_refills_early() {
        let mut b = SecondBudget::new();
        assert!(b.try_take(at_ms(5_000), 1));
        assert!(
            !b.try_take(at_ms(4_000), 1),
            "saturating_since: still the same window"
        );
        assert!(b.try_take(at_ms(6_000), 1));
    }

    #[test]
    fn has_room_takes_nothing_and_a_zero_budget_has_none() {
        let mut b = SecondBudget::new();
        assert!(b.has_room(at_ms(0), 1));
        assert!(b.has_room(at_ms(1), 1), "asking took nothing");
        b.take();
        assert!(!b.has_room(at_ms(2), 1));
        assert!(!SecondBudget::new().has_room(at_ms(0), 0));
    }
}
