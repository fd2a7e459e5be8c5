//! Completions: [`RingSink`], the engine CQ's sink for a client CQ, writes each completion
//! straight into the client's CQ sub-ring of this core, and its arm is the CQ's control
//! line ([`CqControl`]); the wake-ups it fires reach the control thread as
//! [`ServiceNotice::CqWake`].
//!
//! One slot of every sub-ring stays free for the [`crate::CQE_FLAG_RING_MOVED`] marker
//! of a resize, so a sub-ring of `entries` slots holds `entries - 1` completions: the
//! depth of the engine CQ. A completion that finds the sub-ring full is refused: the
//! engine raises "CQ Overflow Detected" and moves the QP to Terminate with a CQ error
//! (verbs), the control line's `overflows` word counts it; nothing unread is overwritten.

use iwarp_engine::Engine;
use iwarp_rdma::cq::{CqFull, CqSink, Notify, NotifyMode};
use iwarp_shm_ring::{encode_cqe, CqControl, CqeSlot, Producer, RingError, CQE_SLOT_SIZE};
use iwarp_types::{CqId, Cqe, QpId, WcStatus};

use crate::request::{AsyncObject, ClientId, ServiceNotice};
use crate::rings::NO_QP_HANDLE;
use crate::service::ShmService;

/// The sink of a client CQ's engine CQ: the client's CQ sub-ring of this core (shared
/// memory, written through the ring's checked atomic views) and the CQ's control line.
pub(crate) struct RingSink {
    ring: Producer,
    control: CqControl,
    /// The client broke the sub-ring's consumer index: nothing is written any more
    /// (every completion is refused: a CQ error).
    broken: bool,
    /// `broken` was reported (a `RingCorrupt` notice).
    broken_noticed: bool,
    /// Completions written.
    written: u64,
    /// Completions refused because the sub-ring was full.
    full: u64,
}

impl RingSink {
    pub(crate) fn new(ring: Producer, control: CqControl) -> RingSink {
        RingSink {
            ring,
            control,
            broken: false,
            broken_noticed: false,
            written: 0,
            full: 0,
        }
    }

    /// Completions a sub-ring of `entries` slots holds.
    pub(crate) fn capacity(entries: u32) -> usize {
        entries.saturating_sub(1) as usize
    }

    /// Resize: the marker goes into the current sub-ring (the slot kept free for it),
    /// completions continue in `ring`.
    pub(crate) fn move_to(&mut self, mut ring: Producer) {
        let mut b = [0u8; CQE_SLOT_SIZE];
        b[core::mem::offset_of!(CqeSlot, flags)] = crate::CQE_FLAG_RING_MOVED;
        b[core::mem::offset_of!(CqeSlot, qp)..core::mem::offset_of!(CqeSlot, qp) + 4]
            .copy_from_slice(&NO_QP_HANDLE.to_ne_bytes());
        // A broken consumer index refuses it: that client reads nothing more anyway.
        let _ = self.ring.push(&b);
        core::mem::swap(&mut self.ring, &mut ring);
    }

    /// Completions written and refused (full sub-ring) so far.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.written, self.full)
    }

    /// True once after the consumer index was found broken.
    pub(crate) fn take_broken(&mut self) -> bool {
        let news = self.broken && !self.broken_noticed;
        self.broken_noticed |= self.broken;
        news
    }
}

impl CqSink for RingSink {
    /// Encodes `cqe` into the next slot (keeping the marker's slot free), publishes it,
    /// then asks the control line whether the client's arm fires for it.
    #[inline]
    fn push(&mut self, cqe: &Cqe) -> Result<Notify, CqFull> {
        if self.broken {
            return Err(CqFull);
        }
        match self.ring.push_keeping(&encode_cqe(cqe), 1) {
            Ok(()) => {}
            Err(RingError::Full) => {
                self.full += 1;
                self.control.add_overflow();
                return Err(CqFull);
            }
            Err(_) => {
                // The client broke the consumer index: stop feeding the sub-ring.
                self.broken = true;
                return Err(CqFull);
            }
        }
        self.written += 1;
        let solicited_or_error = cqe.solicited || cqe.status != WcStatus::Success;
        if self.control.try_fire(solicited_or_error) {
            Ok(Notify::Event)
        } else {
            Ok(Notify::Quiet)
        }
    }

