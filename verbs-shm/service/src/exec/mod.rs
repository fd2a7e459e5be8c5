//! Control requests: the engine calls the control thread asks for, with the ownership
//! checks that keep one client off another's objects. `execute` routes each request to
//! the file of its kind of object, as `control/` is split: `mr` (PDs, MRs, windows,
//! arenas), `cq`, `qp`, `srq`, `cm`, `client` (teardown, snapshot).

mod client;
mod cm;
mod cq;
mod mr;
mod qp;
mod srq;

#[cfg(test)]
pub(crate) use qp::CLOSE_LINGER;

use iwarp_engine::Engine;
use iwarp_rdma::mem::MrAttr;
use iwarp_shm_ring::{Consumer, RingKind, RingLayout};
use iwarp_types::{Instant, Memory, PdId, QpId, Stag};

use crate::request::{ClientId, RingSpec, ServiceError, ServiceReply, ServiceRequest};
use crate::service::ShmService;
use crate::tables::Client;

pub(super) type R = Result<ServiceReply, ServiceError>;

pub(super) fn layout(
    kind: RingKind,
    entries: u32,
    slot: usize,
) -> Result<RingLayout, ServiceError> {
    RingLayout::with_kind(kind, entries, slot as u32).map_err(ServiceError::Ring)
}

pub(super) fn consumer(
    spec: &RingSpec,
    kind: RingKind,
    slot: usize,
) -> Result<Consumer, ServiceError> {
    Ok(Consumer::attach(
        spec.region.clone(),
        layout(kind, spec.entries, slot)?,
    )?)
}
impl ShmService {
    pub(super) fn client(&mut self, id: ClientId) -> Result<&mut Client, ServiceError> {
        self.clients.get_mut(&id).ok_or(ServiceError::UnknownClient)
    }

    pub(super) fn own_pd(&mut self, client: ClientId, pd: PdId) -> Result<(), ServiceError> {
        if self.client(client)?.pds.contains(&pd) {
            Ok(())
        } else {
            Err(ServiceError::Invalid("PD of another client"))
        }
    }

    pub(super) fn own_stag(&mut self, client: ClientId, stag: Stag) -> Result<(), ServiceError> {
        let index = stag.0 >> 8;
        if self.client(client)?.stags.iter().any(|s| s.0 >> 8 == index) {
            Ok(())
        } else {
            Err(ServiceError::Invalid("STag of another client"))
        }
    }

    pub(super) fn own_qp(&self, client: ClientId, qp: QpId) -> Result<(), ServiceError> {
        match self.qps.get(&qp) {
            Some(q) if q.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("QP of another client")),
        }
    }

    /// An MR's arena must be one the client added.
    pub(super) fn own_region(
        &mut self,
        client: ClientId,
        attr: &MrAttr,
    ) -> Result<(), ServiceError> {
        if self
            .client(client)?
            .arenas
            .values()
            .any(|r| *r == attr.region)
        {
            Ok(())
        } else {
            Err(ServiceError::Invalid("arena of another client"))
        }
    }

    /// Keeps the pending lists' capacity above the number of rings and CQs, so that a
    /// push on the fast path never allocates: a send queue per QP (`serve_pending` pushes
    /// up to `rings_per_poll` of them again before it drops the served ones), a receive
    /// ring per QP and per SRQ (drained to empty, never pushed again).
    pub(super) fn reserve_lists(&mut self) {
        let need_sq = self.qps.len() + 1 + self.cfg.rings_per_poll;
        if self.pending_sq.capacity() < need_sq {
            self.pending_sq.reserve(need_sq - self.pending_sq.len());
        }
        let need_rx = self.qps.len() + self.srqs.len() + 1;
        if self.pending_rx.capacity() < need_rx {
            self.pending_rx.reserve(need_rx - self.pending_rx.len());
        }
        let cqs = self.cqs.len() + 1;
        if self.cq_pending.capacity() < 2 * cqs {
            self.cq_pending.reserve(2 * cqs - self.cq_pending.len());
        }
    }

    pub(super) fn own_cq(
        &self,
        client: ClientId,
        cq: iwarp_types::CqId,
    ) -> Result<(), ServiceError> {
        match self.cqs.get(&cq) {
            Some(c) if c.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("CQ of another client")),
        }
    }

    pub(super) fn own_srq(
        &self,
        client: ClientId,
        srq: iwarp_types::SrqId,
    ) -> Result<(), ServiceError> {
        match self.srqs.get(&srq) {
            Some(s) if s.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("SRQ of another client")),
        }
    }

    /// Handles one control request.
    pub(crate) fn execute<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        req: ServiceRequest,
    ) -> R {
        use ServiceRequest as Q;
        match req {
            Q::AttachClient { client, doorbells } => {
                if self.clients.contains_key(&client) {
                    return Err(ServiceError::UnknownClient);
                }
                if self.clients.len() >= self.cfg.max_clients {
                    return Err(ServiceError::TableFull);
                }
                self.clients.insert(client, Client::new(client, doorbells));
                Ok(ServiceReply::Done)
            }
            Q::DetachClient { client } => self.detach(now, engine, client),
            Q::Fence => Ok(ServiceReply::Done),
            Q::Snapshot => Ok(self.snapshot(engine)),
            Q::AllocPd { .. }
            | Q::DeallocPd { .. }
            | Q::RegMr { .. }
            | Q::ReregMr { .. }
            | Q::AllocMr { .. }
            | Q::QueryMr { .. }
            | Q::DeallocStag { .. }
            | Q::AllocMw { .. }
            | Q::BindMwType1 { .. }
            | Q::AddArena { .. }
            | Q::RemoveArena { .. } => self.exec_mr(engine, mem, req),
            Q::CreateCq { .. } | Q::ResizeCq { .. } | Q::DestroyCq { .. } => {
                self.exec_cq(engine, req)
            }
            Q::CreateQp { .. } | Q::ModifyQp { .. } | Q::QueryQp { .. } | Q::DestroyQp { .. } => {
                self.exec_qp(now, engine, req)
            }
            Q::CreateSrq { .. }
            | Q::ModifySrq { .. }
            | Q::QuerySrq { .. }
            | Q::DestroySrq { .. } => self.exec_srq(engine, req),
            Q::Listen { .. }
            | Q::Unlisten { .. }
            | Q::Connect { .. }
            | Q::Accept { .. }
            | Q::Reject { .. }
            | Q::Disconnect { .. }
            | Q::Abort { .. } => self.exec_cm(now, engine, req),
        }
    }
}
