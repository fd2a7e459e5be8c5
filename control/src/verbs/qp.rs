//! Queue pairs: created on one core with their SQ and RQ rings in the client's ring area;
//! modified, queried and destroyed through that core's service.

use iwarp_rdma::{QpAttr, QpModify};
use iwarp_shm_ring::{Region, RingLayout};
use iwarp_shm_service::{RingSpec, ServiceReply, ServiceRequest, WorkRing};
use iwarp_shm_socket::{
    CqHandle, ErrorCode, QpCap, QpCreate, QpCreated, QpHandle, QpInfoReply, QpModifyReq,
    QpStateValue, Response, RingRef, TermInfo,
};
use iwarp_types::QpState;

use crate::client::{Client, CmState, Qp};
use crate::link::{err, no_such, CoreLink};
use crate::server::{Ctx, Res};

use super::{alloc_ring, entries_for, free_ring, full, unexpected};

fn check_qp_caps<C: CoreLink>(ctx: &Ctx<C>, a: &QpCreate) -> Result<(), crate::link::Error> {
    let d = &ctx.device;
    if a.ord > d.max_ord || a.ird > d.max_ird {
        return Err(err(
            ErrorCode::InvalidIrdOrd,
            format!(
                "ORD {} / IRD {} exceed {} / {}",
                a.ord, a.ird, d.max_ord, d.max_ird
            ),
        ));
    }
    let cap = a.cap;
    if cap.max_send_sge > d.max_sge || (a.srq.is_none() && cap.max_recv_sge > d.max_sge) {
        return Err(err(
            ErrorCode::TooManyWrsOrSges,
            format!("at most {} SGEs per WR", d.max_sge),
        ));
    }
    Ok(())
}

/// The client objects a new QP names, resolved to their per-core engine ids.
struct QpObjects {
    /// The PD's id on every core.
    pd: Vec<iwarp_types::PdId>,
    /// The send CQ's id on every core.
    send_cq: Vec<iwarp_types::CqId>,
    /// The receive CQ's id on every core.
    recv_cq: Vec<iwarp_types::CqId>,
    /// The SRQ's core and id.
    srq: Option<(usize, iwarp_types::SrqId)>,
    /// The core of the connection request the QP is for (`for_cm_id`).
    cm_core: Option<usize>,
}

fn qp_objects(c: &Client, a: &QpCreate) -> Result<QpObjects, crate::link::Error> {
    let pd = c.pds.get(a.pd.0).ok_or_else(|| no_such("PD", a.pd.0))?;
    let cq = |h: CqHandle| {
        c.cqs
            .get(h.0)
            .map(|q| q.per_core.clone())
            .ok_or_else(|| no_such("CQ", h.0))
    };
    let srq = match a.srq {
        Some(s) => Some(
            c.srqs
                .get(s.0)
                .map(|x| (x.core, x.id))
                .ok_or_else(|| no_such("SRQ", s.0))?,
        ),
        None => None,
    };
    let cm_core = match a.for_cm_id {
        Some(id) => match c
            .cm_ids
            .get(id.0)
            .ok_or_else(|| no_such("CM id", id.0))?
            .state
        {
            CmState::Requested { core, .. } => Some(core),
            _ => {
                return Err(err(
                    ErrorCode::InvalidCmState,
                    "for_cm_id names no pending connection request",
                ))
            }
        },
        None => None,
    };
    Ok(QpObjects {
        pd: pd.per_core.clone(),
        send_cq: cq(a.send_cq)?,
        recv_cq: cq(a.recv_cq)?,
        srq,
        cm_core,
    })
}

/// The core a new QP goes to: its SRQ's, its connection request's (they must agree), or
/// the placement policy's choice.
fn qp_core<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &Client,
    h: u32,
    o: &QpObjects,
) -> Result<usize, crate::link::Error> {
    Ok(match (o.srq, o.cm_core) {
        (Some((s, _)), Some(k)) if s != k => {
            return Err(err(
                ErrorCode::WrongCore,
                format!("the SRQ is on core {s}, the connection request on core {k}"),
            ))
        }
        (Some((s, _)), _) => s,
        (None, Some(k)) => k,
        (None, None) => ctx.place(u64::from(c.id) << 32 | u64::from(h)),
    })
}

/// A work ring of a QP placed in the client's ring area, with its doorbell bit.
#[derive(Clone)]
struct WorkRingAt {
    offset: u64,
    region: Region,
    entries: u32,
    doorbell: u32,
}

impl WorkRingAt {
    /// A consumer ring of `entries` on `core`, with a doorbell bit of that core.
    fn alloc(
        c: &mut Client,
        core: usize,
        layout: Result<RingLayout, iwarp_shm_ring::LayoutError>,
        entries: u32,
    ) -> Result<WorkRingAt, crate::link::Error> {
        let layout = layout.map_err(|e| err(ErrorCode::TooManyWrsOrSges, format!("{e}")))?;
        let doorbell = c.doorbells[core].alloc().ok_or_else(|| {
            err(
                ErrorCode::LimitReached,
                "doorbell bits of this core are used up",
            )
        })?;
        match alloc_ring(c, layout, false) {
            Ok((offset, region)) => Ok(WorkRingAt {
                offset,
                region,
                entries,
                doorbell,
            }),
            Err(e) => {
                c.doorbells[core].free(doorbell);
                Err(e)
            }
        }
    }

