//! Protection domains: one engine PD per core under one client handle.

use iwarp_shm_service::{ServiceReply, ServiceRequest};
use iwarp_shm_socket::{ErrorCode, PdHandle, Response};

use crate::client::{Client, Pd};
use crate::link::{err, no_such, CoreLink};
use crate::server::{Ctx, Res};

use super::{full, unexpected};

pub(super) fn alloc_pd<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client) -> Res {
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

pub(super) fn dealloc_pd<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: PdHandle) -> Res {
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
