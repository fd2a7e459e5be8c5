//! Protection domains (`ibv_alloc_pd`, `ibv_dealloc_pd`) and memory regions on any
//! application memory (`ibv_reg_mr`, `ibv_reg_mr_iova`, `ibv_reg_mr_iova2`,
//! `ibv_dereg_mr`), through the client library's user-MR path (the pages are remapped in
//! place onto memory shared with the daemon).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use iwarp_verbs::{Access, Mr, Pd};

use crate::context::IwContext;
use crate::errno::{fail, fail_with};
use crate::object::{free, from_raw, hold, into_raw, Wrapped};
use crate::sys;

/// A protection domain.
#[repr(C)]
pub(crate) struct IwPd {
    pub(crate) pd: sys::ibv_pd,
    magic: AtomicU64,
    pub(crate) client: Pd,
    /// MRs, QPs (and later SRQs, MWs) created from it and not yet destroyed.
    pub(crate) users: AtomicU32,
}

impl Wrapped for IwPd {
    type Raw = sys::ibv_pd;
    const MAGIC: u64 = 0x6977_6172_705f_7064;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl crate::object::Counted for IwPd {
    fn users(&self) -> &AtomicU32 {
        &self.users
    }
}

/// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_alloc_pd(ctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    let Some(c) = IwContext::from_ptr(ctx) else {
        fail_with(
            "ibv_alloc_pd",
            libc::EINVAL,
            "not a context of this library",
        );
        return std::ptr::null_mut();
    };
    match c.client.alloc_pd() {
        Ok(client) => into_raw(IwPd {
            pd: sys::ibv_pd {
                context: ctx,
                handle: client.handle().0,
            },
            magic: AtomicU64::new(IwPd::MAGIC),
            client,
            users: AtomicU32::new(0),
        }),
        Err(e) => {
            fail("ibv_alloc_pd", &e);
            std::ptr::null_mut()
        }
    }
}

/// `int ibv_dealloc_pd(struct ibv_pd *)`: `EBUSY` while objects of it exist.
#[no_mangle]
pub extern "C" fn iwarp_ibv_dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    let Some(p) = from_raw::<IwPd>(pd) else {
        return fail_with("ibv_dealloc_pd", libc::EINVAL, "not a PD of this library");
    };
    if p.users.load(Ordering::Acquire) != 0 {
        return fail_with("ibv_dealloc_pd", libc::EBUSY, "MRs or QPs of the PD remain");
    }
    // SAFETY: from into_raw; the application gives the PD up with this call.
    unsafe { free(p) };
    0
}

/// A memory region.
#[repr(C)]
pub(crate) struct IwMr {
    pub(crate) mr: sys::ibv_mr,
    magic: AtomicU64,
    /// Locked by `ibv_rereg_mr` (which changes it) and the verbs that read it.
    pub(crate) client: std::sync::Mutex<Mr>,
    pd: &'static IwPd,
}

