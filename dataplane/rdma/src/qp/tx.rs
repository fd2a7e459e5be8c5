//! Outbound DDP segments: choosing the next one (Terminate, then the message in progress,
//! then Read Responses, then the SQ in post order with fences and ORD), regenerating its
//! bytes from registered memory (`fill`), and acknowledgements.

use iwarp_types::{QpState, SendFlags, SendOp, Stag, TermCode, WcStatus};
use iwarp_wire::ddp;
use iwarp_wire::rdmap::Opcode;

use iwarp_wire::rdmap::READ_REQUEST_LEN;

use super::fill::send_opcode;

use crate::ctx::{Ctx, Loc};
use crate::qp::sq::{SqEntry, SqPhase};
use crate::qp::{IrqEntry, OrqEntry, Qp, RtrKind, TermCause, QN_READ, QN_SEND};

/// Smallest `max_ulpdu_len` the QP segments for: the longest header-only ULPDU (a
/// Terminate with both headers) must fit.
pub const MIN_ULPDU_LEN: usize = crate::qp::term::TERM_MAX_LEN;

/// A queued outbound DDP segment: a small descriptor from which [`crate::Rnic::fill_ulpdu`]
/// regenerates the same bytes any number of times (retransmission re-reads memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxUlpdu {
    pub(super) what: TxWhat,
    /// An RDMA Write segment of an SQ WQE (tagged header).
    pub(super) tagged: bool,
    pub(super) msn: u32,
    pub(super) offset: u32,
    pub(super) len: u32,
    pub(super) last: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TxWhat {
    /// A segment of SQ WQE `seq` (Send types, RDMA Write).
    Sq { seq: u64 },
    /// An RDMA Read Request (self-contained: its WR may complete before TCP acks it).
    ReadReq {
        sink_stag: Stag,
        sink_to: u64,
        size: u32,
        src_stag: Stag,
        src_to: u64,
    },
    /// A Read Response segment; `to` is the sink TO of the message start, `src_stag` and
    /// `src_to` name the data source of the message start (re-validated on fill).
    ReadResp {
        stag: Stag,
        to: u64,
        loc: Loc,
        src_stag: Stag,
        src_to: u64,
    },
    /// The Terminate message.
    Terminate,
    /// A zero-length RDMA Write RTR.
    RtrWrite,
    /// A zero-length Send RTR.
    RtrSend,
}

impl TxUlpdu {
    /// ULPDU length in bytes (DDP header, RDMAP header and payload).
    pub(crate) fn ulpdu_len(&self, qp_term_len: usize) -> usize {
        match self.what {
            TxWhat::Sq { .. } if self.tagged => ddp::TAGGED_HEADER_LEN + self.len as usize,
            TxWhat::Sq { .. } | TxWhat::RtrSend => ddp::UNTAGGED_HEADER_LEN + self.len as usize,
            TxWhat::ReadReq { .. } => ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_LEN,
            TxWhat::ReadResp { .. } | TxWhat::RtrWrite => {
                ddp::TAGGED_HEADER_LEN + self.len as usize
            }
            TxWhat::Terminate => qp_term_len,
        }
    }

    /// True for the Terminate message.
    pub fn is_terminate(&self) -> bool {
        matches!(self.what, TxWhat::Terminate)
    }

    /// True for the last segment of its message.
    pub fn is_last(&self) -> bool {
        self.last
    }

    /// Payload bytes carried.
    pub fn payload_len(&self) -> u32 {
        self.len
    }
}

/// What starting the WQE at the SQ cursor gave.
enum Step {
    /// Something changed (a WQE started or finished): look again.
    Again,
    /// The SQ is empty or stalled (fence, ORD).
    Stall,
    /// A single-segment message to send now.
    Emit(TxUlpdu),
}

/// The outbound message being segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxCur {
    /// SQ WQE `seq`.
    Sq(u64),
    /// The IRQ head.
    Irq,
}

impl Qp {
    pub(super) fn tx_len(&self, d: &TxUlpdu) -> usize {
        d.ulpdu_len(self.term_tx.as_ref().map_or(0, |t| t.len()))
    }