    /// `Rnic::req_notify_cq` on this CQ: the arm is the control line's (the client
    /// normally writes it itself).
    fn arm(&mut self, mode: NotifyMode) {
        self.control.arm(mode == NotifyMode::Solicited);
    }

    fn depth(&self) -> usize {
        RingSink::capacity(self.ring.layout().entries())
    }
}

impl ShmService {
    /// An error completion made by the service (a slot that does not decode, a WR the
    /// engine refused) into `cq`'s sink, after every completion so far; `qp` (its
    /// engine QP) goes to Terminate if the CQ has no room for it.
    pub(crate) fn complete_error(
        &mut self,
        engine: &mut Engine,
        cq: CqId,
        qp: Option<QpId>,
        cqe: Cqe,
    ) {
        if engine.push_completion(cq, cqe, qp) == Ok(false) {
            self.check_ring(engine, cq);
        }
    }

    /// `Event::CqNotify`: the client's arm fired while a completion was written: queue
    /// the wake-up (retried each poll until it fits the notice queue: never lost).
    pub(crate) fn cq_fired(&mut self, cq: CqId) {
        let Some(e) = self.cqs.get_mut(&cq) else {
            return;
        };
        e.wake_pending = true;
        self.send_wake(cq);
    }

    /// Sends a pending wake-up; true if one is still pending.
    fn send_wake(&mut self, cq: CqId) -> bool {
        let Some(e) = self.cqs.get(&cq) else {
            return false;
        };
        if !e.wake_pending {
            return false;
        }
        let (client, handle) = (e.client, e.handle);
        if self.notify(ServiceNotice::CqWake { client, cq: handle }) {
            if let Some(e) = self.cqs.get_mut(&cq) {
                e.wake_pending = false;
            }
            false
        } else {
            // Retried on the next poll: a wake-up is never lost.
            self.counters.notices_dropped -= 1;
            self.mark_cq_pending(cq);
            true
        }
    }

    pub(crate) fn mark_cq_pending(&mut self, cq: CqId) {
        if let Some(e) = self.cqs.get_mut(&cq) {
            if !e.pending && self.cq_pending.len() < self.cq_pending.capacity() {
                e.pending = true;
                self.cq_pending.push(cq);
            }
        }
    }

    /// Retries the wake-ups the notice queue had no room for.
    pub(crate) fn serve_cq_pending(&mut self) {
        let n = self.cq_pending.len();
        for i in 0..n {
            let cq = self.cq_pending[i];
            if let Some(e) = self.cqs.get_mut(&cq) {
                e.pending = false;
            }
            self.send_wake(cq);
        }
        self.cq_pending.drain(..n);
    }

    /// A completion into `cq` was refused: if its sub-ring's consumer index is broken
    /// (found now), the control thread hears of it once (`RingCorrupt`). True if so.
    pub(crate) fn check_ring(&mut self, engine: &mut Engine, cq: CqId) -> bool {
        let broken = engine
            .rnic_mut()
            .cq_sink_mut::<RingSink>(cq)
            .is_some_and(RingSink::take_broken);
        let Some(e) = self.cqs.get(&cq) else {
            return false;
        };
        if broken {
            let (client, handle) = (e.client, e.handle);
            self.counters.rings_corrupt += 1;
            self.notify(ServiceNotice::RingCorrupt {
                client,
                object: AsyncObject::Cq(handle),
            });
        }
        broken
    }

    /// Destroys the engine CQ `cq` of `client`; the completions its sub-rings took (and
    /// refused) go to the client's counters.
    pub(crate) fn destroy_engine_cq(
        &mut self,
        engine: &mut Engine,
        cq: CqId,
        client: ClientId,
    ) -> Result<(), iwarp_types::VerbError> {
        let stats = engine.rnic().cq_sink::<RingSink>(cq).map(RingSink::stats);
        engine.rnic_mut().destroy_cq(cq)?;
        if let (Some((written, full)), Some(c)) = (stats, self.clients.get_mut(&client)) {
            c.stats.cqes += written;
            c.stats.cq_ring_full += full;
        }
        Ok(())
    }
}
