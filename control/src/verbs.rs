//! Dispatch of the verbs requests, and PDs, CQs, QPs, SRQs and completion channels.

use std::os::fd::{AsRawFd, OwnedFd};

use iwarp_rdma::srq::SrqModify;
use iwarp_rdma::{QpAttr, QpModify};
use iwarp_shm_ring::CqControl;
use iwarp_shm_ring::{Consumer, Producer, Region, RingLayout, CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET};
use iwarp_shm_service::{RingSpec, ServiceReply, ServiceRequest, WorkRing};
use iwarp_shm_socket::{
    ChannelHandle, CqCreate, CqCreated, CqHandle, ErrorCode, PdHandle, QpCap, QpCreate, QpCreated,
    QpHandle, QpInfoReply, QpModifyReq, QpStateValue, Request, Response, RingRef, SrqCreate,
    SrqCreated, SrqHandle, SrqInfo, TermInfo,
};
use iwarp_types::QpState;

use crate::client::{Area, Client, CmState, CompChannel, Cq, Pd, Qp, Srq};
use crate::link::{err, no_such, CoreLink};
use crate::server::{Ctx, Res};

/// Most resizes of one CQ (their old sub-rings are kept until the CQ goes).
const RESIZES_MAX: usize = 8;

/// Serves one request of a welcomed client (not Hello, Bye or Admin).
pub(crate) fn dispatch<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    req: Request,
    fds: Vec<OwnedFd>,
) -> Res {
    let takes_fd = matches!(req, Request::CreateChannel | Request::ImportArena { .. });
    if !takes_fd && !fds.is_empty() {
        return Err(err(
            ErrorCode::BadFd,
            format!("{} unexpected descriptor(s) with this request", fds.len()),
        ));
    }
    match req {
        Request::QueryDevice => {
            let mut d = ctx.device.clone();
            d.cores = ctx.ncores() as u32;
            Ok(Response::Device(d).into())
        }
        Request::QueryPort(i) => ctx
            .ports
            .get(i as usize)
            .cloned()
            .map(|p| Response::Port(p).into())
            .ok_or_else(|| {
                err(
                    ErrorCode::InvalidArgument,
                    format!("port {i} does not exist"),
                )
            }),
        Request::AllocPd => alloc_pd(ctx, c),
        Request::DeallocPd(h) => dealloc_pd(ctx, c, h),
        Request::CreateChannel => create_channel(c, fds),
        Request::DestroyChannel(h) => destroy_channel(c, h),
        Request::CreateCq(a) => create_cq(ctx, c, a),
        Request::ResizeCq { cq, depth } => resize_cq(ctx, c, cq, depth),
        Request::DestroyCq(h) => destroy_cq(ctx, c, h),
        Request::CreateQp(a) => create_qp(ctx, c, a),
        Request::ModifyQp { qp, modify } => modify_qp(ctx, c, qp, modify),
        Request::QueryQp(h) => query_qp(ctx, c, h).map(|i| Response::QpInfo(i).into()),
        Request::DestroyQp(h) => destroy_qp(ctx, c, h),
        Request::CreateSrq(a) => create_srq(ctx, c, a),
        Request::ModifySrq { srq, max_wr, limit } => modify_srq(ctx, c, srq, max_wr, limit),
        Request::QuerySrq(h) => query_srq(ctx, c, h).map(|i| Response::SrqInfo(i).into()),
        Request::DestroySrq(h) => destroy_srq(ctx, c, h),
        Request::AllocArena { .. }
        | Request::ImportArena { .. }
        | Request::FreeArena(_)
        | Request::RegMr(_)
        | Request::ReregMr { .. }
        | Request::DeregMr(_)
        | Request::AllocMr { .. }
        | Request::QueryMr(_)
        | Request::AllocMw { .. }
        | Request::BindMw(_)
        | Request::DeallocMw(_) => crate::memory::dispatch(ctx, c, req, fds),
        Request::CreateCmId
        | Request::DestroyCmId(_)
        | Request::Listen { .. }
        | Request::Connect { .. }
        | Request::Accept { .. }
        | Request::Reject { .. }
        | Request::Disconnect(_)
        | Request::Abort(_) => crate::cm::dispatch(ctx, c, req),
        Request::Hello { .. } | Request::Bye | Request::Admin(_) => Err(err(
            ErrorCode::Internal,
            "request routed to the wrong handler",
        )),
    }
}

fn full(kind: &str, max: u32) -> crate::link::Error {
    err(
        ErrorCode::LimitReached,
        format!("this client holds {kind}s up to control.max_objects ({max})"),
    )
}

