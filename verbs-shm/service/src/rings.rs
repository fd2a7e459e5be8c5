//! Serving the client-to-core rings: doorbells → pending list → bounded bursts of
//! slots, decoded and posted to the engine; a slot that does not decode or that the
//! engine refuses completes in error.

use iwarp_engine::Engine;
use iwarp_rdma::PostError;
use iwarp_shm_ring::{
    decode_recv_wr, decode_send_wr_into, RingError, RECV_SLOT_SIZE, SEND_SLOT_SIZE,
};
use iwarp_types::{
    Cqe, QpId, QpState, SendFlags, SendOp, SendWr, SrqId, VerbError, WcOpcode, WcStatus,
};

use crate::request::{AsyncObject, ServiceNotice};
use crate::service::ShmService;
use crate::tables::{Bell, RxRing};

/// The `qp` of an error completion that belongs to no QP (a malformed SRQ slot).
pub const NO_QP_HANDLE: u32 = u32::MAX;

/// The completion status of a WR the engine refused at post time.
pub(crate) fn status_of(e: VerbError) -> WcStatus {
    match e {
        VerbError::InvalidStag => WcStatus::InvalidStag,
        VerbError::InvalidLength => WcStatus::InvalidLength,
        VerbError::InvalidVa => WcStatus::InvalidVa,
        VerbError::InvalidAccessRights => WcStatus::InvalidAccessRights,
        VerbError::InvalidPd => WcStatus::InvalidPd,
        VerbError::InvalidQpState => WcStatus::Flushed,
        _ => WcStatus::InvalidWqe,
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
            invalidate_local, ..
        } => {
            if *invalidate_local {
                WcOpcode::ReadInv
            } else {
                WcOpcode::Read
            }
        }
        SendOp::Bind { .. } => WcOpcode::Bind,
        SendOp::FastReg { .. } => WcOpcode::FastReg,
        SendOp::LocalInv { .. } => WcOpcode::LocalInv,
    }
}

/// An error completion for `wr_id`.
fn error_cqe(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp: u32) -> Cqe {
    Cqe {
        wr_id,
        status,
        opcode,
        byte_len: 0,
        qp: QpId(qp),
        invalidated: None,
        solicited: false,
    }
}

/// Slot `i` of the `N`-byte slots a `pop_burst` put in `slots`, decoded where it lies
/// (None past the buffer). A copy into a local array first made the decoder's 16-byte
/// loads wait on the copy's stores (store forwarding across two stores fails): a third
/// of the decode's time in the daemon's profile (docs/BENCHMARKS.md).
fn popped<const N: usize>(slots: &[u8], i: usize) -> Option<&[u8; N]> {
    slots.as_chunks::<N>().0.get(i)
}

impl ShmService {
    /// Takes every attached client's doorbells of this core and queues the rings they
    /// name (each ring at most once).
    pub(crate) fn take_doorbells(&mut self) {
        let (qps, srqs) = (&mut self.qps, &mut self.srqs);
        let (pending_sq, pending_rx) = (&mut self.pending_sq, &mut self.pending_rx);
        for c in self.clients.values_mut() {
            // Nothing rung (the common poll): `rung` is empty (cleared below after every
            // take), so neither scanned nor cleared (64 words each).
            if !c.doorbells.take(&mut c.rung) {
                continue;
            }
            let bells = &c.bells;
            let stats = &mut c.stats;
            for b in c.rung.iter() {
                match bells.get(b as usize).copied().unwrap_or(Bell::None) {
                    Bell::None => stats.stray_doorbells += 1,
                    Bell::Sq(qp) => {
                        if let Some(q) = qps.get_mut(&qp) {
                            if !q.sq_pending
                                && !q.broken
                                && pending_sq.len() < pending_sq.capacity()
                            {
                                q.sq_pending = true;
                                pending_sq.push(qp);
                            }
                        }
                    }
                    Bell::Rq(qp) => {
                        if let Some(q) = qps.get_mut(&qp) {
                            if !q.rq_pending
                                && !q.broken
                                && pending_rx.len() < pending_rx.capacity()
                            {
                                q.rq_pending = true;
                                pending_rx.push(RxRing::Rq(qp));
                            }
                        }
                    }
                    Bell::Srq(srq) => {
                        if let Some(s) = srqs.get_mut(&srq) {
                            if !s.pending && !s.broken && pending_rx.len() < pending_rx.capacity() {
                                s.pending = true;
                                pending_rx.push(RxRing::Srq(srq));
                            }
                        }
                    }
                }
            }
            c.rung.clear();
        }
    }

