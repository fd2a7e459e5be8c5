//! librdmacm's CM ids (`rdma_create_id`, `rdma_bind_addr`, `rdma_resolve_addr`,
//! `rdma_resolve_route`, `rdma_listen`, `rdma_create_qp`, `rdma_connect`, `rdma_accept`,
//! `rdma_reject`, `rdma_disconnect`, `rdma_destroy_qp`, `rdma_destroy_id`) over the
//! client library's `CmId`. IPv4 and the TCP port space (`RDMA_PS_TCP`) only, as iWARP.
//!
//! An id made without a channel is synchronous, as librdmacm's: it gets a channel of its
//! own, and `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`, `rdma_accept` and
//! `rdma_disconnect` return once their event came, kept in `id->event` (`cm_sync.rs`).

use std::ffi::{c_int, c_void};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use iwarp_verbs::{Addr, CmId, ConnParam};

use crate::cm_channel::{device_pd, forget_id, IwEventChannel, MadeEvent, MAX_IDS};
use crate::cm_sync::{ack_sync_event, complete, own_channel};
use crate::context::IwContext;
use crate::debug::debug;
use crate::errno::{fail, set_errno};
use crate::object::{free, from_raw, into_raw, Wrapped};
use crate::qp::{create_qp_with, IwQp};
use crate::sys;

/// A CM id.
#[repr(C)]
pub(crate) struct IwCmId {
    id: sys::rdma_cm_id,
    magic: AtomicU64,
    /// The channel its events go to (`rdma_migrate_id` changes it).
    chan: AtomicPtr<IwEventChannel>,
    pub(crate) client: CmId,
    /// Synchronous: the channel is the id's own and the calls wait for their event.
    pub(crate) sync: AtomicBool,
    /// `rdma_create_ep`'s QP attributes of a passive endpoint: `rdma_get_request`
    /// creates each request's QP with them.
    pub(crate) qp_init_attr: Mutex<Option<sys::ibv_qp_init_attr>>,
    /// Made for a connection request (its QP is created on the request).
    passive: bool,
    addrs: Mutex<(Option<SocketAddrV4>, Option<SocketAddrV4>)>,
    /// The CQs (each with its completion channel) `rdma_create_qp` made because the
    /// application gave none: [`OWN_RECV_CQ`] | [`OWN_SEND_CQ`]; `rdma_destroy_qp`
    /// destroys them.
    own_cqs: AtomicU8,
}

const OWN_RECV_CQ: u8 = 1;
const OWN_SEND_CQ: u8 = 2;

// SAFETY: the raw pointers inside `rdma_cm_id` are the application's and only stored.
unsafe impl Send for IwCmId {}
// SAFETY: as above.
unsafe impl Sync for IwCmId {}

impl Wrapped for IwCmId {
    type Raw = sys::rdma_cm_id;
    const MAGIC: u64 = 0x6977_6172_705f_6964;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl IwCmId {
    /// The application's `rdma_cm_id`.
    pub(crate) fn raw(&self) -> *mut sys::rdma_cm_id {
        &self.id as *const sys::rdma_cm_id as *mut sys::rdma_cm_id
    }

    /// The channel its events go to.
    pub(crate) fn chan(&self) -> &'static IwEventChannel {
        // SAFETY: set from a `&'static IwEventChannel`; a channel lives while it has
        // ids (rdma_destroy_event_channel leaves a channel with ids alone).
        unsafe { &*self.chan.load(Ordering::Acquire) }
    }

    /// From now on its events are those of `c` (the caller moved its route there).
    pub(crate) fn set_chan(&self, c: &'static IwEventChannel) {
        self.chan.store(c as *const _ as *mut _, Ordering::Release);
        // SAFETY: the application's id; librdmacm keeps `channel` current.
        unsafe { (*self.raw()).channel = c.raw() };
    }

    pub(crate) fn is_sync(&self) -> bool {
        self.sync.load(Ordering::Acquire)
    }

