//! Receive passes (`Engine::receiver`): a burst handed over in one pass gives what the same
//! frames give one by one (frames sent, events, completions, bytes placed), and what the
//! pass defers (servicing the connection handled last) is done before anything can see
//! it.

use iwarp_types::{Cqe, QpId, RecvWr, SendFlags, SendOp, SendWr, WcStatus};

use super::b2b::{establish, establish_two, pattern, sge};
use super::harness::{wide, Node, Pair};
use crate::counters::Counters;

/// Bytes each Write carries: 45 segments at MSS 1460.
const LEN: usize = 64 * 1024;

/// A's frames (counted from the first after the handshake) that never reach B.
const LOST_FROM_A: [usize; 3] = [40, 41, 42];

/// Hands `frames` to `to`: in one receive pass, or one `handle_frame` call each.
fn deliver(to: &mut Node, now: iwarp_types::Instant, frames: &[Vec<u8>], in_a_pass: bool) {
    if in_a_pass {
        let mut pass = to.eng.receiver(now);
        for f in frames {
            pass.handle_frame(f, &mut to.mem);
        }
    } else {
        for f in frames {
            to.eng.handle_frame(now, f, &mut to.mem);
        }
    }
}

/// What one side showed: every frame it sent, its events and completions.
#[derive(Default, PartialEq, Debug)]
struct Seen {
    frames: Vec<Vec<u8>>,
    events: Vec<String>,
    cqes: Vec<Cqe>,
}

impl Seen {
    fn take(&mut self, n: &mut Node) {
        self.frames.append(&mut n.frames_out);
        self.events
            .extend(n.take_events().iter().map(|e| format!("{e:?}")));
        self.cqes.extend(n.completions());
    }
}

/// Two connections, each with a Write of `LEN` bytes, a Send and a Read posted, run to
/// the end with each side's frames of a round delivered in one pass or one by one; the
/// frames, events and completions of both sides and B's memory afterwards.
fn run(in_a_pass: bool) -> Run {
    run_predicting(in_a_pass, true).0
}

/// What [`run`] returns: what A and B showed, B's memory and both engines' counters.
type Run = (Seen, Seen, Vec<u8>, [Counters; 2]);