    /// The next DDP segment to send, if any, and its ULPDU length.
    #[inline]
    pub(crate) fn next_ulpdu(
        &mut self,
        ctx: &mut Ctx<'_>,
        max_ulpdu_len: usize,
    ) -> Option<(TxUlpdu, usize)> {
        if self.conn.is_none() || max_ulpdu_len < MIN_ULPDU_LEN {
            return None;
        }
        // Bounded: each turn either returns or retires one SQ WQE.
        for _ in 0..=self.sq.depth + 1 {
            if let Some(t) = &self.term_tx {
                if self.term_sent {
                    return None;
                }
                let len = t.len();
                self.term_sent = true;
                self.counters.terms_sent += 1;
                self.counters.segs_out += 1;
                if self.llp_request.is_none() {
                    self.llp_request = Some(crate::qp::LlpRequest::Close);
                }
                let d = TxUlpdu {
                    what: TxWhat::Terminate,
                    tagged: false,
                    msn: 0,
                    offset: 0,
                    len: 0,
                    last: true,
                };
                return Some((d, len));
            }
            if self.state != QpState::Rts {
                return None;
            }
            if self.hold_tx {
                return self.run_local_wqes_while_held(ctx, max_ulpdu_len);
            }
            if let Some(kind) = self.rtr_tx {
                return self.next_rtr(kind);
            }
            match self.tx_cur {
                Some(TxCur::Sq(seq)) => {
                    // Verbs 7.9, 7.10.4.1: memory revoked since the WQE started fails
                    // it; the Terminate replaces the segment (verbs 6.4 (1), (5)).
                    if !self.sq_source_still_valid(ctx, seq) {
                        continue;
                    }
                    return self.next_sq_segment(seq, max_ulpdu_len);
                }
                Some(TxCur::Irq) => {
                    if !self.irq_source_still_valid(ctx) {
                        continue;
                    }
                    return self.next_resp_segment(max_ulpdu_len);
                }
                None => {}
            }
            if self.nudge_tx {
                return Some(self.next_nudge());
            }
            if !self.irq.is_empty() {
                self.tx_cur = Some(TxCur::Irq);
                continue;
            }
            match self.start_next_wqe(ctx, max_ulpdu_len) {
                Step::Again => {}
                Step::Stall => return None,
                Step::Emit(d) => return Some((d, self.tx_len(&d))),
            }
        }
        None
    }

    /// A responder sends nothing before the initiator's first FPDU (RFC 5044 7.1.2), but
    /// WRs that put nothing on the wire (Bind, Fast-Register, Invalidate Local STag) still
    /// run, in post order, up to the first WR that would send.
    fn run_local_wqes_while_held(
        &mut self,
        ctx: &mut Ctx<'_>,
        max_ulpdu_len: usize,
    ) -> Option<(TxUlpdu, usize)> {
        for _ in 0..=self.sq.depth {
            let local = self.tx_cur.is_none()
                && self.sq.get(self.sq.cursor).is_some_and(|e| {
                    matches!(
                        e.wr.op,
                        SendOp::Bind { .. } | SendOp::FastReg { .. } | SendOp::LocalInv { .. }
                    )
                });
            if !local {
                return None;
            }
            match self.start_next_wqe(ctx, max_ulpdu_len) {
                Step::Again => {}
                Step::Stall => return None,
                Step::Emit(d) => return Some((d, self.tx_len(&d))),
            }
        }
        None
    }

    fn next_rtr(&mut self, kind: RtrKind) -> Option<(TxUlpdu, usize)> {
        let what = match kind {
            RtrKind::Write => TxWhat::RtrWrite,
            RtrKind::Send => TxWhat::RtrSend,
            RtrKind::Read => {
                if self.orq.len() >= self.orq_cap {
                    return None;
                }
                self.orq.push_back(OrqEntry {
                    seq: None,
                    stag: Stag(0),
                    next_to: 0,
                    size: 0,
                    placed: 0,
                });
                TxWhat::ReadReq {
                    sink_stag: Stag(0),
                    sink_to: 0,
                    size: 0,
                    src_stag: Stag(1),
                    src_to: 0,
                }
            }
        };
        let msn = match kind {
            RtrKind::Write => 0,
            RtrKind::Send => self.take_msn(QN_SEND),
            RtrKind::Read => self.take_msn(QN_READ),
        };
        self.rtr_tx = None;
        let d = TxUlpdu {
            what,
            tagged: false,
            msn,
            offset: 0,
            len: 0,
            last: true,
        };
        let opcode = match kind {
            RtrKind::Write => Opcode::Write,
            RtrKind::Send => Opcode::Send,
            RtrKind::Read => Opcode::ReadRequest,
        };
        self.count_out(opcode as u8, 0, true);
        Some((d, self.tx_len(&d)))
    }

