//! [`Context`]: a connection to iwarpd (`ibv_open_device` + `ibv_get_async_event`).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iwarp_shm_mem::SharedMapping;
use iwarp_shm_ring::{AreaView, DAEMON_RUNNING};
use iwarp_shm_socket::{
    default_socket_path, AsyncEventMsg, Channel, DeviceAttr, PortAttr, Request, Response, Welcome,
};

use crate::conn::Conn;
use crate::{Error, Result};

/// Environment variable that overrides the socket path of [`Context::open`].
pub const SOCKET_ENV: &str = "IWARP_VERBS_SOCKET";

/// How long a verb waits for the daemon's answer unless [`Context::set_timeout`] says
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest ring area this library maps (the daemon's is 64 MiB).
const MAX_RING_AREA_BYTES: u64 = 1 << 32;

/// What every object of a context shares: the connection and the ring area. Objects
/// hold an `Arc` of it, so the connection outlives every object.
pub(crate) struct CtxInner {
    pub(crate) conn: Conn,
    pub(crate) area: AreaView,
    pub(crate) welcome: Welcome,
}

impl CtxInner {
    /// `Err(DaemonGone)` once the daemon is gone (socket closed, `Shutdown`, or
    /// `daemon_state` in the ring area no longer running). Two loads: the post and poll
    /// fast path calls it.
    #[inline]
    pub(crate) fn check_alive(&self) -> Result<()> {
        if self.conn.shared.is_gone() {
            return Err(Error::DaemonGone);
        }
        if self.area.daemon_state() != DAEMON_RUNNING {
            self.conn.shared.mark_gone();
            return Err(Error::DaemonGone);
        }
        Ok(())
    }

    /// Sends a request without descriptors; the reply's descriptors (none expected) close.
    pub(crate) fn call(&self, request: Request) -> Result<Response> {
        self.check_alive()?;
        Ok(self.conn.call(request, &[])?.0)
    }

    /// Sends a request with descriptors and returns the reply and its descriptors.
    pub(crate) fn call_fds(
        &self,
        request: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(Response, Vec<OwnedFd>)> {
        self.check_alive()?;
        self.conn.call(request, fds)
    }
}

/// `Error::Protocol` for a reply of the wrong kind.
pub(crate) fn unexpected(what: &str, r: &Response) -> Error {
    Error::protocol(format!("unexpected reply to {what}: {r:?}"))
}

/// A connection to one iwarpd: the verbs device of this library. Cheap to clone (all
/// clones are the same connection). Objects created from it keep it alive; the
/// connection says goodbye (`Bye`) when the last of them is gone.
///
/// A reader thread receives the daemon's replies and events. When the daemon goes away
/// (its socket closes or it announces shutdown) every later call, post and poll returns
/// [`Error::DaemonGone`], every waiting call wakes with it, and every event fd becomes
/// readable.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<CtxInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("client_id", &self.inner.welcome.client_id)
            .field("cores", &self.inner.area.cores())
            .finish()
    }
}

impl Context {
    /// Connects to daemon `daemon_name` at `/run/iwarpd/<daemon_name>.verbs`, or at the
    /// path in the environment variable `IWARP_VERBS_SOCKET` if it is set.
    pub fn open(daemon_name: &str) -> Result<Context> {
        let path = match std::env::var_os(SOCKET_ENV) {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => default_socket_path(daemon_name),
        };
        Context::open_path(&path)
    }

