//! Device contexts: `ibv_open_device`, `ibv_close_device`, the query verbs (device, port,
//! GID, P_Key, and their `_ex` forms reached through `verbs_context`).
//!
//! An [`IwContext`] is rdma-core's `verbs_context` (whose last field is the application's
//! `ibv_context`) followed by the client library's [`Context`]; `ibv_context *` converts
//! back by subtracting the offset of `verbs_context::context`.

use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of};

use iwarp_verbs::{Context, DeviceAttr, PortAttr};

use crate::device::{lookup, IwDevice};
use crate::errno::{fail, fail_with, set_errno};
use crate::sys;

/// Marks an `IwContext` (a pointer that is not one of ours is refused, not followed).
const CONTEXT_MAGIC: u64 = 0x6977_6172_705f_6378; // "iwarp_cx"

/// A device context.
#[repr(C)]
pub(crate) struct IwContext {
    /// rdma-core's extended context; `vctx.context` is what the application holds.
    pub(crate) vctx: sys::verbs_context,
    magic: u64,
    pub(crate) client: Context,
    pub(crate) device: &'static IwDevice,
    /// `ibv_context::async_fd`: an epoll fd over the client's async event fd
    /// (crate::fdwrap).
    async_fd: std::os::fd::OwnedFd,
    /// The QPs and CQs of the context by the daemon's handle, for async events (bounded
    /// by the daemon's limits on QPs and CQs).
    objects: std::sync::Mutex<Vec<(ObjKind, u32, usize)>>,
    /// `IBV_EVENT_DEVICE_FATAL` was handed out (the daemon is gone): later calls get EIO.
    fatal_reported: std::sync::atomic::AtomicBool,
}

/// What an entry of [`IwContext`]'s object table is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjKind {
    Qp,
    Cq,
    Srq,
}

impl IwContext {
    fn objects(&self) -> std::sync::MutexGuard<'_, Vec<(ObjKind, u32, usize)>> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a QP or CQ of this context (its application pointer).
    pub(crate) fn register(&self, kind: ObjKind, handle: u32, ptr: usize) {
        self.objects().push((kind, handle, ptr));
    }

    /// Forgets a QP or CQ being destroyed.
    pub(crate) fn unregister(&self, kind: ObjKind, handle: u32) {
        self.objects().retain(|o| !(o.0 == kind && o.1 == handle));
    }

    fn lookup(&self, kind: ObjKind, handle: u32) -> Option<usize> {
        self.objects()
            .iter()
            .find(|o| o.0 == kind && o.1 == handle)
            .map(|o| o.2)
    }
}

impl IwContext {
    /// The context of `ctx`, if it is one of ours.
    pub(crate) fn from_ptr<'a>(ctx: *mut sys::ibv_context) -> Option<&'a IwContext> {
        if ctx.is_null() {
            return None;
        }
        let at = (ctx as *mut u8)
            .wrapping_sub(offset_of!(IwContext, vctx) + offset_of!(sys::verbs_context, context))
            as *const IwContext;
        // SAFETY: every `ibv_context` this library hands out lives inside an `IwContext`
        // at this offset; the magic (read only after checking abi_compat, which every
        // ibv_context has) guards against pointers from elsewhere.
        unsafe {
            if (*ctx).abi_compat != sys::VERBS_ABI_IS_EXTENDED || (*at).magic != CONTEXT_MAGIC {
                return None;
            }
            Some(&*at)
        }
    }
}

