//! RC queue pairs (`ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`, `ibv_destroy_qp`) and
//! the ops `post_send` / `post_recv` the header's inline functions call.
//!
//! States: an iWARP QP is connected by the connection manager, not by `ibv_modify_qp`
//! (as with cxgb4, irdma and siw). Before its connection the QP is Idle in the daemon and
//! reports the state the application last set among RESET, INIT, RTR and RTS; once
//! connected it is RTS. SQD asks for a graceful close (Closing), SQE a Terminate, ERR
//! flushes. IB-only attributes (paths, PSNs, timeouts, Q_Key) are accepted and ignored.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use iwarp_verbs::{
    Error, Pd, Qp, QpCap, QpInitAttr, QpModifyReq, QpStateValue, RecvWr, SendFlags, SendOp, SendWr,
    SgList, Sge, Stag, MAX_SGE,
};

use crate::cq::IwCq;
use crate::errno::{errno_of, fail, fail_with};
use crate::inline::{InlineSq, MAX_INLINE_DATA};
use crate::object::{free, from_raw, hold, into_raw, Wrapped};
use crate::pd::IwPd;
use crate::srq::IwSrq;
use crate::sys;

/// A queue pair.
#[repr(C)]
pub(crate) struct IwQp {
    /// An `ibv_qp` to the application; the whole `ibv_qp_ex` (which begins with it) to
    /// one that asked `send_ops_flags` (crate::qp_ex).
    pub(crate) qp: sys::ibv_qp_ex,
    magic: AtomicU64,
    /// Posted under this lock (rdma-core's providers take a per-queue lock too).
    pub(crate) client: Mutex<Qp>,
    pd: &'static IwPd,
    send_cq: &'static IwCq,
    recv_cq: &'static IwCq,
    srq: Option<&'static IwSrq>,
    /// The state shown while the daemon's QP is Idle (`IBV_QPS_*`).
    idle_state: AtomicU32,
    sq_sig_all: bool,
    /// The staging area of inline WRs, when `max_inline_data` was asked (crate::inline).
    inline: Option<Arc<InlineSq>>,
    /// The WRs built between `ibv_wr_start` and `ibv_wr_complete` (crate::qp_ex); None
    /// unless the QP was made with `send_ops_flags`.
    pub(crate) wr_batch: Mutex<Option<crate::qp_ex::Batch>>,
}

