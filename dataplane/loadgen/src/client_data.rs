//! The client's data path: keeping `depth` WRs outstanding per QP, batched CQ polls,
//! completions, credits, write acks and READ verification. No allocation here.
//!
//! `wr_id` layout: QP index (32 bits) | kind (4 bits) | sequence number modulo 2^28 (or
//! the control slot). The full sequence number is rebuilt from the QP's window
//! (`done_seq..next_seq`, at most `depth` wide).
//!
//! Completion accounting: without verify, a signaled completion of sequence `s`
//! completes every older WR of its QP (successes retire in order). With verify, each
//! slot owes a number of events (READ and SEND: the completion; WRITE: the WRITE's
//! completion, the check SEND's completion and the server's ack) and the message
//! completes when the last arrives; slots are reused in order.

use iwarp_engine::Engine;
use iwarp_types::{Cqe, Instant, Memory, RecvWr, SendFlags, SendOp, SendWr, Sge, WcStatus};

use crate::client::{LoadgenClient, Phase, QpPhase, CQ_BATCHES_PER_POLL};
use crate::messages::{CtlMsg, Op, CTL_LEN};
use crate::pattern;
use crate::res::one_sge;

const KIND_DATA: u64 = 0;
const KIND_CHECK: u64 = 1;
const KIND_CTL_RX: u64 = 2;
const SEQ_MASK: u64 = 0x0fff_ffff;

#[inline]
fn wr_id(i: usize, kind: u64, low: u64) -> u64 {
    ((i as u64) << 32) | (kind << 28) | (low & SEQ_MASK)
}

/// The full sequence number whose low 28 bits are `low`, at or after `done`.
#[inline]
fn rebuild_seq(low: u64, done: u64) -> u64 {
    done + (low.wrapping_sub(done) & SEQ_MASK)
}

impl LoadgenClient {
    #[inline]
    fn qp_base(&self, i: usize) -> u64 {
        i as u64 * self.layout.stride
    }

    #[inline]
    fn in_window(&self, now: Instant) -> bool {
        now >= self.measure_start && now < self.measure_end
    }

    /// Posts the control receives of QP `i` (credits, acks). False on failure.
    pub(crate) fn post_ctl_receives(&mut self, engine: &mut Engine, i: usize) -> bool {
        for j in 0..self.layout.depth {
            if !self.post_ctl_receive(engine, i, j) {
                return false;
            }
        }
        true
    }

    fn post_ctl_receive(&mut self, engine: &mut Engine, i: usize, j: u64) -> bool {
        let wr = RecvWr {
            wr_id: wr_id(i, KIND_CTL_RX, j),
            sgl: one_sge(Sge {
                addr: self.qp_base(i) + self.layout.ctl_rx + j * CTL_LEN as u64,
                length: CTL_LEN as u32,
                lkey: self.lkey,
            }),
        };
        if engine.post_recv(self.qps[i].qp, &wr).is_err() {
            self.report.errors.post_failed += 1;
            return false;
        }
        true
    }