    fn new(
        chan: &'static IwEventChannel,
        client: CmId,
        context: *mut c_void,
        passive: bool,
    ) -> Option<&'static IwCmId> {
        let handle = client.handle().0;
        let p = into_raw(IwCmId {
            id: sys::rdma_cm_id {
                verbs: chan.ctx,
                channel: chan.raw(),
                context,
                ps: sys::RDMA_PS_TCP,
                port_num: 1,
                qp_type: sys::IBV_QPT_RC,
                ..Default::default()
            },
            magic: AtomicU64::new(IwCmId::MAGIC),
            chan: AtomicPtr::new(chan as *const IwEventChannel as *mut IwEventChannel),
            client,
            sync: AtomicBool::new(false),
            qp_init_attr: Mutex::new(None),
            passive,
            addrs: Mutex::new((None, None)),
            own_cqs: AtomicU8::new(0),
        });
        let mut s = chan.lock();
        if s.ids.len() >= MAX_IDS {
            drop(s);
            // SAFETY: just made, not handed out.
            unsafe { free(&*(p as *const IwCmId)) };
            return None;
        }
        s.ids.push((handle, p as usize));
        // SAFETY: just made; lives until rdma_destroy_id.
        Some(unsafe { &*(p as *const IwCmId) })
    }

    /// The id of a connection request on `listener`.
    pub(crate) fn for_request(
        chan: &'static IwEventChannel,
        listener: &IwCmId,
        client: CmId,
        local: libc::sockaddr_in,
        remote: libc::sockaddr_in,
    ) -> Option<&'static IwCmId> {
        let id = IwCmId::new(chan, client, listener.id.context, true)?;
        id.set_addrs(Some(local), Some(remote));
        id.set_device_pd();
        Some(id)
    }

    /// `id->pd` is the device's PD once the id has its device (bound, resolved, or a
    /// request), as librdmacm's; `rdma_create_qp` with no PD uses it.
    fn set_device_pd(&self) {
        let raw = self.raw();
        // SAFETY: the application's id; librdmacm fills `pd`.
        unsafe {
            if (*raw).pd.is_null() {
                (*raw).pd = device_pd(self.chan().ctx);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<SocketAddrV4>, Option<SocketAddrV4>)> {
        self.addrs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the local and/or remote address, in `route.addr` too.
    fn set_addrs(&self, local: Option<libc::sockaddr_in>, remote: Option<libc::sockaddr_in>) {
        let mut a = self.lock();
        let raw = self.raw();
        if let Some(l) = local {
            a.0 = Some(to_v4(&l));
            // SAFETY: the application's id; route.addr is librdmacm's to fill.
            unsafe { write_sockaddr(&mut (*raw).route.addr.__bindgen_anon_1, &l) };
        }
        if let Some(r) = remote {
            a.1 = Some(to_v4(&r));
            // SAFETY: as above.
            unsafe { write_sockaddr(&mut (*raw).route.addr.__bindgen_anon_2, &r) };
        }
    }
}

/// Writes a `sockaddr_in` into one of `rdma_addr`'s address unions.
///
/// # Safety
///
/// `dst` is a union at least as large as `sockaddr_storage`.
unsafe fn write_sockaddr<T>(dst: &mut T, a: &libc::sockaddr_in) {
    // SAFETY: the union holds a sockaddr_storage (128 bytes), larger than sockaddr_in.
    unsafe {
        std::ptr::write_bytes(dst as *mut T as *mut u8, 0, std::mem::size_of::<T>());
        std::ptr::copy_nonoverlapping(
            a as *const libc::sockaddr_in as *const u8,
            dst as *mut T as *mut u8,
            std::mem::size_of::<libc::sockaddr_in>(),
        );
    }
}

/// The `sockaddr_in` of an address of the control protocol.
pub(crate) fn sockaddr_in(a: Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip),
        },
        sin_zero: [0; 8],
    }
}

fn to_v4(a: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(a.sin_port),
    )
}

/// A caller's `struct sockaddr *` as IPv4, or the errno refusing it.
///
/// # Safety
///
/// `sa` is NULL or a readable socket address.
unsafe fn read_sockaddr(sa: *const libc::sockaddr) -> Result<libc::sockaddr_in, c_int> {
    if sa.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the family field of any sockaddr.
    if unsafe { (*sa).sa_family } as c_int != libc::AF_INET {
        return Err(libc::EAFNOSUPPORT);
    }
    // SAFETY: an AF_INET address is a sockaddr_in.
    Ok(unsafe { *(sa as *const libc::sockaddr_in) })
}

pub(crate) fn err(what: &str, n: c_int, why: &str) -> c_int {
    debug!("{what}: {why}");
    set_errno(n);
    -1
}

fn fail_neg(what: &str, e: &iwarp_verbs::Error) -> c_int {
    fail(what, e);
    -1
}