/// `struct ibv_context *ibv_open_device(struct ibv_device *device)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_open_device(dev: *mut sys::ibv_device) -> *mut sys::ibv_context {
    let Some(device) = lookup(dev) else {
        fail_with(
            "ibv_open_device",
            libc::EINVAL,
            "not a device of this library",
        );
        return std::ptr::null_mut();
    };
    let client = match Context::open_path(&device.socket) {
        Ok(c) => c,
        Err(e) => {
            // The daemon went away since the list was made.
            fail("ibv_open_device", &e);
            if matches!(e, iwarp_verbs::Error::Io(_)) {
                set_errno(libc::ENODEV);
            }
            return std::ptr::null_mut();
        }
    };
    let inner_fd = std::os::fd::AsRawFd::as_raw_fd(&client.async_fd());
    let async_fd = match crate::fdwrap::epoll_over(&[inner_fd]) {
        Ok(e) => e,
        Err(n) => {
            fail_with("ibv_open_device", n, "epoll");
            return std::ptr::null_mut();
        }
    };
    let raw_async_fd = std::os::fd::AsRawFd::as_raw_fd(&async_fd);
    let mut b = Box::new(IwContext {
        vctx: sys::verbs_context::default(),
        magic: CONTEXT_MAGIC,
        client,
        device,
        async_fd,
        objects: std::sync::Mutex::new(Vec::new()),
        fatal_reported: std::sync::atomic::AtomicBool::new(false),
    });
    let v = &mut b.vctx;
    v.sz = size_of::<sys::verbs_context>();
    v.query_port = Some(query_port_op);
    v.query_device_ex = Some(query_device_ex_op);
    crate::ops::fill(v);
    let c = &mut v.context;
    c.device = dev;
    c.cmd_fd = -1;
    c.async_fd = raw_async_fd;
    c.num_comp_vectors = 1;
    c.abi_compat = sys::VERBS_ABI_IS_EXTENDED;
    // A zeroed pthread_mutex_t is PTHREAD_MUTEX_INITIALIZER (glibc).
    let b = Box::leak(b);
    &mut b.vctx.context
}

/// `int ibv_close_device(struct ibv_context *context)`: 0, or the errno.
#[no_mangle]
pub extern "C" fn iwarp_ibv_close_device(ctx: *mut sys::ibv_context) -> c_int {
    let Some(c) = IwContext::from_ptr(ctx) else {
        return fail_with(
            "ibv_close_device",
            libc::EINVAL,
            "not a context of this library",
        );
    };
    let p = c as *const IwContext as *mut IwContext;
    // SAFETY: `p` came from Box::leak in ibv_open_device; clearing the magic first makes a
    // second close of the same pointer fail instead of freeing twice (while the memory is
    // not reused).
    unsafe {
        (*p).magic = 0;
        drop(Box::from_raw(p));
    }
    0
}

/// The largest `ibv_mtu` not above an IP MTU.
fn ibv_mtu(ip_mtu: u32) -> sys::ibv_mtu {
    match ip_mtu {
        4096.. => sys::IBV_MTU_4096,
        2048.. => sys::IBV_MTU_2048,
        1024.. => sys::IBV_MTU_1024,
        512.. => sys::IBV_MTU_512,
        _ => sys::IBV_MTU_256,
    }
}

/// `(active_width, active_speed)` for a link speed (rdma-core's encodings: width 1 = 1X,
/// 2 = 4X; speed 1 = 2.5, 4 = 10, 32 = 25, 64 = 50 Gbit/s per lane).
fn width_speed(mbps: u32) -> (u8, u8) {
    match mbps {
        0..=2_500 => (1, 1),
        2_501..=10_000 => (1, 4),
        10_001..=25_000 => (1, 32),
        25_001..=40_000 => (2, 4),
        40_001..=50_000 => (1, 64),
        50_001..=100_000 => (2, 32),
        _ => (2, 64),
    }
}