impl Wrapped for IwQp {
    type Raw = sys::ibv_qp;
    const MAGIC: u64 = 0x6977_6172_705f_7170;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl IwQp {
    /// The QP behind an application pointer, if it is one of ours.
    pub(crate) fn from_ptr<'a>(qp: *mut sys::ibv_qp) -> Option<&'a IwQp> {
        from_raw::<IwQp>(qp)
    }
}

/// Creates a QP for `init` with `make` (the plain verb, or the connection manager's
/// passive side), wrapped for the application. NULL and errno on failure.
pub(crate) fn create_qp_with(
    what: &str,
    pd: *mut sys::ibv_pd,
    init: *mut sys::ibv_qp_init_attr,
    make: impl FnOnce(&Pd, &QpInitAttr<'_>) -> iwarp_verbs::Result<Qp>,
) -> *mut sys::ibv_qp {
    let Some(p) = from_raw::<IwPd>(pd) else {
        fail_with(what, libc::EINVAL, "not a PD of this library");
        return std::ptr::null_mut();
    };
    if init.is_null() {
        fail_with(what, libc::EINVAL, "NULL init_attr");
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's ibv_qp_init_attr.
    let a = unsafe { &mut *init };
    if a.qp_type != sys::IBV_QPT_RC {
        fail_with(
            what,
            libc::EOPNOTSUPP,
            "iWARP has RC QPs only (no UD, UC, XRC, raw)",
        );
        return std::ptr::null_mut();
    }
    let srq = if a.srq.is_null() {
        None
    } else {
        match from_raw::<IwSrq>(a.srq) {
            // SAFETY: SRQs live until ibv_destroy_srq, which refuses while QPs use them.
            Some(s) => Some(unsafe { &*(s as *const IwSrq) }),
            None => {
                fail_with(what, libc::EINVAL, "srq not an SRQ of this library");
                return std::ptr::null_mut();
            }
        }
    };
    let (Some(scq), Some(rcq)) = (from_raw::<IwCq>(a.send_cq), from_raw::<IwCq>(a.recv_cq)) else {
        fail_with(
            what,
            libc::EINVAL,
            "send_cq or recv_cq not a CQ of this library",
        );
        return std::ptr::null_mut();
    };
    if a.cap.max_inline_data > MAX_INLINE_DATA {
        fail_with(
            what,
            libc::EINVAL,
            &format!(
                "max_inline_data {} above the device's {MAX_INLINE_DATA}",
                a.cap.max_inline_data
            ),
        );
        return std::ptr::null_mut();
    }
    let cap = QpCap {
        max_send_wr: a.cap.max_send_wr.max(1),
        max_recv_wr: a.cap.max_recv_wr.max(1),
        max_send_sge: a.cap.max_send_sge.max(1),
        max_recv_sge: a.cap.max_recv_sge.max(1),
    };
    let dev = p.client.context().device_attr().clone();
    let created = {
        let s = scq.client.lock().unwrap_or_else(|e| e.into_inner());
        // The same CQ for both queues: one lock.
        let r_guard;
        let r: &iwarp_verbs::Cq = if std::ptr::eq(scq, rcq) {
            &s
        } else {
            r_guard = rcq.client.lock().unwrap_or_else(|e| e.into_inner());
            &r_guard
        };
        let srq_guard = srq.map(|q| q.client.lock().unwrap_or_else(|e| e.into_inner()));
        let mut qa = QpInitAttr::new(&s, r);
        qa.srq = srq_guard.as_deref();
        qa.cap = cap;
        qa.sq_sig_all = a.sq_sig_all != 0;
        qa.ord = dev.max_ord.min(8);
        qa.ird = dev.max_ird.min(8);
        qa.remote_read = true;
        qa.remote_write = true;
        qa.bind_enabled = true;
        make(&p.client, &qa)
    };
    let client = match created {
        Ok(q) => q,
        Err(e) => {
            fail(what, &e);
            return std::ptr::null_mut();
        }
    };
    let got = client.cap();
    let inline = if a.cap.max_inline_data > 0 {
        match InlineSq::new(&p.client, got.max_send_wr, a.cap.max_inline_data) {
            Ok(i) => Some(Arc::new(i)),
            Err(e) => {
                fail(what, &e);
                return std::ptr::null_mut();
            }
        }
    } else {
        None
    };
    a.cap.max_send_wr = got.max_send_wr;
    a.cap.max_recv_wr = got.max_recv_wr;
    a.cap.max_send_sge = got.max_send_sge;
    a.cap.max_recv_sge = got.max_recv_sge;
    a.cap.max_inline_data = inline.as_ref().map_or(0, |i| i.max_inline());
    let (pd_ref, scq_ref, rcq_ref) = (hold(p), hold(scq), hold(rcq));
    let srq_ref = srq.map(hold);
    let qp_num = client.qp_num();
    let p_qp = into_raw(IwQp {
        qp: sys::ibv_qp_ex {
            qp_base: sys::ibv_qp {
                context: p.pd.context,
                qp_context: a.qp_context,
                pd,
                send_cq: a.send_cq,
                recv_cq: a.recv_cq,
                srq: a.srq,
                handle: qp_num,
                qp_num,
                state: sys::IBV_QPS_RESET,
                qp_type: sys::IBV_QPT_RC,
                ..Default::default()
            },
            ..Default::default()
        },
        magic: AtomicU64::new(IwQp::MAGIC),
        client: Mutex::new(client),
        pd: pd_ref,
        send_cq: scq_ref,
        recv_cq: rcq_ref,
        srq: srq_ref,
        idle_state: AtomicU32::new(sys::IBV_QPS_RESET),
        sq_sig_all: a.sq_sig_all != 0,
        inline: inline.clone(),
        wr_batch: Mutex::new(None),
    });
    if let Some(i) = inline {
        scq.track_inline(qp_num, i);
    }
    if let Some(c) = crate::context::IwContext::from_ptr(p.pd.context) {
        c.register(crate::context::ObjKind::Qp, qp_num, p_qp as usize);
    }
    p_qp
}

/// `struct ibv_qp *ibv_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *)`: writes the
/// capabilities provided back into `init_attr->cap`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_create_qp(
    pd: *mut sys::ibv_pd,
    init: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    create_qp_with("ibv_create_qp", pd, init, |pd, a| pd.create_qp(a))
}

/// `int ibv_destroy_qp(struct ibv_qp *)`: destroys it in the daemon (its connection is
/// reset if still up).
#[no_mangle]
pub extern "C" fn iwarp_ibv_destroy_qp(qp: *mut sys::ibv_qp) -> c_int {
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with("ibv_destroy_qp", libc::EINVAL, "not a QP of this library");
    };
    if let Some(c) = crate::context::IwContext::from_ptr(q.qp.qp_base.context) {
        c.unregister(crate::context::ObjKind::Qp, q.qp.qp_base.qp_num);
    }
    q.pd.users.fetch_sub(1, Ordering::AcqRel);
    if q.inline.is_some() {
        q.send_cq.untrack_inline(q.qp.qp_base.qp_num);
    }
    q.send_cq.users.fetch_sub(1, Ordering::AcqRel);
    q.recv_cq.users.fetch_sub(1, Ordering::AcqRel);
    if let Some(s) = q.srq {
        s.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: from into_raw; given up by the application. Dropping the client's Qp
    // destroys it in the daemon.
    unsafe { free(q) };
    0
}

/// The `IBV_QPS_*` of the daemon's state (`idle` while Idle).
fn ibv_state(s: QpStateValue, idle: u32) -> u32 {
    match s {
        QpStateValue::Idle => idle,
        QpStateValue::Rts => sys::IBV_QPS_RTS,
        QpStateValue::Closing => sys::IBV_QPS_SQD,
        QpStateValue::Terminate => sys::IBV_QPS_SQE,
        QpStateValue::Error => sys::IBV_QPS_ERR,
    }
}

/// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_modify_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    const WHAT: &str = "ibv_modify_qp";
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with(WHAT, libc::EINVAL, "not a QP of this library");
    };
    if attr.is_null() {
        return fail_with(WHAT, libc::EINVAL, "NULL attr");
    }
    // SAFETY: the caller's ibv_qp_attr.
    let a = unsafe { &*attr };
    let mask = mask as u32;
    let mut m = QpModifyReq::default();
    let mut idle_state = None;
    if mask & sys::IBV_QP_STATE != 0 {
        match a.qp_state {
            sys::IBV_QPS_RESET | sys::IBV_QPS_INIT | sys::IBV_QPS_RTR | sys::IBV_QPS_RTS => {
                idle_state = Some(a.qp_state)
            }
            sys::IBV_QPS_SQD => m.state = Some(QpStateValue::Closing),
            sys::IBV_QPS_SQE => m.state = Some(QpStateValue::Terminate),
            sys::IBV_QPS_ERR => m.state = Some(QpStateValue::Error),
            s => return fail_with(WHAT, libc::EINVAL, &format!("state {s}")),
        }
    }
    if mask & sys::IBV_QP_MAX_QP_RD_ATOMIC != 0 {
        m.ord = Some(a.max_rd_atomic.into());
    }
    if mask & sys::IBV_QP_MAX_DEST_RD_ATOMIC != 0 {
        m.ird = Some(a.max_dest_rd_atomic.into());
    }
    if mask & sys::IBV_QP_CAP != 0 {
        m.max_send_wr = Some(a.cap.max_send_wr);
        m.max_recv_wr = Some(a.cap.max_recv_wr);
    }
    if mask & sys::IBV_QP_RATE_LIMIT != 0 {
        return fail_with(WHAT, libc::EOPNOTSUPP, "rate limits");
    }
    let client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = idle_state {
        // RESET..RTS are the application's view of an unconnected (Idle) QP; on a
        // connected QP, RTS is where it is already and the others are refused.
        let now = match client.query() {
            Ok(i) => i.state,
            Err(e) => return fail(WHAT, &e),
        };
        match now {
            QpStateValue::Idle => q.idle_state.store(s, Ordering::Release),
            QpStateValue::Rts if s == sys::IBV_QPS_RTS => {}
            other => {
                return fail_with(WHAT, libc::EINVAL, &format!("state {s} from {other:?}"));
            }
        }
    }
    if m != QpModifyReq::default() {
        if let Err(e) = client.modify(m) {
            return fail(WHAT, &e);
        }
    }
    if let Ok(i) = client.query() {
        // SAFETY: the application's ibv_qp; `state` is the library's to keep.
        unsafe { (*qp).state = ibv_state(i.state, q.idle_state.load(Ordering::Acquire)) };
    }
    0
}

