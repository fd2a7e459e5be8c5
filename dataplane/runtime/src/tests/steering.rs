//! Two cores per side: connections spread by the symmetric hash, frames handled by their
//! owner only, misdirected frames forwarded, a full forward ring drops and counts.

use iwarp_types::{SendOp, WcStatus};

use super::frames::tcp_frame;
use super::helpers::*;
use crate::memlink::MemLinkConfig;
use crate::steer::{Steering, SYMMETRIC_RSS_KEY};
use crate::testutil::{Testbed, TestbedConfig, Which, ARENA, IP_A, IP_B};

const ARENA_LEN: usize = 256 * 1024;
const CONNS_PER_CORE: usize = 3;

fn testbed(rss: bool, forward_frames: usize) -> Testbed {
    let cfg = TestbedConfig {
        cores_per_side: 2,
        arena_bytes: ARENA_LEN,
        forward_frames,
        link: MemLinkConfig {
            rss,
            ..MemLinkConfig::default()
        },
        ..TestbedConfig::default()
    };
    Testbed::new(&cfg).unwrap()
}

/// Opens `CONNS_PER_CORE` connections from each A core, writes 4 KiB on each and checks
/// the bytes; returns the connections.
fn connect_and_write(tb: &mut Testbed) -> Vec<Connected> {
    listen_all(tb, Which::B);
    for c in 0..2 {
        let p = pattern(ARENA_LEN, c as u8 + 1);
        tb.a.cores[c].mem_mut().arena_mut(ARENA).copy_from_slice(&p);
    }
    let mut conns = Vec::new();
    for i in 0..CONNS_PER_CORE * 2 {
        let a_core = i % 2;
        let a = verbs(tb, Which::A, a_core, ARENA_LEN as u64);
        conns.push(connect(tb, a_core, a, ARENA_LEN as u64));
    }
    for (i, c) in conns.iter().enumerate() {
        let off = (i * 4096) as u64;
        let w = wr(
            i as u64,
            SendOp::Write {
                remote_to: off,
                rkey: c.b.mr,
            },
            off,
            4096,
            c.a.mr,
        );
        post_send(tb, Which::A, c.a_core, c.a.qp, w).unwrap();
        let cqe = wait_cqe(tb, Which::A, c.a_core, c.a.cq);
        assert_eq!((cqe.wr_id, cqe.status), (i as u64, WcStatus::Success));
        let src = &tb.a.cores[c.a_core].mem().arena(ARENA)[off as usize..off as usize + 4096];
        let dst = &tb.b.cores[c.b_core].mem().arena(ARENA)[off as usize..off as usize + 4096];
        assert_eq!(src, dst, "connection {i}");
    }
    conns
}

#[test]
fn connections_spread_and_each_is_handled_by_its_owner_only() {
    let mut tb = testbed(true, 64);
    let conns = connect_and_write(&mut tb);
    let steer = Steering::new(&SYMMETRIC_RSS_KEY, 128, vec![0, 1]).unwrap();
    for c in &conns {
        // The active side chose a local port that steers back to itself; the passive
        // side's owner of the same tuple is the same queue index.
        let owner_a = steer.owner(IP_A.octets(), IP_B.octets(), c.local_port, PORT);
        let owner_b = steer.owner(IP_B.octets(), IP_A.octets(), PORT, c.local_port);
        assert_eq!(owner_a, c.a_core);
        assert_eq!(owner_b, c.b_core);
    }
    let on_b1 = conns.iter().filter(|c| c.b_core == 1).count();
    assert_eq!(on_b1, CONNS_PER_CORE, "spread over both cores");
    let now = tb.clock.now();
    for side in [Which::A, Which::B] {
        for core in 0..2 {
            let s = tb.side(side).cores[core].final_snapshot(now);
            let t = s.total();
            // RSS put every TCP frame on its owner's queue: nothing forwarded, nothing
            // reached an engine without a connection.
            assert_eq!(t.c.forwarded_out, 0, "{side:?} {core}: {s}");
            assert_eq!(t.c.forward_drops, 0);
            assert_eq!(
                t.drops[iwarp_engine::DropReason::TcpNoConnection as usize],
                0
            );
            assert_eq!(
                t.c.conns_established, CONNS_PER_CORE as u64,
                "{side:?} {core}"
            );
            assert_eq!(t.c.qps_rts, CONNS_PER_CORE as u64);
        }
    }
    // ARP (not TCP) arrives on queue 0 and is copied to core 1: the reply to A's request
    // (B learnt A from its SYNs: no ARP of its own).
    let s = tb.a.cores[0].final_snapshot(now);
    assert!(s.total().c.arp_copies >= 1, "{s}");
    // B's core 0 learnt A from A's ARP request; core 1, which never saw it, from A's
    // SYNs; neither had to ask.
    let b1 = tb.b.cores[1].final_snapshot(now).total();
    assert!(b1.c.arp_gleaned >= 1, "{b1:?}");
    for core in 0..2 {
        let b = tb.b.cores[core].final_snapshot(now).total();
        assert_eq!(b.c.arp_requests_out, 0, "B core {core}");
    }
}

