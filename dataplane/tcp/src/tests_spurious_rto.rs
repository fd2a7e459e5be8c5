//! Spurious retransmission timeouts (RFC 3522 detection by timestamps, RFC 4015
//! response): a timeout while the peer merely stalled is undone by the first ACK after
//! it, while a timeout of a segment that was really lost stays in force.

use iwarp_types::Duration;

use crate::test_harness::*;

/// An established connection with timestamps; the peer's clock is at `1_000`.
fn with_timestamps() -> H {
    established_with_timestamps(cfg())
}

/// Bytes of one record: one per segment (the timestamp option leaves 988 of the
/// peer's MSS of 1000).
const REC: u64 = 900;

/// Sends `n` full segments and returns the TSval each carried.
fn send_segments(h: &mut H, n: usize) -> Vec<u32> {
    for _ in 0..n {
        h.src.push(REC as usize);
    }
    let segs = h.outs();
    assert_eq!(segs.len(), n);
    segs.iter()
        .map(|s| s.options.timestamp.unwrap().0)
        .collect()
}

/// The peer acknowledges `ack`, echoing `tsecr`.
fn ack_echoing(h: &mut H, ack: u64, tsecr: u32) {
    h.options.timestamp = Some((1_001, tsecr));
    let a = h.seq(ack);
    h.ack(a);
}

#[test]
fn a_timeout_acknowledged_by_the_originals_is_undone() {
    let mut h = with_timestamps();
    let ts = send_segments(&mut h, 8);
    let cwnd = h.c.cwnd();
    // The peer stalls past the RTO: one segment goes again, the window collapses.
    h.advance(Duration::from_millis(1));
    h.fire();
    assert_eq!(h.c.counters().rto_expirations, 1);
    assert_eq!(h.c.cwnd(), 988);
    let re = h.outs();
    assert_eq!(re.len(), 1);
    assert_eq!(re[0].seq, h.seq(0));
    // Then the ACKs of the originals arrive, echoing their (older) timestamps.
    ack_echoing(&mut h, 2 * REC, ts[1]);
    assert_eq!(h.c.counters().spurious_rtos, 1);
    assert!(h.c.cwnd() >= cwnd, "cwnd {} restored to {cwnd}", h.c.cwnd());
    // Nothing the peer holds is sent again: the next segment is new data.
    h.src.push(REC as usize);
    let next = h.outs();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].seq, h.seq(8 * REC));
    assert_eq!(h.c.counters().retransmits, 1);
    // The rest of the originals are acknowledged as usual.
    ack_echoing(&mut h, 9 * REC, ts[7]);
    assert_eq!(h.c.acked_offset(), 9 * REC);
    assert_eq!(h.c.counters().spurious_rtos, 1);
}

#[test]
fn a_timeout_acknowledged_by_the_retransmission_stands() {
    let mut h = with_timestamps();
    send_segments(&mut h, 4);
    h.advance(Duration::from_millis(1));
    h.fire();
    let re = h.outs();
    assert_eq!(re.len(), 1);
    let re_ts = re[0].options.timestamp.unwrap().0;
    // The original was lost: the ACK echoes the retransmission.
    ack_echoing(&mut h, REC, re_ts);
    assert_eq!(h.c.counters().spurious_rtos, 0);
    // Slow start from one segment: the lost window is sent again (go-back-N).
    assert!(h.c.cwnd() <= 2 * 988, "cwnd {}", h.c.cwnd());
    let again = h.outs();
    assert!(!again.is_empty());
    assert_eq!(again[0].seq, h.seq(REC));
    assert!(h.c.counters().retransmits >= 2);
}

#[test]
fn without_timestamps_a_timeout_is_never_undone() {
    let mut h = H::established(cfg());
    for _ in 0..4 {
        h.src.push(1000);
    }
    assert_eq!(h.outs().len(), 4);
    h.fire();
    assert_eq!(h.outs().len(), 1);
    h.ack(h.seq(2000));
    assert_eq!(h.c.counters().spurious_rtos, 0);
    let again = h.outs();
    assert_eq!(again[0].seq, h.seq(2000));
}
