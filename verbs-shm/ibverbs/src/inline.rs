//! Inline data (`IBV_SEND_INLINE`): the library copies a WR's bytes when it is posted, so
//! the application may reuse (or never have registered) its buffer as soon as
//! `ibv_post_send` returns, and the SGEs' `lkey`s are ignored, as rdma-core's providers do.
//!
//! A hardware RNIC copies inline bytes into its WQE. The shared-memory SQ slot carries an
//! SGL, not bytes, and the dataplane reads the payload from registered memory when it
//! sends (and again when it retransmits), so the copy goes into a per-QP staging area of
//! registered memory ([`InlineSq`]): `slots` strides of `stride` bytes, one per SQ
//! position. Position `seq % slots` may be reused once WR `seq - slots` has completed.
//!
//! Completion tracking: send completions come in posting order (RC), one per signaled WR
//! (and all WRs of an unsignaled run before it are then complete). The QP notes the
//! sequence number of every signaled WR it posts ([`InlineSq::note_posted`]); each send
//! completion polled from the QP's send CQ retires the oldest ([`InlineSq::note_completed`]).
//! A WR that would stage into a position still in use is refused with `ENOMEM`, the
//! answer of a full SQ. After a QP error the flushed WRs may all complete, signaled or not:
//! the tracker may then run ahead, harmlessly, since a QP in error sends nothing again.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

use iwarp_verbs::{Access, Arena, Mr, Pd, SgList, Sge};

use crate::sys;

/// The largest `max_inline_data` a QP gets (a request above is refused with `EINVAL`,
/// as rdma-core's providers refuse caps they cannot give). perftest asks 220 (WRITE)
/// and 236 (SEND) for its latency tests.
pub(crate) const MAX_INLINE_DATA: u32 = 512;

/// Staging strides are whole cache lines.
const STRIDE_ALIGN: usize = 64;

/// The staging area and completion tracker of one QP's inline WRs.
pub(crate) struct InlineSq {
    max_inline: u32,
    stride: usize,
    slots: u64,
    mr: Mr,
    state: Mutex<Track>,
}

/// What the post and poll paths share (under [`InlineSq::state`]).
pub(crate) struct Track {
    /// The staging memory (kept here for `&mut` access while a WR is staged).
    arena: Arena,
    pub(crate) seq: SeqTrack,
}

/// The sequence arithmetic of the SQ's WRs.
#[derive(Debug)]
pub(crate) struct SeqTrack {
    /// WRs posted on the SQ so far (every opcode: they all complete in order).
    posted: u64,
    /// WRs known complete: every WR below this sequence number.
    done: u64,
    /// Sequence numbers of the signaled WRs not yet completed, oldest first. Bounded by
    /// `signaled_max`: a WR beyond is refused (`ENOMEM`) before it is posted.
    signaled: VecDeque<u64>,
    signaled_max: usize,
}

impl InlineSq {
    /// A staging area for a QP of `sq_depth` send WRs with `max_inline` bytes each, in
    /// memory of the QP's PD.
    pub(crate) fn new(pd: &Pd, sq_depth: u32, max_inline: u32) -> iwarp_verbs::Result<InlineSq> {
        let stride = (max_inline as usize).div_ceil(STRIDE_ALIGN).max(1) * STRIDE_ALIGN;
        let slots = sq_depth.max(1) as usize;
        let len = stride * slots;
        let arena = pd.context().alloc_arena(len)?;
        let mr = pd.reg_mr(&arena, 0, len, Access::NONE)?;
        // A signaled WR is in the SQ ring or in the dataplane's SQ: both hold at most
        // about `sq_depth` (the ring's entries round up to a power of two); four times
        // that never refuses a WR the verbs allow.
        let signaled_max = slots * 4 + 64;
        Ok(InlineSq {
            max_inline,
            stride,
            slots: slots as u64,
            mr,
            state: Mutex::new(Track {
                arena,
                seq: SeqTrack::new(signaled_max),
            }),
        })
    }