    /// Connects to the verbs socket at `path`.
    pub fn open_path(path: &Path) -> Result<Context> {
        let channel = Channel::connect(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => Error::Io(
                std::io::Error::new(e.kind(), format!("no iwarpd at {}: {e}", path.display())),
            ),
            _ => Error::Io(e),
        })?;
        Context::from_channel(channel)
    }

    /// Speaks the protocol on an already connected channel (a socketpair to a daemon in
    /// the same process, tests): `Hello`, `Welcome`, maps and checks the ring area.
    pub fn from_channel(channel: Channel) -> Result<Context> {
        let name = std::env::args()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "iwarp-verbs".into());
        let (conn, reply, fds) = Conn::handshake(channel, &name, DEFAULT_TIMEOUT)?;
        let welcome = match reply {
            Response::Welcome(w) => w,
            other => return Err(unexpected("Hello", &other)),
        };
        let fd = fds
            .into_iter()
            .next()
            .ok_or_else(|| Error::protocol("Welcome without the ring area fd"))?;
        let len = welcome.ring_area_len;
        if len == 0 || len > MAX_RING_AREA_BYTES {
            return Err(Error::protocol(format!("ring area of {len} bytes")));
        }
        let map = SharedMapping::from_fd(fd, len as usize)
            .map_err(|e| Error::protocol(format!("ring area memfd: {e}")))?;
        let area = AreaView::attach(map.region())
            .map_err(|e| Error::protocol(format!("ring area: {e}")))?;
        if area.daemon_state() != DAEMON_RUNNING {
            return Err(Error::DaemonGone);
        }
        conn.shared.set_area(area.clone());
        Ok(Context {
            inner: Arc::new(CtxInner {
                conn,
                area,
                welcome,
            }),
        })
    }

    /// Device attributes as the daemon reports them now (`ibv_query_device`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        match self.inner.call(Request::QueryDevice)? {
            Response::Device(d) => Ok(d),
            r => Err(unexpected("QueryDevice", &r)),
        }
    }

    /// Attributes of port `port` (0-based) as the daemon reports them now
    /// (`ibv_query_port`).
    pub fn query_port(&self, port: u32) -> Result<PortAttr> {
        match self.inner.call(Request::QueryPort(port))? {
            Response::Port(p) => Ok(p),
            r => Err(unexpected("QueryPort", &r)),
        }
    }

    /// Device attributes as given in the `Welcome` (no round trip).
    pub fn device_attr(&self) -> &DeviceAttr {
        &self.inner.welcome.device
    }

    /// The daemon's dataplane counters, per core and summed (`core: None`): what
    /// `iwarpctl counters` shows. An administration request: a client that is not root
    /// (or in `[control] admin_users`) gets the daemon's `NotAdmin` error.
    pub fn counters(&self) -> Result<Vec<iwarp_shm_socket::CounterSet>> {
        match self.inner.call(iwarp_shm_socket::Request::Admin(
            iwarp_shm_socket::AdminRequest::Counters,
        ))? {
            iwarp_shm_socket::Response::Admin(iwarp_shm_socket::AdminResponse::Counters(c)) => {
                Ok(c)
            }
            r => Err(unexpected("Counters", &r)),
        }
    }

    /// One counter of the daemon by name, summed over its cores (see
    /// [`Context::counters`]); None when the daemon has no counter of that name.
    pub fn counter(&self, name: &str) -> Result<Option<u64>> {
        let sets = self.counters()?;
        let of = |core_none: bool| {
            sets.iter()
                .filter(|s| s.core.is_none() == core_none)
                .flat_map(|s| s.values.iter())
                .filter(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .reduce(|a, b| a.saturating_add(b))
        };
        // The daemon's own sum when it gives one, else the cores' values added up.
        Ok(of(true).or_else(|| of(false)))
    }

    /// Port attributes as given in the `Welcome` (no round trip).
    pub fn ports(&self) -> &[PortAttr] {
        &self.inner.welcome.ports
    }

    /// The daemon's id of this client (listings, logs).
    pub fn client_id(&self) -> u32 {
        self.inner.welcome.client_id
    }

    /// Number of dataplane cores serving this client (sub-rings per CQ).
    pub fn cores(&self) -> u32 {
        self.inner.area.cores()
    }

    /// How long a verb waits for the daemon's answer before [`Error::Timeout`].
    pub fn timeout(&self) -> Duration {
        self.inner.conn.timeout()
    }

    /// Sets how long a verb waits for the daemon's answer (at least 1 ms).
    pub fn set_timeout(&self, timeout: Duration) {
        self.inner.conn.set_timeout(timeout)
    }

    /// True once the daemon is gone: every call, post and poll answers
    /// [`Error::DaemonGone`].
    pub fn is_daemon_gone(&self) -> bool {
        self.inner.check_alive().is_err()
    }

    /// The next asynchronous event (`ibv_get_async_event`), waiting for one.
    /// [`Error::DaemonGone`] once the queue is empty and the daemon gone.
    pub fn get_async_event(&self) -> Result<AsyncEventMsg> {
        self.inner.conn.shared.async_events.pop(true, None)
    }

    /// The next asynchronous event if there is one, else [`Error::WouldBlock`].
    pub fn try_get_async_event(&self) -> Result<AsyncEventMsg> {
        self.inner.conn.shared.async_events.pop(false, None)
    }

    /// The next asynchronous event, waiting at most `timeout` ([`Error::Timeout`]).
    pub fn get_async_event_timeout(&self, timeout: Duration) -> Result<AsyncEventMsg> {
        self.inner.conn.shared.async_events.pop(true, Some(timeout))
    }

    /// A descriptor that is readable while an asynchronous event is queued (or the daemon
    /// is gone): for `epoll`/`poll`. Do not read it; call
    /// [`Context::try_get_async_event`].
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        self.inner.conn.shared.async_events.fd()
    }

    /// Datagrams and events this context ignored: invalid messages, replies nobody waited
    /// for (timed out), events for unknown CM ids or dropped because a queue was full.
    pub fn ignored_messages(&self) -> u64 {
        self.inner
            .conn
            .shared
            .ignored
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}