    /// Serves every receive ring whose doorbell was taken, each to the end (bounded by
    /// its depth): before a burst of frames is handled (`App::before_frames`) and in
    /// every `poll`. A receive is cheap to hand over and a frame may need it; the send
    /// queues keep their budget per poll.
    pub(crate) fn serve_receive_rings(&mut self, engine: &mut Engine) {
        // Each ring is in the list at most once (its `pending` flag).
        while let Some(ring) = self.pending_rx.pop() {
            match ring {
                RxRing::Rq(qp) => {
                    self.drain_ring(engine, qp, false);
                    if let Some(q) = self.qps.get_mut(&qp) {
                        q.rq_pending = false;
                    }
                }
                RxRing::Srq(srq) => {
                    self.drain_srq(engine, srq);
                    if let Some(s) = self.srqs.get_mut(&srq) {
                        s.pending = false;
                    }
                }
            }
        }
    }

    /// Serves an SRQ's ring to the end, a burst at a time (bounded by its depth).
    fn drain_srq(&mut self, engine: &mut Engine, srq: SrqId) {
        let Some(s) = self.srqs.get(&srq) else {
            return;
        };
        let entries = s.ring.layout().entries() as usize;
        for _ in 0..=entries / self.burst() {
            if !self.serve_srq(engine, srq) {
                break;
            }
        }
    }

    /// Serves up to `rings_per_poll` send queue rings of the pending list; a ring left
    /// non-empty goes to the back.
    pub(crate) fn serve_pending(&mut self, engine: &mut Engine) {
        let n = self.pending_sq.len().min(self.cfg.rings_per_poll);
        for i in 0..n {
            let qp = self.pending_sq[i];
            if self.serve_sq(engine, qp) {
                // Capacity holds: the ring was in the list and is counted in it.
                self.pending_sq.push(qp);
            } else if let Some(q) = self.qps.get_mut(&qp) {
                q.sq_pending = false;
            }
        }
        self.pending_sq.drain(..n);
    }

    /// Slots taken from one ring per visit.
    fn burst(&self) -> usize {
        self.cfg.ring_burst.max(1)
    }

    /// Serves everything in a QP's SQ ring (`sq`) or RQ ring now, without waiting for
    /// its doorbell: a control request on the QP (on the control socket) can overtake the
    /// doorbell of WRs posted before it, and those must reach the engine first (a
    /// Disconnect's graceful close sends what was posted; an Accept's peer may send as soon
    /// as the MPA Reply arrives). Bounded by the ring's depth, a burst at a time.
    pub(crate) fn drain_ring(&mut self, engine: &mut Engine, qp: QpId, sq: bool) {
        let Some(q) = self.qps.get(&qp) else {
            return;
        };
        let entries = if sq {
            q.sq.layout().entries()
        } else {
            match &q.rq {
                Some((rq, _)) => rq.layout().entries(),
                None => return, // an SRQ: shared, served on its own doorbell
            }
        };
        for _ in 0..=entries as usize / self.burst() {
            let more = if sq {
                self.serve_sq(engine, qp)
            } else {
                self.serve_rq(engine, qp)
            };
            if !more {
                break;
            }
        }
    }