impl IwMr {
    /// The client's MR.
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Mr> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wrapped for IwMr {
    type Raw = sys::ibv_mr;
    const MAGIC: u64 = 0x6977_6172_705f_6d72;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// rdma-core's access flags as the client library's, or the errno refusing them.
pub(crate) fn access_of(flags: u32) -> Result<Access, (c_int, &'static str)> {
    let local_write = flags & sys::IBV_ACCESS_LOCAL_WRITE != 0;
    let remote_write = flags & sys::IBV_ACCESS_REMOTE_WRITE != 0;
    if remote_write && !local_write {
        return Err((libc::EINVAL, "REMOTE_WRITE without LOCAL_WRITE"));
    }
    // The atomic right needs LOCAL_WRITE (as the kernel's ib_check_mr_access); granted,
    // it has no effect: iWARP has no atomics (atomic_cap NONE), and the atomic WRs are
    // refused at post. Accepted as the kernel iWARP providers do (libfabric's verbs
    // provider asks for it on every MR it may write).
    if flags & sys::IBV_ACCESS_REMOTE_ATOMIC != 0 && !local_write {
        return Err((libc::EINVAL, "REMOTE_ATOMIC without LOCAL_WRITE"));
    }
    if flags & (sys::IBV_ACCESS_ON_DEMAND | sys::IBV_ACCESS_ZERO_BASED) != 0 {
        return Err((libc::EOPNOTSUPP, "on-demand paging and zero-based MRs"));
    }
    // IBV_ACCESS_OPTIONAL_RANGE (bits 20-28): hints a provider may ignore.
    const OPTIONAL_RANGE: u32 = 0x1ff0_0000;
    let known = sys::IBV_ACCESS_LOCAL_WRITE
        | sys::IBV_ACCESS_REMOTE_WRITE
        | sys::IBV_ACCESS_REMOTE_READ
        | sys::IBV_ACCESS_REMOTE_ATOMIC
        | sys::IBV_ACCESS_MW_BIND
        | sys::IBV_ACCESS_HUGETLB
        | OPTIONAL_RANGE;
    if flags & !known != 0 {
        // Also IBV_ACCESS_FLUSH_* of newer headers: no FLUSH in this provider.
        return Err((libc::EOPNOTSUPP, "unknown or unsupported access flags"));
    }
    let mut a = Access::LOCAL_READ;
    if local_write {
        a |= Access::LOCAL_WRITE;
    }
    if remote_write {
        a |= Access::REMOTE_WRITE;
    }
    if flags & sys::IBV_ACCESS_REMOTE_READ != 0 {
        a |= Access::REMOTE_READ;
    }
    if flags & sys::IBV_ACCESS_MW_BIND != 0 {
        a |= Access::MW_BIND;
    }
    Ok(a)
}

fn reg(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut sys::ibv_mr {
    const WHAT: &str = "ibv_reg_mr";
    let Some(p) = from_raw::<IwPd>(pd) else {
        fail_with(WHAT, libc::EINVAL, "not a PD of this library");
        return std::ptr::null_mut();
    };
    if addr.is_null() || len == 0 {
        fail_with(WHAT, libc::EINVAL, "NULL address or zero length");
        return std::ptr::null_mut();
    }
    if iova != addr as u64 {
        fail_with(WHAT, libc::EOPNOTSUPP, "an IOVA other than the address");
        return std::ptr::null_mut();
    }
    let a = match access_of(access) {
        Ok(a) => a,
        Err((n, why)) => {
            fail_with(WHAT, n, why);
            return std::ptr::null_mut();
        }
    };
    // SAFETY: rdma-core's contract for ibv_reg_mr: the memory is the application's and
    // stays allocated while the MR exists. The remap copies the enclosing pages first
    // (docs/APPS.md); a concurrent writer to the same pages during this call is the
    // application's race, as with fork-safety in rdma-core.
    let client = match unsafe { p.client.reg_user_mr(addr.cast(), len, a) } {
        Ok(m) => m,
        Err(e) => {
            fail(WHAT, &e);
            return std::ptr::null_mut();
        }
    };
    crate::fork::registered(addr, len);
    let pd_ref = hold(p);
    let key = client.lkey().0;
    into_raw(IwMr {
        mr: sys::ibv_mr {
            context: p.pd.context,
            pd,
            addr,
            length: len,
            handle: key,
            lkey: key,
            rkey: client.rkey().0,
        },
        magic: AtomicU64::new(IwMr::MAGIC),
        client: std::sync::Mutex::new(client),
        pd: pd_ref,
    })
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut sys::ibv_mr {
    reg(pd, addr, len, addr as u64, access as u32)
}

/// `struct ibv_mr *ibv_reg_mr_iova(pd, addr, length, uint64_t iova, int access)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_reg_mr_iova(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    reg(pd, addr, len, iova, access as u32)
}

/// `struct ibv_mr *ibv_reg_mr_iova2(pd, addr, length, uint64_t iova, unsigned access)`
/// (what the header's `ibv_reg_mr` calls when the access flags are not constant).
#[no_mangle]
pub extern "C" fn iwarp_ibv_reg_mr_iova2(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut sys::ibv_mr {
    reg(pd, addr, len, iova, access)
}

/// `int ibv_dereg_mr(struct ibv_mr *)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_dereg_mr(mr: *mut sys::ibv_mr) -> c_int {
    let Some(m) = from_raw::<IwMr>(mr) else {
        return fail_with("ibv_dereg_mr", libc::EINVAL, "not an MR of this library");
    };
    // Refused while windows are bound to it (EBUSY): the MR stays registered and valid.
    if let Err(e) = m.lock().try_dereg() {
        return fail("ibv_dereg_mr", &e);
    }
    m.pd.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: from into_raw; the application gives the MR up with this call (the client's
    // Mr is deregistered already).
    unsafe { free(m) };
    0
}

/// `int ibv_rereg_mr(struct ibv_mr *, int flags, struct ibv_pd *, void *addr, size_t
/// length, int access)`: new access rights and/or a new range of application memory
/// (same PD: `IBV_REREG_MR_CHANGE_PD` to another PD is `EOPNOTSUPP`). 0, or an
/// `IBV_REREG_MR_ERR_*` with errno set; on error the MR is unchanged.
#[no_mangle]
pub extern "C" fn iwarp_ibv_rereg_mr(
    mr: *mut sys::ibv_mr,
    flags: c_int,
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> c_int {
    const WHAT: &str = "ibv_rereg_mr";
    const ERR_INPUT: c_int = sys::IBV_REREG_MR_ERR_INPUT as c_int;
    const ERR_CMD: c_int = sys::IBV_REREG_MR_ERR_CMD as c_int;
    let Some(m) = from_raw::<IwMr>(mr) else {
        fail_with(WHAT, libc::EINVAL, "not an MR of this library");
        return ERR_INPUT;
    };
    let flags = flags as u32;
    let translation = flags & sys::IBV_REREG_MR_CHANGE_TRANSLATION != 0;
    let known = sys::IBV_REREG_MR_CHANGE_TRANSLATION
        | sys::IBV_REREG_MR_CHANGE_PD
        | sys::IBV_REREG_MR_CHANGE_ACCESS;
    if flags == 0 || flags & !known != 0 {
        fail_with(WHAT, libc::EINVAL, "flags");
        return ERR_INPUT;
    }
    if flags & sys::IBV_REREG_MR_CHANGE_PD != 0 && pd != m.mr.pd {
        fail_with(WHAT, libc::EOPNOTSUPP, "moving an MR to another PD");
        return ERR_CMD;
    }
    if translation && (addr.is_null() || len == 0) {
        fail_with(WHAT, libc::EINVAL, "a new range of NULL or 0 bytes");
        return ERR_INPUT;
    }
    let mut client = m.lock();
    let new_access = if flags & sys::IBV_REREG_MR_CHANGE_ACCESS != 0 {
        match access_of(access as u32) {
            Ok(a) => a,
            Err((n, why)) => {
                fail_with(WHAT, n, why);
                return ERR_INPUT;
            }
        }
    } else {
        client.access()
    };
    let r = if translation {
        // SAFETY: as for ibv_reg_mr: the application's memory, allocated while the MR
        // exists.
        unsafe { client.rereg_user(addr.cast(), len, new_access) }
    } else {
        client.rereg_access(new_access)
    };
    if let Err(e) = r {
        fail(WHAT, &e);
        return ERR_CMD;
    }
    if translation {
        crate::fork::registered(addr, len);
    }
    let key = client.lkey().0;
    // SAFETY: the application's MR (ours); its fields are the provider's to update.
    unsafe {
        (*mr).lkey = key;
        (*mr).rkey = client.rkey().0;
        (*mr).handle = key;
        if translation {
            (*mr).addr = addr;
            (*mr).length = len;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_map_and_refuse_as_a_provider_does() {
        let a = access_of(sys::IBV_ACCESS_LOCAL_WRITE | sys::IBV_ACCESS_REMOTE_WRITE).unwrap();
        assert!(a.contains(Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE));
        assert!(!a.contains(Access::REMOTE_READ));
        assert_eq!(
            access_of(sys::IBV_ACCESS_REMOTE_WRITE).unwrap_err().0,
            libc::EINVAL
        );
        assert_eq!(
            access_of(sys::IBV_ACCESS_REMOTE_ATOMIC).unwrap_err().0,
            libc::EINVAL
        );
        assert!(access_of(sys::IBV_ACCESS_LOCAL_WRITE | sys::IBV_ACCESS_REMOTE_ATOMIC).is_ok());
        assert!(access_of(sys::IBV_ACCESS_RELAXED_ORDERING).is_ok());
    }
}
