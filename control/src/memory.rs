//! Arenas (shared memory), MRs, fast-register MRs and memory windows. MRs and windows are
//! replicated on every core under the STag the first core chose (docs/APPS.md,
//! "Placement"); a failure on a later core rolls the earlier ones back.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use iwarp_rdma::mem::{MrAttr, MrInfo, MwBind, MwType, StagState};
use iwarp_shm_mem::{Backing, SharedMapping};
use iwarp_shm_service::{ServiceReply, ServiceRequest};
use iwarp_shm_socket::{
    AccessFlags, ArenaHandle, ErrorCode, MrInfoReply, MrReg, MwBindReq, MwKind, PdHandle, Request,
    Response, StagValue,
};
use iwarp_types::{Access, Stag};

use crate::client::{Arena, Client, StagKind, StagObj};
use crate::link::{err, no_such, CoreLink, Error};
use crate::server::{Ctx, Out, Res};
use crate::verbs::unexpected;

const PAGE_BYTES: u64 = 4096;

pub(crate) fn dispatch<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    req: Request,
    fds: Vec<OwnedFd>,
) -> Res {
    match req {
        Request::AllocArena {
            len,
            hugepages_required,
        } => alloc_arena(ctx, c, len, hugepages_required),
        Request::ImportArena { len } => import_arena(ctx, c, len, fds),
        Request::FreeArena(h) => free_arena(ctx, c, h),
        Request::RegMr(r) => reg_mr(ctx, c, r),
        Request::ReregMr { stag, reg } => rereg_mr(ctx, c, stag, reg),
        Request::DeregMr(s) => dealloc_stag(ctx, c, s, false),
        Request::AllocMr { pd, max_len } => alloc_mr(ctx, c, pd, max_len),
        Request::QueryMr(s) => query_mr(ctx, c, s),
        Request::AllocMw { pd, kind } => alloc_mw(ctx, c, pd, kind),
        Request::BindMw(b) => bind_mw(ctx, c, b),
        Request::DeallocMw(s) => dealloc_stag(ctx, c, s, true),
        _ => Err(err(
            ErrorCode::Internal,
            "request routed to the wrong handler",
        )),
    }
}

fn quota<C: CoreLink>(ctx: &Ctx<C>, c: &Client, len: u64) -> Result<u64, Error> {
    if len == 0 {
        return Err(err(
            ErrorCode::InvalidArgument,
            "an arena needs at least one byte",
        ));
    }
    let rounded = len.checked_next_multiple_of(PAGE_BYTES).ok_or_else(|| {
        err(
            ErrorCode::InvalidArgument,
            format!("arena length {len} is too large"),
        )
    })?;
    let max = ctx.cfg.max_arena_bytes;
    if c.arena_bytes.saturating_add(rounded) > max {
        return Err(err(
            ErrorCode::LimitReached,
            format!(
                "{rounded} more arena bytes exceed control.max_arena_mb ({} MiB held of {} MiB)",
                c.arena_bytes >> 20,
                max >> 20
            ),
        ));
    }
    if c.arenas.next_handle().is_none() {
        return Err(err(
            ErrorCode::LimitReached,
            "arenas up to control.max_objects",
        ));
    }
    Ok(rounded)
}

