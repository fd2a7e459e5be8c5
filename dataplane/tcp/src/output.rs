//! Segment production: `poll_transmit` writes one segment (header + payload) into the
//! caller's buffer. No allocation: payload comes from `TxSource::fill`.

use iwarp_types::{Duration, Instant};

use crate::conn::{TcpConn, TcpState, TxSource, TS_OPTION_LEN};
use crate::segment::{
    FourTuple, PseudoSum, TcpFlags, TcpHeader, TcpOptions, TsOnlyHeader, MAX_SACK_BLOCKS,
    TCP_HEADER_LEN,
};
use crate::seq::SeqNumber;
use crate::timer::Timer;

/// A data segment chosen for transmission.
struct DataPlan {
    offset: u64,
    len: usize,
    fin: bool,
    retransmit: bool,
}

/// A header to send: the usual one (timestamp the one option) built as such, or any.
enum OutHeader {
    TsOnly(TsOnlyHeader),
    Any(TcpHeader),
}

impl OutHeader {
    #[inline]
    fn header_len(&self) -> usize {
        match self {
            OutHeader::TsOnly(_) => TsOnlyHeader::LEN,
            OutHeader::Any(h) => h.header_len(),
        }
    }

    /// The acknowledgment number, if the ACK flag is set.
    #[inline]
    fn ack(&self) -> Option<SeqNumber> {
        let (flags, ack) = match self {
            OutHeader::TsOnly(h) => (h.flags, h.ack),
            OutHeader::Any(h) => (h.flags, h.ack),
        };
        flags.ack.then_some(ack)
    }

    /// Emits it for a connection over `tuple`, whose pseudo-header sum is `pseudo`.
    #[inline]
    fn emit(
        &self,
        tuple: &FourTuple,
        pseudo: PseudoSum,
        payload_len: usize,
        buf: &mut [u8],
        offload: bool,
    ) -> Option<usize> {
        match self {
            OutHeader::TsOnly(h) => h.emit(tuple, pseudo, payload_len, buf, offload),
            OutHeader::Any(h) => h.emit(tuple, payload_len, buf, offload),
        }
    }
}

