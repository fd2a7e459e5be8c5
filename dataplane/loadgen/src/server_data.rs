//! The server's data path: batched CQ polls, SEND verification and credits, WRITE
//! checks and acks. No allocation here.

use iwarp_engine::Engine;
use iwarp_types::{Cqe, Memory, RecvWr, SendFlags, SendOp, SendWr, Sge, WcStatus};

use super::{
    wr_id, ConnPhase, LoadgenServer, PendingAck, CQ_BATCHES_PER_POLL, KIND_CTL_RX, KIND_CTL_TX,
    KIND_DATA_RX, SLOT_MASK,
};
use crate::messages::{credit_batch, CtlMsg, CTL_LEN};
use crate::pattern;
use crate::res::one_sge;

impl LoadgenServer {
    pub(super) fn poll_cqs<M: Memory>(&mut self, engine: &mut Engine, mem: &mut M) {
        for k in 0..self.cqs.cqs().len() {
            let cq = self.cqs.cqs()[k];
            for _ in 0..CQ_BATCHES_PER_POLL {
                let n = match engine.rnic_mut().poll_cq(cq, &mut self.cqes) {
                    Ok(n) => n,
                    Err(_) => break,
                };
                for x in 0..n {
                    let cqe = self.cqes[x];
                    self.on_cqe(engine, mem, &cqe);
                }
                if n < self.cqes.len() {
                    break;
                }
            }
        }
    }

    fn on_cqe<M: Memory>(&mut self, engine: &mut Engine, mem: &mut M, cqe: &Cqe) {
        let c = (cqe.wr_id >> 40) as usize;
        let gen = (cqe.wr_id >> 32) as u8;
        let kind = (cqe.wr_id >> 28) & 0xf;
        let slot = cqe.wr_id & SLOT_MASK;
        let Some(s) = self.conns.get(c) else {
            return;
        };
        if s.phase == ConnPhase::Free || s.gen != gen || s.qp != cqe.qp {
            return;
        }
        if cqe.status != WcStatus::Success {
            if cqe.status != WcStatus::Flushed {
                self.report.errors += 1;
            }
            return;
        }
        match kind {
            KIND_DATA_RX => self.on_send_received(engine, mem, c, slot, cqe.byte_len),
            KIND_CTL_RX => self.on_check(engine, mem, c, slot),
            KIND_CTL_TX => {
                let s = &mut self.conns[c];
                s.tx_free += 1;
                self.flush_ctl(engine, mem, c);
            }
            _ => self.report.errors += 1,
        }
    }

    fn repost(&mut self, engine: &mut Engine, c: usize, kind: u64, k: u64) {
        let s = &self.conns[c];
        let base = s.buffer.map_or(0, |b| self.buffer_base(b));
        let (addr, length) = if kind == KIND_DATA_RX {
            (base + s.layout.data(k), s.hello.size)
        } else {
            (base + s.layout.ctl_rx + k * CTL_LEN as u64, CTL_LEN as u32)
        };
        let wr = RecvWr {
            wr_id: wr_id(c, s.gen, kind, k),
            sgl: one_sge(Sge {
                addr,
                length,
                lkey: self.lkey,
            }),
        };
        if engine.post_recv(s.qp, &wr).is_err() {
            self.report.errors += 1;
        }
    }

    /// A data SEND arrived in slot `k`: verify, repost, return credits in batches.
    fn on_send_received<M: Memory>(
        &mut self,
        engine: &mut Engine,
        mem: &mut M,
        c: usize,
        k: u64,
        len: u32,
    ) {
        self.report.messages_received += 1;
        self.report.bytes_received += u64::from(len);
        let s = &self.conns[c];
        if s.hello.verify {
            let base = s.buffer.map_or(0, |b| self.buffer_base(b));
            let at = self.arena.offset + base + s.layout.data(k);
            let (qp_index, seq, size) = (s.hello.qp_index, s.expected_seq, s.hello.size);
            let r = pattern::check(
                mem,
                self.arena.region,
                at,
                u64::from(len),
                qp_index,
                seq,
                &mut self.scratch,
            );
            let bad = match r {
                Ok(None) if len == size => false,
                Ok(None) => true,
                Ok(Some(m)) => {
                    self.report.mismatches.push(m);
                    true
                }
                Err(_) => true,
            };
            let s = &mut self.conns[c];
            s.expected_seq += 1;
            if bad {
                s.bad += 1;
                self.report.verify_mismatches += 1;
            } else {
                self.report.messages_verified += 1;
                self.report.bytes_verified += u64::from(len);
            }
        }
        self.repost(engine, c, KIND_DATA_RX, k);
        self.conns[c].consumed += 1;
        self.flush_ctl(engine, mem, c);
    }

