//! The two ends of one core's control rings.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use crossbeam_queue::ArrayQueue;

use super::{Command, ControlError, Done, Op, Reply};

#[derive(Debug)]
struct Rings<M> {
    cmd: ArrayQueue<Command<M>>,
    out: ArrayQueue<Reply<M>>,
    /// Cleared when the core's end is dropped.
    core_alive: AtomicBool,
}

/// Creates the rings of one core: `commands` command slots, `outbound` reply slots (at
/// least `commands + 1`).
pub fn control_channel<M>(
    core: usize,
    commands: usize,
    outbound: usize,
) -> (ControlHandle<M>, CoreControl<M>) {
    let commands = commands.max(1);
    let outbound = outbound.max(commands + 1);
    let rings = Arc::new(Rings {
        cmd: ArrayQueue::new(commands),
        out: ArrayQueue::new(outbound),
        core_alive: AtomicBool::new(true),
    });
    (
        ControlHandle {
            rings: Arc::clone(&rings),
            core,
            next_id: 1,
            replies: VecDeque::new(),
        },
        CoreControl { rings },
    )
}

/// The core's end of the control rings.
#[derive(Debug)]
pub struct CoreControl<M> {
    rings: Arc<Rings<M>>,
}

impl<M> CoreControl<M> {
    /// The next command, if the outbound ring has room for its reply.
    pub fn pop_command(&self) -> Option<Command<M>> {
        if self.rings.out.len() >= self.rings.out.capacity() {
            return None;
        }
        self.rings.cmd.pop()
    }

    /// Queues a reply (room was checked when its command was taken). False if lost.
    pub fn push_reply(&self, r: Reply<M>) -> bool {
        self.rings.out.push(r).is_ok()
    }
}

impl<M> Drop for CoreControl<M> {
    fn drop(&mut self) {
        self.rings.core_alive.store(false, Ordering::Release);
    }
}

/// The control thread's end of one core's rings.
#[derive(Debug)]
pub struct ControlHandle<M> {
    rings: Arc<Rings<M>>,
    core: usize,
    next_id: u64,
    /// Replies to `send` (or late replies) read while waiting for another reply.
    replies: VecDeque<Reply<M>>,
}

/// Replies kept for [`ControlHandle::poll_reply`] at most; the oldest is dropped first.
const KEPT_REPLIES_MAX: usize = 65_536;

/// Waits a little longer each round: spin, then yield, then sleep (control thread only).
fn backoff(round: u32) {
    if round < 64 {
        std::hint::spin_loop();
    } else if round < 256 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(StdDuration::from_micros(50));
    }
}

impl<M> ControlHandle<M> {
    /// The core this handle talks to.
    pub fn core(&self) -> usize {
        self.core
    }

    /// False once the core's end is gone (its thread ended).
    pub fn core_alive(&self) -> bool {
        self.rings.core_alive.load(Ordering::Acquire)
    }

    /// Queues a command without waiting; returns its id. `RingFull` if there is no room.
    pub fn send(&mut self, port: usize, op: Op<M>) -> Result<u64, ControlError> {
        let id = self.next_id;
        self.next_id += 1;
        self.rings
            .cmd
            .push(Command { id, port, op })
            .map_err(|_| ControlError::RingFull)?;
        Ok(id)
    }

    /// Runs one command and waits for its reply, at most `timeout` (never forever).
    /// After `Timeout` the command may still run; its late reply is discarded.
    pub fn call(
        &mut self,
        port: usize,
        op: Op<M>,
        timeout: StdDuration,
    ) -> Result<Done<M>, ControlError> {
        let deadline = std::time::Instant::now() + timeout;
        let id = self.next_id;
        self.next_id += 1;
        let mut cmd = Command { id, port, op };
        let mut round = 0;
        loop {
            match self.rings.cmd.push(cmd) {
                Ok(()) => break,
                Err(c) => cmd = c,
            }
            if std::time::Instant::now() >= deadline {
                return Err(ControlError::RingFull);
            }
            backoff(round);
            round += 1;
        }
        let mut round = 0;
        loop {
            if let Some(i) = self.replies.iter().position(|r| r.id == id) {
                if let Some(r) = self.replies.remove(i) {
                    return r.result;
                }
            }
            match self.rings.out.pop() {
                Some(r) if r.id == id => return r.result,
                Some(other) => self.stash(other),
                None => {
                    if !self.core_alive() && self.rings.out.is_empty() {
                        return Err(ControlError::CoreGone);
                    }
                    if std::time::Instant::now() >= deadline {
                        return Err(ControlError::Timeout);
                    }
                    backoff(round);
                    round += 1;
                }
            }
        }
    }

    /// Keeps a reply to `send`, or a late reply to a call that timed out (the caller
    /// gave up), bounded.
    fn stash(&mut self, r: Reply<M>) {
        if self.replies.len() >= KEPT_REPLIES_MAX {
            self.replies.pop_front();
        }
        self.replies.push_back(r);
    }

    /// The next reply to a command queued with [`ControlHandle::send`], without waiting.
    pub fn poll_reply(&mut self) -> Option<Reply<M>> {
        while let Some(r) = self.rings.out.pop() {
            self.stash(r);
        }
        self.replies.pop_front()
    }

    /// The reply to command `id` if it has arrived, without waiting (other replies stay
    /// queued).
    pub fn take_reply(&mut self, id: u64) -> Option<Result<Done<M>, ControlError>> {
        while let Some(r) = self.rings.out.pop() {
            self.stash(r);
        }
        let i = self.replies.iter().position(|r| r.id == id)?;
        self.replies.remove(i).map(|r| r.result)
    }
}
