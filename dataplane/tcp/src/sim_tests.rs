//! Two connections joined by an in-memory lossy, reordering, duplicating link, with
//! record-based sources of random sizes. Deterministic: a fixed seed, printed on failure.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use iwarp_types::{Duration, Instant};

use crate::config::{Congestion, TcpConfig};
use crate::conn::{TcpConn, TcpEvent, TcpState};
use crate::segment::TcpSegment;
use crate::test_util::*;
use crate::unknown::reply_to_unknown;

/// xorshift64*: tiny deterministic PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pct(&mut self, p: u64) -> bool {
        self.below(10_000) < p
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CloseOrder {
    AFirst,
    BFirst,
    Simultaneous,
}

struct Link {
    /// Loss probability in 1/10 000.
    loss: u64,
    /// Duplication probability in 1/10 000.
    dup: u64,
    delay: Duration,
    /// Up to this much extra delay per frame (reorders).
    jitter_ns: u64,
}

struct Side {
    conn: Option<TcpConn>,
    src: RecordSource,
    sink: Collect,
    events: Vec<TcpEvent>,
    total: usize,
    closed_app: bool,
    states: Vec<TcpState>,
}

impl Side {
    fn new(total: usize) -> Side {
        Side {
            conn: None,
            src: RecordSource::default(),
            sink: Collect::default(),
            events: Vec::new(),
            total,
            closed_app: false,
            states: Vec::new(),
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Frame {
    at: Instant,
    seq: u64,
    to_b: bool,
    bytes: Vec<u8>,
}

struct Sim {
    seed: u64,
    rng: Rng,
    now: Instant,
    cfg: TcpConfig,
    link: Link,
    a: Side,
    b: Side,
    frames: BinaryHeap<Reverse<Frame>>,
    frame_seq: u64,
    max_record: usize,
    order: CloseOrder,
    resets_sent: u32,
}

const A_TUPLE: crate::segment::FourTuple = LOCAL;

impl Sim {
    fn new(
        seed: u64,
        cfg: TcpConfig,
        link: Link,
        a_bytes: usize,
        b_bytes: usize,
        order: CloseOrder,
    ) -> Sim {
        let mut s = Sim {
            seed,
            rng: Rng(seed | 1),
            now: Instant::ZERO,
            cfg,
            link,
            a: Side::new(a_bytes),
            b: Side::new(b_bytes),
            frames: BinaryHeap::new(),
            frame_seq: 0,
            max_record: 3000,
            order,
            resets_sent: 0,
        };
        let isn = crate::seq::SeqNumber(s.rng.next() as u32);
        s.a.conn = Some(TcpConn::connect(cfg, A_TUPLE, isn, s.now));
        s
    }

    fn ctx(&self) -> String {
        format!("seed {:#x}, order {:?}", self.seed, self.order)
    }

    /// The application: queue records while little is unacknowledged, close per order.
    fn app(&mut self) {
        let now = self.now;
        let max_record = self.max_record;
        for side in [&mut self.a, &mut self.b] {
            let Some(conn) = side.conn.as_mut() else {
                continue;
            };
            if conn.state().is_synchronized() && !side.closed_app {
                while side.src.data.len() < side.total
                    && (side.src.data.len() as u64) < conn.acked_offset() + 512 * 1024
                {
                    let left = side.total - side.src.data.len();
                    let len = (1 + self.rng.below(max_record as u64) as usize).min(left);
                    side.src.push(len);
                }
            }
        }
        let ready = |s: &Side| {
            s.src.data.len() >= s.total
                && s.conn
                    .as_ref()
                    .is_some_and(|c| c.state() == TcpState::Established)
        };
        // Simultaneous: both close at the same instant, once both are established.
        let both_ready = ready(&self.a) && ready(&self.b);
        for is_a in [true, false] {
            let side = if is_a { &mut self.a } else { &mut self.b };
            let Some(conn) = side.conn.as_mut() else {
                continue;
            };
            let all_queued = side.src.data.len() >= side.total;
            let peer_closed = side.events.contains(&TcpEvent::PeerClosed);
            let go = match (self.order, is_a) {
                (CloseOrder::Simultaneous, _) => both_ready,
                (CloseOrder::AFirst, true) | (CloseOrder::BFirst, false) => all_queued,
                _ => all_queued && peer_closed,
            };
            if go && !side.closed_app && conn.state().is_synchronized() {
                conn.close(now);
                side.closed_app = true;
            }
        }
    }

    fn transmit(&mut self) {
        let mut buf = [0u8; 2048];
        for is_a in [true, false] {
            loop {
                let side = if is_a { &mut self.a } else { &mut self.b };
                let Some(conn) = side.conn.as_mut() else {
                    break;
                };
                let Some(n) = conn.poll_transmit(self.now, &mut side.src, &mut buf) else {
                    break;
                };
                while let Some(e) = conn.poll_event() {
                    side.events.push(e);
                }
                self.send_frame(is_a, &buf[..n]);
            }
            let side = if is_a { &mut self.a } else { &mut self.b };
            if let Some(conn) = side.conn.as_mut() {
                while let Some(e) = conn.poll_event() {
                    side.events.push(e);
                }
            }
        }
    }

    fn send_frame(&mut self, from_a: bool, bytes: &[u8]) {
        if self.rng.pct(self.link.loss) {
            return;
        }
        let copies = if self.rng.pct(self.link.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let jitter = Duration(self.rng.below(self.link.jitter_ns + 1));
            self.frame_seq += 1;
            self.frames.push(Reverse(Frame {
                at: self.now + self.link.delay + jitter,
                seq: self.frame_seq,
                to_b: from_a,
                bytes: bytes.to_vec(),
            }));
        }
    }

    /// Delivers the earliest frame that is due, if any (one per step, so each side
    /// answers every segment as a real receiver would).
    fn deliver_due(&mut self) {
        {
            if self.frames.peek().is_none_or(|f| f.0.at > self.now) {
                return;
            }
            let Some(Reverse(f)) = self.frames.pop() else {
                return;
            };
            let (src_ip, dst_ip) = if f.to_b {
                (A_TUPLE.local_ip, A_TUPLE.remote_ip)
            } else {
                (A_TUPLE.remote_ip, A_TUPLE.local_ip)
            };
            let seg =
                TcpSegment::parse(src_ip, dst_ip, &f.bytes, true).expect("our segments parse");
            let now = self.now;
            let cfg = self.cfg;
            let side = if f.to_b { &mut self.b } else { &mut self.a };
            let live = side
                .conn
                .as_ref()
                .is_some_and(|c| c.state() != TcpState::Closed);
            if live {
                let conn = side.conn.as_mut().unwrap();
                conn.handle_segment(now, &seg, &mut side.sink);
            } else if f.to_b && side.conn.is_none() && seg.flags.syn && !seg.flags.ack {
                let isn = crate::seq::SeqNumber(self.rng.next() as u32);
                self.b.conn = TcpConn::accept(cfg, seg.tuple, &seg, isn, now);
            } else if let Some(rst) = reply_to_unknown(&seg) {
                let mut out = [0u8; 64];
                let n = rst.emit(&mut out, false).unwrap();
                self.resets_sent += 1;
                let bytes = out[..n].to_vec();
                self.send_frame(!f.to_b, &bytes);
            }
        }
    }

    fn done(&self) -> bool {
        let closed = |s: &Side| {
            s.conn
                .as_ref()
                .is_some_and(|c| c.state() == TcpState::Closed)
        };
        closed(&self.a) && closed(&self.b) && self.frames.is_empty()
    }

    fn run(&mut self, max_steps: usize) {
        for _ in 0..max_steps {
            self.app();
            self.transmit();
            for side in [&mut self.a, &mut self.b] {
                if let Some(st) = side.conn.as_ref().map(|c| c.state()) {
                    if side.states.last() != Some(&st) {
                        side.states.push(st);
                    }
                }
            }
            if self.done() {
                return;
            }
            let mut next: Option<Instant> = self.frames.peek().map(|f| f.0.at);
            for c in [&self.a.conn, &self.b.conn].into_iter().flatten() {
                if let Some(t) = c.poll_timeout() {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            let Some(t) = next else {
                panic!("stalled with nothing scheduled ({})", self.ctx());
            };
            self.now = self.now.max(t);
            for c in [&mut self.a.conn, &mut self.b.conn].into_iter().flatten() {
                c.handle_timeout(self.now);
            }
            self.deliver_due();
        }
        panic!(
            "did not finish in {max_steps} steps ({}); a={:?} b={:?}",
            self.ctx(),
            self.a.conn.as_ref().map(|c| c.state()),
            self.b.conn.as_ref().map(|c| c.state())
        );
    }

    /// Every byte in order exactly once, records whole where the MSS allows, re-fills
    /// from the source on the original boundaries, and a clean close on both sides.
    fn check(&self) {
        let ctx = self.ctx();
        assert_eq!(
            self.b.sink.data.len(),
            self.a.src.data.len(),
            "A->B length ({ctx})"
        );
        assert!(self.b.sink.data == self.a.src.data, "A->B bytes ({ctx})");
        assert!(self.a.sink.data == self.b.src.data, "B->A bytes ({ctx})");
        for side in [&self.a, &self.b] {
            let mss = 1448u64;
            check_fills(&side.src, mss, &format!("{ctx} side_total {}", side.total));
            let n = |e: TcpEvent| side.events.iter().filter(|&&x| x == e).count();
            assert_eq!(n(TcpEvent::Connected), 1, "{ctx} {:?}", side.events);
            assert_eq!(n(TcpEvent::PeerClosed), 1, "{ctx} {:?}", side.events);
            assert_eq!(n(TcpEvent::Closed), 1, "{ctx} {:?}", side.events);
            assert_eq!(
                n(TcpEvent::Reset) + n(TcpEvent::TimedOut),
                0,
                "{ctx} {:?}",
                side.events
            );
        }
    }
}

/// Checks every `fill` of a source: first transmissions start and end on record
/// boundaries unless a record exceeds the MSS; re-fills reuse original segment starts.
fn check_fills(src: &RecordSource, mss: u64, ctx: &str) {
    let is_start = |o: u64| src.starts.binary_search(&o).is_ok() || o == src.data.len() as u64;
    let record_len = |o: u64| {
        let i = src.starts.partition_point(|&s| s <= o);
        let s = src.starts[i - 1];
        let e = src.starts.get(i).copied().unwrap_or(src.data.len() as u64);
        e - s
    };
    let mut high = 0u64;
    let mut first_starts = std::collections::BTreeSet::new();
    let (mut refills, mut refill_starts_same) = (0usize, 0usize);
    for &(off, len) in &src.fills {
        let end = off + len as u64;
        if off >= high {
            assert!(
                is_start(off) || record_len(off) > mss,
                "segment starts mid-record at {off} ({ctx})"
            );
            assert!(
                is_start(end) || record_len(end - 1) > mss,
                "segment ends mid-record at {end} ({ctx})"
            );
            first_starts.insert(off);
            high = end;
        } else {
            // Re-fills start on a record boundary (or inside a record longer than the MSS).
            assert!(
                is_start(off) || record_len(off) > mss,
                "re-fill starts mid-record at {off} ({ctx})"
            );
            refill_starts_same += usize::from(first_starts.contains(&off));
            refills += 1;
        }
    }
    // Retransmissions reuse the original segment boundaries (the MSS never changes here).
    assert_eq!(
        refill_starts_same, refills,
        "re-fills off the original starts ({ctx})"
    );
}

fn sim_cfg(congestion: Congestion) -> TcpConfig {
    TcpConfig {
        congestion,
        rto_ms_initial: 10,
        rto_ms_min: 2,
        msl_ms: 200,
        ..TcpConfig::default()
    }
}

fn lossy() -> Link {
    Link {
        loss: 200,
        dup: 50,
        delay: Duration::from_micros(20),
        jitter_ns: 30_000,
    }
}

#[test]
fn every_byte_once_in_order_and_close_in_every_order() {
    for (i, order) in [
        CloseOrder::AFirst,
        CloseOrder::BFirst,
        CloseOrder::Simultaneous,
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 1..=20u64 {
            let seed = seed * 0x9e37_79b9 + i as u64;
            let mut sim = Sim::new(
                seed,
                sim_cfg(Congestion::Cubic),
                lossy(),
                200_000,
                120_000,
                order,
            );
            sim.run(400_000);
            sim.check();
            let refills = sim.a.src.fills.len() + sim.b.src.fills.len();
            let rtx: u64 = [&sim.a, &sim.b]
                .iter()
                .map(|s| s.conn.as_ref().unwrap().counters().retransmits)
                .sum();
            assert!(rtx > 0, "loss but no retransmission ({})", sim.ctx());
            assert!(refills > 0);
        }
    }
}

#[test]
fn records_stay_whole_without_loss() {
    let link = Link {
        loss: 0,
        dup: 0,
        delay: Duration::from_micros(10),
        jitter_ns: 0,
    };
    let mut sim = Sim::new(
        7,
        sim_cfg(Congestion::Cubic),
        link,
        300_000,
        1_000,
        CloseOrder::AFirst,
    );
    sim.max_record = 1400;
    sim.run(200_000);
    sim.check();
    let a = sim.a.conn.as_ref().unwrap();
    assert_eq!(a.counters().retransmits, 0);
    // No record is larger than the MSS, so no segment may split one.
    for &(off, len) in &sim.a.src.fills {
        assert!(sim.a.src.starts.binary_search(&off).is_ok());
        let end = off + len as u64;
        assert!(sim.a.src.starts.binary_search(&end).is_ok() || end == sim.a.src.data.len() as u64);
    }
}

fn bulk(congestion: Congestion, seed: u64) -> Sim {
    let link = Link {
        loss: 100,
        dup: 0,
        delay: Duration::from_micros(50),
        jitter_ns: 0,
    };
    let mut sim = Sim::new(
        seed,
        sim_cfg(congestion),
        link,
        3_000_000,
        0,
        CloseOrder::AFirst,
    );
    sim.max_record = 1448;
    sim.run(2_000_000);
    sim.check();
    sim
}

#[test]
fn bulk_transfer_recovers_from_loss_with_cubic_and_newreno() {
    for congestion in [Congestion::Cubic, Congestion::NewReno] {
        let sim = bulk(congestion, 0xc0ffee);
        let a = sim.a.conn.as_ref().unwrap();
        let c = a.counters();
        eprintln!(
            "{congestion:?}: done at {:?}, cwnd {}, ssthresh {}, {c:?}",
            sim.now,
            a.cwnd(),
            a.ssthresh()
        );
        assert!(c.fast_retransmits > 0, "{congestion:?}: {c:?}");
        // Loss is mostly repaired by fast recovery, not timeouts.
        assert!(
            c.rto_expirations * 4 < c.fast_retransmits,
            "{congestion:?}: {c:?}"
        );
        // 3 MB at 50 µs one-way: far under a second of simulated time.
        assert!(
            sim.now < Instant::ZERO + Duration::from_secs(1),
            "{congestion:?} took {:?}",
            sim.now
        );
    }
}

#[test]
fn heavy_loss_and_reordering_still_deliver() {
    let link = Link {
        loss: 1_500,
        dup: 300,
        delay: Duration::from_micros(30),
        jitter_ns: 100_000,
    };
    for seed in 0..24u64 {
        let link = Link { ..link };
        let mut sim = Sim::new(
            0xdead_beef + seed,
            sim_cfg(Congestion::NewReno),
            link,
            60_000,
            60_000,
            CloseOrder::Simultaneous,
        );
        sim.run(1_000_000);
        sim.check();
    }
}

#[test]
fn no_sack_no_timestamps_interop() {
    let cfg = TcpConfig {
        sack: false,
        timestamps: false,
        wscale: 0,
        rcv_wnd_bytes: 65_535,
        ..sim_cfg(Congestion::NewReno)
    };
    let mut sim = Sim::new(99, cfg, lossy(), 150_000, 10_000, CloseOrder::BFirst);
    sim.run(400_000);
    // Without timestamps the MSS is 1460; check with that bound.
    let ctx = sim.ctx();
    assert!(sim.b.sink.data == sim.a.src.data, "{ctx}");
    assert!(sim.a.sink.data == sim.b.src.data, "{ctx}");
    check_fills(&sim.a.src, 1460, &ctx);
}

#[test]
fn simultaneous_close_crosses_fins_through_closing() {
    let link = Link {
        loss: 0,
        dup: 0,
        delay: Duration::from_micros(10),
        jitter_ns: 0,
    };
    let mut sim = Sim::new(
        5,
        sim_cfg(Congestion::Cubic),
        link,
        0,
        0,
        CloseOrder::Simultaneous,
    );
    sim.run(10_000);
    sim.check();
    for side in [&sim.a, &sim.b] {
        assert!(
            side.states.contains(&TcpState::Closing),
            "{:?}",
            side.states
        );
        assert!(
            side.states.contains(&TcpState::TimeWait),
            "{:?}",
            side.states
        );
    }
    // The other orders go through FIN_WAIT_2 / TIME_WAIT and CLOSE_WAIT / LAST_ACK.
    let link = Link {
        loss: 0,
        dup: 0,
        delay: Duration::from_micros(10),
        jitter_ns: 0,
    };
    let mut sim = Sim::new(
        6,
        sim_cfg(Congestion::Cubic),
        link,
        5_000,
        5_000,
        CloseOrder::BFirst,
    );
    sim.run(10_000);
    sim.check();
    assert!(
        sim.b.states.contains(&TcpState::FinWait2),
        "{:?}",
        sim.b.states
    );
    assert!(
        sim.b.states.contains(&TcpState::TimeWait),
        "{:?}",
        sim.b.states
    );
    assert!(
        sim.a.states.contains(&TcpState::CloseWait),
        "{:?}",
        sim.a.states
    );
    assert!(
        sim.a.states.contains(&TcpState::LastAck),
        "{:?}",
        sim.a.states
    );
}
