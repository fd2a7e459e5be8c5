//! QP state transitions reachable through connection management, end to end: establish
//! (Idle → RTS), graceful disconnect from either side (RTS → Closing → Idle), abort
//! (→ Error, RST), Terminate by Modify QP (RTS → Terminate → Error) and Modify to Error
//! with outstanding work (flush).

use iwarp_engine::Event;
use iwarp_rdma::QpModify;
use iwarp_sim::host::{Pair, PairOptions};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{
    AsyncEventKind, Cqe, Duration, EventResource, QpState, RecvWr, SendFlags, SendOp, SendWr,
    TermCode, WcStatus,
};

fn pair(name: &'static str) -> (Pair, SeedGuard) {
    let seed = seed_or_fresh();
    let g = SeedGuard::new(seed, name);
    (Pair::new(seed, PairOptions::default()), g)
}

fn has_async(p: &Pair, host: usize, kind: AsyncEventKind) -> bool {
    p.sim
        .events(host)
        .iter()
        .any(|e| matches!(e, Event::Async(a) if a.kind == kind))
}

fn disconnected(p: &Pair, host: usize) -> bool {
    p.sim
        .events(host)
        .iter()
        .any(|e| matches!(e, Event::Disconnected { .. }))
}

fn all_flushed(cqes: &[Cqe], n: usize) {
    assert_eq!(cqes.len(), n, "{cqes:?}");
    assert!(
        cqes.iter().all(|c| c.status == WcStatus::Flushed),
        "{cqes:?}"
    );
}

#[test]
fn establish_moves_both_qps_to_rts() {
    let (mut p, _g) = pair("establish_moves_both_qps_to_rts");
    let (a, b) = (p.a, p.b);
    for side in [a, b] {
        let info = p.host(side).query_qp(side.qp);
        assert_eq!(info.state, QpState::Rts);
        assert!(info.conn.is_some());
        assert_eq!(p.host(side).counters().conns_established, 1);
    }
    assert_eq!(p.host(a).engine.qp_conn(a.qp), Some(p.connected.conn_a));
    assert_eq!(p.host(b).engine.qp_conn(b.qp), Some(p.connected.conn_b));
}

fn graceful(from_initiator: bool, name: &'static str) {
    let (mut p, _g) = pair(name);
    let (a, b) = (p.a, p.b);
    p.hello();
    // Outstanding receives on both sides are flushed by the close.
    for side in [a, b] {
        for i in 0..3 {
            p.host(side)
                .post_recv(
                    side.qp,
                    &RecvWr {
                        wr_id: i,
                        sgl: side.sgl(0, 64),
                    },
                )
                .unwrap();
        }
    }
    let (closer, peer) = if from_initiator { (a, b) } else { (b, a) };
    let now = p.sim.now();
    p.host(closer).engine.disconnect(now, closer.qp).unwrap();
    p.sim.flush();
    assert_eq!(p.host(closer).qp_state(closer.qp), QpState::Closing);
    p.sim.run_until(Duration::from_secs(300), |s| {
        s.node(0).qp_state(a.qp) == QpState::Idle && s.node(1).qp_state(b.qp) == QpState::Idle
    });
    p.sim.run_until(Duration::from_secs(1), |s| {
        s.events(closer.host)
            .iter()
            .any(|e| matches!(e, Event::Disconnected { .. }))
            && s.events(peer.host)
                .iter()
                .any(|e| matches!(e, Event::Disconnected { .. }))
    });
    for side in [a, b] {
        assert!(
            has_async(&p, side.host, AsyncEventKind::LlpCloseComplete),
            "{:?}",
            p.sim.events(side.host)
        );
        assert!(!has_async(&p, side.host, AsyncEventKind::BadLlpClose));
        all_flushed(&p.host(side).take_cqes(side.cq), 3);
        assert!(p.host(side).query_qp(side.qp).conn.is_none());
    }
}

#[test]
fn graceful_disconnect_from_initiator() {
    graceful(true, "graceful_disconnect_from_initiator");
}

#[test]
fn graceful_disconnect_from_responder() {
    graceful(false, "graceful_disconnect_from_responder");
}

#[test]
fn graceful_disconnect_waits_for_the_send_queue() {
    let (mut p, _g) = pair("graceful_disconnect_waits_for_the_send_queue");
    let (a, b) = (p.a, p.b);
    let data = p.fill_random(a, 0, 300_000);
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_to: 0,
            rkey: b.mr,
        },
        sgl: a.sgl(0, 300_000),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &wr).unwrap();
    let now = p.sim.now();
    p.host(a).engine.disconnect(now, a.qp).unwrap();
    p.sim.run_until(Duration::from_secs(300), |s| {
        s.node(0).qp_state(a.qp) == QpState::Idle && s.node(1).qp_state(b.qp) == QpState::Idle
    });
    let ca = p.host(a).take_cqes(a.cq);
    assert_eq!(ca.len(), 1);
    assert_eq!(
        ca[0].status,
        WcStatus::Success,
        "the Write finished before the FIN: {ca:?}"
    );
    assert_eq!(p.bytes(b, 0, 300_000), &data[..]);
}