    /// Posts WRs on QP `i` until its window is full (or it has no credit), then rings
    /// the QP's doorbell once for them.
    pub(crate) fn fill<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        i: usize,
    ) {
        let before = self.qps[i].next_seq;
        self.post_window(now, engine, mem, i);
        if self.qps[i].next_seq != before {
            engine.qp_doorbell(self.qps[i].qp);
        }
    }

    /// The posting half of [`LoadgenClient::fill`] (no doorbell).
    fn post_window<M: Memory>(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, i: usize) {
        if self.phase > Phase::Running || self.spec.op == Op::Connect {
            return;
        }
        let depth = u64::from(self.spec.depth);
        loop {
            let q = &self.qps[i];
            if q.state != QpPhase::Up || q.broken {
                return;
            }
            let in_flight = q.next_seq - q.done_seq;
            if in_flight >= depth || (self.spec.op == Op::Send && q.credits == 0) {
                return;
            }
            let seq = q.next_seq;
            // The last WR this batch can post is signaled, so the tail always completes.
            let last = in_flight + 1 >= depth || (self.spec.op == Op::Send && q.credits == 1);
            let signaled = last || (seq + 1).is_multiple_of(self.signal_every);
            if !self.post_one(now, engine, mem, i, seq, signaled) {
                let q = &mut self.qps[i];
                q.broken = true;
                q.state = QpPhase::Closing;
                let _ = engine.disconnect(now, q.qp);
                return;
            }
        }
    }

    fn post_one<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        i: usize,
        seq: u64,
        signaled: bool,
    ) -> bool {
        let depth = u64::from(self.spec.depth);
        let slot = seq % depth;
        // The message's buffer: its slot's own, or one of `buffers` shared ones.
        let buf = match u64::from(self.spec.buffers) {
            0 => slot,
            n => slot % n,
        };
        let base = self.qp_base(i);
        let local = base + self.layout.data(buf);
        let size = self.layout.size;
        let qp_index = self.spec.qp_index_base + i as u32;
        let verify = !self.pending.is_empty();
        let region = self.arena.region;
        let at = self.arena.offset;
        let q = &self.qps[i];
        let op = match self.spec.op {
            Op::Write => SendOp::Write {
                remote_to: q.rbase + buf * size,
                rkey: q.rkey,
            },
            Op::Read => SendOp::Read {
                remote_to: q.rbase + buf * size,
                rkey: q.rkey,
                invalidate_local: false,
            },
            Op::Send | Op::Connect => SendOp::Send,
        };
        if verify {
            let r = match self.spec.op {
                Op::Read => pattern::poison(mem, region, at + local, size, &mut self.scratch),
                _ => pattern::fill(
                    mem,
                    region,
                    at + local,
                    size,
                    qp_index,
                    seq,
                    &mut self.scratch,
                ),
            };
            if r.is_err() {
                self.report.errors.post_failed += 1;
                return false;
            }
        }
        let id = wr_id(i, KIND_DATA, seq);
        let sge = Sge {
            addr: local,
            length: size as u32,
            lkey: self.lkey,
        };
        let flags = if signaled {
            SendFlags::SIGNALED
        } else {
            SendFlags::NONE
        };
        let qp = q.qp;
        // Written straight into the WQE, as the shared-memory service posts: a WR built
        // here and copied in (`Engine::post_send`) was a 150-byte copy of stores just
        // made, 7.8 % of the client's core at 64 B. `fill` rings the doorbell.
        let posted = engine.rnic_mut().post_send_with(qp, |w| {
            w.wr_id = id;
            w.op = op;
            w.flags = flags;
            w.sgl = one_sge(sge);
            Ok::<(), core::convert::Infallible>(())
        });
        if posted.is_err() {
            self.report.errors.post_failed += 1;
            return false;
        }
        let k = i * self.spec.depth as usize + slot as usize;
        self.post_ns[k] = now.as_nanos();
        let q = &mut self.qps[i];
        q.next_seq += 1;
        self.outstanding += 1;
        if self.spec.op == Op::Send {
            q.credits -= 1;
        }
        if verify {
            self.pending[k] = 1;
        }
        if verify && self.spec.op == Op::Write {
            // The check travels behind the WRITE: placed before the SEND completes.
            self.pending[k] = 3;
            let ctl = base + self.layout.ctl_tx + slot * CTL_LEN as u64;
            let msg = CtlMsg::Check {
                slot: slot as u32,
                seq,
            }
            .encode();
            let wr = SendWr {
                wr_id: wr_id(i, KIND_CHECK, seq),
                op: SendOp::Send,
                sgl: one_sge(Sge {
                    addr: ctl,
                    length: CTL_LEN as u32,
                    lkey: self.lkey,
                }),
                flags: SendFlags::SIGNALED,
            };
            if mem.write(region, at + ctl, &msg).is_err() || engine.post_send(qp, &wr).is_err() {
                self.report.errors.post_failed += 1;
                return false;
            }
        }
        true
    }

    /// Takes up to [`CQ_BATCHES_PER_POLL`] batches of completions from each CQ.
    pub(crate) fn poll_cqs<M: Memory>(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        for c in 0..self.cqs.cqs().len() {
            let cq = self.cqs.cqs()[c];
            for _ in 0..CQ_BATCHES_PER_POLL {
                let n = match engine.rnic_mut().poll_cq(cq, &mut self.cqes) {
                    Ok(n) => n,
                    Err(_) => break,
                };
                for k in 0..n {
                    let cqe = self.cqes[k];
                    self.on_cqe(now, engine, mem, &cqe);
                }
                if n < self.cqes.len() {
                    break;
                }
            }
        }
    }

    fn on_cqe<M: Memory>(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, cqe: &Cqe) {
        let i = (cqe.wr_id >> 32) as usize;
        let kind = (cqe.wr_id >> 28) & 0xf;
        let low = cqe.wr_id & SEQ_MASK;
        let Some(q) = self.qps.get_mut(i) else {
            return;
        };
        if q.state == QpPhase::Closed || q.qp != cqe.qp {
            return;
        }
        if cqe.status != WcStatus::Success {
            let closing = q.state != QpPhase::Up || self.phase >= Phase::Draining;
            if !(cqe.status == WcStatus::Flushed && closing) {
                self.report.errors.completions[cqe.status as usize] += 1;
            }
            q.broken = true;
            return;
        }
        match kind {
            KIND_DATA => {
                let seq = rebuild_seq(low, q.done_seq);
                if self.pending.is_empty() {
                    self.complete_upto(now, i, seq);
                } else {
                    if self.spec.op == Op::Read {
                        self.check_read(mem, i, seq);
                    }
                    self.settle(now, i, seq);
                }
            }
            KIND_CHECK => {
                let seq = rebuild_seq(low, q.done_seq);
                self.settle(now, i, seq);
            }
            KIND_CTL_RX => self.on_ctl(now, engine, mem, i, low),
            _ => self.report.errors.protocol += 1,
        }
        self.fill(now, engine, mem, i);
    }

    /// Non-verify: every WR of QP `i` up to `seq` completed.
    fn complete_upto(&mut self, now: Instant, i: usize, seq: u64) {
        let q = &mut self.qps[i];
        if seq < q.done_seq || seq >= q.next_seq {
            self.report.errors.protocol += 1;
            return;
        }
        let n = seq + 1 - q.done_seq;
        q.done_seq = seq + 1;
        self.outstanding = self.outstanding.saturating_sub(n);
        if self.in_window(now) {
            self.report.messages += n;
            self.report.bytes += n * self.layout.size;
            let k = i * self.spec.depth as usize + (seq % u64::from(self.spec.depth)) as usize;
            self.report
                .latency
                .record(now.as_nanos().saturating_sub(self.post_ns[k]));
        }
    }

    /// Verify: one of the events slot `seq` owes arrived.
    fn settle(&mut self, now: Instant, i: usize, seq: u64) {
        let depth = self.spec.depth as usize;
        let q = &mut self.qps[i];
        if seq < q.done_seq || seq >= q.next_seq {
            self.report.errors.protocol += 1;
            return;
        }
        let k = i * depth + (seq % depth as u64) as usize;
        if self.pending[k] == 0 {
            self.report.errors.protocol += 1;
            return;
        }
        self.pending[k] -= 1;
        if self.pending[k] == 0 && now >= self.measure_start && now < self.measure_end {
            self.report.messages += 1;
            self.report.bytes += self.layout.size;
            self.report
                .latency
                .record(now.as_nanos().saturating_sub(self.post_ns[k]));
        }
        while q.done_seq < q.next_seq
            && self.pending[i * depth + (q.done_seq % depth as u64) as usize] == 0
        {
            q.done_seq += 1;
            self.outstanding = self.outstanding.saturating_sub(1);
        }
    }

    /// READ verify: the local slot must hold the server's pattern of remote slot
    /// `seq % depth`.
    fn check_read<M: Memory>(&mut self, mem: &M, i: usize, seq: u64) {
        let slot = seq % u64::from(self.spec.depth);
        let at = self.arena.offset + self.qp_base(i) + self.layout.data(slot);
        let qp_index = self.spec.qp_index_base + i as u32;
        let r = pattern::check(
            mem,
            self.arena.region,
            at,
            self.layout.size,
            qp_index,
            slot,
            &mut self.scratch,
        );
        match r {
            Ok(None) => {}
            Ok(Some(m)) => {
                self.report.errors.verify_mismatches += 1;
                self.report.mismatches.push(m);
            }
            Err(_) => self.report.errors.post_failed += 1,
        }
    }

    /// A control message (credit or ack) arrived in control slot `j` of QP `i`.
    fn on_ctl<M: Memory>(
        &mut self,
        now: Instant,
        engine: &mut Engine,
        mem: &mut M,
        i: usize,
        j: u64,
    ) {
        let mut buf = [0u8; CTL_LEN];
        let at = self.arena.offset + self.qp_base(i) + self.layout.ctl_rx + j * CTL_LEN as u64;
        let msg = mem
            .read(self.arena.region, at, &mut buf)
            .ok()
            .map(|()| CtlMsg::parse(&buf));
        if j < self.layout.depth && self.qps[i].state == QpPhase::Up {
            let _ = self.post_ctl_receive(engine, i, j);
        }
        match msg {
            Some(Ok(CtlMsg::Credit { n, bad })) => {
                let q = &mut self.qps[i];
                q.credits = q.credits.saturating_add(n).min(self.spec.depth);
                self.report.errors.verify_mismatches += u64::from(bad);
            }
            Some(Ok(CtlMsg::Ack { slot, seq, ok })) => {
                let q = &self.qps[i];
                let seq_ok = seq >= q.done_seq && seq < q.next_seq;
                if !seq_ok || seq % u64::from(self.spec.depth) != u64::from(slot) {
                    self.report.errors.protocol += 1;
                    return;
                }
                if !ok {
                    self.report.errors.verify_mismatches += 1;
                }
                self.settle(now, i, seq);
            }
            _ => self.report.errors.protocol += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_id_and_sequence_rebuild() {
        let id = wr_id(7, KIND_CHECK, (1 << 28) + 5);
        assert_eq!(id >> 32, 7);
        assert_eq!((id >> 28) & 0xf, KIND_CHECK);
        assert_eq!(id & SEQ_MASK, 5);
        // Around the 2^28 wrap, the window decides.
        let done = (1u64 << 28) - 2;
        assert_eq!(rebuild_seq(done & SEQ_MASK, done), done);
        assert_eq!(rebuild_seq(3, done), (1 << 28) + 3);
        assert_eq!(
            rebuild_seq(((5u64 << 28) + 9) & SEQ_MASK, 5 << 28),
            (5 << 28) + 9
        );
    }
}
