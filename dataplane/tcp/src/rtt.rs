//! Retransmission timeout computation (RFC 6298) with exponential backoff.

use iwarp_types::Duration;

/// Smoothed RTT, RTT variance and the current RTO.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    rto_ns: u64,
    min_ns: u64,
    max_ns: u64,
    backoff: u32,
}

impl RttEstimator {
    /// Starts with RTO = `initial_ms`, clamped to `[min_ms, max_ms]`.
    pub fn new(initial_ms: u64, min_ms: u64, max_ms: u64) -> RttEstimator {
        let min_ns = Duration::from_millis(min_ms).as_nanos();
        let max_ns = Duration::from_millis(max_ms).as_nanos().max(min_ns);
        let rto_ns = Duration::from_millis(initial_ms)
            .as_nanos()
            .clamp(min_ns, max_ns);
        RttEstimator {
            srtt_ns: None,
            rttvar_ns: 0,
            rto_ns,
            min_ns,
            max_ns,
            backoff: 0,
        }
    }

    /// Takes one RTT sample (never from a retransmitted segment: Karn). Resets backoff.
    pub fn sample(&mut self, rtt: Duration) {
        let r = rtt.as_nanos();
        match self.srtt_ns {
            None => {
                self.srtt_ns = Some(r);
                self.rttvar_ns = r / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(r);
                self.rttvar_ns = self.rttvar_ns - self.rttvar_ns / 4 + err / 4;
                self.srtt_ns = Some(srtt - srtt / 8 + r / 8);
            }
        }
        let srtt = self.srtt_ns.unwrap_or(r);
        // G (clock granularity) is 1 ns here; K = 4.
        let rto = srtt.saturating_add(self.rttvar_ns.saturating_mul(4).max(1));
        self.rto_ns = rto.clamp(self.min_ns, self.max_ns);
        self.backoff = 0;
    }

    /// Doubles the RTO after a timeout (RFC 6298 5.5), up to the maximum.
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// Clears backoff after forward progress without an RTT sample.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// The current RTO including backoff.
    pub fn rto(&self) -> Duration {
        let shift = self.backoff.min(32);
        let rto = self.rto_ns.checked_shl(shift).unwrap_or(u64::MAX);
        let rto = if shift > 0 && rto >> shift != self.rto_ns {
            u64::MAX
        } else {
            rto
        };
        Duration(rto.min(self.max_ns))
    }

    /// The smoothed RTT, once sampled.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_ns.map(Duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_first_and_later_samples() {
        let mut e = RttEstimator::new(1_000, 1, 60_000);
        assert_eq!(e.rto(), Duration::from_millis(1_000));
        e.sample(Duration::from_millis(100));
        // SRTT = 100, RTTVAR = 50, RTO = 100 + 200 = 300 ms.
        assert_eq!(e.rto(), Duration::from_millis(300));
        e.sample(Duration::from_millis(100));
        // RTTVAR = 3/4 * 50 = 37.5, SRTT = 100, RTO = 250 ms.
        assert_eq!(e.rto(), Duration::from_micros(250_000));
    }

    #[test]
    fn clamps_and_backs_off_to_max() {
        let mut e = RttEstimator::new(1_000, 200, 5_000);
        e.sample(Duration::from_micros(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
        e.back_off();
        assert_eq!(e.rto(), Duration::from_millis(400));
        for _ in 0..100 {
            e.back_off();
        }
        assert_eq!(e.rto(), Duration::from_millis(5_000));
        e.sample(Duration::from_micros(10));
        assert_eq!(e.rto(), Duration::from_millis(200));
    }
}