#[test]
fn abort_resets_and_flushes() {
    let (mut p, _g) = pair("abort_resets_and_flushes");
    let (a, b) = (p.a, p.b);
    for i in 0..4 {
        p.host(a)
            .post_recv(
                a.qp,
                &RecvWr {
                    wr_id: i,
                    sgl: a.sgl(0, 64),
                },
            )
            .unwrap();
        p.host(b)
            .post_recv(
                b.qp,
                &RecvWr {
                    wr_id: i,
                    sgl: b.sgl(0, 64),
                },
            )
            .unwrap();
    }
    let now = p.sim.now();
    p.host(a).engine.abort(now, a.qp).unwrap();
    p.sim.run_until(Duration::from_secs(10), |s| {
        s.node(0).qp_state(a.qp) == QpState::Error && s.node(1).qp_state(b.qp) == QpState::Error
    });
    p.sim.run_until(Duration::from_secs(10), |s| {
        s.events(0)
            .iter()
            .any(|e| matches!(e, Event::Disconnected { .. }))
            && s.events(1)
                .iter()
                .any(|e| matches!(e, Event::Disconnected { .. }))
    });
    assert!(
        has_async(&p, 1, AsyncEventKind::LlpConnectionReset),
        "peer saw the RST: {:?}",
        p.sim.events(1)
    );
    assert!(p.host(b).counters().tcp_rsts_received >= 1);
    all_flushed(&p.host(a).take_cqes(a.cq), 4);
    all_flushed(&p.host(b).take_cqes(b.cq), 4);
    // Error → Idle is allowed once flushed; the QP can be used again.
    let idle = QpModify {
        state: Some(QpState::Idle),
        ..QpModify::default()
    };
    p.host(a).engine.modify_qp(a.qp, &idle).unwrap();
    assert_eq!(p.host(a).qp_state(a.qp), QpState::Idle);
}

#[test]
fn modify_to_terminate_sends_local_catastrophic() {
    let (mut p, _g) = pair("modify_to_terminate_sends_local_catastrophic");
    let (a, b) = (p.a, p.b);
    p.hello();
    p.host(a)
        .post_recv(
            a.qp,
            &RecvWr {
                wr_id: 1,
                sgl: a.sgl(0, 64),
            },
        )
        .unwrap();
    let m = QpModify {
        state: Some(QpState::Terminate),
        ..QpModify::default()
    };
    p.host(b).engine.modify_qp(b.qp, &m).unwrap();
    p.sim.flush();
    assert_eq!(p.host(b).qp_state(b.qp), QpState::Terminate);
    p.sim.run_until(Duration::from_secs(10), |s| {
        s.events(0).iter().any(|e| {
            matches!(e, Event::Async(ev) if ev.resource == EventResource::Qp(a.qp)
            && ev.kind == AsyncEventKind::TerminateReceived(TermCode::RDMAP_LOCAL_CATASTROPHIC))
        })
    });
    let info = p.host(a).query_qp(a.qp);
    assert!(
        matches!(info.state, QpState::Terminate | QpState::Error),
        "{info:?}"
    );
    let t = info
        .terminate
        .expect("the received Terminate is kept for Query QP");
    assert_eq!(
        (t.code, t.local),
        (TermCode::RDMAP_LOCAL_CATASTROPHIC, false)
    );
    let tb = p
        .host(b)
        .query_qp(b.qp)
        .terminate
        .expect("the sent Terminate is kept");
    assert_eq!(
        (tb.code, tb.local),
        (TermCode::RDMAP_LOCAL_CATASTROPHIC, true)
    );
    // Both end in Error; the receive is flushed.
    p.sim.run_until(Duration::from_secs(300), |s| {
        s.node(0).qp_state(a.qp) == QpState::Error && s.node(1).qp_state(b.qp) == QpState::Error
    });
    all_flushed(&p.host(a).take_cqes(a.cq), 1);
    assert!(p.host(b).counters().terminates_sent >= 1);
    assert!(p.host(a).counters().terminates_received >= 1);
}

#[test]
fn modify_to_error_flushes_send_and_receive_queues() {
    let (mut p, _g) = pair("modify_to_error_flushes_send_and_receive_queues");
    let (a, b) = (p.a, p.b);
    // Receives outstanding when the QP is moved to Error are flushed.
    for i in 0..3 {
        p.host(a)
            .post_recv(
                a.qp,
                &RecvWr {
                    wr_id: 100 + i,
                    sgl: a.sgl(0, 64),
                },
            )
            .unwrap();
    }
    let m = QpModify {
        state: Some(QpState::Error),
        ..QpModify::default()
    };
    p.host(a).engine.modify_qp(a.qp, &m).unwrap();
    p.sim.flush();
    assert_eq!(p.host(a).qp_state(a.qp), QpState::Error);
    // Posting in Error: enqueued then flushed, or refused at once.
    let wr = SendWr {
        wr_id: 7,
        op: SendOp::Send,
        sgl: a.sgl(0, 8),
        flags: SendFlags::SIGNALED,
    };
    let posted = p.host(a).post_send(a.qp, &wr).is_ok();
    p.sim
        .run_until(Duration::from_secs(10), |s| disconnected_in(s, 1));
    let ca = p.host(a).take_cqes(a.cq);
    all_flushed(&ca, 3 + usize::from(posted));
    assert!(
        has_async(&p, 1, AsyncEventKind::LlpConnectionReset),
        "{:?}",
        p.sim.events(1)
    );
    assert_eq!(p.host(b).qp_state(b.qp), QpState::Error);
    assert!(disconnected(&p, 1));
}

fn disconnected_in(s: &iwarp_sim::sim::Sim<iwarp_sim::host::Host>, host: usize) -> bool {
    s.events(host)
        .iter()
        .any(|e| matches!(e, Event::Disconnected { .. }))
}
