//! [`CompChannel`]: completion channels (`ibv_create_comp_channel`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`).

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use iwarp_shm_ring::CqControl;
use iwarp_shm_socket::{ChannelHandle, CqHandle, Request, Response};

use crate::context::{unexpected, CtxInner};
use crate::notify::EventFd;
use crate::{Context, Error, Result};

/// A CQ attached to a channel: its control line and the `events` count last seen.
struct Attached {
    cq: CqHandle,
    control: CqControl,
    seen: u64,
    /// The task waiting in `Cq::next` for this CQ (woken when its notification is
    /// collected).
    #[cfg(feature = "tokio")]
    waker: Option<std::task::Waker>,
}

#[derive(Default)]
struct ChanState {
    cqs: Vec<Attached>,
    /// CQs whose notification fired and was not handed out yet (each at most once).
    pending: VecDeque<CqHandle>,
    unacked: u64,
}

/// What a channel's users (the channel, its CQs) share.
pub(crate) struct ChannelShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: ChannelHandle,
    pub(crate) fd: Arc<EventFd>,
    state: Mutex<ChanState>,
    /// The fd's registration with the tokio reactor, made by the first async wait.
    #[cfg(feature = "tokio")]
    pub(crate) async_fd: crate::tokio_io::LazyAsyncFd,
}

impl ChannelShared {
    fn lock(&self) -> MutexGuard<'_, ChanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// CQ `cq` reports here; `control` is its control line.
    pub(crate) fn attach(&self, cq: CqHandle, control: CqControl) {
        let seen = control.events();
        self.lock().cqs.push(Attached {
            cq,
            control,
            seen,
            #[cfg(feature = "tokio")]
            waker: None,
        });
    }

    /// CQ `cq` is gone.
    pub(crate) fn detach(&self, cq: CqHandle) {
        let mut s = self.lock();
        s.cqs.retain(|a| a.cq != cq);
        s.pending.retain(|&c| c != cq);
    }

    fn get(&self, blocking: bool) -> Result<CqHandle> {
        loop {
            self.ctx.check_alive()?;
            {
                let mut s = self.lock();
                if let Some(cq) = s.pending.pop_front() {
                    if !s.pending.is_empty() {
                        // Stay readable for the next call.
                        self.fd.signal();
                    }
                    s.unacked += 1;
                    return Ok(cq);
                }
                if self.fd.drain() > 0 {
                    collect(&mut s);
                    continue;
                }
            }
            if !blocking {
                return Err(Error::WouldBlock);
            }
            self.fd.wait_readable(None);
        }
    }

    /// For `Cq::next`: takes the notifications fired for `cq` (all of them: one wake-up
    /// is enough), collecting what the fd announced first; true if there was one.
    /// Otherwise `waker` (if given) is woken when one for `cq` is collected.
    /// Notifications of other CQs stay pending for their own waiters.
    #[cfg(feature = "tokio")]
    pub(crate) fn take_for(&self, cq: CqHandle, waker: Option<&std::task::Waker>) -> Result<bool> {
        self.ctx.check_alive()?;
        let mut s = self.lock();
        if self.fd.drain() > 0 {
            collect(&mut s);
        }
        if s.pending.contains(&cq) {
            s.pending.retain(|&c| c != cq);
            return Ok(true);
        }
        if let Some(w) = waker {
            if let Some(a) = s.cqs.iter_mut().find(|a| a.cq == cq) {
                match &a.waker {
                    Some(old) if old.will_wake(w) => {}
                    _ => a.waker = Some(w.clone()),
                }
            }
        }
        Ok(false)
    }
}

/// The fd was readable: queues every CQ whose `events` count moved (and wakes its async
/// waiter).
fn collect(s: &mut ChanState) {
    let ChanState { cqs, pending, .. } = s;
    for a in cqs.iter_mut() {
        let ev = a.control.events();
        if ev != a.seen {
            a.seen = ev;
            pending.push_back(a.cq);
            #[cfg(feature = "tokio")]
            if let Some(w) = a.waker.take() {
                w.wake();
            }
        }
    }
}

impl Drop for ChannelShared {
    fn drop(&mut self) {
        let _ = self.ctx.call(Request::DestroyChannel(self.handle));
    }
}

/// A completion channel: an eventfd the daemon writes when a CQ attached to it and
/// armed ([`crate::Cq::req_notify`]) gets a completion. Wait for it with
/// [`CompChannel::get_cq_event`] or in `epoll` on its fd ([`AsFd`]), then poll the CQ,
/// re-arm it, poll again.
#[derive(Clone)]
pub struct CompChannel {
    pub(crate) shared: Arc<ChannelShared>,
}

impl std::fmt::Debug for CompChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CompChannel")
            .field(&self.shared.handle)
            .finish()
    }
}

impl Context {
    /// Creates a completion channel (`ibv_create_comp_channel`).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let fd = Arc::new(EventFd::new()?);
        let (r, _) = self.inner.call_fds(Request::CreateChannel, &[fd.as_fd()])?;
        let handle = match r {
            Response::Channel(h) => h,
            r => return Err(unexpected("CreateChannel", &r)),
        };
        self.inner.conn.shared.add_comp_fd(&fd);
        Ok(CompChannel {
            shared: Arc::new(ChannelShared {
                ctx: self.inner.clone(),
                handle,
                fd,
                state: Mutex::new(ChanState::default()),
                #[cfg(feature = "tokio")]
                async_fd: Default::default(),
            }),
        })
    }
}

impl CompChannel {
    /// The daemon's handle.
    pub fn handle(&self) -> ChannelHandle {
        self.shared.handle
    }

    /// Waits for a notification and returns the CQ it is for (`ibv_get_cq_event`;
    /// compare with [`crate::Cq::handle`]). Each fired notification is returned once.
    /// [`Error::DaemonGone`] (never a hang) once the daemon is gone.
    pub fn get_cq_event(&self) -> Result<CqHandle> {
        self.shared.get(true)
    }

    /// Like [`CompChannel::get_cq_event`] but [`Error::WouldBlock`] instead of waiting.
    /// After the fd was readable, call it until `WouldBlock`.
    pub fn try_get_cq_event(&self) -> Result<CqHandle> {
        self.shared.get(false)
    }

    /// Acknowledges `n` events returned by `get_cq_event` (`ibv_ack_cq_events`).
    /// Bookkeeping only: destroying a CQ never waits for acknowledgements here, since
    /// ownership already guarantees nobody uses it.
    pub fn ack_cq_events(&self, n: u32) {
        let mut s = self.shared.lock();
        s.unacked = s.unacked.saturating_sub(n as u64);
    }

    /// Events returned and not yet acknowledged.
    pub fn unacked_events(&self) -> u64 {
        self.shared.lock().unacked
    }
}

impl AsFd for CompChannel {
    /// Readable when a notification may be waiting (or the daemon is gone); do not read
    /// it, call [`CompChannel::try_get_cq_event`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}
