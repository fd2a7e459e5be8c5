//! Completion queues (verbs sections 5.3, 8.2.4, 8.2.5 and 9.2.3) and the completion
//! sink seam.
//!
//! A QP completes into its CQ; the CQ writes each completion into its [`CqSink`]: where
//! the completions go and who reads them. Two kinds exist:
//!
//! - the in-engine queue ([`CqQueue`], the default of [`Rnic::create_cq`]): a bounded
//!   ring of [`Cqe`] whose storage is allocated at create (and at resize, a control-path
//!   verb), never on the data path, read with Poll for Completion ([`Rnic::poll_cq`]) and
//!   armed with Request Completion Notification ([`Rnic::req_notify_cq`]). Notification
//!   follows verbs 8.2.5: arming is one-shot, arming while armed keeps the wider mode,
//!   CQEs already queued at arm time do not trigger, and "solicited" mode fires on a
//!   solicited receive or on any completion in error;
//! - a sink given by the engine's owner ([`Rnic::create_cq_with_sink`]), for a CQ whose
//!   storage is not the engine's (the shared-memory service writes each completion
//!   straight into the slot of the client's CQ ring, with the ring's own arm). The owner
//!   reaches its sink again with [`Rnic::cq_sink_mut`].
//!
//! Whatever the sink, the CQ keeps the verbs rules: a sink that has no room refuses the
//! completion (it never drops it silently nor overwrites an unread one) and the CQ
//! reports [`CqOverflow`], on which the caller raises the asynchronous events ("CQ
//! Overflow Detected" once per episode, the QP's CQ error; inventory 4.5); a sink's
//! [`Notify::Event`] becomes one CQ notification. A sink-backed CQ has at most one
//! notification queued at a time (a second fire before the first is taken is merged into
//! it), so the engine's notification queue cannot be flooded by one CQ.
//!
//! [`Rnic::create_cq`]: crate::Rnic::create_cq
//! [`Rnic::create_cq_with_sink`]: crate::Rnic::create_cq_with_sink
//! [`Rnic::cq_sink_mut`]: crate::Rnic::cq_sink_mut
//! [`Rnic::poll_cq`]: crate::Rnic::poll_cq
//! [`Rnic::req_notify_cq`]: crate::Rnic::req_notify_cq

use core::any::Any;

use crate::slab::Slab;
use iwarp_types::{CqId, Cqe, VerbError, WcOpcode, WcStatus};
use std::collections::VecDeque;

/// The arming mode of Request Completion Notification (verbs 9.3.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotifyMode {
    /// Fire on the next completion of any kind.
    NextCompletion,
    /// Fire on the next solicited receive (Send with SE, Send with SE and Invalidate) or
    /// the next completion in error.
    Solicited,
}

/// What a successful [`Cq::push`] (or [`CqSink::push`]) asks of the caller.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Notify {
    /// Nothing to do.
    Quiet,
    /// The CQ was armed and this CQE triggers it: emit one CQ event (the CQ is disarmed).
    Event,
}

/// A push into a full CQ. The CQE was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqOverflow {
    /// True for the first refused push since the CQ last accepted one: the caller raises
    /// "CQ Overflow Detected" once per episode (the QP-affiliated error is per push).
    pub first: bool,
}

/// A [`CqSink`] had no room for a completion: it wrote nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqFull;