/// Publishes `mapping` in the region table and on every core; the reply carries its fd.
fn add_arena<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    mapping: SharedMapping,
    len: u64,
) -> Res {
    let hugepages = mapping.is_hugepages();
    let fd = mapping
        .dup_fd()
        .map_err(|e| err(ErrorCode::OutOfMemory, format!("arena fd: {e}")))?;
    let mapping = Arc::new(mapping);
    let region = ctx
        .regions
        .insert(mapping.clone())
        .ok_or_else(|| err(ErrorCode::LimitReached, "the daemon's region table is full"))?;
    let h = c
        .arenas
        .next_handle()
        .ok_or_else(|| err(ErrorCode::LimitReached, "arenas up to control.max_objects"))?;
    for core in 0..ctx.ncores() {
        if let Err(e) = ctx.call(
            core,
            ServiceRequest::AddArena {
                client: c.id,
                arena: h,
                region,
            },
            "AddArena",
        ) {
            for k in 0..core {
                let _ = ctx.call(
                    k,
                    ServiceRequest::RemoveArena {
                        client: c.id,
                        arena: h,
                    },
                    "RemoveArena",
                );
            }
            if ctx.fence_all() {
                ctx.regions.remove(region);
            } else {
                ctx.pending_regions.push((region, mapping));
            }
            return Err(e);
        }
    }
    c.arenas.insert(Arena {
        mapping,
        region,
        len,
        hugepages,
        users: 0,
    });
    c.arena_bytes += len;
    Ok(Out {
        resp: Response::Arena {
            arena: ArenaHandle(h),
            len,
            hugepages,
        },
        fds: vec![fd],
    })
}

fn alloc_arena<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, len: u64, huge: bool) -> Res {
    let rounded = quota(ctx, c, len)?;
    let size =
        usize::try_from(rounded).map_err(|_| err(ErrorCode::InvalidArgument, "arena too large"))?;
    let backing = if huge {
        Backing::Hugepages
    } else {
        Backing::HugepagesOrPages
    };
    let m =
        SharedMapping::create(&format!("iwarpd-arena-{}", c.id), size, backing).map_err(|e| {
            err(
                ErrorCode::OutOfMemory,
                format!("arena of {rounded} bytes: {e}"),
            )
        })?;
    add_arena(ctx, c, m, rounded)
}

fn import_arena<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    len: u64,
    mut fds: Vec<OwnedFd>,
) -> Res {
    if fds.len() != 1 {
        return Err(err(
            ErrorCode::BadFd,
            format!("ImportArena needs exactly one memfd, {} came", fds.len()),
        ));
    }
    if !len.is_multiple_of(PAGE_BYTES) {
        return Err(err(
            ErrorCode::InvalidArgument,
            "ImportArena: len must be a multiple of 4096",
        ));
    }
    let rounded = quota(ctx, c, len)?;
    let size =
        usize::try_from(rounded).map_err(|_| err(ErrorCode::InvalidArgument, "arena too large"))?;
    let m = SharedMapping::from_fd(fds.remove(0), size)
        .map_err(|e| err(ErrorCode::BadFd, format!("ImportArena: {e}")))?;
    add_arena(ctx, c, m, rounded)
}

/// Removes an arena from every core, fences, then from the region table.
pub(crate) fn release_arena<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: u32) {
    let Some(a) = c.arenas.remove(h) else { return };
    for core in 0..ctx.ncores() {
        let _ = ctx.call(
            core,
            ServiceRequest::RemoveArena {
                client: c.id,
                arena: h,
            },
            "RemoveArena",
        );
    }
    c.arena_bytes = c.arena_bytes.saturating_sub(a.len);
    if ctx.fence_all() {
        ctx.regions.remove(a.region);
    } else {
        ctx.pending_regions.push((a.region, a.mapping));
        ctx.stats.arenas_pending += 1;
    }
}

fn free_arena<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, h: ArenaHandle) -> Res {
    let a = c.arenas.get(h.0).ok_or_else(|| no_such("arena", h.0))?;
    if a.users > 0 {
        return Err(err(
            ErrorCode::InUse,
            format!("arena {:#x} holds {} MR(s)", h.0, a.users),
        ));
    }
    release_arena(ctx, c, h.0);
    Ok(Response::Ok.into())
}

fn access_of(a: AccessFlags) -> Result<Access, Error> {
    if a.0 & !AccessFlags::ALL.0 != 0 {
        return Err(err(
            ErrorCode::InvalidAccessRights,
            format!("undefined access bits {:#x}", a.0 & !AccessFlags::ALL.0),
        ));
    }
    Ok(Access(a.0 | Access::LOCAL_READ.0))
}