pub(crate) fn id_of<'a>(what: &str, id: *mut sys::rdma_cm_id) -> Result<&'a IwCmId, c_int> {
    from_raw::<IwCmId>(id).ok_or_else(|| err(what, libc::EINVAL, "not a CM id of this library"))
}

/// `int rdma_create_id(channel, struct rdma_cm_id **id, void *context, enum rdma_port_space ps)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_create_id(
    ch: *mut sys::rdma_event_channel,
    out: *mut *mut sys::rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    const WHAT: &str = "rdma_create_id";
    if out.is_null() {
        return err(WHAT, libc::EINVAL, "NULL id");
    }
    if ps != sys::RDMA_PS_TCP {
        return err(
            WHAT,
            libc::EPROTONOSUPPORT,
            "iWARP has the TCP port space only",
        );
    }
    let id = if ch.is_null() {
        create_sync_id(WHAT, context)
    } else {
        let Some(c) = from_raw::<IwEventChannel>(ch) else {
            return err(WHAT, libc::EINVAL, "not a channel of this library");
        };
        // SAFETY: channels live until rdma_destroy_event_channel, which leaves a channel
        // with ids alone.
        let c: &'static IwEventChannel = unsafe { &*(c as *const IwEventChannel) };
        create_id_on(WHAT, c, context)
    };
    match id {
        Ok(id) => {
            // SAFETY: the caller's output pointer.
            unsafe { *out = id.raw() };
            0
        }
        Err(n) => n,
    }
}

/// A new (asynchronous) id on channel `c`, or -1 with errno set.
fn create_id_on(
    what: &str,
    c: &'static IwEventChannel,
    context: *mut c_void,
) -> Result<&'static IwCmId, c_int> {
    let client = match c.client.create_id() {
        Ok(i) => i,
        Err(e) => return Err(fail_neg(what, &e)),
    };
    IwCmId::new(c, client, context, false).ok_or_else(|| err(what, libc::ENOMEM, "too many CM ids"))
}

/// A synchronous id: on a channel of its own (librdmacm's ids made without a channel).
pub(crate) fn create_sync_id(what: &str, context: *mut c_void) -> Result<&'static IwCmId, c_int> {
    let c = own_channel()?;
    match create_id_on(what, c, context) {
        Ok(id) => {
            id.sync.store(true, Ordering::Release);
            Ok(id)
        }
        Err(n) => {
            let e = last_errno();
            crate::cm_channel::iwarp_rdma_destroy_event_channel(c.raw());
            set_errno(e);
            Err(n)
        }
    }
}

/// `int rdma_destroy_id(struct rdma_cm_id *)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_destroy_id(id: *mut sys::rdma_cm_id) -> c_int {
    let i = match id_of("rdma_destroy_id", id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let chan = i.chan();
    let sync = i.is_sync();
    if sync {
        ack_sync_event(i);
    }
    forget_id(chan, i as *const IwCmId as usize, i.client.handle().0);
    // SAFETY: from into_raw; given up by the application. Dropping the client's CmId
    // destroys it in the daemon.
    unsafe { free(i) };
    if sync {
        // Its own channel, with no id left.
        crate::cm_channel::iwarp_rdma_destroy_event_channel(chan.raw());
    }
    0
}

/// The IPv4 address of the channel's device (port 1).
fn device_ip(c: &IwEventChannel) -> Ipv4Addr {
    IwContext::from_ptr(c.ctx)
        .and_then(|x| x.client.ports().first().map(|p| Ipv4Addr::from(p.ip)))
        .unwrap_or(Ipv4Addr::UNSPECIFIED)
}

/// `int rdma_bind_addr(struct rdma_cm_id *, struct sockaddr *)`: an address of the device
/// (or any) and a port.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_bind_addr(
    id: *mut sys::rdma_cm_id,
    addr: *mut libc::sockaddr,
) -> c_int {
    const WHAT: &str = "rdma_bind_addr";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    // SAFETY: the caller's address.
    let a = match unsafe { read_sockaddr(addr) } {
        Ok(a) => a,
        Err(n) => return err(WHAT, n, "IPv4 addresses only"),
    };
    let mut a = a;
    let ip = to_v4(&a).ip().to_owned();
    let dev = device_ip(i.chan());
    // A loopback address binds to the device, as rdma_cm binds one to its first device
    // (libfabric's verbs provider binds 127.0.0.1 to find the device of a socket
    // address). iwarpd has no loopback path, so the id's address becomes the device's:
    // what rdma_get_local_addr tells (libfabric hands a passive endpoint's name to its
    // peers, which must reach it there).
    if ip.is_loopback() && !dev.is_unspecified() {
        a.sin_addr.s_addr = u32::from_ne_bytes(dev.octets());
    } else if !ip.is_unspecified() && ip != dev {
        return err(
            WHAT,
            libc::EADDRNOTAVAIL,
            &format!("{ip} is not the device's address"),
        );
    }
    i.set_addrs(Some(a), None);
    i.set_device_pd();
    0
}

