//! Memory windows through the context's ops table (`ibv_alloc_mw`, `ibv_bind_mw`,
//! `ibv_dealloc_mw` are the header's inline functions): type 1 and type 2 windows of the
//! client library. `ibv_bind_mw` binds a type 1 window by the client's bind verb (it has
//! taken effect when the call returns, and its errors are the call's) and posts a Bind WR
//! for the completion rdma-core's providers give (`IBV_WC_BIND_MW` with the bind's
//! `wr_id` on the send CQ when signaled, in order). A type 2 window is bound
//! by a Bind WR (`IBV_WR_BIND_MW` through `ibv_post_send`, [`bind_wr_op`]): it completes
//! as `IBV_WC_BIND_MW` on the send CQ, in order with the QP's other WRs.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use iwarp_verbs::{Access, Mw, MwKind, SendFlags, SendOp, SendWr, SgList};

use crate::errno::{fail, fail_with};
use crate::object::{free, from_raw, hold, into_raw, Wrapped};
use crate::pd::{IwMr, IwPd};
use crate::qp::IwQp;
use crate::sys;

/// A memory window.
#[repr(C)]
pub(crate) struct IwMw {
    mw: sys::ibv_mw,
    magic: AtomicU64,
    /// The client's window (taken out by `ibv_dealloc_mw`).
    client: Mutex<Option<Mw>>,
    pd: &'static IwPd,
}

impl Wrapped for IwMw {
    type Raw = sys::ibv_mw;
    const MAGIC: u64 = 0x6977_6172_705f_6d77;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// `ibv_context_ops::alloc_mw`.
pub(crate) unsafe extern "C" fn alloc_mw_op(
    pd: *mut sys::ibv_pd,
    kind: sys::ibv_mw_type,
) -> *mut sys::ibv_mw {
    const WHAT: &str = "ibv_alloc_mw";
    let Some(p) = from_raw::<IwPd>(pd) else {
        fail_with(WHAT, libc::EINVAL, "not a PD of this library");
        return std::ptr::null_mut();
    };
    let k = match kind {
        sys::IBV_MW_TYPE_1 => MwKind::Type1,
        sys::IBV_MW_TYPE_2 => MwKind::Type2,
        _ => {
            fail_with(WHAT, libc::EINVAL, "window type 1 or 2");
            return std::ptr::null_mut();
        }
    };
    let client = match p.client.alloc_mw(k) {
        Ok(m) => m,
        Err(e) => {
            fail(WHAT, &e);
            return std::ptr::null_mut();
        }
    };
    let pd_ref = hold(p);
    let rkey = client.rkey().0;
    into_raw(IwMw {
        mw: sys::ibv_mw {
            context: p.pd.context,
            pd,
            rkey,
            handle: rkey,
            type_: kind,
        },
        magic: AtomicU64::new(IwMw::MAGIC),
        client: Mutex::new(Some(client)),
        pd: pd_ref,
    })
}

/// `ibv_context_ops::dealloc_mw`: the daemon's answer (the window is gone either way).
pub(crate) unsafe extern "C" fn dealloc_mw_op(mw: *mut sys::ibv_mw) -> c_int {
    const WHAT: &str = "ibv_dealloc_mw";
    let Some(w) = from_raw::<IwMw>(mw) else {
        return fail_with(WHAT, libc::EINVAL, "not a window of this library");
    };
    w.pd.users.fetch_sub(1, Ordering::AcqRel);
    let client = w.client.lock().unwrap_or_else(|e| e.into_inner()).take();
    // SAFETY: from into_raw; the application gives the window up with this call.
    unsafe { free(w) };
    match client.map(Mw::dealloc) {
        Some(Ok(())) | None => 0,
        Some(Err(e)) => fail(WHAT, &e),
    }
}

/// The rights of a window from rdma-core's flags: remote read and write only.
fn window_access(flags: u32) -> Result<Access, &'static str> {
    let known = sys::IBV_ACCESS_REMOTE_READ
        | sys::IBV_ACCESS_REMOTE_WRITE
        | sys::IBV_ACCESS_LOCAL_WRITE
        | sys::IBV_ACCESS_ZERO_BASED;
    if flags & !known != 0 {
        return Err("a window grants remote read and write only");
    }
    // A window's rights are remote ones only (LOCAL_WRITE, which applications often
    // pass along, means nothing for a window).
    let mut a = Access::NONE;
    if flags & sys::IBV_ACCESS_REMOTE_READ != 0 {
        a |= Access::REMOTE_READ;
    }
    if flags & sys::IBV_ACCESS_REMOTE_WRITE != 0 {
        a |= Access::REMOTE_WRITE;
    }
    Ok(a)
}

