//! The control connection: requests matched to replies by sequence number, a reader
//! thread that receives replies and events, and the daemon-gone state.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iwarp_shm_socket::{
    AsyncEventMsg, Channel, ClientMsg, CmEvent, CmIdHandle, ErrorReply, Event, RecvError, Request,
    Response, ServerMsg,
};

use iwarp_shm_ring::{AreaView, DAEMON_GONE};

use crate::notify::{EventFd, EventQueue};
use crate::{Error, Result};

/// A raw CM event: the CM id it is for, and what happened.
pub(crate) type CmRaw = (CmIdHandle, CmEvent);

type ReplySlot = Option<(std::result::Result<Response, ErrorReply>, Vec<OwnedFd>)>;

/// Most CM ids routed at once (a bound on the routing table).
const MAX_CM_ROUTES: usize = 1 << 16;

/// What the reader thread and the callers share.
pub(crate) struct ConnShared {
    gone: AtomicBool,
    replies: Mutex<HashMap<u64, ReplySlot>>,
    replied: Condvar,
    /// Asynchronous events.
    pub(crate) async_events: EventQueue<AsyncEventMsg>,
    /// CM id -> the queue of its event channel.
    cm_routes: Mutex<HashMap<CmIdHandle, Arc<EventQueue<CmRaw>>>>,
    /// Every CM event channel and completion channel, to wake when the daemon goes.
    cm_queues: Mutex<Vec<Weak<EventQueue<CmRaw>>>>,
    comp_fds: Mutex<Vec<Weak<EventFd>>>,
    /// Datagrams that were not valid messages, events dropped for lack of a route.
    pub(crate) ignored: AtomicU64,
    /// The ring area, whose `daemon_state` is set to gone locally when the socket closes.
    area: std::sync::OnceLock<AreaView>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ConnShared {
    fn new() -> Result<ConnShared> {
        Ok(ConnShared {
            gone: AtomicBool::new(false),
            replies: Mutex::new(HashMap::new()),
            replied: Condvar::new(),
            async_events: EventQueue::new()?,
            cm_routes: Mutex::new(HashMap::new()),
            cm_queues: Mutex::new(Vec::new()),
            comp_fds: Mutex::new(Vec::new()),
            ignored: AtomicU64::new(0),
            area: std::sync::OnceLock::new(),
        })
    }

    /// True once the daemon is gone (socket closed or `Shutdown`).
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Marks the daemon gone and wakes everything that could wait for it.
    pub(crate) fn mark_gone(&self) {
        if self.gone.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(a) = self.area.get() {
            a.set_daemon_state(DAEMON_GONE);
        }
        {
            let _g = lock(&self.replies);
            self.replied.notify_all();
        }
        self.async_events.close();
        for q in lock(&self.cm_queues).iter().filter_map(Weak::upgrade) {
            q.close();
        }
        for fd in lock(&self.comp_fds).iter().filter_map(Weak::upgrade) {
            fd.signal();
        }
    }

    /// The ring area, once mapped.
    pub(crate) fn set_area(&self, area: AreaView) {
        let _ = self.area.set(area);
        if self.is_gone() {
            if let Some(a) = self.area.get() {
                a.set_daemon_state(DAEMON_GONE);
            }
        }
    }

    /// Registers a CM event channel's queue (closed when the daemon goes).
    pub(crate) fn add_cm_queue(&self, q: &Arc<EventQueue<CmRaw>>) {
        let mut v = lock(&self.cm_queues);
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(q));
        if self.is_gone() {
            q.close();
        }
    }