/// `int rdma_resolve_addr(id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)`:
/// the device's address is the source; `RDMA_CM_EVENT_ADDR_RESOLVED` follows.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_resolve_addr(
    id: *mut sys::rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    const WHAT: &str = "rdma_resolve_addr";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    // SAFETY: the caller's address.
    let d = match unsafe { read_sockaddr(dst) } {
        Ok(d) => d,
        Err(n) => return err(WHAT, n, "IPv4 destinations only"),
    };
    let local = if src.is_null() {
        None
    } else {
        // SAFETY: the caller's address.
        match unsafe { read_sockaddr(src) } {
            Ok(s) => Some(s),
            Err(n) => return err(WHAT, n, "IPv4 sources only"),
        }
    };
    let bound = i.lock().0;
    let local = local.or_else(|| {
        let ip = device_ip(i.chan());
        Some(libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: bound.map_or(0, |b| b.port().to_be()),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip.octets()),
            },
            sin_zero: [0; 8],
        })
    });
    i.set_addrs(local, Some(d));
    i.set_device_pd();
    let made = MadeEvent {
        id: i as *const IwCmId as usize,
        event: sys::RDMA_CM_EVENT_ADDR_RESOLVED,
        status: 0,
    };
    if !i.chan().push_made(made) {
        return err(WHAT, libc::ENOMEM, "event queue full");
    }
    complete(i)
}

/// `int rdma_resolve_route(id, int timeout_ms)`: `RDMA_CM_EVENT_ROUTE_RESOLVED` follows
/// (the daemon routes when it connects).
#[no_mangle]
pub extern "C" fn iwarp_rdma_resolve_route(id: *mut sys::rdma_cm_id, _timeout_ms: c_int) -> c_int {
    const WHAT: &str = "rdma_resolve_route";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    if i.lock().1.is_none() {
        return err(WHAT, libc::EINVAL, "address not resolved");
    }
    let made = MadeEvent {
        id: i as *const IwCmId as usize,
        event: sys::RDMA_CM_EVENT_ROUTE_RESOLVED,
        status: 0,
    };
    if !i.chan().push_made(made) {
        return err(WHAT, libc::ENOMEM, "event queue full");
    }
    complete(i)
}

/// `int rdma_listen(struct rdma_cm_id *, int backlog)`: on the bound address.
#[no_mangle]
pub extern "C" fn iwarp_rdma_listen(id: *mut sys::rdma_cm_id, backlog: c_int) -> c_int {
    const WHAT: &str = "rdma_listen";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let Some(mut local) = i.lock().0 else {
        return err(WHAT, libc::EINVAL, "not bound (rdma_bind_addr first)");
    };
    // iwarpd has no loopback path (the engine does not connect to its own address): a
    // listener bound to a loopback address is reached at the device's addresses.
    if local.ip().is_loopback() {
        local.set_ip(Ipv4Addr::UNSPECIFIED);
    }
    let backlog = if backlog <= 0 { 128 } else { backlog as u32 };
    if local.port() != 0 {
        return match i.client.listen(local, backlog) {
            Ok(()) => 0,
            Err(e) => fail_neg(WHAT, &e),
        };
    }
    // Port 0: an ephemeral port, as the kernel's rdma_listen picks one (libfabric's
    // passive endpoints bind port 0, listen, then read the port back). The daemon has
    // no "any port": free ones are tried from a random start in the dynamic range
    // (RFC 6335), at most EPHEMERAL_TRIES of them.
    const EPHEMERAL_TRIES: u32 = 64;
    let first =
        49152 + (std::process::id().wrapping_mul(2_654_435_761) ^ i.client.handle().0) % 16384;
    for k in 0..EPHEMERAL_TRIES {
        let port = 49152 + ((first - 49152 + k * 257) % 16384) as u16;
        local.set_port(port);
        match i.client.listen(local, backlog) {
            Ok(()) => {
                let mut a = i.lock();
                if let Some(bound) = a.0.as_mut() {
                    bound.set_port(port);
                }
                drop(a);
                // SAFETY: the application's id; route.addr holds the bound address.
                unsafe {
                    let sin = &mut (*i.raw()).route.addr.__bindgen_anon_1 as *mut _
                        as *mut libc::sockaddr_in;
                    (*sin).sin_port = port.to_be();
                }
                return 0;
            }
            Err(iwarp_verbs::Error::Daemon(r))
                if r.code == iwarp_verbs::ErrorCode::AddressInUse => {}
            Err(e) => return fail_neg(WHAT, &e),
        }
    }
    err(WHAT, libc::EADDRINUSE, "no free ephemeral port found")
}