pub(crate) fn fill_device_attr(a: &DeviceAttr, guid_be: u64, out: &mut sys::ibv_device_attr) {
    *out = sys::ibv_device_attr::default();
    let fw = format!("iwarpd {}", a.version);
    for (d, s) in out.fw_ver.iter_mut().zip(fw.bytes().take(63)) {
        *d = s as libc::c_char;
    }
    out.node_guid = guid_be.to_be();
    out.sys_image_guid = guid_be.to_be();
    out.max_mr_size = a.max_mr_size;
    out.page_size_cap = 4096;
    let clamp = |v: u32| v.min(i32::MAX as u32) as c_int;
    out.max_qp = clamp(a.max_qp);
    out.max_qp_wr = clamp(a.max_qp_wr);
    out.device_cap_flags = if a.memory_windows {
        sys::IBV_DEVICE_MEM_WINDOW
            | sys::IBV_DEVICE_MEM_MGT_EXTENSIONS
            | sys::IBV_DEVICE_MEM_WINDOW_TYPE_2B
    } else {
        sys::IBV_DEVICE_MEM_MGT_EXTENSIONS
    };
    out.max_sge = clamp(a.max_sge);
    out.max_sge_rd = clamp(a.max_sge);
    out.max_cq = clamp(a.max_cq);
    out.max_cqe = clamp(a.max_cqe);
    out.max_mr = clamp(a.max_mr);
    out.max_pd = clamp(a.max_pd);
    out.max_qp_rd_atom = clamp(a.max_ird);
    out.max_qp_init_rd_atom = clamp(a.max_ord);
    out.max_res_rd_atom = clamp(a.max_ird.saturating_mul(a.max_qp));
    out.atomic_cap = sys::IBV_ATOMIC_NONE;
    out.max_mw = if a.memory_windows { clamp(a.max_mr) } else { 0 };
    out.max_srq = clamp(a.max_srq);
    out.max_srq_wr = clamp(a.max_srq_wr);
    out.max_srq_sge = clamp(a.max_sge);
    out.max_pkeys = 1;
    out.phys_port_cnt = a.ports.min(255) as u8;
}

pub(crate) fn fill_port_attr(p: &PortAttr, d: &DeviceAttr, out: &mut sys::ibv_port_attr) {
    *out = sys::ibv_port_attr::default();
    out.state = if p.link_up {
        sys::IBV_PORT_ACTIVE
    } else {
        sys::IBV_PORT_DOWN
    };
    out.max_mtu = ibv_mtu(p.mtu);
    out.active_mtu = ibv_mtu(p.mtu);
    out.gid_tbl_len = 1;
    out.max_msg_sz = d.max_mr_size.min(u32::MAX as u64) as u32;
    out.pkey_tbl_len = 1;
    // One virtual lane (what Ethernet RNICs report).
    out.max_vl_num = 1;
    let (w, s) = width_speed(p.speed_mbps);
    out.active_width = w;
    out.active_speed = s;
    // 5 = LinkUp, 3 = Disabled (IB phys states, as ibv_devinfo prints them).
    out.phys_state = if p.link_up { 5 } else { 3 };
    out.link_layer = sys::IBV_LINK_LAYER_ETHERNET as u8;
}

fn with_ctx<T>(
    what: &str,
    ctx: *mut sys::ibv_context,
    f: impl FnOnce(&IwContext) -> T,
    err: T,
) -> T {
    match IwContext::from_ptr(ctx) {
        Some(c) => f(c),
        None => {
            fail_with(what, libc::EINVAL, "not a context of this library");
            err
        }
    }
}

/// `int ibv_query_device(struct ibv_context *, struct ibv_device_attr *)`: the daemon's
/// limits now. 0, or the errno.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_device(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_device_attr,
) -> c_int {
    if attr.is_null() {
        return fail_with("ibv_query_device", libc::EINVAL, "NULL attr");
    }
    with_ctx(
        "ibv_query_device",
        ctx,
        |c| match c.client.query_device() {
            Ok(a) => {
                // SAFETY: the caller's attr points to an ibv_device_attr.
                fill_device_attr(&a, c.device.guid_be, unsafe { &mut *attr });
                0
            }
            Err(e) => fail("ibv_query_device", &e),
        },
        libc::EINVAL,
    )
}

/// `verbs_context::query_device_ex` (the header's `ibv_query_device_ex`).
unsafe extern "C" fn query_device_ex_op(
    ctx: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: input is NULL or the caller's struct.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return fail_with("ibv_query_device_ex", libc::EINVAL, "input comp_mask not 0");
    }
    if attr.is_null() || attr_size < size_of::<sys::ibv_device_attr>() {
        return fail_with("ibv_query_device_ex", libc::EINVAL, "attr too small");
    }
    with_ctx(
        "ibv_query_device_ex",
        ctx,
        |c| match c.client.query_device() {
            Ok(a) => {
                let mut ex = sys::ibv_device_attr_ex::default();
                fill_device_attr(&a, c.device.guid_be, &mut ex.orig_attr);
                ex.phys_port_cnt_ex = a.ports;
                let n = attr_size.min(size_of::<sys::ibv_device_attr_ex>());
                // SAFETY: attr holds attr_size bytes (the header passes sizeof its struct);
                // bytes past ours are zeroed: nothing more is supported.
                unsafe {
                    std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
                    std::ptr::copy_nonoverlapping(
                        (&ex as *const sys::ibv_device_attr_ex).cast::<u8>(),
                        attr.cast::<u8>(),
                        n,
                    );
                }
                0
            }
            Err(e) => fail("ibv_query_device_ex", &e),
        },
        libc::EINVAL,
    )
}