fn area(c: &mut Client) -> Result<&mut Area, crate::link::Error> {
    c.area
        .as_mut()
        .ok_or_else(|| err(ErrorCode::Internal, "client without a ring area"))
}

/// Places a ring of `layout` in the client's ring heap and initialises its header (the
/// daemon's side: consumer of SQ/RQ/SRQ rings, producer of CQ rings).
pub(crate) fn alloc_ring(
    c: &mut Client,
    layout: RingLayout,
    producer: bool,
) -> Result<(u64, Region), crate::link::Error> {
    let a = area(c)?;
    let off = a.heap.alloc(layout.total_bytes() as u64).ok_or_else(|| {
        err(
            ErrorCode::InsufficientResources,
            "the client's ring area is full",
        )
    })?;
    let made = a.view.ring_region(off, layout).and_then(|r| {
        if producer {
            Producer::init(r.clone(), layout).map(|_| r)
        } else {
            Consumer::init(r.clone(), layout).map(|_| r)
        }
    });
    match made {
        Ok(r) => Ok((off, r)),
        Err(e) => {
            a.heap.free(off);
            Err(err(ErrorCode::Internal, format!("ring: {e}")))
        }
    }
}

pub(crate) fn free_ring(c: &mut Client, off: u64) {
    if let Some(a) = c.area.as_mut() {
        a.heap.free(off);
    }
}

fn entries_for(n: u32, max: u32, what: &str, code: ErrorCode) -> Result<u32, crate::link::Error> {
    if n == 0 || n > max {
        return Err(err(code, format!("{what} {n} is not in 1..={max}")));
    }
    n.max(2)
        .checked_next_power_of_two()
        .filter(|e| *e <= RingLayout::MAX_ENTRIES)
        .ok_or_else(|| err(code, format!("{what} {n} is too large")))
}

/// Entries of the CQ sub-rings of a CQ of `depth`: the sub-ring is the engine CQ and keeps
/// one slot for the marker of a resize, so `depth + 1` rounded up to a power of two.
fn cq_entries(depth: u32, max: u32) -> Result<u32, crate::link::Error> {
    entries_for(depth, max, "CQ depth", ErrorCode::InvalidCqSize)?;
    entries_for(depth + 1, u32::MAX, "CQ depth", ErrorCode::InvalidCqSize)
}

fn alloc_pd<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client) -> Res {
    if c.pds.next_handle().is_none() {
        return Err(full("PD", ctx.cfg.max_objects));
    }
    let mut per_core = Vec::with_capacity(ctx.ncores());
    for core in 0..ctx.ncores() {
        match ctx.call(core, ServiceRequest::AllocPd { client: c.id }, "AllocPd") {
            Ok(ServiceReply::Pd(p)) => per_core.push(p),
            r => {
                for (i, pd) in per_core.into_iter().enumerate() {
                    let _ = ctx.call(
                        i,
                        ServiceRequest::DeallocPd { client: c.id, pd },
                        "DeallocPd",
                    );
                }
                return Err(unexpected(r, "AllocPd"));
            }
        }
    }
    let h = c
        .pds
        .insert(Pd { per_core, users: 0 })
        .ok_or_else(|| full("PD", ctx.cfg.max_objects))?;
    Ok(Response::Pd(PdHandle(h)).into())
}

/// An error for a reply of the wrong kind (or the error itself).
pub(crate) fn unexpected(
    r: Result<ServiceReply, crate::link::Error>,
    what: &str,
) -> crate::link::Error {
    match r {
        Err(e) => e,
        Ok(other) => err(
            ErrorCode::Internal,
            format!("{what}: unexpected reply {other:?}"),
        ),
    }
}

fn dealloc_pd<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: PdHandle) -> Res {
    let pd = c.pds.get(h.0).ok_or_else(|| no_such("PD", h.0))?;
    if pd.users > 0 {
        return Err(err(
            ErrorCode::InUse,
            format!("PD {:#x} is used by {} object(s)", h.0, pd.users),
        ));
    }
    let per_core = pd.per_core.clone();
    let mut first = None;
    for (core, pd) in per_core.into_iter().enumerate() {
        if let Err(e) = ctx.call(
            core,
            ServiceRequest::DeallocPd { client: c.id, pd },
            "DeallocPd",
        ) {
            first.get_or_insert(e);
        }
    }
    c.pds.remove(h.0);
    match first {
        Some(e) => Err(e),
        None => Ok(Response::Ok.into()),
    }
}

