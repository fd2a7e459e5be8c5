//! The two ends of a core's service channel: [`ServiceHandle`] (the control thread's)
//! and the queues inside [`crate::ShmService`]. Three bounded lock-free queues
//! (crossbeam `ArrayQueue`): requests to the core, replies back (matched by id),
//! notices back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::request::{ServiceError, ServiceNotice, ServiceReply, ServiceRequest};

/// Request id of `send` (fire-and-forget): its reply is not queued.
pub(crate) const NO_REPLY: u64 = 0;

/// A reply with the id of its request.
pub(crate) type Reply = (u64, Result<ServiceReply, ServiceError>);

/// The queues both ends share.
pub(crate) struct Shared {
    pub(crate) requests: ArrayQueue<(u64, ServiceRequest)>,
    pub(crate) replies: ArrayQueue<Reply>,
    pub(crate) notices: ArrayQueue<ServiceNotice>,
    /// Set when the service is dropped.
    pub(crate) gone: AtomicBool,
}

impl Shared {
    pub(crate) fn new(capacity: usize) -> Shared {
        let capacity = capacity.max(1);
        Shared {
            requests: ArrayQueue::new(capacity),
            replies: ArrayQueue::new(capacity),
            notices: ArrayQueue::new(capacity),
            gone: AtomicBool::new(false),
        }
    }
}

/// The control thread's end of one core's service (`Send`; one per service).
pub struct ServiceHandle {
    shared: Arc<Shared>,
    core: usize,
    next_id: u64,
}

impl core::fmt::Debug for ServiceHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ServiceHandle")
            .field("core", &self.core)
            .finish()
    }
}

impl ServiceHandle {
    pub(crate) fn new(shared: Arc<Shared>, core: usize) -> ServiceHandle {
        ServiceHandle {
            shared,
            core,
            next_id: 1,
        }
    }

    /// The core this service runs on.
    pub fn core(&self) -> usize {
        self.core
    }

    /// True once the service was dropped (its core stopped).
    pub fn is_gone(&self) -> bool {
        self.shared.gone.load(Ordering::Acquire)
    }

    /// Sends `req` and waits (spinning, then sleeping 20 µs at a time) for its reply at
    /// most `timeout`. Replies of earlier calls that timed out are discarded.
    pub fn call(
        &mut self,
        req: ServiceRequest,
        timeout: Duration,
    ) -> Result<ServiceReply, ServiceError> {
        if self.is_gone() {
            return Err(ServiceError::CoreGone);
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.shared
            .requests
            .push((id, req))
            .map_err(|_| ServiceError::QueueFull)?;
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            while let Some((rid, r)) = self.shared.replies.pop() {
                if rid == id {
                    return r;
                }
            }
            if self.is_gone() {
                return Err(ServiceError::CoreGone);
            }
            if start.elapsed() >= timeout {
                return Err(ServiceError::Timeout);
            }
            if spins < 200 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Sends `req` without waiting; its reply (and error) is discarded.
    pub fn send(&mut self, req: ServiceRequest) -> Result<(), ServiceError> {
        if self.is_gone() {
            return Err(ServiceError::CoreGone);
        }
        self.shared
            .requests
            .push((NO_REPLY, req))
            .map_err(|_| ServiceError::QueueFull)
    }

    /// The oldest notice, if any.
    pub fn poll_notice(&mut self) -> Option<ServiceNotice> {
        self.shared.notices.pop()
    }
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<ServiceHandle>();
    assert_send::<crate::ShmService>();
};