/// Lets the owner of a boxed [`CqSink`] get its own type back
/// ([`Rnic::cq_sink_mut`](crate::Rnic::cq_sink_mut)); implemented for every type.
pub trait AsAny: Any {
    /// `self` as [`Any`].
    fn as_any(&self) -> &dyn Any;
    /// `self` as [`Any`], mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Where the completions of a CQ go: the seam between the QPs (which complete WRs) and
/// the reader of the CQ. The engine calls it on the data path, inside `handle_frame`,
/// `handle_timeout`, `poll_transmit` and the verbs: an implementation must be bounded
/// and must not block (no system call, no allocation in steady state).
pub trait CqSink: AsAny + Send {
    /// Writes one completion, after every completion written before. `Err(CqFull)` if
    /// there is no room: nothing was written (a completion is never dropped silently nor
    /// written over an unread one; the CQ reports the overflow). `Ok(Notify::Event)` if
    /// the sink was armed for this completion and is now disarmed: the engine emits one
    /// CQ notification.
    fn push(&mut self, cqe: &Cqe) -> Result<Notify, CqFull>;
    /// Request Completion Notification (one shot; see [`NotifyMode`]).
    fn arm(&mut self, mode: NotifyMode);
    /// Completions the sink can hold (Query CQ: the depth provided).
    fn depth(&self) -> usize;
}

/// The in-engine queue: a bounded ring of [`Cqe`], read with Poll for Completion.
pub struct CqQueue {
    ring: VecDeque<Cqe>,
    depth: usize,
    armed: Option<NotifyMode>,
}

impl CqQueue {
    fn new(depth: usize) -> CqQueue {
        CqQueue {
            ring: VecDeque::with_capacity(depth),
            depth,
            armed: None,
        }
    }

