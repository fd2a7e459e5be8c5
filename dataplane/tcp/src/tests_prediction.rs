//! Header prediction on input (`TcpConn::is_predicted_data`): a connection with it and
//! one without, fed the same random segments (mostly the next in-order data, some of
//! them duplicates, ahead of the window, older timestamps, new acknowledgments, other
//! windows, SACK blocks, FIN, RST), with our own data and timers between, stay
//! identical: every field, every segment sent, every event, every byte delivered.

use iwarp_types::Duration;

use crate::segment::{TcpOptions, MAX_SACK_BLOCKS};
use crate::test_harness::*;
use crate::test_util::xorshift;

/// One step of the peer or of the clock.
#[derive(Clone, Debug)]
enum Step {
    /// A segment from the peer: flags, offset of its sequence number from the peer's
    /// next, which of our numbers it acknowledges, window, TSval step, payload length,
    /// SACK block.
    Segment {
        flags: &'static str,
        seq_skew: i32,
        ack: AckOf,
        window: u16,
        ts_step: i32,
        len: usize,
        sack: bool,
    },
    /// We queue data and send what we may.
    Send(usize),
    /// Time passes; due timers run.
    Wait(u64),
}

#[derive(Clone, Copy, Debug)]
enum AckOf {
    /// `snd.una`: nothing new.
    Una,
    /// Everything sent.
    Max,
    /// Half of what is in flight.
    Half,
    /// Before `snd.una`.
    Old,
}

fn random_step(x: &mut u64) -> Step {
    let r = xorshift(x);
    match r % 16 {
        0 | 2 => Step::Send(1 + (r >> 8) as usize % 3_000),
        1 => Step::Wait((r >> 8) % 300_000),
        _ => {
            let pick = |n: u64, k: u32| (r >> k) % n;
            let flags = match pick(200, 4) {
                0 => "AF",
                1 => "AR",
                2..=29 => "A",
                30..=33 => "P",
                _ => "AP",
            };
            let seq_skew = match pick(12, 10) {
                0 => -500,
                1 => 700,
                2 => -1,
                _ => 0,
            };
            let ack = match pick(8, 14) {
                0 => AckOf::Max,
                1 => AckOf::Half,
                2 => AckOf::Old,
                _ => AckOf::Una,
            };
            let window = match pick(6, 17) {
                0 => 0,
                1 => 2_000,
                _ => 65_535,
            };
            let ts_step = match pick(10, 20) {
                0 => -5,
                1 => 0,
                _ => 1,
            };
            let len = match pick(10, 24) {
                0 => 0,
                _ => 1 + pick(1_000, 30) as usize,
            };
            Step::Segment {
                flags,
                seq_skew,
                ack,
                window,
                ts_step,
                len,
                sack: pick(10, 40) == 0,
            }
        }
    }
}

/// A harness and the peer's timestamp clock.
struct Side {
    h: H,
    peer_ts: u32,
}

impl Side {
    fn new(predict: bool) -> Side {
        let mut h = established_with_timestamps(cfg());
        h.c.no_prediction = !predict;
        Side { h, peer_ts: 1_000 }
    }

    fn apply(&mut self, step: &Step, data: &[u8]) {
        let h = &mut self.h;
        match *step {
            Step::Send(n) => h.src.push(n),
            Step::Wait(us) => h.advance(Duration::from_micros(us)),
            Step::Segment {
                flags: f,
                seq_skew,
                ack,
                window,
                ts_step,
                len,
                sack,
            } => {
                let (una, max) = (h.c.snd_una_seq(), h.c.snd_max_seq());
                let ack = match ack {
                    AckOf::Una => una,
                    AckOf::Max => max,
                    AckOf::Half => una + (max.diff(una) / 2) as u32,
                    AckOf::Old => una - 1_000,
                };
                // The peer's clock runs on; a step back is one segment's (an old copy).
                self.peer_ts = self.peer_ts.wrapping_add(ts_step.max(0) as u32);
                let tsval = self.peer_ts.wrapping_add(ts_step.min(0) as u32);
                let mut options = TcpOptions {
                    timestamp: Some((tsval, h.c.ts_now(h.now))),
                    ..TcpOptions::default()
                };
                if sack {
                    let mut blocks = [None; MAX_SACK_BLOCKS];
                    blocks[0] = Some((una + 1_000, una + 2_000));
                    options.sack_blocks = blocks;
                }
                h.window = window;
                // The peer sends from what we acknowledged (go-back-N), skewed at times.
                let seq = h.c.rcv_nxt_seq() + seq_skew as u32;
                h.recv_opts(flags(f), seq, ack, &data[..len], options);
            }
        }
    }

    /// Everything observable: the whole state, what it sends now, its events and the
    /// bytes delivered so far.
    fn observe(&mut self) -> String {
        let out = self.h.outs();
        let events = self.h.events();
        // The two differ in the switch and in the count of predicted segments only.
        let mut c = *self.h.c.counters();
        c.segs_predicted = 0;
        let state = format!("{:?}", self.h.c)
            .replace("no_prediction: true", "no_prediction: false")
            .replace(&format!("{:?}", self.h.c.counters()), &format!("{c:?}"));
        format!("{state}\n{out:?}\n{events:?}\n{:?}", self.h.sink.data)
    }
}

#[test]
fn header_prediction_is_the_full_path() {
    let data: Vec<u8> = (0..1_000u32).map(|i| (i * 7) as u8).collect();
    let (mut predicted, mut segs) = (0, 0);
    for seed in 1..=24u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let (mut with, mut without) = (Side::new(true), Side::new(false));
        for i in 0..300 {
            let step = random_step(&mut x);
            with.apply(&step, &data);
            without.apply(&step, &data);
            let (a, b) = (with.observe(), without.observe());
            assert!(
                a == b,
                "seed {seed}, step {i} {step:?}:\nwith:\n{a}\nwithout:\n{b}"
            );
            if with.h.c.state() == crate::TcpState::Closed {
                break;
            }
        }
        assert_eq!(without.h.c.counters().segs_predicted, 0);
        predicted += with.h.c.counters().segs_predicted;
        segs += with.h.c.counters().segs_in;
    }
    // The prediction had work to do, and the rest took the full path.
    assert!(
        predicted * 5 > segs && predicted * 4 < segs * 3,
        "{predicted} of {segs}"
    );
}

/// The prediction takes the segments it is meant for: a stream of in-order data with
/// nothing new acknowledged is predicted whole.
#[test]
fn in_order_data_is_predicted() {
    let mut s = Side::new(true);
    let data = [5u8; 1_000];
    for _ in 0..50 {
        let step = Step::Segment {
            flags: "AP",
            seq_skew: 0,
            ack: AckOf::Una,
            window: 65_535,
            ts_step: 1,
            len: 1_000,
            sack: false,
        };
        s.apply(&step, &data);
        s.h.outs();
    }
    assert_eq!(s.h.sink.data.len(), 50_000);
    assert_eq!(s.h.c.counters().segs_predicted, 50);
}
