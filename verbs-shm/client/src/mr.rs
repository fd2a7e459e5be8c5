//! Memory regions (`ibv_reg_mr`, `ibv_rereg_mr`, `ibv_dereg_mr`), fast-register MRs
//! (`ibv_alloc_mr`) and memory windows (`ibv_alloc_mw`, `ibv_bind_mw` type 1).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use iwarp_shm_socket::{
    AccessFlags, MrInfoReply, MrReg, MwBindReq, MwKind, Request, Response, StagValue,
};
use iwarp_types::{Access, SendFlags, SendOp, SendWr, SgList, Sge, Stag};

use crate::arena::{Arena, ArenaShared};
use crate::context::unexpected;
use crate::mapping::ArenaMem;
use crate::pd::{Pd, PdShared};
use crate::remap::remap_in_place;
use crate::{Error, Result};

fn flags(a: Access) -> AccessFlags {
    AccessFlags(a.0)
}

/// A registered memory region over part of an [`Arena`]. Its STag is both the lkey and,
/// when remote access was granted, the rkey. Deregistered on [`Mr::dereg`] or drop; it
/// keeps its PD and arena alive.
pub struct Mr {
    pd: Arc<PdShared>,
    arena: Arc<ArenaShared>,
    stag: Stag,
    offset: u64,
    len: u64,
    va: u64,
    access: Access,
    zero_based: bool,
    /// Still registered in the daemon (cleared by a deregistration it accepted).
    registered: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("stag", &self.stag)
            .field("addr", &self.va)
            .field("len", &self.len)
            .field("access", &self.access)
            .finish()
    }
}

impl Pd {
    /// Registers `[offset, offset + len)` of `arena` with `access`; VA-based: the
    /// region's tagged offsets are the client addresses of its bytes
    /// ([`Mr::addr`] = `arena.addr(offset)`). O(1) in the daemon: no page walk, no pinning.
    pub fn reg_mr(&self, arena: &Arena, offset: usize, len: usize, access: Access) -> Result<Mr> {
        self.reg(
            arena.shared.clone(),
            offset as u64,
            len as u64,
            access,
            false,
        )
    }

