//! Completions: engine CQ → the client's CQ sub-ring of this core, with the engine QP
//! id replaced by the client's QP handle, then the arm check and the wake-up notice.
//!
//! One slot of every sub-ring stays free for the [`crate::CQE_FLAG_RING_MOVED`] marker
//! of a resize, so a sub-ring of `entries` slots holds `entries - 1` completions.

use iwarp_engine::Engine;
use iwarp_shm_ring::{encode_cqe, CqeSlot, CQE_SLOT_SIZE};
use iwarp_types::{CqId, Cqe, QpId, WcStatus};

use crate::request::{AsyncObject, ServiceNotice};
use crate::rings::NO_QP_HANDLE;
use crate::service::ShmService;
use crate::tables::STASH_MAX;

impl ShmService {
    /// Queues an error completion made by the service for `cq` (after the engine's
    /// completions produced so far) and writes what fits.
    pub(crate) fn complete_error(&mut self, engine: &mut Engine, cq: CqId, cqe: Cqe) {
        let Some(e) = self.cqs.get_mut(&cq) else {
            return;
        };
        if e.stash.len() < STASH_MAX {
            e.stash.push(cqe);
        }
        self.forward_cq(engine, cq);
    }

    /// A CqNotify (or a pending CQ): move completions, keep the engine CQ armed.
    pub(crate) fn forward_cq(&mut self, engine: &mut Engine, cq: CqId) {
        if self.forward(engine, cq) {
            self.mark_cq_pending(cq);
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

    /// Serves the CQs left over (a full ring, a long engine CQ, a wake-up to retry).
    pub(crate) fn serve_cq_pending(&mut self, engine: &mut Engine) {
        let n = self.cq_pending.len();
        for i in 0..n {
            let cq = self.cq_pending[i];
            if let Some(e) = self.cqs.get_mut(&cq) {
                e.pending = false;
            }
            if self.forward(engine, cq) {
                self.mark_cq_pending(cq);
            }
        }
        self.cq_pending.drain(..n);
    }

    /// Moves the stash, then up to `cqe_burst` engine CQEs, into the ring; fires the
    /// arm. True if anything is left for later.
    fn forward(&mut self, engine: &mut Engine, cq: CqId) -> bool {
        let Some(e) = self.cqs.get_mut(&cq) else {
            return false;
        };
        let client = e.client;
        let mut free = match e.ring.free() {
            Ok(f) => (f as usize).saturating_sub(1),
            Err(_) => {
                // The client broke the CQ ring's consumer index: stop feeding it.
                if !e.broken {
                    e.broken = true;
                    let handle = e.handle;
                    self.counters.rings_corrupt += 1;
                    self.notify(ServiceNotice::RingCorrupt {
                        client,
                        object: AsyncObject::Cq(handle),
                    });
                }
                return false;
            }
        };
        let mut written = 0u64;
        let mut fire_solicited = false;
        // The stash first: error completions of slots served earlier.
        let mut stashed = 0;
        while stashed < e.stash.len() && free > 0 {
            let c = e.stash[stashed];
            if e.ring.push(&encode_cqe(&c)).is_err() {
                break;
            }
            stashed += 1;
            free -= 1;
            written += 1;
            fire_solicited = true;
        }
        e.stash.drain(..stashed);
        let mut more = !e.stash.is_empty();
        if e.stash.is_empty() {
            let want = free.min(self.cqes.len());
            let n = if want > 0 {
                engine
                    .rnic_mut()
                    .poll_cq(cq, &mut self.cqes[..want])
                    .unwrap_or(0)
            } else {
                0
            };
            for c in &mut self.cqes[..n] {
                let handle = self.qps.get(&c.qp).map_or(NO_QP_HANDLE, |q| q.handle);
                c.qp = QpId(handle);
                fire_solicited |= c.solicited || c.status != WcStatus::Success;
                if e.ring.push(&encode_cqe(c)).is_ok() {
                    written += 1;
                }
            }
            // A full burst may leave more; a full ring leaves the rest in the engine CQ.
            more |= n == want;
            if want == 0 {
                e.control.add_overflow();
                if let Some(c) = self.clients.get_mut(&client) {
                    c.stats.cq_ring_full += 1;
                }
            }
        }
        // Keep the engine CQ armed: its next completion is a CqNotify event.
        let _ = engine.rnic_mut().req_notify_cq(cq, false);
        if written > 0 && e.control.try_fire(fire_solicited) {
            e.wake_pending = true;
        }
        let wake = e.wake_pending.then_some(e.handle);
        if let Some(c) = self.clients.get_mut(&client) {
            c.stats.cqes += written;
        }
        if let Some(handle) = wake {
            let sent = self.notify(ServiceNotice::CqWake { client, cq: handle });
            if sent {
                if let Some(e) = self.cqs.get_mut(&cq) {
                    e.wake_pending = false;
                }
            } else {
                // Retried on the next poll: a wake-up is never lost.
                self.counters.notices_dropped -= 1;
                more = true;
            }
        }
        more
    }

    /// Writes the resize marker into a CQ's current ring (the slot kept free for it).
    pub(crate) fn push_ring_moved(ring: &mut iwarp_shm_ring::Producer) -> bool {
        let mut b = [0u8; CQE_SLOT_SIZE];
        b[core::mem::offset_of!(CqeSlot, flags)] = crate::CQE_FLAG_RING_MOVED;
        b[core::mem::offset_of!(CqeSlot, qp)..core::mem::offset_of!(CqeSlot, qp) + 4]
            .copy_from_slice(&NO_QP_HANDLE.to_ne_bytes());
        ring.push(&b).is_ok()
    }
}
