//! Seeded workloads for whole-system runs: a plan of operations between two hosts, the
//! memory layout they use (sources, sinks, canary gaps), and the checks that every byte
//! placed is the byte sent and no byte outside a completed message's range changed.
//!
//! Layout: each host has one data arena. Ranges are carved from it by a bump allocator
//! with random gaps; the whole arena starts filled with a position-dependent canary
//! pattern, sources are then overwritten with seeded random bytes. The expected final
//! arena is the initial one with each completed message's bytes copied into its sink.

use iwarp_types::{RegionId, VecMemory};

use crate::rng::SimRng;

/// The canary byte of `host`'s arena at `offset`.
pub fn canary(host: usize, offset: u64) -> u8 {
    (offset
        .wrapping_mul(131)
        .wrapping_add(host as u64 * 17 + 0x5a)
        ^ (offset >> 8)) as u8
}

/// A range of a host arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// Offset in the arena.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

impl Range {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Operation kinds of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Send.
    Send,
    /// Send with Solicited Event.
    SendSe,
    /// Send with Invalidate (of a dedicated STag of the receiver).
    SendInv,
    /// Send with SE and Invalidate.
    SendSeInv,
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// RDMA Read with Invalidate Local STag (the sink has a dedicated STag).
    ReadInv,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 7] = [
        OpKind::Send,
        OpKind::SendSe,
        OpKind::SendInv,
        OpKind::SendSeInv,
        OpKind::Write,
        OpKind::Read,
        OpKind::ReadInv,
    ];

    /// Send of any type (consumes a receive at the peer).
    pub fn is_send(self) -> bool {
        matches!(
            self,
            OpKind::Send | OpKind::SendSe | OpKind::SendInv | OpKind::SendSeInv
        )
    }

    /// RDMA Read of any type (the poster is the data sink).
    pub fn is_read(self) -> bool {
        matches!(self, OpKind::Read | OpKind::ReadInv)
    }
}

/// One operation: `poster` posts it on its QP; data flows from `src` (in the arena of
/// `src_host`) to `dst` (in the arena of `dst_host`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// What it is.
    pub kind: OpKind,
    /// Host posting the WR.
    pub poster: usize,
    /// Message length.
    pub len: u64,
    /// Host holding the source.
    pub src_host: usize,
    /// Source pieces (one SGE each; one piece for Read sources).
    pub src: Vec<Range>,
    /// Host holding the sink.
    pub dst_host: usize,
    /// Sink pieces (a receive's SGEs: the last may be longer than needed; one piece for
    /// Write and Read sinks).
    pub dst: Vec<Range>,
    /// Request a completion on success (the last op of each poster always does).
    pub signaled: bool,
}

impl Op {
    /// Copies the message from the source pieces into a vector.
    pub fn message(&self, src_mem: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(self.len as usize);
        for r in &self.src {
            m.extend_from_slice(&src_mem[r.offset as usize..r.end() as usize]);
        }
        m.truncate(self.len as usize);
        m
    }

    /// The sink bytes the message lands in, as (arena offset, length) runs in order.
    pub fn placed_runs(&self) -> Vec<Range> {
        let mut left = self.len;
        let mut out = Vec::new();
        for r in &self.dst {
            if left == 0 {
                break;
            }
            let n = left.min(r.len);
            out.push(Range {
                offset: r.offset,
                len: n,
            });
            left -= n;
        }
        out
    }
}

/// Parameters of plan generation.
#[derive(Clone, Copy, Debug)]
pub struct PlanConfig {
    /// Operations at most (at least one).
    pub ops_max: usize,
    /// Largest message.
    pub len_max: u64,
    /// Probability that a run includes one large message (above 256 KiB).
    pub large_chance: f64,
    /// Kinds allowed.
    pub allow_invalidate: bool,
    /// Probability that an op other than the last is unsignaled.
    pub unsignaled_chance: f64,
    /// The first op is posted by host 0 (the MPA initiator): without peer-to-peer RTR
    /// the responder may not send before the initiator's first FPDU arrives, so a ULP
    /// must let the initiator speak first (RFC 5044 section 7.1.2).
    pub initiator_first: bool,
}

impl Default for PlanConfig {
    fn default() -> PlanConfig {
        PlanConfig {
            ops_max: 24,
            len_max: 1 << 20,
            large_chance: 0.05,
            allow_invalidate: true,
            unsignaled_chance: 0.2,
            initiator_first: true,
        }
    }
}

/// A bump allocator over a host arena with random gaps (canaries) between ranges.
#[derive(Clone, Debug, Default)]
struct Bump {
    next: u64,
}

impl Bump {
    fn take(&mut self, len: u64, rng: &mut SimRng) -> Range {
        let gap = rng.range_inclusive(1, 64);
        let offset = self.next + gap;
        self.next = offset + len;
        Range { offset, len }
    }
}

/// A workload between host 0 and host 1.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The operations, in posting order (per poster the order is the SQ order).
    pub ops: Vec<Op>,
    /// Arena length needed on each host.
    pub arena_len: [u64; 2],
}

