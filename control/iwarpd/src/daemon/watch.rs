//! The control loop's watch of the capture drop counters.

use std::time::{Duration as StdDuration, Instant as StdInstant};

use tracing::warn;

use super::CoreHandle;

/// How often the capture drop counters are read while capturing.
const CAPTURE_POLL: StdDuration = StdDuration::from_secs(1);

/// Reads the cores' `capture_drops` at most every [`CAPTURE_POLL`] (the counters the
/// cores publish; nothing on a core) and logs a warning when it grew.
pub(super) struct CaptureWatch {
    next: StdInstant,
    reported: u64,
}

impl CaptureWatch {
    pub(super) fn new() -> CaptureWatch {
        CaptureWatch {
            next: StdInstant::now() + CAPTURE_POLL,
            reported: 0,
        }
    }

    pub(super) fn poll(&mut self, cores: &[CoreHandle]) {
        let now = StdInstant::now();
        if now < self.next {
            return;
        }
        self.next = now + CAPTURE_POLL;
        let drops = cores
            .iter()
            .map(|c| c.stats.snapshot().core.capture_drops)
            .sum();
        self.report(drops);
    }

    /// Logs the drops past those reported (`total`: the sum over the cores).
    pub(super) fn report(&mut self, total: u64) {
        if total > self.reported {
            let new = total - self.reported;
            self.reported = total;
            warn!(
                capture_drops = total,
                new,
                "capture: {new} frame(s) not captured, the ring was full ({total} in all; capture.ring_slots)"
            );
        }
    }
}
