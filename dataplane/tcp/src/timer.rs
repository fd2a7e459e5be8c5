//! Timers as data: one deadline slot per timer kind.

use iwarp_types::Instant;

/// The timers of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Retransmission (data, SYN, FIN).
    Rto = 0,
    /// Delayed acknowledgment.
    DelayedAck = 1,
    /// Zero-window probe.
    Persist = 2,
    /// Keepalive (idle, then between probes).
    Keepalive = 3,
    /// TIME_WAIT expiry (2 * MSL).
    TimeWait = 4,
    /// Release of empty loss-recovery storage (out-of-order buffer, scoreboard, segment
    /// map) after `buffer_release_ms`.
    Release = 5,
}

const TIMER_COUNT: usize = 6;

/// Deadlines indexed by [`Timer`].
#[derive(Clone, Debug, Default)]
pub struct TimerTable {
    slots: [Option<Instant>; TIMER_COUNT],
}

impl TimerTable {
    /// Arms `timer` for `at`.
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.slots[timer as usize] = Some(at);
    }

    /// Disarms `timer`.
    pub fn stop(&mut self, timer: Timer) {
        self.slots[timer as usize] = None;
    }

    /// The deadline of `timer`.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.slots[timer as usize]
    }

    /// Whether `timer` is armed.
    pub fn is_set(&self, timer: Timer) -> bool {
        self.get(timer).is_some()
    }

    /// Disarms every timer.
    pub fn stop_all(&mut self) {
        self.slots = [None; TIMER_COUNT];
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.slots.iter().flatten().min().copied()
    }

    /// Disarms and returns `timer` if it expired at `now`.
    pub fn take_expired(&mut self, timer: Timer, now: Instant) -> bool {
        match self.get(timer) {
            Some(at) if at <= now => {
                self.stop(timer);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_the_earliest_and_expiry_disarms() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Rto, Instant(50));
        t.set(Timer::DelayedAck, Instant(20));
        assert_eq!(t.next(), Some(Instant(20)));
        assert!(!t.take_expired(Timer::Rto, Instant(49)));
        assert!(t.take_expired(Timer::DelayedAck, Instant(20)));
        assert_eq!(t.next(), Some(Instant(50)));
        t.stop_all();
        assert_eq!(t.next(), None);
    }
}