impl Plan {
    /// A random plan.
    pub fn generate(cfg: &PlanConfig, rng: &mut SimRng) -> Plan {
        let n = rng.range_inclusive(1, cfg.ops_max.max(1) as u64) as usize;
        let large_at = if rng.chance(cfg.large_chance) {
            Some(rng.below(n as u64) as usize)
        } else {
            None
        };
        let mut bumps = [Bump::default(), Bump::default()];
        let mut ops = Vec::with_capacity(n);
        let kinds: Vec<OpKind> = OpKind::ALL
            .iter()
            .copied()
            .filter(|k| {
                cfg.allow_invalidate
                    || !matches!(k, OpKind::SendInv | OpKind::SendSeInv | OpKind::ReadInv)
            })
            .collect();
        for i in 0..n {
            let kind = *rng.pick(&kinds);
            let poster = if i == 0 && cfg.initiator_first {
                0
            } else {
                rng.below(2) as usize
            };
            let peer = 1 - poster;
            let len = if large_at == Some(i) {
                rng.range_inclusive((256 << 10).min(cfg.len_max), cfg.len_max)
            } else {
                rng.skewed_len(cfg.len_max.min(64 << 10))
            };
            let (src_host, dst_host) = if kind.is_read() {
                (peer, poster)
            } else {
                (poster, peer)
            };
            let src = if kind.is_read() || len == 0 {
                vec![bumps[src_host].take(len, rng)]
            } else {
                split(len, rng)
                    .into_iter()
                    .map(|l| bumps[src_host].take(l, rng))
                    .collect()
            };
            let dst = if kind.is_send() {
                // Receive SGEs: split the message, with slack at the end of the last.
                let slack = if rng.chance(0.3) {
                    rng.range_inclusive(1, 32)
                } else {
                    0
                };
                let mut pieces = if len == 0 { vec![0] } else { split(len, rng) };
                if let Some(last) = pieces.last_mut() {
                    *last += slack;
                }
                pieces
                    .into_iter()
                    .map(|l| bumps[dst_host].take(l, rng))
                    .collect()
            } else {
                vec![bumps[dst_host].take(len, rng)]
            };
            let signaled = !rng.chance(cfg.unsignaled_chance);
            ops.push(Op {
                kind,
                poster,
                len,
                src_host,
                src,
                dst_host,
                dst,
                signaled,
            });
        }
        // The last op of each poster is signaled, so its completion proves the rest.
        for p in 0..2 {
            if let Some(op) = ops.iter_mut().rev().find(|o| o.poster == p) {
                op.signaled = true;
            }
        }
        let arena_len = [bumps[0].next + 64, bumps[1].next + 64];
        Plan { ops, arena_len }
    }

    /// Fills each host's arena: canaries everywhere, seeded data in the sources.
    pub fn fill(&self, host: usize, mem: &mut VecMemory, region: RegionId, rng: &mut SimRng) {
        let arena = mem.arena_mut(region);
        for (o, b) in arena.iter_mut().enumerate() {
            *b = canary(host, o as u64);
        }
        for op in self.ops.iter().filter(|o| o.src_host == host) {
            for r in &op.src {
                rng.fill_bytes(&mut arena[r.offset as usize..r.end() as usize]);
            }
        }
    }
}

