//! The tables a QP works with, borrowed from the [`Rnic`](crate::Rnic) for one call: the
//! only place where the QP code meets the CQ, SRQ and STag tables and the event queues.

use std::collections::VecDeque;

use iwarp_types::{
    Access, AsyncEvent, AsyncEventKind, CqId, Cqe, EventResource, Memory, PdId, QpId, RecvWr,
    SendOp, Sge, SrqId, Stag, TermCode, WcStatus,
};

use crate::cq::{CqTable, Notify};
use crate::mem::{FastRegAttr, MemTable, MwBind, Placement, RemoteAccessError, RemoteOp};
use crate::pd::PdTable;
use crate::srq::SrqTable;

/// Where validated bytes live in caller memory.
pub(crate) type Loc = Placement;

/// A bounded queue that counts what it had to drop.
pub(crate) struct BoundedQueue<T> {
    q: VecDeque<T>,
    cap: usize,
    /// Items dropped because the queue was full.
    pub dropped: u64,
}

impl<T> BoundedQueue<T> {
    pub(crate) fn new(cap: usize) -> BoundedQueue<T> {
        BoundedQueue {
            q: VecDeque::with_capacity(cap),
            cap,
            dropped: 0,
        }
    }

    /// Appends, or counts the item as dropped if the queue is full (then false).
    pub(crate) fn push(&mut self, v: T) -> bool {
        if self.q.len() >= self.cap {
            self.dropped = self.dropped.saturating_add(1);
            false
        } else {
            self.q.push_back(v);
            true
        }
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        self.q.pop_front()
    }
}

/// Borrowed tables for one QP operation.
pub(crate) struct Ctx<'a> {
    pub mem: &'a mut MemTable,
    pub cqs: &'a mut CqTable,
    pub srqs: &'a mut SrqTable,
    pub events: &'a mut BoundedQueue<AsyncEvent>,
    pub cq_events: &'a mut BoundedQueue<CqId>,
    /// Arena lengths, for Fast-Register (absent when the caller gave no memory).
    pub arenas: Option<&'a dyn Memory>,
    /// A completion could not be queued (CQ full or gone) during this call.
    pub cq_error: bool,
    /// The PD table, for [`Ctx::multi_stream_pd`] (asked only by Send with Invalidate,
    /// so not computed on every call).
    pub pds: &'a PdTable,
    /// The RNIC lets remote invalidation reach regions of PDs shared by several QPs.
    pub remote_inv_shared_pd: bool,
}