fn is_eventfd(fd: &OwnedFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.to_string_lossy() == "anon_inode:[eventfd]")
        .unwrap_or(false)
}

fn create_channel(c: &mut Client, mut fds: Vec<OwnedFd>) -> Res {
    if fds.len() != 1 {
        return Err(err(
            ErrorCode::BadFd,
            format!(
                "CreateChannel needs exactly one eventfd, {} came",
                fds.len()
            ),
        ));
    }
    let fd = fds.remove(0);
    if !is_eventfd(&fd) {
        return Err(err(
            ErrorCode::BadFd,
            "CreateChannel: the descriptor is not an eventfd",
        ));
    }
    let h = c
        .channels
        .insert(CompChannel { fd, users: 0 })
        .ok_or_else(|| {
            err(
                ErrorCode::LimitReached,
                "completion channels up to control.max_objects",
            )
        })?;
    Ok(Response::Channel(ChannelHandle(h)).into())
}

fn destroy_channel(c: &mut Client, h: ChannelHandle) -> Res {
    let ch = c.channels.get(h.0).ok_or_else(|| no_such("channel", h.0))?;
    if ch.users > 0 {
        return Err(err(
            ErrorCode::InUse,
            format!("channel {:#x} is used by {} CQ(s)", h.0, ch.users),
        ));
    }
    c.channels.remove(h.0);
    Ok(Response::Ok.into())
}

fn control_line(c: &Client, index: u32) -> Result<CqControl, crate::link::Error> {
    let a = c
        .area
        .as_ref()
        .ok_or_else(|| err(ErrorCode::Internal, "no ring area"))?;
    let off = CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES;
    let r = a
        .mapping
        .region()
        .sub(off, CQ_CONTROL_BYTES)
        .map_err(|e| err(ErrorCode::Internal, format!("{e}")))?;
    for w in 0..CQ_CONTROL_BYTES / 8 {
        r.store_u64(w * 8, 0);
    }
    CqControl::new(r).map_err(|e| err(ErrorCode::Internal, format!("{e}")))
}

