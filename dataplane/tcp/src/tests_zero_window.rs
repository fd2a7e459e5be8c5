//! A retransmission timeout while the peer's window is zero: the first unacknowledged
//! segment still goes (RFC 9293 3.8.6.1, Linux), so a lost window update or a forged
//! zero window cannot stall a connection with data in flight.

use crate::test_harness::*;

#[test]
fn a_timeout_sends_the_head_into_a_zero_window() {
    // Issue 17 (fuzz engine_rx, regress-stuck-send-queue): a forged ACK closed the
    // window while two segments were lost; every timeout after it sent nothing and the
    // persist timer never ran (data in flight), so the connection stood still until it
    // timed out, its send queue full.
    let mut h = H::established(cfg());
    h.src.push(1000);
    h.src.push(1000);
    assert_eq!(h.outs().len(), 2, "both segments leave, and are lost");
    // The peer's window goes to zero, nothing acknowledged.
    h.window = 0;
    h.ack(h.seq(0));
    assert!(h.outs().is_empty(), "nothing new into a zero window");
    h.fire();
    assert_eq!(h.c.counters().rto_expirations, 1);
    let re = h.outs();
    assert_eq!(re.len(), 1, "the head segment goes: {re:?}");
    assert_eq!((re[0].seq, re[0].payload.len()), (h.seq(0), 1000));
    // The peer had room after all: its ACK reopens the window and the rest follows.
    h.window = 65_535;
    h.ack(h.seq(1000));
    let rest = h.outs();
    assert_eq!(rest.first().map(|s| s.seq), Some(h.seq(1000)), "{rest:?}");
    h.ack(h.seq(2000));
    assert_eq!(h.c.acked_offset(), 2000);
}

#[test]
fn a_zero_window_with_nothing_lost_is_probed_not_overrun() {
    // With nothing outstanding the persist timer probes as before: no data beyond the
    // window.
    let mut h = H::established(cfg());
    h.window = 0;
    h.ack(h.seq(0));
    h.src.push(1000);
    assert!(h.outs().is_empty(), "nothing into a zero window");
    h.fire();
    let probe = h.outs();
    assert_eq!(probe.len(), 1, "{probe:?}");
    assert_eq!(h.c.counters().rto_expirations, 0);
}

#[test]
fn a_forged_future_segment_cannot_freeze_the_window() {
    // Issue 17 (fuzz engine_rx, regress-forged-fpdu-length-*): a forged copy of a peer
    // segment, in the window but ahead of RCV.NXT, carried window 0. Taken as a window
    // update it set SND.WL1 ahead of every sequence number the peer really used, so no
    // later segment of the peer passed the WL1/WL2 rule: the window stayed zero, the
    // persist timer probed it forever, and the data queued never left.
    let mut h = H::established(cfg());
    let ahead = h.pseq + 5_000;
    h.window = 0;
    let una = h.seq(0);
    h.recv("A", ahead, una, &[0u8; 100]);
    let _ = h.outs();
    // The peer's real segments (in order, window open) reopen it.
    h.window = 65_535;
    h.ack(una);
    h.src.push(1000);
    let out = h.outs();
    assert_eq!(
        out.first().map(|s| (s.seq, s.payload.len())),
        Some((una, 1000)),
        "the window follows the in-order segments: {out:?}"
    );
}
