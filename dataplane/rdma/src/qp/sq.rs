//! The send queue: WQEs in post order, their progress, and in-order retirement into the
//! send CQ (verbs 8.1.3.1, 8.2.2 rules 1-2, 8.2.4).

use iwarp_types::{Cqe, SendFlags, SendOp, SendWr, WcOpcode, WcStatus, MAX_SGE};

use crate::ctx::{Ctx, Loc};
use crate::qp::sq_ring::WqeRing;
use crate::qp::Qp;

/// Where one SQ WQE is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqPhase {
    /// Posted, not started.
    Posted,
    /// Send or Write being segmented (`sent` bytes handed out so far).
    Segmenting,
    /// Every segment handed out; waiting for the last one to be acknowledged.
    AwaitAck,
    /// Read Request handed out; waiting for the last Read Response segment.
    AwaitResponse,
    /// Finished with `status`; waiting for older WQEs before its completion is reported.
    Done(WcStatus),
}

/// One send-queue WQE.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SqEntry {
    /// The consumer's WR.
    pub wr: SendWr,
    /// Post sequence number (monotonic per QP).
    pub seq: u64,
    /// Progress.
    pub phase: SqPhase,
    /// Bytes handed out as DDP payload so far.
    pub sent: u32,
    /// Message length (sum of the SGL).
    pub len: u32,
    /// MSN of an untagged message (Sends, Read Request).
    pub msn: u32,
    /// The SGL resolved to caller memory when the WQE started (Send / Write sources).
    pub locs: [Loc; MAX_SGE],
    /// The [`MemTable`](crate::mem::MemTable) epoch at which `locs` were resolved; `None`
    /// when they must be checked again anyway (STag 0 SGEs depend on the caller's arenas).
    pub locs_epoch: Option<u64>,
    /// A completion was already reported (error completions are reported at once).
    pub reported: bool,
}

/// What the slots of a [`WqeRing`] hold before their first WQE.
pub(crate) const BLANK_ENTRY: SqEntry = SqEntry::new(SendWr::EMPTY, 0);

impl SqEntry {
    pub(crate) const fn new(wr: SendWr, seq: u64) -> SqEntry {
        SqEntry {
            wr,
            seq,
            phase: SqPhase::Posted,
            sent: 0,
            len: 0,
            msn: 0,
            locs: [Loc::EMPTY; MAX_SGE],
            locs_epoch: None,
            reported: false,
        }
    }

    /// The completion opcode of this WR.
    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        wc_opcode(&self.wr.op)
    }

    /// Signaled WR.
    pub(crate) fn signaled(&self) -> bool {
        self.wr.flags.contains(SendFlags::SIGNALED)
    }
}

/// The completion opcode of a send operation.
pub(crate) fn wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send => WcOpcode::Send,
        SendOp::SendSe => WcOpcode::SendSe,
        SendOp::SendInv { .. } => WcOpcode::SendInv,
        SendOp::SendSeInv { .. } => WcOpcode::SendSeInv,
        SendOp::Write { .. } => WcOpcode::Write,
        SendOp::Read {
            invalidate_local: false,
            ..
        } => WcOpcode::Read,
        SendOp::Read {
            invalidate_local: true,
            ..
        } => WcOpcode::ReadInv,
        SendOp::Bind { .. } => WcOpcode::Bind,
        SendOp::FastReg { .. } => WcOpcode::FastReg,
        SendOp::LocalInv { .. } => WcOpcode::LocalInv,
    }
}

/// The bounded send queue.
pub(crate) struct SendQueue {
    /// Outstanding WQEs, oldest first.
    pub q: WqeRing,
    /// Allocated depth.
    pub depth: usize,
    /// Sequence number the next posted WR gets.
    pub next_seq: u64,
    /// Sequence number of the next WQE to start.
    pub cursor: u64,
}

impl SendQueue {
    pub(crate) fn new(depth: usize) -> SendQueue {
        SendQueue {
            q: WqeRing::with_capacity(depth),
            depth,
            next_seq: 0,
            cursor: 0,
        }
    }

    /// Sequence number of the oldest WQE (`next_seq` when empty). WQEs enter at the back
    /// numbered `next_seq` and leave at the front, so the ring holds the consecutive
    /// numbers below `next_seq`: no read of the front entry (every lookup by sequence
    /// number asks, several times per segment).
    #[inline]
    pub(crate) fn front_seq(&self) -> u64 {
        self.next_seq - self.q.len() as u64
    }

    /// The WQE with sequence number `seq`.
    #[inline]
    pub(crate) fn get(&self, seq: u64) -> Option<&SqEntry> {
        let i = usize::try_from(seq.checked_sub(self.front_seq())?).ok()?;
        self.q.get(i).filter(|e| e.seq == seq)
    }

    /// The WQE with sequence number `seq`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut SqEntry> {
        let i = usize::try_from(seq.checked_sub(self.front_seq())?).ok()?;
        self.q.get_mut(i).filter(|e| e.seq == seq)
    }

    /// Appends a WR (a copy into [`WqeRing::next_wr`], then [`SendQueue::commit`]);
    /// false if the ring is full. Posting goes through `Rnic::post_send_with`.
    #[cfg(test)]
    pub(crate) fn push(&mut self, wr: &SendWr) -> bool {
        match self.q.next_wr() {
            Some(w) => *w = *wr,
            None => return false,
        }
        self.commit()
    }

    /// Appends the WR written through [`WqeRing::next_wr`] ([`WqeRing::commit`]).
    #[inline]
    pub(crate) fn commit(&mut self) -> bool {
        let pushed = self.q.commit(self.next_seq);
        if pushed {
            self.next_seq += 1;
        }
        pushed
    }

    /// True if no WQE is outstanding.
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