    /// A verified WRITE's check arrived in control slot `j`.
    fn on_check<M: Memory>(&mut self, engine: &mut Engine, mem: &mut M, c: usize, j: u64) {
        let s = &self.conns[c];
        let base = s.buffer.map_or(0, |b| self.buffer_base(b));
        let mut buf = [0u8; CTL_LEN];
        let at = self.arena.offset + base + s.layout.ctl_rx + j * CTL_LEN as u64;
        let msg = mem
            .read(self.arena.region, at, &mut buf)
            .ok()
            .map(|()| CtlMsg::parse(&buf));
        self.repost(engine, c, KIND_CTL_RX, j);
        let s = &self.conns[c];
        let Some(Ok(CtlMsg::Check { slot, seq })) = msg else {
            self.report.errors += 1;
            return;
        };
        if u64::from(slot) >= s.layout.depth || s.ack_len >= s.hello.depth {
            self.report.errors += 1;
            return;
        }
        let at = self.arena.offset + base + s.layout.data(u64::from(slot));
        let (qp_index, size) = (s.hello.qp_index, s.layout.size);
        let r = pattern::check(
            mem,
            self.arena.region,
            at,
            size,
            qp_index,
            seq,
            &mut self.scratch,
        );
        let ok = match r {
            Ok(None) => {
                self.report.messages_verified += 1;
                self.report.bytes_verified += size;
                true
            }
            Ok(Some(m)) => {
                self.report.mismatches.push(m);
                self.report.verify_mismatches += 1;
                false
            }
            Err(_) => {
                self.report.verify_mismatches += 1;
                false
            }
        };
        let (Some(b), s) = (s.buffer, &mut self.conns[c]) else {
            return;
        };
        let depth = self.cfg.max_depth;
        let at = (b * depth + (s.ack_head + s.ack_len) % depth) as usize;
        self.acks[at] = PendingAck { slot, seq, ok };
        s.ack_len += 1;
        self.flush_ctl(engine, mem, c);
    }

    /// Sends pending acks, then owed credits, while control send slots are free.
    fn flush_ctl<M: Memory>(&mut self, engine: &mut Engine, mem: &mut M, c: usize) {
        let depth = self.cfg.max_depth;
        loop {
            let s = &self.conns[c];
            if s.tx_free == 0 || s.phase == ConnPhase::Free {
                return;
            }
            let batch = credit_batch(s.hello.depth);
            let msg = if s.ack_len > 0 {
                let Some(b) = s.buffer else { return };
                let a = self.acks[(b * depth + s.ack_head) as usize];
                CtlMsg::Ack {
                    slot: a.slot,
                    seq: a.seq,
                    ok: a.ok,
                }
            } else if s.consumed >= batch {
                CtlMsg::Credit {
                    n: s.consumed,
                    bad: s.bad,
                }
            } else {
                return;
            };
            if !self.send_ctl(engine, mem, c, &msg) {
                return;
            }
            let s = &mut self.conns[c];
            match msg {
                CtlMsg::Ack { .. } => {
                    s.ack_head = (s.ack_head + 1) % depth;
                    s.ack_len -= 1;
                    self.report.acks_sent += 1;
                }
                _ => {
                    s.consumed = 0;
                    s.bad = 0;
                    self.report.credits_sent += 1;
                }
            }
        }
    }

    fn send_ctl<M: Memory>(
        &mut self,
        engine: &mut Engine,
        mem: &mut M,
        c: usize,
        msg: &CtlMsg,
    ) -> bool {
        let s = &self.conns[c];
        let base = s.buffer.map_or(0, |b| self.buffer_base(b));
        let j = s.tx_next % s.layout.depth.max(1);
        let addr = base + s.layout.ctl_tx + j * CTL_LEN as u64;
        let wr = SendWr {
            wr_id: wr_id(c, s.gen, KIND_CTL_TX, j),
            op: SendOp::Send,
            sgl: one_sge(Sge {
                addr,
                length: CTL_LEN as u32,
                lkey: self.lkey,
            }),
            flags: SendFlags::SIGNALED,
        };
        let qp = s.qp;
        let wrote = mem.write(self.arena.region, self.arena.offset + addr, &msg.encode());
        if wrote.is_err() || engine.post_send(qp, &wr).is_err() {
            self.report.errors += 1;
            return false;
        }
        let s = &mut self.conns[c];
        s.tx_free -= 1;
        s.tx_next += 1;
        true
    }
}
