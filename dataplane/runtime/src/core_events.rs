//! Engine events: the table of established QPs kept current, then each event offered to
//! the port's apps. An event no app takes is counted; a connect request no app takes is
//! rejected at once (nobody would accept it).

use iwarp_engine::{Event, PrivateData};
use iwarp_types::{Instant, Memory};

use crate::core::Core;

impl<M: Memory> Core<M> {
    /// Drains up to the per-iteration bound of port `i`'s engine events: tracked, then
    /// offered to the port's apps.
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
            match ev {
                Event::Established { qp, .. } if port.live.len() < port.live.capacity() => {
                    port.live.insert(qp);
                }
                Event::Disconnected { qp, .. } => {
                    port.live.remove(&qp);
                }
                _ => {}
            }
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
                self.loop_counters.events_unclaimed += 1;
                if let Event::ConnectRequest { conn, .. } = ev {
                    let _ = port.engine.reject(now, conn, PrivateData::EMPTY);
                }
            }
        }
        n
    }
}