/// `int ibv_query_qp(qp, struct ibv_qp_attr *, int attr_mask, struct ibv_qp_init_attr *)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    _mask: c_int,
    init: *mut sys::ibv_qp_init_attr,
) -> c_int {
    const WHAT: &str = "ibv_query_qp";
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with(WHAT, libc::EINVAL, "not a QP of this library");
    };
    if attr.is_null() || init.is_null() {
        return fail_with(WHAT, libc::EINVAL, "NULL attr or init_attr");
    }
    let info = match q.client.lock().unwrap_or_else(|e| e.into_inner()).query() {
        Ok(i) => i,
        Err(e) => return fail(WHAT, &e),
    };
    let state = ibv_state(info.state, q.idle_state.load(Ordering::Acquire));
    let cap = sys::ibv_qp_cap {
        max_send_wr: info.cap.max_send_wr,
        max_recv_wr: info.cap.max_recv_wr,
        max_send_sge: info.cap.max_send_sge,
        max_recv_sge: info.cap.max_recv_sge,
        max_inline_data: q.inline.as_ref().map_or(0, |i| i.max_inline()),
    };
    // SAFETY: the caller's structures.
    unsafe {
        *attr = sys::ibv_qp_attr {
            qp_state: state,
            cur_qp_state: state,
            qp_access_flags: sys::IBV_ACCESS_LOCAL_WRITE
                | sys::IBV_ACCESS_REMOTE_WRITE
                | sys::IBV_ACCESS_REMOTE_READ,
            cap,
            max_rd_atomic: info.ord.min(255) as u8,
            max_dest_rd_atomic: info.ird.min(255) as u8,
            port_num: 1,
            path_mtu: sys::IBV_MTU_1024,
            ..Default::default()
        };
        *init = sys::ibv_qp_init_attr {
            qp_context: q.qp.qp_base.qp_context,
            send_cq: q.qp.qp_base.send_cq,
            recv_cq: q.qp.qp_base.recv_cq,
            srq: q.qp.qp_base.srq,
            cap,
            qp_type: sys::IBV_QPT_RC,
            sq_sig_all: q.sq_sig_all as c_int,
        };
        (*qp).state = state;
    }
    0
}