#[test]
fn without_rss_frames_reach_their_owner_through_the_forward_rings() {
    let mut tb = testbed(false, 64);
    let conns = connect_and_write(&mut tb);
    assert!(conns.iter().any(|c| c.b_core == 1));
    let now = tb.clock.now();
    let b0 = tb.b.cores[0].final_snapshot(now).total();
    let b1 = tb.b.cores[1].final_snapshot(now).total();
    assert_eq!(b1.c.frames_rx, 0, "without RSS everything lands on queue 0");
    assert!(b0.c.forwarded_out > 0);
    assert_eq!(b1.c.forwarded_in, b0.c.forwarded_out);
    assert_eq!(b0.c.forward_drops, 0);
    assert_eq!(b1.c.conns_established, CONNS_PER_CORE as u64);
    assert_eq!(
        b1.drops[iwarp_engine::DropReason::TcpNoConnection as usize],
        0
    );
}

#[test]
fn a_misdirected_frame_is_forwarded_and_a_full_ring_drops_and_counts() {
    let mut tb = testbed(true, 2);
    let steer = Steering::new(&SYMMETRIC_RSS_KEY, 128, vec![0, 1]).unwrap();
    let mac_a = tb.a.cores[0].engine(0).unwrap().config().mac;
    let mac_b = tb.b.cores[0].engine(0).unwrap().config().mac;
    // Source ports whose tuple belongs to B's core 1.
    let ports: Vec<u16> = (40_000..41_000)
        .filter(|&p| steer.owner(IP_A.octets(), IP_B.octets(), p, PORT) == 1)
        .take(10)
        .collect();
    let frame = |p| tcp_frame(mac_b, mac_a, IP_A.octets(), IP_B.octets(), p, PORT);
    // One frame on the wrong queue: core 0 forwards it, core 1 handles it.
    assert!(tb.b.injectors[0].inject(&frame(ports[0])));
    let now = tb.clock.now();
    tb.b.cores[0].run_once(now);
    tb.b.cores[1].run_once(now);
    let b0 = tb.b.cores[0].final_snapshot(now).total();
    let b1 = tb.b.cores[1].final_snapshot(now).total();
    assert_eq!((b0.c.forwarded_out, b1.c.forwarded_in), (1, 1));
    assert_eq!(b0.c.engine_frames_in, 0, "core 0 did not handle it");
    assert_eq!(b1.c.engine_frames_in, 1, "its owner did");
    // Ten at once into a two-buffer ring: two forwarded, eight dropped and counted.
    for &p in &ports {
        assert!(tb.b.injectors[0].inject(&frame(p)));
    }
    tb.b.cores[0].run_once(now);
    let b0 = tb.b.cores[0].final_snapshot(now).total();
    assert_eq!(b0.c.forwarded_out, 3);
    assert_eq!(b0.c.forward_drops, 8);
    assert_eq!(b0.drops_total(), 8, "forward drops count as drops");
    tb.b.cores[1].run_once(now);
    assert_eq!(tb.b.cores[1].final_snapshot(now).total().c.forwarded_in, 3);
}
