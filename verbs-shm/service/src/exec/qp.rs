//! Queue pairs: their SQ and RQ rings, and a destroy that lets a graceful close finish.
use iwarp_engine::Engine;
use iwarp_shm_ring::{RingKind, RECV_SLOT_SIZE, SEND_SLOT_SIZE};
use iwarp_types::{Instant, QpId};

use super::{consumer, R};
use crate::request::{ClientId, ServiceError, ServiceReply, ServiceRequest, WorkRing};
use crate::service::ShmService;
use crate::tables::{Bell, QpEntry};

/// How long a QP destroyed during its graceful close may wait for the close to get past
/// its FIN ([`ShmService::linger_for_close`]): a few retransmission timeouts.
pub(crate) const CLOSE_LINGER: iwarp_types::Duration = iwarp_types::Duration::from_secs(1);

impl ShmService {
    /// The QP requests (`execute` routes them here).
    pub(super) fn exec_qp(&mut self, now: Instant, engine: &mut Engine, req: ServiceRequest) -> R {
        use ServiceRequest as Q;
        match req {
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
            _ => Err(ServiceError::Invalid("not a QP request")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn create_qp(
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
    pub(super) fn linger_for_close(
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

    /// Resets the QP's connection if it still has one (unless its graceful close is past
    /// its FIN: then TCP finishes it), destroys the QP, frees its doorbell bits.
    pub(super) fn destroy_qp(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        qp: QpId,
    ) -> Result<bool, ServiceError> {
        let had_conn = engine.qp_conn(qp).is_some();
        if had_conn {
            // A close past its FIN (also when the client went away) finishes cleanly;
            // anything else is reset.
            if engine.release_closing_qp(now, qp) {
                self.counters.closes_released += 1;
            } else {
                let _ = engine.abort(now, qp);
            }
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
        self.pending_sq.retain(|q| *q != qp);
        self.pending_rx
            .retain(|p| !matches!(p, crate::tables::RxRing::Rq(q) if *q == qp));
        Ok(had_conn)
    }
}