fn port_attr(c: &IwContext, port_num: u8) -> Result<sys::ibv_port_attr, c_int> {
    if port_num == 0 {
        return Err(fail_with(
            "ibv_query_port",
            libc::EINVAL,
            "port 0 (ports count from 1)",
        ));
    }
    let d = c.client.device_attr();
    let p = c
        .client
        .query_port(u32::from(port_num) - 1)
        .map_err(|e| fail("ibv_query_port", &e))?;
    let mut out = sys::ibv_port_attr::default();
    fill_port_attr(&p, d, &mut out);
    Ok(out)
}

/// `verbs_context::query_port` (the header's `ibv_query_port` macro).
unsafe extern "C" fn query_port_op(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    attr: *mut sys::ibv_port_attr,
    attr_len: usize,
) -> c_int {
    if attr.is_null() {
        return fail_with("ibv_query_port", libc::EINVAL, "NULL attr");
    }
    with_ctx(
        "ibv_query_port",
        ctx,
        |c| match port_attr(c, port_num) {
            Ok(p) => {
                let n = attr_len.min(size_of::<sys::ibv_port_attr>());
                // SAFETY: attr holds attr_len bytes; newer headers' longer struct keeps its
                // tail zeroed.
                unsafe {
                    std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_len);
                    std::ptr::copy_nonoverlapping(
                        (&p as *const sys::ibv_port_attr).cast::<u8>(),
                        attr.cast::<u8>(),
                        n,
                    );
                }
                0
            }
            Err(e) => e,
        },
        libc::EINVAL,
    )
}

/// The exported `ibv_query_port` (IBVERBS_1.1), reached by binaries that bypass the
/// header's macro: fills the compat layout (the fields up to `link_layer`).
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_port(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    attr: *mut c_void,
) -> c_int {
    if attr.is_null() {
        return fail_with("ibv_query_port", libc::EINVAL, "NULL attr");
    }
    with_ctx(
        "ibv_query_port",
        ctx,
        |c| match port_attr(c, port_num) {
            Ok(p) => {
                let n = offset_of!(sys::ibv_port_attr, link_layer) + 1;
                // SAFETY: the compat struct holds every field up to link_layer.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (&p as *const sys::ibv_port_attr).cast::<u8>(),
                        attr.cast::<u8>(),
                        n,
                    )
                };
                0
            }
            Err(e) => e,
        },
        libc::EINVAL,
    )
}

/// The GID of a port: its IPv4 address as an IPv4-mapped IPv6 address.
fn gid_of(c: &IwContext, port_num: u32) -> Option<[u8; 16]> {
    let p = c.client.ports().get((port_num as usize).checked_sub(1)?)?;
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&p.ip);
    Some(g)
}

/// The per-port entry queries (GID, GID type, P_Key): each port has one entry, at index
/// 0. Writes `value(gid)` to `*out`: 0, or -1 and errno (`EINVAL`: no such port or index,
/// or a NULL output).
fn port_entry<T>(
    what: &str,
    ctx: *mut sys::ibv_context,
    port_num: u32,
    index: i64,
    out: *mut T,
    value: impl FnOnce([u8; 16]) -> T,
) -> c_int {
    with_ctx(
        what,
        ctx,
        |c| match (gid_of(c, port_num), index, out.is_null()) {
            (Some(g), 0, false) => {
                // SAFETY: `out` is not NULL and, by the verb's contract (its man page),
                // points to the caller's object of the type the header declares for it.
                unsafe { out.write(value(g)) };
                0
            }
            _ => {
                fail_with(what, libc::EINVAL, "no such port or index");
                -1
            }
        },
        -1,
    )
}