    /// Gives the ring and its doorbell bit back.
    fn free(&self, c: &mut Client, core: usize) {
        free_ring(c, self.offset);
        c.doorbells[core].free(self.doorbell);
    }

    fn spec(&self) -> WorkRing {
        WorkRing {
            ring: RingSpec {
                region: self.region.clone(),
                entries: self.entries,
            },
            doorbell: self.doorbell,
        }
    }

    fn reference(&self) -> RingRef {
        RingRef {
            offset: self.offset,
            entries: self.entries,
            doorbell_bit: self.doorbell,
        }
    }
}

/// The engine attributes of a client's QP on `core`.
fn engine_qp_attr(a: &QpCreate, o: &QpObjects, core: usize) -> QpAttr {
    let srq = o.srq.is_some();
    QpAttr {
        recv_cq: o.recv_cq[core],
        srq: o.srq.map(|s| s.1),
        sq_depth: a.cap.max_send_wr,
        rq_depth: if srq { 0 } else { a.cap.max_recv_wr },
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: if srq { 0 } else { a.cap.max_recv_sge },
        ord: a.ord,
        ird: a.ird,
        inbound_read: a.remote_read,
        inbound_write: a.remote_write,
        bind_enabled: a.bind_enabled,
        privileged: false,
        // Fast-Register is safe for clients: the service resolves a FastReg's arena
        // through the client's own arenas and the engine checks the PD (docs/APPS.md).
        fast_reg: true,
        ..QpAttr::new(o.pd[core], o.send_cq[core])
    }
}

/// Create QP: the objects it names resolved, its limits checked, a core chosen, its SQ
/// (and RQ unless it has an SRQ) placed in the client's ring area, then the core's
/// service creates the engine QP. Whatever was allocated is given back on a failure.
pub(super) fn create_qp<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: QpCreate) -> Res {
    let o = qp_objects(c, &a)?;
    check_qp_caps(ctx, &a)?;
    let max_wr = ctx.device.max_qp_wr;
    let code = ErrorCode::TooManyWrsOrSges;
    let sq_entries = entries_for(a.cap.max_send_wr, max_wr, "max_send_wr", code)?;
    let rq_entries = match o.srq {
        None => Some(entries_for(a.cap.max_recv_wr, max_wr, "max_recv_wr", code)?),
        Some(_) => None,
    };
    if c.qps.len() >= ctx.cfg.max_qps as usize {
        return Err(err(
            ErrorCode::LimitReached,
            format!(
                "this client holds QPs up to control.max_qps ({})",
                ctx.cfg.max_qps
            ),
        ));
    }
    let h = c
        .qps
        .next_handle()
        .ok_or_else(|| full("QP", ctx.cfg.max_objects))?;
    let core = qp_core(ctx, c, h, &o)?;
    let sq = WorkRingAt::alloc(c, core, RingLayout::send_queue(sq_entries), sq_entries)?;
    let rq = match rq_entries {
        Some(n) => match WorkRingAt::alloc(c, core, RingLayout::recv_queue(n), n) {
            Ok(r) => Some(r),
            Err(e) => {
                sq.free(c, core);
                return Err(e);
            }
        },
        None => None,
    };
    let req = ServiceRequest::CreateQp {
        client: c.id,
        qp: h,
        attr: engine_qp_attr(&a, &o, core),
        sq_sig_all: a.sq_sig_all,
        sq: sq.spec(),
        rq: rq.as_ref().map(WorkRingAt::spec),
    };
    let (id, got) = match ctx.call(core, req, "CreateQp") {
        Ok(ServiceReply::Qp { qp, attr }) => (qp, attr),
        r => {
            sq.free(c, core);
            if let Some(rq) = &rq {
                rq.free(c, core);
            }
            return Err(unexpected(r, "CreateQp"));
        }
    };
    let srq = o.srq.is_some();
    let cap = QpCap {
        max_send_wr: got.sq_depth,
        max_recv_wr: if srq { 0 } else { got.rq_depth },
        max_send_sge: got.max_send_sge,
        max_recv_sge: if srq { 0 } else { got.max_recv_sge },
    };
    let (sq, rq) = (sq.reference(), rq.as_ref().map(WorkRingAt::reference));
    c.qps.insert(Qp {
        core,
        id,
        pd: a.pd.0,
        send_cq: a.send_cq.0,
        recv_cq: a.recv_cq.0,
        srq: a.srq.map(|s| s.0),
        sq,
        rq,
        cap,
        ord: got.ord,
        ird: got.ird,
        cm: None,
    });
    bump(c, a.pd.0, a.send_cq.0, a.recv_cq.0, a.srq.map(|s| s.0), 1);
    Ok(Response::Qp(QpCreated {
        qp: QpHandle(h),
        core: core as u32,
        sq,
        rq,
        cap,
    })
    .into())
}

