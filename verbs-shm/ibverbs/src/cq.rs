//! Completion channels (`ibv_create_comp_channel`, `ibv_get_cq_event`,
//! `ibv_ack_cq_events`) and CQs (`ibv_create_cq`, `ibv_resize_cq`, `ibv_destroy_cq`, and
//! the ops `poll_cq` and `req_notify_cq` the header's inline functions call).

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use iwarp_verbs::{CompChannel, Cq, Cqe, Error, WcOpcode, WcStatus, EMPTY_CQE};

use crate::context::IwContext;
use crate::errno::{fail, fail_with, set_errno};
use crate::inline::InlineSq;
use crate::object::{free, from_raw, into_raw, Wrapped};
use crate::sys;

/// A completion channel: its fd is the client library's eventfd.
#[repr(C)]
pub(crate) struct IwChannel {
    pub(crate) ch: sys::ibv_comp_channel,
    magic: AtomicU64,
    pub(crate) client: CompChannel,
    /// `ch.fd`: an epoll fd over the client's eventfd (crate::fdwrap).
    epoll: OwnedFd,
    /// The CQs attached (the daemon's CQ handle, the `IwCq` address), at most one per CQ.
    cqs: Mutex<Vec<(u32, usize)>>,
}

impl Wrapped for IwChannel {
    type Raw = sys::ibv_comp_channel;
    const MAGIC: u64 = 0x6977_6172_705f_6368;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_create_comp_channel(
    ctx: *mut sys::ibv_context,
) -> *mut sys::ibv_comp_channel {
    let Some(c) = IwContext::from_ptr(ctx) else {
        fail_with(
            "ibv_create_comp_channel",
            libc::EINVAL,
            "not a context of this library",
        );
        return std::ptr::null_mut();
    };
    match c.client.create_comp_channel() {
        Ok(client) => {
            let inner = std::os::fd::AsFd::as_fd(&client).as_raw_fd();
            let epoll = match crate::fdwrap::epoll_over(&[inner]) {
                Ok(e) => e,
                Err(n) => {
                    fail_with("ibv_create_comp_channel", n, "epoll");
                    return std::ptr::null_mut();
                }
            };
            into_raw(IwChannel {
                ch: sys::ibv_comp_channel {
                    context: ctx,
                    fd: epoll.as_raw_fd(),
                    refcnt: 0,
                },
                magic: AtomicU64::new(IwChannel::MAGIC),
                client,
                epoll,
                cqs: Mutex::new(Vec::new()),
            })
        }
        Err(e) => {
            fail("ibv_create_comp_channel", &e);
            std::ptr::null_mut()
        }
    }
}

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: `EBUSY` while CQs use it.
#[no_mangle]
pub extern "C" fn iwarp_ibv_destroy_comp_channel(ch: *mut sys::ibv_comp_channel) -> c_int {
    let Some(c) = from_raw::<IwChannel>(ch) else {
        return fail_with(
            "ibv_destroy_comp_channel",
            libc::EINVAL,
            "not a channel of this library",
        );
    };
    if !c.cqs.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
        return fail_with("ibv_destroy_comp_channel", libc::EBUSY, "CQs still use it");
    }
    // SAFETY: from into_raw; given up by the application.
    unsafe { free(c) };
    0
}

/// `int ibv_get_cq_event(channel, struct ibv_cq **cq, void **cq_context)`: waits for the
/// next notification (or, if the application made the fd non-blocking, returns -1 with
/// `EAGAIN` when there is none). 0, or -1 and errno.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_get_cq_event(
    ch: *mut sys::ibv_comp_channel,
    cq: *mut *mut sys::ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    const WHAT: &str = "ibv_get_cq_event";
    let Some(c) = from_raw::<IwChannel>(ch) else {
        fail_with(WHAT, libc::EINVAL, "not a channel of this library");
        return -1;
    };
    if cq.is_null() || cq_context.is_null() {
        fail_with(WHAT, libc::EINVAL, "NULL output");
        return -1;
    }
    loop {
        let handle = match c.client.try_get_cq_event() {
            Ok(h) => h.0,
            Err(Error::WouldBlock) => {
                if crate::fdwrap::is_nonblocking(c.ch.fd) {
                    set_errno(libc::EAGAIN);
                    return -1;
                }
                crate::fdwrap::wait_readable(c.epoll.as_raw_fd());
                continue;
            }
            Err(e) => {
                fail(WHAT, &e);
                return -1;
            }
        };
        let found = c
            .cqs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(h, _)| *h == handle)
            .map(|(_, p)| *p);
        // A notification for a CQ destroyed meanwhile is dropped; wait for the next.
        if found.is_none() {
            crate::debug::debug!("{WHAT}: event for CQ {handle}, not one of the channel's");
        }
        if let Some(p) = found {
            let q = p as *mut IwCq;
            // SAFETY: attached CQs are live (destroy detaches first); outputs checked.
            unsafe {
                *cq = std::ptr::addr_of_mut!((*q).cq).cast();
                *cq_context = (*q).cq.cq_context;
            }
            return 0;
        }
    }
}