/// `int rdma_create_qp(struct rdma_cm_id *, struct ibv_pd *, struct ibv_qp_init_attr *)`:
/// an RC QP on the id (on a connection request's id: on the core that received it).
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_create_qp(
    id: *mut sys::rdma_cm_id,
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    const WHAT: &str = "rdma_create_qp";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    if attr.is_null() {
        return err(WHAT, libc::EINVAL, "NULL attr");
    }
    // SAFETY: the caller's attr.
    let a = unsafe { &mut *attr };
    if !i.id.qp.is_null() {
        return err(WHAT, libc::EINVAL, "the id has a QP already");
    }
    // As librdmacm: a CQ the application did not give is made here, on its own
    // completion channel, with one entry per WR of its queue.
    let ctx = i.chan().ctx;
    // As librdmacm: the id's SRQ unless the attributes name one.
    if a.srq.is_null() {
        // SAFETY: the application's id (read through its pointer: it writes it too).
        a.srq = unsafe { (*id).srq };
    }
    let mut made = 0;
    if a.recv_cq.is_null() {
        a.recv_cq = own_cq(ctx, a.cap.max_recv_wr, id.cast());
        if a.recv_cq.is_null() {
            return -1;
        }
        made |= OWN_RECV_CQ;
    }
    if a.send_cq.is_null() {
        a.send_cq = own_cq(ctx, a.cap.max_send_wr, id.cast());
        if a.send_cq.is_null() {
            undo_own_cqs(a, made);
            return -1;
        }
        made |= OWN_SEND_CQ;
    }
    let pd = pd_for(i, pd);
    a.qp_type = sys::IBV_QPT_RC;
    let qp = if i.passive {
        create_qp_with(WHAT, pd, attr, |pd, qa| i.client.create_qp(pd, qa))
    } else {
        create_qp_with(WHAT, pd, attr, |pd, qa| pd.create_qp(qa))
    };
    if qp.is_null() {
        let e = last_errno();
        undo_own_cqs(a, made);
        set_errno(e);
        return -1;
    }
    i.own_cqs.store(made, Ordering::Relaxed);
    // SAFETY: the application's id; librdmacm fills these.
    unsafe {
        (*id).qp = qp;
        (*id).pd = pd;
        (*id).send_cq = a.send_cq;
        (*id).recv_cq = a.recv_cq;
        (*id).send_cq_channel = (*a.send_cq).channel;
        (*id).recv_cq_channel = (*a.recv_cq).channel;
    }
    0
}

