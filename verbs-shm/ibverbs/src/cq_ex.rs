//! Extended CQs (`ibv_create_cq_ex`, the `verbs_context` op the header's inline function
//! calls) and their polling interface: `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`
//! and the `ibv_wc_read_*` readers, which the header's inline functions call through the
//! `ibv_cq_ex`'s own function pointers.
//!
//! `start_poll` / `next_poll` take one completion from the CQ into the CQ's current slot
//! and write its `status` and `wr_id` into the `ibv_cq_ex`, as providers do; the readers
//! read the slot. Between `start_poll` and `end_poll` the application holds the CQ
//! (rdma-core's contract: one poller at a time), so no lock spans the calls.
//!
//! Fields an iWARP completion has: opcode, vendor error, byte length, QP number, flags
//! (`IBV_WC_WITH_INV`). InfiniBand-only fields (source QP, SLID, SL, path bits) read 0.
//! Timestamps, CVLAN, flow tags, tag matching and immediate data are refused at creation
//! (`EOPNOTSUPP`), as a provider refuses `wc_flags` it cannot fill.

use std::ffi::c_int;

use iwarp_verbs::{Cqe, EMPTY_CQE};

use crate::cq::{make_cq, to_wc, wc_opcode, IwCq};
use crate::errno::{fail, fail_with};
use crate::object::from_raw;
use crate::sys;

/// The `wc_flags` an extended CQ can fill.
const WC_FLAGS_SUPPORTED: u64 = (sys::IBV_WC_EX_WITH_BYTE_LEN
    | sys::IBV_WC_EX_WITH_QP_NUM
    | sys::IBV_WC_EX_WITH_SRC_QP
    | sys::IBV_WC_EX_WITH_SLID
    | sys::IBV_WC_EX_WITH_SL
    | sys::IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// `verbs_context::create_cq_ex`.
pub(crate) unsafe extern "C" fn create_cq_ex_op(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    const WHAT: &str = "ibv_create_cq_ex";
    if attr.is_null() {
        fail_with(WHAT, libc::EINVAL, "NULL attr");
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    if a.wc_flags & !WC_FLAGS_SUPPORTED != 0 {
        fail_with(
            WHAT,
            libc::EOPNOTSUPP,
            &format!(
                "wc_flags {:#x}: timestamps, CVLAN, flow tags, tag matching and immediate data are not iWARP's",
                a.wc_flags & !WC_FLAGS_SUPPORTED
            ),
        );
        return std::ptr::null_mut();
    }
    let known = sys::IBV_CQ_INIT_ATTR_MASK_FLAGS | sys::IBV_CQ_INIT_ATTR_MASK_PD;
    if a.comp_mask & !known != 0 {
        fail_with(WHAT, libc::EINVAL, "unknown comp_mask bits");
        return std::ptr::null_mut();
    }
    if a.comp_mask & sys::IBV_CQ_INIT_ATTR_MASK_PD != 0 && !a.parent_domain.is_null() {
        fail_with(WHAT, libc::EOPNOTSUPP, "parent domains");
        return std::ptr::null_mut();
    }
    if a.comp_mask & sys::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && a.flags & !sys::IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        fail_with(
            WHAT,
            libc::EOPNOTSUPP,
            "CQ flags other than SINGLE_THREADED",
        );
        return std::ptr::null_mut();
    }
    let Ok(cqe) = c_int::try_from(a.cqe) else {
        fail_with(WHAT, libc::EINVAL, "cqe above INT_MAX");
        return std::ptr::null_mut();
    };
    let Ok(vector) = c_int::try_from(a.comp_vector) else {
        fail_with(WHAT, libc::EINVAL, "comp_vector");
        return std::ptr::null_mut();
    };
    let Some(q) = make_cq(WHAT, ctx, cqe, a.cq_context, a.channel, vector) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the CQ was just made and is not yet the application's.
    let cx = unsafe { &mut (*q).cq };
    cx.start_poll = Some(start_poll);
    cx.next_poll = Some(next_poll);
    cx.end_poll = Some(end_poll);
    cx.read_opcode = Some(read_opcode);
    cx.read_vendor_err = Some(read_vendor_err);
    cx.read_byte_len = Some(read_byte_len);
    cx.read_qp_num = Some(read_qp_num);
    cx.read_src_qp = Some(read_zero_u32);
    cx.read_wc_flags = Some(read_wc_flags);
    cx.read_slid = Some(read_zero_u32);
    cx.read_sl = Some(read_zero_u8);
    cx.read_dlid_path_bits = Some(read_zero_u8);
    q.cast()
}

/// The CQ of an application's `ibv_cq_ex`.
fn cq_of<'a>(cq: *mut sys::ibv_cq_ex) -> Option<&'a IwCq> {
    from_raw::<IwCq>(cq.cast())
}

/// Takes the next completion into the current slot: 0, `ENOENT` when there is none, or
/// the errno (the daemon gone: `EIO`).
fn advance(cq: *mut sys::ibv_cq_ex, what: &str) -> c_int {
    let Some(q) = cq_of(cq) else {
        return fail_with(what, libc::EINVAL, "not a CQ of this library");
    };
    let mut buf = [EMPTY_CQE; 1];
    let got = match q
        .client
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .poll(&mut buf)
    {
        Ok(n) => n,
        Err(e) => return fail(what, &e),
    };
    if got == 0 {
        return libc::ENOENT;
    }
    q.retire_inline(&buf);
    let c = buf[0];
    *q.current.lock().unwrap_or_else(|e| e.into_inner()) = c;
    let wc = to_wc(&c);
    // SAFETY: the application's ibv_cq_ex (ours): `status` and `wr_id` are the
    // provider's to write while the application polls it.
    unsafe {
        (*cq).status = wc.status;
        (*cq).wr_id = wc.wr_id;
    }
    0
}

unsafe extern "C" fn start_poll(
    cq: *mut sys::ibv_cq_ex,
    attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    // SAFETY: the caller's attributes (NULL tolerated).
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    advance(cq, "ibv_start_poll")
}

unsafe extern "C" fn next_poll(cq: *mut sys::ibv_cq_ex) -> c_int {
    advance(cq, "ibv_next_poll")
}

unsafe extern "C" fn end_poll(_cq: *mut sys::ibv_cq_ex) {}

/// The current completion.
fn current(cq: *mut sys::ibv_cq_ex) -> Cqe {
    cq_of(cq).map_or(EMPTY_CQE, |q| {
        *q.current.lock().unwrap_or_else(|e| e.into_inner())
    })
}

unsafe extern "C" fn read_opcode(cq: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode {
    wc_opcode(current(cq).opcode)
}

unsafe extern "C" fn read_vendor_err(cq: *mut sys::ibv_cq_ex) -> u32 {
    to_wc(&current(cq)).vendor_err
}

unsafe extern "C" fn read_byte_len(cq: *mut sys::ibv_cq_ex) -> u32 {
    to_wc(&current(cq)).byte_len
}

unsafe extern "C" fn read_qp_num(cq: *mut sys::ibv_cq_ex) -> u32 {
    current(cq).qp.0
}

unsafe extern "C" fn read_wc_flags(cq: *mut sys::ibv_cq_ex) -> std::ffi::c_uint {
    to_wc(&current(cq)).wc_flags
}

unsafe extern "C" fn read_zero_u32(_cq: *mut sys::ibv_cq_ex) -> u32 {
    0
}

unsafe extern "C" fn read_zero_u8(_cq: *mut sys::ibv_cq_ex) -> u8 {
    0
}