impl Ctx<'_> {
    /// The strict remote-invalidate rule applies to `pd`: it holds other QPs too (unless
    /// the RNIC allows remote invalidation on shared PDs).
    pub(crate) fn multi_stream_pd(&self, pd: PdId) -> bool {
        !self.remote_inv_shared_pd && self.pds.qps(pd) > 1
    }

    /// Writes a completion into the CQ's sink; raises the CQ event if the CQ was armed
    /// for it. A full CQ refuses it, raises "CQ Overflow Detected" once and flags
    /// `cq_error` so the RNIC moves the QP to Terminate (verbs 4.5: CQ/SQ or CQ/RQ error,
    /// 0x0207).
    #[inline]
    pub(crate) fn complete(&mut self, cq: CqId, cqe: Cqe) {
        if !complete_into(self.cqs, self.events, self.cq_events, cq, cqe) {
            self.cq_error = true;
        }
    }

    /// Raises a QP-affiliated asynchronous event.
    pub(crate) fn qp_event(&mut self, qp: QpId, kind: AsyncEventKind) {
        self.events.push(AsyncEvent {
            resource: EventResource::Qp(qp),
            kind,
        });
    }

    /// Checks a local SGE for `need` on a QP of `pd`. STag 0 is allowed only on a
    /// `privileged` QP and is checked against the arena lengths of `arenas` (verbs 7.2.1).
    pub(crate) fn resolve_local(
        &self,
        sge: &Sge,
        need: Access,
        pd: PdId,
        privileged: bool,
        arenas: Option<&dyn Memory>,
    ) -> Result<Loc, WcStatus> {
        if sge.lkey == Stag::ZERO && sge.length > 0 {
            return crate::mem::resolve_stag0(sge, privileged, arenas.or(self.arenas));
        }
        self.mem.resolve_local(pd, sge, need)
    }

    /// Checks an inbound tagged access (QP attributes are the caller's to check).
    pub(crate) fn resolve_remote(
        &self,
        stag: Stag,
        to: u64,
        len: u64,
        op: RemoteOp,
        qp: QpId,
        pd: PdId,
    ) -> Result<Loc, RemoteAccessError> {
        self.mem.resolve_remote(qp, pd, stag, to, len, op)
    }

    /// Incoming Send with Invalidate: the Terminate code on refusal.
    pub(crate) fn invalidate_remote(
        &mut self,
        stag: Stag,
        qp: QpId,
        pd: PdId,
    ) -> Result<(), TermCode> {
        self.mem
            .invalidate_remote_on_stream(qp, pd, stag, self.multi_stream_pd(pd))
    }

    /// Invalidate Local STag (WR, or after a Read with Invalidate Local STag).
    pub(crate) fn invalidate_local(
        &mut self,
        stag: Stag,
        qp: QpId,
        pd: PdId,
    ) -> Result<(), WcStatus> {
        self.mem.invalidate_local(qp, pd, stag)
    }

    /// Runs a local SQ operation (Bind, Fast-Register, Invalidate Local STag).
    pub(crate) fn local_op(
        &mut self,
        op: &SendOp,
        qp: QpId,
        pd: PdId,
        bind_enabled: bool,
        privileged: bool,
    ) -> Result<(), WcStatus> {
        if let Some(b) = MwBind::from_op(op) {
            return self.mem.bind_mw(qp, pd, bind_enabled, &b);
        }
        if let Some(f) = FastRegAttr::from_op(op) {
            let region_len = self.arenas.and_then(|m| m.region_len(f.region));
            return self.mem.fast_reg(pd, privileged, &f, region_len);
        }
        match *op {
            SendOp::LocalInv { stag } => self.invalidate_local(stag, qp, pd),
            _ => Err(WcStatus::InvalidWqe),
        }
    }

    /// Takes a receive WR from `srq` for an incoming Send, with the PD its SGEs are
    /// checked against; raises the SRQ limit event if it fired.
    pub(crate) fn srq_take(&mut self, srq: SrqId) -> Option<(RecvWr, PdId)> {
        let s = self.srqs.get_mut(srq)?;
        let pd = s.pd();
        let t = s.take()?;
        if let Some(ev) = t.limit_event {
            self.events.push(ev);
        }
        Some((t.wr, pd))
    }
}

/// Writes `cqe` into `cq`'s sink and queues the CQ notification it fired (one at a time
/// for a sink-backed CQ) or "CQ Overflow Detected" (once per episode). False if the
/// completion could not be written (CQ full or gone): the caller reports the CQ error.
#[inline]
pub(crate) fn complete_into(
    cqs: &mut CqTable,
    events: &mut BoundedQueue<AsyncEvent>,
    cq_events: &mut BoundedQueue<CqId>,
    cq: CqId,
    cqe: Cqe,
) -> bool {
    let Some(c) = cqs.get_mut(cq) else {
        return false;
    };
    match c.push(cqe) {
        Ok(Notify::Event) => {
            if c.notification_due() && !cq_events.push(cq) {
                // Dropped (counted): the next one may be queued.
                c.notification_taken();
            }
            true
        }
        Ok(Notify::Quiet) => true,
        Err(o) => {
            if o.first {
                events.push(AsyncEvent {
                    resource: EventResource::Cq(cq),
                    kind: AsyncEventKind::CqOverflow,
                });
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_queue_counts_overflow() {
        let mut q = BoundedQueue::new(2);
        q.push(1);
        q.push(2);
        q.push(3);
        assert_eq!(q.dropped, 1);
        assert_eq!((q.pop(), q.pop(), q.pop()), (Some(1), Some(2), None));
    }
}
