//! librdmacm's endpoints (`rdma_create_ep`, `rdma_destroy_ep`, `rdma_get_request`) and
//! the SRQ of an id (`rdma_create_srq`, `rdma_destroy_srq`): what rdma_server,
//! rdma_client and the `rdma_verbs.h` helpers use. Endpoints are synchronous ids
//! (`cm_sync.rs`).

use std::ffi::c_int;

use crate::cm_channel::iwarp_rdma_get_cm_event;
use crate::cm_id::{
    create_sync_id, err, id_of, iwarp_rdma_bind_addr, iwarp_rdma_create_qp, iwarp_rdma_destroy_id,
    iwarp_rdma_destroy_qp, iwarp_rdma_resolve_addr, iwarp_rdma_resolve_route, last_errno, pd_for,
    IwCmId,
};
use crate::cm_sync::ack_sync_event;
use crate::errno::set_errno;
use crate::sys;

/// librdmacm's timeout for the resolutions of an active endpoint (milliseconds).
const EP_RESOLVE_TIMEOUT_MS: c_int = 2000;

/// `int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
/// struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)`: a synchronous id. Passive
/// (`RAI_PASSIVE`): bound to `res->ai_src_addr`, and `qp_init_attr` kept for the QPs of
/// its requests (`rdma_get_request`). Active: the address and route of
/// `res->ai_dst_addr` resolved, and with `qp_init_attr` its QP created.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_create_ep(
    out: *mut *mut sys::rdma_cm_id,
    res: *mut sys::rdma_addrinfo,
    pd: *mut sys::ibv_pd,
    qp_init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    const WHAT: &str = "rdma_create_ep";
    if out.is_null() || res.is_null() {
        return err(WHAT, libc::EINVAL, "NULL id or addrinfo");
    }
    // SAFETY: the caller's addrinfo (from rdma_getaddrinfo, or filled by hand).
    let r = unsafe { &*res };
    if r.ai_port_space != sys::RDMA_PS_TCP as c_int {
        return err(
            WHAT,
            libc::EPROTONOSUPPORT,
            "iWARP has the TCP port space only",
        );
    }
    if r.ai_qp_type != sys::IBV_QPT_RC as c_int {
        return err(WHAT, libc::EOPNOTSUPP, "iWARP has RC QPs only");
    }
    let i = match create_sync_id(WHAT, std::ptr::null_mut()) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let id = i.raw();
    // SAFETY: the caller's addrinfo and attributes; `id` is ours.
    let r = unsafe { endpoint(i, r, pd, qp_init_attr) };
    if r != 0 {
        let e = last_errno();
        iwarp_rdma_destroy_ep(id);
        set_errno(e);
        return -1;
    }
    // SAFETY: the caller's output pointer.
    unsafe { *out = id };
    0
}

/// The passive or active half of `rdma_create_ep`: 0 or -1 with errno set.
///
/// # Safety
///
/// `pd` and `qp_init_attr` are NULL or the caller's; `r`'s addresses are readable.
unsafe fn endpoint(
    i: &IwCmId,
    r: &sys::rdma_addrinfo,
    pd: *mut sys::ibv_pd,
    qp_init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    let id = i.raw();
    if r.ai_flags & sys::RAI_PASSIVE as c_int != 0 {
        // SAFETY: the caller's source address (NULL is refused there).
        if unsafe { iwarp_rdma_bind_addr(id, r.ai_src_addr.cast()) } != 0 {
            return -1;
        }
        if !pd.is_null() {
            // SAFETY: the id; librdmacm keeps the endpoint's PD in `pd`.
            unsafe { (*id).pd = pd };
        }
        if !qp_init_attr.is_null() {
            // SAFETY: the caller's attributes, copied.
            let mut a = unsafe { *qp_init_attr };
            a.qp_type = sys::IBV_QPT_RC;
            *i.qp_init_attr.lock().unwrap_or_else(|e| e.into_inner()) = Some(a);
        }
        return 0;
    }
    // SAFETY: the caller's addresses (a NULL source: the device's).
    if unsafe {
        iwarp_rdma_resolve_addr(
            id,
            r.ai_src_addr.cast(),
            r.ai_dst_addr.cast(),
            EP_RESOLVE_TIMEOUT_MS,
        )
    } != 0
    {
        return -1;
    }
    if iwarp_rdma_resolve_route(id, EP_RESOLVE_TIMEOUT_MS) != 0 {
        return -1;
    }
    if !qp_init_attr.is_null() {
        // SAFETY: the caller's attributes.
        unsafe { (*qp_init_attr).qp_type = sys::IBV_QPT_RC };
        // SAFETY: as above.
        if unsafe { iwarp_rdma_create_qp(id, pd, qp_init_attr) } != 0 {
            return -1;
        }
    }
    0
}