/// [`run`], with header prediction on or off in both engines; also the segments each
/// engine took in and, of those, found by prediction.
fn run_predicting(in_a_pass: bool, predict: bool) -> (Run, [(u64, u64); 2]) {
    let mut p = Pair::with_configs(wide(1), wide(2));
    p.a.eng.core.rx_prediction.off = !predict;
    p.b.eng.core.rx_prediction.off = !predict;
    let (qa, qb): ([QpId; 2], [QpId; 2]) = establish_two(&mut p);
    p.a.take_events();
    p.b.take_events();
    let _ = (p.a.completions(), p.b.completions());
    for (i, (&a, &b)) in qa.iter().zip(&qb).enumerate() {
        let base = (i * 4 * LEN) as u64;
        p.a.fill(base as usize, &pattern(LEN, i as u8));
        p.b.fill(base as usize + 2 * LEN, &pattern(LEN, 7 + i as u8));
        let recv = RecvWr {
            wr_id: 100 + i as u64,
            sgl: sge(&p.b, base + LEN as u64, 4096),
        };
        p.b.eng.post_recv(b, &recv).unwrap();
        let wrs = [
            SendOp::Write {
                remote_to: base,
                rkey: p.b.mr,
            },
            SendOp::Send,
            SendOp::Read {
                remote_to: base + 2 * LEN as u64,
                rkey: p.b.mr,
                invalidate_local: false,
            },
        ];
        for (k, op) in wrs.into_iter().enumerate() {
            let (at, len) = match op {
                SendOp::Send => (base, 4096),
                SendOp::Read { .. } => (base + 2 * LEN as u64, LEN as u32),
                _ => (base, LEN as u32),
            };
            let wr = SendWr {
                wr_id: (10 * i + k) as u64,
                op,
                sgl: sge(&p.a, at, len),
                flags: SendFlags::SIGNALED,
            };
            p.a.eng.post_send(a, &wr).unwrap();
        }
    }
    // B sends to A as well (A's receives complete between the completions of A's own
    // WRs, which come with B's acknowledgements).
    for (i, (&a, &b)) in qa.iter().zip(&qb).enumerate() {
        let base = (i * 4 * LEN) as u64;
        for k in 0..4u64 {
            let recv = RecvWr {
                wr_id: 200 + 10 * i as u64 + k,
                sgl: sge(&p.a, base + 3 * LEN as u64 + k * 8192, 8192),
            };
            p.a.eng.post_recv(a, &recv).unwrap();
            let wr = SendWr {
                wr_id: 300 + 10 * i as u64 + k,
                op: SendOp::Send,
                sgl: sge(&p.b, base + 2 * LEN as u64, 8192),
                flags: SendFlags::SIGNALED,
            };
            p.b.eng.post_send(b, &wr).unwrap();
        }
    }
    let (mut seen_a, mut seen_b) = (Seen::default(), Seen::default());
    let mut sent_a = 0;
    for _ in 0..10_000 {
        p.a.drain(p.now);
        p.b.drain(p.now);
        let (fa, fb) = (p.a.frames_out.clone(), p.b.frames_out.clone());
        // Three of A's data frames lost on the way (SACK recovery).
        let n = fa.len();
        let fa: Vec<Vec<u8>> = (fa.into_iter().enumerate())
            .filter(|(k, _)| !LOST_FROM_A.contains(&(sent_a + k)))
            .map(|(_, f)| f)
            .collect();
        sent_a += n;
        seen_a.take(&mut p.a);
        seen_b.take(&mut p.b);
        if fa.is_empty() && fb.is_empty() {
            if !p.next_timer(p.now + iwarp_types::Duration::from_millis(50)) {
                break;
            }
            continue;
        }
        p.now += iwarp_types::Duration::from_micros(10);
        deliver(&mut p.b, p.now, &fa, in_a_pass);
        deliver(&mut p.a, p.now, &fb, in_a_pass);
    }
    assert_eq!(
        seen_a.cqes.len(),
        6 + 8,
        "A's WRs and receives: {:?}",
        seen_a.cqes
    );
    assert_eq!(seen_b.cqes.len(), 2 + 8, "B's receives and Sends");
    assert!(seen_a
        .cqes
        .iter()
        .chain(&seen_b.cqes)
        .all(|c| c.status == WcStatus::Success));
    let bytes = p.b.bytes(0, 8 * LEN).to_vec();
    let counters = [&mut p.a, &mut p.b].map(|n| n.eng.counters().clone());
    let segs = counters
        .clone()
        .map(|c| (c.tcp_segments_in, c.tcp_segments_predicted));
    ((seen_a, seen_b, bytes, counters), segs)
}

#[test]
fn a_burst_in_one_pass_gives_what_its_frames_give_one_by_one() {
    let (a1, b1, m1, c1) = run(false);
    let (a2, b2, m2, c2) = run(true);
    // The same counts, the TCP input's counted once per run of a connection's segments
    // in a pass, once per segment one by one.
    assert_eq!(c1, c2, "the same counters");
    assert!(c1[1].tcp_segments_in > 90);
    // A's losses were recovered from B's SACKs, which rode on B's data (no pure
    // duplicate ACK), without waiting for a timeout (RFC 6675 duplicate ACKs).
    let a = &c1[0];
    assert!(
        a.tcp_fast_retransmits > 0 && a.tcp_rto_expirations == 0,
        "{a:?}"
    );
    // Both connections' segments came in runs within bursts (the pass had work to
    // defer and connections to switch between).
    assert!(a1.frames.len() > 90, "{} frames from A", a1.frames.len());
    assert_eq!(a1.frames, a2.frames, "A sent the same frames");
    assert_eq!(b1.frames, b2.frames, "B sent the same frames");
    assert_eq!((a1.events, a1.cqes), (a2.events, a2.cqes), "A saw the same");
    assert_eq!((b1.events, b1.cqes), (b2.events, b2.cqes), "B saw the same");
    assert!(m1 == m2, "B's memory is the same");
    for i in 0..2 {
        let base = i * 4 * LEN;
        assert_eq!(&m2[base..base + LEN], &pattern(LEN, i as u8)[..]);
    }
}

