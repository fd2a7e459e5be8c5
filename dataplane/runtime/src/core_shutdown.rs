//! Orderly shutdown of a core: the apps are told (they close their own connections:
//! FIN once the SQ drained), the loop runs until every app is idle and no QP is
//! established (TIME_WAIT aside) or the grace period ends, then what is left is reset.
//! Connections still in TIME_WAIT at the end are ended with the process (they count as
//! closed).

use iwarp_types::{Duration, Instant, Memory};

use crate::core::{Core, ShutdownState};

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
    }

    /// Ends shutdown when nothing is left, or aborts the rest when the grace period is
    /// over (then gives the RSTs `abort_linger_ms` to leave).
    pub(crate) fn check_shutdown(&mut self, now: Instant) {
        let Some(state) = self.shutdown else {
            return;
        };
        let apps_idle = self.apps.iter().flatten().all(|s| s.app.is_idle());
        let conns_left = self.ports.iter().any(|p| !p.live.is_empty());
        if apps_idle && !conns_left {
            self.finish(now);
            return;
        }
        match state.aborted_at {
            None if now >= state.deadline => {
                for p in &mut self.ports {
                    for &qp in &p.live {
                        let _ = p.engine.abort(now, qp);
                    }
                }
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
