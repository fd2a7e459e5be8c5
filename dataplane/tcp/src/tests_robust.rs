//! Robustness: arbitrary bytes and arbitrary (but well-formed) segments never panic,
//! never stall `poll_transmit`, and keep the sequence-space invariants.

use iwarp_types::Duration;

use crate::conn::TcpState;
use crate::segment::{TcpFlags, TcpOptions, TcpSegment, MAX_SACK_BLOCKS};
use crate::seq::SeqNumber;
use crate::test_harness::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn arbitrary_bytes_parse_without_panic() {
    let mut rng = Rng(0x1234_5678);
    let mut buf = [0u8; 96];
    for _ in 0..20_000 {
        let len = rng.below(96) as usize;
        for b in buf.iter_mut().take(len) {
            *b = rng.next() as u8;
        }
        // Mostly plausible data offsets, so option parsing is exercised.
        if len > 12 && rng.below(2) == 0 {
            buf[12] = ((5 + rng.below(11)) as u8) << 4;
        }
        let _ = TcpSegment::parse([1, 1, 1, 1], [2, 2, 2, 2], &buf[..len], rng.below(2) == 0);
    }
}

/// A random segment near the connection's sequence space.
fn random_input(h: &mut H, rng: &mut Rng) {
    let near = |base: SeqNumber, rng: &mut Rng| match rng.below(4) {
        0 => SeqNumber(rng.next() as u32),
        1 => base,
        _ => base + (rng.below(140_000) as u32).wrapping_sub(70_000),
    };
    let rcv = h.c.rcv_nxt_seq();
    let una = h.c.snd_una_seq();
    let seq = near(rcv, rng);
    let ack = near(una, rng);
    let bits = rng.next();
    let f = TcpFlags {
        syn: bits & 0x7 == 0,
        ack: bits & 0x18 != 0,
        fin: bits & 0x60 == 0x60,
        rst: bits & 0x380 == 0,
        psh: bits & 0x400 != 0,
        urg: false,
    };
    let mut o = TcpOptions::default();
    if rng.below(2) == 0 {
        o.timestamp = Some((rng.next() as u32, rng.next() as u32));
    }
    if rng.below(3) == 0 {
        o.mss = Some(rng.next() as u16);
        o.wscale = Some(rng.below(20) as u8);
        o.sack_permitted = true;
    }
    for i in 0..MAX_SACK_BLOCKS {
        // SYN-time options and three SACK blocks do not fit in one header together.
        if o.mss.is_none() && rng.below(3) == 0 {
            let l = near(una, rng);
            o.sack_blocks[i] = Some((l, l + rng.below(5_000) as u32));
        }
    }
    let len = if rng.below(2) == 0 {
        0
    } else {
        rng.below(1_400) as usize
    };
    let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
    h.window = rng.next() as u16;
    h.recv_opts(f, seq, ack, &payload, o);
}

fn check_invariants(h: &H) {
    let c = &h.c;
    assert!(
        c.snd_una <= c.snd_nxt && c.snd_nxt <= c.snd_max,
        "{:?}",
        (c.snd_una, c.snd_nxt, c.snd_max)
    );
    assert_eq!(c.received_offset(), h.sink.data.len() as u64);
    assert!(c.ooo.ranges().len() <= c.cfg.ooo_max_ranges);
    if let Some(&(_, end)) = c.ooo.ranges().last() {
        assert!(end <= c.rcv_nxt + c.cfg.ooo_max_bytes as u64);
    }
    if c.state() == TcpState::Closed {
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.heap_bytes(), 0);
    }
    if let Some(fin) = c.ooo.fin() {
        assert!(fin > c.rcv_nxt && !c.fin_received);
    }
    // Storage never exceeds the configured bounds (the segment map may round up).
    let bound = c.cfg.ooo_max_bytes
        + 16 * (c.cfg.ooo_max_ranges + c.cfg.sack_max_ranges)
        + 16 * c.cfg.max_inflight_segments;
    assert!(c.heap_bytes() <= bound, "{} > {bound}", c.heap_bytes());
    if c.heap_bytes() > 0 {
        assert!(
            c.poll_timeout().is_some(),
            "held storage with no release timer"
        );
    }
}

fn fuzz(mut h: H, seed: u64) {
    let mut rng = Rng(seed);
    for step in 0..600 {
        match rng.below(10) {
            0 => h.src.push(1 + rng.below(3_000) as usize),
            1 => {
                if let Some(t) = h.c.poll_timeout() {
                    h.now = h.now.max(t);
                    h.c.handle_timeout(h.now);
                }
            }
            2 if step > 450 => h.c.close(h.now),
            2 if step % 7 == 0 => h.c.set_path_mss(h.now, rng.below(1_600) as u16),
            3 => h.now += Duration::from_micros(rng.below(5_000)),
            _ => random_input(&mut h, &mut rng),
        }
        let _ = h.outs();
        let _ = h.events();
        check_invariants(&h);
    }
}

#[test]
fn random_segments_in_every_state_keep_invariants() {
    for seed in 1..=24u64 {
        let s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        fuzz(H::connect(cfg()), s);
        let mut h = H::established(cfg());
        h.src.push(5_000);
        h.outs();
        fuzz(h, s ^ 1);
        let mut h = H::established(crate::config::TcpConfig {
            ooo_max_ranges: 2,
            ooo_max_bytes: 4_000,
            ..cfg()
        });
        h.c.close(h.now);
        h.outs();
        fuzz(h, s ^ 2);
        let mut h = H::established(cfg());
        let s2 = h.pseq;
        h.recv("AF", s2, h.c.snd_max_seq(), &[]);
        fuzz(h, s ^ 3);
    }
}