/// `int rdma_create_qp_ex(struct rdma_cm_id *, struct ibv_qp_init_attr_ex *)`: as
/// `rdma_create_qp` with the PD of `attr->pd` (`IBV_QP_INIT_ATTR_PD`) or the id's; with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP posts through `ibv_wr_*` too (crate::qp_ex).
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_create_qp_ex(
    id: *mut sys::rdma_cm_id,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> c_int {
    const WHAT: &str = "rdma_create_qp_ex";
    if attr.is_null() {
        return err(WHAT, libc::EINVAL, "NULL attr");
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &mut *attr };
    let Some((mut init, ops)) = crate::qp_ex::check_attr_ex(WHAT, a, false) else {
        return -1;
    };
    let pd = if a.comp_mask & sys::IBV_QP_INIT_ATTR_PD != 0 {
        a.pd
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: the caller's id; `init` is ours.
    let r = unsafe { iwarp_rdma_create_qp(id, pd, &mut init) };
    (a.cap, a.send_cq, a.recv_cq, a.srq) = (init.cap, init.send_cq, init.recv_cq, init.srq);
    if r == 0 {
        if let Some(ops) = ops {
            // SAFETY: the application's id, its QP just made.
            crate::qp_ex::enable_wr_api(unsafe { (*id).qp }, ops, &init.cap);
        }
    }
    r
}

/// The PD a CM verb uses (as librdmacm): the caller's, else the id's (`id->pd`), else
/// the device's.
pub(crate) fn pd_for(i: &IwCmId, pd: *mut sys::ibv_pd) -> *mut sys::ibv_pd {
    if !pd.is_null() {
        return pd;
    }
    // SAFETY: the application's id (read through its pointer: the application writes it
    // too).
    let id_pd = unsafe { (*i.raw()).pd };
    if id_pd.is_null() {
        device_pd(i.chan().ctx)
    } else {
        id_pd
    }
}

/// A CQ of `wrs` entries (at least 1) on a new completion channel, for `rdma_create_qp`;
/// NULL and errno set on failure.
fn own_cq(ctx: *mut sys::ibv_context, wrs: u32, id: *mut c_void) -> *mut sys::ibv_cq {
    let ch = crate::cq::iwarp_ibv_create_comp_channel(ctx);
    if ch.is_null() {
        return std::ptr::null_mut();
    }
    let cqe = wrs.clamp(1, c_int::MAX as u32) as c_int;
    let cq = crate::cq::iwarp_ibv_create_cq(ctx, cqe, id, ch, 0);
    if cq.is_null() {
        let e = last_errno();
        crate::cq::iwarp_ibv_destroy_comp_channel(ch);
        set_errno(e);
    }
    cq
}

/// Destroys a CQ made by [`own_cq`] and its channel.
fn destroy_own_cq(cq: *mut sys::ibv_cq) {
    // SAFETY: a CQ made by `own_cq`, alive (its QP is gone).
    let ch = unsafe { (*cq).channel };
    crate::cq::iwarp_ibv_destroy_cq(cq);
    crate::cq::iwarp_ibv_destroy_comp_channel(ch);
}

/// Destroys the CQs `rdma_create_qp` made (`made`) and clears them from `a`.
fn undo_own_cqs(a: &mut sys::ibv_qp_init_attr, made: u8) {
    if made & OWN_RECV_CQ != 0 {
        destroy_own_cq(a.recv_cq);
        a.recv_cq = std::ptr::null_mut();
    }
    if made & OWN_SEND_CQ != 0 {
        destroy_own_cq(a.send_cq);
        a.send_cq = std::ptr::null_mut();
    }
}

/// `void rdma_destroy_qp(struct rdma_cm_id *)`: the QP, and the CQs `rdma_create_qp`
/// made for it.
#[no_mangle]
pub extern "C" fn iwarp_rdma_destroy_qp(id: *mut sys::rdma_cm_id) {
    let Ok(i) = id_of("rdma_destroy_qp", id) else {
        return;
    };
    let qp = i.id.qp;
    if !qp.is_null() {
        crate::qp::iwarp_ibv_destroy_qp(qp);
        // SAFETY: the application's id.
        unsafe { (*id).qp = std::ptr::null_mut() };
    }
    let made = i.own_cqs.swap(0, Ordering::Relaxed);
    // SAFETY: the application's id; the CQs in it are the ones made for it.
    unsafe {
        if made & OWN_RECV_CQ != 0 {
            destroy_own_cq((*id).recv_cq);
            (*id).recv_cq = std::ptr::null_mut();
            (*id).recv_cq_channel = std::ptr::null_mut();
        }
        if made & OWN_SEND_CQ != 0 {
            destroy_own_cq((*id).send_cq);
            (*id).send_cq = std::ptr::null_mut();
            (*id).send_cq_channel = std::ptr::null_mut();
        }
    }
}

/// The client library's connection parameters of the application's.
///
/// # Safety
///
/// `p` is NULL or a readable `rdma_conn_param` whose private data is readable.
unsafe fn conn_param(p: *const sys::rdma_conn_param) -> ConnParam {
    if p.is_null() {
        return ConnParam::default();
    }
    // SAFETY: the caller's contract.
    let p = unsafe { &*p };
    let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes (the caller's contract).
        unsafe {
            std::slice::from_raw_parts(p.private_data as *const u8, p.private_data_len.into())
        }
        .to_vec()
    };
    ConnParam {
        private_data,
        responder_resources: p.responder_resources.into(),
        initiator_depth: p.initiator_depth.into(),
    }
}

fn with_qp<T>(
    what: &str,
    i: &IwCmId,
    f: impl FnOnce(&iwarp_verbs::Qp) -> iwarp_verbs::Result<T>,
) -> c_int {
    let Some(q) = IwQp::from_ptr(i.id.qp) else {
        return err(what, libc::EINVAL, "no QP on the id (rdma_create_qp first)");
    };
    let qp = q.client.lock().unwrap_or_else(|e| e.into_inner());
    match f(&qp) {
        Ok(_) => 0,
        Err(e) => fail_neg(what, &e),
    }
}

/// `int rdma_connect(struct rdma_cm_id *, struct rdma_conn_param *)`: connects the id's QP
/// to the resolved address; `ESTABLISHED`, `REJECTED`, `UNREACHABLE` or `CONNECT_ERROR`
/// follows.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_connect(
    id: *mut sys::rdma_cm_id,
    param: *mut sys::rdma_conn_param,
) -> c_int {
    const WHAT: &str = "rdma_connect";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let Some(remote) = i.lock().1 else {
        return err(WHAT, libc::EINVAL, "address not resolved");
    };
    // SAFETY: the caller's parameters.
    let p = unsafe { conn_param(param) };
    match with_qp(WHAT, i, |qp| i.client.connect(qp, remote, &p)) {
        0 => complete(i),
        n => n,
    }
}

/// `int rdma_accept(struct rdma_cm_id *, struct rdma_conn_param *)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_accept(
    id: *mut sys::rdma_cm_id,
    param: *mut sys::rdma_conn_param,
) -> c_int {
    const WHAT: &str = "rdma_accept";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    // SAFETY: the caller's parameters.
    let p = unsafe { conn_param(param) };
    match with_qp(WHAT, i, |qp| i.client.accept(qp, &p)) {
        0 => complete(i),
        n => n,
    }
}

