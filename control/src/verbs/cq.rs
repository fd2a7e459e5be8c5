//! Completion queues (a sub-ring per core in the client's ring area, one notification
//! line) and completion channels (the client's eventfds).

use std::os::fd::{AsRawFd, OwnedFd};

use iwarp_shm_ring::CqControl;
use iwarp_shm_ring::{RingLayout, CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET};
use iwarp_shm_service::{RingSpec, ServiceReply, ServiceRequest};
use iwarp_shm_socket::{
    ChannelHandle, CqCreate, CqCreated, CqHandle, ErrorCode, Response, RingRef,
};

use crate::client::{Client, CompChannel, Cq};
use crate::link::{err, no_such, CoreLink};
use crate::server::{Ctx, Res};

use super::{alloc_ring, entries_for, free_ring, full, unexpected};

/// Most resizes of one CQ (their old sub-rings are kept until the CQ goes).
const RESIZES_MAX: usize = 8;

/// Entries of the CQ sub-rings of a CQ of `depth`: the sub-ring is the engine CQ and keeps
/// one slot for the marker of a resize, so `depth + 1` rounded up to a power of two.
fn cq_entries(depth: u32, max: u32) -> Result<u32, crate::link::Error> {
    entries_for(depth, max, "CQ depth", ErrorCode::InvalidCqSize)?;
    entries_for(depth + 1, u32::MAX, "CQ depth", ErrorCode::InvalidCqSize)
}

fn is_eventfd(fd: &OwnedFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.to_string_lossy() == "anon_inode:[eventfd]")
        .unwrap_or(false)
}

pub(super) fn create_channel(c: &mut Client, mut fds: Vec<OwnedFd>) -> Res {
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

pub(super) fn destroy_channel(c: &mut Client, h: ChannelHandle) -> Res {
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

pub(super) fn create_cq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, a: CqCreate) -> Res {
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

pub(super) fn resize_cq<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    h: CqHandle,
    depth: u32,
) -> Res {
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

pub(super) fn destroy_cq<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: CqHandle) -> Res {
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
