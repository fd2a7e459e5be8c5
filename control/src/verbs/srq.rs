//! Shared receive queues: one core each, their ring in the client's ring area.

use iwarp_rdma::srq::SrqModify;
use iwarp_shm_ring::RingLayout;
use iwarp_shm_service::{RingSpec, ServiceReply, ServiceRequest, WorkRing};
use iwarp_shm_socket::{ErrorCode, Response, RingRef, SrqCreate, SrqCreated, SrqHandle, SrqInfo};

use crate::client::{Client, Srq};
use crate::link::{err, no_such, CoreLink};
use crate::server::{Ctx, Res};

use super::{alloc_ring, entries_for, free_ring, full, unexpected};

pub(super) fn create_srq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: SrqCreate) -> Res {
    let pd = c.pds.get(a.pd.0).ok_or_else(|| no_such("PD", a.pd.0))?;
    let pd_cores = pd.per_core.clone();
    let entries = entries_for(
        a.max_wr,
        ctx.device.max_srq_wr,
        "SRQ max_wr",
        ErrorCode::TooManyWrsOrSges,
    )?;
    if a.max_sge == 0 || a.max_sge > ctx.device.max_sge {
        return Err(err(
            ErrorCode::TooManyWrsOrSges,
            format!(
                "SRQ max_sge {} is not in 1..={}",
                a.max_sge, ctx.device.max_sge
            ),
        ));
    }
    if a.limit > a.max_wr {
        return Err(err(ErrorCode::LimitOutOfRange, "SRQ limit above max_wr"));
    }
    let h = c
        .srqs
        .next_handle()
        .ok_or_else(|| full("SRQ", ctx.cfg.max_objects))?;
    let core = ctx.place(u64::from(c.id) << 32 | u64::from(h) | 1 << 63);
    let layout = RingLayout::shared_recv_queue(entries)
        .map_err(|e| err(ErrorCode::TooManyWrsOrSges, format!("{e}")))?;
    let bit = c.doorbells[core].alloc().ok_or_else(|| {
        err(
            ErrorCode::LimitReached,
            "doorbell bits of this core are used up",
        )
    })?;
    let (off, region) = match alloc_ring(c, layout, false) {
        Ok(x) => x,
        Err(e) => {
            c.doorbells[core].free(bit);
            return Err(e);
        }
    };
    let req = ServiceRequest::CreateSrq {
        client: c.id,
        srq: h,
        pd: pd_cores[core],
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        limit: a.limit,
        ring: WorkRing {
            ring: RingSpec { region, entries },
            doorbell: bit,
        },
    };
    let (id, max_wr, max_sge) = match ctx.call(core, req, "CreateSrq") {
        Ok(ServiceReply::Srq {
            srq,
            max_wr,
            max_sge,
        }) => (srq, max_wr, max_sge),
        r => {
            free_ring(c, off);
            c.doorbells[core].free(bit);
            return Err(unexpected(r, "CreateSrq"));
        }
    };
    let ring = RingRef {
        offset: off,
        entries,
        doorbell_bit: bit,
    };
    c.srqs.insert(Srq {
        core,
        id,
        pd: a.pd.0,
        ring,
        max_wr,
        max_sge,
        users: 0,
    });
    if let Some(p) = c.pds.get_mut(a.pd.0) {
        p.users += 1;
    }
    Ok(Response::Srq(SrqCreated {
        srq: SrqHandle(h),
        core: core as u32,
        doorbell_bit: bit,
        ring,
        max_wr,
        max_sge,
    })
    .into())
}

pub(super) fn modify_srq<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    h: SrqHandle,
    max_wr: Option<u32>,
    limit: Option<u32>,
) -> Res {
    let s = c.srqs.get(h.0).ok_or_else(|| no_such("SRQ", h.0))?;
    if max_wr.is_some_and(|n| n == 0 || n > s.ring.entries) {
        return Err(err(
            ErrorCode::TooManyWrsOrSges,
            format!("SRQ max_wr must be in 1..={} (its ring)", s.ring.entries),
        ));
    }
    let modify = SrqModify {
        max_wr: max_wr.map(|n| n as usize),
        limit: limit.map(|n| n as usize),
        arm: limit.is_some(),
    };
    let (core, id) = (s.core, s.id);
    match ctx.call(
        core,
        ServiceRequest::ModifySrq {
            client: c.id,
            srq: id,
            modify,
        },
        "ModifySrq",
    ) {
        Ok(ServiceReply::SrqMaxWr(n)) => {
            if let Some(s) = c.srqs.get_mut(h.0) {
                s.max_wr = n;
            }
        }
        r => return Err(unexpected(r, "ModifySrq")),
    }
    query_srq(ctx, c, h).map(|i| Response::SrqInfo(i).into())
}

pub(super) fn query_srq<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &Client,
    h: SrqHandle,
) -> Result<SrqInfo, crate::link::Error> {
    let s = c.srqs.get(h.0).ok_or_else(|| no_such("SRQ", h.0))?;
    match ctx.call(
        s.core,
        ServiceRequest::QuerySrq {
            client: c.id,
            srq: s.id,
        },
        "QuerySrq",
    ) {
        Ok(ServiceReply::SrqAttr(a)) => Ok(SrqInfo {
            max_wr: a.max_wr as u32,
            max_sge: a.max_sge as u32,
            limit: a.limit as u32,
            armed: a.armed,
        }),
        r => Err(unexpected(r, "QuerySrq")),
    }
}

pub(super) fn destroy_srq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: SrqHandle) -> Res {
    let s = c.srqs.get(h.0).ok_or_else(|| no_such("SRQ", h.0))?;
    if s.users > 0 {
        return Err(err(
            ErrorCode::InUse,
            format!("SRQ {:#x} is used by {} QP(s)", h.0, s.users),
        ));
    }
    let (core, id) = (s.core, s.id);
    ctx.call(
        core,
        ServiceRequest::DestroySrq {
            client: c.id,
            srq: id,
        },
        "DestroySrq",
    )?;
    if let Some(s) = c.srqs.remove(h.0) {
        free_ring(c, s.ring.offset);
        c.doorbells[core].free(s.ring.doorbell_bit);
        if let Some(p) = c.pds.get_mut(s.pd) {
            p.users = p.users.saturating_sub(1);
        }
    }
    Ok(Response::Ok.into())
}