fn mr_attr(c: &Client, r: &MrReg) -> Result<(MrAttr, Vec<iwarp_types::PdId>), Error> {
    let pd = c.pds.get(r.pd.0).ok_or_else(|| no_such("PD", r.pd.0))?;
    let a = c
        .arenas
        .get(r.arena.0)
        .ok_or_else(|| no_such("arena", r.arena.0))?;
    let access = access_of(r.access)?;
    let end = r.offset.checked_add(r.len);
    if r.len == 0 || end.is_none_or(|e| e > a.len) {
        return Err(err(
            ErrorCode::InvalidLength,
            format!(
                "[{}, +{}) is not inside the arena of {} bytes",
                r.offset, r.len, a.len
            ),
        ));
    }
    let attr = MrAttr {
        pd: pd.per_core[0],
        region: a.region,
        region_offset: r.offset,
        len: r.len,
        va: r.va,
        zero_based: r.zero_based,
        access,
        key: 0,
        remote_access_flag: access.has_remote(),
    };
    Ok((attr, pd.per_core.clone()))
}

/// Runs `make(core, at)` on every core, core 0 choosing the STag; rolls back on failure.
fn replicate<C: CoreLink>(
    ctx: &mut Ctx<C>,
    client: u32,
    what: &str,
    mut make: impl FnMut(usize, Option<Stag>) -> ServiceRequest,
) -> Result<Stag, Error> {
    let mut stag = None;
    for core in 0..ctx.ncores() {
        match ctx.call(core, make(core, stag), what) {
            Ok(ServiceReply::Stag(s)) if stag.is_none_or(|x| x == s) => stag = Some(s),
            r => {
                if let Some(s) = stag {
                    for k in 0..core {
                        let _ = ctx.call(
                            k,
                            ServiceRequest::DeallocStag { client, stag: s },
                            "DeallocStag",
                        );
                    }
                }
                return Err(match r {
                    Ok(ServiceReply::Stag(s)) => err(
                        ErrorCode::Internal,
                        format!("{what}: core {core} chose STag {:#x}", s.0),
                    ),
                    r => unexpected(r, what),
                });
            }
        }
    }
    stag.ok_or_else(|| err(ErrorCode::Internal, format!("{what}: no core")))
}

fn room(c: &Client, max: u32) -> Result<(), Error> {
    if c.stags.len() >= 2 * max as usize {
        return Err(err(
            ErrorCode::LimitReached,
            "MRs and MWs up to control.max_objects",
        ));
    }
    Ok(())
}

fn reg_mr<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, r: MrReg) -> Res {
    room(c, ctx.cfg.max_objects)?;
    let (attr, pds) = mr_attr(c, &r)?;
    let id = c.id;
    let stag = replicate(ctx, id, "RegMr", |core, at| ServiceRequest::RegMr {
        client: id,
        attr: MrAttr {
            pd: pds[core],
            ..attr
        },
        at,
    })?;
    c.stags.insert(
        stag.0,
        StagObj {
            kind: StagKind::Mr,
            pd: r.pd.0,
            arena: Some(r.arena.0),
            offset: r.offset,
            len: r.len,
            va: r.va,
            access: r.access,
            windows: 0,
            bound_to: None,
        },
    );
    users(c, r.pd.0, Some(r.arena.0), 1);
    Ok(Response::Stag(StagValue(stag.0)).into())
}

fn users(c: &mut Client, pd: u32, arena: Option<u32>, d: i32) {
    if let Some(p) = c.pds.get_mut(pd) {
        p.users = p.users.saturating_add_signed(d);
    }
    if let Some(a) = arena.and_then(|a| c.arenas.get_mut(a)) {
        a.users = a.users.saturating_add_signed(d);
    }
}

fn owned(c: &Client, s: StagValue) -> Result<StagObj, Error> {
    c.stags
        .get(&s.0)
        .copied()
        .ok_or_else(|| no_such("STag", s.0))
}