/// The SGL of a WR.
///
/// # Safety
///
/// `sg_list` points to `num_sge` SGEs (or `num_sge` is 0).
pub(crate) unsafe fn sgl(sg_list: *const sys::ibv_sge, num_sge: c_int) -> Result<SgList, c_int> {
    if num_sge < 0 || num_sge as usize > MAX_SGE {
        return Err(libc::EINVAL);
    }
    let mut l = SgList::new();
    if num_sge == 0 {
        return Ok(l);
    }
    if sg_list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    let c = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
    for s in c {
        l.push(Sge {
            addr: s.addr,
            length: s.length,
            lkey: Stag(s.lkey),
        })
        .map_err(|_| libc::EINVAL)?;
    }
    Ok(l)
}

/// The library's send WR of rdma-core's (its `next` is not followed), or the errno.
/// `staged`: the SGL of the WR's inline bytes, already copied (`IBV_SEND_INLINE`).
///
/// # Safety
///
/// `wr.sg_list` points to `wr.num_sge` SGEs.
pub(crate) unsafe fn send_wr(
    wr: &sys::ibv_send_wr,
    staged: Option<SgList>,
) -> Result<SendWr, c_int> {
    let f = wr.send_flags;
    if f & sys::IBV_SEND_IP_CSUM != 0 || (f & sys::IBV_SEND_INLINE != 0) != staged.is_some() {
        return Err(libc::EINVAL);
    }
    let known = sys::IBV_SEND_FENCE
        | sys::IBV_SEND_SIGNALED
        | sys::IBV_SEND_SOLICITED
        | sys::IBV_SEND_INLINE;
    if f & !known != 0 {
        return Err(libc::EINVAL);
    }
    let solicited = f & sys::IBV_SEND_SOLICITED != 0;
    // SAFETY: reading the union members the opcode selects (plain integers).
    let (rdma, inv) = unsafe { (wr.wr.rdma, wr.__bindgen_anon_1.invalidate_rkey) };
    let op = match wr.opcode {
        sys::IBV_WR_SEND if solicited => SendOp::SendSe,
        sys::IBV_WR_SEND => SendOp::Send,
        sys::IBV_WR_SEND_WITH_INV if solicited => SendOp::SendSeInv {
            inv_stag: Stag(inv),
        },
        sys::IBV_WR_SEND_WITH_INV => SendOp::SendInv {
            inv_stag: Stag(inv),
        },
        _ if solicited => return Err(libc::EINVAL),
        sys::IBV_WR_RDMA_WRITE => SendOp::Write {
            remote_to: rdma.remote_addr,
            rkey: Stag(rdma.rkey),
        },
        sys::IBV_WR_RDMA_READ => SendOp::Read {
            remote_to: rdma.remote_addr,
            rkey: Stag(rdma.rkey),
            invalidate_local: false,
        },
        sys::IBV_WR_LOCAL_INV => SendOp::LocalInv { stag: Stag(inv) },
        // SAFETY: the union member IBV_WR_BIND_MW selects (a pointer and integers).
        sys::IBV_WR_BIND_MW => crate::mw::bind_wr_op(unsafe { &wr.__bindgen_anon_2.bind_mw })?,
        // Immediate data, atomics, TSO: what an iWARP provider refuses.
        _ => return Err(libc::EINVAL),
    };
    let data = matches!(
        op,
        SendOp::Send
            | SendOp::SendSe
            | SendOp::SendInv { .. }
            | SendOp::SendSeInv { .. }
            | SendOp::Write { .. }
    );
    if staged.is_some() && !data {
        // Inline bytes go out; a READ's SGL is where they come in.
        return Err(libc::EINVAL);
    }
    let mut flags = SendFlags::NONE;
    if f & sys::IBV_SEND_SIGNALED != 0 {
        flags = SendFlags(flags.0 | SendFlags::SIGNALED.0);
    }
    if f & sys::IBV_SEND_FENCE != 0 {
        flags = SendFlags(flags.0 | SendFlags::READ_FENCE.0);
    }
    let sgl = match staged {
        Some(l) => l,
        None if data || matches!(op, SendOp::Read { .. }) => {
            // SAFETY: the caller's contract.
            unsafe { sgl(wr.sg_list, wr.num_sge) }?
        }
        // Binds and invalidations carry no data: their SGL is not read.
        None => SgList::new(),
    };
    Ok(SendWr {
        wr_id: wr.wr_id,
        op,
        sgl,
        flags,
    })
}

