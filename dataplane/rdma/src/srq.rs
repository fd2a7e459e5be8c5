//! Shared receive queues (verbs sections 6.3 and 9.2.4).
//!
//! An [`Srq`] is a bounded FIFO of [`RecvWr`] in one PD. Its limit event is one-shot: once
//! armed (at create if the limit is non-zero, or by [`SrqTable::modify`]), the first
//! [`Srq::take`] that leaves fewer posted WRs than the limit returns a
//! `SrqLimitReached` event and disarms. QPs using an SRQ hold a use count on it.

use crate::pd::PdTable;
use crate::slab::Slab;
use iwarp_types::{
    AsyncEvent, AsyncEventKind, EventResource, PdId, RecvWr, SrqId, VerbError, MAX_SGE,
};
use std::collections::VecDeque;

/// Limits of an [`SrqTable`], from the engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqConfig {
    /// Maximum number of SRQs.
    pub max_srqs: usize,
    /// Maximum outstanding WRs of one SRQ.
    pub max_wr: usize,
    /// Maximum SGEs per SRQ WR (at most [`MAX_SGE`]).
    pub max_sge: usize,
}

/// The attributes Query S-RQ returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// Allocated maximum of outstanding WRs.
    pub max_wr: usize,
    /// Allocated SGEs per WR.
    pub max_sge: usize,
    /// The PD.
    pub pd: PdId,
    /// The S-RQ limit.
    pub limit: usize,
    /// The limit event is armed.
    pub armed: bool,
}

/// Arguments of Modify S-RQ; `None` leaves an attribute as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqModify {
    /// New maximum of outstanding WRs.
    pub max_wr: Option<usize>,
    /// New S-RQ limit.
    pub limit: Option<usize>,
    /// Arm (or re-arm) the limit event.
    pub arm: bool,
}

/// A receive WR taken from an SRQ, with the limit event it caused, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqTake {
    /// The WR (its completion goes to the consuming QP's RQ CQ).
    pub wr: RecvWr,
    /// `SrqLimitReached`, affiliated with this SRQ, to raise now.
    pub limit_event: Option<AsyncEvent>,
}

/// A shared receive queue.
pub struct Srq {
    id: SrqId,
    pd: PdId,
    wrs: VecDeque<RecvWr>,
    max_wr: usize,
    max_sge: usize,
    limit: usize,
    armed: bool,
    users: u32,
}

impl Srq {
    /// PostRQ on the SRQ: `TooManySges` if the SGL is longer than allocated,
    /// `TooManyWrsPosted` if the SRQ is full (the SRQ is unchanged on error).
    pub fn post(&mut self, wr: RecvWr) -> Result<(), VerbError> {
        if wr.sgl.len() > self.max_sge {
            return Err(VerbError::TooManySges);
        }
        if self.wrs.len() >= self.max_wr {
            return Err(VerbError::TooManyWrsPosted);
        }
        self.wrs.push_back(wr);
        Ok(())
    }

    /// Takes the oldest posted WR for an incoming Send (arrival-order dequeue).
    pub fn take(&mut self) -> Option<SrqTake> {
        let wr = self.wrs.pop_front()?;
        let limit_event = if self.armed && self.wrs.len() < self.limit {
            self.armed = false;
            Some(AsyncEvent {
                resource: EventResource::Srq(self.id),
                kind: AsyncEventKind::SrqLimitReached,
            })
        } else {
            None
        };
        Some(SrqTake { wr, limit_event })
    }

    /// Number of posted WRs.
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    /// True if no WR is posted.
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// The PD (receive SGEs of WRs from this SRQ are checked against it).
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// Query S-RQ.
    pub fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            pd: self.pd,
            limit: self.limit,
            armed: self.armed,
        }
    }

    /// Number of QPs using this SRQ.
    pub fn users(&self) -> u32 {
        self.users
    }
}

/// The bounded table of shared receive queues of one engine.
pub struct SrqTable {
    srqs: Slab<Srq>,
    cfg: SrqConfig,
}

impl SrqTable {
    /// A table with the limits of `cfg` (`max_sge` is capped at [`MAX_SGE`]).
    pub fn new(cfg: SrqConfig) -> SrqTable {
        let cfg = SrqConfig {
            max_sge: cfg.max_sge.min(MAX_SGE),
            ..cfg
        };
        SrqTable {
            srqs: Slab::new(cfg.max_srqs),
            cfg,
        }
    }

