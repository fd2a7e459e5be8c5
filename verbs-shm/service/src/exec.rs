//! Control requests: the engine calls the control thread asks for, with the ownership
//! checks that keep one client off another's objects.

use iwarp_engine::Engine;
use iwarp_rdma::mem::MrAttr;
use iwarp_shm_ring::{
    Consumer, Producer, RingKind, RingLayout, CQE_SLOT_SIZE, RECV_SLOT_SIZE, SEND_SLOT_SIZE,
};
use iwarp_types::{Instant, Memory, PdId, QpId, Stag, VerbError};

use crate::cq::RingSink;

/// How long a QP destroyed during its graceful close may wait for the close to get past
/// its FIN ([`ShmService::linger_for_close`]): a few retransmission timeouts.
pub(crate) const CLOSE_LINGER: iwarp_types::Duration = iwarp_types::Duration::from_secs(1);
use crate::request::{
    ClientId, Freed, RingSpec, ServiceError, ServiceReply, ServiceRequest, WorkRing,
};
use crate::service::ShmService;
use crate::tables::{Bell, Client, ConnEntry, CqEntry, QpEntry, SrqEntry};

type R = Result<ServiceReply, ServiceError>;

fn layout(kind: RingKind, entries: u32, slot: usize) -> Result<RingLayout, ServiceError> {
    RingLayout::with_kind(kind, entries, slot as u32).map_err(ServiceError::Ring)
}

fn consumer(spec: &RingSpec, kind: RingKind, slot: usize) -> Result<Consumer, ServiceError> {
    Ok(Consumer::attach(
        spec.region.clone(),
        layout(kind, spec.entries, slot)?,
    )?)
}

impl ShmService {
    fn client(&mut self, id: ClientId) -> Result<&mut Client, ServiceError> {
        self.clients.get_mut(&id).ok_or(ServiceError::UnknownClient)
    }

    fn own_pd(&mut self, client: ClientId, pd: PdId) -> Result<(), ServiceError> {
        if self.client(client)?.pds.contains(&pd) {
            Ok(())
        } else {
            Err(ServiceError::Invalid("PD of another client"))
        }
    }

    fn own_stag(&mut self, client: ClientId, stag: Stag) -> Result<(), ServiceError> {
        let index = stag.0 >> 8;
        if self.client(client)?.stags.iter().any(|s| s.0 >> 8 == index) {
            Ok(())
        } else {
            Err(ServiceError::Invalid("STag of another client"))
        }
    }

