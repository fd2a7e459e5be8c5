//! Nudges: an MPA initiator whose responder has sent nothing since RDMA mode began sends a
//! zero-length RDMA Write now and then (`EngineConfig::initiator_nudge_ms`, at most
//! [`NUDGES_MAX`] times). A Linux siw responder attaches its socket to the QP only after
//! it sent the MPA Reply; an FPDU that arrives in between is acknowledged by TCP and then
//! left unread until more bytes arrive (docs/INTEROP.md, difference 2), so an initiator
//! that sends one READ Request and waits would wait forever. A zero-length Write places
//! nothing and is checked by no one (RFC 5040 5.1, verbs 7.6.3): any RNIC takes it in
//! silence, and a responder in that state reads it together with the FPDU it missed.
//!
//! The price: a responder that never sends an FPDU and closes its socket within the
//! nudge period (at most 85 intervals after RDMA mode began) may find a nudge unread at
//! close, and Linux then resets the connection instead of sending a FIN. A nudge may
//! also cross a responder's FIN (late or lost): our own QP in Closing drops a
//! zero-length Write without calling it a Bad Close (rdma `qp/rx.rs`).

use iwarp_tcp::TcpState;
use iwarp_types::{Duration, Instant};

use crate::config::NUDGES_MAX;
use crate::conn::{Conn, ConnState};
use crate::engine::EngineCore;

impl EngineCore {
    /// The connection's nudge check is due: nudge if the QP has sent FPDUs and received
    /// none, then schedule the next check (4 times as far) or stop.
    pub(crate) fn nudge_check(&mut self, now: Instant, conn: &mut Conn) {
        conn.nudge_at = None;
        let Some(qp) = conn.tx_qp() else {
            return;
        };
        let Some(c) = self.rnic.qp_counters(qp) else {
            return;
        };
        // The responder talks, or the stream is ending (a Terminate, a FIN either way):
        // never again. A nudge that reaches a Linux peer whose socket is already closed
        // (or that closes it with the nudge unread) draws a RST instead of its FIN.
        let over = c.terms_sent > 0 || c.terms_received > 0;
        let open = conn.state == ConnState::Rdma && conn.tcp.state() == TcpState::Established;
        if !open || c.segs_in > 0 || over {
            return;
        }
        conn.nudge_checks += 1;
        if c.segs_out > 0 && self.rnic.qp_queue_nudge(qp).is_ok() {
            self.counters.rdma_nudges_sent += 1;
        }
        if conn.nudge_checks < NUDGES_MAX {
            let base = self.cfg.initiator_nudge_ms;
            let next = base << (2 * u32::from(conn.nudge_checks));
            conn.nudge_at = Some(now + Duration::from_millis(next));
        }
    }
}