fn create_cq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: CqCreate) -> Res {
    let entries = cq_entries(a.depth, ctx.device.max_cqe)?;
    if let Some(ch) = a.channel {
        c.channels
            .get(ch.0)
            .ok_or_else(|| no_such("channel", ch.0))?;
    }
    let h = c
        .cqs
        .next_handle()
        .ok_or_else(|| full("CQ", ctx.cfg.max_objects))?;
    let index = h & ((1 << crate::tables::SLOT_BITS) - 1);
    let layout = RingLayout::completion_queue(entries)
        .map_err(|e| err(ErrorCode::InvalidCqSize, format!("{e}")))?;
    let mut rings: Vec<RingRef> = Vec::new();
    let mut per_core = Vec::new();
    let mut failure = None;
    for core in 0..ctx.ncores() {
        let (off, region) = match alloc_ring(c, layout, true) {
            Ok(x) => x,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        rings.push(RingRef {
            offset: off,
            entries,
            doorbell_bit: u32::MAX,
        });
        let control = match control_line(c, index) {
            Ok(x) => x,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let req = ServiceRequest::CreateCq {
            client: c.id,
            cq: h,
            depth: a.depth,
            ring: RingSpec { region, entries },
            control,
        };
        match ctx.call(core, req, "CreateCq") {
            Ok(ServiceReply::Cq { cq, .. }) => per_core.push(cq),
            r => {
                failure = Some(unexpected(r, "CreateCq"));
                break;
            }
        }
    }
    if let Some(e) = failure {
        for (core, cq) in per_core.into_iter().enumerate() {
            let _ = ctx.call(
                core,
                ServiceRequest::DestroyCq { client: c.id, cq },
                "DestroyCq",
            );
        }
        for r in rings {
            free_ring(c, r.offset);
        }
        return Err(e);
    }
    if let Some(ch) = a.channel {
        if let Some(x) = c.channels.get_mut(ch.0) {
            x.users += 1;
        }
    }
    let created = CqCreated {
        cq: CqHandle(h),
        depth: a.depth,
        rings: rings.clone(),
        control: (CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES) as u64,
    };
    c.cqs.insert(Cq {
        per_core,
        rings,
        depth: a.depth,
        channel: a.channel.map(|x| x.0),
        retired: Vec::new(),
        control: index,
        users: 0,
    });
    Ok(Response::Cq(created).into())
}

fn resize_cq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: CqHandle, depth: u32) -> Res {
    let cq = c.cqs.get(h.0).ok_or_else(|| no_such("CQ", h.0))?;
    let entries = cq_entries(depth, ctx.device.max_cqe)?;
    if cq.retired.len() + ctx.ncores() > RESIZES_MAX * ctx.ncores() {
        return Err(err(
            ErrorCode::LimitReached,
            format!("a CQ may be resized at most {RESIZES_MAX} times"),
        ));
    }
    let per_core = cq.per_core.clone();
    let layout = RingLayout::completion_queue(entries)
        .map_err(|e| err(ErrorCode::InvalidCqSize, format!("{e}")))?;
    for (core, engine_cq) in per_core.into_iter().enumerate() {
        let (off, region) = alloc_ring(c, layout, true)?;
        let req = ServiceRequest::ResizeCq {
            client: c.id,
            cq: engine_cq,
            depth,
            ring: RingSpec { region, entries },
        };
        match ctx.call(core, req, "ResizeCq") {
            Ok(ServiceReply::Cq { .. }) => {
                if let Some(cq) = c.cqs.get_mut(h.0) {
                    let old = std::mem::replace(
                        &mut cq.rings[core],
                        RingRef {
                            offset: off,
                            entries,
                            doorbell_bit: u32::MAX,
                        },
                    );
                    cq.retired.push(old.offset);
                    cq.depth = depth;
                }
            }
            r => {
                free_ring(c, off);
                return Err(unexpected(r, "ResizeCq"));
            }
        }
    }
    let cq = c.cqs.get(h.0).ok_or_else(|| no_such("CQ", h.0))?;
    let control = (CQ_CONTROL_OFFSET + cq.control as usize * CQ_CONTROL_BYTES) as u64;
    Ok(Response::Cq(CqCreated {
        cq: h,
        depth,
        rings: cq.rings.clone(),
        control,
    })
    .into())
}

fn destroy_cq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: CqHandle) -> Res {
    let cq = c.cqs.get(h.0).ok_or_else(|| no_such("CQ", h.0))?;
    if cq.users > 0 {
        return Err(err(
            ErrorCode::InUse,
            format!("CQ {:#x} is used by {} QP(s)", h.0, cq.users),
        ));
    }
    let per_core = cq.per_core.clone();
    let mut first = None;
    for (core, engine_cq) in per_core.into_iter().enumerate() {
        if let Err(e) = ctx.call(
            core,
            ServiceRequest::DestroyCq {
                client: c.id,
                cq: engine_cq,
            },
            "DestroyCq",
        ) {
            first.get_or_insert(e);
        }
    }
    if let Some(cq) = c.cqs.remove(h.0) {
        for off in cq
            .rings
            .iter()
            .map(|r| r.offset)
            .chain(cq.retired.iter().copied())
        {
            free_ring(c, off);
        }
        if let Some(ch) = cq.channel.and_then(|ch| c.channels.get_mut(ch)) {
            ch.users = ch.users.saturating_sub(1);
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(Response::Ok.into()),
    }
}

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

fn create_qp<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: QpCreate) -> Res {
    let pd = c.pds.get(a.pd.0).ok_or_else(|| no_such("PD", a.pd.0))?;
    let pd_cores = pd.per_core.clone();
    let scq = c
        .cqs
        .get(a.send_cq.0)
        .ok_or_else(|| no_such("CQ", a.send_cq.0))?
        .per_core
        .clone();
    let rcq = c
        .cqs
        .get(a.recv_cq.0)
        .ok_or_else(|| no_such("CQ", a.recv_cq.0))?
        .per_core
        .clone();
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
    check_qp_caps(ctx, &a)?;
    let max_wr = ctx.device.max_qp_wr;
    let sq_entries = entries_for(
        a.cap.max_send_wr,
        max_wr,
        "max_send_wr",
        ErrorCode::TooManyWrsOrSges,
    )?;
    let rq_entries = match srq {
        None => Some(entries_for(
            a.cap.max_recv_wr,
            max_wr,
            "max_recv_wr",
            ErrorCode::TooManyWrsOrSges,
        )?),
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
    let core = match (srq, cm_core) {
        (Some((s, _)), Some(k)) if s != k => {
            return Err(err(
                ErrorCode::WrongCore,
                format!("the SRQ is on core {s}, the connection request on core {k}"),
            ))
        }
        (Some((s, _)), _) => s,
        (None, Some(k)) => k,
        (None, None) => ctx.place(u64::from(c.id) << 32 | u64::from(h)),
    };
    let bad_layout = |e| err(ErrorCode::TooManyWrsOrSges, format!("{e}"));
    let sq_layout = RingLayout::send_queue(sq_entries).map_err(bad_layout)?;
    let sq_bit = c.doorbells[core].alloc().ok_or_else(|| {
        err(
            ErrorCode::LimitReached,
            "doorbell bits of this core are used up",
        )
    })?;
    let (sq_off, sq_region) = match alloc_ring(c, sq_layout, false) {
        Ok(x) => x,
        Err(e) => {
            c.doorbells[core].free(sq_bit);
            return Err(e);
        }
    };
    let mut rq = None;
    if let Some(n) = rq_entries {
        let made = RingLayout::recv_queue(n).map_err(bad_layout).and_then(|l| {
            let bit = c.doorbells[core].alloc().ok_or_else(|| {
                err(
                    ErrorCode::LimitReached,
                    "doorbell bits of this core are used up",
                )
            })?;
            match alloc_ring(c, l, false) {
                Ok((off, region)) => Ok((off, region, bit, n)),
                Err(e) => {
                    c.doorbells[core].free(bit);
                    Err(e)
                }
            }
        });
        match made {
            Ok(x) => rq = Some(x),
            Err(e) => {
                free_ring(c, sq_off);
                c.doorbells[core].free(sq_bit);
                return Err(e);
            }
        }
    }
    let attr = QpAttr {
        recv_cq: rcq[core],
        srq: srq.map(|s| s.1),
        sq_depth: a.cap.max_send_wr,
        rq_depth: if srq.is_some() { 0 } else { a.cap.max_recv_wr },
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: if srq.is_some() { 0 } else { a.cap.max_recv_sge },
        ord: a.ord,
        ird: a.ird,
        inbound_read: a.remote_read,
        inbound_write: a.remote_write,
        bind_enabled: a.bind_enabled,
        privileged: false,
        // Fast-Register is safe for clients: the service resolves a FastReg's arena
        // through the client's own arenas and the engine checks the PD (docs/APPS.md).
        fast_reg: true,
        ..QpAttr::new(pd_cores[core], scq[core])
    };
    let req = ServiceRequest::CreateQp {
        client: c.id,
        qp: h,
        attr,
        sq_sig_all: a.sq_sig_all,
        sq: WorkRing {
            ring: RingSpec {
                region: sq_region,
                entries: sq_entries,
            },
            doorbell: sq_bit,
        },
        rq: rq.as_ref().map(|(_, region, bit, n)| WorkRing {
            ring: RingSpec {
                region: region.clone(),
                entries: *n,
            },
            doorbell: *bit,
        }),
    };
    let (id, got) = match ctx.call(core, req, "CreateQp") {
        Ok(ServiceReply::Qp { qp, attr }) => (qp, attr),
        r => {
            free_ring(c, sq_off);
            c.doorbells[core].free(sq_bit);
            if let Some((off, _, bit, _)) = rq {
                free_ring(c, off);
                c.doorbells[core].free(bit);
            }
            return Err(unexpected(r, "CreateQp"));
        }
    };
    let cap = QpCap {
        max_send_wr: got.sq_depth,
        max_recv_wr: if srq.is_some() { 0 } else { got.rq_depth },
        max_send_sge: got.max_send_sge,
        max_recv_sge: if srq.is_some() { 0 } else { got.max_recv_sge },
    };
    let sq = RingRef {
        offset: sq_off,
        entries: sq_entries,
        doorbell_bit: sq_bit,
    };
    let rq_ref = rq.map(|(off, _, bit, n)| RingRef {
        offset: off,
        entries: n,
        doorbell_bit: bit,
    });
    let qp = Qp {
        core,
        id,
        pd: a.pd.0,
        send_cq: a.send_cq.0,
        recv_cq: a.recv_cq.0,
        srq: a.srq.map(|s| s.0),
        sq,
        rq: rq_ref,
        cap,
        ord: got.ord,
        ird: got.ird,
        cm: None,
    };
    c.qps.insert(qp);
    bump(c, a.pd.0, a.send_cq.0, a.recv_cq.0, a.srq.map(|s| s.0), 1);
    Ok(Response::Qp(QpCreated {
        qp: QpHandle(h),
        core: core as u32,
        sq,
        rq: rq_ref,
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

fn modify_qp<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: QpHandle, m: QpModifyReq) -> Res {
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

fn create_srq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: SrqCreate) -> Res {
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

fn modify_srq<C: CoreLink>(
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

fn query_srq<C: CoreLink>(
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

fn destroy_srq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: SrqHandle) -> Res {
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
