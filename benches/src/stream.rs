//! The WRITE workload, as perftest's `ib_write_bw` / `ib_write_lat`-style rate tests run
//! it: A keeps its send queue full of RDMA WRITEs of one size, unsignaled except every
//! `signal_every`-th, and B's engine places them. Completions retire in post order, so a
//! signaled completion for WR `i` means every WR up to `i` is done.

use iwarp_types::{
    Cqe, QpId, SendFlags, SendOp, SendWr, SgList, Sge, VerbError, WcOpcode, WcStatus,
};

use crate::pair::{BenchError, Pair};

/// Completions polled from A's CQ per call.
const CQ_POLL_BATCH: usize = 64;
/// Shuttle rounds without a completion before the workload is declared stuck.
const STALL_ROUNDS_MAX: u64 = 100_000;

/// Shape of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteConfig {
    /// Bytes per WRITE.
    pub msg_len: u32,
    /// Every `signal_every`-th WR is signaled (perftest's `--cq-mod`); at least 1.
    pub signal_every: u64,
    /// Distinct source/destination buffers (each `msg_len` bytes).
    pub slots: u32,
    /// WR `i` uses slot `(i * slot_step) % slots`: 1 visits the slots in address order
    /// (the hardware prefetcher follows); a large step coprime with `slots` (as
    /// [`WriteConfig::spread`] picks) puts consecutive WRs far apart, as many QPs each
    /// writing its own buffer do.
    pub slot_step: u32,
}

impl WriteConfig {
    /// `msg_len`-byte WRITEs, a signaled one every 32, buffers spread over at most 256 KiB
    /// (and at most 64 of them) so source and sink stay cache-warm like the limit's.
    pub fn new(msg_len: u32) -> WriteConfig {
        let slots = (256 * 1024 / msg_len.max(1)).clamp(1, 64);
        WriteConfig {
            msg_len,
            signal_every: 32,
            slots,
            slot_step: 1,
        }
    }

    /// `msg_len`-byte WRITEs, a signaled one every 32, over `slots` buffers at each end
    /// visited in the spread limit's shuffled order (a large step coprime with `slots`): one
    /// QP with the working set of `slots` QPs (issue 13, target 6's like-for-like
    /// reference).
    pub fn spread(msg_len: u32, slots: u32) -> WriteConfig {
        let slots = slots.max(1);
        WriteConfig {
            slots,
            slot_step: crate::limit::visit_stride(slots as usize) as u32,
            ..WriteConfig::new(msg_len)
        }
    }

    /// Arena bytes each node needs.
    pub fn arena_bytes(&self) -> usize {
        self.msg_len as usize * self.slots as usize
    }
}

/// A running WRITE stream over a connected [`Pair`].
pub struct WriteStream {
    cfg: WriteConfig,
    /// WRs posted so far (the next WR's id).
    posted: u64,
    /// WRs known complete (every id below this).
    completed: u64,
    /// WRs until (and including) the next signaled one.
    until_signal: u64,
    /// Completions reaped.
    cqes_reaped: u64,
    cqes: [Cqe; CQ_POLL_BATCH],
}