/// `int ibv_query_gid(ctx, port_num, index, union ibv_gid *gid)`: 0, or -1 and errno.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_gid(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut sys::ibv_gid,
) -> c_int {
    port_entry(
        "ibv_query_gid",
        ctx,
        port_num.into(),
        index.into(),
        gid,
        |g| sys::ibv_gid { raw: g },
    )
}

/// `int _ibv_query_gid_ex(ctx, port_num, gid_index, entry, flags, entry_size)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp__ibv_query_gid_ex(
    ctx: *mut sys::ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut sys::ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    if flags != 0 || entry.is_null() || entry_size < size_of::<sys::ibv_gid_entry>() {
        return fail_with(
            "ibv_query_gid_ex",
            libc::EINVAL,
            "flags, entry or entry_size",
        );
    }
    with_ctx(
        "ibv_query_gid_ex",
        ctx,
        |c| match (gid_of(c, port_num), gid_index) {
            (Some(g), 0) => {
                let mut e = sys::ibv_gid_entry::default();
                e.gid.raw = g;
                e.gid_index = 0;
                e.port_num = port_num;
                e.gid_type = sys::IBV_GID_TYPE_IB;
                // SAFETY: entry points to at least one ibv_gid_entry (checked size).
                unsafe { *entry = e };
                0
            }
            (Some(_), _) => fail_with("ibv_query_gid_ex", libc::ENODATA, "one GID per port"),
            (None, _) => fail_with("ibv_query_gid_ex", libc::EINVAL, "no such port"),
        },
        libc::EINVAL,
    )
}

/// `int ibv_query_gid_type(ctx, port_num, index, enum ibv_gid_type_sysfs *type)`
/// (private; ibv_devinfo uses it): type 0 (`IBV_GID_TYPE_SYSFS_IB_ROCE_V1`, what an iWARP
/// device's GID table says), or -1.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_gid_type(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    index: u32,
    ty: *mut c_int,
) -> c_int {
    port_entry(
        "ibv_query_gid_type",
        ctx,
        port_num.into(),
        index.into(),
        ty,
        |_| 0,
    )
}

/// `int ibv_query_pkey(ctx, port_num, index, __be16 *pkey)`: the default P_Key 0xffff at
/// index 0 (iWARP has no partitions). 0, or -1 and errno.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_query_pkey(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    port_entry(
        "ibv_query_pkey",
        ctx,
        port_num.into(),
        index.into(),
        pkey,
        |_| 0xffff,
    )
}

/// `int ibv_get_pkey_index(ctx, port_num, __be16 pkey)`: 0 for the default P_Key, else -1.
#[no_mangle]
pub extern "C" fn iwarp_ibv_get_pkey_index(
    ctx: *mut sys::ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    with_ctx(
        "ibv_get_pkey_index",
        ctx,
        |c| {
            if gid_of(c, port_num.into()).is_some() && pkey == 0xffff {
                0
            } else {
                set_errno(libc::ENOENT);
                -1
            }
        },
        -1,
    )
}

/// The `ibv_event_type` of an async event of the client library, None for events
/// rdma-core has no counterpart of (a graceful close completing, an RQ limit).
fn event_type(k: iwarp_verbs::AsyncKind) -> Option<u32> {
    use iwarp_verbs::AsyncKind::*;
    Some(match k {
        LlpCloseComplete | QpRqLimitReached => return None,
        ProtectionError(_) => sys::IBV_EVENT_QP_ACCESS_ERR,
        RemoteOperationError(_) => sys::IBV_EVENT_QP_REQ_ERR,
        TerminateReceived(_) | LlpConnectionReset | LlpConnectionLost | LlpIntegrityError(_)
        | BadClose | BadLlpClose | LocalQpCatastrophic | QpErrorStateEntered => {
            sys::IBV_EVENT_QP_FATAL
        }
        CqError | CqOverflow => sys::IBV_EVENT_CQ_ERR,
        SrqError => sys::IBV_EVENT_SRQ_ERR,
        SrqLimitReached => sys::IBV_EVENT_SRQ_LIMIT_REACHED,
    })
}

