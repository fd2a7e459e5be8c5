//! Clients: their teardown and the service's snapshot.
use iwarp_engine::Engine;
use iwarp_types::{Instant, QpId, Stag};

use super::R;
use crate::cq::RingSink;
use crate::request::{ClientId, Freed, ServiceError, ServiceReply};
use crate::service::ShmService;

impl ShmService {
    /// Everything of `client` on this core, in the teardown order of docs/APPS.md.
    pub(super) fn detach(&mut self, now: Instant, engine: &mut Engine, client: ClientId) -> R {
        if !self.clients.contains_key(&client) {
            return Err(ServiceError::UnknownClient);
        }
        let mut freed = Freed::default();
        // Connection requests nobody answered.
        let requests: Vec<_> = self
            .conns
            .iter()
            .filter(|(_, c)| c.client == client && c.qp.is_none())
            .map(|(id, _)| *id)
            .collect();
        for conn in requests {
            let _ = engine.reject(now, conn, iwarp_engine::PrivateData::EMPTY);
            self.conns.remove(&conn);
            freed.conns += 1;
        }
        let qps: Vec<QpId> = self
            .qps
            .iter()
            .filter(|(_, q)| q.client == client)
            .map(|(id, _)| *id)
            .collect();
        for qp in qps {
            match self.destroy_qp(now, engine, qp) {
                Ok(had_conn) => {
                    freed.qps += 1;
                    freed.conns += had_conn as u32;
                }
                Err(_) => freed.failed += 1,
            }
        }
        let srqs: Vec<_> = self
            .srqs
            .iter()
            .filter(|(_, s)| s.client == client)
            .map(|(id, _)| *id)
            .collect();
        for srq in srqs {
            match engine.rnic_mut().destroy_srq(srq) {
                Ok(()) => freed.srqs += 1,
                Err(_) => freed.failed += 1,
            }
            self.srqs.remove(&srq);
        }
        self.pending_rx.retain(|p| match p {
            crate::tables::RxRing::Srq(s) => self.srqs.contains_key(s),
            _ => true,
        });
        let cqs: Vec<_> = self
            .cqs
            .iter()
            .filter(|(_, c)| c.client == client)
            .map(|(id, _)| *id)
            .collect();
        for cq in cqs {
            match self.destroy_engine_cq(engine, cq, client) {
                Ok(()) => freed.cqs += 1,
                Err(_) => freed.failed += 1,
            }
            self.cqs.remove(&cq);
        }
        self.cq_pending.retain(|c| self.cqs.contains_key(c));
        let Some(c) = self.clients.remove(&client) else {
            return Err(ServiceError::UnknownClient);
        };
        // Windows before regions: a bound window keeps its region.
        let (mws, mrs): (Vec<Stag>, Vec<Stag>) = c
            .stags
            .iter()
            .partition(|s| engine.rnic().query_mw(**s).is_ok());
        for stag in mws.into_iter().chain(mrs) {
            match engine.rnic_mut().dealloc_stag(stag) {
                Ok(()) => freed.stags += 1,
                Err(_) => freed.failed += 1,
            }
        }
        for pd in &c.pds {
            match engine.rnic_mut().dealloc_pd(*pd) {
                Ok(()) => freed.pds += 1,
                Err(_) => freed.failed += 1,
            }
        }
        for (port, _) in &c.listeners {
            engine.unlisten(*port);
            self.listeners.remove(port);
            freed.listeners += 1;
        }
        Ok(ServiceReply::Detached(freed))
    }

    pub(super) fn snapshot(&self, engine: &Engine) -> ServiceReply {
        let clients = self
            .clients
            .values()
            .map(|c| {
                let mut s = c.stats;
                for (cq, _) in self.cqs.iter().filter(|(_, q)| q.client == c.id) {
                    if let Some((written, full)) =
                        engine.rnic().cq_sink::<RingSink>(*cq).map(RingSink::stats)
                    {
                        s.cqes += written;
                        s.cq_ring_full += full;
                    }
                }
                s.pds = c.pds.len() as u32;
                s.stags = c.stags.len() as u32;
                s.arenas = c.arenas.len() as u32;
                s.listeners = c.listeners.len() as u32;
                s.qps = self.qps.values().filter(|q| q.client == c.id).count() as u32;
                s.cqs = self.cqs.values().filter(|q| q.client == c.id).count() as u32;
                s.srqs = self.srqs.values().filter(|q| q.client == c.id).count() as u32;
                s.conns = self.conns.values().filter(|q| q.client == c.id).count() as u32;
                s
            })
            .collect();
        ServiceReply::Snapshot {
            counters: self.counters,
            clients,
        }
    }
}
