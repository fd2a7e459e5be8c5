//! Extended QPs (`ibv_create_qp_ex`, the `verbs_context` op the header's inline function
//! calls) and the `ibv_wr_*` posting interface of a QP made with `send_ops_flags`
//! (`ibv_qp_to_qp_ex`, then `ibv_wr_start`, `ibv_wr_send` / `ibv_wr_rdma_write` / ...,
//! `ibv_wr_set_sge` / `ibv_wr_set_inline_data` / ..., `ibv_wr_complete` or
//! `ibv_wr_abort`, which the header calls through the `ibv_qp_ex`'s function pointers).
//!
//! The builders fill a [`Batch`] of `ibv_send_wr`s (their SGEs and inline bytes copied
//! into the batch, so the application's may change at once, as with a provider that
//! writes WQEs); `ibv_wr_complete` links them and posts them through the same path as
//! `ibv_post_send`. A builder that cannot take its WR (more WRs than the SQ, more SGEs
//! than `max_send_sge`, more inline bytes than `max_inline_data`) marks the batch, and
//! `ibv_wr_complete` then posts nothing and answers the errno, as rdma-core's providers
//! do. The operations iWARP has: SEND, SEND_WITH_INV, RDMA WRITE, RDMA READ, LOCAL_INV,
//! BIND_MW; `send_ops_flags` asking others (immediate data, atomics, TSO) is refused with
//! `EOPNOTSUPP` at creation.

use std::ffi::{c_int, c_void};

use crate::errno::fail_with;
use crate::qp::{create_qp_with, post_send_op, IwQp};
use crate::sys;

/// The `send_ops_flags` an iWARP QP offers.
const SEND_OPS_SUPPORTED: u64 = (sys::IBV_QP_EX_WITH_RDMA_WRITE
    | sys::IBV_QP_EX_WITH_SEND
    | sys::IBV_QP_EX_WITH_RDMA_READ
    | sys::IBV_QP_EX_WITH_LOCAL_INV
    | sys::IBV_QP_EX_WITH_BIND_MW
    | sys::IBV_QP_EX_WITH_SEND_WITH_INV) as u64;

/// WRs built and not yet posted, with the SGEs and inline bytes they own. Every buffer
/// is allocated once, at creation, for the SQ's capacities: a builder never allocates.
pub(crate) struct Batch {
    wrs: Vec<sys::ibv_send_wr>,
    /// Per WR, its SGEs in `sges`: (first, count).
    sgl_of: Vec<(usize, usize)>,
    sges: Vec<sys::ibv_sge>,
    inline: Vec<u8>,
    /// The errno of the first builder that failed (0: none).
    error: c_int,
    max_wr: usize,
    max_sge: usize,
    max_inline: usize,
}

impl Batch {
    fn new(max_wr: u32, max_sge: u32, max_inline: u32) -> Batch {
        let (w, s, i) = (max_wr as usize, max_sge as usize, max_inline as usize);
        Batch {
            wrs: Vec::with_capacity(w),
            sgl_of: Vec::with_capacity(w),
            sges: Vec::with_capacity(w * s),
            inline: Vec::with_capacity(w * i),
            error: 0,
            max_wr: w,
            max_sge: s,
            max_inline: i,
        }
    }

    fn clear(&mut self) {
        self.wrs.clear();
        self.sgl_of.clear();
        self.sges.clear();
        self.inline.clear();
        self.error = 0;
    }

    fn fail(&mut self, errno: c_int) {
        if self.error == 0 {
            self.error = errno;
        }
    }

    /// A new WR of the QP's current `wr_id` and `wr_flags`.
    fn push(
        &mut self,
        qpx: &sys::ibv_qp_ex,
        opcode: sys::ibv_wr_opcode,
    ) -> Option<&mut sys::ibv_send_wr> {
        if self.wrs.len() == self.max_wr {
            self.fail(libc::ENOMEM);
            return None;
        }
        self.wrs.push(sys::ibv_send_wr {
            wr_id: qpx.wr_id,
            opcode,
            send_flags: qpx.wr_flags,
            ..Default::default()
        });
        self.sgl_of.push((self.sges.len(), 0));
        self.wrs.last_mut()
    }

    /// Sets the SGL of the last WR (`lkey`, `addr`, `length` each).
    fn set_sgl(&mut self, sges: impl ExactSizeIterator<Item = sys::ibv_sge>) {
        if self.wrs.is_empty() {
            self.fail(libc::EINVAL);
            return;
        }
        if sges.len() > self.max_sge {
            self.fail(libc::EINVAL);
            return;
        }
        let first = self.sges.len();
        let n = sges.len();
        self.sges.extend(sges);
        if let Some(s) = self.sgl_of.last_mut() {
            *s = (first, n);
        }
    }

