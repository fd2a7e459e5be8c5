//! A graceful close whose FIN also acknowledges the peer's last message: the FIN's ACK
//! must complete that message before the QP judges the close (an empty send queue is a
//! clean close; a Send still waiting for its acknowledgement would make the FIN a Bad
//! LLP Close, answered with a Terminate and then an RST).
//!
//! This is how a request/response ULP (the load generator's credits and acks) ends: the
//! side that closes has just received the other side's last message, and its delayed ACK
//! of that message leaves in the same segment as its FIN.

use iwarp_engine::Event;
use iwarp_sim::host::{Pair, PairOptions};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{AsyncEventKind, Duration, QpState, RecvWr, SendFlags, SendOp, SendWr, WcStatus};

fn pair(name: &'static str) -> (Pair, SeedGuard) {
    let seed = seed_or_fresh();
    let g = SeedGuard::new(seed, name);
    let opts = PairOptions {
        // ACKs wait for a second segment or this long: the closer's ACK of the last
        // message rides on its FIN.
        engine: |_, cfg| cfg.tcp.delayed_ack_us = 200_000,
        ..PairOptions::default()
    };
    (Pair::new(seed, opts), g)
}

fn has_async(p: &Pair, host: usize, kind: AsyncEventKind) -> bool {
    p.sim
        .events(host)
        .iter()
        .any(|e| matches!(e, Event::Async(a) if a.kind == kind))
}

/// `responder_sends`: the MPA responder sends the last message and the initiator closes
/// (and the other way round).
fn last_message_then_close(responder_sends: bool, name: &'static str) {
    let (mut p, _g) = pair(name);
    p.hello();
    let (sender, closer) = if responder_sends {
        (p.b, p.a)
    } else {
        (p.a, p.b)
    };
    p.host(closer)
        .post_recv(
            closer.qp,
            &RecvWr {
                wr_id: 7,
                sgl: closer.sgl(0, 16),
            },
        )
        .unwrap();
    let wr = SendWr {
        wr_id: 9,
        op: SendOp::Send,
        sgl: sender.sgl(0, 16),
        flags: SendFlags::SIGNALED,
    };
    p.host(sender).post_send(sender.qp, &wr).unwrap();
    let got = p.wait_cqes(closer, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, WcStatus::Success, "{got:?}");
    // The sender's Send is not acknowledged yet (delayed ACK): it is still on its SQ.
    assert_eq!(p.host(sender).cqe_count(sender.cq), 0);
    let now = p.sim.now();
    p.host(closer).engine.disconnect(now, closer.qp).unwrap();
    let (a, b) = (p.a, p.b);
    p.sim.run_until(Duration::from_secs(300), |s| {
        s.node(a.host).qp_state(a.qp) != QpState::Rts
            && s.node(a.host).qp_state(a.qp) != QpState::Closing
            && s.node(b.host).qp_state(b.qp) != QpState::Rts
            && s.node(b.host).qp_state(b.qp) != QpState::Closing
    });
    let done = p.host(sender).take_cqes(sender.cq);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].wr_id, done[0].status),
        (9, WcStatus::Success),
        "the FIN's ACK completed the Send"
    );
    for side in [a, b] {
        assert_eq!(p.host(side).qp_state(side.qp), QpState::Idle);
        assert!(
            has_async(&p, side.host, AsyncEventKind::LlpCloseComplete),
            "{:?}",
            p.sim.events(side.host)
        );
        assert!(!has_async(&p, side.host, AsyncEventKind::BadLlpClose));
        let c = p.host(side).counters();
        assert_eq!(
            (
                c.terminates_sent,
                c.terminates_received,
                c.tcp_rsts_sent,
                c.tcp_rsts_received
            ),
            (0, 0, 0, 0),
            "host {}: {c:?}",
            side.host
        );
    }
}

#[test]
fn fin_acking_the_responders_last_send_closes_cleanly() {
    last_message_then_close(true, "fin_acking_the_responders_last_send_closes_cleanly");
}

#[test]
fn fin_acking_the_initiators_last_send_closes_cleanly() {
    last_message_then_close(false, "fin_acking_the_initiators_last_send_closes_cleanly");
}
