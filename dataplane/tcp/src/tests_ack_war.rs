//! No ACK war: forged timestamps do not lock PAWS, answers to unacceptable segments are
//! rate-limited, and two of our stacks cannot answer each other's ACKs forever. Scripted
//! segments for each rule, then a back-to-back pair for the whole exchange.

use iwarp_types::{Duration, Instant};

use crate::config::TcpConfig;
use crate::conn::{TcpConn, TcpState};
use crate::segment::{TcpHeader, TcpOptions, TcpSegment};
use crate::seq::SeqNumber;
use crate::test_harness::*;
use crate::test_util::*;

/// An established connection with timestamps whose segments carry the peer's clock
/// (`1_000`) from now on.
fn with_timestamps(cfg: TcpConfig) -> H {
    let mut h = established_with_timestamps(cfg);
    h.options.timestamp = Some((1_000, 0));
    h
}

#[test]
fn a_duplicate_ack_does_not_move_ts_recent() {
    let mut h = with_timestamps(cfg());
    assert_eq!(h.c.ts_recent, 1_000);
    // Forged: in window, acknowledges nothing new, carries nothing, TSval far ahead.
    h.options.timestamp = Some((1_000 + (1 << 30), 0));
    h.ack(h.seq(0));
    assert_eq!(h.c.ts_recent, 1_000);
    // A window update alone is a duplicate ACK too.
    h.window = 30_000;
    h.ack(h.seq(0));
    assert_eq!(h.c.ts_recent, 1_000);
    // The real peer's next segment is not dropped by PAWS.
    h.options.timestamp = Some((1_010, 0));
    h.data(b"real");
    assert_eq!(h.sink.data, b"real");
    assert_eq!(h.c.counters().paws_drops, 0);
    assert_eq!(h.c.ts_recent, 1_010);
}

#[test]
fn new_data_fin_or_a_new_ack_move_ts_recent() {
    let mut h = with_timestamps(cfg());
    h.src.push(500);
    assert_eq!(h.outs().len(), 1);
    // A pure ACK that acknowledges new data.
    h.options.timestamp = Some((1_020, 0));
    h.ack(h.seq(500));
    assert_eq!(h.c.acked_offset(), 500);
    assert_eq!(h.c.ts_recent, 1_020);
    // Data.
    h.options.timestamp = Some((1_030, 0));
    h.data(b"x");
    assert_eq!(h.c.ts_recent, 1_030);
    // (RFC 7323: only a segment at or below the last ACK sent counts; send it.)
    h.advance(Duration::from_millis(1));
    assert_eq!(h.outs().len(), 1);
    // A FIN alone.
    h.options.timestamp = Some((1_040, 0));
    let s = h.pseq;
    h.recv("AF", s, h.seq(500), &[]);
    assert_eq!(h.c.state(), TcpState::CloseWait);
    assert_eq!(h.c.ts_recent, 1_040);
}

#[test]
fn answers_to_unacceptable_acks_share_one_rate_limit() {
    let mut h = with_timestamps(cfg());
    h.src.push(100);
    h.outs();
    // PAWS-failed pure ACK: answered once.
    h.options.timestamp = Some((900, 0));
    h.ack(h.seq(0));
    assert_eq!(h.c.counters().paws_drops, 1);
    assert_eq!(h.outs().len(), 1);
    // More of them, an out-of-window ACK, an ACK of unsent data: all within 500 ms of
    // the first answer, none answered.
    h.ack(h.seq(0));
    h.options.timestamp = Some((1_000, 0));
    h.recv("A", h.pseq + 200_000, h.seq(0), &[]);
    h.ack(h.seq(50_000));
    assert_eq!(h.c.counters().out_of_window, 1);
    assert_eq!(h.c.counters().paws_drops, 2);
    assert!(h.outs().is_empty());
    assert_eq!(h.c.counters().invalid_acks_suppressed, 3);
    // 500 ms later, one more answer.
    h.advance(Duration::from_millis(500));
    h.outs();
    h.recv("A", h.pseq + 200_000, h.seq(0), &[]);
    h.recv("A", h.pseq + 200_000, h.seq(0), &[]);
    let out = h.outs();
    assert_eq!(out.len(), 1);
    assert!(out[0].payload.is_empty() && out[0].ack == h.pseq);
}