impl WriteStream {
    /// A stream; fills A's source buffers with a pattern.
    pub fn new(pair: &mut Pair, cfg: WriteConfig) -> Result<WriteStream, BenchError> {
        if cfg.msg_len == 0 || cfg.slots == 0 || cfg.signal_every == 0 || cfg.slot_step == 0 {
            return Err(BenchError(
                "msg_len, slots, slot_step and signal_every must be positive".into(),
            ));
        }
        let arena = pair.a.mem.arena_mut(pair.a.region);
        if arena.len() < cfg.arena_bytes()
            || pair.b.mem.arena(pair.b.region).len() < cfg.arena_bytes()
        {
            return Err(BenchError(format!(
                "arenas smaller than {} bytes",
                cfg.arena_bytes()
            )));
        }
        for (i, byte) in arena.iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(7).wrapping_add((i >> 8) as u8);
        }
        let blank = Cqe {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Write,
            byte_len: 0,
            qp: QpId(0),
            invalidated: None,
            solicited: false,
        };
        Ok(WriteStream {
            cfg,
            posted: 0,
            completed: 0,
            until_signal: cfg.signal_every,
            cqes_reaped: 0,
            cqes: [blank; CQ_POLL_BATCH],
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WriteConfig {
        &self.cfg
    }

    /// WRs completed so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Completions reaped from A's CQ so far.
    pub fn cqes_reaped(&self) -> u64 {
        self.cqes_reaped
    }

    /// WRs posted so far.
    pub fn posted(&self) -> u64 {
        self.posted
    }

    /// Posts WRITEs until A's send queue is full.
    fn post(&mut self, pair: &mut Pair) -> Result<(), BenchError> {
        let len = self.cfg.msg_len;
        loop {
            let id = self.posted;
            let slots = u64::from(self.cfg.slots);
            let offset = (id % slots * u64::from(self.cfg.slot_step) % slots) * u64::from(len);
            // Every `signal_every`-th WR (ids signal_every - 1, 2 * signal_every - 1, ...).
            let signaled = self.until_signal <= 1;
            let flags = if signaled {
                SendFlags::SIGNALED
            } else {
                SendFlags::NONE
            };
            let wr = SendWr {
                wr_id: id,
                op: SendOp::Write {
                    remote_to: offset,
                    rkey: pair.b.mr,
                },
                sgl: SgList::single(Sge {
                    addr: offset,
                    length: len,
                    lkey: pair.a.mr,
                }),
                flags,
            };
            match pair.a.eng.post_send(pair.a.qp, &wr) {
                Ok(()) => {
                    self.posted += 1;
                    self.until_signal = if signaled {
                        self.cfg.signal_every
                    } else {
                        self.until_signal - 1
                    };
                }
                Err(VerbError::TooManyWrsPosted) => return Ok(()),
                Err(e) => return Err(BenchError(format!("post_send: {e:?}"))),
            }
        }
    }

    /// Polls A's CQ; every CQE must be a successful WRITE.
    fn reap(&mut self, pair: &mut Pair) -> Result<(), BenchError> {
        loop {
            let n = pair
                .a
                .eng
                .rnic_mut()
                .poll_cq(pair.a.cq, &mut self.cqes)
                .map_err(|e| BenchError(format!("poll_cq: {e:?}")))?;
            for c in &self.cqes[..n] {
                if c.status != WcStatus::Success || c.opcode != WcOpcode::Write {
                    return Err(BenchError(format!("bad completion {c:?}")));
                }
                self.completed = self.completed.max(c.wr_id + 1);
                self.cqes_reaped += 1;
            }
            if n < self.cqes.len() {
                return Ok(());
            }
        }
    }

    /// Runs until at least `count` more WRs have completed; returns how many did (a
    /// multiple of nothing in particular: completions arrive `signal_every` at a time).
    pub fn run(&mut self, pair: &mut Pair, count: u64) -> Result<u64, BenchError> {
        let start = self.completed;
        let target = start.saturating_add(count);
        let mut idle_rounds = 0u64;
        while self.completed < target {
            let before = self.completed;
            self.post(pair)?;
            pair.round();
            self.reap(pair)?;
            if self.completed == before {
                idle_rounds += 1;
                if idle_rounds > STALL_ROUNDS_MAX {
                    pair.check_events()?;
                    return Err(BenchError(format!(
                        "no completion in {STALL_ROUNDS_MAX} rounds (posted {}, completed {})",
                        self.posted, self.completed
                    )));
                }
            } else {
                idle_rounds = 0;
            }
        }
        pair.check_events()?;
        Ok(self.completed - start)
    }

    /// True if every destination slot of B holds the bytes of the matching source slot of
    /// A (valid once each slot was written at least once and the stream is drained).
    pub fn verify(&self, pair: &Pair) -> bool {
        let n = self.cfg.arena_bytes();
        pair.a.mem.arena(pair.a.region)[..n] == pair.b.mem.arena(pair.b.region)[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pair::PairConfig;

    fn setup(msg_len: u32, pcfg: PairConfig) -> (Pair, WriteStream) {
        let wcfg = WriteConfig::new(msg_len);
        let pcfg = PairConfig {
            arena_bytes: wcfg.arena_bytes(),
            ..pcfg
        };
        let mut pair = Pair::connected(pcfg).unwrap();
        let s = WriteStream::new(&mut pair, wcfg).unwrap();
        (pair, s)
    }

    #[test]
    fn slots_cover_at_most_256_kib() {
        assert_eq!(WriteConfig::new(64).slots, 64);
        assert_eq!(WriteConfig::new(4096).slots, 64);
        assert_eq!(WriteConfig::new(65536).slots, 4);
        assert_eq!(WriteConfig::new(1 << 20).slots, 1);
    }

    #[test]
    fn writes_of_64_bytes_complete_and_land() {
        let (mut pair, mut s) = setup(64, PairConfig::default());
        let done = s.run(&mut pair, 1000).unwrap();
        assert!(done >= 1000, "{done}");
        assert!(s.posted() >= s.completed());
        assert!(s.verify(&pair), "B's buffers differ from A's");
        assert_eq!(
            pair.stats.timer_jumps, 0,
            "a zero-loss stream never waits on a timer"
        );
    }

    #[test]
    fn writes_of_64_kib_at_jumbo_mtu_land_with_software_checksums() {
        let pcfg = PairConfig {
            mtu: 9000,
            checksum_offload: false,
            ..PairConfig::default()
        };
        let (mut pair, mut s) = setup(65536, pcfg);
        s.run(&mut pair, 40).unwrap();
        assert!(s.verify(&pair));
        let c = pair.b.eng.counters().clone();
        assert_eq!(c.tcp_checksum_errors, 0);
        // 40 x 64 KiB went over the link, plus headers.
        assert!(pair.stats.bytes_ab > 40 * 65536, "{:?}", pair.stats);
    }

    #[test]
    fn runs_continue_where_the_last_stopped() {
        let (mut pair, mut s) = setup(4096, PairConfig::default());
        let first = s.run(&mut pair, 100).unwrap();
        let second = s.run(&mut pair, 100).unwrap();
        assert!(first >= 100 && second >= 100);
        assert_eq!(s.completed(), first + second);
        assert!(s.verify(&pair));
    }

    #[test]
    fn one_completion_per_signal_every_wrs() {
        let (mut pair, mut s) = setup(64, PairConfig::default());
        s.run(&mut pair, 640).unwrap();
        // One CQE per 32 WRs, the last for WR id 32k - 1.
        assert_eq!(s.completed(), s.cqes_reaped() * 32, "{}", s.completed());
        // B placed every completed WRITE, one DDP segment each.
        let b = pair.b.eng.rnic().qp_counters(pair.b.qp).unwrap();
        assert!(b.segs_in >= s.completed(), "{b:?}");
    }

    #[test]
    fn zero_sized_config_is_rejected() {
        let mut pair = Pair::connected(PairConfig::default()).unwrap();
        let cfg = WriteConfig {
            signal_every: 0,
            ..WriteConfig::new(64)
        };
        assert!(WriteStream::new(&mut pair, cfg).is_err());
        let cfg = WriteConfig::new(1 << 21);
        assert!(
            WriteStream::new(&mut pair, cfg).is_err(),
            "larger than the arena"
        );
    }
}
