//! Nudges of an MPA initiator (`EngineConfig::initiator_nudge_ms`): a responder that has
//! sent nothing since RDMA mode began gets a zero-length RDMA Write at 1, 5, 21 and 85
//! times the interval (a Linux siw responder that missed the first FPDU reads it with the
//! next bytes, docs/INTEROP.md difference 2); a responder that talks gets none, nor does a
//! passive side, nor anyone when the interval is 0.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use iwarp_types::{Duration, Instant, SendFlags, SendOp, SendWr, WcOpcode, WcStatus};
use iwarp_wire::mpa;
use iwarp_wire::rdmap::{Body, Opcode, Segment};
use smoltcp::wire::{EthernetFrame, Ipv4Packet, TcpPacket};

use super::b2b::{establish, pattern, sge};
use super::harness::{config, Pair};

/// The ULPDUs of the FPDUs in a frame's TCP payload (our TCP sends whole FPDUs).
fn ulpdus(f: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(eth) = EthernetFrame::new_checked(f) else {
        return out;
    };
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return out;
    };
    let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
        return out;
    };
    let payload = tcp.payload();
    if payload.starts_with(&mpa::KEY_REQ[..4]) {
        return out; // an MPA Request or Reply
    }
    let mut at = 0;
    while let Some(h) = payload.get(at..at + mpa::ULPDU_LENGTH_LEN) {
        let len = usize::from(u16::from_be_bytes([h[0], h[1]]));
        let Some(u) = payload.get(at + mpa::ULPDU_LENGTH_LEN..at + mpa::ULPDU_LENGTH_LEN + len)
        else {
            break;
        };
        out.push(u.to_vec());
        at += mpa::fpdu_len(len);
    }
    out
}

/// A zero-length RDMA Write.
fn is_nudge(u: &[u8]) -> bool {
    Segment::parse(u)
        .is_ok_and(|s| s.header.opcode == Opcode::Write && s.body == Body::Payload(&[]))
}

/// Milliseconds since the test's start, as of the current turn of frames.
type Clock = Rc<Cell<u64>>;

/// Logs the time (ms, [`Clock`]) of every nudge in frames from A to B.
fn watch_a(p: &mut Pair) -> (Clock, Rc<RefCell<Vec<u64>>>) {
    let log: Rc<RefCell<Vec<u64>>> = Rc::default();
    let clock: Clock = Rc::default();
    let (l, c) = (log.clone(), clock.clone());
    p.a_to_b = Box::new(move |f| {
        for u in ulpdus(f) {
            if is_nudge(&u) {
                l.borrow_mut().push(c.get());
            }
        }
        true
    });
    (clock, log)
}

/// Runs frames and timers until virtual time `until`.
fn run_to(p: &mut Pair, until: Instant, clock: &Clock, start: Instant) {
    for _ in 0..100_000 {
        clock.set((p.now.0 - start.0) / 1_000_000);
        p.run(false);
        if !p.next_timer(until) {
            p.now = until.max(p.now);
            return;
        }
    }
    panic!("timers never reached {until:?}");
}

fn read_wr(p: &Pair, len: u32) -> SendWr {
    SendWr {
        wr_id: 7,
        op: SendOp::Read {
            remote_to: 200_000,
            rkey: p.b.mr,
            invalidate_local: false,
        },
        sgl: sge(&p.a, 300_000, len),
        flags: SendFlags::SIGNALED,
    }
}

#[test]
fn a_silent_responder_is_nudged_four_times_and_the_read_then_completes() {
    let mut p = Pair::new();
    establish(&mut p);
    let start = p.now;
    let (clock, nudges) = watch_a(&mut p);
    // B's Read Response does not reach A (B's frames with a payload are lost) for a
    // while: A has sent its Read Request and heard nothing.
    p.b_to_a = Box::new(|f| ulpdus(f).is_empty());
    let data = pattern(100, 3);
    p.b.fill(200_000, &data);
    let wr = read_wr(&p, 100);
    p.a.eng.post_send(p.a.qp, &wr).unwrap();
    run_to(&mut p, start + Duration::from_millis(1_000), &clock, start);
    let times = nudges.borrow().clone();
    assert_eq!(times.len(), 4, "nudges at {times:?} ms");
    for (t, want) in times.iter().zip([10u64, 50, 210, 850]) {
        assert!(
            *t >= want && *t < want + 5,
            "nudges at {times:?} ms, want 10, 50, 210, 850"
        );
    }
    run_to(&mut p, start + Duration::from_millis(3_000), &clock, start);
    assert_eq!(nudges.borrow().len(), 4, "at most four");
    assert_eq!(p.a.eng.counters().rdma_nudges_sent, 4);
    // The responder took the nudges without a trace; the Read completes once B's frames
    // pass again (TCP retransmits the response).
    p.b_to_a = Box::new(|_| true);
    p.run_until(|p| p.a.bytes(300_000, 100) == &data[..]);
    let c = p.a.completions();
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::Success, WcOpcode::Read),
        "{c:?}"
    );
    assert_eq!(p.a.bytes(300_000, 100), &data[..]);
    assert!(p.b.completions().is_empty());
    assert!(p.b.take_events().is_empty(), "no event at the responder");
    assert_eq!(p.b.eng.counters().terminates_sent, 0);
}

#[test]
fn a_responder_that_answers_is_never_nudged() {
    let mut p = Pair::new();
    establish(&mut p);
    let start = p.now;
    let (clock, nudges) = watch_a(&mut p);
    let wr = read_wr(&p, 100);
    p.a.eng.post_send(p.a.qp, &wr).unwrap();
    p.run(false);
    assert_eq!(p.a.completions().len(), 1);
    run_to(&mut p, start + Duration::from_millis(2_000), &clock, start);
    assert!(nudges.borrow().is_empty());
    assert_eq!(p.a.eng.counters().rdma_nudges_sent, 0);
}

#[test]
fn the_passive_side_and_an_idle_initiator_are_never_nudged() {
    let mut p = Pair::new();
    establish(&mut p);
    let start = p.now;
    let (clock, nudges) = watch_a(&mut p);
    // B (passive) writes into A, A sends nothing: neither nudges.
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_to: 100_000,
            rkey: p.a.mr,
        },
        sgl: sge(&p.b, 0, 64),
        flags: SendFlags::SIGNALED,
    };
    p.b.eng.post_send(p.b.qp, &wr).unwrap();
    run_to(&mut p, start + Duration::from_millis(2_000), &clock, start);
    assert!(nudges.borrow().is_empty());
    assert_eq!(p.a.eng.counters().rdma_nudges_sent, 0);
    assert_eq!(p.b.eng.counters().rdma_nudges_sent, 0);
}

#[test]
fn nudging_can_be_turned_off() {
    let mut p = Pair::with_configs(
        crate::EngineConfig {
            initiator_nudge_ms: 0,
            ..config(1)
        },
        config(2),
    );
    establish(&mut p);
    let start = p.now;
    let (clock, nudges) = watch_a(&mut p);
    p.b_to_a = Box::new(|f| ulpdus(f).is_empty());
    let wr = read_wr(&p, 100);
    p.a.eng.post_send(p.a.qp, &wr).unwrap();
    run_to(&mut p, start + Duration::from_millis(2_000), &clock, start);
    assert!(nudges.borrow().is_empty());
}