/// `void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_ack_cq_events(cq: *mut sys::ibv_cq, nevents: u32) {
    if let Some(q) = from_raw::<IwCq>(cq) {
        if let Some(ch) = q.channel {
            ch.client.ack_cq_events(nevents);
        }
    }
}

/// A completion queue.
#[repr(C)]
pub(crate) struct IwCq {
    /// An `ibv_cq` to applications of `ibv_create_cq`; the whole `ibv_cq_ex` (which
    /// begins like an `ibv_cq`) to those of `ibv_create_cq_ex` (crate::cq_ex).
    pub(crate) cq: sys::ibv_cq_ex,
    magic: AtomicU64,
    /// Polled under this lock (rdma-core's providers take a per-CQ lock too).
    pub(crate) client: Mutex<Cq>,
    channel: Option<&'static IwChannel>,
    /// QPs using it.
    pub(crate) users: AtomicU32,
    /// The inline trackers of the QPs whose send CQ it is (QP number, tracker); its
    /// send completions retire their WRs (crate::inline). Read under `client`'s lock.
    inline_sqs: Mutex<Vec<(u32, Arc<InlineSq>)>>,
    /// `inline_sqs` is not empty: polls of CQs without inline QPs skip the lock.
    has_inline: std::sync::atomic::AtomicBool,
    /// The completion `ibv_start_poll` / `ibv_next_poll` made current (crate::cq_ex).
    pub(crate) current: Mutex<Cqe>,
}

impl IwCq {
    /// Send completions of QP `qp_num` now retire the WRs of `sq`.
    pub(crate) fn track_inline(&self, qp_num: u32, sq: Arc<InlineSq>) {
        let mut l = self.inline_sqs.lock().unwrap_or_else(|e| e.into_inner());
        l.push((qp_num, sq));
        self.has_inline.store(true, Ordering::Release);
    }

    /// QP `qp_num` is gone.
    pub(crate) fn untrack_inline(&self, qp_num: u32) {
        let mut l = self.inline_sqs.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|(q, _)| *q != qp_num);
        self.has_inline.store(!l.is_empty(), Ordering::Release);
    }

    /// Retires, in the inline trackers, the send WRs completed by `cqes`.
    pub(crate) fn retire_inline(&self, cqes: &[Cqe]) {
        if !self.has_inline.load(Ordering::Acquire) {
            return;
        }
        let l = self.inline_sqs.lock().unwrap_or_else(|e| e.into_inner());
        for c in cqes.iter().filter(|c| c.opcode != WcOpcode::Recv) {
            if let Some((_, sq)) = l.iter().find(|(q, _)| *q == c.qp.0) {
                sq.note_completed();
            }
        }
    }
}

impl Wrapped for IwCq {
    type Raw = sys::ibv_cq;
    const MAGIC: u64 = 0x6977_6172_705f_6371;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl crate::object::Counted for IwCq {
    fn users(&self) -> &AtomicU32 {
        &self.users
    }
}

/// `struct ibv_cq *ibv_create_cq(ctx, int cqe, void *cq_context, channel, int comp_vector)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_create_cq(
    ctx: *mut sys::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    match make_cq("ibv_create_cq", ctx, cqe, cq_context, channel, comp_vector) {
        Some(q) => q.cast(),
        None => std::ptr::null_mut(),
    }
}