    /// Copies `pieces` as the last WR's inline data.
    fn set_inline(&mut self, pieces: &[&[u8]]) {
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        // Within the buffer's capacity (a WR given inline data twice could pass it):
        // bytes already staged must not move.
        if self.wrs.is_empty()
            || total > self.max_inline
            || self.inline.len() + total > self.inline.capacity()
        {
            self.fail(libc::EINVAL);
            return;
        }
        let at = self.inline.len();
        for p in pieces {
            self.inline.extend_from_slice(p);
        }
        // The bytes stay where they are until the batch is posted or cleared: the
        // buffer was made for max_wr WRs of max_inline bytes and never grows.
        let addr = self.inline.as_ptr() as u64 + at as u64;
        if let Some(w) = self.wrs.last_mut() {
            w.send_flags |= sys::IBV_SEND_INLINE;
        }
        self.set_sgl(std::iter::once(sys::ibv_sge {
            addr,
            length: total as u32,
            lkey: 0,
        }));
    }
}

/// What an `ibv_qp_init_attr_ex` asks, checked: the plain attributes and, with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, the operations of the `ibv_wr_*` interface. None
/// with errno set when something is not iWARP's (`EOPNOTSUPP`) or malformed (`EINVAL`).
pub(crate) fn check_attr_ex(
    what: &str,
    a: &sys::ibv_qp_init_attr_ex,
    need_pd: bool,
) -> Option<(sys::ibv_qp_init_attr, Option<u64>)> {
    let known = sys::IBV_QP_INIT_ATTR_PD
        | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
        | sys::IBV_QP_INIT_ATTR_CREATE_FLAGS;
    if need_pd && a.comp_mask & sys::IBV_QP_INIT_ATTR_PD == 0 {
        fail_with(
            what,
            libc::EINVAL,
            "an RC QP needs a PD (IBV_QP_INIT_ATTR_PD)",
        );
        return None;
    }
    if a.comp_mask & !known != 0 {
        fail_with(
            what,
            libc::EOPNOTSUPP,
            "XRC domains, TSO, RSS indirection and hashing are not iWARP's",
        );
        return None;
    }
    if a.comp_mask & sys::IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
        fail_with(what, libc::EOPNOTSUPP, "create_flags");
        return None;
    }
    let ops = if a.comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        if a.send_ops_flags & !SEND_OPS_SUPPORTED != 0 {
            fail_with(
                what,
                libc::EOPNOTSUPP,
                "send_ops_flags: immediate data, atomics and TSO are not iWARP's",
            );
            return None;
        }
        Some(a.send_ops_flags)
    } else {
        None
    };
    let init = sys::ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
    };
    Some((init, ops))
}

/// Gives a new QP (not yet the application's) the `ibv_wr_*` interface for `ops`
/// (`send_ops_flags`), with a batch for its capacities `cap`.
pub(crate) fn enable_wr_api(qp: *mut sys::ibv_qp, ops: u64, cap: &sys::ibv_qp_cap) {
    let Some(q) = IwQp::from_ptr(qp) else {
        return;
    };
    *q.wr_batch.lock().unwrap_or_else(|e| e.into_inner()) = Some(Batch::new(
        cap.max_send_wr,
        cap.max_send_sge,
        cap.max_inline_data,
    ));
    // SAFETY: the QP was just made and is not yet the application's; an IwQp begins
    // with its ibv_qp_ex.
    let x = unsafe { &mut *qp.cast::<sys::ibv_qp_ex>() };
    x.wr_start = Some(wr_start);
    x.wr_complete = Some(wr_complete);
    x.wr_abort = Some(wr_abort);
    x.wr_set_sge = Some(wr_set_sge);
    x.wr_set_sge_list = Some(wr_set_sge_list);
    x.wr_set_inline_data = Some(wr_set_inline_data);
    x.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    let has = |f: u32| ops & u64::from(f) != 0;
    if has(sys::IBV_QP_EX_WITH_SEND) {
        x.wr_send = Some(wr_send);
    }
    if has(sys::IBV_QP_EX_WITH_SEND_WITH_INV) {
        x.wr_send_inv = Some(wr_send_inv);
    }
    if has(sys::IBV_QP_EX_WITH_RDMA_WRITE) {
        x.wr_rdma_write = Some(wr_rdma_write);
    }
    if has(sys::IBV_QP_EX_WITH_RDMA_READ) {
        x.wr_rdma_read = Some(wr_rdma_read);
    }
    if has(sys::IBV_QP_EX_WITH_LOCAL_INV) {
        x.wr_local_inv = Some(wr_local_inv);
    }
    if has(sys::IBV_QP_EX_WITH_BIND_MW) {
        x.wr_bind_mw = Some(wr_bind_mw);
    }
}