/// `int rdma_reject(struct rdma_cm_id *, const void *private_data, uint8_t len)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_reject(
    id: *mut sys::rdma_cm_id,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    const WHAT: &str = "rdma_reject";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let data = if pdata.is_null() || len == 0 {
        &[][..]
    } else {
        // SAFETY: len readable bytes.
        unsafe { std::slice::from_raw_parts(pdata as *const u8, len.into()) }
    };
    match i.client.reject(data) {
        Ok(()) => 0,
        Err(e) => fail_neg(WHAT, &e),
    }
}

/// `int rdma_disconnect(struct rdma_cm_id *)`: `DISCONNECTED` follows.
#[no_mangle]
pub extern "C" fn iwarp_rdma_disconnect(id: *mut sys::rdma_cm_id) -> c_int {
    const WHAT: &str = "rdma_disconnect";
    let i = match id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    match i.client.disconnect() {
        Ok(()) => complete(i),
        Err(e) => fail_neg(WHAT, &e),
    }
}

/// `__be16 rdma_get_src_port(struct rdma_cm_id *)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_get_src_port(id: *mut sys::rdma_cm_id) -> u16 {
    id_of("rdma_get_src_port", id)
        .ok()
        .and_then(|i| i.lock().0)
        .map_or(0, |a| a.port().to_be())
}

/// `__be16 rdma_get_dst_port(struct rdma_cm_id *)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_get_dst_port(id: *mut sys::rdma_cm_id) -> u16 {
    id_of("rdma_get_dst_port", id)
        .ok()
        .and_then(|i| i.lock().1)
        .map_or(0, |a| a.port().to_be())
}

/// `int rdma_set_option(id, int level, int optname, void *optval, size_t optlen)`: the
/// id options (TOS, REUSEADDR, AFONLY, ACK_TIMEOUT) are accepted and have no effect on
/// the daemon's TCP; IB path options are refused.
#[no_mangle]
pub extern "C" fn iwarp_rdma_set_option(
    id: *mut sys::rdma_cm_id,
    level: c_int,
    _optname: c_int,
    _optval: *mut c_void,
    _optlen: usize,
) -> c_int {
    const WHAT: &str = "rdma_set_option";
    if let Err(n) = id_of(WHAT, id) {
        return n;
    }
    if level == sys::RDMA_OPTION_ID as c_int {
        0
    } else {
        err(WHAT, libc::ENOSYS, "IB options")
    }
}

/// The calling thread's `errno`.
pub(crate) fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