impl TcpConn {
    /// Writes the next segment to send into `buf` (TCP header and payload, checksum
    /// filled unless offloaded) and returns its length, or `None` if nothing is due or
    /// `buf` cannot hold a header.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        src: &mut impl TxSource,
        buf: &mut [u8],
    ) -> Option<usize> {
        if let Some(seq) = self.rst_pending.take() {
            let hdr = TcpHeader {
                seq,
                ack: self.rcv_nxt_seq(),
                flags: TcpFlags {
                    rst: true,
                    ack: self.state != TcpState::SynSent,
                    ..Default::default()
                },
                window: 0,
                options: TcpOptions::default(),
            };
            return self.finish(now, &OutHeader::Any(hdr), 0, buf);
        }
        match self.state {
            TcpState::Closed => return None,
            TcpState::SynSent | TcpState::SynReceived => {
                if !self.syn_pending {
                    return self.pure_ack(now, buf);
                }
                return self.send_syn(now, buf);
            }
            _ => {}
        }
        if self.probe_pending {
            self.probe_pending = false;
            // Probe: an old sequence number elicits an ACK with the current window.
            let seq = self.seq_of(self.snd_una) - 1;
            let hdr = self.header(
                now,
                seq,
                TcpFlags {
                    ack: true,
                    ..Default::default()
                },
                false,
            );
            return self.finish(now, &hdr, 0, buf);
        }
        if self.state != TcpState::TimeWait {
            if let Some(plan) = self.plan_data(now, src, buf.len()) {
                return self.send_data(now, src, buf, plan);
            }
        }
        self.pure_ack(now, buf)
    }

    fn pure_ack(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if !self.ack_pending || !self.state.is_synchronized() && self.state != TcpState::SynReceived
        {
            return None;
        }
        let seq = if self.state == TcpState::SynReceived {
            self.iss + 1
        } else {
            self.snd_max_seq_for_ack()
        };
        let hdr = self.header(
            now,
            seq,
            TcpFlags {
                ack: true,
                ..Default::default()
            },
            true,
        );
        self.finish(now, &hdr, 0, buf)
    }

    /// Sequence number for a pure ACK: one past the highest sequence number sent (RFC
    /// 9293 SND.NXT, counting a FIN once sent), not the go-back-N resend point. After a
    /// retransmission timeout the peer may hold data above `snd.una`; an ACK carrying the
    /// resend point would sit below its RCV.NXT, be unacceptable, and be answered with an
    /// ACK: one leg of an ACK exchange between two stacks.
    fn snd_max_seq_for_ack(&self) -> SeqNumber {
        self.snd_max_seq()
    }

    fn send_syn(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let passive = self.state == TcpState::SynReceived;
        // Active open offers what the config enables; the SYN-ACK answers only what the
        // peer offered (RFC 7323, RFC 2018).
        let options = TcpOptions {
            mss: Some(self.cfg.mss_bytes),
            wscale: if !passive || self.ws_ok {
                Some(self.cfg.wscale)
            } else {
                None
            },
            sack_permitted: self.cfg.sack && (!passive || self.sack_ok),
            timestamp: if self.cfg.timestamps && (!passive || self.ts_ok) {
                Some((self.ts_now(now), if passive { self.ts_recent } else { 0 }))
            } else {
                None
            },
            sack_blocks: [None; MAX_SACK_BLOCKS],
        };
        let hdr = TcpHeader {
            seq: self.iss,
            ack: self.rcv_nxt_seq(),
            flags: TcpFlags {
                syn: true,
                ack: passive,
                ..Default::default()
            },
            window: self.rcv_wnd.min(65_535) as u16,
            options,
        };
        self.syn_pending = false;
        if !self.timers.is_set(Timer::Rto) {
            self.arm_rto(now);
        }
        self.finish(now, &OutHeader::Any(hdr), 0, buf)
    }

    /// Builds a header: ACK, window, timestamp and (if `sack`) SACK blocks. With
    /// timestamps on and no SACK block to send, the usual header.
    #[inline]
    fn header(&self, now: Instant, seq: SeqNumber, flags: TcpFlags, sack: bool) -> OutHeader {
        let window = (u64::from(self.rcv_wnd) >> self.rcv_wscale).min(65_535) as u16;
        // SACK blocks exist exactly while out-of-order data is held.
        let blocks = sack && self.sack_ok && !self.ooo.is_empty();
        if self.ts_ok && !blocks {
            return OutHeader::TsOnly(TsOnlyHeader {
                seq,
                ack: self.rcv_nxt_seq(),
                flags,
                window,
                ts: (self.ts_now(now), self.ts_recent),
            });
        }
        let mut options = TcpOptions::default();
        if self.ts_ok {
            options.timestamp = Some((self.ts_now(now), self.ts_recent));
        }
        if blocks {
            options.sack_blocks = self.sack_blocks();
        }
        OutHeader::Any(TcpHeader {
            seq,
            ack: self.rcv_nxt_seq(),
            flags,
            window,
            options,
        })
    }

    /// SACK blocks for our ACKs: the most recently changed range first (RFC 2018 4).
    fn sack_blocks(&self) -> [Option<(SeqNumber, SeqNumber)>; MAX_SACK_BLOCKS] {
        let mut out = [None; MAX_SACK_BLOCKS];
        let mut n = 0;
        let recent = self.ooo.recent();
        let ranges = self.ooo.ranges();
        let mut push =
            |r: &(u64, u64), out: &mut [Option<(SeqNumber, SeqNumber)>; MAX_SACK_BLOCKS]| {
                if n < MAX_SACK_BLOCKS {
                    out[n] = Some((self.rcv_seq_of(r.0), self.rcv_seq_of(r.1)));
                    n += 1;
                }
            };
        if let Some(r) = ranges.iter().find(|r| Some(r.0) == recent) {
            push(r, &mut out);
        }
        for r in ranges.iter().filter(|r| Some(r.0) != recent) {
            push(r, &mut out);
        }
        out
    }

    /// Chooses the next data (and/or FIN) segment, if any may be sent now.
    fn plan_data(&mut self, now: Instant, src: &impl TxSource, buf_len: usize) -> Option<DataPlan> {
        let room_in_buf =
            buf_len.saturating_sub(TCP_HEADER_LEN + if self.ts_ok { TS_OPTION_LEN } else { 0 });
        let mss = self.eff_mss().min(room_in_buf);
        if mss == 0 {
            return None;
        }
        let end = match self.fin_off {
            Some(f) => f,
            None => src.end_offset().max(self.snd_max),
        };
        let fin_ok = |c: &TcpConn, seg_end: u64| {
            c.fin_queued
                && c.fin_pending
                && seg_end == end
                && (c.fin_off.is_none() || c.fin_off == Some(seg_end))
        };

        // 1. Loss recovery: retransmit holes below lost_end (RFC 6675 NextSeg rule 1).
        if self.in_recovery {
            let from = self.high_rxt.max(self.snd_una);
            let limit = self.lost_end.min(self.snd_max);
            // Holes run to the next SACKed byte (or snd.max); only those starting below
            // `lost_end` are deemed lost.
            let hole = self
                .scoreboard
                .next_hole(from, self.snd_max)
                .filter(|h| h.0 < limit);
            if let Some((a, b)) = hole {
                let hole_end = if self.sack_ok { b } else { self.snd_max };
                let seg_end = self.segmap.end_of(a, self.snd_max).min(hole_end);
                let max = mss.min((seg_end - a) as usize).max(1);
                let len = src.seg_len(a, max).min(max);
                let cwnd_ok = self.pipe() + len as u64 <= self.cc.cwnd();
                if len > 0 && (self.rxt_force || cwnd_ok) {
                    self.rxt_force = false;
                    self.high_rxt = a + len as u64;
                    return Some(DataPlan {
                        offset: a,
                        len,
                        fin: false,
                        retransmit: true,
                    });
                }
                if !cwnd_ok {
                    return None;
                }
            }
        }

        // Window: the peer's, and the congestion window.
        let wnd_end = self.snd_una + self.snd_wnd;
        let cwnd_room = self.cc.cwnd().saturating_sub(self.pipe());

        // 2. Go-back-N after an RTO, or 3. new data.
        let off = self.snd_nxt;
        if off < end {
            if self.snd_nxt == self.snd_max && self.snd_una == self.snd_max {
                // Idle restart (RFC 5681 4.1).
                if now.saturating_since(self.last_send) > self.rtt.rto() {
                    let iw =
                        u64::from(self.cfg.initial_cwnd_segments.max(1)) * self.eff_mss() as u64;
                    self.cc.on_idle_restart(iw);
                }
            }
            let wnd_room = wnd_end.saturating_sub(off);
            let room = wnd_room.min(cwnd_room).min(usize::MAX as u64) as usize;
            let retransmit = off < self.snd_max;
            if !retransmit && self.segmap.is_full() {
                return None;
            }
            // A retransmission keeps the original segment's boundaries.
            let max = if retransmit {
                mss.min((self.segmap.end_of(off, self.snd_max) - off) as usize)
            } else {
                mss
            };
            let want = src.seg_len(off, max).min(max).min((end - off) as usize);
            let mut len = 0;
            if want == 0 {
                // The source claims data but offers none: nothing to do.
            } else if want <= room {
                len = want;
            } else if retransmit && off == self.snd_una && self.rto_head {
                // After a timeout the first segment goes even into a closed window: a
                // window update lost (or a forged zero window) would otherwise stall the
                // connection, since the persist timer only runs with nothing in flight.
                len = want;
            } else if room > 0 && (self.snd_una == self.snd_nxt || self.persist_force) {
                // Nothing in flight, so no ACK will open the window: send the whole
                // records that fit (a split is certain only below `room`), or split the
                // record if the peer's window can never hold it (correctness first).
                // With data in flight we wait for a full segment (sender SWS avoidance).
                let part = src.seg_len(off, room).min(room);
                if part < room
                    || self.persist_force
                    || (wnd_room < want as u64 && room as u64 >= self.max_snd_wnd / 2)
                {
                    len = part;
                }
            }
            if len > 0 {
                self.persist_force = false;
                self.rto_head = false;
                let seg_end = off + len as u64;
                return Some(DataPlan {
                    offset: off,
                    len,
                    fin: fin_ok(self, seg_end),
                    retransmit: off < self.snd_max,
                });
            }
            if self.snd_una == self.snd_max
                && wnd_room < want as u64
                && !self.timers.is_set(Timer::Persist)
            {
                // Zero (or too small) window with nothing in flight: persist timer.
                let t = self
                    .rtt
                    .rto()
                    .as_nanos()
                    .checked_shl(self.persist_backoff.min(16))
                    .unwrap_or(u64::MAX);
                let t = Duration(t.min(Duration::from_millis(self.cfg.rto_ms_max).as_nanos()));
                self.timers.set(Timer::Persist, now + t);
            }
            return None;
        }

        // 4. FIN alone.
        if fin_ok(self, off) && (cwnd_room > 0 || self.snd_una == self.snd_nxt) {
            return Some(DataPlan {
                offset: off,
                len: 0,
                fin: true,
                retransmit: self.fin_off.is_some(),
            });
        }
        None
    }

    fn send_data(
        &mut self,
        now: Instant,
        src: &mut impl TxSource,
        buf: &mut [u8],
        plan: DataPlan,
    ) -> Option<usize> {
        let seq = self.seq_of(plan.offset);
        let flags = TcpFlags {
            ack: true,
            psh: plan.len > 0,
            fin: plan.fin,
            ..Default::default()
        };
        let mut hdr = self.header(now, seq, flags, false);
        // SACK blocks ride on data only where they fit in the peer's MSS.
        let mut sack_owed = false;
        if self.sack_ok && !self.ooo.is_empty() {
            let with = self.header(now, seq, flags, true);
            let opt_len = with.header_len() - TCP_HEADER_LEN;
            if plan.len + opt_len <= usize::from(self.peer_mss)
                && with.header_len() + plan.len <= buf.len()
            {
                hdr = with;
            } else {
                sack_owed = true;
            }
        }
        let hlen = hdr.header_len();
        let payload = buf.get_mut(hlen..hlen + plan.len)?;
        if plan.len > 0 {
            src.fill(plan.offset, payload);
        }

        let seg_end = plan.offset + plan.len as u64;
        if plan.retransmit && plan.len > 0 {
            self.counters.retransmits += 1;
            if let Some((p, _)) = self.rtt_probe {
                if p >= plan.offset && p < seg_end {
                    self.rtt_probe = None;
                }
            }
        } else if plan.len > 0 && plan.offset >= self.snd_max {
            self.segmap.record(plan.offset);
            self.schedule_release(now);
            if self.rtt_probe.is_none() {
                self.rtt_probe = Some((plan.offset, now));
            }
        }
        if !self.in_recovery || plan.offset >= self.snd_nxt {
            self.snd_nxt = self.snd_nxt.max(seg_end);
        }
        self.snd_max = self.snd_max.max(seg_end);
        if plan.fin {
            self.fin_off = Some(seg_end);
            self.fin_pending = false;
            self.snd_nxt = seg_end;
        }
        if !self.timers.is_set(Timer::Rto) {
            self.arm_rto(now);
        }
        let n = self.finish(now, &hdr, plan.len, buf);
        if sack_owed {
            self.ack_pending = true;
        }
        n
    }

    /// Emits `hdr` (payload already in place) and does the per-segment bookkeeping.
    fn finish(
        &mut self,
        now: Instant,
        hdr: &OutHeader,
        payload_len: usize,
        buf: &mut [u8],
    ) -> Option<usize> {
        let offload = self.cfg.checksum_offload;
        let n = hdr.emit(&self.tuple, self.pseudo, payload_len, buf, offload)?;
        self.counters.segs_out += 1;
        self.last_send = now;
        if let Some(ack) = hdr.ack() {
            self.ack_pending = false;
            self.delack_segs = 0;
            self.timers.stop(Timer::DelayedAck);
            self.last_ack_sent = ack;
        }
        Some(n)
    }
}