    /// The `max_inline_data` granted.
    pub(crate) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// The tracker, locked (the QP's post path holds it across a list of WRs).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Track> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies the bytes of `sges` (application memory, keys ignored) into the staging
    /// position of the next WR; its SGL, or the errno (`EINVAL`: longer than
    /// `max_inline_data`; `ENOMEM`: the position is still in use, the SQ is full).
    ///
    /// # Safety
    ///
    /// Each SGE's `[addr, addr + length)` is readable memory of the application
    /// (`ibv_post_send(3)` with `IBV_SEND_INLINE`).
    pub(crate) unsafe fn stage(
        &self,
        t: &mut Track,
        sges: &[sys::ibv_sge],
    ) -> Result<SgList, c_int> {
        let total = sges
            .iter()
            .try_fold(0u64, |n, s| n.checked_add(u64::from(s.length)))
            .ok_or(libc::EINVAL)?;
        if total > u64::from(self.max_inline) {
            return Err(libc::EINVAL);
        }
        t.seq.check_room(self.slots)?;
        let off = (t.seq.posted % self.slots) as usize * self.stride;
        let dst = &mut t.arena.as_mut_slice()[off..off + self.stride];
        let mut at = 0usize;
        for s in sges {
            let n = s.length as usize;
            if n == 0 {
                continue;
            }
            if s.addr == 0 {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller's contract: the SGE names `n` readable bytes of the
            // application; `at + n <= total <= max_inline <= stride`.
            let src = unsafe { std::slice::from_raw_parts(s.addr as usize as *const u8, n) };
            dst[at..at + n].copy_from_slice(src);
            at += n;
        }
        let mut l = SgList::new();
        if total > 0 {
            l.push(Sge {
                addr: self.mr.addr() + off as u64,
                length: total as u32,
                lkey: self.mr.lkey(),
            })
            .map_err(|_| libc::EINVAL)?;
        }
        Ok(l)
    }

    /// Retires the oldest signaled WR: a send completion of the QP was polled.
    pub(crate) fn note_completed(&self) {
        self.lock().seq.retire_oldest();
    }

    /// `ENOMEM` unless a WR that stages nothing may be posted now (the signaled list
    /// has room).
    pub(crate) fn check_room(&self, t: &Track) -> Result<(), c_int> {
        t.seq.check_room(u64::MAX)
    }
}

impl SeqTrack {
    fn new(signaled_max: usize) -> SeqTrack {
        SeqTrack {
            posted: 0,
            done: 0,
            signaled: VecDeque::with_capacity(signaled_max),
            signaled_max,
        }
    }

    /// `ENOMEM` unless the next WR may be posted: at most `slots` WRs are incomplete
    /// with it, and the signaled list has room.
    fn check_room(&self, slots: u64) -> Result<(), c_int> {
        if self.posted - self.done >= slots || self.signaled.len() >= self.signaled_max {
            return Err(libc::ENOMEM);
        }
        Ok(())
    }

    /// Records a WR the SQ accepted.
    pub(crate) fn note_posted(&mut self, signaled: bool) {
        if signaled {
            self.signaled.push_back(self.posted);
        }
        self.posted += 1;
    }

    /// The oldest signaled WR completed, and every WR before it.
    fn retire_oldest(&mut self) {
        if let Some(seq) = self.signaled.pop_front() {
            self.done = self.done.max(seq + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_is_reused_only_after_its_wr_completed() {
        let mut t = SeqTrack::new(64);
        // Four positions; WRs 0..3 unsignaled but 3, which completes them all.
        for i in 0..4 {
            t.check_room(4).unwrap();
            t.note_posted(i == 3);
        }
        assert_eq!(t.check_room(4), Err(libc::ENOMEM), "all four in use");
        t.retire_oldest();
        assert_eq!(t.done, 4);
        t.check_room(4).unwrap();
    }

    #[test]
    fn completions_retire_in_posting_order() {
        let mut t = SeqTrack::new(64);
        for i in 0..8 {
            t.note_posted(i % 2 == 1); // 1, 3, 5, 7 signaled
        }
        t.retire_oldest();
        assert_eq!(t.done, 2, "WR 1 and WR 0 before it");
        assert!(t.check_room(6).is_err(), "WRs 2..8 are six in flight");
        assert!(t.check_room(7).is_ok());
        t.retire_oldest();
        assert_eq!(t.done, 4);
        assert!(t.check_room(4).is_err(), "WRs 4..8 are four in flight");
        assert!(t.check_room(5).is_ok());
    }

    #[test]
    fn the_signaled_list_is_bounded() {
        let mut t = SeqTrack::new(2);
        t.note_posted(true);
        t.note_posted(true);
        assert_eq!(t.check_room(u64::MAX), Err(libc::ENOMEM));
        t.retire_oldest();
        assert_eq!(t.check_room(u64::MAX), Ok(()));
    }

    #[test]
    fn a_completion_with_nothing_signaled_changes_nothing() {
        let mut t = SeqTrack::new(4);
        t.note_posted(false);
        t.retire_oldest();
        assert_eq!((t.posted, t.done), (1, 0));
    }
}
