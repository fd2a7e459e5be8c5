//! Shared receive queues (`ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq`, and the op `post_srq_recv` behind the header's `ibv_post_srq_recv`).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use iwarp_verbs::{RecvWr, Srq, SrqInitAttr};

use crate::context::{IwContext, ObjKind};
use crate::errno::{errno_of, fail, fail_with};
use crate::object::{free, from_raw, hold, into_raw, Wrapped};
use crate::pd::IwPd;
use crate::sys;

/// A shared receive queue.
#[repr(C)]
pub(crate) struct IwSrq {
    pub(crate) srq: sys::ibv_srq,
    magic: AtomicU64,
    /// Posted under this lock.
    pub(crate) client: Mutex<Srq>,
    pd: &'static IwPd,
    /// QPs using it.
    pub(crate) users: AtomicU32,
}

impl Wrapped for IwSrq {
    type Raw = sys::ibv_srq;
    const MAGIC: u64 = 0x6977_6172_705f_7372;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl crate::object::Counted for IwSrq {
    fn users(&self) -> &AtomicU32 {
        &self.users
    }
}

/// `struct ibv_srq *ibv_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *)`: writes
/// the provided sizes back into `init_attr->attr`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_create_srq(
    pd: *mut sys::ibv_pd,
    init: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    const WHAT: &str = "ibv_create_srq";
    let Some(p) = from_raw::<IwPd>(pd) else {
        fail_with(WHAT, libc::EINVAL, "not a PD of this library");
        return std::ptr::null_mut();
    };
    if init.is_null() {
        fail_with(WHAT, libc::EINVAL, "NULL init_attr");
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's init attributes.
    let a = unsafe { &mut *init };
    let client = match p.client.create_srq(&SrqInitAttr {
        max_wr: a.attr.max_wr.max(1),
        max_sge: a.attr.max_sge.max(1),
        limit: a.attr.srq_limit,
    }) {
        Ok(s) => s,
        Err(e) => {
            fail(WHAT, &e);
            return std::ptr::null_mut();
        }
    };
    a.attr.max_wr = client.max_wr();
    a.attr.max_sge = client.max_sge();
    let handle = client.handle().0;
    let pd_ref = hold(p);
    let s = into_raw(IwSrq {
        srq: sys::ibv_srq {
            context: p.pd.context,
            srq_context: a.srq_context,
            pd,
            handle,
            ..Default::default()
        },
        magic: AtomicU64::new(IwSrq::MAGIC),
        client: Mutex::new(client),
        pd: pd_ref,
        users: AtomicU32::new(0),
    });
    if let Some(c) = IwContext::from_ptr(p.pd.context) {
        c.register(ObjKind::Srq, handle, s as usize);
    }
    s
}

/// `int ibv_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int attr_mask)`: a new
/// depth (`IBV_SRQ_MAX_WR`) and/or limit (`IBV_SRQ_LIMIT`, arming the limit event).
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_modify_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    mask: c_int,
) -> c_int {
    const WHAT: &str = "ibv_modify_srq";
    let Some(s) = from_raw::<IwSrq>(srq) else {
        return fail_with(WHAT, libc::EINVAL, "not an SRQ of this library");
    };
    if attr.is_null() {
        return fail_with(WHAT, libc::EINVAL, "NULL attr");
    }
    let mask = mask as u32;
    if mask & !(sys::IBV_SRQ_MAX_WR | sys::IBV_SRQ_LIMIT) != 0 {
        return fail_with(WHAT, libc::EINVAL, "unknown attr_mask bits");
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    let max_wr = (mask & sys::IBV_SRQ_MAX_WR != 0).then_some(a.max_wr);
    let limit = (mask & sys::IBV_SRQ_LIMIT != 0).then_some(a.srq_limit);
    match s
        .client
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .modify(max_wr, limit)
    {
        Ok(_) => 0,
        Err(e) => fail(WHAT, &e),
    }
}

/// `int ibv_query_srq(struct ibv_srq *, struct ibv_srq_attr *)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    const WHAT: &str = "ibv_query_srq";
    let Some(s) = from_raw::<IwSrq>(srq) else {
        return fail_with(WHAT, libc::EINVAL, "not an SRQ of this library");
    };
    if attr.is_null() {
        return fail_with(WHAT, libc::EINVAL, "NULL attr");
    }
    match s.client.lock().unwrap_or_else(|e| e.into_inner()).query() {
        Ok(i) => {
            // SAFETY: the caller's attributes.
            unsafe {
                *attr = sys::ibv_srq_attr {
                    max_wr: i.max_wr,
                    max_sge: i.max_sge,
                    srq_limit: if i.armed { i.limit } else { 0 },
                }
            };
            0
        }
        Err(e) => fail(WHAT, &e),
    }
}

/// `int ibv_destroy_srq(struct ibv_srq *)`: `EBUSY` while QPs use it.
#[no_mangle]
pub extern "C" fn iwarp_ibv_destroy_srq(srq: *mut sys::ibv_srq) -> c_int {
    let Some(s) = from_raw::<IwSrq>(srq) else {
        return fail_with(
            "ibv_destroy_srq",
            libc::EINVAL,
            "not an SRQ of this library",
        );
    };
    if s.users.load(Ordering::Acquire) != 0 {
        return fail_with("ibv_destroy_srq", libc::EBUSY, "QPs still use it");
    }
    if let Some(c) = IwContext::from_ptr(s.srq.context) {
        c.unregister(ObjKind::Srq, s.srq.handle);
    }
    s.pd.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: from into_raw; given up by the application. Dropping the client's Srq
    // destroys it in the daemon.
    unsafe { free(s) };
    0
}

/// `ibv_context_ops::post_srq_recv`: like `post_recv` for the SRQ.
pub(crate) unsafe extern "C" fn post_srq_recv_op(
    srq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    let Some(s) = from_raw::<IwSrq>(srq) else {
        return fail_with(
            "ibv_post_srq_recv",
            libc::EINVAL,
            "not an SRQ of this library",
        );
    };
    let mut client = s.client.lock().unwrap_or_else(|e| e.into_inner());
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the application's WR list.
        let w = unsafe { &*cur };
        // SAFETY: its SGL.
        let r = unsafe { crate::qp::sgl(w.sg_list, w.num_sge) }.and_then(|sgl| {
            client
                .post_recv(&RecvWr {
                    wr_id: w.wr_id,
                    sgl,
                })
                .map_err(|e| errno_of(&e))
        });
        if let Err(n) = r {
            if !bad_wr.is_null() {
                // SAFETY: the caller's output pointer.
                unsafe { *bad_wr = cur };
            }
            return fail_with("ibv_post_srq_recv", n, "WR refused");
        }
        cur = w.next;
    }
    0
}
