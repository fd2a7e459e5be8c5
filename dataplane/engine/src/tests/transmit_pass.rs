//! Transmit passes (`Engine::transmitter`): a connection keeps its turn for up to
//! `TX_TURN_SEGS_MAX` segments, ready connections take turns, and a pass that ends inside
//! a turn leaves the connection ready and its timers armed.

use iwarp_types::{QpId, SendFlags, SendOp, SendWr, WcStatus};

use super::b2b::{establish, establish_two, pattern, sge};
use super::harness::{wide, Pair};
use crate::iface::L4_OFFSET;
use crate::{EngineConfig, TX_TURN_SEGS_MAX};

/// Bytes each Write carries: 45 segments at MSS 1460.
const LEN: usize = 64 * 1024;

/// Posts a signaled Write of `LEN` pattern bytes (`wr_id` `i`) from A's offset
/// `i * LEN` to the same offset at B.
fn post_write(p: &mut Pair, qp: QpId, i: usize) {
    p.a.fill(i * LEN, &pattern(LEN, i as u8));
    let wr = SendWr {
        wr_id: i as u64,
        op: SendOp::Write {
            remote_to: (i * LEN) as u64,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, (i * LEN) as u64, LEN as u32),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qp, &wr).unwrap();
}

/// The TCP source port of a frame A sent.
fn src_port(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[L4_OFFSET], frame[L4_OFFSET + 1]])
}

/// Hands `frames` to B, runs the pair until A has `n` completions, and checks them and
/// the bytes placed at B.
fn deliver_and_check(p: &mut Pair, frames: &[Vec<u8>], n: usize) {
    for f in frames {
        p.b.eng.handle_frame(p.now, f, &mut p.b.mem);
    }
    let mut done = Vec::new();
    p.run_until(|p| {
        done.extend(p.a.completions());
        done.len() == n
    });
    for i in 0..n {
        assert!(done
            .iter()
            .any(|c| c.wr_id == i as u64 && c.status == WcStatus::Success));
        assert_eq!(p.b.bytes(i * LEN, LEN), &pattern(LEN, i as u8)[..]);
    }
}

/// Two connections with a Write posted on each.
fn two_writes(p: &mut Pair) {
    let (qa, _) = establish_two(p);
    for (i, qp) in qa.iter().enumerate() {
        post_write(p, *qp, i);
    }
}

/// The frames of A's next transmit pass.
fn one_pass(p: &mut Pair) -> Vec<Vec<u8>> {
    let mut buf = [0u8; 1514];
    let mut frames = Vec::new();
    let mut pass = p.a.eng.transmitter(p.now, &p.a.mem);
    while let Some(n) = pass.next(&mut buf) {
        frames.push(buf[..n].to_vec());
        assert!(frames.len() < 1_000, "the pass never ends");
    }
    frames
}

#[test]
fn ready_connections_take_turns_of_at_most_the_turn_length() {
    assert_eq!(
        EngineConfig::default().tx_turn_segs_max,
        TX_TURN_SEGS_MAX,
        "the default"
    );
    for turn in [TX_TURN_SEGS_MAX, 4, 1] {
        turns_of(turn);
    }
}

/// Two connections' Writes in one pass of engines whose turn is `turn` segments.
fn turns_of(turn: u32) {
    let (mut a, mut b) = (wide(1), wide(2));
    a.tx_turn_segs_max = turn;
    b.tx_turn_segs_max = turn;
    let mut p = Pair::with_configs(a, b);
    two_writes(&mut p);
    let frames = one_pass(&mut p);
    // Runs of consecutive segments of one connection: its turns.
    let mut turns: Vec<(u16, usize)> = Vec::new();
    for f in &frames {
        match turns.last_mut() {
            Some((port, len)) if *port == src_port(f) => *len += 1,
            _ => turns.push((src_port(f), 1)),
        }
    }
    let lens: Vec<usize> = turns.iter().map(|t| t.1).collect();
    assert!(turns.len() >= 6, "both Writes went, in turns: {lens:?}");
    let turn = turn as usize;
    assert!(lens.iter().all(|&l| l <= turn), "{lens:?}");
    // While both have more than a turn left, each turn is whole and they alternate.
    assert_eq!(&lens[..4], &[turn; 4], "{lens:?}");
    for w in turns.windows(2) {
        assert_ne!(w[0].0, w[1].0, "a connection's turns are not back to back");
    }
    deliver_and_check(&mut p, &frames, 2);
}

#[test]
fn a_pass_that_ends_inside_a_turn_leaves_the_connection_ready_and_timed() {
    let mut p = Pair::with_configs(wide(1), wide(2));
    establish(&mut p);
    let qp = p.a.qp;
    post_write(&mut p, qp, 0);
    let mut buf = [0u8; 1514];
    let mut frames = Vec::new();
    // Passes of one and two frames: each ends inside the connection's turn.
    for take in [1, 2, 1] {
        let mut pass = p.a.eng.transmitter(p.now, &p.a.mem);
        for _ in 0..take {
            let n = pass.next(&mut buf).expect("the connection still has data");
            frames.push(buf[..n].to_vec());
        }
        drop(pass);
        // Sending armed the retransmission timer: the heap knows it.
        assert!(p.a.eng.poll_timeout().is_some_and(|t| t > p.now));
    }
    // The connection is still on the ready list: the next pass goes on with it.
    while let Some(n) = p.a.eng.poll_transmit(p.now, &mut buf, &p.a.mem) {
        frames.push(buf[..n].to_vec());
        assert!(frames.len() < 1_000, "poll_transmit never returns None");
    }
    assert!(
        frames.len() > LEN / 1460,
        "the whole Write went: {}",
        frames.len()
    );
    deliver_and_check(&mut p, &frames, 1);
}

#[test]
fn while_a_connection_waits_for_an_fpdu_ring_turns_are_one_segment() {
    // One ring for two connections: the second waits for it while the first sends.
    let mut a = wide(1);
    a.mpa_pool_rings = 1;
    let mut p = Pair::with_configs(a, wide(2));
    two_writes(&mut p);
    let visits = p.a.eng.counters().conn_visits;
    let frames = one_pass(&mut p);
    assert!(frames.len() > LEN / 1460, "the ring holder's Write went");
    assert!(
        frames
            .windows(2)
            .all(|w| src_port(&w[0]) == src_port(&w[1])),
        "only the ring holder sends"
    );
    // The holder's first turn is whole (nobody waited yet); once the other connection
    // waits, every segment is a turn of its own (a long turn would keep the waiter's
    // ring idle once it is promised): one visit each, against one per 16 otherwise.
    let visits = p.a.eng.counters().conn_visits - visits;
    let later = (frames.len() - TX_TURN_SEGS_MAX as usize) as u64;
    assert!(
        visits >= later,
        "{visits} visits for {} frames",
        frames.len()
    );
    deliver_and_check(&mut p, &frames, 2);
}