/// `void rdma_destroy_ep(struct rdma_cm_id *id)`: its QP (and the CQs made for it), its
/// SRQ, and the id.
#[no_mangle]
pub extern "C" fn iwarp_rdma_destroy_ep(id: *mut sys::rdma_cm_id) {
    let Ok(i) = id_of("rdma_destroy_ep", id) else {
        return;
    };
    // SAFETY: the application's id.
    let (qp, srq) = unsafe { ((*id).qp, (*id).srq) };
    if !qp.is_null() {
        iwarp_rdma_destroy_qp(id);
    }
    if !srq.is_null() {
        iwarp_rdma_destroy_srq(id);
    }
    i.qp_init_attr
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    iwarp_rdma_destroy_id(id);
}

/// `int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)`: waits for
/// the next connection request on a synchronous listener; its id (synchronous, its event
/// in `id->event`), with a QP of the endpoint's attributes if `rdma_create_ep` had them.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_get_request(
    listen: *mut sys::rdma_cm_id,
    out: *mut *mut sys::rdma_cm_id,
) -> c_int {
    const WHAT: &str = "rdma_get_request";
    let l = match id_of(WHAT, listen) {
        Ok(l) => l,
        Err(n) => return n,
    };
    if out.is_null() {
        return err(WHAT, libc::EINVAL, "NULL id");
    }
    if !l.is_sync() {
        return err(
            WHAT,
            libc::EINVAL,
            "the listener has a channel (use rdma_get_cm_event)",
        );
    }
    ack_sync_event(l);
    let mut ev: *mut sys::rdma_cm_event = std::ptr::null_mut();
    // SAFETY: our channel and a local output pointer.
    if unsafe { iwarp_rdma_get_cm_event(l.chan().raw(), &mut ev) } != 0 {
        return -1;
    }
    // SAFETY: the event just returned.
    let (kind, status, new) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
    let keep_on_listener = |n: c_int, why: &str| {
        // SAFETY: the listener; librdmacm keeps a failed request's event there.
        unsafe { (*listen).event = ev };
        err(WHAT, n, why)
    };
    if status != 0 {
        return keep_on_listener(status.abs(), "the event carries an error");
    }
    if kind != sys::RDMA_CM_EVENT_CONNECT_REQUEST {
        return keep_on_listener(libc::EINVAL, "not a connection request");
    }
    let attr = *l.qp_init_attr.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(mut a) = attr {
        // SAFETY: the listener's PD (NULL: the device's) and a copy of the attributes.
        let pd = unsafe { (*listen).pd };
        // SAFETY: the request's id, made by this library.
        if unsafe { iwarp_rdma_create_qp(new, pd, &mut a) } != 0 {
            let e = last_errno();
            // SAFETY: as above.
            unsafe { (*listen).event = ev };
            set_errno(e);
            return -1;
        }
    }
    // SAFETY: the request's id and the caller's output pointer.
    unsafe {
        (*new).event = ev;
        *out = new;
    }
    0
}

/// `int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
/// struct ibv_srq_init_attr *attr)`: an SRQ on the id's PD (or `pd`), in `id->srq`;
/// `rdma_create_qp` on the id then uses it.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_create_srq(
    id: *mut sys::rdma_cm_id,
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> c_int {
    const WHAT: &str = "rdma_create_srq";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    if attr.is_null() {
        return err(WHAT, libc::EINVAL, "NULL attr");
    }
    // SAFETY: the application's id.
    if !unsafe { (*id).srq }.is_null() {
        return err(WHAT, libc::EINVAL, "the id has an SRQ already");
    }
    let pd = pd_for(i, pd);
    // SAFETY: the caller's attributes.
    let srq = unsafe { crate::srq::iwarp_ibv_create_srq(pd, attr) };
    if srq.is_null() {
        return -1;
    }
    // SAFETY: the application's id; librdmacm fills these.
    unsafe {
        (*id).srq = srq;
        if (*id).pd.is_null() {
            (*id).pd = pd;
        }
    }
    0
}

/// `void rdma_destroy_srq(struct rdma_cm_id *id)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_destroy_srq(id: *mut sys::rdma_cm_id) {
    if id_of("rdma_destroy_srq", id).is_err() {
        return;
    }
    // SAFETY: the application's id.
    let srq = unsafe { std::mem::replace(&mut (*id).srq, std::ptr::null_mut()) };
    if !srq.is_null() {
        crate::srq::iwarp_ibv_destroy_srq(srq);
    }
}