/// Header prediction (`rx_predict.rs`) changes nothing the engines show: the same
/// frames, events, completions and memory with it as without, in passes and one by one;
/// with it, most segments of the two interleaved connections are found by it.
#[test]
fn header_prediction_changes_nothing_but_the_work() {
    for in_a_pass in [false, true] {
        let (with, segs) = run_predicting(in_a_pass, true);
        let (without, none) = run_predicting(in_a_pass, false);
        assert_eq!(with.0, without.0, "A showed the same");
        assert_eq!(with.1, without.1, "B showed the same");
        assert!(with.2 == without.2, "B's memory is the same");
        for ((all, predicted), (all_off, predicted_off)) in segs.into_iter().zip(none) {
            assert_eq!(all, all_off);
            assert_eq!(predicted_off, 0);
            assert!(predicted * 10 > all * 7, "{predicted} of {all} predicted");
        }
    }
}

#[test]
fn what_a_pass_defers_is_done_before_the_engine_is_seen_and_when_it_ends() {
    let mut p = Pair::with_configs(wide(1), wide(2));
    establish(&mut p);
    let qp = p.a.qp;
    p.a.fill(0, &pattern(LEN, 3));
    let wr = SendWr {
        wr_id: 9,
        op: SendOp::Write {
            remote_to: 0,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 0, LEN as u32),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qp, &wr).unwrap();
    p.a.drain(p.now);
    let data = core::mem::take(&mut p.a.frames_out);
    deliver(&mut p.b, p.now, &data, true);
    p.b.drain(p.now);
    let acks = core::mem::take(&mut p.b.frames_out);
    assert!(!acks.is_empty(), "B acknowledged the Write");
    // The ACKs in a pass: the FPDUs they release (and so the Write's completion) wait
    // for the connection's service, which the pass defers...
    let mut pass = p.a.eng.receiver(p.now);
    for f in &acks {
        pass.handle_frame(f, &mut p.a.mem);
    }
    let mut out = [Cqe::EMPTY; 4];
    // ...until the engine is asked for: then it is done first.
    let n = pass.engine().rnic_mut().poll_cq(p.a.cq, &mut out).unwrap();
    assert_eq!(n, 1, "the completion is there once the engine is seen");
    assert_eq!((out[0].wr_id, out[0].status), (9, WcStatus::Success));
    drop(pass);
    // And when a pass ends: one more segment to B in a pass, then nothing else.
    p.a.fill(LEN, &pattern(LEN, 4));
    let wr = SendWr {
        wr_id: 10,
        sgl: sge(&p.a, LEN as u64, 1000),
        ..wr
    };
    p.a.eng.post_send(qp, &wr).unwrap();
    p.a.drain(p.now);
    let data = core::mem::take(&mut p.a.frames_out);
    assert_eq!(data.len(), 1, "one segment");
    let ack_by = p.now + iwarp_types::Duration::from_micros(200);
    assert!(
        p.b.eng.poll_timeout().is_none_or(|t| t > ack_by),
        "no timer of B's due before the segment"
    );
    deliver(&mut p.b, p.now, &data, true);
    // B acknowledges it at once or arms its delayed-ACK timer: the serviced connection
    // went on the ready list and its timers into the heap when the pass ended.
    p.b.drain(p.now);
    let acked_now = !p.b.frames_out.is_empty();
    let timer = p.b.eng.poll_timeout().is_some_and(|t| t <= ack_by);
    assert!(
        acked_now || timer,
        "the segment was serviced when the pass ended"
    );
    p.run_until(|p| p.a.completions().iter().any(|c| c.wr_id == 10));
}
