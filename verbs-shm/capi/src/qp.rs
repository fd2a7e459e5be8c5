//! Queue pairs and shared receive queues: creation, modify, query, destroy, posting.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use iwarp_types::{SendFlags, SendOp, SendWr, SgList};
use iwarp_verbs::{Cq, Qp, QpCap, QpInitAttr, QpModifyReq, QpStateValue, Srq, SrqInitAttr};

use crate::error::{guard, guard_new, guard_value, CResult, Failure, IWV_EQUEUEFULL};
use crate::handles::{iwv_pd, iwv_qp, iwv_srq, lock, obj, obj_mut, take};
use crate::types::{
    iwv_qp_attr, iwv_qp_cap, iwv_qp_init_attr, iwv_recv_wr, iwv_send_wr, iwv_srq_attr,
};
use crate::wr::{recv_wr, send_wr};

/// Send WRs converted and posted per doorbell.
const POST_BATCH: usize = 16;
/// Longest WR list one post walks (a cyclic list ends here with `EINVAL`).
const MAX_POST_LIST: usize = 1 << 20;

const QP_STATE: c_int = 1 << 0;
const QP_ORD: c_int = 1 << 1;
const QP_IRD: c_int = 1 << 2;
const QP_MAX_SEND_WR: c_int = 1 << 3;
const QP_MAX_RECV_WR: c_int = 1 << 4;
const QP_RQ_LIMIT: c_int = 1 << 5;

const SRQ_MAX_WR: c_int = 1 << 0;
const SRQ_LIMIT: c_int = 1 << 1;

fn state_from(v: u32) -> CResult<QpStateValue> {
    Ok(match v {
        0 => QpStateValue::Idle,
        1 => QpStateValue::Rts,
        2 => QpStateValue::Closing,
        3 => QpStateValue::Terminate,
        4 => QpStateValue::Error,
        v => return Err(Failure::invalid(format!("QP state {v}"))),
    })
}

fn state_to(s: QpStateValue) -> u32 {
    match s {
        QpStateValue::Idle => 0,
        QpStateValue::Rts => 1,
        QpStateValue::Closing => 2,
        QpStateValue::Terminate => 3,
        QpStateValue::Error => 4,
    }
}

fn cap_to(c: QpCap) -> iwv_qp_cap {
    iwv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
    }
}