    /// Create S-RQ in `pd` (which gains a use). Returns the handle, the allocated
    /// maximum of WRs and the allocated SGEs per WR. The limit is armed if non-zero.
    /// Errors: `InvalidPd`, `TooManyWrsRequested`, `TooManySges`, `LimitOutOfRange`
    /// (limit above the allocated maximum), `InsufficientResources`.
    pub fn create(
        &mut self,
        pds: &mut PdTable,
        pd: PdId,
        max_wr: usize,
        max_sge: usize,
        limit: usize,
    ) -> Result<(SrqId, usize, usize), VerbError> {
        if !pds.contains(pd) {
            return Err(VerbError::InvalidPd);
        }
        if max_wr > self.cfg.max_wr {
            return Err(VerbError::TooManyWrsRequested);
        }
        if max_sge > self.cfg.max_sge {
            return Err(VerbError::TooManySges);
        }
        let max_wr = max_wr.max(1);
        let max_sge = max_sge.max(1);
        if limit > max_wr {
            return Err(VerbError::LimitOutOfRange);
        }
        if self.srqs.len() >= self.srqs.capacity() {
            return Err(VerbError::InsufficientResources);
        }
        pds.acquire(pd)?;
        let srq = Srq {
            id: SrqId(0),
            pd,
            wrs: VecDeque::with_capacity(max_wr),
            max_wr,
            max_sge,
            limit,
            armed: limit > 0,
            users: 0,
        };
        let Some(handle) = self.srqs.insert(srq) else {
            pds.release(pd);
            return Err(VerbError::InsufficientResources);
        };
        let id = SrqId(handle);
        if let Some(s) = self.srqs.get_mut(handle) {
            s.id = id;
        }
        Ok((id, max_wr, max_sge))
    }

    /// The SRQ, if it exists.
    pub fn get(&self, srq: SrqId) -> Option<&Srq> {
        self.srqs.get(srq.0)
    }

    /// The SRQ, if it exists, mutably (post, take).
    pub fn get_mut(&mut self, srq: SrqId) -> Option<&mut Srq> {
        self.srqs.get_mut(srq.0)
    }

    /// Query S-RQ.
    pub fn query(&self, srq: SrqId) -> Result<SrqAttr, VerbError> {
        self.get(srq).map(Srq::attr).ok_or(VerbError::InvalidSrq)
    }

    /// Modify S-RQ, all or nothing. Errors: `InvalidSrq`; `TooManyWrsRequested` above the
    /// engine limit; `QueueShrinkFailed` if more WRs are posted than the new maximum;
    /// `InvalidModifier` if the maximum would drop below an armed limit; `LimitOutOfRange`
    /// if the limit exceeds the maximum. Re-arming an armed limit is allowed. A limit
    /// already undershot fires on the next [`Srq::take`]. Returns the allocated maximum.
    pub fn modify(&mut self, srq: SrqId, m: SrqModify) -> Result<usize, VerbError> {
        let cap = self.cfg.max_wr;
        let s = self.srqs.get_mut(srq.0).ok_or(VerbError::InvalidSrq)?;
        let max_wr = match m.max_wr {
            Some(n) if n > cap => return Err(VerbError::TooManyWrsRequested),
            Some(n) => n.max(1),
            None => s.max_wr,
        };
        if max_wr < s.wrs.len() {
            return Err(VerbError::QueueShrinkFailed);
        }
        let limit = m.limit.unwrap_or(s.limit);
        let armed = s.armed || m.arm;
        if m.max_wr.is_some() && armed && max_wr < limit {
            return Err(VerbError::InvalidModifier);
        }
        if limit > max_wr {
            return Err(VerbError::LimitOutOfRange);
        }
        if max_wr > s.wrs.capacity() {
            s.wrs.reserve_exact(max_wr - s.wrs.len());
        }
        s.max_wr = max_wr;
        s.limit = limit;
        s.armed = armed && limit > 0;
        Ok(max_wr)
    }

    /// Destroy S-RQ: `InvalidSrq`, or `SrqInUse` while QPs use it. Posted WRs are dropped
    /// (no completions) and the PD loses a use.
    pub fn destroy(&mut self, pds: &mut PdTable, srq: SrqId) -> Result<(), VerbError> {
        match self.srqs.get(srq.0) {
            None => Err(VerbError::InvalidSrq),
            Some(s) if s.users > 0 => Err(VerbError::SrqInUse),
            Some(_) => {
                if let Some(s) = self.srqs.remove(srq.0) {
                    pds.release(s.pd);
                }
                Ok(())
            }
        }
    }