    /// The nudge: a zero-length tagged RDMA Write, between two messages. It places
    /// nothing and is validated by no one (RFC 5040 5.1 allows zero-length Writes; verbs
    /// 7.6.3: no access checks at zero length), so the peer's ULP never sees it.
    fn next_nudge(&mut self) -> (TxUlpdu, usize) {
        self.nudge_tx = false;
        self.counters.nudges_sent += 1;
        let d = TxUlpdu {
            what: TxWhat::RtrWrite,
            tagged: false,
            msn: 0,
            offset: 0,
            len: 0,
            last: true,
        };
        (d, self.tx_len(&d))
    }

    fn take_msn(&mut self, qn: usize) -> u32 {
        let msn = self.tx_msn[qn];
        self.tx_msn[qn] = msn.wrapping_add(1);
        msn
    }

    fn count_out(&mut self, opcode: u8, bytes: u32, last: bool) {
        let i = (opcode & 7) as usize;
        self.counters.segs_out += 1;
        self.counters.bytes_out[i] += u64::from(bytes);
        if last {
            self.counters.msgs_out[i] += 1;
        }
    }

    /// Starts the WQE at the SQ cursor. Local operations run to completion here (they put
    /// nothing on the wire); a Send or Write gives its first segment (at most `max`
    /// bytes of ULPDU).
    fn start_next_wqe(&mut self, ctx: &mut Ctx<'_>, max: usize) -> Step {
        let seq = self.sq.cursor;
        // Only the operation and flags are copied, not the whole WQE (SGL and locations).
        let Some((op, flags)) = self.sq.get(seq).map(|e| (e.wr.op, e.wr.flags)) else {
            return Step::Stall;
        };
        if flags.contains(SendFlags::READ_FENCE) && self.orq.iter().any(|o| o.seq.is_some()) {
            return Step::Stall;
        }
        if matches!(op, SendOp::LocalInv { .. })
            && flags.contains(SendFlags::LOCAL_FENCE)
            && self.sq.front_seq() != seq
        {
            return Step::Stall;
        }
        let (pd, qp) = (self.attr.pd, self.id);
        match op {
            SendOp::Send | SendOp::SendSe | SendOp::SendInv { .. } | SendOp::SendSeInv { .. } => {
                self.start_data_wqe(ctx, seq, true, max)
            }
            SendOp::Write { .. } => self.start_data_wqe(ctx, seq, false, max),
            SendOp::Read {
                remote_to, rkey, ..
            } => {
                if self.ord == 0 {
                    self.sq.cursor = seq + 1;
                    self.local_wqe_error(ctx, seq, WcStatus::ZeroOrd);
                    return Step::Again;
                }
                if self.orq.len() >= (self.ord as usize).min(self.orq_cap) {
                    return Step::Stall;
                }
                let sink = self
                    .sq
                    .get(seq)
                    .and_then(|e| e.wr.sgl.as_slice().first().copied())
                    .unwrap_or_default();
                // Verbs 8.1.3.2.1: STag 0 in an RDMA Read WR (either address) is a
                // completion error, privileged or not: it can never be advertised.
                if sink.length > 0 && (sink.lkey == Stag::ZERO || rkey == Stag::ZERO) {
                    self.sq.cursor = seq + 1;
                    self.local_wqe_error(ctx, seq, WcStatus::InvalidStag);
                    return Step::Again;
                }
                let msn = self.take_msn(QN_READ);
                self.orq.push_back(OrqEntry {
                    seq: Some(seq),
                    stag: sink.lkey,
                    next_to: sink.addr,
                    size: sink.length,
                    placed: 0,
                });
                if let Some(w) = self.sq.get_mut(seq) {
                    w.phase = SqPhase::AwaitResponse;
                    w.msn = msn;
                    w.len = sink.length;
                }
                self.sq.cursor = seq + 1;
                self.count_out(Opcode::ReadRequest as u8, 0, true);
                Step::Emit(TxUlpdu {
                    tagged: false,
                    what: TxWhat::ReadReq {
                        sink_stag: sink.lkey,
                        sink_to: sink.addr,
                        size: sink.length,
                        src_stag: rkey,
                        src_to: remote_to,
                    },
                    msn,
                    offset: 0,
                    len: 0,
                    last: true,
                })
            }
            SendOp::Bind { .. } | SendOp::FastReg { .. } | SendOp::LocalInv { .. } => {
                self.sq.cursor = seq + 1;
                let bind = self.attr.bind_enabled;
                let fast_reg = self.attr.privileged || self.attr.fast_reg;
                let status = match ctx.local_op(&op, qp, pd, bind, fast_reg) {
                    Ok(()) => WcStatus::Success,
                    Err(s) => s,
                };
                if status == WcStatus::Success {
                    self.sq_finish(ctx, seq, status);
                } else {
                    self.local_wqe_error(ctx, seq, status);
                }
                Step::Again
            }
        }
    }