/// `ibv_context_ops::post_send`: posts the WRs of the list in order; on the first that
/// fails, `*bad_wr` names it and its errno is returned (`ENOMEM` when the SQ is full).
pub(crate) unsafe extern "C" fn post_send_op(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with("ibv_post_send", libc::EINVAL, "not a QP of this library");
    };
    let mut client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    let mut track = q.inline.as_ref().map(|i| (i, i.lock()));
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the application's WR list.
        let w = unsafe { &*cur };
        let signaled = q.sq_sig_all || w.send_flags & sys::IBV_SEND_SIGNALED != 0;
        // SAFETY: `w` is the application's WR (ibv_post_send(3)): its sg_list holds
        // num_sge readable entries (with IBV_SEND_INLINE, each naming readable bytes),
        // which `stage` and `send_wr` read after checking the count.
        let r = unsafe { post_one(&mut client, track.as_mut(), w, signaled) };
        if let Err(n) = r {
            if !bad_wr.is_null() {
                // SAFETY: the caller's output pointer.
                unsafe { *bad_wr = cur };
            }
            return fail_with("ibv_post_send", n, "WR refused");
        }
        cur = w.next;
    }
    0
}

/// Posts one send WR: its inline bytes staged first when `IBV_SEND_INLINE` asks, and
/// noted in the QP's inline tracker when it has one.
///
/// # Safety
///
/// As [`send_wr`]; with `IBV_SEND_INLINE`, as [`InlineSq::stage`].
pub(crate) unsafe fn post_one(
    client: &mut Qp,
    track: Option<&mut (
        &Arc<InlineSq>,
        std::sync::MutexGuard<'_, crate::inline::Track>,
    )>,
    w: &sys::ibv_send_wr,
    signaled: bool,
) -> Result<(), c_int> {
    let inline = w.send_flags & sys::IBV_SEND_INLINE != 0;
    let Some((sq, t)) = track else {
        if inline {
            // max_inline_data 0: as a provider refuses inline bytes over its limit.
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let s = unsafe { send_wr(w, None) }?;
        return client.post_send(&s).map_err(|e| post_errno(&e));
    };
    let staged = if inline {
        if w.num_sge < 0 || w.num_sge as usize > MAX_SGE || (w.num_sge > 0 && w.sg_list.is_null()) {
            return Err(libc::EINVAL);
        }
        let sges: &[sys::ibv_sge] = if w.num_sge == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract: num_sge entries, checked above.
            unsafe { std::slice::from_raw_parts(w.sg_list, w.num_sge as usize) }
        };
        // SAFETY: the caller's contract.
        Some(unsafe { sq.stage(t, sges) }?)
    } else {
        sq.check_room(t)?;
        None
    };
    // SAFETY: the caller's contract.
    let s = unsafe { send_wr(w, staged) }?;
    client.post_send(&s).map_err(|e| post_errno(&e))?;
    t.seq.note_posted(signaled);
    Ok(())
}

