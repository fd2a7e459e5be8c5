//! Nudges (`Rnic::qp_queue_nudge`): one zero-length RDMA Write between two messages, which
//! the peer takes without a completion, an error or a byte placed.

use iwarp_types::{SendOp, WcOpcode, WcStatus};
use iwarp_wire::rdmap::{Body, Opcode, Segment};

use super::pair::{sgl, Opts, Pair, ALL, SIG};

/// (RDMAP opcode, payload length, last) of a ULPDU.
fn shape(u: &[u8]) -> (Opcode, usize, bool) {
    let s = Segment::parse(u).expect("a valid segment");
    let len = match s.body {
        Body::Payload(p) => p.len(),
        _ => 0,
    };
    (s.header.opcode, len, s.header.last)
}

#[test]
fn a_nudge_is_a_zero_length_write_the_peer_takes_in_silence() {
    let mut p = Pair::new();
    assert!(p.a.rnic.qp_queue_nudge(p.a.qp).is_ok());
    let u = p.a.take_ulpdu(1024).expect("the nudge");
    // Segment::parse refuses a Write without the tagged model.
    assert_eq!(
        shape(&u),
        (Opcode::Write, 0, true),
        "zero-length RDMA Write: {u:02x?}"
    );
    assert_eq!(p.b.inject(&u), Ok(()), "no access check at zero length");
    assert!(p.b.cqes().is_empty() && p.a.cqes().is_empty());
    assert!(p.b.events().is_empty());
    assert!(p.a.take_ulpdu(1024).is_none(), "one nudge per call");
    let c = p.a.rnic.qp_counters(p.a.qp).unwrap();
    assert_eq!((c.nudges_sent, c.segs_out, c.msgs_out[0]), (1, 0, 0));
    // Two queued nudges before the QP sends are one.
    p.a.rnic.qp_queue_nudge(p.a.qp).unwrap();
    p.a.rnic.qp_queue_nudge(p.a.qp).unwrap();
    assert!(p.a.take_ulpdu(1024).is_some());
    assert!(p.a.take_ulpdu(1024).is_none());
}

#[test]
fn a_nudge_waits_for_the_message_in_progress() {
    let mut p = Pair::with(Opts {
        max_ulpdu: 256,
        ..Opts::default()
    });
    let (ls, lva) = p.a.reg(1000, ALL);
    p.a.fill_pattern(lva, 1000, 7);
    let (rs, rva) = p.b.reg(1000, ALL);
    p.a.post(
        1,
        SendOp::Write {
            remote_to: rva,
            rkey: rs,
        },
        sgl(ls, lva, 1000),
        SIG,
    );
    let first = p.a.take_ulpdu(256).unwrap();
    assert_eq!(p.b.inject(&first), Ok(()));
    p.a.rnic.qp_queue_nudge(p.a.qp).unwrap();
    let mut shapes = Vec::new();
    while let Some(u) = p.a.take_ulpdu(256) {
        assert_eq!(p.b.inject(&u), Ok(()));
        shapes.push(shape(&u));
    }
    let nudge = shapes.iter().position(|s| s.1 == 0).expect("a nudge");
    assert_eq!(
        nudge,
        shapes.len() - 1,
        "after the Write's last segment: {shapes:?}"
    );
    assert!(
        shapes[nudge - 1].2,
        "the segment before the nudge ends the Write"
    );
    assert_eq!(p.b.bytes(rva, 1000), p.a.bytes(lva, 1000));
    let c = p.a.cqes();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::Success, WcOpcode::Write)
    );
    assert!(p.b.cqes().is_empty());
}

#[test]
fn only_a_qp_in_rts_is_nudged() {
    let mut p = Pair::with(Opts {
        establish: false,
        ..Opts::default()
    });
    assert!(p.a.rnic.qp_queue_nudge(p.a.qp).is_err(), "Idle");
    assert!(p.a.take_ulpdu(1024).is_none());
}