/// Creates a CQ (`ibv_create_cq`, `ibv_create_cq_ex`): the object, or None with errno set.
pub(crate) fn make_cq(
    what: &str,
    ctx: *mut sys::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> Option<*mut IwCq> {
    let Some(c) = IwContext::from_ptr(ctx) else {
        fail_with(what, libc::EINVAL, "not a context of this library");
        return None;
    };
    let max = c.client.device_attr().max_cqe;
    if cqe < 1 || cqe as u32 > max {
        fail_with(what, libc::EINVAL, &format!("cqe {cqe} outside 1..={max}"));
        return None;
    }
    if comp_vector != 0 {
        fail_with(what, libc::EINVAL, "one completion vector (0)");
        return None;
    }
    let ch = if channel.is_null() {
        None
    } else {
        match from_raw::<IwChannel>(channel) {
            // SAFETY: channels live until ibv_destroy_comp_channel, which refuses while
            // CQs are attached.
            Some(ch) => Some(unsafe { &*(ch as *const IwChannel) }),
            None => {
                fail_with(what, libc::EINVAL, "not a channel of this library");
                return None;
            }
        }
    };
    let client = match c.client.create_cq(cqe as u32, ch.map(|c| &c.client)) {
        Ok(q) => q,
        Err(e) => {
            fail(what, &e);
            return None;
        }
    };
    let handle = client.handle().0;
    let depth = client.depth().min(i32::MAX as u32) as c_int;
    let p = into_raw(IwCq {
        cq: sys::ibv_cq_ex {
            context: ctx,
            channel,
            cq_context,
            handle,
            cqe: depth,
            ..Default::default()
        },
        magic: AtomicU64::new(IwCq::MAGIC),
        client: Mutex::new(client),
        channel: ch,
        users: AtomicU32::new(0),
        inline_sqs: Mutex::new(Vec::new()),
        has_inline: std::sync::atomic::AtomicBool::new(false),
        current: Mutex::new(EMPTY_CQE),
    });
    if let Some(ch) = ch {
        ch.cqs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((handle, p as usize));
    }
    c.register(crate::context::ObjKind::Cq, handle, p as usize);
    Some(p.cast())
}

/// `int ibv_resize_cq(struct ibv_cq *cq, int cqe)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_resize_cq(cq: *mut sys::ibv_cq, cqe: c_int) -> c_int {
    let Some(q) = from_raw::<IwCq>(cq) else {
        return fail_with("ibv_resize_cq", libc::EINVAL, "not a CQ of this library");
    };
    if cqe < 1 {
        return fail_with("ibv_resize_cq", libc::EINVAL, "cqe < 1");
    }
    let mut client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    match client.resize(cqe as u32) {
        Ok(()) => {
            let depth = client.depth().min(i32::MAX as u32) as c_int;
            // SAFETY: the application's CQ structure; `cqe` is ours to update.
            unsafe { (*cq).cqe = depth };
            0
        }
        Err(e) => fail("ibv_resize_cq", &e),
    }
}

/// `int ibv_destroy_cq(struct ibv_cq *)`: `EBUSY` while QPs use it.
#[no_mangle]
pub extern "C" fn iwarp_ibv_destroy_cq(cq: *mut sys::ibv_cq) -> c_int {
    let Some(q) = from_raw::<IwCq>(cq) else {
        return fail_with("ibv_destroy_cq", libc::EINVAL, "not a CQ of this library");
    };
    if q.users.load(Ordering::Acquire) != 0 {
        return fail_with("ibv_destroy_cq", libc::EBUSY, "QPs still use it");
    }
    if let Some(ch) = q.channel {
        ch.cqs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(h, _)| *h != q.cq.handle);
    }
    if let Some(c) = IwContext::from_ptr(q.cq.context) {
        c.unregister(crate::context::ObjKind::Cq, q.cq.handle);
    }
    // SAFETY: from into_raw; given up by the application.
    unsafe { free(q) };
    0
}

/// `ibv_wc_status` of a completion status (iWARP errors as cxgb4/siw report them);
/// `vendor_err` carries the library's own status number.
pub(crate) fn wc_status(s: WcStatus, opcode: WcOpcode) -> u32 {
    use WcStatus::*;
    match s {
        Success => sys::IBV_WC_SUCCESS,
        Flushed => sys::IBV_WC_WR_FLUSH_ERR,
        InvalidWqe | LocalQpCatastrophic | ZeroOrd | QpNotPrivileged => sys::IBV_WC_LOC_QP_OP_ERR,
        BaseBounds if opcode == WcOpcode::Recv => sys::IBV_WC_LOC_LEN_ERR,
        InvalidStag
        | BaseBounds
        | AccessViolation
        | InvalidPd
        | WrapError
        | InvalidateStagInvalid => sys::IBV_WC_LOC_PROT_ERR,
        StagNotInvalid | InvalidLength | InvalidAccessRights | InvalidRegion | InvalidWindow
        | InvalidVa | MwBindError => sys::IBV_WC_MW_BIND_ERR,
        RemoteAccessError => sys::IBV_WC_REM_ACCESS_ERR,
        RemoteTermination | RemoteOperationError => sys::IBV_WC_REM_OP_ERR,
    }
}