/// `verbs_context::create_qp_ex`: an RC QP of `attr->pd`; with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` it posts through the `ibv_wr_*` interface too.
pub(crate) unsafe extern "C" fn create_qp_ex_op(
    _ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    const WHAT: &str = "ibv_create_qp_ex";
    if attr.is_null() {
        fail_with(WHAT, libc::EINVAL, "NULL attr");
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &mut *attr };
    let Some((mut init, ops)) = check_attr_ex(WHAT, a, true) else {
        return std::ptr::null_mut();
    };
    let qp = create_qp_with(WHAT, a.pd, &mut init, |pd, i| pd.create_qp(i));
    a.cap = init.cap;
    if let (false, Some(ops)) = (qp.is_null(), ops) {
        enable_wr_api(qp, ops, &init.cap);
    }
    qp
}

/// `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)`: the QP's `ibv_qp_ex` when it was
/// made with `send_ops_flags`, else NULL.
#[no_mangle]
pub extern "C" fn iwarp_ibv_qp_to_qp_ex(qp: *mut sys::ibv_qp) -> *mut sys::ibv_qp_ex {
    match IwQp::from_ptr(qp) {
        Some(q)
            if q.wr_batch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some() =>
        {
            qp.cast()
        }
        _ => {
            crate::errno::set_errno(libc::EOPNOTSUPP);
            std::ptr::null_mut()
        }
    }
}

/// Runs `f` on the QP's batch (nothing for a QP without one, which has no builders).
fn with_batch(qpx: *mut sys::ibv_qp_ex, f: impl FnOnce(&sys::ibv_qp_ex, &mut Batch)) {
    let Some(q) = IwQp::from_ptr(qpx.cast()) else {
        return;
    };
    let mut g = q.wr_batch.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = g.as_mut() {
        f(&q.qp, b);
    }
}

unsafe extern "C" fn wr_start(qpx: *mut sys::ibv_qp_ex) {
    with_batch(qpx, |_, b| b.clear());
}

unsafe extern "C" fn wr_abort(qpx: *mut sys::ibv_qp_ex) {
    with_batch(qpx, |_, b| b.clear());
}

/// `ibv_wr_complete`: posts the batch (0), or nothing and the errno of the first builder
/// that failed; an errno of the post itself (`ENOMEM`: the SQ is full) leaves the WRs
/// before the refused one posted, as `ibv_post_send` does.
unsafe extern "C" fn wr_complete(qpx: *mut sys::ibv_qp_ex) -> c_int {
    let Some(q) = IwQp::from_ptr(qpx.cast()) else {
        return libc::EINVAL;
    };
    let mut g = q.wr_batch.lock().unwrap_or_else(|e| e.into_inner());
    let Some(b) = g.as_mut() else {
        return libc::EOPNOTSUPP;
    };
    if b.error != 0 || b.wrs.is_empty() {
        let e = b.error;
        b.clear();
        return e;
    }
    let n = b.wrs.len();
    let sges = b.sges.as_mut_ptr();
    let wrs = b.wrs.as_mut_ptr();
    for (i, &(first, count)) in b.sgl_of.iter().enumerate() {
        // SAFETY: i < n = wrs.len(); `first + count <= sges.len()` (set_sgl); the
        // pointers stay valid while the batch is locked and not cleared.
        unsafe {
            let w = &mut *wrs.add(i);
            w.sg_list = if count == 0 {
                std::ptr::null_mut()
            } else {
                sges.add(first)
            };
            w.num_sge = count as c_int;
            w.next = if i + 1 < n {
                wrs.add(i + 1)
            } else {
                std::ptr::null_mut()
            };
        }
    }
    let mut bad = std::ptr::null_mut();
    // SAFETY: a well-formed WR list of the batch's own memory, on the QP it belongs to.
    let r = unsafe { post_send_op(qpx.cast(), wrs, &mut bad) };
    b.clear();
    r
}

unsafe extern "C" fn wr_send(qpx: *mut sys::ibv_qp_ex) {
    with_batch(qpx, |x, b| {
        b.push(x, sys::IBV_WR_SEND);
    });
}

/// A new WR of `opcode` naming a remote buffer (RDMA WRITE, READ).
fn push_rdma(qpx: *mut sys::ibv_qp_ex, opcode: sys::ibv_wr_opcode, rkey: u32, remote_addr: u64) {
    with_batch(qpx, |x, b| {
        if let Some(w) = b.push(x, opcode) {
            w.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
        }
    });
}

