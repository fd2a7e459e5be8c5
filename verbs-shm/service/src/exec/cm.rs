//! Connection management: listeners, active and passive opens, closes.
use iwarp_engine::Engine;
use iwarp_types::Instant;

use super::R;
use crate::request::{ServiceError, ServiceReply, ServiceRequest};
use crate::service::ShmService;
use crate::tables::ConnEntry;

impl ShmService {
    /// The connection requests (`execute` routes them here).
    pub(super) fn exec_cm(&mut self, now: Instant, engine: &mut Engine, req: ServiceRequest) -> R {
        use ServiceRequest as Q;
        match req {
            Q::Listen {
                client,
                cm_id,
                port,
                backlog,
            } => {
                self.client(client)?;
                engine.listen(port, backlog as usize)?;
                self.listeners.insert(port, (client, cm_id));
                self.client(client)?.listeners.push((port, cm_id));
                Ok(ServiceReply::Done)
            }
            Q::Unlisten { client, port } => {
                match self.listeners.get(&port) {
                    Some((c, _)) if *c == client => {}
                    _ => return Err(ServiceError::Invalid("port not listened on by this client")),
                }
                engine.unlisten(port);
                self.listeners.remove(&port);
                self.client(client)?.listeners.retain(|(p, _)| *p != port);
                Ok(ServiceReply::Done)
            }
            Q::Connect {
                client,
                cm_id,
                qp,
                remote,
                params,
            } => {
                self.own_qp(client, qp)?;
                if self.conns.len() >= self.cfg.max_conns {
                    return Err(ServiceError::TableFull);
                }
                let (rip, rport) = (*remote.ip(), remote.port());
                let port = match &self.cfg.port_filter {
                    Some(f) => engine.choose_local_port(rip, rport, |p| f(rip, rport, p)),
                    None => engine.choose_local_port(rip, rport, |_| true),
                }
                .ok_or(ServiceError::Cm(iwarp_engine::CmError::NoPort))?;
                let conn = engine.connect_from(now, qp, port, rip, rport, params)?;
                self.conns.insert(
                    conn,
                    ConnEntry {
                        client,
                        cm_id,
                        qp: Some(qp),
                        close_told: false,
                    },
                );
                if let Some(q) = self.qps.get_mut(&qp) {
                    q.conn = Some((conn, cm_id));
                }
                Ok(ServiceReply::Connecting {
                    conn,
                    local_port: port,
                })
            }
            Q::Accept {
                client,
                cm_id,
                conn,
                qp,
                params,
            } => {
                self.own_qp(client, qp)?;
                match self.conns.get(&conn) {
                    Some(c) if c.client == client => {}
                    _ => return Err(ServiceError::Invalid("connection of another client")),
                }
                // The receives posted before the Accept go first (the initiator may send
                // as soon as the MPA Reply arrives; a Send finding no receive is a
                // Terminate).
                self.drain_ring(engine, qp, false);
                engine.accept(now, conn, qp, params)?;
                self.conns.insert(
                    conn,
                    ConnEntry {
                        client,
                        cm_id,
                        qp: Some(qp),
                        close_told: false,
                    },
                );
                if let Some(q) = self.qps.get_mut(&qp) {
                    q.conn = Some((conn, cm_id));
                }
                Ok(ServiceReply::Done)
            }
            Q::Reject {
                client,
                conn,
                private_data,
            } => {
                match self.conns.get(&conn) {
                    Some(c) if c.client == client && c.qp.is_none() => {}
                    _ => return Err(ServiceError::Invalid("no such request of this client")),
                }
                engine.reject(now, conn, private_data)?;
                self.conns.remove(&conn);
                Ok(ServiceReply::Done)
            }
            Q::Disconnect { client, qp } => {
                self.own_qp(client, qp)?;
                // The WRs posted before the Disconnect go first: a graceful close sends
                // what was posted.
                self.drain_ring(engine, qp, true);
                engine.disconnect(now, qp)?;
                Ok(ServiceReply::Done)
            }
            Q::Abort { client, qp } => {
                self.own_qp(client, qp)?;
                engine.abort(now, qp)?;
                Ok(ServiceReply::Done)
            }
            _ => Err(ServiceError::Invalid("not a connection request")),
        }
    }
}
