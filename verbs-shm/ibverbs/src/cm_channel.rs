//! librdmacm's event channels (`rdma_create_event_channel`, `rdma_get_cm_event`,
//! `rdma_ack_cm_event`), implemented here and reached through `librdmacm.so.1`
//! (verbs-shm/rdmacm, entry points jumping to `iwarp_rdma_*`), so that one copy of the
//! state serves both libraries.
//!
//! A channel belongs to one device (the first listed, or `IWARP_RDMA_DEVICE`): its
//! events are the client library's CM events plus the ones this library makes itself
//! (address and route resolution need no daemon round trip). `rdma_event_channel::fd`
//! is an epoll fd over the client channel's fd and an eventfd of the made events, so it
//! is readable exactly while `rdma_get_cm_event` has something to return.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};

use iwarp_verbs::{CmEvent, CmEventChannel, ConnectError, Error};

use crate::cm_id::{sockaddr_in, IwCmId};
use crate::context::IwContext;
use crate::debug::debug;
use crate::errno::{fail, set_errno};
use crate::object::{free, from_raw, into_raw, Wrapped};
use crate::sys;

/// Events this library made and not yet returned, at most (per channel).
const MAX_MADE_EVENTS: usize = 4096;

/// CM ids per channel, at most.
pub(crate) const MAX_IDS: usize = 65536;

/// The devices librdmacm uses: every listed device, opened once for the life of the
/// process (as librdmacm does); `id->verbs` points to them.
static CM_DEVICES: OnceLock<Vec<usize>> = OnceLock::new();

/// The contexts of the CM devices (opening them on first use).
pub(crate) fn cm_devices() -> &'static [usize] {
    CM_DEVICES.get_or_init(|| {
        let mut n = 0;
        // SAFETY: our own device list functions.
        let list = unsafe { crate::device::iwarp_ibv_get_device_list(&mut n) };
        let mut v = Vec::new();
        if list.is_null() {
            return v;
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n entries of the list.
            let dev = unsafe { *list.add(i) };
            let ctx = crate::context::iwarp_ibv_open_device(dev);
            if !ctx.is_null() {
                v.push(ctx as usize);
            }
        }
        // SAFETY: the list from iwarp_ibv_get_device_list.
        unsafe { crate::device::iwarp_ibv_free_device_list(list) };
        v
    })
}

/// The PD of each CM device (allocated on first use, kept for the life of the process
/// as librdmacm's): `id->pd` once an id has its device, and what `rdma_create_qp` uses
/// when given no PD.
static DEVICE_PDS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// The PD of device `ctx` (NULL with errno set if it cannot be allocated).
pub(crate) fn device_pd(ctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    let mut pds = DEVICE_PDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, pd)) = pds.iter().find(|(c, _)| *c == ctx as usize) {
        return *pd as *mut sys::ibv_pd;
    }
    let pd = crate::pd::iwarp_ibv_alloc_pd(ctx);
    // Bounded: one entry per CM device (`cm_devices`).
    if !pd.is_null() && pds.len() < cm_devices().len() {
        pds.push((ctx as usize, pd as usize));
    }
    pd
}

/// The device of a new channel: `IWARP_RDMA_DEVICE` by name, else the first.
fn channel_device() -> Option<*mut sys::ibv_context> {
    let want = std::env::var("IWARP_RDMA_DEVICE")
        .ok()
        .filter(|s| !s.is_empty());
    cm_devices()
        .iter()
        .map(|c| *c as *mut sys::ibv_context)
        .find(|c| match (&want, IwContext::from_ptr(*c)) {
            (Some(w), Some(ctx)) => crate::device::device_name_for(&ctx.device.socket) == *w,
            (None, Some(_)) => true,
            _ => false,
        })
}

/// An event this library made (address or route resolved).
pub(crate) struct MadeEvent {
    pub(crate) id: usize,
    pub(crate) event: u32,
    pub(crate) status: c_int,
}

#[derive(Default)]
pub(crate) struct ChanState {
    made: VecDeque<MadeEvent>,
    /// The CM ids of the channel: the daemon's handle and the `IwCmId` address.
    pub(crate) ids: Vec<(u32, usize)>,
}

