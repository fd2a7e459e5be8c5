//! Arenas, protection domains, memory regions, fast-register MRs and memory windows.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use iwarp_types::Access;
use iwarp_verbs::MwKind;

use crate::error::{guard, guard_new, guard_value, CResult, Failure};
use crate::handles::{iwv_arena, iwv_context, iwv_mr, iwv_mw, iwv_pd, lock, obj, take, MrKind};

/// `IWV_ACCESS_ZERO_BASED`: not an access right, the addressing mode of `iwv_reg_mr`.
pub(crate) const ACCESS_ZERO_BASED: u32 = 1 << 5;
/// Every access right of `enum iwv_access_flags` (without ZERO_BASED).
const ACCESS_RIGHTS: u32 = 0x1f;

const REREG_CHANGE_TRANSLATION: c_int = 1 << 0;
const REREG_CHANGE_ACCESS: c_int = 1 << 2;

/// Access rights from the C flags; unknown bits are `EINVAL`.
pub(crate) fn access_arg(access: u32, allow_zero_based: bool) -> CResult<Access> {
    let known = ACCESS_RIGHTS
        | if allow_zero_based {
            ACCESS_ZERO_BASED
        } else {
            0
        };
    if access & !known != 0 {
        return Err(Failure::invalid(format!(
            "unknown access flags {:#x}",
            access & !known
        )));
    }
    Ok(Access(access & ACCESS_RIGHTS))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_alloc_arena(
    ctx: *mut iwv_context,
    len: usize,
    hugepages_required: c_int,
) -> *mut iwv_arena {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        Ok(iwv_arena {
            arena: c.ctx.alloc_arena_with(len, hugepages_required != 0)?,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_arena_addr(arena: *mut iwv_arena) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || {
        // SAFETY: live handle or NULL (header contract).
        let a = unsafe { obj(arena, "arena") }?;
        // The mapping is writable shared memory; C writes through this pointer.
        Ok(a.arena.as_ptr() as *mut c_void)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_arena_len(arena: *mut iwv_arena) -> usize {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { obj(arena, "arena") }?.arena.len()))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_arena_handle(arena: *mut iwv_arena) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { obj(arena, "arena") }?.arena.handle().0))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_free_arena(arena: *mut iwv_arena) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_alloc_arena`, freed once (header contract).
        drop(unsafe { take(arena, "arena") }?);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_alloc_pd(ctx: *mut iwv_context) -> *mut iwv_pd {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        Ok(iwv_pd {
            pd: c.ctx.alloc_pd()?,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_dealloc_pd(pd: *mut iwv_pd) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_alloc_pd`, freed once (header contract).
        drop(unsafe { take(pd, "pd") }?);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_reg_mr(
    pd: *mut iwv_pd,
    arena: *mut iwv_arena,
    offset: usize,
    len: usize,
    access: u32,
) -> *mut iwv_mr {
    guard_new(|| {
        // SAFETY: live handles or NULL (header contract).
        let (p, a) = unsafe { (obj(pd, "pd")?, obj(arena, "arena")?) };
        let rights = access_arg(access, true)?;
        let mr = if access & ACCESS_ZERO_BASED != 0 {
            p.pd.reg_mr_zero_based(&a.arena, offset, len, rights)?
        } else {
            p.pd.reg_mr(&a.arena, offset, len, rights)?
        };
        Ok(iwv_mr {
            mr: Mutex::new(MrKind::Region(mr)),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_reg_user_mr(
    pd: *mut iwv_pd,
    addr: *mut c_void,
    len: usize,
    access: u32,
) -> *mut iwv_mr {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let p = unsafe { obj(pd, "pd") }?;
        if addr.is_null() {
            return Err(Failure::null("addr"));
        }
        let rights = access_arg(access, false)?;
        // SAFETY: the header states `reg_user_mr`'s contract (memory of this process, no
        // concurrent writer of its pages, not freed while the MR exists).
        let mr = unsafe { p.pd.reg_user_mr(addr as *mut u8, len, rights) }?;
        Ok(iwv_mr {
            mr: Mutex::new(MrKind::Region(mr)),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_rereg_mr(
    mr: *mut iwv_mr,
    flags: c_int,
    arena: *mut iwv_arena,
    offset: usize,
    len: usize,
    access: u32,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let m = unsafe { obj(mr, "mr") }?;
        if flags & !(REREG_CHANGE_TRANSLATION | REREG_CHANGE_ACCESS) != 0 || flags == 0 {
            return Err(Failure::invalid(format!("rereg flags {flags:#x}")));
        }
        let mut kind = lock(&m.mr);
        let MrKind::Region(region) = &mut *kind else {
            return Err(Failure::invalid(
                "a fast-register MR cannot be reregistered",
            ));
        };
        let rights = if flags & REREG_CHANGE_ACCESS != 0 {
            access_arg(access, false)?
        } else {
            region.access()
        };
        if flags & REREG_CHANGE_TRANSLATION != 0 {
            // SAFETY: live handle or NULL (header contract).
            let a = unsafe { obj(arena, "arena") }?;
            region.rereg(&a.arena, offset, len, rights)?;
        } else {
            region.rereg_access(rights)?;
        }
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_dereg_mr(mr: *mut iwv_mr) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_reg_mr`/`iwv_reg_user_mr`/`iwv_alloc_mr`, freed once.
        let m = unsafe { take(mr, "mr") }?;
        match m.mr.into_inner().unwrap_or_else(|e| e.into_inner()) {
            MrKind::Region(r) => r.dereg()?,
            MrKind::FastReg(f) => f.dealloc()?,
        }
        Ok(0)
    })
}

/// `(lkey, addr, length)` of an MR handle.
unsafe fn mr_fields(mr: *mut iwv_mr) -> CResult<(u32, u64, u64)> {
    // SAFETY: the caller's (header) contract: live handle or NULL.
    let m = unsafe { obj(mr, "mr") }?;
    Ok(match &*lock(&m.mr) {
        MrKind::Region(r) => (r.lkey().0, r.addr(), r.len()),
        MrKind::FastReg(f) => (f.stag().0, 0, f.max_len()),
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_mr_lkey(mr: *mut iwv_mr) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { mr_fields(mr) }?.0))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_mr_rkey(mr: *mut iwv_mr) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { mr_fields(mr) }?.0))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_mr_addr(mr: *mut iwv_mr) -> u64 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { mr_fields(mr) }?.1))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_mr_length(mr: *mut iwv_mr) -> u64 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { mr_fields(mr) }?.2))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_alloc_mr(pd: *mut iwv_pd, max_pages: u32) -> *mut iwv_mr {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let p = unsafe { obj(pd, "pd") }?;
        Ok(iwv_mr {
            mr: Mutex::new(MrKind::FastReg(p.pd.alloc_mr(max_pages)?)),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_alloc_mw(pd: *mut iwv_pd, kind: u32) -> *mut iwv_mw {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let p = unsafe { obj(pd, "pd") }?;
        let kind = match kind {
            1 => MwKind::Type1,
            2 => MwKind::Type2,
            k => return Err(Failure::invalid(format!("memory window type {k}"))),
        };
        Ok(iwv_mw {
            mw: Mutex::new(p.pd.alloc_mw(kind)?),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_bind_mw(
    mw: *mut iwv_mw,
    mr: *mut iwv_mr,
    addr: u64,
    length: u64,
    access: u32,
    zero_based: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handles or NULL (header contract).
        let (w, m) = unsafe { (obj(mw, "mw")?, obj(mr, "mr")?) };
        let rights = access_arg(access, false)?;
        let kind = lock(&m.mr);
        let MrKind::Region(region) = &*kind else {
            return Err(Failure::invalid("bind a window to a registered MR"));
        };
        lock(&w.mw).bind(region, addr, length, rights, zero_based != 0)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_mw_rkey(mw: *mut iwv_mw) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(lock(&unsafe { obj(mw, "mw") }?.mw).rkey().0))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_dealloc_mw(mw: *mut iwv_mw) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_alloc_mw`, freed once (header contract).
        let w = unsafe { take(mw, "mw") }?;
        w.mw.into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .dealloc()?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{IWV_EFAULT, IWV_EINVAL};

    #[test]
    fn access_flags_are_checked() {
        assert_eq!(access_arg(0x1f, false).unwrap(), Access(0x1f));
        assert_eq!(access_arg(0x22, true).unwrap(), Access::LOCAL_WRITE);
        assert_eq!(access_arg(0x20, false).unwrap_err().code, IWV_EINVAL);
        assert_eq!(access_arg(0x40, true).unwrap_err().code, IWV_EINVAL);
    }

    #[test]
    fn null_handles() {
        // SAFETY: NULL is allowed everywhere.
        unsafe {
            assert!(iwv_alloc_pd(std::ptr::null_mut()).is_null());
            assert!(iwv_alloc_arena(std::ptr::null_mut(), 4096, 0).is_null());
            assert_eq!(iwv_mr_lkey(std::ptr::null_mut()), 0);
            assert!(iwv_arena_addr(std::ptr::null_mut()).is_null());
            assert_eq!(iwv_dereg_mr(std::ptr::null_mut()), -IWV_EFAULT);
            assert_eq!(iwv_dealloc_mw(std::ptr::null_mut()), -IWV_EFAULT);
            assert_eq!(
                iwv_rereg_mr(std::ptr::null_mut(), 1, std::ptr::null_mut(), 0, 0, 0),
                -IWV_EFAULT
            );
        }
    }
}