/// Splits `len` (> 0) into 1..=4 non-empty pieces.
fn split(len: u64, rng: &mut SimRng) -> Vec<u64> {
    let pieces = rng.range_inclusive(1, 4).min(len);
    let mut cuts: Vec<u64> = (1..pieces)
        .map(|_| rng.range_inclusive(1, len - 1))
        .collect();
    cuts.push(0);
    cuts.push(len);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Expected contents of host arenas as completions arrive.
#[derive(Clone, Debug)]
pub struct Expect {
    arenas: [Vec<u8>; 2],
}

impl Expect {
    /// From the initial arenas (after [`Plan::fill`]).
    pub fn new(a: &[u8], b: &[u8]) -> Expect {
        Expect {
            arenas: [a.to_vec(), b.to_vec()],
        }
    }

    /// Records that `op` completed: its sink now holds its message.
    pub fn complete(&mut self, op: &Op) {
        let msg = op.message(&self.arenas[op.src_host]);
        let mut at = 0usize;
        for r in op.placed_runs() {
            let n = r.len as usize;
            self.arenas[op.dst_host][r.offset as usize..r.offset as usize + n]
                .copy_from_slice(&msg[at..at + n]);
            at += n;
        }
    }

    /// The sink of `op` in `actual` holds its message (a completion must never precede
    /// placement). Returns a description of the first difference.
    pub fn check_placed(&self, op: &Op, actual: &[u8]) -> Result<(), String> {
        let msg = op.message(&self.arenas[op.src_host]);
        let mut at = 0usize;
        for r in op.placed_runs() {
            let n = r.len as usize;
            let got = &actual[r.offset as usize..r.offset as usize + n];
            if got != &msg[at..at + n] {
                let i = got
                    .iter()
                    .zip(&msg[at..at + n])
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(format!(
                    "{:?} of {} bytes: byte {} of the message (arena offset {}) is {:#04x}, sent {:#04x}",
                    op.kind,
                    op.len,
                    at + i,
                    r.offset as usize + i,
                    got[i],
                    msg[at + i]
                ));
            }
            at += n;
        }
        Ok(())
    }

    /// The whole arena of `host` equals the expectation (canaries intact, sources intact,
    /// sinks of completed messages filled). Returns the first difference.
    pub fn check_arena(&self, host: usize, actual: &[u8]) -> Result<(), String> {
        let want = &self.arenas[host];
        if want.len() != actual.len() {
            return Err(format!(
                "host {host}: arena length {} != {}",
                actual.len(),
                want.len()
            ));
        }
        match want.iter().zip(actual).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => {
                let end = want[i..]
                    .iter()
                    .zip(&actual[i..])
                    .take_while(|(a, b)| a != b)
                    .count();
                Err(format!(
                    "host {host}: arena byte {i} is {:#04x}, expected {:#04x} ({} differing bytes from there)",
                    actual[i], want[i], end
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_disjoint_and_bounded() {
        let mut rng = SimRng::new(77);
        for _ in 0..300 {
            let plan = Plan::generate(&PlanConfig::default(), &mut rng);
            assert!(!plan.ops.is_empty());
            for host in 0..2 {
                let mut ranges: Vec<Range> = plan
                    .ops
                    .iter()
                    .flat_map(|o| {
                        let s = if o.src_host == host {
                            o.src.clone()
                        } else {
                            vec![]
                        };
                        let d = if o.dst_host == host {
                            o.dst.clone()
                        } else {
                            vec![]
                        };
                        s.into_iter().chain(d)
                    })
                    .collect();
                ranges.sort_by_key(|r| r.offset);
                for w in ranges.windows(2) {
                    assert!(w[0].end() < w[1].offset, "gap between ranges");
                }
                assert!(ranges.last().is_none_or(|r| r.end() < plan.arena_len[host]));
            }
            for op in &plan.ops {
                assert!(op.len <= 1 << 20);
                let src: u64 = op.src.iter().map(|r| r.len).sum();
                assert_eq!(src, op.len);
                let dst: u64 = op.dst.iter().map(|r| r.len).sum();
                assert!(dst >= op.len);
                assert!(
                    op.src.len() <= iwarp_types::MAX_SGE && op.dst.len() <= iwarp_types::MAX_SGE
                );
                if !op.kind.is_send() {
                    assert_eq!(op.dst.len(), 1);
                }
            }
            for p in 0..2 {
                if let Some(last) = plan.ops.iter().rev().find(|o| o.poster == p) {
                    assert!(last.signaled);
                }
            }
        }
    }

    #[test]
    fn expectations_track_placement() {
        let mut rng = SimRng::new(3);
        let plan = Plan::generate(
            &PlanConfig {
                ops_max: 6,
                ..PlanConfig::default()
            },
            &mut rng,
        );
        let mut mems = [VecMemory::new(), VecMemory::new()];
        let mut regions = [RegionId(0); 2];
        for h in 0..2 {
            regions[h] = mems[h].add_arena(plan.arena_len[h] as usize);
            plan.fill(h, &mut mems[h], regions[h], &mut rng);
        }
        let mut expect = Expect::new(mems[0].arena(regions[0]), mems[1].arena(regions[1]));
        for h in 0..2 {
            expect.check_arena(h, mems[h].arena(regions[h])).unwrap();
        }
        // Perform every op by hand: a correct "transport".
        for op in &plan.ops {
            let msg = op.message(mems[op.src_host].arena(regions[op.src_host]));
            let mut at = 0;
            for r in op.placed_runs() {
                let n = r.len as usize;
                let arena = mems[op.dst_host].arena_mut(regions[op.dst_host]);
                arena[r.offset as usize..r.offset as usize + n].copy_from_slice(&msg[at..at + n]);
                at += n;
            }
            expect
                .check_placed(op, mems[op.dst_host].arena(regions[op.dst_host]))
                .unwrap();
            expect.complete(op);
        }
        for h in 0..2 {
            expect.check_arena(h, mems[h].arena(regions[h])).unwrap();
        }
        // A stray byte is found.
        let arena = mems[0].arena_mut(regions[0]);
        arena[0] ^= 1;
        assert!(expect
            .check_arena(0, mems[0].arena(regions[0]))
            .unwrap_err()
            .contains("byte 0"));
    }

    #[test]
    fn split_sums() {
        let mut rng = SimRng::new(1);
        for len in [1u64, 2, 3, 100, 5000] {
            for _ in 0..50 {
                let p = split(len, &mut rng);
                assert_eq!(p.iter().sum::<u64>(), len);
                assert!(p.iter().all(|x| *x > 0) && p.len() <= 4);
            }
        }
    }
}
