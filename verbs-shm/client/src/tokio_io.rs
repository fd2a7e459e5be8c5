//! Async waits on a tokio runtime (feature `tokio`): [`Cq::next`] and
//! [`Cq::next_batch`] wait for completions through the CQ's completion channel,
//! [`CmEventStream`] and [`AsyncEventStream`] deliver CM and asynchronous events as a
//! [`Stream`]. All of them wait on the library's existing eventfds registered with the
//! runtime's reactor ([`AsyncFd`]); posting and polling stay plain memory accesses.
//!
//! A descriptor is registered with the reactor of the runtime that first waits on it and
//! stays bound to that runtime.

use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context as TaskContext, Poll};

use futures_core::Stream;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use iwarp_types::Cqe;

use crate::channel::ChannelShared;
use crate::cm::{CmEventChannel, CmEventInfo};
use crate::conn::CmRaw;
use crate::notify::{EventFd, EventQueue};
use crate::{AsyncEventMsg, Context, Cq, Error, Result, EMPTY_CQE};

/// A descriptor kept open by `owner`, for [`AsyncFd`].
struct FdOf<O> {
    raw: RawFd,
    _owner: O,
}

impl<O> AsRawFd for FdOf<O> {
    fn as_raw_fd(&self) -> RawFd {
        self.raw
    }
}

/// Registers `raw` (kept open by `owner`) for readability with the current runtime
/// (which needs its IO driver: `enable_io` or `enable_all`).
fn register<O>(raw: RawFd, owner: O) -> Result<AsyncFd<FdOf<O>>> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::invalid(
            "an async wait of iwarp-verbs needs a tokio runtime (none is current)",
        ));
    }
    // SAFETY: `raw` is an open descriptor owned by `owner` (an eventfd inside an `Arc`
    // that `FdOf` holds), so it stays open and the same for the `AsyncFd`'s lifetime;
    // `FdOf::as_raw_fd` always returns that value.
    unsafe { AsyncFd::register_with_interest(FdOf { raw, _owner: owner }, Interest::READABLE) }
        .map_err(|e| Error::Io(e.into_parts().1))
}

type ChannelFd = AsyncFd<FdOf<Arc<EventFd>>>;

/// A completion channel's registration, made by the first async wait on it.
#[derive(Default)]
pub(crate) struct LazyAsyncFd(Mutex<Option<Arc<ChannelFd>>>);

impl ChannelShared {
    fn registered(&self) -> Result<Arc<ChannelFd>> {
        let mut slot = self.async_fd.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = &*slot {
            return Ok(a.clone());
        }
        let a = Arc::new(register(self.fd.as_fd().as_raw_fd(), self.fd.clone())?);
        *slot = Some(a.clone());
        Ok(a)
    }

    /// Waits until a notification for `cq` fired (or the daemon is gone).
    ///
    /// Several CQs may share the channel and wait at once: whichever task sees the fd
    /// readable collects every fired notification and wakes the waiter of each CQ (its
    /// waker is registered under the same lock as its check, so none is lost); a task
    /// clears the fd's readiness only after it found nothing for its own CQ, and tokio
    /// keeps readiness that arrived after the guard was taken.
    async fn wait_for(&self, cq: crate::CqHandle, afd: &ChannelFd) -> Result<()> {
        loop {
            let mut readable = pin!(afd.readable());
            let woke = std::future::poll_fn(|cx| {
                match self.take_for(cq, Some(cx.waker())) {
                    Ok(true) => return Poll::Ready(Ok(None)),
                    Ok(false) => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
                readable
                    .as_mut()
                    .poll(cx)
                    .map(|g| g.map(Some).map_err(Error::Io))
            })
            .await?;
            let Some(mut guard) = woke else {
                return Ok(());
            };
            if self.take_for(cq, None)? {
                return Ok(());
            }
            guard.clear_ready();
        }
    }
}

impl Cq {
    /// Waits for the next completion (feature `tokio`). See [`Cq::next_batch`].
    pub async fn next(&mut self) -> Result<Cqe> {
        let mut wc = [EMPTY_CQE; 1];
        self.next_batch(&mut wc).await?;
        Ok(wc[0])
    }