    /// Records one more QP using `srq` (`InvalidSrq` if it does not exist).
    pub fn acquire(&mut self, srq: SrqId) -> Result<(), VerbError> {
        let s = self.srqs.get_mut(srq.0).ok_or(VerbError::InvalidSrq)?;
        s.users = s
            .users
            .checked_add(1)
            .ok_or(VerbError::InsufficientResources)?;
        Ok(())
    }

    /// Records that a QP of `srq` went away (unknown SRQs are ignored).
    pub fn release(&mut self, srq: SrqId) {
        if let Some(s) = self.srqs.get_mut(srq.0) {
            s.users = s.users.saturating_sub(1);
        }
    }

    /// Number of SRQs.
    pub fn len(&self) -> usize {
        self.srqs.len()
    }

    /// True if there is no SRQ.
    pub fn is_empty(&self) -> bool {
        self.srqs.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{SgList, Sge, Stag};

    fn wr(id: u64) -> RecvWr {
        RecvWr {
            wr_id: id,
            sgl: SgList::single(Sge {
                addr: 0,
                length: 8,
                lkey: Stag(0x100),
            }),
        }
    }

    fn setup(max_wr: usize, limit: usize) -> (PdTable, SrqTable, PdId, SrqId) {
        let mut pds = PdTable::new(4);
        let pd = pds.alloc().unwrap();
        let mut t = SrqTable::new(SrqConfig {
            max_srqs: 2,
            max_wr: 16,
            max_sge: 4,
        });
        let (id, got, sge) = t.create(&mut pds, pd, max_wr, 2, limit).unwrap();
        assert_eq!((got, sge), (max_wr, 2));
        (pds, t, pd, id)
    }

    #[test]
    fn create_errors() {
        let mut pds = PdTable::new(4);
        let pd = pds.alloc().unwrap();
        let mut t = SrqTable::new(SrqConfig {
            max_srqs: 1,
            max_wr: 8,
            max_sge: 2,
        });
        assert_eq!(
            t.create(&mut pds, PdId(99), 4, 1, 0),
            Err(VerbError::InvalidPd)
        );
        assert_eq!(
            t.create(&mut pds, pd, 9, 1, 0),
            Err(VerbError::TooManyWrsRequested)
        );
        assert_eq!(t.create(&mut pds, pd, 4, 3, 0), Err(VerbError::TooManySges));
        assert_eq!(
            t.create(&mut pds, pd, 4, 1, 5),
            Err(VerbError::LimitOutOfRange)
        );
        assert_eq!(
            pds.users(pd),
            Some(0),
            "failed creates take no PD reference"
        );
        let (id, _, _) = t.create(&mut pds, pd, 4, 1, 4).unwrap();
        assert_eq!(
            t.create(&mut pds, pd, 4, 1, 0),
            Err(VerbError::InsufficientResources)
        );
        assert_eq!(pds.users(pd), Some(1));
        assert_eq!(pds.dealloc(pd), Err(VerbError::PdInUse));
        t.destroy(&mut pds, id).unwrap();
        assert_eq!(pds.dealloc(pd), Ok(()));
    }

    #[test]
    fn post_take_fifo_and_bounds() {
        let (_pds, mut t, pd, id) = setup(2, 0);
        let s = t.get_mut(id).unwrap();
        assert_eq!(s.pd(), pd);
        s.post(wr(1)).unwrap();
        s.post(wr(2)).unwrap();
        assert_eq!(s.post(wr(3)), Err(VerbError::TooManyWrsPosted));
        let sges = [Sge::default(); 3];
        let long = RecvWr {
            wr_id: 4,
            sgl: SgList::from_slice(&sges).unwrap(),
        };
        assert_eq!(s.post(long), Err(VerbError::TooManySges));
        assert_eq!(s.take().unwrap().wr.wr_id, 1);
        assert_eq!(s.take().unwrap().wr.wr_id, 2);
        assert!(s.take().is_none());
    }

    #[test]
    fn limit_event_is_one_shot_and_rearmable() {
        let (_pds, mut t, _pd, id) = setup(8, 2);
        assert!(
            t.query(id).unwrap().armed,
            "armed at create when the limit is non-zero"
        );
        let s = t.get_mut(id).unwrap();
        for i in 0..4 {
            s.post(wr(i)).unwrap();
        }
        assert_eq!(s.take().unwrap().limit_event, None, "3 left");
        assert_eq!(
            s.take().unwrap().limit_event,
            None,
            "2 left: not below the limit"
        );
        let ev = s.take().unwrap().limit_event.unwrap();
        assert_eq!(ev.resource, EventResource::Srq(id));
        assert_eq!(ev.kind, AsyncEventKind::SrqLimitReached);
        assert_eq!(s.take().unwrap().limit_event, None, "one shot");
        assert!(!s.attr().armed);

        t.modify(
            id,
            SrqModify {
                arm: true,
                ..Default::default()
            },
        )
        .unwrap();
        t.modify(
            id,
            SrqModify {
                arm: true,
                ..Default::default()
            },
        )
        .unwrap();
        let s = t.get_mut(id).unwrap();
        s.post(wr(9)).unwrap();
        assert!(
            s.take().unwrap().limit_event.is_some(),
            "re-armed, still below the limit"
        );
    }

    #[test]
    fn limit_zero_never_fires() {
        let (_pds, mut t, _pd, id) = setup(4, 0);
        assert!(!t.query(id).unwrap().armed);
        t.modify(
            id,
            SrqModify {
                arm: true,
                ..Default::default()
            },
        )
        .unwrap();
        let s = t.get_mut(id).unwrap();
        s.post(wr(1)).unwrap();
        assert_eq!(s.take().unwrap().limit_event, None);
    }

    #[test]
    fn modify_rules() {
        let (_pds, mut t, _pd, id) = setup(8, 3);
        for i in 0..5 {
            t.get_mut(id).unwrap().post(wr(i)).unwrap();
        }
        let m = |max_wr, limit, arm| SrqModify { max_wr, limit, arm };
        assert_eq!(
            t.modify(id, m(Some(17), None, false)),
            Err(VerbError::TooManyWrsRequested)
        );
        assert_eq!(
            t.modify(id, m(Some(4), None, false)),
            Err(VerbError::QueueShrinkFailed)
        );
        assert_eq!(
            t.modify(id, m(Some(5), Some(6), false)),
            Err(VerbError::InvalidModifier)
        );
        assert_eq!(
            t.modify(id, m(None, Some(9), false)),
            Err(VerbError::LimitOutOfRange)
        );
        assert_eq!(t.query(id).unwrap().max_wr, 8, "unchanged after errors");
        assert_eq!(t.query(id).unwrap().limit, 3);
        assert_eq!(t.modify(id, m(Some(12), Some(1), false)), Ok(12));
        let a = t.query(id).unwrap();
        assert_eq!((a.max_wr, a.limit, a.armed), (12, 1, true));
        for i in 5..12 {
            t.get_mut(id).unwrap().post(wr(i)).unwrap();
        }
        assert_eq!(
            t.get_mut(id).unwrap().post(wr(12)),
            Err(VerbError::TooManyWrsPosted)
        );
        assert_eq!(
            t.modify(SrqId(0), m(None, None, true)),
            Err(VerbError::InvalidSrq)
        );
        // Unarmed: the maximum may go below the limit only if the limit follows.
        let (_p2, mut t2, _pd2, id2) = setup(8, 0);
        assert_eq!(
            t2.modify(id2, m(Some(2), Some(3), false)),
            Err(VerbError::LimitOutOfRange)
        );
        assert_eq!(t2.modify(id2, m(Some(2), Some(2), false)), Ok(2));
    }

    #[test]
    fn destroy_in_use_and_with_posted_wrs() {
        let (mut pds, mut t, pd, id) = setup(4, 0);
        t.get_mut(id).unwrap().post(wr(1)).unwrap();
        t.acquire(id).unwrap();
        assert_eq!(t.destroy(&mut pds, id), Err(VerbError::SrqInUse));
        assert_eq!(t.get(id).unwrap().users(), 1);
        t.release(id);
        assert_eq!(t.destroy(&mut pds, id), Ok(()), "allowed with WRs posted");
        assert_eq!(t.destroy(&mut pds, id), Err(VerbError::InvalidSrq));
        assert_eq!(t.query(id), Err(VerbError::InvalidSrq));
        assert_eq!(t.acquire(id), Err(VerbError::InvalidSrq));
        assert_eq!(pds.users(pd), Some(0));
        assert!(t.is_empty());
    }
}
