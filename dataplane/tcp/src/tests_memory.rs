//! Memory per connection: loss-recovery storage is allocated only when used, bounded by
//! the window, and released when idle.

use iwarp_types::Duration;

use crate::config::TcpConfig;
use crate::conn::{TcpConn, TcpState};
use crate::test_harness::*;

/// What the connection held at set-up before storage became lazy (default config):
/// 256 KiB out-of-order ring, 16 + 32 ranges of 16 bytes, 4096 segment starts of 8 bytes.
const EAGER_BYTES: usize = 256 * 1024 + 16 * 16 + 32 * 16 + 4096 * 8;

#[test]
fn an_idle_established_connection_holds_no_heap() {
    let mut h = H::established(TcpConfig::default());
    assert_eq!(h.c.heap_bytes(), 0, "was {EAGER_BYTES} bytes before");
    // Traffic without loss: only the in-flight segment map, sized by the flight.
    for _ in 0..6 {
        h.src.push(900);
    }
    assert_eq!(h.outs().len(), 6);
    let flying = h.c.heap_bytes();
    assert!(flying > 0 && flying <= 8 * 8, "{flying}");
    h.ack(h.seq(5_400));
    h.data(b"hello");
    // Idle for the release time: everything is given back and no timer stays armed.
    h.advance(Duration::from_millis(1_000));
    h.outs();
    assert_eq!(h.c.heap_bytes(), 0);
    assert_eq!(h.c.poll_timeout(), None);
    eprintln!(
        "TcpConn: {} bytes inline, heap {} bytes idle (was {EAGER_BYTES})",
        core::mem::size_of::<TcpConn>(),
        h.c.heap_bytes()
    );
}

#[test]
fn out_of_order_storage_comes_with_loss_bounded_by_the_window_and_goes_after() {
    // No window scaling in the harness: the receive window is 65 535 bytes, so the
    // out-of-order ring is no larger, whatever `ooo_max_bytes` says.
    let mut h = H::established(TcpConfig {
        ooo_max_bytes: 256 * 1024,
        ..cfg()
    });
    let base = h.pseq;
    h.recv("A", base + 100, h.seq(0), &[7; 100]);
    let held = h.c.heap_bytes();
    assert_eq!(held, 65_535 + 16 * 16);
    // Still holding data: the release timer keeps it.
    h.advance(Duration::from_millis(1_000));
    assert_eq!(h.c.heap_bytes(), held);
    h.recv("A", base, h.seq(0), &[1; 100]);
    assert_eq!(h.sink.data.len(), 200);
    h.outs();
    // Drained; released once the timer runs.
    assert_eq!(h.c.heap_bytes(), held);
    h.fire();
    assert_eq!(h.c.heap_bytes(), 0);
    // Loss again: allocated again, same bound.
    h.recv("A", base + 300, h.seq(0), &[9; 10]);
    assert_eq!(h.c.heap_bytes(), held);
}

#[test]
fn sack_scoreboard_and_segment_map_are_released_after_recovery() {
    let mut h = H::established(cfg());
    for _ in 0..8 {
        h.src.push(1_000);
    }
    assert_eq!(h.outs().len(), 8);
    // The peer lost the first segment and SACKs the rest.
    let mut o = crate::segment::TcpOptions::default();
    o.sack_blocks[0] = Some((h.seq(1_000), h.seq(4_000)));
    let s = h.pseq;
    h.recv_opts(flags("A"), s, h.seq(0), &[], o);
    assert!(h.c.heap_bytes() > 8 * 8);
    h.outs();
    h.ack(h.seq(8_000));
    h.advance(Duration::from_millis(1_000));
    assert_eq!(h.c.heap_bytes(), 0);
}

#[test]
fn closed_and_time_wait_connections_hold_no_heap() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    h.recv("A", base + 10, h.seq(0), b"later");
    h.src.push(500);
    h.outs();
    assert!(h.c.heap_bytes() > 0);
    h.c.abort(h.now);
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.c.heap_bytes(), 0);

    let mut h = H::established(cfg());
    h.src.push(500);
    h.outs();
    h.c.close(h.now);
    h.outs();
    let s = h.pseq;
    h.recv("AF", s, h.seq(501), &[]);
    assert_eq!(h.c.state(), TcpState::TimeWait);
    assert_eq!(h.c.heap_bytes(), 0);
}