    /// Waits until at least one completion is there and polls up to `wc.len()` into
    /// `wc`, returning how many (feature `tokio`). The CQ needs a completion channel
    /// ([`Context::create_cq`] with `Some(channel)`); several CQs may share one.
    ///
    /// Follows the blocking pattern: poll; if empty, arm ([`Cq::req_notify`], next
    /// completion), poll again (a completion that came before the arm is not missed),
    /// then wait for the notification on the channel's fd and start over. The
    /// notifications of this CQ are taken from the channel (and need no
    /// [`crate::CompChannel::ack_cq_events`]); do not wait for the same channel with
    /// `get_cq_event` at the same time. [`Error::DaemonGone`] once the daemon is gone,
    /// never a hang. Cancel-safe: dropping the future loses no completion.
    pub async fn next_batch(&mut self, wc: &mut [Cqe]) -> Result<usize> {
        if wc.is_empty() {
            return Err(Error::invalid("next_batch: empty completion buffer"));
        }
        let chan = self.shared().channel.clone().ok_or_else(|| {
            Error::invalid("this CQ has no completion channel: create it with one to wait")
        })?;
        let afd = chan.registered()?;
        loop {
            let n = self.poll(wc)?;
            if n > 0 {
                return Ok(n);
            }
            self.req_notify(false)?;
            let n = self.poll(wc)?;
            if n > 0 {
                return Ok(n);
            }
            chan.wait_for(self.handle(), &afd).await?;
        }
    }
}

/// Waits on an [`EventQueue`]'s fd: the common part of the event streams.
struct QueueWait<O> {
    afd: AsyncFd<FdOf<O>>,
    done: bool,
}

impl<O> QueueWait<O> {
    /// The next item of `queue`: `Some(Err(DaemonGone))` once after the daemon went and
    /// the queue is empty, then `None`.
    fn poll_pop<T>(
        &mut self,
        queue: &EventQueue<T>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<T>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut guard = None;
        loop {
            match queue.pop(false, None) {
                Ok(v) => return Poll::Ready(Some(Ok(v))),
                Err(Error::WouldBlock) => {}
                Err(e) => {
                    self.done = matches!(e, Error::DaemonGone);
                    return Poll::Ready(Some(Err(e)));
                }
            }
            // The fd is readable iff the queue holds something or the daemon is gone:
            // readiness is cleared only after the queue was found empty under it (tokio
            // keeps readiness that arrived since).
            if let Some(mut g) = guard.take() {
                tokio::io::unix::AsyncFdReadyGuard::clear_ready(&mut g);
            }
            match ready!(self.afd.poll_read_ready(cx)) {
                Ok(g) => guard = Some(g),
                Err(e) => return Poll::Ready(Some(Err(Error::Io(e)))),
            }
        }
    }
}

/// The CM events of a [`CmEventChannel`] as a [`Stream`] (feature `tokio`): each item is
/// what [`CmEventChannel::get_event`] returns; after the daemon is gone and the queued
/// events are out, one `Err(DaemonGone)`, then the end.
pub struct CmEventStream {
    chan: CmEventChannel,
    wait: QueueWait<Arc<EventQueue<CmRaw>>>,
}

impl std::fmt::Debug for CmEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmEventStream").finish_non_exhaustive()
    }
}

impl CmEventChannel {
    /// Its events as a [`Stream`] on the current tokio runtime (feature `tokio`).
    /// [`Error::InvalidArgument`] outside a runtime.
    pub fn into_stream(self) -> Result<CmEventStream> {
        let q = self.queue.clone();
        let wait = QueueWait {
            afd: register(q.fd().as_raw_fd(), q)?,
            done: false,
        };
        Ok(CmEventStream { chan: self, wait })
    }
}

impl CmEventStream {
    /// The channel (to create CM ids on it).
    pub fn channel(&self) -> &CmEventChannel {
        &self.chan
    }

    /// The next event; [`Error::DaemonGone`] once the stream ended.
    pub async fn get_event(&mut self) -> Result<CmEventInfo> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .unwrap_or(Err(Error::DaemonGone))
    }

    /// Back to the blocking channel (the fd leaves the reactor).
    pub fn into_inner(self) -> CmEventChannel {
        self.chan
    }
}

impl Stream for CmEventStream {
    type Item = Result<CmEventInfo>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let chan = &this.chan;
        this.wait
            .poll_pop(&chan.queue, cx)
            .map(|o| o.map(|r| r.map(|e| chan.wrap(e))))
    }
}

/// The asynchronous events of a [`Context`] (`ibv_get_async_event`) as a [`Stream`]
/// (feature `tokio`); ends like [`CmEventStream`].
pub struct AsyncEventStream {
    ctx: Context,
    wait: QueueWait<Context>,
}

impl std::fmt::Debug for AsyncEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEventStream").finish_non_exhaustive()
    }
}

impl Context {
    /// The asynchronous events as a [`Stream`] on the current tokio runtime (feature
    /// `tokio`). One such stream per context at a time (the fd is registered once).
    pub fn async_event_stream(&self) -> Result<AsyncEventStream> {
        let raw = self.async_fd().as_raw_fd();
        Ok(AsyncEventStream {
            ctx: self.clone(),
            wait: QueueWait {
                afd: register(raw, self.clone())?,
                done: false,
            },
        })
    }
}

impl AsyncEventStream {
    /// The next event; [`Error::DaemonGone`] once the stream ended.
    pub async fn get_event(&mut self) -> Result<AsyncEventMsg> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .unwrap_or(Err(Error::DaemonGone))
    }
}

impl Stream for AsyncEventStream {
    type Item = Result<AsyncEventMsg>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.wait
            .poll_pop(&this.ctx.inner.conn.shared.async_events, cx)
    }
}
