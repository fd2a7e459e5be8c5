//! Engine events: tracked (established QPs, pending control connections), offered to
//! the port's apps, or sent to the control thread as notices.

use iwarp_engine::{Event, PrivateData};
use iwarp_types::{Instant, Memory};

use crate::control::Notice;
use crate::core::{pending_is, Core, Pending};

impl<M: Memory> Core<M> {
    /// Drains up to the per-iteration bound of port `i`'s engine events: tracked, then
    /// offered to the port's apps, then to the control thread.
    pub(crate) fn route_events(&mut self, now: Instant, i: usize) -> usize {
        let mut n = 0;
        while n < self.cfg.events_per_iteration {
            let Some(port) = self.ports.get_mut(i) else {
                break;
            };
            let Some(ev) = port.engine.poll_event() else {
                break;
            };
            n += 1;
            self.track_event(i, &ev);
            let port = &mut self.ports[i];
            let mut taken = false;
            for slot in self.apps.iter_mut().flatten() {
                if slot.port == i && slot.app.on_event(now, &mut port.engine, &mut self.mem, &ev) {
                    taken = true;
                    break;
                }
            }
            if taken {
                self.loop_counters.events_to_apps += 1;
            } else {
                self.notify_control(now, i, ev);
            }
        }
        n
    }

    /// Keeps the tables of established QPs and pending control connections current.
    fn track_event(&mut self, i: usize, ev: &Event) {
        let port = &mut self.ports[i];
        match *ev {
            Event::Established { conn, qp, .. } => {
                let owned = self.owned_qps.contains(&(i, qp));
                let room = port.live.len() < port.live.capacity() || port.live.contains_key(&qp);
                if room && port.live.insert(qp, (conn, owned)).is_none() && !owned {
                    self.app_live_qps += 1;
                }
                self.pending.retain(|p| !pending_is(p, i, conn));
            }
            Event::Disconnected { qp, .. } => {
                if let Some((_, false)) = port.live.remove(&qp) {
                    self.app_live_qps = self.app_live_qps.saturating_sub(1);
                }
            }
            Event::ConnectFailed { conn, .. } | Event::Rejected { conn, .. } => {
                self.pending.retain(|p| !pending_is(p, i, conn));
            }
            _ => {}
        }
    }

    /// An event no app took: a notice for the control thread. A connect request that
    /// cannot be handed on (shutting down, no room) is rejected.
    fn notify_control(&mut self, now: Instant, i: usize, ev: Event) {
        if let Event::ConnectRequest { conn, .. } = ev {
            let room = self.pending.len() < self.pending.capacity();
            if self.shutdown.is_some() || !room {
                let _ = self.ports[i].engine.reject(now, conn, PrivateData::EMPTY);
                return;
            }
            let notice = Notice {
                core: self.cfg.index,
                port: i,
                event: ev,
            };
            if self.control.push_notice(notice) {
                self.loop_counters.notices += 1;
                self.pending.push(Pending::Request(i, conn));
            } else {
                self.loop_counters.notices_dropped += 1;
                let _ = self.ports[i].engine.reject(now, conn, PrivateData::EMPTY);
            }
            return;
        }
        let notice = Notice {
            core: self.cfg.index,
            port: i,
            event: ev,
        };
        if self.control.push_notice(notice) {
            self.loop_counters.notices += 1;
        } else {
            self.loop_counters.notices_dropped += 1;
        }
    }
}
