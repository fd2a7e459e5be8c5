//! Sending, receiving, loss recovery and the RFC 5961 / RFC 7323 checks, with scripted
//! segments.

use iwarp_types::Duration;

use crate::config::{Congestion, TcpConfig};
use crate::conn::{TcpEvent, TcpState};
use crate::segment::TcpOptions;
use crate::seq::SeqNumber;
use crate::test_harness::*;
use crate::test_util::us;

// ---- Sending ----

#[test]
fn sends_whole_records_and_releases_on_ack() {
    let mut h = H::established(cfg());
    for len in [400, 400, 300, 700, 2500] {
        h.src.push(len);
    }
    let segs = h.outs();
    let lens: Vec<usize> = segs.iter().map(|s| s.payload.len()).collect();
    // 400+400 fit in 1000, 300+700 fit, then the 2500 record is split by MSS.
    assert_eq!(lens, vec![800, 1000, 1000, 1000, 500]);
    assert_eq!(segs[0].seq, h.seq(0));
    assert_eq!(segs[1].seq, h.seq(800));
    assert_eq!(&segs[1].payload[..], &h.src.data[800..1800]);
    assert_eq!(h.c.acked_offset(), 0);
    h.ack(h.seq(1800));
    assert_eq!(h.c.acked_offset(), 1800);
    assert_eq!(h.c.counters().retransmits, 0);
}

#[test]
fn waits_for_window_room_for_a_whole_record() {
    let mut h = H::established(cfg());
    h.window = 1500;
    h.ack(h.seq(0));
    h.src.push(800);
    h.src.push(800);
    let segs = h.outs();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].payload.len(), 800);
    // 700 bytes of window left: the next 800-byte record is not split.
    assert!(h.out().is_none());
    h.ack(h.seq(800));
    let segs = h.outs();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].payload.len(), 800);
}

#[test]
fn zero_window_is_probed_without_splitting_records() {
    let mut h = H::established(cfg());
    h.window = 0;
    h.ack(h.seq(0));
    h.src.push(500);
    assert!(h.out().is_none());
    let t = h.c.poll_timeout().expect("persist timer");
    h.now = t;
    h.c.handle_timeout(t);
    let probe = h.out().unwrap();
    assert_eq!(probe.seq, h.seq(0) - 1);
    assert!(probe.payload.is_empty());
    assert_eq!(h.c.counters().window_probes, 1);
    // The window opens: the record goes out whole.
    h.window = 4000;
    h.ack(h.seq(0));
    let segs = h.outs();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].payload.len(), 500);
}

#[test]
fn rto_refills_from_source_backs_off_and_times_out() {
    let mut h = H::established(TcpConfig {
        max_retries: 2,
        ..cfg()
    });
    h.src.push(600);
    let first = h.out().unwrap();
    assert_eq!(h.src.fills, vec![(0, 600)]);
    let rto = h.c.rto();
    h.fire();
    let re = h.out().unwrap();
    assert_eq!(re.seq, first.seq);
    assert_eq!(re.payload, first.payload);
    assert_eq!(h.src.fills, vec![(0, 600), (0, 600)]);
    assert_eq!(h.c.counters().rto_expirations, 1);
    assert_eq!(h.c.counters().retransmits, 1);
    assert_eq!(h.c.rto(), Duration(rto.0 * 2));
    assert_eq!(h.c.cwnd(), 1000);
    h.fire();
    h.out().unwrap();
    h.fire();
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::TimedOut]);
}

#[test]
fn three_dup_acks_trigger_fast_retransmit_newreno() {
    let mut c = cfg();
    c.sack = false;
    c.congestion = Congestion::NewReno;
    let mut h = H::established(c);
    for _ in 0..8 {
        h.src.push(1000);
    }
    let segs = h.outs();
    assert_eq!(segs.len(), 8);
    let cwnd = h.c.cwnd();
    for _ in 0..3 {
        h.ack(h.seq(0));
    }
    assert_eq!(h.c.counters().dup_acks, 3);
    assert_eq!(h.c.counters().fast_retransmits, 1);
    let re = h.out().unwrap();
    assert_eq!(re.seq, h.seq(0));
    assert_eq!(re.payload.len(), 1000);
    assert!(h.c.cwnd() < cwnd);
    // Partial ACK: the next hole is retransmitted at once.
    h.ack(h.seq(3000));
    let re = h.out().unwrap();
    assert_eq!(re.seq, h.seq(3000));
    // Full ACK ends recovery.
    h.ack(h.seq(8000));
    assert!(!h.c.in_recovery);
    assert_eq!(h.c.cwnd(), h.c.ssthresh());
}

