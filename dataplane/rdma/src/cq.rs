//! Completion queues (verbs sections 5.3, 8.2.4, 8.2.5 and 9.2.3).
//!
//! A [`Cq`] is a bounded ring of [`Cqe`] whose storage is allocated at create (and at
//! resize, a control-path verb), never on the data path. Overflow is detected: a push
//! into a full CQ is refused with [`CqOverflow`] and the caller raises the asynchronous
//! events (inventory 4.5). Notification follows verbs 8.2.5: arming is one-shot, arming
//! while armed keeps the wider mode, CQEs already queued at arm time do not trigger, and
//! "solicited" mode fires on a solicited receive or on any completion in error.

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

/// What a successful [`Cq::push`] asks of the caller.
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

/// A completion queue.
pub struct Cq {
    ring: VecDeque<Cqe>,
    depth: usize,
    armed: Option<NotifyMode>,
    users: u32,
    overflowing: bool,
    overflows: u64,
    handler: u32,
}

impl Cq {
    fn new(depth: usize) -> Cq {
        Cq {
            ring: VecDeque::with_capacity(depth),
            depth,
            armed: None,
            users: 0,
            overflowing: false,
            overflows: 0,
            handler: 0,
        }
    }

    /// Adds a completion. Returns whether a CQ event is due, or [`CqOverflow`] if the CQ
    /// is full (the CQE is dropped and counted; other CQs and QPs are unaffected).
    pub fn push(&mut self, cqe: Cqe) -> Result<Notify, CqOverflow> {
        if self.ring.len() >= self.depth {
            let first = !self.overflowing;
            self.overflowing = true;
            self.overflows = self.overflows.saturating_add(1);
            return Err(CqOverflow { first });
        }
        self.overflowing = false;
        self.ring.push_back(cqe);
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

    /// Poll for Completion: moves up to `out.len()` CQEs, oldest first, into `out` and
    /// returns how many. Each CQE is returned at most once.
    pub fn poll(&mut self, out: &mut [Cqe]) -> usize {
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

    /// Request Completion Notification. One-shot; arming while armed has no further
    /// effect except that "next completion" wins over "solicited" (verbs 8.2.5). CQEs
    /// already queued do not trigger.
    pub fn arm(&mut self, mode: NotifyMode) {
        self.armed = match (self.armed, mode) {
            (Some(NotifyMode::NextCompletion), _) | (_, NotifyMode::NextCompletion) => {
                Some(NotifyMode::NextCompletion)
            }
            _ => Some(NotifyMode::Solicited),
        };
    }

    /// The current arming, if any.
    pub fn armed(&self) -> Option<NotifyMode> {
        self.armed
    }

    /// Number of queued CQEs.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True if no CQE is queued.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Allocated number of entries.
    pub fn depth(&self) -> usize {
        self.depth
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
            .insert(Cq::new(depth))
            .ok_or(VerbError::InsufficientResources)?;
        Ok((CqId(id), depth))
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
    /// Fails atomically: `InvalidCq`, `CqTooLarge`, or `CqShrinkFailed` if more CQEs are
    /// queued than `depth`. Returns the allocated depth.
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