/// `int ibv_get_async_event(struct ibv_context *, struct ibv_async_event *)`: the next
/// event, waiting unless the application made `async_fd` non-blocking (then -1, `EAGAIN`).
/// Once the daemon is gone: `IBV_EVENT_DEVICE_FATAL` once, then -1 with `EIO`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_get_async_event(
    ctx: *mut sys::ibv_context,
    event: *mut sys::ibv_async_event,
) -> c_int {
    const WHAT: &str = "ibv_get_async_event";
    let Some(c) = IwContext::from_ptr(ctx) else {
        fail_with(WHAT, libc::EINVAL, "not a context of this library");
        return -1;
    };
    if event.is_null() {
        fail_with(WHAT, libc::EINVAL, "NULL event");
        return -1;
    }
    loop {
        let msg = match c.client.try_get_async_event() {
            Ok(m) => m,
            Err(iwarp_verbs::Error::WouldBlock) => {
                if crate::fdwrap::is_nonblocking(c.vctx.context.async_fd) {
                    set_errno(libc::EAGAIN);
                    return -1;
                }
                crate::fdwrap::wait_readable(c.vctx.context.async_fd);
                continue;
            }
            Err(iwarp_verbs::Error::DaemonGone)
                if !c
                    .fatal_reported
                    .swap(true, std::sync::atomic::Ordering::AcqRel) =>
            {
                // The device is gone: said once, as a provider reports a dead device.
                let ev = sys::ibv_async_event {
                    event_type: sys::IBV_EVENT_DEVICE_FATAL,
                    ..Default::default()
                };
                // SAFETY: the caller's event structure.
                unsafe { *event = ev };
                return 0;
            }
            Err(e) => {
                fail(WHAT, &e);
                return -1;
            }
        };
        let mut ev = sys::ibv_async_event::default();
        let found = match (msg.resource, event_type(msg.kind)) {
            (_, None) => false,
            (iwarp_verbs::EventResourceRef::Qp(h), Some(t)) => {
                ev.event_type = t;
                c.lookup(ObjKind::Qp, h.0)
                    .map(|p| ev.element.qp = p as *mut sys::ibv_qp)
                    .is_some()
            }
            (iwarp_verbs::EventResourceRef::Cq(h), Some(t)) => {
                ev.event_type = t;
                c.lookup(ObjKind::Cq, h.0)
                    .map(|p| ev.element.cq = p as *mut sys::ibv_cq)
                    .is_some()
            }
            (iwarp_verbs::EventResourceRef::Device, Some(_)) => {
                ev.event_type = sys::IBV_EVENT_DEVICE_FATAL;
                !c.fatal_reported
                    .swap(true, std::sync::atomic::Ordering::AcqRel)
            }
            (iwarp_verbs::EventResourceRef::Srq(h), Some(t)) => {
                ev.event_type = t;
                c.lookup(ObjKind::Srq, h.0)
                    .map(|p| ev.element.srq = p as *mut sys::ibv_srq)
                    .is_some()
            }
        };
        if found {
            // SAFETY: the caller's event structure.
            unsafe { *event = ev };
            return 0;
        }
        crate::debug::debug!("{WHAT}: {:?} on {:?} dropped", msg.kind, msg.resource);
    }
}

/// `void ibv_ack_async_event(struct ibv_async_event *)`: nothing to count (destroying an
/// object never waits for acknowledgements here).
#[no_mangle]
pub extern "C" fn iwarp_ibv_ack_async_event(_event: *mut sys::ibv_async_event) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_and_speed_encodings() {
        assert_eq!(ibv_mtu(1500), sys::IBV_MTU_1024);
        assert_eq!(ibv_mtu(9000), sys::IBV_MTU_4096);
        assert_eq!(ibv_mtu(100), sys::IBV_MTU_256);
        assert_eq!(width_speed(10_000), (1, 4));
        assert_eq!(width_speed(100_000), (2, 32));
    }
}