#[test]
fn sack_recovery_retransmits_only_holes() {
    let mut h = H::established(cfg());
    for _ in 0..10 {
        h.src.push(1000);
    }
    assert_eq!(h.outs().len(), 10);
    // Segments 1 and 4 lost; the peer SACKs the rest as they arrive.
    h.ack(h.seq(1000));
    let s = h.pseq;
    h.recv_opts(flags("A"), s, h.seq(1000), &[], h.sack(&[(2000, 4000)]));
    assert!(h.out().is_none() || !h.c.in_recovery);
    h.recv_opts(
        flags("A"),
        s,
        h.seq(1000),
        &[],
        h.sack(&[(5000, 8000), (2000, 4000)]),
    );
    assert!(h.c.in_recovery);
    let re = h.outs();
    let seqs: Vec<SeqNumber> = re.iter().map(|s| s.seq).collect();
    assert!(seqs.contains(&h.seq(1000)), "{seqs:?}");
    assert!(seqs.contains(&h.seq(4000)), "{seqs:?}");
    assert!(!seqs.contains(&h.seq(2000)));
    assert_eq!(h.c.counters().fast_retransmits, 1);
    h.ack(h.seq(10_000));
    assert!(!h.c.in_recovery);
}

/// RFC 6675 counts an ACK with new SACK blocks as a duplicate even when it carries data:
/// with data flowing both ways the peer's SACKs ride on its own segments, none of them a
/// duplicate ACK in RFC 5681's sense, and recovery still starts once enough is SACKed
/// (not at the retransmission timeout).
#[test]
fn sacks_riding_on_the_peers_data_start_recovery() {
    let mut h = H::established(cfg());
    for _ in 0..10 {
        h.src.push(1000);
    }
    assert_eq!(h.outs().len(), 10);
    // Segment 1 lost; the peer's data segments (a new window each) SACK the rest.
    h.ack(h.seq(1000));
    let data = [7u8; 500];
    let mut s = h.pseq;
    for (k, end) in [3000u64, 5000, 8000].into_iter().enumerate() {
        h.window = 60_000 - 1000 * k as u16;
        h.recv_opts(flags("AP"), s, h.seq(1000), &data, h.sack(&[(2000, end)]));
        s = s + data.len() as u32;
    }
    assert!(h.c.in_recovery);
    assert_eq!(h.c.counters().dup_acks, 0, "no pure duplicate ACK came");
    assert_eq!(h.c.counters().fast_retransmits, 1);
    let re = h.outs();
    assert!(re
        .iter()
        .any(|r| r.seq == h.seq(1000) && r.payload.len() == 1000));
    assert_eq!(h.c.counters().rto_expirations, 0);
}

// ---- Receiving ----

#[test]
fn delayed_ack_every_second_segment_or_timer() {
    let mut h = H::established(TcpConfig {
        delayed_ack_us: 200,
        ..cfg()
    });
    h.data(b"hello");
    assert_eq!(h.sink.data, b"hello");
    assert!(h.out().is_none());
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_micros(200)));
    h.data(b" world");
    let a = h.out().unwrap();
    assert_eq!(a.ack, PEER_ISS + 12);
    assert!(h.out().is_none());
    h.data(b"!");
    assert!(h.out().is_none());
    h.advance(Duration::from_micros(200));
    assert_eq!(h.out().unwrap().ack, PEER_ISS + 13);
    assert_eq!(h.c.received_offset(), 12);
}

#[test]
fn out_of_order_is_buffered_sacked_and_replayed() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    h.recv("A", base + 5, h.seq(0), b"fghij");
    let a = h.out().unwrap();
    assert_eq!(a.ack, base);
    assert_eq!(a.options.sack_blocks[0], Some((base + 5, base + 10)));
    h.recv("A", base + 15, h.seq(0), b"pq");
    let a = h.out().unwrap();
    assert_eq!(a.options.sack_blocks[0], Some((base + 15, base + 17)));
    assert_eq!(a.options.sack_blocks[1], Some((base + 5, base + 10)));
    assert!(h.sink.data.is_empty());
    h.recv("A", base, h.seq(0), b"abcde");
    assert_eq!(h.sink.data, b"abcdefghij");
    let a = h.out().unwrap();
    assert_eq!(a.ack, base + 10);
    assert_eq!(a.options.sack_blocks[0], Some((base + 15, base + 17)));
    h.recv("A", base + 10, h.seq(0), b"klmno");
    assert_eq!(h.sink.data, b"abcdefghijklmnopq");
    assert_eq!(h.c.counters().ooo_segments, 2);
}

