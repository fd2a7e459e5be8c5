//! Connection management in the manner of librdmacm: [`CmEventChannel`]
//! (`rdma_create_event_channel`, `rdma_get_cm_event`) and [`CmId`] (`rdma_create_id`,
//! `rdma_listen`, `rdma_connect`, `rdma_accept`, `rdma_reject`, `rdma_disconnect`,
//! `rdma_create_qp`).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iwarp_shm_socket::{Addr, CmEvent, CmIdHandle, ConnParam, Request, Response};

use crate::conn::CmRaw;
use crate::context::{unexpected, CtxInner};
use crate::mr::expect_ok;
use crate::notify::EventQueue;
use crate::qp::{create_qp, Qp, QpInitAttr};
use crate::{Context, Error, Pd, Result};

/// A queue of CM events for the CM ids created on it. Its fd ([`AsFd`]) is readable
/// while an event waits (or the daemon is gone).
pub struct CmEventChannel {
    ctx: Arc<CtxInner>,
    pub(crate) queue: Arc<EventQueue<CmRaw>>,
}

impl std::fmt::Debug for CmEventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmEventChannel").finish_non_exhaustive()
    }
}

/// One CM event (`rdma_cm_event`).
#[derive(Debug)]
pub struct CmEventInfo {
    /// The CM id it is for (for a `ConnectRequest`: the listener's).
    pub id: CmIdHandle,
    /// What happened.
    pub event: CmEvent,
    /// For a `ConnectRequest`: the new CM id of the request. Create its QP with
    /// [`CmId::create_qp`], then [`CmId::accept`] or [`CmId::reject`]; dropping it
    /// without either resets the request.
    pub request: Option<CmId>,
}

impl Context {
    /// Creates a CM event channel (`rdma_create_event_channel`).
    pub fn create_cm_event_channel(&self) -> Result<CmEventChannel> {
        let queue = Arc::new(EventQueue::new()?);
        self.inner.conn.shared.add_cm_queue(&queue);
        Ok(CmEventChannel {
            ctx: self.inner.clone(),
            queue,
        })
    }
}

impl CmEventChannel {
    pub(crate) fn wrap(&self, (id, event): CmRaw) -> CmEventInfo {
        let request = match &event {
            CmEvent::ConnectRequest { id: new, .. } => Some(CmId {
                ctx: self.ctx.clone(),
                handle: *new,
                queue: Mutex::new(self.queue.clone()),
                live: true,
            }),
            _ => None,
        };
        CmEventInfo { id, event, request }
    }

    /// The next event, waiting for one (`rdma_get_cm_event`). [`Error::DaemonGone`]
    /// once the queue is empty and the daemon is gone (never a hang).
    pub fn get_event(&self) -> Result<CmEventInfo> {
        self.queue.pop(true, None).map(|e| self.wrap(e))
    }

    /// The next event if one waits, else [`Error::WouldBlock`].
    pub fn try_get_event(&self) -> Result<CmEventInfo> {
        self.queue.pop(false, None).map(|e| self.wrap(e))
    }

    /// The next event, waiting at most `timeout` ([`Error::Timeout`]).
    pub fn get_event_timeout(&self, timeout: Duration) -> Result<CmEventInfo> {
        self.queue.pop(true, Some(timeout)).map(|e| self.wrap(e))
    }

    /// Creates a CM id whose events come to this channel (`rdma_create_id`).
    pub fn create_id(&self) -> Result<CmId> {
        CmId::create(self)
    }
}

impl AsFd for CmEventChannel {
    /// Readable while an event waits or the daemon is gone; do not read it, call
    /// [`CmEventChannel::try_get_event`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.queue.fd()
    }
}

/// A local address to listen on: a port on every address of the daemon, or one IPv4
/// address and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenAddr(pub Addr);

impl From<u16> for ListenAddr {
    fn from(port: u16) -> ListenAddr {
        ListenAddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port).into())
    }
}

impl From<SocketAddrV4> for ListenAddr {
    fn from(a: SocketAddrV4) -> ListenAddr {
        ListenAddr(a.into())
    }
}

/// A connection-manager identifier: a listener, or one connection being set up or up.
/// Destroyed on drop (its connection is reset if still up, its listen stops).
pub struct CmId {
    ctx: Arc<CtxInner>,
    handle: CmIdHandle,
    /// The channel's queue its events go to (changed by [`CmId::migrate`]).
    queue: Mutex<Arc<EventQueue<CmRaw>>>,
    live: bool,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CmId").field(&self.handle).finish()
    }
}

fn private_data_ok(p: &[u8]) -> Result<()> {
    if p.len() > iwarp_shm_socket::MAX_PRIVATE_DATA {
        return Err(Error::invalid(format!(
            "{} bytes of private data, at most {}",
            p.len(),
            iwarp_shm_socket::MAX_PRIVATE_DATA
        )));
    }
    Ok(())
}