    /// Like [`Pd::reg_mr`], zero-based: the first byte has tagged offset 0.
    pub fn reg_mr_zero_based(
        &self,
        arena: &Arena,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<Mr> {
        self.reg(
            arena.shared.clone(),
            offset as u64,
            len as u64,
            access,
            true,
        )
    }

    /// Registers ordinary memory (a `Vec`, `malloc`): the pages enclosing
    /// `ptr..ptr+len` are remapped in place onto a sealed memfd shared with the daemon
    /// (docs/APPS.md): the buffer keeps its address and contents. VA-based at `ptr`.
    /// Memory that cannot be remapped (shared or file mappings, read-only, not mapped)
    /// is refused with [`Error::InvalidArgument`]; use [`crate::Context::alloc_arena`]
    /// then.
    ///
    /// # Safety
    ///
    /// `ptr..ptr+len` must be memory of this process. No other thread may write the
    /// pages that enclose it during the call (the write could be lost). Other data in
    /// those pages moves along: same contents, but now shared with the daemon. The pages
    /// stay shared (and mapped) after the MR is gone. The buffer must not be freed while
    /// the MR exists (the daemon would write into whatever reuses it).
    pub unsafe fn reg_user_mr(&self, ptr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: the caller's contract is the one `import_user` needs.
        let (arena, offset) = unsafe { import_user(&self.shared.ctx, ptr, len) }?;
        self.reg(arena, offset, len as u64, access, false)
    }

    fn reg(
        &self,
        arena: Arc<ArenaShared>,
        offset: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<Mr> {
        arena.check_range(offset, len)?;
        let va = if zero_based { 0 } else { arena.addr(offset) };
        let reg = MrReg {
            pd: self.shared.handle,
            arena: arena.handle,
            offset,
            len,
            va,
            zero_based,
            access: flags(access),
        };
        let stag = match self.shared.ctx.call(Request::RegMr(reg))? {
            Response::Stag(s) => Stag(s.0),
            r => return Err(unexpected("RegMr", &r)),
        };
        Ok(Mr {
            pd: self.shared.clone(),
            arena,
            stag,
            offset,
            len,
            va,
            access,
            zero_based,
            registered: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Allocates a fast-register MR able to describe `max_pages` pages of 4 KiB
    /// (`ibv_alloc_mr`): an STag in the Invalid state that a Fast-Register WR
    /// ([`FastRegMr::fast_reg_wr`]) makes valid over part of an arena.
    pub fn alloc_mr(&self, max_pages: u32) -> Result<FastRegMr> {
        if max_pages == 0 {
            return Err(Error::invalid("alloc_mr of 0 pages"));
        }
        let max_len = max_pages as u64 * 4096;
        let r = self.shared.ctx.call(Request::AllocMr {
            pd: self.shared.handle,
            max_len,
        })?;
        match r {
            Response::Stag(s) => Ok(FastRegMr {
                pd: self.shared.clone(),
                stag: Stag(s.0),
                max_len,
                allocated: true,
            }),
            r => Err(unexpected("AllocMr", &r)),
        }
    }

    /// Allocates a memory window (`ibv_alloc_mw`): type 1 is bound with [`Mw::bind`],
    /// type 2 with a Bind WR (`SendOp::Bind`) on a QP.
    pub fn alloc_mw(&self, kind: MwKind) -> Result<Mw> {
        let r = self.shared.ctx.call(Request::AllocMw {
            pd: self.shared.handle,
            kind,
        })?;
        match r {
            Response::Stag(s) => Ok(Mw {
                pd: self.shared.clone(),
                stag: Stag(s.0),
                kind,
                allocated: true,
            }),
            r => Err(unexpected("AllocMw", &r)),
        }
    }
}

impl Mr {
    /// The local key (the STag).
    pub fn lkey(&self) -> Stag {
        self.stag
    }

    /// The remote key (the same STag; valid remotely only with remote access rights).
    pub fn rkey(&self) -> Stag {
        self.stag
    }

    /// Tagged offset of the first byte: its client address, or 0 if zero-based.
    pub fn addr(&self) -> u64 {
        self.va
    }

    /// Bytes registered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a zero-length registration.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Access rights.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Zero-based addressing.
    pub fn is_zero_based(&self) -> bool {
        self.zero_based
    }

    /// Offset of the first byte in its arena.
    pub fn arena_offset(&self) -> u64 {
        self.offset
    }

    /// An SGE of `len` bytes at byte `offset` of the region; `Err` if outside it.
    pub fn sge(&self, offset: u64, len: u32) -> Result<Sge> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len => Ok(Sge {
                addr: self.va + offset,
                length: len,
                lkey: self.stag,
            }),
            _ => Err(Error::invalid(format!(
                "SGE {offset}+{len} outside the MR of {} bytes",
                self.len
            ))),
        }
    }

    /// The daemon's view of the MR (`QueryMr`).
    pub fn query(&self) -> Result<MrInfoReply> {
        match self.pd.ctx.call(Request::QueryMr(StagValue(self.stag.0)))? {
            Response::MrInfo(i) => Ok(i),
            r => Err(unexpected("QueryMr", &r)),
        }
    }

    /// Reregisters (`ibv_rereg_mr`): a new range of `arena` and new access rights,
    /// same PD and addressing mode; the STag keeps its index and gets a new key.
    pub fn rereg(
        &mut self,
        arena: &Arena,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<()> {
        let (offset, len) = (offset as u64, len as u64);
        arena.shared.check_range(offset, len)?;
        let va = if self.zero_based {
            0
        } else {
            arena.shared.addr(offset)
        };
        self.rereg_with(arena.shared.clone(), offset, len, va, access)
    }

    /// Reregisters over ordinary memory (`ibv_rereg_mr` with
    /// `IBV_REREG_MR_CHANGE_TRANSLATION`): `ptr..ptr+len`, remapped as by
    /// [`Pd::reg_user_mr`], with `access`; same PD; the STag keeps its index and gets a
    /// new key. On error the region is unchanged.
    ///
    /// # Safety
    ///
    /// As [`Pd::reg_user_mr`].
    pub unsafe fn rereg_user(&mut self, ptr: *mut u8, len: usize, access: Access) -> Result<()> {
        // SAFETY: the caller's contract.
        let (arena, offset) = unsafe { import_user(&self.pd.ctx, ptr, len) }?;
        let va = if self.zero_based {
            0
        } else {
            arena.addr(offset)
        };
        self.rereg_with(arena, offset, len as u64, va, access)
    }

    /// Changes only the access rights (`IBV_REREG_MR_CHANGE_ACCESS`).
    pub fn rereg_access(&mut self, access: Access) -> Result<()> {
        let arena = self.arena.clone();
        self.rereg_with(arena, self.offset, self.len, self.va, access)
    }

    fn rereg_with(
        &mut self,
        arena: Arc<ArenaShared>,
        offset: u64,
        len: u64,
        va: u64,
        access: Access,
    ) -> Result<()> {
        let reg = MrReg {
            pd: self.pd.handle,
            arena: arena.handle,
            offset,
            len,
            va,
            zero_based: self.zero_based,
            access: flags(access),
        };
        let r = self.pd.ctx.call(Request::ReregMr {
            stag: StagValue(self.stag.0),
            reg,
        })?;
        let Response::Stag(s) = r else {
            return Err(unexpected("ReregMr", &r));
        };
        self.stag = Stag(s.0);
        self.arena = arena;
        self.offset = offset;
        self.len = len;
        self.va = va;
        self.access = access;
        Ok(())
    }

    /// Deregisters (`ibv_dereg_mr`), reporting the daemon's answer (drop does the same
    /// and ignores it).
    pub fn dereg(self) -> Result<()> {
        self.registered.store(false, Ordering::Relaxed);
        expect_ok(
            self.pd.ctx.call(Request::DeregMr(StagValue(self.stag.0)))?,
            "DeregMr",
        )
    }

    /// Deregisters, keeping the region registered and usable if the daemon refuses
    /// (`MwStillBound` while windows are bound to it, `ibv_dereg_mr`'s `EBUSY`). Once it
    /// succeeded, dropping the value does nothing more; calling it again is `Ok`.
    pub fn try_dereg(&self) -> Result<()> {
        if !self.registered.load(Ordering::Relaxed) {
            return Ok(());
        }
        expect_ok(
            self.pd.ctx.call(Request::DeregMr(StagValue(self.stag.0)))?,
            "DeregMr",
        )?;
        self.registered.store(false, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if *self.registered.get_mut() {
            let _ = self.pd.ctx.call(Request::DeregMr(StagValue(self.stag.0)));
        }
    }
}

/// Remaps the pages of `ptr..ptr+len` (`remap_in_place`) and imports their memfd into
/// the daemon as an arena: the arena and the buffer's offset in it.
///
/// # Safety
///
/// As [`Pd::reg_user_mr`].
unsafe fn import_user(
    ctx: &Arc<crate::context::CtxInner>,
    ptr: *mut u8,
    len: usize,
) -> Result<(Arc<ArenaShared>, u64)> {
    ctx.check_alive()?;
    // SAFETY: the caller's contract is the one `remap_in_place` needs.
    let r = unsafe { remap_in_place(ptr, len) }?;
    let (resp, _fds) = ctx.call_fds(
        Request::ImportArena { len: r.len as u64 },
        &[std::os::fd::AsFd::as_fd(&*r.fd)],
    )?;
    let handle = match resp {
        Response::Arena { arena, .. } => arena,
        r => return Err(unexpected("ImportArena", &r)),
    };
    let offset = r.offset as u64;
    let arena = Arc::new(ArenaShared {
        ctx: ctx.clone(),
        handle,
        map: ArenaMem::User {
            start: r.start,
            len: r.len,
        },
        hugepages: false,
        _user_pages: Some(r),
    });
    Ok((arena, offset))
}

pub(crate) fn expect_ok(r: Response, what: &str) -> Result<()> {
    match r {
        Response::Ok => Ok(()),
        r => Err(unexpected(what, &r)),
    }
}

/// A fast-register MR (`ibv_alloc_mr`): an STag that Fast-Register WRs make valid over
/// part of an arena, and LocalInvalidate (or a Send with Invalidate) makes invalid again.
pub struct FastRegMr {
    pd: Arc<PdShared>,
    stag: Stag,
    max_len: u64,
    allocated: bool,
}

impl std::fmt::Debug for FastRegMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastRegMr")
            .field("stag", &self.stag)
            .field("max_len", &self.max_len)
            .finish()
    }
}

impl FastRegMr {
    /// The STag as allocated (its key is the one the daemon chose; a Fast-Register WR
    /// may set another with [`Stag::with_key`]).
    pub fn stag(&self) -> Stag {
        self.stag
    }

    /// The largest registration.
    pub fn max_len(&self) -> u64 {
        self.max_len
    }

    /// A signaled Fast-Register WR that registers this STag with key `key` over
    /// `[offset, offset + len)` of `arena`, VA-based at the client address of `offset`
    /// (for zero-based, build the op with [`Arena::fast_reg_op`]). The arena must
    /// outlive the registration.
    pub fn fast_reg_wr(
        &self,
        wr_id: u64,
        key: u8,
        arena: &Arena,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<SendWr> {
        if len as u64 > self.max_len {
            return Err(Error::invalid(format!(
                "fast-register of {len} bytes, the MR allows {}",
                self.max_len
            )));
        }
        let op = arena.fast_reg_op(self.stag.with_key(key), offset, len, access, false)?;
        Ok(SendWr {
            wr_id,
            op,
            sgl: SgList::new(),
            flags: SendFlags::SIGNALED,
        })
    }

    /// Deallocates the STag, reporting the daemon's answer (drop does the same).
    pub fn dealloc(mut self) -> Result<()> {
        self.allocated = false;
        expect_ok(
            self.pd.ctx.call(Request::DeregMr(StagValue(self.stag.0)))?,
            "DeregMr",
        )
    }
}

impl Drop for FastRegMr {
    fn drop(&mut self) {
        if self.allocated {
            let _ = self.pd.ctx.call(Request::DeregMr(StagValue(self.stag.0)));
        }
    }
}

/// A memory window (`ibv_alloc_mw`).
pub struct Mw {
    pd: Arc<PdShared>,
    stag: Stag,
    kind: MwKind,
    allocated: bool,
}

impl std::fmt::Debug for Mw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mw")
            .field("stag", &self.stag)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Mw {
    /// The window's STag (its rkey once bound).
    pub fn rkey(&self) -> Stag {
        self.stag
    }

    /// Type 1 or 2.
    pub fn kind(&self) -> MwKind {
        self.kind
    }

    /// Binds a type 1 window by verb (`ibv_bind_mw` for type 1) to `[va, va + len)`
    /// (tagged offsets of `mr`) with remote rights `access`. The MR needs
    /// [`Access::MW_BIND`].
    pub fn bind(
        &mut self,
        mr: &Mr,
        va: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<()> {
        if self.kind != MwKind::Type1 {
            return Err(Error::invalid(
                "bind verb is for type 1 windows; bind a type 2 window with a Bind WR",
            ));
        }
        let r = self.pd.ctx.call(Request::BindMw(MwBindReq {
            mw: StagValue(self.stag.0),
            mr: StagValue(mr.stag.0),
            va,
            len,
            access: flags(access),
            zero_based,
        }))?;
        match r {
            Response::Ok => Ok(()),
            Response::Stag(s) => {
                self.stag = Stag(s.0);
                Ok(())
            }
            r => Err(unexpected("BindMw", &r)),
        }
    }

    /// The operation of a Bind WR for a type 2 window (post it on a QP of the PD) with
    /// the window's next key `key`.
    pub fn bind_op(
        &self,
        key: u8,
        mr: &Mr,
        va: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> SendOp {
        SendOp::Bind {
            mw: self.stag.with_key(key),
            mr: mr.stag,
            to: va,
            len,
            access,
            zero_based,
        }
    }

    /// Deallocates the window, reporting the daemon's answer (drop does the same).
    pub fn dealloc(mut self) -> Result<()> {
        self.allocated = false;
        expect_ok(
            self.pd
                .ctx
                .call(Request::DeallocMw(StagValue(self.stag.0)))?,
            "DeallocMw",
        )
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        if self.allocated {
            let _ = self.pd.ctx.call(Request::DeallocMw(StagValue(self.stag.0)));
        }
    }
}
