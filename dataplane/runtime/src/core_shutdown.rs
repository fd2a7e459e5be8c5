//! Orderly shutdown of a core: apps told (they close their own QPs), listeners closed,
//! every established QP of the control plane disconnected (FIN once its SQ drained),
//! pending connections rejected or closed; the loop runs until nothing is left (TIME_WAIT
//! aside) or the grace period ends, then the rest is reset. Connections still in
//! TIME_WAIT at the end are ended with the process (they count as closed).

use iwarp_engine::PrivateData;
use iwarp_types::{Duration, Instant, Memory};

use crate::core::{Core, Pending, ShutdownState};

impl<M: Memory> Core<M> {
    /// Starts shutdown (a second request is ignored).
    pub fn begin_shutdown(&mut self, now: Instant, grace_ms: u64) {
        if self.shutdown.is_some() {
            return;
        }
        self.shutdown = Some(ShutdownState {
            deadline: now + Duration::from_millis(grace_ms),
            aborted_at: None,
        });
        for slot in self.apps.iter_mut().flatten() {
            if let Some(p) = self.ports.get_mut(slot.port) {
                slot.app.shutdown(now, &mut p.engine, &mut self.mem);
            }
        }
        for p in &mut self.ports {
            for &tcp_port in &p.listening {
                p.engine.unlisten(tcp_port);
            }
            p.listening.clear();
            // The control plane's QPs are closed here; apps close their own (they drain
            // first: in-flight WRs and the peer's last messages), until the deadline.
            for (&qp, &(_, owned)) in &p.live {
                if owned {
                    // A QP already closing refuses; nothing to do then.
                    let _ = p.engine.disconnect(now, qp);
                }
            }
        }
        self.close_pending(now, false);
    }

    /// Rejects connections awaiting accept; closes (or resets) those being opened.
    fn close_pending(&mut self, now: Instant, reset: bool) {
        for pending in &self.pending {
            match *pending {
                Pending::Request(i, conn) => {
                    if let Some(p) = self.ports.get_mut(i) {
                        let _ = p.engine.reject(now, conn, PrivateData::EMPTY);
                    }
                }
                Pending::Opening(i, _, qp) => {
                    if let Some(p) = self.ports.get_mut(i) {
                        let _ = if reset {
                            p.engine.abort(now, qp)
                        } else {
                            p.engine.disconnect(now, qp)
                        };
                    }
                }
            }
        }
        // Rejected requests are the engine's to finish; they need no more tracking.
        self.pending.retain(|p| matches!(p, Pending::Opening(..)));
    }

    /// Ends shutdown when nothing is left, or aborts the rest when the grace period is
    /// over (then gives the RSTs `abort_linger_ms` to leave).
    pub(crate) fn check_shutdown(&mut self, now: Instant) {
        let Some(state) = self.shutdown else {
            return;
        };
        let apps_idle = self.apps.iter().flatten().all(|s| s.app.is_idle());
        let conns_left = self.ports.iter().any(|p| !p.live.is_empty()) || !self.pending.is_empty();
        if apps_idle && !conns_left {
            self.finish(now);
            return;
        }
        match state.aborted_at {
            None if now >= state.deadline => {
                for p in &mut self.ports {
                    for &qp in p.live.keys() {
                        let _ = p.engine.abort(now, qp);
                    }
                }
                self.close_pending(now, true);
                self.shutdown = Some(ShutdownState {
                    aborted_at: Some(now),
                    ..state
                });
            }
            Some(t) if now >= t + Duration::from_millis(self.cfg.abort_linger_ms) => {
                self.finish(now);
            }
            _ => {}
        }
    }

    /// The end of shutdown: connections left in TIME_WAIT (closed for their QPs) end
    /// with the process, so the final counters show none live.
    fn finish(&mut self, now: Instant) {
        for p in &mut self.ports {
            p.engine.end_time_wait(now);
        }
        self.finished = true;
    }
}