/// Adds `d` (+1 or -1) to the users of a QP's PD, CQs and SRQ.
fn bump(c: &mut Client, pd: u32, scq: u32, rcq: u32, srq: Option<u32>, d: i32) {
    let f = |u: &mut u32| *u = u.saturating_add_signed(d);
    if let Some(x) = c.pds.get_mut(pd) {
        f(&mut x.users);
    }
    if let Some(x) = c.cqs.get_mut(scq) {
        f(&mut x.users);
    }
    if let Some(x) = c.cqs.get_mut(rcq) {
        f(&mut x.users);
    }
    if let Some(x) = srq.and_then(|s| c.srqs.get_mut(s)) {
        f(&mut x.users);
    }
}

fn state_of(s: QpStateValue) -> QpState {
    match s {
        QpStateValue::Idle => QpState::Idle,
        QpStateValue::Rts => QpState::Rts,
        QpStateValue::Closing => QpState::Closing,
        QpStateValue::Terminate => QpState::Terminate,
        QpStateValue::Error => QpState::Error,
    }
}

pub(crate) fn state_value(s: QpState) -> QpStateValue {
    match s {
        QpState::Idle => QpStateValue::Idle,
        QpState::Rts => QpStateValue::Rts,
        QpState::Closing => QpStateValue::Closing,
        QpState::Terminate => QpStateValue::Terminate,
        QpState::Error => QpStateValue::Error,
    }
}

pub(super) fn modify_qp<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    h: QpHandle,
    m: QpModifyReq,
) -> Res {
    let qp = c.qps.get(h.0).ok_or_else(|| no_such("QP", h.0))?;
    if m.max_send_wr.is_some_and(|n| n > qp.sq.entries)
        || m.max_recv_wr
            .is_some_and(|n| qp.rq.is_none_or(|r| n > r.entries))
    {
        return Err(err(
            ErrorCode::TooManyWrsOrSges,
            "a QP's queues cannot grow past their rings",
        ));
    }
    let modify = QpModify {
        state: m.state.map(state_of),
        ord: m.ord,
        ird: m.ird,
        sq_depth: m.max_send_wr,
        rq_depth: m.max_recv_wr,
        rq_limit: m.rq_limit,
        arm_rq_limit: m.rq_limit.is_some(),
    };
    let (core, id) = (qp.core, qp.id);
    ctx.call(
        core,
        ServiceRequest::ModifyQp {
            client: c.id,
            qp: id,
            modify,
        },
        "ModifyQp",
    )?;
    if let Some(q) = c.qps.get_mut(h.0) {
        q.cap.max_send_wr = m.max_send_wr.unwrap_or(q.cap.max_send_wr);
        q.cap.max_recv_wr = m.max_recv_wr.unwrap_or(q.cap.max_recv_wr);
        q.ord = m.ord.unwrap_or(q.ord);
        q.ird = m.ird.unwrap_or(q.ird);
    }
    Ok(Response::Ok.into())
}

pub(crate) fn query_qp<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &Client,
    h: QpHandle,
) -> Result<QpInfoReply, crate::link::Error> {
    let qp = c.qps.get(h.0).ok_or_else(|| no_such("QP", h.0))?;
    let info = match ctx.call(
        qp.core,
        ServiceRequest::QueryQp {
            client: c.id,
            qp: qp.id,
        },
        "QueryQp",
    ) {
        Ok(ServiceReply::QpInfo(i)) => i,
        r => return Err(unexpected(r, "QueryQp")),
    };
    let term = |r: Option<iwarp_rdma::TermRecord>| {
        r.map(|t| TermInfo {
            code: t.code.as_u16(),
        })
    };
    let (sent, received) = match info.terminate {
        Some(t) if t.local => (term(Some(t)), term(info.terminate_received)),
        Some(t) => (None, term(Some(t))),
        None => (None, None),
    };
    Ok(QpInfoReply {
        qp: h,
        state: state_value(info.state),
        core: qp.core as u32,
        cap: qp.cap,
        ord: info.attr.ord,
        ird: info.attr.ird,
        connected: info.conn.is_some(),
        terminate_sent: sent,
        terminate_received: received,
    })
}

/// Destroys a QP (the engine aborts its connection first).
pub(crate) fn destroy_qp<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: QpHandle) -> Res {
    let qp = c.qps.get(h.0).ok_or_else(|| no_such("QP", h.0))?;
    let (core, id) = (qp.core, qp.id);
    ctx.call(
        core,
        ServiceRequest::DestroyQp {
            client: c.id,
            qp: id,
        },
        "DestroyQp",
    )?;
    if let Some(q) = c.qps.remove(h.0) {
        free_ring(c, q.sq.offset);
        c.doorbells[core].free(q.sq.doorbell_bit);
        if let Some(r) = q.rq {
            free_ring(c, r.offset);
            c.doorbells[core].free(r.doorbell_bit);
        }
        bump(c, q.pd, q.send_cq, q.recv_cq, q.srq, -1);
        if let Some(cm) = q.cm.and_then(|id| c.cm_ids.get_mut(id)) {
            cm.qp = None;
            cm.state = CmState::Closed;
        }
    }
    Ok(Response::Ok.into())
}
