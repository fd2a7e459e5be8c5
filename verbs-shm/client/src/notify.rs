//! Bounded event queues that a reader thread fills and an application drains, each with
//! an eventfd that is readable while the queue holds something (or the daemon is gone),
//! so that the application can wait in `epoll`/`poll` as well as block in the library.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags, PollFd, PollFlags};

use crate::{Error, Result};

/// Most events a queue holds; later ones are dropped (and counted) until the
/// application drains it.
pub(crate) const EVENT_QUEUE_CAP: usize = 4096;

/// A non-blocking, close-on-exec eventfd.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> Result<EventFd> {
        Ok(EventFd(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// Makes the fd readable (adds 1 to the counter).
    pub(crate) fn signal(&self) {
        // Fails only when the counter would overflow: it is readable then anyway.
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Reads (and so resets) the counter; 0 if it was not readable.
    pub(crate) fn drain(&self) -> u64 {
        let mut b = [0u8; 8];
        match rustix::io::read(&self.0, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    /// Waits until readable or `timeout` (`None`: forever); true if readable.
    pub(crate) fn wait_readable(&self, timeout: Option<Duration>) -> bool {
        let ts = timeout.map(|d| rustix::event::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: d.subsec_nanos() as _,
        });
        loop {
            let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
            match rustix::event::poll(&mut fds, ts.as_ref()) {
                Ok(n) => return n > 0,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return false,
            }
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

struct QueueState<T> {
    items: VecDeque<T>,
    gone: bool,
    dropped: u64,
}

/// A bounded queue with a readiness eventfd: readable iff the queue is not empty or
/// the daemon is gone.
pub(crate) struct EventQueue<T> {
    state: Mutex<QueueState<T>>,
    cond: Condvar,
    fd: EventFd,
}

impl<T> EventQueue<T> {
    pub(crate) fn new() -> Result<EventQueue<T>> {
        Ok(EventQueue {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                gone: false,
                dropped: 0,
            }),
            cond: Condvar::new(),
            fd: EventFd::new()?,
        })
    }

    fn lock(&self) -> MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an event; false (and counted) if the queue is full.
    pub(crate) fn push(&self, item: T) -> bool {
        let mut s = self.lock();
        if s.items.len() >= EVENT_QUEUE_CAP {
            s.dropped += 1;
            return false;
        }
        s.items.push_back(item);
        self.fd.signal();
        self.cond.notify_one();
        true
    }

    /// The daemon is gone: wakes every waiter, the fd stays readable.
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.gone = true;
        self.fd.signal();
        self.cond.notify_all();
    }

    /// Removes and returns the queued events `f` selects, in order (the others stay).
    pub(crate) fn take_where(&self, mut f: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut s = self.lock();
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(s.items.len());
        for item in s.items.drain(..) {
            if f(&item) {
                taken.push(item);
            } else {
                kept.push_back(item);
            }
        }
        s.items = kept;
        if s.items.is_empty() && !s.gone {
            self.fd.drain();
        }
        taken
    }

    /// Events queued now.
    #[cfg(test)]
    pub(crate) fn lock_len(&self) -> usize {
        self.lock().items.len()
    }

    /// Events dropped because the queue was full.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The oldest event. `blocking`: waits (at most `timeout` if given) for one;
    /// otherwise [`Error::WouldBlock`] when empty. Once the queue is empty and the daemon
    /// gone, [`Error::DaemonGone`].
    pub(crate) fn pop(&self, blocking: bool, timeout: Option<Duration>) -> Result<T> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut s = self.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                if s.items.is_empty() && !s.gone {
                    self.fd.drain();
                }
                return Ok(item);
            }
            if s.gone {
                return Err(Error::DaemonGone);
            }
            if !blocking {
                return Err(Error::WouldBlock);
            }
            s = match deadline {
                None => self.cond.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return Err(Error::Timeout);
                    }
                    self.cond
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// The readiness fd.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: BorrowedFd<'_>) -> bool {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).unwrap() > 0
    }

    #[test]
    fn fd_readable_iff_events_or_gone() {
        let q = EventQueue::<u32>::new().unwrap();
        assert!(!readable(q.fd()));
        assert!(matches!(q.pop(false, None), Err(Error::WouldBlock)));
        q.push(1);
        q.push(2);
        assert!(readable(q.fd()));
        assert_eq!(q.pop(false, None).unwrap(), 1);
        assert!(readable(q.fd()));
        assert_eq!(q.pop(true, None).unwrap(), 2);
        assert!(!readable(q.fd()));
        assert!(matches!(
            q.pop(true, Some(Duration::from_millis(10))),
            Err(Error::Timeout)
        ));
        q.push(3);
        q.close();
        assert_eq!(q.pop(false, None).unwrap(), 3);
        assert!(readable(q.fd()));
        assert!(matches!(q.pop(true, None), Err(Error::DaemonGone)));
    }

    #[test]
    fn bounded_and_wakes_blocked_reader() {
        let q = std::sync::Arc::new(EventQueue::<usize>::new().unwrap());
        for i in 0..EVENT_QUEUE_CAP + 3 {
            q.push(i);
        }
        assert_eq!(q.dropped(), 3);
        for _ in 0..EVENT_QUEUE_CAP {
            q.pop(false, None).unwrap();
        }
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.pop(true, None));
        std::thread::sleep(Duration::from_millis(20));
        q.close();
        assert!(matches!(t.join().unwrap(), Err(Error::DaemonGone)));
    }
}
