//! Dispatch of the verbs requests, split by object like the service's executors
//! (`verbs-shm/service/src/exec/`): [`pd`], [`cq`] (and completion channels), [`qp`],
//! [`srq`]; memory is `crate::memory`, connections `crate::cm`. Here: the dispatch and
//! the ring-area helpers they share.

mod cq;
mod pd;
mod qp;
mod srq;

use std::os::fd::OwnedFd;

use iwarp_shm_ring::{Consumer, Producer, Region, RingLayout};
use iwarp_shm_service::ServiceReply;
use iwarp_shm_socket::{ErrorCode, Request, Response};

use crate::client::{Area, Client};
use crate::link::{err, CoreLink};
use crate::server::{Ctx, Res};

use cq::{create_channel, create_cq, destroy_channel, destroy_cq, resize_cq};
use pd::{alloc_pd, dealloc_pd};
use qp::{create_qp, modify_qp};
use srq::{create_srq, destroy_srq, modify_srq, query_srq};

pub(crate) use qp::{destroy_qp, query_qp};

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