/// An event channel.
#[repr(C)]
pub(crate) struct IwEventChannel {
    pub(crate) ch: sys::rdma_event_channel,
    magic: AtomicU64,
    pub(crate) ctx: *mut sys::ibv_context,
    pub(crate) client: CmEventChannel,
    epoll: OwnedFd,
    made_fd: OwnedFd,
    pub(crate) state: Mutex<ChanState>,
}

// SAFETY: the raw context pointer is to a context that lives for the process
// (CM_DEVICES); everything else is Send/Sync or behind the mutex.
unsafe impl Send for IwEventChannel {}
// SAFETY: as above.
unsafe impl Sync for IwEventChannel {}

impl Wrapped for IwEventChannel {
    type Raw = sys::rdma_event_channel;
    const MAGIC: u64 = 0x6977_6172_705f_6563;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl IwEventChannel {
    /// The application's channel.
    pub(crate) fn raw(&self) -> *mut sys::rdma_event_channel {
        &self.ch as *const sys::rdma_event_channel as *mut sys::rdma_event_channel
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, ChanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an event this library made; false if the queue is full.
    pub(crate) fn push_made(&self, e: MadeEvent) -> bool {
        let mut s = self.lock();
        if s.made.len() >= MAX_MADE_EVENTS {
            return false;
        }
        s.made.push_back(e);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(self.made_fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        true
    }

    /// Resets the made-events eventfd (the queue just became empty).
    fn reset_made_fd(&self) {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from our non-blocking eventfd resets it.
        unsafe { libc::read(self.made_fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// Takes the made events of id `id` (being migrated to another channel), in order.
    pub(crate) fn take_made(&self, id: usize) -> Vec<MadeEvent> {
        let mut s = self.lock();
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(s.made.len());
        for m in s.made.drain(..) {
            if m.id == id {
                taken.push(m);
            } else {
                kept.push_back(m);
            }
        }
        s.made = kept;
        if s.made.is_empty() {
            self.reset_made_fd();
        }
        taken
    }

    fn pop_made(&self) -> Option<MadeEvent> {
        let mut s = self.lock();
        let e = s.made.pop_front();
        if e.is_some() && s.made.is_empty() {
            self.reset_made_fd();
        }
        e
    }

    pub(crate) fn find_id(&self, handle: u32) -> Option<&'static IwCmId> {
        let p = self
            .lock()
            .ids
            .iter()
            .find(|(h, _)| *h == handle)
            .map(|(_, p)| *p)?;
        // SAFETY: registered ids are live (destroy unregisters first).
        Some(unsafe { &*(p as *const IwCmId) })
    }
}

/// `struct rdma_event_channel *rdma_create_event_channel(void)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_create_event_channel() -> *mut sys::rdma_event_channel {
    const WHAT: &str = "rdma_create_event_channel";
    let Some(ctx) = channel_device() else {
        debug!("{WHAT}: no iwarpd device");
        set_errno(libc::ENODEV);
        return std::ptr::null_mut();
    };
    let Some(c) = IwContext::from_ptr(ctx) else {
        set_errno(libc::ENODEV);
        return std::ptr::null_mut();
    };
    let client = match c.client.create_cm_event_channel() {
        Ok(ch) => ch,
        Err(e) => {
            fail(WHAT, &e);
            return std::ptr::null_mut();
        }
    };
    // SAFETY: an eventfd we own from here (non-blocking: drained without waiting).
    let made = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if made < 0 {
        set_errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE),
        );
        return std::ptr::null_mut();
    }
    // SAFETY: fresh descriptor.
    let made_fd = unsafe { OwnedFd::from_raw_fd(made) };
    let client_fd = std::os::fd::AsFd::as_fd(&client).as_raw_fd();
    let epoll = match crate::fdwrap::epoll_over(&[client_fd, made_fd.as_raw_fd()]) {
        Ok(e) => e,
        Err(n) => {
            set_errno(n);
            return std::ptr::null_mut();
        }
    };
    let fd = epoll.as_raw_fd();
    into_raw(IwEventChannel {
        ch: sys::rdma_event_channel { fd },
        magic: AtomicU64::new(IwEventChannel::MAGIC),
        ctx,
        client,
        epoll,
        made_fd,
        state: Mutex::new(ChanState::default()),
    })
}

/// `void rdma_destroy_event_channel(struct rdma_event_channel *)`. Its ids must be
/// destroyed first (as librdmacm requires); a channel with ids is left alone.
#[no_mangle]
pub extern "C" fn iwarp_rdma_destroy_event_channel(ch: *mut sys::rdma_event_channel) {
    let Some(c) = from_raw::<IwEventChannel>(ch) else {
        return;
    };
    if !c.lock().ids.is_empty() {
        debug!("rdma_destroy_event_channel: CM ids remain; the channel stays");
        return;
    }
    // SAFETY: from into_raw; given up by the application.
    unsafe { free(c) };
}

/// A CM event handed to the application, with the private data it points to.
#[repr(C)]
pub(crate) struct IwCmEvent {
    ev: sys::rdma_cm_event,
    magic: AtomicU64,
    private_data: Vec<u8>,
}

impl Wrapped for IwCmEvent {
    type Raw = sys::rdma_cm_event;
    const MAGIC: u64 = 0x6977_6172_705f_6576;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

fn event(
    id: &IwCmId,
    listen_id: *mut sys::rdma_cm_id,
    kind: u32,
    status: c_int,
    private_data: Vec<u8>,
    ird: u32,
    ord: u32,
) -> *mut sys::rdma_cm_event {
    let mut e = Box::new(IwCmEvent {
        ev: sys::rdma_cm_event {
            id: id.raw(),
            listen_id,
            event: kind,
            status,
            ..Default::default()
        },
        magic: AtomicU64::new(IwCmEvent::MAGIC),
        private_data,
    });
    let conn = sys::rdma_conn_param {
        private_data: if e.private_data.is_empty() {
            std::ptr::null()
        } else {
            e.private_data.as_ptr().cast()
        },
        private_data_len: e.private_data.len().min(255) as u8,
        responder_resources: ird.min(255) as u8,
        initiator_depth: ord.min(255) as u8,
        ..Default::default()
    };
    e.ev.param.conn = conn;
    // `id->event` is left alone: librdmacm sets it for synchronous ids only (cm_sync.rs).
    Box::into_raw(e) as *mut sys::rdma_cm_event
}

/// `int rdma_get_cm_event(channel, struct rdma_cm_event **event)`: the next event,
/// waiting unless the application made `channel->fd` non-blocking (then -1, `EAGAIN`).
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_get_cm_event(
    ch: *mut sys::rdma_event_channel,
    out: *mut *mut sys::rdma_cm_event,
) -> c_int {
    const WHAT: &str = "rdma_get_cm_event";
    let Some(c) = from_raw::<IwEventChannel>(ch) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if out.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    loop {
        let ev = if let Some(m) = c.pop_made() {
            // SAFETY: made events name live ids (destroy drops the id's made events).
            let id = unsafe { &*(m.id as *const IwCmId) };
            Some(event(
                id,
                std::ptr::null_mut(),
                m.event,
                m.status,
                Vec::new(),
                0,
                0,
            ))
        } else {
            match c.client.try_get_event() {
                Ok(info) => convert(c, info),
                Err(Error::WouldBlock) => {
                    if crate::fdwrap::is_nonblocking(c.ch.fd) {
                        set_errno(libc::EAGAIN);
                        return -1;
                    }
                    crate::fdwrap::wait_readable(c.epoll.as_raw_fd());
                    None
                }
                Err(e) => {
                    fail(WHAT, &e);
                    return -1;
                }
            }
        };
        if let Some(p) = ev {
            // SAFETY: the caller's output pointer.
            unsafe { *out = p };
            return 0;
        }
    }
}

/// The application's event of a client library event (None: for an id gone meanwhile).
fn convert(
    c: &'static IwEventChannel,
    info: iwarp_verbs::CmEventInfo,
) -> Option<*mut sys::rdma_cm_event> {
    let id = c.find_id(info.id.0);
    let Some(id) = id else {
        debug!(
            "rdma_get_cm_event: event {:?} for a destroyed id dropped",
            info.event
        );
        return None;
    };
    Some(match info.event {
        CmEvent::ConnectRequest {
            remote,
            local,
            private_data,
            ird,
            ord,
            ..
        } => {
            let request = info.request?;
            let new = IwCmId::for_request(c, id, request, sockaddr_in(local), sockaddr_in(remote))?;
            // A synchronous listener's requests are synchronous, each on a channel of
            // its own (as librdmacm's); one that cannot be is dropped (reset).
            if id.is_sync() && crate::cm_sync::make_sync(new).is_err() {
                crate::cm_id::iwarp_rdma_destroy_id(new.raw());
                return None;
            }
            event(
                new,
                id.raw(),
                sys::RDMA_CM_EVENT_CONNECT_REQUEST,
                0,
                private_data,
                ird,
                ord,
            )
        }
        CmEvent::Established { private_data, .. } => event(
            id,
            std::ptr::null_mut(),
            sys::RDMA_CM_EVENT_ESTABLISHED,
            0,
            private_data,
            0,
            0,
        ),
        CmEvent::Rejected { private_data } => event(
            id,
            std::ptr::null_mut(),
            sys::RDMA_CM_EVENT_REJECTED,
            -libc::ECONNREFUSED,
            private_data,
            0,
            0,
        ),
        CmEvent::ConnectError(e) => {
            let (kind, status) = match e {
                ConnectError::Refused => (sys::RDMA_CM_EVENT_REJECTED, -libc::ECONNREFUSED),
                ConnectError::Timeout => (sys::RDMA_CM_EVENT_UNREACHABLE, -libc::ETIMEDOUT),
                _ => (sys::RDMA_CM_EVENT_CONNECT_ERROR, -libc::ECONNRESET),
            };
            event(id, std::ptr::null_mut(), kind, status, Vec::new(), 0, 0)
        }
        CmEvent::Disconnected => event(
            id,
            std::ptr::null_mut(),
            sys::RDMA_CM_EVENT_DISCONNECTED,
            0,
            Vec::new(),
            0,
            0,
        ),
        CmEvent::DeviceRemoval => event(
            id,
            std::ptr::null_mut(),
            sys::RDMA_CM_EVENT_DEVICE_REMOVAL,
            0,
            Vec::new(),
            0,
            0,
        ),
    })
}

/// `int rdma_ack_cm_event(struct rdma_cm_event *event)`: frees it.
#[no_mangle]
pub extern "C" fn iwarp_rdma_ack_cm_event(ev: *mut sys::rdma_cm_event) -> c_int {
    let Some(e) = from_raw::<IwCmEvent>(ev) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    // SAFETY: from Box::into_raw in `event`; given up by the application.
    unsafe { free(e) };
    0
}

/// Drops the made events of an id being destroyed.
pub(crate) fn forget_id(c: &IwEventChannel, id: usize, handle: u32) {
    let mut s = c.lock();
    s.made.retain(|m| m.id != id);
    s.ids.retain(|(h, _)| *h != handle);
}

/// `const char *rdma_event_str(enum rdma_cm_event_type)`.
#[no_mangle]
pub extern "C" fn iwarp_rdma_event_str(e: c_int) -> *const libc::c_char {
    const T: &[&std::ffi::CStr] = &[
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    ];
    usize::try_from(e)
        .ok()
        .and_then(|i| T.get(i))
        .map_or(c"UNKNOWN EVENT".as_ptr(), |s| s.as_ptr())
}

/// `struct ibv_context **rdma_get_devices(int *num_devices)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_get_devices(num: *mut c_int) -> *mut *mut sys::ibv_context {
    let devs = cm_devices();
    // SAFETY: calloc of len+1 pointers, freed by rdma_free_devices.
    let list = unsafe { libc::calloc(devs.len() + 1, std::mem::size_of::<usize>()) }
        as *mut *mut sys::ibv_context;
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return list;
    }
    for (i, d) in devs.iter().enumerate() {
        // SAFETY: inside the allocation.
        unsafe { *list.add(i) = *d as *mut sys::ibv_context };
    }
    if !num.is_null() {
        // SAFETY: the caller's int.
        unsafe { *num = devs.len() as c_int };
    }
    list
}

/// `void rdma_free_devices(struct ibv_context **list)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_free_devices(list: *mut *mut sys::ibv_context) {
    // SAFETY: from rdma_get_devices (calloc) or NULL.
    unsafe { libc::free(list.cast()) };
}