    /// Serves a QP's SQ; true if slots are left.
    fn serve_sq(&mut self, engine: &mut Engine, qp: QpId) -> bool {
        let Some(q) = self.qps.get(&qp) else {
            return false;
        };
        if q.broken {
            return false;
        }
        let (cq, handle, sig_all, client) = (q.send_cq, q.handle, q.sig_all, q.client);
        let want = self.burst();
        let buf = &mut self.slots[..want * SEND_SLOT_SIZE];
        let Some(q) = self.qps.get_mut(&qp) else {
            return false;
        };
        let n = match q.sq.pop_burst(buf) {
            Ok(n) => n,
            Err(RingError::Corrupt { .. }) => {
                self.ring_corrupt_qp(engine, qp);
                return false;
            }
            Err(_) => return false,
        };
        let (mut posted, mut rejected) = (0u64, 0u64);
        for i in 0..n {
            let Some(slot) = popped::<SEND_SLOT_SIZE>(&self.slots, i) else {
                break;
            };
            // Decoded straight into the engine's WQE (posted through the RNIC: the QP's
            // doorbell is rung once for the burst, below); `prepared` keeps the WR's
            // (wr_id, opcode) for a completion the engine's own checks cause after it.
            let mut prepared = (0, WcOpcode::Send);
            let r = engine.rnic_mut().post_send_with(qp, |wr| {
                prepared = self.prepare_send_wr(slot, wr, sig_all, client, handle)?;
                Ok(())
            });
            let r = match r {
                Ok(()) => Ok(()),
                Err(PostError::Write(cqe)) => Err(cqe),
                Err(PostError::Written(e)) => {
                    Err(error_cqe(prepared.0, status_of(e), prepared.1, handle))
                }
                // The QP took no WR (state, depth): the slot, prepared on its own, says
                // which completion, as when the engine was asked with a decoded WR.
                Err(PostError::Verb(e)) => {
                    let mut wr = SendWr::EMPTY;
                    Err(
                        match self.prepare_send_wr(slot, &mut wr, sig_all, client, handle) {
                            Ok((wr_id, op)) => error_cqe(wr_id, status_of(e), op, handle),
                            Err(cqe) => cqe,
                        },
                    )
                }
            };
            match r {
                Ok(()) => posted += 1,
                Err(cqe) => {
                    rejected += 1;
                    self.complete_error(engine, cq, Some(qp), cqe);
                }
            }
        }
        if n > 0 {
            engine.qp_doorbell(qp);
        }
        self.count_wrs(client, posted, rejected);
        n == want
    }

    /// Decodes SQ slot `slot` into `wr` (`SIGNALED` added for a QP that signals all, a
    /// FastReg's arena handle translated) and returns its (wr_id, completion opcode);
    /// the error completion if the slot does not decode (`InvalidWqe`) or names no arena
    /// of the client (`InvalidPd`).
    #[inline(always)]
    fn prepare_send_wr(
        &self,
        slot: &[u8; SEND_SLOT_SIZE],
        wr: &mut SendWr,
        sig_all: bool,
        client: u32,
        handle: u32,
    ) -> Result<(u64, WcOpcode), Cqe> {
        decode_send_wr_into(slot, wr)
            .map_err(|e| error_cqe(e.wr_id, WcStatus::InvalidWqe, WcOpcode::Send, handle))?;
        if sig_all {
            wr.flags = SendFlags(wr.flags.0 | SendFlags::SIGNALED.0);
        }
        let op = wc_opcode(&wr.op);
        if !self.translate_fastreg(client, &mut wr.op) {
            return Err(error_cqe(wr.wr_id, WcStatus::InvalidPd, op, handle));
        }
        Ok((wr.wr_id, op))
    }

    /// A FastReg names the client's arena handle: replace it by the region. False if the
    /// client has no such arena.
    fn translate_fastreg(&self, client: u32, op: &mut SendOp) -> bool {
        if let SendOp::FastReg { region, .. } = op {
            let found = self
                .clients
                .get(&client)
                .and_then(|c| c.arenas.get(&region.0).copied());
            match found {
                Some(r) => *region = r,
                None => return false,
            }
        }
        true
    }

