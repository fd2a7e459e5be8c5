//! A smaller path MTU after the handshake: segments shrink, data in flight is resent in
//! segments that fit.

use crate::config::TcpConfig;
use crate::test_harness::*;

#[test]
fn smaller_path_mss_resends_the_flight_in_segments_that_fit() {
    let mut h = H::established(cfg());
    assert_eq!(h.c.eff_mss(), 1000);
    for _ in 0..3 {
        h.src.push(1000);
    }
    assert_eq!(h.outs().len(), 3);
    let cwnd = h.c.cwnd();
    h.c.set_path_mss(h.now, 600);
    assert_eq!(h.c.eff_mss(), 600);
    let segs = h.outs();
    let cut: Vec<(u32, usize)> = segs
        .iter()
        .map(|s| (s.seq.diff(h.seq(0)) as u32, s.payload.len()))
        .collect();
    // The original boundaries (0, 1000, 2000) are kept; each 1000-byte segment is split.
    assert_eq!(
        cut,
        vec![
            (0, 600),
            (600, 400),
            (1000, 600),
            (1600, 400),
            (2000, 600),
            (2600, 400)
        ]
    );
    assert_eq!(&segs[1].payload[..], &h.src.data[600..1000]);
    assert_eq!(h.c.cwnd(), cwnd);
    assert_eq!(h.c.counters().rto_expirations, 0);
    // New data is cut to the new MSS too.
    h.src.push(1000);
    let segs = h.outs();
    assert_eq!(
        segs.iter().map(|s| s.payload.len()).collect::<Vec<_>>(),
        vec![600, 400]
    );
    h.ack(h.seq(4000));
    assert_eq!(h.c.acked_offset(), 4000);
}

#[test]
fn path_mss_only_lowers_and_has_a_floor() {
    let mut h = H::established(TcpConfig {
        timestamps: false,
        ..cfg()
    });
    h.c.set_path_mss(h.now, 1400);
    assert_eq!(h.c.eff_mss(), 1000);
    h.c.set_path_mss(h.now, 800);
    assert_eq!(h.c.eff_mss(), 800);
    h.c.set_path_mss(h.now, 1200);
    assert_eq!(h.c.eff_mss(), 800);
    h.c.set_path_mss(h.now, 1);
    assert_eq!(h.c.eff_mss(), 76);
    // Nothing in flight: nothing to resend.
    assert!(h.outs().is_empty());
}