/// `ibv_context_ops::bind_mw` (type 1; the header checked the type and the PDs): binds
/// the window to `[addr, addr + length)` of the MR; `mw->rkey` is the window's new key.
pub(crate) unsafe extern "C" fn bind_mw_op(
    qp: *mut sys::ibv_qp,
    mw: *mut sys::ibv_mw,
    bind: *mut sys::ibv_mw_bind,
) -> c_int {
    const WHAT: &str = "ibv_bind_mw";
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with(WHAT, libc::EINVAL, "not a QP of this library");
    };
    let Some(w) = from_raw::<IwMw>(mw) else {
        return fail_with(WHAT, libc::EINVAL, "not a window of this library");
    };
    if bind.is_null() {
        return fail_with(WHAT, libc::EINVAL, "NULL bind");
    }
    // SAFETY: the caller's bind description.
    let (info, wr_id, send_flags) =
        unsafe { ((*bind).bind_info, (*bind).wr_id, (*bind).send_flags) };
    let Some(m) = from_raw::<IwMr>(info.mr) else {
        return fail_with(
            WHAT,
            libc::EOPNOTSUPP,
            "unbinding (no MR) is not supported: deallocate the window",
        );
    };
    let access = match window_access(info.mw_access_flags) {
        Ok(a) => a,
        Err(why) => return fail_with(WHAT, libc::EINVAL, why),
    };
    let zero_based = info.mw_access_flags & sys::IBV_ACCESS_ZERO_BASED != 0;
    let mut guard = w.client.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = guard.as_mut() else {
        return fail_with(WHAT, libc::EINVAL, "window deallocated");
    };
    let mr = m.lock();
    if let Err(e) = c.bind(&mr, info.addr, info.length, access, zero_based) {
        return fail(WHAT, &e);
    }
    // SAFETY: the application's window; rdma-core's providers update its rkey.
    unsafe { (*mw).rkey = c.rkey().0 };
    // The bind took effect; its WR makes the completion rdma-core's providers give (an
    // IBV_WC_BIND_MW with `wr_id` on the send CQ when signaled), in order with the QP's
    // other WRs. It binds the window again to the same range, which changes nothing.
    let flags = if send_flags & sys::IBV_SEND_SIGNALED != 0 {
        SendFlags::SIGNALED
    } else {
        SendFlags::NONE
    };
    let wr = SendWr {
        wr_id,
        op: c.bind_op(
            c.rkey().0 as u8,
            &mr,
            info.addr,
            info.length,
            access,
            zero_based,
        ),
        sgl: SgList::new(),
        flags,
    };
    drop(mr);
    drop(guard);
    match crate::qp::post_built(q, &wr) {
        Ok(()) => 0,
        Err(n) => fail_with(WHAT, n, "the Bind WR was refused (SQ full?)"),
    }
}

/// The operation of an `IBV_WR_BIND_MW` WR (a type 2 window; `bind.rkey` is the window's
/// new key, `ibv_inc_rkey(mw->rkey)` by convention: its index must be the window's), or
/// the errno. The application keeps the new rkey, as with rdma-core's providers.
pub(crate) fn bind_wr_op(
    bind: &sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1,
) -> Result<SendOp, c_int> {
    let Some(w) = from_raw::<IwMw>(bind.mw) else {
        return Err(libc::EINVAL);
    };
    if w.mw.type_ != sys::IBV_MW_TYPE_2 {
        // A type 1 window is bound with ibv_bind_mw.
        return Err(libc::EINVAL);
    }
    let info = bind.bind_info;
    // Invalidating a type 2 window is IBV_WR_LOCAL_INV (or a SEND_WITH_INV), not an
    // empty bind.
    let Some(m) = from_raw::<IwMr>(info.mr) else {
        return Err(libc::EINVAL);
    };
    let access = window_access(info.mw_access_flags).map_err(|_| libc::EINVAL)?;
    let zero_based = info.mw_access_flags & sys::IBV_ACCESS_ZERO_BASED != 0;
    let guard = w.client.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = guard.as_ref() else {
        return Err(libc::EINVAL);
    };
    if bind.rkey >> 8 != c.rkey().0 >> 8 {
        return Err(libc::EINVAL);
    }
    Ok(c.bind_op(
        bind.rkey as u8,
        &m.lock(),
        info.addr,
        info.length,
        access,
        zero_based,
    ))
}