#[test]
fn unacceptable_segments_with_data_or_fin_are_always_answered() {
    let mut h = with_timestamps(cfg());
    h.data(b"abc");
    h.outs();
    // Old data (our ACK was lost): answered each time, so the peer recovers.
    for _ in 0..3 {
        h.recv("A", PEER_ISS + 1, h.seq(0), b"abc");
        let a = h.outs();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].ack, PEER_ISS + 4);
    }
    // PAWS-failed data: answered each time.
    h.options.timestamp = Some((10, 0));
    for _ in 0..3 {
        let s = h.pseq;
        h.recv("A", s, h.seq(0), b"old");
        assert_eq!(h.outs().len(), 1);
    }
    assert_eq!(h.c.counters().invalid_acks_suppressed, 0);
    assert_eq!(h.sink.data, b"abc");
}

#[test]
fn pure_ack_after_a_timeout_carries_the_highest_sequence_sent() {
    let mut h = H::established(cfg());
    for _ in 0..4 {
        h.src.push(1000);
    }
    assert_eq!(h.outs().len(), 4);
    // RTO: go back to snd.una, one segment (cwnd 1 MSS).
    h.fire();
    let rxt = h.outs();
    assert_eq!(rxt.len(), 1);
    assert_eq!(rxt[0].seq, h.seq(0));
    // The peer had all 4000 bytes and now sends data: our ACK must not sit at the resend
    // point (below the peer's RCV.NXT, where it would be unacceptable).
    h.options = TcpOptions::default();
    let s = h.pseq;
    h.recv("AP", s, h.seq(0), b"ab");
    h.fire();
    let out = h.outs();
    assert_eq!(out.len(), 1);
    let ack = &out[0];
    assert!(ack.payload.is_empty());
    assert_eq!(ack.ack, s + 2);
    assert_eq!(ack.seq, h.seq(4000));
}

/// Two connections joined by a wire (10 µs per hop), for exchanges between two of our
/// stacks.
struct Pair {
    a: TcpConn,
    b: TcpConn,
    a_src: RecordSource,
    b_src: RecordSource,
    a_sink: Collect,
    b_sink: Collect,
    now: Instant,
    /// Segments sent by both sides.
    segs: u64,
}

impl Pair {
    fn new(cfg: TcpConfig) -> Pair {
        let now = Instant(1_000_000_000);
        let mut a = TcpConn::connect(cfg, LOCAL, SeqNumber(7), now);
        let mut a_src = RecordSource::default();
        let mut buf = [0u8; 2048];
        let n = a.poll_transmit(now, &mut a_src, &mut buf).unwrap();
        let syn = TcpSegment::parse(LOCAL.local_ip, LOCAL.remote_ip, &buf[..n], true).unwrap();
        let b = TcpConn::accept(cfg, flip(LOCAL), &syn, SeqNumber(900_000), now).unwrap();
        let mut p = Pair {
            a,
            b,
            a_src,
            b_src: RecordSource::default(),
            a_sink: Collect::default(),
            b_sink: Collect::default(),
            now,
            segs: 1,
        };
        assert!(p.run(Duration::from_millis(1), 1_000));
        assert_eq!(p.a.state(), TcpState::Established);
        assert_eq!(p.b.state(), TcpState::Established);
        p
    }

    /// Moves segments (and, when the wire is quiet, time to the next timer within
    /// `horizon`). Returns true if the exchange went quiet, false if it still ran after
    /// `max_hops` hops.
    fn run(&mut self, horizon: Duration, max_hops: usize) -> bool {
        let end = self.now + horizon;
        let mut buf = [0u8; 2048];
        for _ in 0..max_hops {
            let mut to_b = Vec::new();
            while let Some(n) = self.a.poll_transmit(self.now, &mut self.a_src, &mut buf) {
                to_b.push(buf[..n].to_vec());
            }
            let mut to_a = Vec::new();
            while let Some(n) = self.b.poll_transmit(self.now, &mut self.b_src, &mut buf) {
                to_a.push(buf[..n].to_vec());
            }
            while self.a.poll_event().is_some() || self.b.poll_event().is_some() {}
            if to_a.is_empty() && to_b.is_empty() {
                let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) if t <= end => {
                        self.now = self.now.max(t);
                        self.a.handle_timeout(self.now);
                        self.b.handle_timeout(self.now);
                        continue;
                    }
                    _ => return true,
                }
            }
            self.segs += (to_a.len() + to_b.len()) as u64;
            self.now += Duration::from_micros(10);
            for f in to_b {
                let seg = TcpSegment::parse(LOCAL.local_ip, LOCAL.remote_ip, &f, true).unwrap();
                self.b.handle_segment(self.now, &seg, &mut self.b_sink);
            }
            for f in to_a {
                let seg = TcpSegment::parse(LOCAL.remote_ip, LOCAL.local_ip, &f, true).unwrap();
                self.a.handle_segment(self.now, &seg, &mut self.a_sink);
            }
        }
        false
    }

    /// A segment that claims to come from B, delivered to A.
    fn forge_to_a(&mut self, seq: SeqNumber, ack: SeqNumber, tsval: u32) {
        let hdr = TcpHeader {
            seq,
            ack,
            flags: flags("A"),
            window: 8192,
            options: TcpOptions {
                timestamp: Some((tsval, 0)),
                ..Default::default()
            },
        };
        let bytes = peer_bytes(&LOCAL, &hdr, &[]);
        let seg = TcpSegment::parse(LOCAL.remote_ip, LOCAL.local_ip, &bytes, true).unwrap();
        self.a.handle_segment(self.now, &seg, &mut self.a_sink);
    }
}

