//! Path MTU decrease after the handshake (RFC 1191 section 6.5; the caller validates the
//! ICMP message, RFC 5927).

use iwarp_types::Instant;

use crate::conn::{TcpConn, MIN_EFF_MSS, TS_OPTION_LEN};

impl TcpConn {
    /// The path MTU shrank (an ICMP "fragmentation needed" the caller validated against
    /// this connection, RFC 1191 / RFC 5927, or a lower interface MTU): segments carry at
    /// most `mss_bytes` (counted as the MSS option counts: the path MTU less the 40 bytes
    /// of fixed IPv4 and TCP headers; TCP options come out of it). Only ever lowers the
    /// effective MSS ([`TcpConn::eff_mss`]), never below the minimum.
    /// New segments are cut to it; data in flight is sent again at once from `snd.una`
    /// in segments that fit (original boundaries kept, records split where they no
    /// longer fit). That is not a congestion signal: the window is not reduced.
    pub fn set_path_mss(&mut self, now: Instant, mss_bytes: u16) {
        let floor = (MIN_EFF_MSS + TS_OPTION_LEN) as u16;
        let before = self.eff_mss();
        self.path_mss = self.path_mss.min(mss_bytes.max(floor));
        if self.eff_mss() >= before || !self.state.is_synchronized() {
            return;
        }
        if self.snd_max > self.snd_una {
            // The segments in flight were too big for the path: resend them now.
            self.snd_nxt = self.snd_una;
            self.in_recovery = false;
            self.dupacks = 0;
            self.rxt_force = false;
            // The duplicate ACKs the resend provokes start no fast retransmit.
            self.recover = self.snd_max;
            self.rtt_probe = None;
            if self.fin_off.is_some() && !self.fin_acked {
                self.fin_pending = true;
            }
            self.arm_rto(now);
        }
    }
}