fn rereg_mr<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, s: StagValue, r: MrReg) -> Res {
    let old = owned(c, s)?;
    if old.kind != StagKind::Mr {
        return Err(err(ErrorCode::InvalidStag, "ReregMr needs a registered MR"));
    }
    let (attr, pds) = mr_attr(c, &r)?;
    let key = (s.0 as u8).wrapping_add(1);
    let mut new = None;
    for (core, pd) in pds.iter().enumerate() {
        let req = ServiceRequest::ReregMr {
            client: c.id,
            stag: Stag(s.0),
            attr: MrAttr {
                pd: *pd,
                key,
                ..attr
            },
        };
        match ctx.call(core, req, "ReregMr") {
            Ok(ServiceReply::Stag(x)) => {
                new.get_or_insert(x);
            }
            r if core == 0 => return Err(unexpected(r, "ReregMr")),
            r => {
                // Cores disagree now: the MR is unusable; deallocate it everywhere.
                let e = unexpected(r, "ReregMr");
                let _ = dealloc_stag(ctx, c, s, false);
                return Err(err(
                    e.code,
                    format!("{} (the MR was deregistered)", e.message),
                ));
            }
        }
    }
    let new = new.ok_or_else(|| err(ErrorCode::Internal, "ReregMr: no core"))?;
    users(c, old.pd, old.arena, -1);
    c.stags.remove(&s.0);
    c.stags.insert(
        new.0,
        StagObj {
            pd: r.pd.0,
            arena: Some(r.arena.0),
            offset: r.offset,
            len: r.len,
            va: r.va,
            access: r.access,
            ..old
        },
    );
    users(c, r.pd.0, Some(r.arena.0), 1);
    Ok(Response::Stag(StagValue(new.0)).into())
}

/// Deregisters an MR (`mw` false) or deallocates a window (`mw` true) on every core.
pub(crate) fn dealloc_stag<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    s: StagValue,
    mw: bool,
) -> Res {
    let o = owned(c, s)?;
    if mw != matches!(o.kind, StagKind::Mw(_)) {
        return Err(err(
            ErrorCode::InvalidStag,
            if mw {
                "not a memory window"
            } else {
                "a memory window: use DeallocMw"
            },
        ));
    }
    if o.windows > 0 {
        return Err(err(
            ErrorCode::MwStillBound,
            format!("{} window(s) are bound to the MR", o.windows),
        ));
    }
    let mut first = None;
    for core in 0..ctx.ncores() {
        if let Err(e) = ctx.call(
            core,
            ServiceRequest::DeallocStag {
                client: c.id,
                stag: Stag(s.0),
            },
            "DeallocStag",
        ) {
            if core == 0 {
                return Err(e);
            }
            first.get_or_insert(e);
        }
    }
    c.stags.remove(&s.0);
    users(c, o.pd, o.arena, -1);
    if let Some(mr) = o.bound_to.and_then(|m| c.stags.get_mut(&m)) {
        mr.windows = mr.windows.saturating_sub(1);
    }
    match first {
        Some(e) => Err(e),
        None => Ok(Response::Ok.into()),
    }
}

fn pd_cores(c: &Client, pd: PdHandle) -> Result<Vec<iwarp_types::PdId>, Error> {
    Ok(c.pds
        .get(pd.0)
        .ok_or_else(|| no_such("PD", pd.0))?
        .per_core
        .clone())
}

fn alloc_mr<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, pd: PdHandle, max_len: u64) -> Res {
    room(c, ctx.cfg.max_objects)?;
    let pds = pd_cores(c, pd)?;
    if max_len == 0 || max_len > ctx.device.max_mr_size {
        return Err(err(
            ErrorCode::InvalidLength,
            format!("max_len {max_len} is not in 1..={}", ctx.device.max_mr_size),
        ));
    }
    let id = c.id;
    let stag = replicate(ctx, id, "AllocMr", |core, at| ServiceRequest::AllocMr {
        client: id,
        pd: pds[core],
        max_len,
        remote_access_flag: true,
        at,
    })?;
    c.stags.insert(
        stag.0,
        StagObj {
            kind: StagKind::FastReg,
            pd: pd.0,
            arena: None,
            offset: 0,
            len: max_len,
            va: 0,
            access: AccessFlags::default(),
            windows: 0,
            bound_to: None,
        },
    );
    users(c, pd.0, None, 1);
    Ok(Response::Stag(StagValue(stag.0)).into())
}