impl Qp {
    /// Marks WQE `seq` finished with `status`. An error completion is reported at once
    /// (verbs 6.2.4: it need not be at the head); successes wait for older WQEs.
    pub(crate) fn sq_finish(&mut self, ctx: &mut Ctx<'_>, seq: u64, status: WcStatus) {
        let qp = self.cqe_qp;
        let cq = self.attr.send_cq;
        let Some(e) = self.sq.get_mut(seq) else {
            return;
        };
        e.phase = SqPhase::Done(status);
        if status != WcStatus::Success && !e.reported {
            e.reported = true;
            let cqe = sq_cqe(e, status, qp);
            ctx.complete(cq, cqe);
        }
        self.sq_retire(ctx);
    }

    /// Pops finished WQEs from the head, reporting signaled successes (verbs 8.2.4: no
    /// completion for a successful unsignaled WR).
    pub(crate) fn sq_retire(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(e) = self.sq.q.front() {
            let SqPhase::Done(status) = e.phase else {
                break;
            };
            if !e.reported && (status != WcStatus::Success || e.signaled()) {
                let cqe = sq_cqe(e, status, self.cqe_qp);
                ctx.complete(self.attr.send_cq, cqe);
            }
            self.sq.q.pop_front();
        }
        if self.sq.cursor < self.sq.front_seq() {
            self.sq.cursor = self.sq.front_seq();
        }
    }

    /// Completes every outstanding SQ WQE with `Flushed` (or, for the one a received
    /// Terminate relates to, `RemoteAccessError` or `RemoteTermination`), signaled or not,
    /// and empties the queue.
    pub(crate) fn sq_flush(&mut self, ctx: &mut Ctx<'_>) {
        let related = self.term_related.take();
        while let Some(&e) = self.sq.q.front() {
            self.sq.q.pop_front();
            if e.reported {
                continue;
            }
            let status = match e.phase {
                SqPhase::Done(WcStatus::Success) if !e.signaled() => continue,
                SqPhase::Done(s) => s,
                _ if related.is_some_and(|(seq, _)| seq == e.seq) => {
                    related.map_or(WcStatus::RemoteTermination, |(_, s)| s)
                }
                _ => WcStatus::Flushed,
            };
            ctx.complete(self.attr.send_cq, sq_cqe(&e, status, self.cqe_qp));
        }
        self.sq.cursor = self.sq.next_seq;
        self.orq.clear();
    }
}

/// The work completion of an SQ WQE.
pub(crate) fn sq_cqe(e: &SqEntry, status: WcStatus, qp: iwarp_types::QpId) -> Cqe {
    Cqe {
        wr_id: e.wr.wr_id,
        status,
        opcode: e.wc_opcode(),
        byte_len: 0,
        qp,
        invalidated: None,
        solicited: false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use iwarp_types::SgList;

    /// A signaled Send without data, `wr_id` `id`.
    pub(crate) fn wr(id: u64) -> SendWr {
        SendWr {
            wr_id: id,
            op: SendOp::Send,
            sgl: SgList::new(),
            flags: SendFlags::SIGNALED,
        }
    }

    /// The front's number is the oldest WQE's, and every held number is found, through
    /// posts, completions, wrap-around and a deepened ring.
    #[test]
    fn the_front_number_follows_posts_pops_and_growth() {
        let mut q = SendQueue::new(3);
        let mut x: u32 = 7;
        for step in 0..2_000u64 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            if step == 700 {
                q.q.grow_to(5);
                q.depth = 5;
            }
            if x >> 16 & 1 == 0 {
                let _ = q.push(&wr(step));
            } else {
                q.q.pop_front();
            }
            let oldest = q.q.front().map_or(q.next_seq, |e| e.seq);
            assert_eq!(q.front_seq(), oldest, "step {step}");
            for seq in q.front_seq()..q.next_seq {
                assert_eq!(q.get(seq).map(|e| e.seq), Some(seq), "step {step}");
            }
            assert!(q.get(q.next_seq).is_none());
            assert!(q.front_seq() == 0 || q.get(q.front_seq() - 1).is_none());
        }
    }

    #[test]
    fn lookup_by_sequence_number() {
        let mut q = SendQueue::new(4);
        assert_eq!(q.front_seq(), 0);
        assert!(q.push(&wr(10)) && q.push(&wr(11)) && q.push(&wr(12)));
        assert!(q.get(0).is_some_and(|e| e.phase == SqPhase::Posted
            && e.locs == [Loc::EMPTY; MAX_SGE]
            && e.locs_epoch.is_none()
            && !e.reported
            && (e.sent, e.len, e.msn) == (0, 0, 0)));
        assert_eq!(q.get(1).map(|e| e.wr.wr_id), Some(11));
        q.q.pop_front();
        assert_eq!(q.front_seq(), 1);
        assert!(q.get(0).is_none());
        assert_eq!(q.get(2).map(|e| e.wr.wr_id), Some(12));
        assert!(q.get(3).is_none());
        assert!(q.get(u64::MAX).is_none());
        assert_eq!(
            wc_opcode(&SendOp::Read {
                remote_to: 0,
                rkey: iwarp_types::Stag(0),
                invalidate_local: true
            }),
            WcOpcode::ReadInv
        );
    }
}