/// A new WR of `opcode` invalidating `rkey` (SEND_WITH_INV, LOCAL_INV).
fn push_inv(qpx: *mut sys::ibv_qp_ex, opcode: sys::ibv_wr_opcode, rkey: u32) {
    with_batch(qpx, |x, b| {
        if let Some(w) = b.push(x, opcode) {
            w.__bindgen_anon_1.invalidate_rkey = rkey;
        }
    });
}

unsafe extern "C" fn wr_send_inv(qpx: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    push_inv(qpx, sys::IBV_WR_SEND_WITH_INV, invalidate_rkey);
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push_rdma(qpx, sys::IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push_rdma(qpx, sys::IBV_WR_RDMA_READ, rkey, remote_addr);
}

unsafe extern "C" fn wr_local_inv(qpx: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    push_inv(qpx, sys::IBV_WR_LOCAL_INV, invalidate_rkey);
}

unsafe extern "C" fn wr_bind_mw(
    qpx: *mut sys::ibv_qp_ex,
    mw: *mut sys::ibv_mw,
    rkey: u32,
    bind_info: *const sys::ibv_mw_bind_info,
) {
    with_batch(qpx, |x, b| {
        if bind_info.is_null() {
            b.fail(libc::EINVAL);
            return;
        }
        // SAFETY: the caller's bind description (read now: it may change after).
        let info = unsafe { *bind_info };
        if let Some(w) = b.push(x, sys::IBV_WR_BIND_MW) {
            w.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
                mw,
                rkey,
                bind_info: info,
            };
        }
    });
}

unsafe extern "C" fn wr_set_sge(qpx: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    with_batch(qpx, |_, b| {
        b.set_sgl(std::iter::once(sys::ibv_sge { addr, length, lkey }))
    });
}

unsafe extern "C" fn wr_set_sge_list(
    qpx: *mut sys::ibv_qp_ex,
    num_sge: usize,
    sg_list: *const sys::ibv_sge,
) {
    with_batch(qpx, |_, b| {
        if num_sge > 0 && sg_list.is_null() {
            b.fail(libc::EINVAL);
            return;
        }
        let l: &[sys::ibv_sge] = if num_sge == 0 {
            &[]
        } else {
            // SAFETY: the caller's list of num_sge SGEs (copied now).
            unsafe { std::slice::from_raw_parts(sg_list, num_sge) }
        };
        b.set_sgl(l.iter().copied());
    });
}

unsafe extern "C" fn wr_set_inline_data(
    qpx: *mut sys::ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) {
    with_batch(qpx, |_, b| {
        if length > b.max_inline || (length > 0 && addr.is_null()) {
            b.fail(libc::EINVAL);
            return;
        }
        let bytes: &[u8] = if length == 0 {
            &[]
        } else {
            // SAFETY: the caller's `length` readable bytes (copied now).
            unsafe { std::slice::from_raw_parts(addr as *const u8, length) }
        };
        b.set_inline(&[bytes]);
    });
}

unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut sys::ibv_qp_ex,
    num_buf: usize,
    buf_list: *const sys::ibv_data_buf,
) {
    with_batch(qpx, |_, b| {
        if num_buf > b.max_sge.max(1) * 4 || (num_buf > 0 && buf_list.is_null()) {
            b.fail(libc::EINVAL);
            return;
        }
        let bufs: &[sys::ibv_data_buf] = if num_buf == 0 {
            &[]
        } else {
            // SAFETY: the caller's list of num_buf buffers.
            unsafe { std::slice::from_raw_parts(buf_list, num_buf) }
        };
        let total = bufs.iter().try_fold(0usize, |n, d| n.checked_add(d.length));
        if total.is_none_or(|t| t > b.max_inline)
            || bufs.iter().any(|d| d.length > 0 && d.addr.is_null())
        {
            b.fail(libc::EINVAL);
            return;
        }
        // At most 4 x max_sge pieces (bounded above): collected on the stack.
        let mut pieces: [&[u8]; 64] = [&[]; 64];
        if bufs.len() > pieces.len() {
            b.fail(libc::EINVAL);
            return;
        }
        for (p, d) in pieces.iter_mut().zip(bufs) {
            if d.length > 0 {
                // SAFETY: the caller's buffer of `length` readable bytes (copied now).
                *p = unsafe { std::slice::from_raw_parts(d.addr as *const u8, d.length) };
            }
        }
        b.set_inline(&pieces[..bufs.len()]);
    });
}