    /// A local WR failed: error completion, then Terminate with Local Catastrophic
    /// (verbs 8.3.2 figure 23; RFC 5040 7.1 case 1: headers zero).
    pub(crate) fn local_wqe_error(&mut self, ctx: &mut Ctx<'_>, seq: u64, status: WcStatus) {
        self.sq_finish(ctx, seq, status);
        self.enter_terminate(
            ctx,
            TermCode::RDMAP_LOCAL_CATASTROPHIC,
            None,
            TermCause::Completion,
        );
    }

    /// Validates the source SGL of a Send or Write, makes it the message in progress and
    /// gives its first segment (the sources were resolved just now, at the current STag
    /// table epoch: checking them again before this segment could not change the answer).
    fn start_data_wqe(&mut self, ctx: &mut Ctx<'_>, seq: u64, untagged: bool, max: usize) -> Step {
        self.sq.cursor = seq + 1;
        let (pd, privileged) = (self.attr.pd, self.attr.privileged);
        let Some(e) = self.sq.get_mut(seq) else {
            return Step::Again;
        };
        // Resolved in place (the WQE is not copied out and back).
        let len = match resolve_sources(e, ctx, pd, privileged) {
            Ok(len) => len,
            Err(status) => {
                self.local_wqe_error(ctx, seq, status);
                return Step::Again;
            }
        };
        let msn = if untagged {
            let msn = self.tx_msn[QN_SEND];
            self.tx_msn[QN_SEND] = msn.wrapping_add(1);
            msn
        } else {
            0
        };
        e.len = len;
        e.msn = msn;
        e.sent = 0;
        e.phase = SqPhase::Segmenting;
        let (d, opcode) = sq_segment(e, seq, max);
        self.tx_cur = if d.last { None } else { Some(TxCur::Sq(seq)) };
        self.count_out(opcode as u8, d.len, d.last);
        Step::Emit(d)
    }

    fn next_sq_segment(&mut self, seq: u64, max: usize) -> Option<(TxUlpdu, usize)> {
        let Some(e) = self.sq.get_mut(seq) else {
            self.tx_cur = None;
            return None;
        };
        let (d, opcode) = sq_segment(e, seq, max);
        if d.last {
            self.tx_cur = None;
        }
        self.count_out(opcode as u8, d.len, d.last);
        let hdr = if d.tagged {
            ddp::TAGGED_HEADER_LEN
        } else {
            ddp::UNTAGGED_HEADER_LEN
        };
        Some((d, hdr + d.len as usize))
    }

    fn next_resp_segment(&mut self, max: usize) -> Option<(TxUlpdu, usize)> {
        let Some(e) = self.irq.front().copied() else {
            self.tx_cur = None;
            return None;
        };
        let room = (max - ddp::TAGGED_HEADER_LEN) as u32;
        let left = e.size - e.sent;
        let n = left.min(room);
        let last = n == left;
        let d = TxUlpdu {
            what: TxWhat::ReadResp {
                stag: e.sink_stag,
                to: e.sink_to,
                loc: e.loc,
                src_stag: e.src_stag,
                src_to: e.src_to,
            },
            tagged: true,
            msn: 0,
            offset: e.sent,
            len: n,
            last,
        };
        if last {
            self.irq.pop_front();
            self.tx_cur = None;
        } else if let Some(f) = self.irq.front_mut() {
            f.sent += n;
        }
        self.count_out(Opcode::ReadResponse as u8, n, last);
        Some((d, ddp::TAGGED_HEADER_LEN + n as usize))
    }

