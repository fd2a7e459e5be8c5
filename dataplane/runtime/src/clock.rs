//! Time for the core loop: a monotonic clock read without a system call in production
//! (`std::time::Instant` is served by the vDSO) and a manual clock for tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iwarp_types::{Duration, Instant};

/// Where a core gets `now`.
pub trait Clock {
    /// The current time (nanoseconds; monotonic).
    fn now(&self) -> Instant;
}

/// The production clock: nanoseconds since the Unix epoch as of construction, advanced by
/// the monotonic `std::time::Instant` (so capture timestamps are wall-clock times and
/// time never goes backwards). The wall clock is read once, at construction.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    start: std::time::Instant,
    base_ns: u64,
}

impl SystemClock {
    /// A clock starting at the current wall-clock time.
    pub fn new() -> SystemClock {
        let base_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2));
        SystemClock {
            start: std::time::Instant::now(),
            base_ns,
        }
    }
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        let ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX / 2);
        Instant(self.base_ns.saturating_add(ns))
    }
}

/// A clock that moves only when told to; clones share the time (tests, benches).
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at `start`.
    pub fn new(start: Instant) -> ManualClock {
        ManualClock {
            ns: Arc::new(AtomicU64::new(start.as_nanos())),
        }
    }

    /// The clock's time (also through [`Clock::now`]).
    pub fn now(&self) -> Instant {
        Instant(self.ns.load(Ordering::Relaxed))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.ns.fetch_add(d.as_nanos(), Ordering::Relaxed);
    }

    /// Sets the clock to `t` if that is later than its time.
    pub fn advance_to(&self, t: Instant) {
        self.ns.fetch_max(t.as_nanos(), Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        ManualClock::now(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_monotonic_and_near_wall_time() {
        let c = SystemClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        // After 2020.
        assert!(a.as_nanos() > 1_577_836_800 * 1_000_000_000);
    }

    #[test]
    fn manual_clock_moves_when_told() {
        let c = ManualClock::new(Instant(5));
        let d = c.clone();
        c.advance(Duration::from_nanos(10));
        assert_eq!(d.now(), Instant(15));
        d.advance_to(Instant(12));
        assert_eq!(c.now(), Instant(15));
        d.advance_to(Instant(100));
        assert_eq!(c.now(), Instant(100));
    }
}