    fn poll(&mut self, out: &mut [Cqe]) -> usize {
        let mut n = 0;
        for slot in out.iter_mut() {
            match self.ring.pop_front() {
                Some(cqe) => {
                    *slot = cqe;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    fn resize(&mut self, depth: usize) -> Result<(), VerbError> {
        if depth < self.ring.len() {
            return Err(VerbError::CqShrinkFailed);
        }
        let mut ring = VecDeque::with_capacity(depth);
        ring.extend(self.ring.drain(..));
        self.ring = ring;
        self.depth = depth;
        Ok(())
    }
}

impl CqSink for CqQueue {
    #[inline]
    fn push(&mut self, cqe: &Cqe) -> Result<Notify, CqFull> {
        if self.ring.len() >= self.depth {
            return Err(CqFull);
        }
        self.ring.push_back(*cqe);
        let fire = match self.armed {
            None => false,
            Some(NotifyMode::NextCompletion) => true,
            Some(NotifyMode::Solicited) => {
                cqe.status != WcStatus::Success || (cqe.opcode == WcOpcode::Recv && cqe.solicited)
            }
        };
        if fire {
            self.armed = None;
            Ok(Notify::Event)
        } else {
            Ok(Notify::Quiet)
        }
    }

    fn arm(&mut self, mode: NotifyMode) {
        self.armed = match (self.armed, mode) {
            (Some(NotifyMode::NextCompletion), _) | (_, NotifyMode::NextCompletion) => {
                Some(NotifyMode::NextCompletion)
            }
            _ => Some(NotifyMode::Solicited),
        };
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

/// The sink of a CQ.
enum Store {
    /// The in-engine queue (tests, the simulator, the load generator, the runtime's own
    /// CQs).
    Queue(CqQueue),
    /// A sink given by the engine's owner.
    Sink(Box<dyn CqSink>),
}

/// A completion queue: its sink and the bookkeeping every sink shares (users, handler,
/// overflow episodes, the queued notification).
pub struct Cq {
    store: Store,
    users: u32,
    overflowing: bool,
    overflows: u64,
    handler: u32,
    /// A sink-backed CQ's notification is in the engine's queue (not taken yet).
    notify_queued: bool,
}

impl Cq {
    fn new(store: Store) -> Cq {
        Cq {
            store,
            users: 0,
            overflowing: false,
            overflows: 0,
            handler: 0,
            notify_queued: false,
        }
    }

    /// Adds a completion. Returns whether a CQ event is due, or [`CqOverflow`] if the CQ
    /// is full (the CQE is dropped and counted; other CQs and QPs are unaffected).
    #[inline]
    pub fn push(&mut self, cqe: Cqe) -> Result<Notify, CqOverflow> {
        let r = match &mut self.store {
            Store::Queue(q) => q.push(&cqe),
            Store::Sink(s) => s.push(&cqe),
        };
        match r {
            Ok(n) => {
                self.overflowing = false;
                Ok(n)
            }
            Err(CqFull) => {
                let first = !self.overflowing;
                self.overflowing = true;
                self.overflows = self.overflows.saturating_add(1);
                Err(CqOverflow { first })
            }
        }
    }

    /// Poll for Completion: moves up to `out.len()` CQEs, oldest first, into `out` and
    /// returns how many. Each CQE is returned at most once. Always 0 for a CQ with an
    /// owner's sink (its completions are read where the sink writes them).
    pub fn poll(&mut self, out: &mut [Cqe]) -> usize {
        match &mut self.store {
            Store::Queue(q) => q.poll(out),
            Store::Sink(_) => 0,
        }
    }

    /// Request Completion Notification. One-shot; arming while armed has no further
    /// effect except that "next completion" wins over "solicited" (verbs 8.2.5). CQEs
    /// already queued do not trigger. A sink-backed CQ is armed by its sink.
    pub fn arm(&mut self, mode: NotifyMode) {
        match &mut self.store {
            Store::Queue(q) => q.arm(mode),
            Store::Sink(s) => s.arm(mode),
        }
    }

    /// The current arming of the in-engine queue, if any (`None` for a sink-backed CQ:
    /// its arm is the sink's).
    pub fn armed(&self) -> Option<NotifyMode> {
        match &self.store {
            Store::Queue(q) => q.armed,
            Store::Sink(_) => None,
        }
    }

    /// Number of queued CQEs (0 for a sink-backed CQ).
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Queue(q) => q.ring.len(),
            Store::Sink(_) => 0,
        }
    }

    /// True if no CQE is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Allocated number of entries.
    pub fn depth(&self) -> usize {
        match &self.store {
            Store::Queue(q) => q.depth,
            Store::Sink(s) => s.depth(),
        }
    }

    /// True if the completions go to an owner's sink (not the in-engine queue).
    pub fn has_sink(&self) -> bool {
        matches!(self.store, Store::Sink(_))
    }

    /// Number of work queues reporting to this CQ.
    pub fn users(&self) -> u32 {
        self.users
    }

    /// Completion Event Handler identifier given at create (verbs 9.2.3.1); 0 for none.
    pub fn handler(&self) -> u32 {
        self.handler
    }

    pub(crate) fn set_handler(&mut self, ceh: u32) {
        self.handler = ceh;
    }

    /// Number of CQEs refused because the CQ was full.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// A notification fired: true if the caller queues it (false: one of this sink-backed
    /// CQ is queued already and stands for both).
    pub(crate) fn notification_due(&mut self) -> bool {
        match self.store {
            Store::Queue(_) => true,
            Store::Sink(_) => !core::mem::replace(&mut self.notify_queued, true),
        }
    }

    /// The queued notification was taken.
    pub(crate) fn notification_taken(&mut self) {
        self.notify_queued = false;
    }

    /// The owner's sink, as its own type.
    pub(crate) fn sink_mut<T: CqSink>(&mut self) -> Option<&mut T> {
        match &mut self.store {
            Store::Sink(s) => (**s).as_any_mut().downcast_mut::<T>(),
            Store::Queue(_) => None,
        }
    }

    /// The owner's sink, as its own type.
    pub(crate) fn sink<T: CqSink>(&self) -> Option<&T> {
        match &self.store {
            Store::Sink(s) => (**s).as_any().downcast_ref::<T>(),
            Store::Queue(_) => None,
        }
    }

    fn resize(&mut self, depth: usize) -> Result<(), VerbError> {
        match &mut self.store {
            Store::Queue(q) => q.resize(depth),
            // The owner's storage: the owner resizes it (through `Rnic::cq_sink_mut`).
            Store::Sink(_) => Err(VerbError::InvalidCq),
        }
    }
}

/// The bounded table of completion queues of one engine.
pub struct CqTable {
    cqs: Slab<Cq>,
    max_cqe: usize,
}

impl CqTable {
    /// A table of at most `max_cqs` CQs of at most `max_cqe` entries each.
    pub fn new(max_cqs: usize, max_cqe: usize) -> CqTable {
        CqTable {
            cqs: Slab::new(max_cqs),
            max_cqe,
        }
    }

    fn check_depth(&self, depth: usize) -> Result<usize, VerbError> {
        if depth > self.max_cqe {
            return Err(VerbError::CqTooLarge);
        }
        // At least the requested number, and never a CQ that cannot hold one entry.
        Ok(depth.max(1))
    }

    /// Create CQ with at least `depth` entries; returns the handle and the allocated
    /// depth. `CqTooLarge` above the engine limit, `InsufficientResources` if the table
    /// is full.
    pub fn create(&mut self, depth: usize) -> Result<(CqId, usize), VerbError> {
        let depth = self.check_depth(depth)?;
        if self.cqs.len() >= self.cqs.capacity() {
            return Err(VerbError::InsufficientResources);
        }
        let id = self
            .cqs
            .insert(Cq::new(Store::Queue(CqQueue::new(depth))))
            .ok_or(VerbError::InsufficientResources)?;
        Ok((CqId(id), depth))
    }

    /// Create CQ of at least `depth` entries whose completions go to `sink`; returns the
    /// handle and the sink's depth. `CqTooLarge` above the engine limit,
    /// `InsufficientResources` if the table is full or the sink holds fewer than `depth`
    /// completions.
    pub fn create_with_sink(
        &mut self,
        depth: usize,
        sink: Box<dyn CqSink>,
    ) -> Result<(CqId, usize), VerbError> {
        let depth = self.check_depth(depth)?;
        let got = sink.depth();
        if got < depth || self.cqs.len() >= self.cqs.capacity() {
            return Err(VerbError::InsufficientResources);
        }
        let id = self
            .cqs
            .insert(Cq::new(Store::Sink(sink)))
            .ok_or(VerbError::InsufficientResources)?;
        Ok((CqId(id), got))
    }

    /// The CQ, if it exists.
    pub fn get(&self, cq: CqId) -> Option<&Cq> {
        self.cqs.get(cq.0)
    }

    /// The CQ, if it exists, mutably (push, poll, arm).
    pub fn get_mut(&mut self, cq: CqId) -> Option<&mut Cq> {
        self.cqs.get_mut(cq.0)
    }

    /// Query CQ: the allocated depth.
    pub fn query(&self, cq: CqId) -> Result<usize, VerbError> {
        self.get(cq).map(Cq::depth).ok_or(VerbError::InvalidCq)
    }

    /// Modify CQ (resize) to at least `depth` entries, keeping every queued CQE in order.
    /// Fails atomically: `InvalidCq` (also for a CQ with an owner's sink: the owner
    /// resizes its storage), `CqTooLarge`, or `CqShrinkFailed` if more CQEs are queued
    /// than `depth`. Returns the allocated depth.
    pub fn resize(&mut self, cq: CqId, depth: usize) -> Result<usize, VerbError> {
        let depth = self.check_depth(depth)?;
        let c = self.cqs.get_mut(cq.0).ok_or(VerbError::InvalidCq)?;
        c.resize(depth)?;
        Ok(depth)
    }

    /// Destroy CQ: `InvalidCq`, or `CqInUse` while work queues report to it.
    pub fn destroy(&mut self, cq: CqId) -> Result<(), VerbError> {
        match self.cqs.get(cq.0) {
            None => Err(VerbError::InvalidCq),
            Some(c) if c.users > 0 => Err(VerbError::CqInUse),
            Some(_) => {
                self.cqs.remove(cq.0);
                Ok(())
            }
        }
    }

    /// Records one more work queue reporting to `cq` (`InvalidCq` if it does not exist).
    pub fn acquire(&mut self, cq: CqId) -> Result<(), VerbError> {
        let c = self.cqs.get_mut(cq.0).ok_or(VerbError::InvalidCq)?;
        c.users = c
            .users
            .checked_add(1)
            .ok_or(VerbError::InsufficientResources)?;
        Ok(())
    }

    /// Records that a work queue of `cq` went away (unknown CQs are ignored).
    pub fn release(&mut self, cq: CqId) {
        if let Some(c) = self.cqs.get_mut(cq.0) {
            c.users = c.users.saturating_sub(1);
        }
    }

    /// Number of CQs.
    pub fn len(&self) -> usize {
        self.cqs.len()
    }

    /// True if there is no CQ.
    pub fn is_empty(&self) -> bool {
        self.cqs.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{QpId, Stag};

    fn cqe(wr_id: u64, status: WcStatus, opcode: WcOpcode, solicited: bool) -> Cqe {
        Cqe {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            qp: QpId(1),
            invalidated: None::<Stag>,
            solicited,
        }
    }

    fn ok(wr_id: u64) -> Cqe {
        cqe(wr_id, WcStatus::Success, WcOpcode::Send, false)
    }

    fn new_cq(depth: usize) -> (CqTable, CqId) {
        let mut t = CqTable::new(4, 64);
        let (id, d) = t.create(depth).unwrap();
        assert_eq!(d, depth);
        (t, id)
    }

    #[test]
    fn push_poll_fifo() {
        let (mut t, id) = new_cq(4);
        let cq = t.get_mut(id).unwrap();
        for i in 0..3 {
            assert_eq!(cq.push(ok(i)), Ok(Notify::Quiet));
        }
        let mut out = [ok(99); 2];
        assert_eq!(cq.poll(&mut out), 2);
        assert_eq!((out[0].wr_id, out[1].wr_id), (0, 1));
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, 2);
        assert_eq!(cq.poll(&mut out), 0, "CQ empty");
        assert_eq!(cq.poll(&mut []), 0);
    }

    #[test]
    fn overflow_is_detected_and_reported_once_per_episode() {
        let (mut t, id) = new_cq(2);
        let cq = t.get_mut(id).unwrap();
        assert_eq!(cq.push(ok(1)), Ok(Notify::Quiet));
        assert_eq!(cq.push(ok(2)), Ok(Notify::Quiet));
        assert_eq!(cq.push(ok(3)), Err(CqOverflow { first: true }));
        assert_eq!(cq.push(ok(4)), Err(CqOverflow { first: false }));
        assert_eq!(cq.overflows(), 2);
        assert_eq!(cq.len(), 2, "existing CQEs are not overwritten");
        let mut out = [ok(0); 1];
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, 1);
        assert_eq!(cq.push(ok(5)), Ok(Notify::Quiet));
        assert_eq!(cq.push(ok(6)), Err(CqOverflow { first: true }));
    }

    #[test]
    fn overflow_of_one_cq_does_not_touch_another() {
        let mut t = CqTable::new(2, 8);
        let (a, _) = t.create(1).unwrap();
        let (b, _) = t.create(1).unwrap();
        assert_eq!(t.get_mut(a).unwrap().push(ok(1)), Ok(Notify::Quiet));
        assert!(t.get_mut(a).unwrap().push(ok(2)).is_err());
        assert_eq!(t.get_mut(b).unwrap().push(ok(3)), Ok(Notify::Quiet));
    }

    #[test]
    fn next_completion_is_one_shot() {
        let (mut t, id) = new_cq(8);
        let cq = t.get_mut(id).unwrap();
        assert_eq!(cq.push(ok(1)), Ok(Notify::Quiet), "not armed");
        cq.arm(NotifyMode::NextCompletion);
        assert_eq!(cq.armed(), Some(NotifyMode::NextCompletion));
        assert_eq!(cq.push(ok(2)), Ok(Notify::Event));
        assert_eq!(cq.armed(), None);
        assert_eq!(cq.push(ok(3)), Ok(Notify::Quiet), "one shot");
    }

    #[test]
    fn cqes_present_at_arm_time_do_not_trigger() {
        let (mut t, id) = new_cq(8);
        let cq = t.get_mut(id).unwrap();
        assert_eq!(cq.push(ok(1)), Ok(Notify::Quiet));
        cq.arm(NotifyMode::NextCompletion);
        let mut out = [ok(0); 4];
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(
            cq.armed(),
            Some(NotifyMode::NextCompletion),
            "polling does not disarm"
        );
        assert_eq!(cq.push(ok(2)), Ok(Notify::Event));
    }

    #[test]
    fn solicited_fires_on_solicited_receive_or_error_only() {
        let (mut t, id) = new_cq(16);
        let cq = t.get_mut(id).unwrap();
        cq.arm(NotifyMode::Solicited);
        assert_eq!(cq.push(ok(1)), Ok(Notify::Quiet), "send completion");
        let plain_recv = cqe(2, WcStatus::Success, WcOpcode::Recv, false);
        assert_eq!(cq.push(plain_recv), Ok(Notify::Quiet));
        let se_recv = cqe(3, WcStatus::Success, WcOpcode::Recv, true);
        assert_eq!(cq.push(se_recv), Ok(Notify::Event));
        assert_eq!(cq.push(se_recv), Ok(Notify::Quiet), "one shot");

        cq.arm(NotifyMode::Solicited);
        let err = cqe(4, WcStatus::BaseBounds, WcOpcode::Write, false);
        assert_eq!(cq.push(err), Ok(Notify::Event), "any error completion");
        cq.arm(NotifyMode::Solicited);
        let flushed = cqe(5, WcStatus::Flushed, WcOpcode::Recv, false);
        assert_eq!(cq.push(flushed), Ok(Notify::Event));
    }

    #[test]
    fn arming_while_armed_keeps_the_wider_mode() {
        let (mut t, id) = new_cq(8);
        let cq = t.get_mut(id).unwrap();
        cq.arm(NotifyMode::Solicited);
        cq.arm(NotifyMode::Solicited);
        assert_eq!(cq.armed(), Some(NotifyMode::Solicited));
        cq.arm(NotifyMode::NextCompletion);
        cq.arm(NotifyMode::Solicited);
        assert_eq!(cq.armed(), Some(NotifyMode::NextCompletion));
        assert_eq!(cq.push(ok(1)), Ok(Notify::Event));
        assert_eq!(
            cq.push(ok(2)),
            Ok(Notify::Quiet),
            "handler called only once"
        );
    }

    #[test]
    fn overflowing_push_does_not_consume_the_arming() {
        let (mut t, id) = new_cq(1);
        let cq = t.get_mut(id).unwrap();
        assert_eq!(cq.push(ok(1)), Ok(Notify::Quiet));
        cq.arm(NotifyMode::NextCompletion);
        assert!(cq.push(ok(2)).is_err());
        assert_eq!(cq.armed(), Some(NotifyMode::NextCompletion));
    }

    #[test]
    fn resize_keeps_entries_and_refuses_to_shrink_below_count() {
        let (mut t, id) = new_cq(4);
        for i in 0..3 {
            assert_eq!(t.get_mut(id).unwrap().push(ok(i)), Ok(Notify::Quiet));
        }
        assert_eq!(t.resize(id, 2), Err(VerbError::CqShrinkFailed));
        assert_eq!(t.query(id), Ok(4), "unchanged after failure");
        assert_eq!(t.resize(id, 65), Err(VerbError::CqTooLarge));
        assert_eq!(t.resize(id, 3), Ok(3));
        let cq = t.get_mut(id).unwrap();
        assert!(cq.push(ok(9)).is_err(), "new depth enforced");
        let mut out = [ok(0); 8];
        assert_eq!(cq.poll(&mut out), 3);
        assert_eq!([out[0].wr_id, out[1].wr_id, out[2].wr_id], [0, 1, 2]);
        assert_eq!(t.resize(id, 10), Ok(10));
        assert_eq!(t.resize(CqId(0), 10), Err(VerbError::InvalidCq));
    }

    #[test]
    fn create_limits() {
        let mut t = CqTable::new(1, 16);
        assert_eq!(t.create(17), Err(VerbError::CqTooLarge));
        assert_eq!(t.create(0).unwrap().1, 1, "at least one entry");
        assert_eq!(t.create(1), Err(VerbError::InsufficientResources));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn destroy_with_users_fails() {
        let (mut t, id) = new_cq(4);
        t.acquire(id).unwrap();
        assert_eq!(t.destroy(id), Err(VerbError::CqInUse));
        assert_eq!(t.get(id).unwrap().users(), 1);
        t.release(id);
        assert_eq!(t.destroy(id), Ok(()));
        assert_eq!(t.destroy(id), Err(VerbError::InvalidCq));
        assert_eq!(t.acquire(id), Err(VerbError::InvalidCq));
        assert_eq!(t.query(id), Err(VerbError::InvalidCq));
        assert!(t.is_empty());
    }
}