impl CmId {
    /// Creates a CM id whose events go to `channel` (`rdma_create_id`).
    pub fn create(channel: &CmEventChannel) -> Result<CmId> {
        let ctx = &channel.ctx;
        let handle = match ctx.call(Request::CreateCmId)? {
            Response::CmId(h) => h,
            r => return Err(unexpected("CreateCmId", &r)),
        };
        let id = CmId {
            ctx: ctx.clone(),
            handle,
            queue: Mutex::new(channel.queue.clone()),
            live: true,
        };
        ctx.conn.shared.route_cm(handle, &channel.queue)?;
        Ok(id)
    }

    /// The daemon's handle.
    pub fn handle(&self) -> CmIdHandle {
        self.handle
    }

    /// Moves the id to `channel` (`rdma_migrate_id`): its later events arrive there, and
    /// the ones queued for it on its old channel and not yet read move there, in order.
    /// Both channels must be of the id's context.
    pub fn migrate(&self, channel: &CmEventChannel) -> Result<()> {
        if !Arc::ptr_eq(&self.ctx, &channel.ctx) {
            return Err(Error::invalid(
                "the channel belongs to another context than the CM id",
            ));
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if Arc::ptr_eq(&q, &channel.queue) {
            return Ok(());
        }
        self.ctx
            .conn
            .shared
            .reroute_cm(self.handle, &q, &channel.queue)?;
        *q = channel.queue.clone();
        Ok(())
    }

    /// Listens (`rdma_bind_addr` + `rdma_listen`) on a port (every address) or an
    /// address and port; requests arrive as `ConnectRequest` events.
    pub fn listen(&self, addr: impl Into<ListenAddr>, backlog: u32) -> Result<()> {
        let r = self.ctx.call(Request::Listen {
            id: self.handle,
            addr: addr.into().0,
            backlog,
        })?;
        expect_ok(r, "Listen")
    }

    /// Connects `qp` (Idle, created with [`crate::Pd::create_qp`]) to `remote`
    /// (`rdma_resolve_addr` + `rdma_resolve_route` + `rdma_connect`): `Established`,
    /// `Rejected` or `ConnectError` follows on the channel. `param` carries the private
    /// data and IRD/ORD (0: the QP's).
    pub fn connect(&self, qp: &Qp, remote: SocketAddrV4, param: &ConnParam) -> Result<()> {
        private_data_ok(&param.private_data)?;
        let r = self.ctx.call(Request::Connect {
            id: self.handle,
            qp: qp.handle(),
            remote: remote.into(),
            param: param.clone(),
        })?;
        expect_ok(r, "Connect")
    }

    /// Creates the QP of a connection request on the core that received it
    /// (`rdma_create_qp` on the request's id).
    pub fn create_qp(&self, pd: &Pd, attr: &QpInitAttr<'_>) -> Result<Qp> {
        create_qp(pd, attr, Some(self.handle))
    }

    /// Accepts the connection request with `qp` (created by [`CmId::create_qp`])
    /// (`rdma_accept`); `Established` follows.
    pub fn accept(&self, qp: &Qp, param: &ConnParam) -> Result<()> {
        private_data_ok(&param.private_data)?;
        let r = self.ctx.call(Request::Accept {
            id: self.handle,
            qp: qp.handle(),
            param: param.clone(),
        })?;
        expect_ok(r, "Accept")
    }

    /// Rejects the connection request with private data (`rdma_reject`).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        private_data_ok(private_data)?;
        let r = self.ctx.call(Request::Reject {
            id: self.handle,
            private_data: private_data.to_vec(),
        })?;
        expect_ok(r, "Reject")
    }

    /// Graceful disconnect once the SQ drained (`rdma_disconnect`); `Disconnected`
    /// follows.
    pub fn disconnect(&self) -> Result<()> {
        expect_ok(
            self.ctx.call(Request::Disconnect(self.handle))?,
            "Disconnect",
        )
    }

    /// Abortive close (the peer sees a reset).
    pub fn abort(&self) -> Result<()> {
        expect_ok(self.ctx.call(Request::Abort(self.handle))?, "Abort")
    }

    /// Destroys the CM id (`rdma_destroy_id`), reporting the daemon's answer (drop does
    /// the same and ignores it).
    pub fn destroy(mut self) -> Result<()> {
        self.live = false;
        self.ctx.conn.shared.unroute_cm(self.handle);
        expect_ok(
            self.ctx.call(Request::DestroyCmId(self.handle))?,
            "DestroyCmId",
        )
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        if self.live {
            self.ctx.conn.shared.unroute_cm(self.handle);
            let _ = self.ctx.call(Request::DestroyCmId(self.handle));
        }
        // Keep the channel's queue alive until here (events already queued for this id
        // stay readable on the channel).
        let _ = &self.queue;
    }
}