#[test]
fn ooo_beyond_bounds_is_dropped_and_not_sacked() {
    let mut h = H::established(TcpConfig {
        ooo_max_ranges: 1,
        ooo_max_bytes: 100,
        ..cfg()
    });
    let base = h.pseq;
    h.recv("A", base + 10, h.seq(0), b"xx");
    h.recv("A", base + 20, h.seq(0), b"yy");
    h.recv("A", base + 200, h.seq(0), b"zz");
    assert_eq!(h.c.counters().ooo_drops, 2);
    let a = h.outs().pop().unwrap();
    assert_eq!(
        a.options.sack_blocks,
        [Some((base + 10, base + 12)), None, None]
    );
}

#[test]
fn sink_refusal_acknowledges_only_consumed_bytes() {
    let mut h = H::established(cfg());
    h.sink.limit = Some(3);
    h.data(b"abcdef");
    assert_eq!(h.sink.data, b"abc");
    assert_eq!(h.c.received_offset(), 3);
    assert_eq!(h.c.counters().rx_refused_bytes, 3);
}

#[test]
fn duplicate_and_out_of_window_data_is_acked_not_delivered() {
    let mut h = H::established(cfg());
    h.data(b"abc");
    h.outs();
    h.recv("A", PEER_ISS + 1, h.seq(0), b"abc");
    assert_eq!(h.sink.data, b"abc");
    assert!(h.out().is_some());
    h.recv("A", PEER_ISS + 4 + (1 << 21), h.seq(0), b"zz");
    // Both the full duplicate and the far-away segment are unacceptable.
    assert_eq!(h.c.counters().out_of_window, 2);
    assert_eq!(h.out().unwrap().ack, PEER_ISS + 4);
    // Partially duplicate: the new tail is delivered.
    h.recv("A", PEER_ISS + 2, h.seq(0), b"bcdef");
    assert_eq!(h.sink.data, b"abcdef");
}

// ---- RFC 5961 ----

#[test]
fn rst_exact_resets_in_window_challenges_outside_ignored() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    h.recv("R", base + 100, SeqNumber(0), &[]);
    let ch = h.out().unwrap();
    assert!(ch.flags.ack && !ch.flags.rst);
    assert_eq!(ch.ack, base);
    assert_eq!(h.c.counters().challenge_acks, 1);
    h.recv("R", base - 10, SeqNumber(0), &[]);
    assert!(h.out().is_none());
    assert_eq!(h.c.state(), TcpState::Established);
    h.recv("R", base, SeqNumber(0), &[]);
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::Reset]);
    assert!(h.out().is_none());
}

#[test]
fn syn_on_established_gets_rate_limited_challenge_ack() {
    // The per-second budget alone (no per-interval limit).
    let mut h = H::established(TcpConfig {
        challenge_acks_per_s: 2,
        invalid_ack_interval_ms: 0,
        ..cfg()
    });
    for _ in 0..5 {
        h.recv("S", SeqNumber(1), SeqNumber(0), &[]);
    }
    assert_eq!(h.outs().len(), 1);
    assert_eq!(h.c.counters().challenge_acks, 2);
    assert_eq!(h.c.state(), TcpState::Established);
    h.advance(Duration::from_secs(1));
    let s = h.pseq;
    h.recv("S", s, SeqNumber(0), &[]);
    assert_eq!(h.c.counters().challenge_acks, 3);

    // With the default interval, one challenge ACK per 500 ms whatever the budget.
    let mut h = H::established(cfg());
    for _ in 0..5 {
        h.recv("S", SeqNumber(1), SeqNumber(0), &[]);
    }
    assert_eq!(h.outs().len(), 1);
    assert_eq!(h.c.counters().challenge_acks, 1);
    assert_eq!(h.c.counters().invalid_acks_suppressed, 4);
    h.advance(Duration::from_millis(499));
    h.recv("S", SeqNumber(1), SeqNumber(0), &[]);
    assert!(h.outs().is_empty());
    h.advance(Duration::from_millis(1));
    h.recv("S", SeqNumber(1), SeqNumber(0), &[]);
    assert_eq!(h.outs().len(), 1);
    assert_eq!(h.c.counters().challenge_acks, 2);
}