fn query_mr<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, s: StagValue) -> Res {
    let o = owned(c, s)?;
    if matches!(o.kind, StagKind::Mw(_)) {
        return Err(err(ErrorCode::InvalidStag, "QueryMr of a memory window"));
    }
    let info: MrInfo = match ctx.call(
        0,
        ServiceRequest::QueryMr {
            client: c.id,
            stag: Stag(s.0),
        },
        "QueryMr",
    ) {
        Ok(ServiceReply::MrInfo(i)) => i,
        r => return Err(unexpected(r, "QueryMr")),
    };
    let arena = c
        .arenas
        .iter()
        .find(|(_, a)| a.region == info.region)
        .map(|(h, _)| ArenaHandle(h));
    let valid = info.state == StagState::Valid;
    Ok(Response::MrInfo(MrInfoReply {
        stag: s,
        pd: PdHandle(o.pd),
        valid,
        access: AccessFlags(info.access.0 & AccessFlags::ALL.0),
        arena: if info.len == 0 { None } else { arena },
        offset: info.region_offset,
        len: info.len,
        va: info.base_to,
        windows_bound: info.mws_bound,
    })
    .into())
}

fn alloc_mw<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, pd: PdHandle, kind: MwKind) -> Res {
    room(c, ctx.cfg.max_objects)?;
    let pds = pd_cores(c, pd)?;
    let engine_kind = match kind {
        MwKind::Type1 => MwType::Type1,
        MwKind::Type2 => MwType::Type2,
    };
    let id = c.id;
    let stag = replicate(ctx, id, "AllocMw", |core, at| ServiceRequest::AllocMw {
        client: id,
        pd: pds[core],
        kind: engine_kind,
        at,
    })?;
    c.stags.insert(
        stag.0,
        StagObj {
            kind: StagKind::Mw(kind),
            pd: pd.0,
            arena: None,
            offset: 0,
            len: 0,
            va: 0,
            access: AccessFlags::default(),
            windows: 0,
            bound_to: None,
        },
    );
    users(c, pd.0, None, 1);
    Ok(Response::Stag(StagValue(stag.0)).into())
}

fn bind_mw<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, b: MwBindReq) -> Res {
    let mw = owned(c, b.mw)?;
    let mr = owned(c, b.mr)?;
    if mw.kind != StagKind::Mw(MwKind::Type1) {
        return Err(err(
            ErrorCode::InvalidStag,
            "the Bind verb binds type 1 windows",
        ));
    }
    if matches!(mr.kind, StagKind::Mw(_)) {
        return Err(err(
            ErrorCode::InvalidStag,
            "a window cannot be bound to a window",
        ));
    }
    // A window carries remote rights only: no implied Local Read.
    let access = access_of(b.access).map(|_| Access(b.access.0))?;
    let pds = pd_cores(c, PdHandle(mw.pd))?;
    let bind = MwBind {
        mw: Stag(b.mw.0),
        mr: Stag(b.mr.0),
        to: b.va,
        len: b.len,
        access,
        zero_based: b.zero_based,
    };
    for (core, pd) in pds.iter().enumerate() {
        ctx.call(
            core,
            ServiceRequest::BindMwType1 {
                client: c.id,
                pd: *pd,
                bind,
            },
            "BindMw",
        )?;
    }
    if let Some(old) = mw.bound_to.and_then(|m| c.stags.get_mut(&m)) {
        old.windows = old.windows.saturating_sub(1);
    }
    if let Some(m) = c.stags.get_mut(&b.mr.0) {
        m.windows += 1;
    }
    if let Some(w) = c.stags.get_mut(&b.mw.0) {
        w.bound_to = Some(b.mr.0);
        w.len = b.len;
        w.va = b.va;
        w.access = b.access;
    }
    Ok(Response::Ok.into())
}
