//! Congestion control: NewReno (RFC 5681, RFC 6582 window rules) and CUBIC (RFC 9438).
//!
//! The loss-recovery machinery (fast retransmit, SACK recovery, RTO) lives in the
//! connection; this module only owns `cwnd` and `ssthresh` and how they react.

use iwarp_types::{Duration, Instant};

use crate::config::Congestion;

/// CUBIC's C (RFC 9438 section 4.2).
const CUBIC_C: f64 = 0.4;
/// CUBIC's multiplicative decrease factor.
const CUBIC_BETA: f64 = 0.7;

#[derive(Clone, Copy, Debug, Default)]
struct CubicState {
    /// Window (segments) before the last reduction.
    w_max: f64,
    /// `w_max` before the previous reduction (fast convergence).
    w_last_max: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch: Option<Instant>,
    /// Time (s) the cubic function takes to return to `w_max`.
    k: f64,
    /// Reno-friendly estimate (segments).
    w_est: f64,
    /// Sub-segment growth carried between ACKs (segments).
    carry: f64,
}

/// Congestion window state.
#[derive(Clone, Debug)]
pub struct CongestionControl {
    algo: Congestion,
    cwnd: u64,
    ssthresh: u64,
    /// NewReno congestion-avoidance byte counter.
    ca_acked: u64,
    cubic: CubicState,
}

impl CongestionControl {
    /// A fresh window of `initial_segments * mss`.
    pub fn new(algo: Congestion, initial_segments: u32, mss: usize) -> CongestionControl {
        let mss = mss.max(1) as u64;
        CongestionControl {
            algo,
            cwnd: u64::from(initial_segments.max(1)) * mss,
            ssthresh: u64::MAX,
            ca_acked: 0,
            cubic: CubicState::default(),
        }
    }