/// Creates a QP from the C attributes with `create` (`Pd::create_qp` or
/// `CmId::create_qp`): locks the CQs and SRQ it names while `create` runs.
///
/// # Safety
///
/// `attr` is NULL or valid; the CQ and SRQ pointers in it are NULL or live handles.
pub(crate) unsafe fn create_with(
    attr: *const iwv_qp_init_attr,
    create: impl FnOnce(&QpInitAttr<'_>) -> iwarp_verbs::Result<Qp>,
) -> CResult<iwv_qp> {
    // SAFETY: the caller's contract.
    let a = unsafe { obj(attr, "attr") }?;
    // SAFETY: the caller's contract: live handles or NULL.
    let (send, recv) = unsafe { (obj(a.send_cq, "send_cq")?, obj(a.recv_cq, "recv_cq")?) };
    // SAFETY: as above; the SRQ is optional.
    let srq = unsafe { a.srq.as_ref() };
    let send_guard = lock(&send.cq);
    let recv_guard = (!std::ptr::eq(send, recv)).then(|| lock(&recv.cq));
    let recv_cq: &Cq = recv_guard.as_deref().unwrap_or(&send_guard);
    let srq_guard = srq.map(|s| lock(&s.srq));
    let mut init = QpInitAttr::new(&send_guard, recv_cq);
    init.srq = srq_guard.as_deref();
    let or = |v: u32, d: u32| if v == 0 { d } else { v };
    init.cap = QpCap {
        max_send_wr: or(a.cap.max_send_wr, init.cap.max_send_wr),
        max_recv_wr: or(a.cap.max_recv_wr, init.cap.max_recv_wr),
        max_send_sge: or(a.cap.max_send_sge, init.cap.max_send_sge),
        max_recv_sge: or(a.cap.max_recv_sge, init.cap.max_recv_sge),
    };
    init.sq_sig_all = a.sq_sig_all != 0;
    init.ord = or(a.ord, init.ord);
    init.ird = or(a.ird, init.ird);
    init.remote_read = a.remote_read != 0;
    init.remote_write = a.remote_write != 0;
    init.bind_enabled = a.bind_enabled != 0;
    let qp = create(&init)?;
    Ok(iwv_qp {
        qp_num: qp.qp_num(),
        qp: Mutex::new(qp),
        context: a.qp_context as usize,
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_qp(
    pd: *mut iwv_pd,
    attr: *const iwv_qp_init_attr,
) -> *mut iwv_qp {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let p = unsafe { obj(pd, "pd") }?;
        // SAFETY: header contract on `attr` and the handles in it.
        unsafe { create_with(attr, |init| p.pd.create_qp(init)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_modify_qp(
    qp: *mut iwv_qp,
    attr: *const iwv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and readable struct, or NULL (header contract).
        let (q, a) = unsafe { (obj(qp, "qp")?, obj(attr, "attr")?) };
        let known = QP_STATE | QP_ORD | QP_IRD | QP_MAX_SEND_WR | QP_MAX_RECV_WR | QP_RQ_LIMIT;
        if attr_mask & !known != 0 {
            return Err(Failure::invalid(format!(
                "QP attribute mask {attr_mask:#x}"
            )));
        }
        let pick = |bit: c_int, v: u32| (attr_mask & bit != 0).then_some(v);
        let modify = QpModifyReq {
            state: match attr_mask & QP_STATE {
                0 => None,
                _ => Some(state_from(a.qp_state)?),
            },
            ord: pick(QP_ORD, a.ord),
            ird: pick(QP_IRD, a.ird),
            max_send_wr: pick(QP_MAX_SEND_WR, a.cap.max_send_wr),
            max_recv_wr: pick(QP_MAX_RECV_WR, a.cap.max_recv_wr),
            rq_limit: pick(QP_RQ_LIMIT, a.rq_limit),
        };
        lock(&q.qp).modify(modify)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_query_qp(qp: *mut iwv_qp, attr: *mut iwv_qp_attr) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable struct, or NULL (header contract).
        let (q, out) = unsafe { (obj(qp, "qp")?, obj_mut(attr, "attr")?) };
        let i = lock(&q.qp).query()?;
        *out = iwv_qp_attr {
            qp_state: state_to(i.state),
            ord: i.ord,
            ird: i.ird,
            cap: cap_to(i.cap),
            rq_limit: 0,
            qp_num: i.qp.0,
            core: i.core,
            connected: i.connected as u32,
            terminate_sent: i.terminate_sent.map_or(-1, |t| t.code as i32),
            terminate_received: i.terminate_received.map_or(-1, |t| t.code as i32),
            reserved: 0,
        };
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_qp(qp: *mut iwv_qp) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_create_qp`/`iwv_cm_create_qp`, destroyed once.
        let q = unsafe { take(qp, "qp") }?;
        q.qp.into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .destroy()?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_qp_num(qp: *mut iwv_qp) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { obj(qp, "qp") }?.qp_num))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_qp_context(qp: *mut iwv_qp) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || {
        // SAFETY: live handle or NULL (header contract).
        Ok(unsafe { obj(qp, "qp") }?.context as *mut c_void)
    })
}

/// Stores `wr` into `*bad` if `bad` is not NULL.
///
/// # Safety
///
/// `bad` is NULL or writable.
unsafe fn set_bad<T>(bad: *mut *mut T, wr: *mut T) {
    // SAFETY: the caller's contract.
    if let Some(b) = unsafe { bad.as_mut() } {
        *b = wr;
    }
}

#[no_mangle]
pub unsafe extern "C" fn iwv_post_send(
    qp: *mut iwv_qp,
    wr: *mut iwv_send_wr,
    bad_wr: *mut *mut iwv_send_wr,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let q = unsafe { obj(qp, "qp") }?;
        let mut qp = lock(&q.qp);
        // SAFETY: NULL or a readable WR (header contract).
        if let Some(one) = unsafe { wr.as_ref() }.filter(|w| w.next.is_null()) {
            // The common case, one WR: no batch to build.
            // SAFETY: its SGL and fast-register arena are valid (header contract).
            let r = unsafe { send_wr(one) }.and_then(|w| qp.post_send(&w).map_err(Failure::from));
            if r.is_err() {
                // SAFETY: `bad_wr` is NULL or writable (header contract).
                unsafe { set_bad(bad_wr, wr) };
            }
            return r.map(|()| 0);
        }
        let blank = SendWr {
            wr_id: 0,
            op: SendOp::Send,
            sgl: SgList::new(),
            flags: SendFlags::NONE,
        };
        let mut next = wr;
        let mut walked = 0;
        while !next.is_null() {
            let mut batch = [blank; POST_BATCH];
            let mut ptrs = [std::ptr::null_mut(); POST_BATCH];
            let mut n = 0;
            let mut failed = None;
            while n < POST_BATCH && !next.is_null() {
                // SAFETY: each WR of the list is readable (header contract).
                let c = unsafe { &*next };
                // SAFETY: its SGL and fast-register arena are valid (header contract).
                match unsafe { send_wr(c) } {
                    Ok(w) => {
                        batch[n] = w;
                        ptrs[n] = next;
                        n += 1;
                        next = c.next;
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                walked += 1;
                if walked > MAX_POST_LIST {
                    failed = Some(Failure::invalid("WR list too long (a cycle?)"));
                    break;
                }
            }
            let posted = match n {
                0 => 0,
                _ => match qp.post_send_batch(&batch[..n]) {
                    Ok(k) => k,
                    Err(iwarp_verbs::Error::QueueFull) => 0,
                    Err(e) => {
                        // SAFETY: `bad_wr` is NULL or writable (header contract).
                        unsafe { set_bad(bad_wr, ptrs[0]) };
                        return Err(e.into());
                    }
                },
            };
            if posted < n {
                // SAFETY: as above.
                unsafe { set_bad(bad_wr, ptrs[posted]) };
                return Err(Failure::new(IWV_EQUEUEFULL, "work queue full"));
            }
            if let Some(e) = failed {
                // SAFETY: as above.
                unsafe { set_bad(bad_wr, next) };
                return Err(e);
            }
        }
        Ok(0)
    })
}

/// Posts a receive list with `post`, one WR at a time.
///
/// # Safety
///
/// Every WR of the list starting at `wr` is readable with a valid SGL; `bad_wr` is NULL
/// or writable.
unsafe fn post_recv_list(
    wr: *mut iwv_recv_wr,
    bad_wr: *mut *mut iwv_recv_wr,
    mut post: impl FnMut(&iwarp_types::RecvWr) -> iwarp_verbs::Result<()>,
) -> CResult<c_int> {
    let mut next = wr;
    let mut walked = 0;
    while !next.is_null() {
        // SAFETY: the caller's contract.
        let c = unsafe { &*next };
        walked += 1;
        let r = if walked > MAX_POST_LIST {
            Err(Failure::invalid("WR list too long (a cycle?)"))
        } else {
            // SAFETY: the caller's contract.
            unsafe { recv_wr(c) }.and_then(|w| post(&w).map_err(Failure::from))
        };
        if let Err(e) = r {
            // SAFETY: the caller's contract.
            unsafe { set_bad(bad_wr, next) };
            return Err(e);
        }
        next = c.next;
    }
    Ok(0)
}

#[no_mangle]
pub unsafe extern "C" fn iwv_post_recv(
    qp: *mut iwv_qp,
    wr: *mut iwv_recv_wr,
    bad_wr: *mut *mut iwv_recv_wr,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let q = unsafe { obj(qp, "qp") }?;
        let mut qp = lock(&q.qp);
        // SAFETY: header contract on the list and `bad_wr`.
        unsafe { post_recv_list(wr, bad_wr, |w| qp.post_recv(w)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_srq(
    pd: *mut iwv_pd,
    attr: *const iwv_srq_attr,
) -> *mut iwv_srq {
    guard_new(|| {
        // SAFETY: live handle and readable struct, or NULL (header contract).
        let (p, a) = unsafe { (obj(pd, "pd")?, obj(attr, "attr")?) };
        let srq: Srq = p.pd.create_srq(&SrqInitAttr {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            limit: a.srq_limit,
        })?;
        Ok(iwv_srq {
            handle: srq.handle().0,
            srq: Mutex::new(srq),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_modify_srq(
    srq: *mut iwv_srq,
    attr: *const iwv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and readable struct, or NULL (header contract).
        let (s, a) = unsafe { (obj(srq, "srq")?, obj(attr, "attr")?) };
        if attr_mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
            return Err(Failure::invalid(format!(
                "SRQ attribute mask {attr_mask:#x}"
            )));
        }
        let max_wr = (attr_mask & SRQ_MAX_WR != 0).then_some(a.max_wr);
        let limit = (attr_mask & SRQ_LIMIT != 0).then_some(a.srq_limit);
        lock(&s.srq).modify(max_wr, limit)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_query_srq(srq: *mut iwv_srq, attr: *mut iwv_srq_attr) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable struct, or NULL (header contract).
        let (s, out) = unsafe { (obj(srq, "srq")?, obj_mut(attr, "attr")?) };
        let i = lock(&s.srq).query()?;
        *out = iwv_srq_attr {
            max_wr: i.max_wr,
            max_sge: i.max_sge,
            srq_limit: i.limit,
            armed: i.armed as u32,
        };
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_post_srq_recv(
    srq: *mut iwv_srq,
    wr: *mut iwv_recv_wr,
    bad_wr: *mut *mut iwv_recv_wr,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let s = unsafe { obj(srq, "srq") }?;
        let mut srq = lock(&s.srq);
        // SAFETY: header contract on the list and `bad_wr`.
        unsafe { post_recv_list(wr, bad_wr, |w| srq.post_recv(w)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_srq(srq: *mut iwv_srq) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_create_srq`, destroyed once (header contract).
        let s = unsafe { take(srq, "srq") }?;
        match s
            .srq
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .destroy()
        {
            // Still used by a QP: destroyed in the daemon with the last of them.
            Ok(()) | Err(iwarp_verbs::Error::InvalidArgument(_)) => Ok(0),
            Err(e) => Err(e.into()),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_srq_handle(srq: *mut iwv_srq) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { obj(srq, "srq") }?.handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IWV_EFAULT;

    #[test]
    fn states_round_trip() {
        for v in 0..5 {
            assert_eq!(state_to(state_from(v).unwrap()), v);
        }
        assert!(state_from(5).is_err());
    }

    #[test]
    fn null_arguments() {
        // SAFETY: NULL is allowed everywhere.
        unsafe {
            assert!(iwv_create_qp(std::ptr::null_mut(), std::ptr::null()).is_null());
            assert_eq!(
                iwv_post_send(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                -IWV_EFAULT
            );
            assert_eq!(iwv_destroy_srq(std::ptr::null_mut()), -IWV_EFAULT);
            assert_eq!(iwv_qp_num(std::ptr::null_mut()), 0);
        }
    }
}