/// `ibv_wc_opcode` of a completion.
pub(crate) fn wc_opcode(o: WcOpcode) -> u32 {
    use WcOpcode::*;
    match o {
        Send | SendSe | SendInv | SendSeInv => sys::IBV_WC_SEND,
        Write => sys::IBV_WC_RDMA_WRITE,
        Read | ReadInv => sys::IBV_WC_RDMA_READ,
        Bind => sys::IBV_WC_BIND_MW,
        LocalInv | FastReg => sys::IBV_WC_LOCAL_INV,
        Recv => sys::IBV_WC_RECV,
    }
}

/// rdma-core's work completion of a completion.
pub(crate) fn to_wc(c: &Cqe) -> sys::ibv_wc {
    let mut wc = sys::ibv_wc {
        wr_id: c.wr_id,
        status: wc_status(c.status, c.opcode),
        opcode: wc_opcode(c.opcode),
        vendor_err: c.status as u32,
        byte_len: c.byte_len,
        qp_num: c.qp.0,
        ..Default::default()
    };
    if let Some(stag) = c.invalidated {
        wc.__bindgen_anon_1.invalidated_rkey = stag.0;
        wc.wc_flags = sys::IBV_WC_WITH_INV;
    }
    wc
}

/// `ibv_context_ops::poll_cq`: at most `num_entries` completions into `wc`; their number,
/// or -1 (rdma-core's providers' error answer) when the daemon is gone.
pub(crate) unsafe extern "C" fn poll_cq_op(
    cq: *mut sys::ibv_cq,
    num_entries: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    let Some(q) = from_raw::<IwCq>(cq) else {
        fail_with("ibv_poll_cq", libc::EINVAL, "not a CQ of this library");
        return -1;
    };
    if num_entries <= 0 {
        return 0;
    }
    if wc.is_null() {
        fail_with("ibv_poll_cq", libc::EINVAL, "NULL wc");
        return -1;
    }
    let mut client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    let mut buf = [EMPTY_CQE; 32];
    let mut done = 0usize;
    let want = num_entries as usize;
    while done < want {
        let n = (want - done).min(buf.len());
        let got = match client.poll(&mut buf[..n]) {
            Ok(g) => g,
            Err(e) if done == 0 => {
                fail("ibv_poll_cq", &e);
                return -1;
            }
            Err(_) => break,
        };
        for (i, c) in buf[..got].iter().enumerate() {
            // SAFETY: wc holds num_entries entries; done + i < num_entries.
            unsafe { *wc.add(done + i) = to_wc(c) };
        }
        q.retire_inline(&buf[..got]);
        done += got;
        if got < n {
            break;
        }
    }
    done as c_int
}

/// `ibv_context_ops::req_notify_cq`: arms the CQ (a memory write). 0, or the errno.
pub(crate) unsafe extern "C" fn req_notify_cq_op(
    cq: *mut sys::ibv_cq,
    solicited_only: c_int,
) -> c_int {
    let Some(q) = from_raw::<IwCq>(cq) else {
        return fail_with(
            "ibv_req_notify_cq",
            libc::EINVAL,
            "not a CQ of this library",
        );
    };
    let client = q.client.lock().unwrap_or_else(|e| e.into_inner());
    match client.req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => fail("ibv_req_notify_cq", &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_verbs::{QpId, Stag};

    #[test]
    fn completions_convert_to_ibv_wc() {
        let c = Cqe {
            wr_id: 7,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: 100,
            qp: QpId(3),
            invalidated: Some(Stag(0x1234)),
            solicited: false,
        };
        let wc = to_wc(&c);
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.qp_num),
            (7, 0, 128, 100, 3)
        );
        assert_eq!(wc.wc_flags, sys::IBV_WC_WITH_INV);
        // SAFETY: the union's member written by to_wc.
        assert_eq!(unsafe { wc.__bindgen_anon_1.invalidated_rkey }, 0x1234);
        assert_eq!(
            wc_status(WcStatus::Flushed, WcOpcode::Send),
            sys::IBV_WC_WR_FLUSH_ERR
        );
        assert_eq!(
            wc_status(WcStatus::BaseBounds, WcOpcode::Recv),
            sys::IBV_WC_LOC_LEN_ERR
        );
        assert_eq!(wc_opcode(WcOpcode::Read), sys::IBV_WC_RDMA_READ);
    }
}