    /// Congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// `acked` new bytes were acknowledged outside loss recovery.
    pub fn on_ack(&mut self, now: Instant, acked: u64, mss: usize, srtt: Option<Duration>) {
        let mss = mss.max(1) as u64;
        if self.cwnd < self.ssthresh {
            // Slow start with appropriate byte counting, L = 2 (RFC 3465).
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * mss));
            return;
        }
        match self.algo {
            Congestion::NewReno => {
                self.ca_acked = self.ca_acked.saturating_add(acked);
                if self.ca_acked >= self.cwnd {
                    self.ca_acked -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(mss);
                }
            }
            Congestion::Cubic => self.cubic_ack(now, acked, mss, srtt),
        }
    }

    fn cubic_ack(&mut self, now: Instant, acked: u64, mss: u64, srtt: Option<Duration>) {
        let mssf = mss as f64;
        let cwnd_seg = self.cwnd as f64 / mssf;
        let c = &mut self.cubic;
        let epoch = match c.epoch {
            Some(e) => e,
            None => {
                c.epoch = Some(now);
                if c.w_max < cwnd_seg {
                    c.w_max = cwnd_seg;
                    c.k = 0.0;
                } else {
                    c.k = ((c.w_max - cwnd_seg) / CUBIC_C).cbrt();
                }
                c.w_est = cwnd_seg;
                now
            }
        };
        let rtt = srtt.map_or(0.0, |d| d.as_nanos() as f64 / 1e9);
        let t = now.saturating_since(epoch).as_nanos() as f64 / 1e9;
        let acked_seg = acked as f64 / mssf;
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        c.w_est += alpha * acked_seg / cwnd_seg.max(1.0);
        let dt = t + rtt - c.k;
        let w_cubic_next = CUBIC_C * dt * dt * dt + c.w_max;
        let target = if w_cubic_next < c.w_est {
            c.w_est
        } else {
            w_cubic_next.clamp(cwnd_seg, 1.5 * cwnd_seg)
        };
        let growth = if target > cwnd_seg {
            (target - cwnd_seg) / cwnd_seg.max(1.0) * acked_seg
        } else {
            0.0
        };
        c.carry += growth;
        if c.carry >= 1.0 / mssf {
            let bytes = (c.carry * mssf) as u64;
            c.carry -= bytes as f64 / mssf;
            self.cwnd = self.cwnd.saturating_add(bytes);
        }
    }

    /// A loss was detected by duplicate ACKs / SACK: reduce once per recovery episode.
    /// `flight` is the data outstanding when the loss was detected.
    pub fn on_congestion_event(&mut self, flight: u64, mss: usize) {
        let mss = mss.max(1) as u64;
        match self.algo {
            Congestion::NewReno => {
                self.ssthresh = (flight / 2).max(2 * mss);
            }
            Congestion::Cubic => {
                let cwnd_seg = self.cwnd as f64 / mss as f64;
                let c = &mut self.cubic;
                c.w_max = if cwnd_seg < c.w_last_max {
                    cwnd_seg * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd_seg
                };
                c.w_last_max = cwnd_seg;
                c.epoch = None;
                c.carry = 0.0;
                self.ssthresh = ((self.cwnd as f64 * CUBIC_BETA) as u64).max(2 * mss);
            }
        }
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    /// A retransmission timeout: window to one segment (RFC 5681 eq. 4, RFC 9438 4.8).
    /// `first` is false for a repeated timeout of the same segment (ssthresh kept).
    pub fn on_rto(&mut self, flight: u64, mss: usize, first: bool) {
        if first {
            self.on_congestion_event(flight, mss);
        }
        self.cwnd = mss.max(1) as u64;
        self.ca_acked = 0;
        self.cubic.epoch = None;
    }

    /// After an idle period longer than an RTO, restart from the initial window
    /// (RFC 5681 section 4.1).
    pub fn on_idle_restart(&mut self, initial: u64) {
        self.cwnd = self.cwnd.min(initial);
        self.cubic.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    #[test]
    fn newreno_slow_start_then_linear_growth_and_halving() {
        let mut cc = CongestionControl::new(Congestion::NewReno, 2, MSS);
        cc.on_ack(Instant(0), 1000, MSS, None);
        assert_eq!(cc.cwnd(), 3000);
        cc.on_congestion_event(8000, MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (4000, 4000));
        for _ in 0..4 {
            cc.on_ack(Instant(0), 1000, MSS, None);
        }
        assert_eq!(cc.cwnd(), 5000);
        cc.on_rto(5000, MSS, true);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1000, 2500));
        cc.on_rto(1000, MSS, false);
        assert_eq!(cc.ssthresh(), 2500);
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows_to_wmax() {
        let mut cc = CongestionControl::new(Congestion::Cubic, 100, MSS);
        cc.on_congestion_event(100_000, MSS);
        assert_eq!(cc.cwnd(), 70_000);
        let mut now = Instant(0);
        let rtt = Duration::from_millis(1);
        // Ack a window per RTT for long enough to pass K = cbrt(30 / 0.4) ~ 4.2 s.
        for _ in 0..6_000 {
            let w = cc.cwnd();
            cc.on_ack(now, w, MSS, Some(rtt));
            now += rtt;
        }
        assert!(cc.cwnd() > 100_000, "cwnd {}", cc.cwnd());
        // Concave then convex: growth is bounded by 1.5x per RTT.
        let before = cc.cwnd();
        cc.on_ack(now, before, MSS, Some(rtt));
        assert!(cc.cwnd() <= before + before / 2 + MSS as u64);
    }

    #[test]
    fn cubic_fast_convergence_lowers_wmax() {
        let mut cc = CongestionControl::new(Congestion::Cubic, 100, MSS);
        cc.on_congestion_event(0, MSS);
        cc.on_congestion_event(0, MSS);
        // Second reduction below the previous W_max: w_max = 70 * 0.85.
        assert!((cc.cubic.w_max - 59.5).abs() < 1e-9);
        assert_eq!(cc.cwnd(), 49_000);
    }
}