#[test]
fn out_of_window_data_is_answered_within_the_budget_of_each_second() {
    let mut h = H::established(TcpConfig {
        challenge_acks_per_s: 3,
        ..cfg()
    });
    let far = h.pseq + 50_000_000;
    let mut answers = 0;
    for i in 0..10u32 {
        h.recv("A", far + i * 100, h.seq(0), b"forged");
        answers += h.outs().len();
    }
    assert_eq!(
        answers, 3,
        "a flood of forged data draws 3 ACKs in the second"
    );
    assert_eq!(h.c.counters().invalid_acks_suppressed, 7);
    assert!(h.sink.data.is_empty());
    h.advance(Duration::from_secs(1));
    h.recv("A", far, h.seq(0), b"forged");
    assert_eq!(h.outs().len(), 1, "a new second, a new budget");
    // The peer's own data, in window, is taken as ever.
    let s = h.pseq;
    h.recv("A", s, h.seq(0), b"real");
    assert_eq!(h.sink.data, b"real");
}

#[test]
fn ack_checks_future_and_too_old() {
    let mut h = H::established(cfg());
    h.src.push(100);
    h.outs();
    // Acknowledges data never sent: ACK back, not taken.
    h.ack(h.seq(5000));
    assert_eq!(h.c.acked_offset(), 0);
    assert_eq!(h.out().unwrap().seq, h.seq(100));
    // Far below snd.una - max.snd.wnd: challenge ACK (once the interval since the last
    // answer to an unacceptable segment passed).
    h.advance(Duration::from_millis(500));
    h.ack(h.seq(0) - 200_000);
    assert_eq!(h.c.counters().challenge_acks, 1);
    // Data riding an unacceptable ACK is not delivered.
    let s = h.pseq;
    h.recv("A", s, h.seq(9000), b"zz");
    assert!(h.sink.data.is_empty());
}

#[test]
fn paws_drops_old_timestamps() {
    let mut h = H::connect(TcpConfig {
        timestamps: true,
        ..cfg()
    });
    let syn = h.out().unwrap();
    let opts = TcpOptions {
        mss: Some(1000),
        timestamp: Some((1000, syn.options.timestamp.unwrap().0)),
        ..Default::default()
    };
    h.recv_opts(flags("SA"), PEER_ISS, OUR_ISS + 1, &[], opts);
    h.outs();
    h.options.timestamp = Some((1010, 0));
    h.data(b"ok");
    assert_eq!(h.sink.data, b"ok");
    h.options.timestamp = Some((900, 0));
    let s = h.pseq;
    h.recv("A", s, h.seq(0), b"old");
    assert_eq!(h.c.counters().paws_drops, 1);
    assert_eq!(h.sink.data, b"ok");
    let a = h.outs().pop().unwrap();
    assert_eq!(a.options.timestamp.map(|t| t.1), Some(1010));
}

#[test]
fn window_smaller_than_a_record_splits_instead_of_deadlocking() {
    let mut h = H::established(cfg());
    h.window = 500;
    h.ack(h.seq(0));
    h.src.push(800);
    // The window shrank below the record: wait (sender SWS avoidance) ...
    assert!(h.out().is_none());
    // ... until the persist timer: then probe and split the record (no deadlock).
    h.fire();
    let segs = h.outs();
    assert_eq!(segs.len(), 2);
    assert!(segs[0].payload.is_empty() && segs[0].seq == h.seq(0) - 1);
    assert_eq!(segs[1].payload.len(), 500);
    assert!(h.out().is_none());
    h.ack(h.seq(500));
    let b = h.out().unwrap();
    assert_eq!(b.seq, h.seq(500));
    assert_eq!(b.payload.len(), 300);
}

/// Our timestamp clock runs in ticks of `ts_tick_us` (the default, 1 us, without the
/// division), from the ISS, wrapping.
#[test]
fn timestamp_clock_counts_ticks_of_the_configured_length() {
    for (tick, want) in [(1, 5_000), (1_000, 5), (7, 714)] {
        let h = H::connect(TcpConfig {
            timestamps: true,
            ts_tick_us: tick,
            ..cfg()
        });
        let start = h.c.ts_now(us(0));
        assert_eq!(start, OUR_ISS.0, "tick {tick}");
        assert_eq!(
            h.c.ts_now(us(5_000)).wrapping_sub(start),
            want,
            "tick {tick}"
        );
        let far = us(u64::from(u32::MAX) * tick + 3 * tick);
        assert_eq!(h.c.ts_now(far).wrapping_sub(start), 2, "tick {tick}: wraps");
    }
}
