//! Engine events: the service claims those of its clients' connections, listening
//! ports, QPs, CQs and SRQs and forwards them as notices.

use iwarp_engine::{Engine, Event};
use iwarp_types::{AsyncEvent, AsyncEventKind, EventResource};

use crate::request::{AsyncObject, CmNotice, ServiceNotice};
use crate::service::ShmService;
use crate::tables::ConnEntry;

impl ShmService {
    /// Routes one event; true if it was this service's.
    pub(crate) fn route_event(
        &mut self,
        now: iwarp_types::Instant,
        engine: &mut Engine,
        ev: &Event,
    ) -> bool {
        match *ev {
            Event::ConnectRequest {
                conn,
                local_port,
                remote,
                private_data,
                ird,
                ord,
                ..
            } => {
                let Some(&(client, listen_cm_id)) = self.listeners.get(&local_port) else {
                    return false;
                };
                let tracked = self.conns.len() < self.cfg.max_conns;
                let notice = ServiceNotice::Cm {
                    client,
                    event: CmNotice::ConnectRequest {
                        listen_cm_id,
                        conn,
                        remote,
                        local_port,
                        private_data,
                        ird,
                        ord,
                    },
                };
                if tracked && self.notify(notice) {
                    self.conns.insert(
                        conn,
                        ConnEntry {
                            client,
                            cm_id: listen_cm_id,
                            qp: None,
                            close_told: false,
                        },
                    );
                } else {
                    // Nobody will answer it: refuse at once.
                    let _ = engine.reject(now, conn, iwarp_engine::PrivateData::EMPTY);
                }
                true
            }
            Event::Established {
                conn,
                qp,
                private_data,
            } => {
                let Some(q) = self.qps.get(&qp) else {
                    return false;
                };
                let client = q.client;
                let cm_id = self.conns.get(&conn).map_or(0, |c| c.cm_id);
                self.notify(ServiceNotice::Cm {
                    client,
                    event: CmNotice::Established {
                        cm_id,
                        conn,
                        qp,
                        private_data,
                    },
                });
                true
            }
            Event::Rejected { conn, private_data } => {
                let Some(c) = self.conns.remove(&conn) else {
                    return false;
                };
                self.clear_qp_conn(c);
                self.notify(ServiceNotice::Cm {
                    client: c.client,
                    event: CmNotice::Rejected {
                        cm_id: c.cm_id,
                        conn,
                        private_data,
                    },
                });
                true
            }
            Event::ConnectFailed { conn, reason } => {
                let Some(c) = self.conns.remove(&conn) else {
                    return false;
                };
                self.clear_qp_conn(c);
                self.notify(ServiceNotice::Cm {
                    client: c.client,
                    event: CmNotice::ConnectFailed {
                        cm_id: c.cm_id,
                        conn,
                        reason,
                    },
                });
                true
            }
            Event::PeerClosed { conn, qp } => {
                // Told now, as Linux siw tells rdma_cm (the close may take as long as
                // the peer needs to acknowledge our FIN, or forever if it vanished);
                // the connection stays tracked until the engine's `Disconnected`.
                let Some(client) = self.qps.get(&qp).map(|q| q.client) else {
                    return self.conns.contains_key(&conn);
                };
                // Untracked: `Disconnected` tells the client at the end.
                let Some(c) = self.conns.get(&conn).copied() else {
                    return true;
                };
                if !c.close_told {
                    let told = self.notify(ServiceNotice::Cm {
                        client,
                        event: CmNotice::Disconnected {
                            cm_id: c.cm_id,
                            conn,
                            qp,
                        },
                    });
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.close_told = told;
                    }
                }
                true
            }
            Event::Disconnected { conn, qp } => {
                let c = self.conns.remove(&conn);
                let Some(q) = self.qps.get_mut(&qp) else {
                    return c.is_some();
                };
                q.conn = None;
                if c.is_some_and(|c| c.close_told) {
                    return true;
                }
                let client = q.client;
                let cm_id = c.map_or(0, |c| c.cm_id);
                self.notify(ServiceNotice::Cm {
                    client,
                    event: CmNotice::Disconnected { cm_id, conn, qp },
                });
                true
            }
            Event::Async(AsyncEvent { resource, kind }) => {
                // A completion refused: a CQ sub-ring whose consumer index broke is
                // reported as such (`RingCorrupt`) instead of an overflow.
                match (resource, kind) {
                    (EventResource::Cq(cq), AsyncEventKind::CqOverflow)
                        if self.check_ring(engine, cq) =>
                    {
                        return true;
                    }
                    (EventResource::Qp(qp), AsyncEventKind::CqError) => {
                        if let Some(q) = self.qps.get(&qp) {
                            let (s, r) = (q.send_cq, q.recv_cq);
                            self.check_ring(engine, s);
                            self.check_ring(engine, r);
                        }
                    }
                    _ => {}
                }
                let (client, object) = match resource {
                    EventResource::Qp(qp) => match self.qps.get(&qp) {
                        Some(q) => (q.client, AsyncObject::Qp(q.handle)),
                        None => return false,
                    },
                    EventResource::Cq(cq) => match self.cqs.get(&cq) {
                        Some(c) => (c.client, AsyncObject::Cq(c.handle)),
                        None => return false,
                    },
                    EventResource::Srq(srq) => match self.srqs.get(&srq) {
                        Some(s) => (s.client, AsyncObject::Srq(s.handle)),
                        None => return false,
                    },
                    EventResource::Rnic => return false,
                };
                self.notify(ServiceNotice::Async {
                    client,
                    object,
                    kind,
                });
                true
            }
            Event::CqNotify(cq) => {
                if !self.cqs.contains_key(&cq) {
                    return false;
                }
                self.cq_fired(cq);
                true
            }
        }
    }

    fn clear_qp_conn(&mut self, c: ConnEntry) {
        if let Some(q) = c.qp.and_then(|qp| self.qps.get_mut(&qp)) {
            q.conn = None;
        }
    }
}