    /// Serves a QP's RQ; true if slots are left.
    fn serve_rq(&mut self, engine: &mut Engine, qp: QpId) -> bool {
        let Some(q) = self.qps.get(&qp) else {
            return false;
        };
        if q.broken || q.rq.is_none() {
            return false;
        }
        let (cq, handle, client) = (q.recv_cq, q.handle, q.client);
        let want = self.burst();
        let buf = &mut self.slots[..want * RECV_SLOT_SIZE];
        let Some((rq, _)) = self.qps.get_mut(&qp).and_then(|q| q.rq.as_mut()) else {
            return false;
        };
        let n = match rq.pop_burst(buf) {
            Ok(n) => n,
            Err(RingError::Corrupt { .. }) => {
                self.ring_corrupt_qp(engine, qp);
                return false;
            }
            Err(_) => return false,
        };
        let (mut posted, mut rejected) = (0u64, 0u64);
        for i in 0..n {
            let Some(slot) = popped::<RECV_SLOT_SIZE>(&self.slots, i) else {
                break;
            };
            let r = match decode_recv_wr(slot) {
                Err(e) => Err(error_cqe(
                    e.wr_id,
                    WcStatus::InvalidWqe,
                    WcOpcode::Recv,
                    handle,
                )),
                Ok(wr) => engine
                    .post_recv(qp, &wr)
                    .map_err(|e| error_cqe(wr.wr_id, status_of(e), WcOpcode::Recv, handle)),
            };
            match r {
                Ok(()) => posted += 1,
                Err(cqe) => {
                    rejected += 1;
                    self.complete_error(engine, cq, Some(qp), cqe);
                }
            }
        }
        self.count_wrs(client, posted, rejected);
        n == want
    }

    /// Serves an SRQ; true if slots are left.
    fn serve_srq(&mut self, engine: &mut Engine, srq: SrqId) -> bool {
        let Some(s) = self.srqs.get(&srq) else {
            return false;
        };
        if s.broken {
            return false;
        }
        let (cq, client) = (s.err_cq, s.client);
        let want = self.burst();
        let buf = &mut self.slots[..want * RECV_SLOT_SIZE];
        let Some(s) = self.srqs.get_mut(&srq) else {
            return false;
        };
        let n = match s.ring.pop_burst(buf) {
            Ok(n) => n,
            Err(RingError::Corrupt { .. }) => {
                s.broken = true;
                self.counters.rings_corrupt += 1;
                let handle = s.handle;
                self.notify(ServiceNotice::RingCorrupt {
                    client,
                    object: AsyncObject::Srq(handle),
                });
                return false;
            }
            Err(_) => return false,
        };
        let (mut posted, mut rejected) = (0u64, 0u64);
        for i in 0..n {
            let Some(slot) = popped::<RECV_SLOT_SIZE>(&self.slots, i) else {
                break;
            };
            let r = match decode_recv_wr(slot) {
                Err(e) => Err(error_cqe(
                    e.wr_id,
                    WcStatus::InvalidWqe,
                    WcOpcode::Recv,
                    NO_QP_HANDLE,
                )),
                Ok(wr) => engine
                    .rnic_mut()
                    .post_srq_recv(srq, &wr)
                    .map_err(|e| error_cqe(wr.wr_id, status_of(e), WcOpcode::Recv, NO_QP_HANDLE)),
            };
            match r {
                Ok(()) => posted += 1,
                Err(cqe) => {
                    rejected += 1;
                    if let Some(cq) = cq {
                        self.complete_error(engine, cq, None, cqe);
                    }
                }
            }
        }
        self.count_wrs(client, posted, rejected);
        n == want
    }

    fn count_wrs(&mut self, client: u32, posted: u64, rejected: u64) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.stats.wrs_posted += posted;
            c.stats.wrs_rejected += rejected;
        }
    }

    /// A QP's ring broke the index protocol: the QP goes to Error (its connection is
    /// reset, its WRs flushed), its rings are never served again, the control thread
    /// hears of it.
    fn ring_corrupt_qp(&mut self, engine: &mut Engine, qp: QpId) {
        let Some(q) = self.qps.get_mut(&qp) else {
            return;
        };
        q.broken = true;
        let (client, handle) = (q.client, q.handle);
        self.counters.rings_corrupt += 1;
        let m = iwarp_rdma::QpModify {
            state: Some(QpState::Error),
            ..Default::default()
        };
        let _ = engine.modify_qp(qp, &m);
        self.notify(ServiceNotice::RingCorrupt {
            client,
            object: AsyncObject::Qp(handle),
        });
    }
}