    /// Registers a completion channel's eventfd (signalled when the daemon goes).
    pub(crate) fn add_comp_fd(&self, fd: &Arc<EventFd>) {
        let mut v = lock(&self.comp_fds);
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(fd));
        if self.is_gone() {
            fd.signal();
        }
    }

    /// Events for CM id `id` go to `q`.
    pub(crate) fn route_cm(&self, id: CmIdHandle, q: &Arc<EventQueue<CmRaw>>) -> Result<()> {
        let mut r = lock(&self.cm_routes);
        if r.len() >= MAX_CM_ROUTES && !r.contains_key(&id) {
            return Err(Error::invalid("too many CM ids"));
        }
        r.insert(id, q.clone());
        Ok(())
    }

    /// CM id `id` moves to channel `to` (`rdma_migrate_id`): its later events go there,
    /// and the ones queued for it on `from` and not yet read move there, in order.
    pub(crate) fn reroute_cm(
        &self,
        id: CmIdHandle,
        from: &EventQueue<CmRaw>,
        to: &Arc<EventQueue<CmRaw>>,
    ) -> Result<()> {
        let mut r = lock(&self.cm_routes);
        let Some(route) = r.get_mut(&id) else {
            return Err(Error::invalid("CM id not known"));
        };
        *route = to.clone();
        for e in from.take_where(|(h, _)| *h == id) {
            if !to.push(e) {
                self.ignored.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// CM id `id` is destroyed: its events are dropped from now on.
    pub(crate) fn unroute_cm(&self, id: CmIdHandle) {
        lock(&self.cm_routes).remove(&id);
    }

    fn dispatch(&self, ev: Event) {
        match ev {
            Event::Cm { id, event } => {
                // Pushed under the routes lock: a migration (`reroute_cm`) sees every
                // event of the id either queued on the old channel or routed to the new.
                let mut r = lock(&self.cm_routes);
                let q = r.get(&id).cloned();
                // A request's new id reports to its listener's channel.
                if let (Some(q), CmEvent::ConnectRequest { id: new, .. }) = (&q, &event) {
                    if r.len() < MAX_CM_ROUTES {
                        r.insert(*new, q.clone());
                    }
                }
                let queued = q.is_some_and(|q| q.push((id, event)));
                drop(r);
                if !queued {
                    self.ignored.fetch_add(1, Ordering::Relaxed);
                }
            }
            Event::Async(a) => {
                if !self.async_events.push(a) {
                    self.ignored.fetch_add(1, Ordering::Relaxed);
                }
            }
            Event::Shutdown => self.mark_gone(),
        }
    }

    fn deliver(
        &self,
        seq: u64,
        result: std::result::Result<Response, ErrorReply>,
        fds: Vec<OwnedFd>,
    ) {
        let mut r = lock(&self.replies);
        match r.get_mut(&seq) {
            Some(slot @ None) => {
                *slot = Some((result, fds));
                self.replied.notify_all();
            }
            // A reply nobody waits for (timed out) or a duplicate: its fds close here.
            _ => {
                self.ignored.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The control connection of a context.
pub(crate) struct Conn {
    channel: Arc<Channel>,
    pub(crate) shared: Arc<ConnShared>,
    reader: Mutex<Option<JoinHandle<()>>>,
    next_seq: AtomicU64,
    timeout_ms: AtomicU64,
}

/// Sequence number of `Hello`; requests count from 1.
const HELLO_SEQ: u64 = 0;

impl Conn {
    /// Says `Hello` on `channel` (waiting at most `timeout` for the answer), then starts
    /// the reader thread. Returns the connection and the `Welcome` reply with its fds.
    pub(crate) fn handshake(
        channel: Channel,
        name: &str,
        timeout: Duration,
    ) -> Result<(Conn, Response, Vec<OwnedFd>)> {
        channel.set_recv_timeout(Some(timeout))?;
        let hello = ClientMsg {
            seq: HELLO_SEQ,
            request: Request::Hello {
                version: iwarp_shm_socket::PROTOCOL_VERSION,
                name: name.chars().take(64).collect(),
            },
        };
        // A daemon that refuses the connection at once (policy, full) answers before it
        // reads anything and closes: the send may then fail, but the answer waits in the
        // socket; it is the better error.
        let sent = channel.send(&hello, &[]).map_err(send_error);
        let deadline = Instant::now() + timeout;
        let mut resets = 0;
        let (result, fds) = loop {
            match channel.recv::<ServerMsg>() {
                Ok((
                    ServerMsg::Reply {
                        seq: HELLO_SEQ,
                        result,
                    },
                    fds,
                )) => break (result, fds),
                // Nothing else is expected before the Welcome; skip it.
                Ok(_) | Err(RecvError::Frame(_)) | Err(RecvError::Truncated) => {}
                Err(RecvError::WouldBlock) => return Err(sent.err().unwrap_or(Error::Timeout)),
                Err(RecvError::Closed) => return Err(sent.err().unwrap_or(Error::DaemonGone)),
                // The daemon answered and closed before it read our Hello: the first
                // receive reports the reset, the next one the answer (or end of file).
                Err(RecvError::Io(e))
                    if e.kind() == std::io::ErrorKind::ConnectionReset && resets == 0 =>
                {
                    resets += 1;
                }
                Err(RecvError::Io(e)) => return Err(sent.err().unwrap_or(Error::Io(e))),
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout);
            }
        };
        let welcome = result.map_err(Error::from)?;
        sent?;
        channel.set_recv_timeout(None)?;
        let channel = Arc::new(channel);
        let shared = Arc::new(ConnShared::new()?);
        let reader = {
            let (channel, shared) = (channel.clone(), shared.clone());
            std::thread::Builder::new()
                .name("iwarp-verbs-reader".into())
                .spawn(move || read_loop(&channel, &shared))?
        };
        let conn = Conn {
            channel,
            shared,
            reader: Mutex::new(Some(reader)),
            next_seq: AtomicU64::new(HELLO_SEQ + 1),
            timeout_ms: AtomicU64::new(timeout.as_millis().min(u64::MAX as u128) as u64),
        };
        Ok((conn, welcome, fds))
    }

    /// The reply timeout.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets the reply timeout.
    pub(crate) fn set_timeout(&self, t: Duration) {
        self.timeout_ms.store(
            t.as_millis().clamp(1, u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// Sends `request` with `fds` and waits for its reply.
    pub(crate) fn call(
        &self,
        request: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(Response, Vec<OwnedFd>)> {
        self.call_timeout(request, fds, self.timeout())
    }

    /// [`Conn::call`] with an explicit timeout.
    pub(crate) fn call_timeout(
        &self,
        request: Request,
        fds: &[BorrowedFd<'_>],
        timeout: Duration,
    ) -> Result<(Response, Vec<OwnedFd>)> {
        if self.shared.is_gone() {
            return Err(Error::DaemonGone);
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        lock(&self.shared.replies).insert(seq, None);
        if let Err(e) = self.channel.send(&ClientMsg { seq, request }, fds) {
            lock(&self.shared.replies).remove(&seq);
            let e = if self.shared.is_gone() {
                Error::DaemonGone
            } else {
                send_error(e)
            };
            if matches!(e, Error::DaemonGone) {
                // The socket broke before the reader thread saw it: from this answer on,
                // every call, post and wait agrees that the daemon is gone.
                self.shared.mark_gone();
            }
            return Err(e);
        }
        let deadline = Instant::now() + timeout;
        let mut r = lock(&self.shared.replies);
        loop {
            if let Some(Some(_)) = r.get(&seq) {
                let Some(Some((result, fds))) = r.remove(&seq) else {
                    unreachable!("checked just above under the same lock")
                };
                return Ok((result?, fds));
            }
            if self.shared.is_gone() {
                r.remove(&seq);
                return Err(Error::DaemonGone);
            }
            let now = Instant::now();
            if now >= deadline {
                r.remove(&seq);
                return Err(Error::Timeout);
            }
            r = self
                .shared
                .replied
                .wait_timeout(r, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.shared.is_gone() {
            // Orderly goodbye: the daemon frees what is left of this client.
            let t = self.timeout().min(Duration::from_secs(2));
            let _ = self.call_timeout(Request::Bye, &[], t);
        }
        self.channel.shutdown();
        if let Some(t) = lock(&self.reader).take() {
            let _ = t.join();
        }
        self.shared.mark_gone();
    }
}

fn send_error(e: std::io::Error) -> Error {
    use std::io::ErrorKind::*;
    match e.kind() {
        BrokenPipe | ConnectionReset | NotConnected | ConnectionAborted => Error::DaemonGone,
        _ => Error::Io(e),
    }
}

/// The reader thread: replies to their callers, events to their queues, until the socket
/// closes.
fn read_loop(channel: &Channel, shared: &ConnShared) {
    loop {
        match channel.recv::<ServerMsg>() {
            Ok((ServerMsg::Reply { seq, result }, fds)) => shared.deliver(seq, result, fds),
            Ok((ServerMsg::Event(ev), _fds)) => shared.dispatch(ev),
            Err(RecvError::Frame(_)) | Err(RecvError::Truncated) => {
                shared.ignored.fetch_add(1, Ordering::Relaxed);
            }
            Err(RecvError::WouldBlock) => {}
            Err(RecvError::Io(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(RecvError::Closed) | Err(RecvError::Io(_)) => break,
        }
    }
    shared.mark_gone();
}