/// Posts a send WR the library built (no inline bytes: `ibv_bind_mw`'s Bind WR), with
/// the QP's inline bookkeeping.
pub(crate) fn post_built(q: &IwQp, wr: &SendWr) -> Result<(), c_int> {
    let mut client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    let signaled = q.sq_sig_all || wr.flags.0 & SendFlags::SIGNALED.0 != 0;
    let mut track = q.inline.as_ref().map(|i| (i, i.lock()));
    if let Some((sq, t)) = track.as_mut() {
        sq.check_room(t)?;
    }
    client.post_send(wr).map_err(|e| post_errno(&e))?;
    if let Some((_, t)) = track.as_mut() {
        t.seq.note_posted(signaled);
    }
    Ok(())
}

/// `ibv_context_ops::post_recv`: like `post_send_op` for the RQ.
pub(crate) unsafe extern "C" fn post_recv_op(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    let Some(q) = IwQp::from_ptr(qp) else {
        return fail_with("ibv_post_recv", libc::EINVAL, "not a QP of this library");
    };
    let mut client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the application's WR list.
        let w = unsafe { &*cur };
        // SAFETY: its SGL.
        let r = unsafe { sgl(w.sg_list, w.num_sge) }.and_then(|sgl| {
            client
                .post_recv(&RecvWr {
                    wr_id: w.wr_id,
                    sgl,
                })
                .map_err(|e| post_errno(&e))
        });
        if let Err(n) = r {
            if !bad_wr.is_null() {
                // SAFETY: the caller's output pointer.
                unsafe { *bad_wr = cur };
            }
            return fail_with("ibv_post_recv", n, "WR refused");
        }
        cur = w.next;
    }
    0
}

/// The errno of a refused post (`ENOMEM`: queue full, as rdma-core's providers say).
fn post_errno(e: &Error) -> c_int {
    errno_of(e)
}