fn pair_cfg() -> TcpConfig {
    TcpConfig {
        timestamps: true,
        rto_ms_initial: 100,
        rto_ms_min: 5,
        max_retries: 6,
        ..TcpConfig::default()
    }
}

/// The fuzzer's finding, replayed between two connections: a forged in-window duplicate
/// ACK with a TSval far ahead, in the middle of a transfer.
#[test]
fn forged_duplicate_ack_mid_transfer_neither_locks_paws_nor_loops() {
    let mut p = Pair::new(pair_cfg());
    for _ in 0..20 {
        p.a_src.push(1_000);
    }
    // Part of the transfer is in flight when the forgery lands.
    let mut buf = [0u8; 2048];
    let mut in_flight = Vec::new();
    for _ in 0..3 {
        let n = p.a.poll_transmit(p.now, &mut p.a_src, &mut buf).unwrap();
        in_flight.push(buf[..n].to_vec());
    }
    let seq = p.a.rcv_nxt_seq();
    let ack = p.a.snd_una_seq();
    let tsval = p.b.ts_now(p.now).wrapping_add(1 << 30);
    p.forge_to_a(seq, ack, tsval);
    for f in in_flight {
        let seg = TcpSegment::parse(LOCAL.local_ip, LOCAL.remote_ip, &f, true).unwrap();
        p.b.handle_segment(p.now, &seg, &mut p.b_sink);
    }
    assert!(
        p.run(Duration::from_secs(30), 100_000),
        "the exchange never ends"
    );
    assert_eq!(
        p.a.counters().paws_drops,
        0,
        "A's TS.Recent was moved by the forgery"
    );
    assert_eq!(p.b_sink.data.len(), 20_000);
    assert!(p.b_sink.data == p.a_src.data);
    assert_eq!(p.a.acked_offset(), 20_000);
    assert_eq!(p.a.counters().paws_drops, 0);
    assert!(p.segs < 100, "{} segments for 20 kB", p.segs);
}

/// Two stacks whose states disagree (A's TS.Recent ahead of B's clock, B's RCV.NXT ahead
/// of A's SND.NXT): each finds the other's ACKs unacceptable. Without the limit they answer
/// each other forever; with it, the exchange dies out at once.
#[test]
fn two_stacks_that_disagree_cannot_ping_pong_acks() {
    let setup = |cfg: TcpConfig| {
        let mut p = Pair::new(cfg);
        p.a.ts_recent = p.b.ts_now(p.now).wrapping_add(1 << 30);
        p.b.rcv_nxt += 5_000;
        p.b.ack_pending = true;
        p
    };
    let mut p = setup(TcpConfig {
        invalid_ack_interval_ms: 0,
        ..pair_cfg()
    });
    assert!(
        !p.run(Duration::from_secs(10), 10_000),
        "no loop to prevent"
    );

    let mut p = setup(pair_cfg());
    let before = p.segs;
    assert!(p.run(Duration::from_secs(10), 10_000));
    assert!(p.segs - before <= 3, "{} segments", p.segs - before);
    let suppressed =
        p.a.counters().invalid_acks_suppressed + p.b.counters().invalid_acks_suppressed;
    assert!(suppressed >= 1);
}

/// Challenge ACKs and answers to unacceptable ACKs count against the same interval, so
/// a RST/challenge exchange cannot loop either.
#[test]
fn challenge_acks_and_invalid_acks_share_the_interval() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    // In-window RST, not exact: challenge ACK.
    h.recv("R", base + 100, SeqNumber(0), &[]);
    assert_eq!(h.outs().len(), 1);
    // Out-of-window ACK right after: not answered.
    h.recv("A", base + 300_000, h.seq(0), &[]);
    assert!(h.outs().is_empty());
    h.advance(Duration::from_millis(500));
    h.recv("R", base + 100, SeqNumber(0), &[]);
    assert_eq!(h.outs().len(), 1);
    assert_eq!(h.c.counters().challenge_acks, 2);
    assert_eq!(h.c.state(), TcpState::Established);
}