    /// TCP acknowledged the whole FPDU of `d` (called in order).
    pub(crate) fn ulpdu_acked(&mut self, ctx: &mut Ctx<'_>, d: &TxUlpdu) {
        match d.what {
            TxWhat::Sq { seq }
                if d.last && matches!(self.state, QpState::Rts | QpState::Closing) =>
            {
                // `sq_finish(Success)` with the one lookup: a success is reported when
                // it reaches the head (`sq_retire`).
                if let Some(e) = self
                    .sq
                    .get_mut(seq)
                    .filter(|e| e.phase == SqPhase::AwaitAck)
                {
                    e.phase = SqPhase::Done(WcStatus::Success);
                    self.sq_retire(ctx);
                }
            }
            TxWhat::Terminate => self.term_acked = true,
            _ => {}
        }
        self.check_drained(ctx);
    }
}

/// The next segment of Send/Write WQE `e` (number `seq`, being segmented), at most `max`
/// bytes of ULPDU, and its RDMAP opcode; `e`'s progress moves past it.
#[inline]
fn sq_segment(e: &mut SqEntry, seq: u64, max: usize) -> (TxUlpdu, Opcode) {
    let (hdr, opcode) = match e.wr.op {
        SendOp::Write { .. } => (ddp::TAGGED_HEADER_LEN, Opcode::Write),
        other => (ddp::UNTAGGED_HEADER_LEN, send_opcode(&other)),
    };
    let room = (max - hdr) as u32;
    let left = e.len - e.sent;
    let n = left.min(room);
    let last = n == left;
    let d = TxUlpdu {
        what: TxWhat::Sq { seq },
        tagged: hdr == ddp::TAGGED_HEADER_LEN,
        msn: e.msn,
        offset: e.sent,
        len: n,
        last,
    };
    e.sent += n;
    if last {
        e.phase = SqPhase::AwaitAck;
    }
    (d, opcode)
}

/// Checks the source SGL of Send/Write WQE `e` and stores where each SGE resolved (and
/// the STag table epoch it was resolved at); the message length, or the completion status
/// of the first failure.
fn resolve_sources(
    e: &mut SqEntry,
    ctx: &Ctx<'_>,
    pd: iwarp_types::PdId,
    privileged: bool,
) -> Result<u32, WcStatus> {
    let len = u32::try_from(e.wr.sgl.total_len()).map_err(|_| WcStatus::InvalidLength)?;
    if matches!(e.wr.op, SendOp::Write { rkey, .. } if rkey == Stag::ZERO) && len > 0 {
        // Verbs 8.1.3.2.1: STag 0 as the data sink of an RDMA Write.
        return Err(WcStatus::InvalidStag);
    }
    let mut locs_epoch = Some(ctx.mem.epoch());
    for (sge, loc) in e.wr.sgl.as_slice().iter().zip(e.locs.iter_mut()) {
        if sge.length == 0 {
            continue;
        }
        if sge.lkey == Stag::ZERO {
            locs_epoch = None;
        }
        let need = iwarp_types::Access::LOCAL_READ;
        *loc = ctx.resolve_local(sge, need, pd, privileged, None)?;
    }
    e.locs_epoch = locs_epoch;
    if let Some(arenas) = ctx.arenas {
        // The sources are read when the WQE's segments are sent, after the segments
        // queued ahead of them: ask for them now, so a cold source (many QPs, each its
        // own buffer) is on its way by then. A hint, at most a page per SGE.
        for (sge, loc) in e.wr.sgl.as_slice().iter().zip(e.locs.iter()) {
            if sge.length > 0 {
                arenas.prefetch(loc.region, loc.offset, sge.length as usize);
            }
        }
    }
    Ok(len)
}

impl Qp {
    /// Queues the answer to an inbound Read Request (used by `rx_read`).
    pub(crate) fn irq_push(&mut self, e: IrqEntry) {
        self.irq.push_back(e);
    }
}