    fn own_qp(&self, client: ClientId, qp: QpId) -> Result<(), ServiceError> {
        match self.qps.get(&qp) {
            Some(q) if q.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("QP of another client")),
        }
    }

    /// An MR's arena must be one the client added.
    fn own_region(&mut self, client: ClientId, attr: &MrAttr) -> Result<(), ServiceError> {
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
    /// push on the fast path never allocates.
    fn reserve_lists(&mut self) {
        let rings = 2 * self.qps.len() + self.srqs.len() + 2;
        let need = rings + self.cfg.rings_per_poll;
        if self.pending.capacity() < need {
            self.pending.reserve(need - self.pending.len());
        }
        let cqs = self.cqs.len() + 1;
        if self.cq_pending.capacity() < 2 * cqs {
            self.cq_pending.reserve(2 * cqs - self.cq_pending.len());
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
            Q::AllocPd { client } => {
                self.client(client)?;
                let pd = engine.rnic_mut().alloc_pd()?;
                self.client(client)?.pds.push(pd);
                Ok(ServiceReply::Pd(pd))
            }
            Q::DeallocPd { client, pd } => {
                self.own_pd(client, pd)?;
                engine.rnic_mut().dealloc_pd(pd)?;
                self.client(client)?.pds.retain(|p| *p != pd);
                Ok(ServiceReply::Done)
            }
            Q::CreateCq {
                client,
                cq,
                depth,
                ring,
                control,
            } => {
                self.client(client)?;
                if self.cqs.len() >= self.cfg.max_objects {
                    return Err(ServiceError::TableFull);
                }
                let lay = layout(RingKind::Completion, ring.entries, CQE_SLOT_SIZE)?;
                let producer = Producer::attach(ring.region.clone(), lay)?;
                // The sub-ring is the engine CQ: it must hold `depth` completions.
                if RingSink::capacity(ring.entries) < depth as usize {
                    return Err(ServiceError::Invalid(
                        "CQ ring smaller than depth + 1 entries",
                    ));
                }
                let sink = Box::new(RingSink::new(producer, control));
                let (id, got) = engine.rnic_mut().create_cq_with_sink(depth, sink)?;
                self.cqs.insert(
                    id,
                    CqEntry {
                        client,
                        handle: cq,
                        pending: false,
                        wake_pending: false,
                    },
                );
                self.reserve_lists();
                Ok(ServiceReply::Cq { cq: id, depth: got })
            }
            Q::ResizeCq {
                client,
                cq,
                depth,
                ring,
            } => {
                self.own_cq(client, cq)?;
                let lay = layout(RingKind::Completion, ring.entries, CQE_SLOT_SIZE)?;
                let producer = Producer::attach(ring.region.clone(), lay)?;
                if depth > engine.rnic().limits().max_cqe {
                    return Err(ServiceError::Verb(VerbError::CqTooLarge));
                }
                let got = RingSink::capacity(ring.entries);
                if got < depth as usize {
                    return Err(ServiceError::Invalid(
                        "CQ ring smaller than depth + 1 entries",
                    ));
                }
                // Completions already in the old sub-ring stay there, read before the
                // marker: nothing to shrink.
                let sink = engine
                    .rnic_mut()
                    .cq_sink_mut::<RingSink>(cq)
                    .ok_or(ServiceError::Invalid("CQ without a ring"))?;
                sink.move_to(producer);
                Ok(ServiceReply::Cq {
                    cq,
                    depth: got.min(u32::MAX as usize) as u32,
                })
            }
            Q::DestroyCq { client, cq } => {
                self.own_cq(client, cq)?;
                self.destroy_engine_cq(engine, cq, client)?;
                self.cqs.remove(&cq);
                self.cq_pending.retain(|c| *c != cq);
                Ok(ServiceReply::Done)
            }
            Q::CreateQp {
                client,
                qp,
                attr,
                sq_sig_all,
                sq,
                rq,
            } => self.create_qp(engine, client, qp, attr, sq_sig_all, sq, rq),
            Q::ModifyQp { client, qp, modify } => {
                self.own_qp(client, qp)?;
                engine.modify_qp(qp, &modify)?;
                Ok(ServiceReply::Done)
            }
            Q::QueryQp { client, qp } => {
                self.own_qp(client, qp)?;
                Ok(ServiceReply::QpInfo(engine.rnic().query_qp(qp)?))
            }
            Q::DestroyQp { client, qp } => {
                self.own_qp(client, qp)?;
                self.linger_for_close(now, engine, qp)?;
                self.destroy_qp(now, engine, qp)?;
                Ok(ServiceReply::Done)
            }
            Q::CreateSrq {
                client,
                srq,
                pd,
                max_wr,
                max_sge,
                limit,
                ring,
            } => {
                self.own_pd(client, pd)?;
                if !self.client(client)?.bell_free(ring.doorbell) {
                    return Err(ServiceError::Invalid("doorbell bit out of range or in use"));
                }
                if self.srqs.len() >= self.cfg.max_objects {
                    return Err(ServiceError::TableFull);
                }
                let cons = consumer(&ring.ring, RingKind::SharedRecv, RECV_SLOT_SIZE)?;
                let (id, w, g) = engine.rnic_mut().create_srq(pd, max_wr, max_sge, limit)?;
                self.client(client)?.set_bell(ring.doorbell, Bell::Srq(id));
                self.srqs.insert(
                    id,
                    SrqEntry {
                        client,
                        handle: srq,
                        ring: cons,
                        bit: ring.doorbell,
                        err_cq: None,
                        pending: false,
                        broken: false,
                    },
                );
                self.reserve_lists();
                Ok(ServiceReply::Srq {
                    srq: id,
                    max_wr: w,
                    max_sge: g,
                })
            }
            Q::ModifySrq {
                client,
                srq,
                modify,
            } => {
                self.own_srq(client, srq)?;
                Ok(ServiceReply::SrqMaxWr(
                    engine.rnic_mut().modify_srq(srq, modify)?,
                ))
            }
            Q::QuerySrq { client, srq } => {
                self.own_srq(client, srq)?;
                Ok(ServiceReply::SrqAttr(engine.rnic().query_srq(srq)?))
            }
            Q::DestroySrq { client, srq } => {
                self.own_srq(client, srq)?;
                engine.rnic_mut().destroy_srq(srq)?;
                if let Some(s) = self.srqs.remove(&srq) {
                    self.client(client)?.set_bell(s.bit, Bell::None);
                }
                Ok(ServiceReply::Done)
            }
            Q::RegMr { client, attr, at } => {
                self.own_pd(client, attr.pd)?;
                self.own_region(client, &attr)?;
                let len = mem.region_len(attr.region);
                let stag = match at {
                    Some(s) => engine.rnic_mut().reg_mr_at(s, &attr, len)?,
                    None => engine.rnic_mut().reg_mr(&attr, len)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::ReregMr { client, stag, attr } => {
                self.own_stag(client, stag)?;
                self.own_pd(client, attr.pd)?;
                self.own_region(client, &attr)?;
                let len = mem.region_len(attr.region);
                let new = engine.rnic_mut().rereg_mr(stag, &attr, len)?;
                let c = self.client(client)?;
                c.stags.retain(|s| s.0 >> 8 != stag.0 >> 8);
                c.stags.push(new);
                Ok(ServiceReply::Stag(new))
            }
            Q::AllocMr {
                client,
                pd,
                max_len,
                remote_access_flag,
                at,
            } => {
                self.own_pd(client, pd)?;
                let r = engine.rnic_mut();
                let stag = match at {
                    Some(s) => r.alloc_mr_stag_at(s, pd, max_len, remote_access_flag)?,
                    None => r.alloc_mr_stag(pd, max_len, remote_access_flag)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::QueryMr { client, stag } => {
                self.own_stag(client, stag)?;
                Ok(ServiceReply::MrInfo(engine.rnic().query_mr(stag)?))
            }
            Q::DeallocStag { client, stag } => {
                self.own_stag(client, stag)?;
                engine.rnic_mut().dealloc_stag(stag)?;
                self.client(client)?
                    .stags
                    .retain(|s| s.0 >> 8 != stag.0 >> 8);
                Ok(ServiceReply::Done)
            }
            Q::AllocMw {
                client,
                pd,
                kind,
                at,
            } => {
                self.own_pd(client, pd)?;
                let stag = match at {
                    Some(s) => engine.rnic_mut().alloc_mw_at(s, pd, kind)?,
                    None => engine.rnic_mut().alloc_mw(pd, kind)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::BindMwType1 { client, pd, bind } => {
                self.own_pd(client, pd)?;
                self.own_stag(client, bind.mw)?;
                self.own_stag(client, bind.mr)?;
                engine.rnic_mut().bind_mw_type1(pd, &bind)?;
                Ok(ServiceReply::Done)
            }
            Q::AddArena {
                client,
                arena,
                region,
            } => {
                let c = self.client(client)?;
                if c.arenas.len() >= crate::tables::ARENAS_MAX && !c.arenas.contains_key(&arena) {
                    return Err(ServiceError::TableFull);
                }
                c.arenas.insert(arena, region);
                Ok(ServiceReply::Done)
            }
            Q::RemoveArena { client, arena } => {
                self.client(client)?.arenas.remove(&arena);
                Ok(ServiceReply::Done)
            }
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
            Q::Fence => Ok(ServiceReply::Done),
            Q::Snapshot => Ok(self.snapshot(engine)),
        }
    }

    fn own_cq(&self, client: ClientId, cq: iwarp_types::CqId) -> Result<(), ServiceError> {
        match self.cqs.get(&cq) {
            Some(c) if c.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("CQ of another client")),
        }
    }

    fn own_srq(&self, client: ClientId, srq: iwarp_types::SrqId) -> Result<(), ServiceError> {
        match self.srqs.get(&srq) {
            Some(s) if s.client == client => Ok(()),
            _ => Err(ServiceError::Invalid("SRQ of another client")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create_qp(
        &mut self,
        engine: &mut Engine,
        client: ClientId,
        handle: u32,
        attr: iwarp_rdma::QpAttr,
        sig_all: bool,
        sq: WorkRing,
        rq: Option<WorkRing>,
    ) -> R {
        self.own_pd(client, attr.pd)?;
        self.own_cq(client, attr.send_cq)?;
        self.own_cq(client, attr.recv_cq)?;
        if let Some(srq) = attr.srq {
            self.own_srq(client, srq)?;
        }
        if attr.srq.is_some() == rq.is_some() {
            return Err(ServiceError::Invalid(
                "a QP has an RQ ring or an SRQ, not both",
            ));
        }
        let c = self.client(client)?;
        let rq_bit = rq.as_ref().map(|r| r.doorbell);
        if !c.bell_free(sq.doorbell) || rq_bit.is_some_and(|b| !c.bell_free(b) || b == sq.doorbell)
        {
            return Err(ServiceError::Invalid("doorbell bit out of range or in use"));
        }
        if self.qps.len() >= self.cfg.max_objects {
            return Err(ServiceError::TableFull);
        }
        let sq_ring = consumer(&sq.ring, RingKind::Send, SEND_SLOT_SIZE)?;
        let rq_ring = match &rq {
            Some(r) => Some((
                consumer(&r.ring, RingKind::Recv, RECV_SLOT_SIZE)?,
                r.doorbell,
            )),
            None => None,
        };
        let (id, got) = engine.rnic_mut().create_qp(&attr)?;
        // Its completions carry the client's handle, written once into the sub-ring
        // (cannot fail: the QP was just created).
        let _ = engine.rnic_mut().set_qp_completion_id(id, QpId(handle));
        let c = self.client(client)?;
        c.set_bell(sq.doorbell, Bell::Sq(id));
        if let Some(b) = rq_bit {
            c.set_bell(b, Bell::Rq(id));
        }
        if let Some(s) = attr.srq.and_then(|s| self.srqs.get_mut(&s)) {
            s.err_cq.get_or_insert(attr.recv_cq);
        }
        self.qps.insert(
            id,
            QpEntry {
                client,
                handle,
                sq: sq_ring,
                sq_bit: sq.doorbell,
                rq: rq_ring,
                send_cq: attr.send_cq,
                recv_cq: attr.recv_cq,
                sig_all,
                sq_pending: false,
                rq_pending: false,
                broken: false,
                conn: None,
                linger_since: None,
            },
        );
        self.reserve_lists();
        Ok(ServiceReply::Qp { qp: id, attr: got })
    }

    /// A client destroys `qp` during the graceful close it asked (rping and perftest
    /// disconnect, then destroy at once): once the FIN is out and every byte acknowledged
    /// the engine leaves the close to TCP, and the peer sees an orderly close, as Linux's
    /// iw_cm gives. Until then `CloseUnderway`, which the client library answers by
    /// asking again; after [`CLOSE_LINGER`] the destroy goes ahead and resets the
    /// connection. The core never waits: the client does, as `ibv_destroy_qp` blocks.
    fn linger_for_close(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        qp: QpId,
    ) -> Result<(), ServiceError> {
        if engine.release_closing_qp(now, qp) {
            self.counters.closes_released += 1;
            return Ok(());
        }
        if !engine.qp_close_underway(qp) {
            return Ok(());
        }
        let Some(q) = self.qps.get_mut(&qp) else {
            return Ok(());
        };
        let since = *q.linger_since.get_or_insert(now);
        if now.saturating_since(since) < CLOSE_LINGER {
            return Err(ServiceError::CloseUnderway);
        }
        self.counters.close_lingers_expired += 1;
        Ok(())
    }

    /// Aborts the QP's connection if it still has one, destroys it, frees its doorbell
    /// bits.
    fn destroy_qp(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        qp: QpId,
    ) -> Result<bool, ServiceError> {
        let had_conn = engine.qp_conn(qp).is_some();
        if had_conn {
            let _ = engine.abort(now, qp);
        }
        engine.rnic_mut().destroy_qp(qp)?;
        if let Some(q) = self.qps.remove(&qp) {
            if let Some((conn, _)) = q.conn {
                self.conns.remove(&conn);
            }
            if let Some(c) = self.clients.get_mut(&q.client) {
                c.set_bell(q.sq_bit, Bell::None);
                if let Some((_, b)) = q.rq {
                    c.set_bell(b, Bell::None);
                }
            }
        }
        self.pending.retain(|p| !matches!(p, crate::tables::PendingRing::Sq(q) | crate::tables::PendingRing::Rq(q) if *q == qp));
        Ok(had_conn)
    }

    /// Everything of `client` on this core, in the teardown order of docs/APPS.md.
    fn detach(&mut self, now: Instant, engine: &mut Engine, client: ClientId) -> R {
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
        self.pending.retain(|p| match p {
            crate::tables::PendingRing::Srq(s) => self.srqs.contains_key(s),
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

    fn snapshot(&self, engine: &Engine) -> ServiceReply {
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
