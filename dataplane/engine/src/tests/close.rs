//! Teardown: the QP leaves the connection when the LLP close completes from the RDMA
//! point of view (our FIN acknowledged, the peer's FIN received), not when TIME_WAIT
//! ends; a close that cannot complete is bounded by `llp_close_timeout_ms`.

use iwarp_rdma::QpModify;
use iwarp_types::{AsyncEventKind, Duration, EventResource, QpState};

use super::b2b::{establish, B_IP, PORT};
use super::harness::{config, Pair};
use crate::{AcceptParams, ConnectParams, Event};

fn async_kinds(events: &[Event], qp: iwarp_types::QpId) -> Vec<AsyncEventKind> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Async(a) if a.resource == EventResource::Qp(qp) => Some(a.kind),
            _ => None,
        })
        .collect()
}

/// An IPv4 TCP frame with FIN set (TCP flags at 14 + 20 + 13).
fn carries_fin(f: &[u8]) -> bool {
    f.len() > 47 && f[23] == 6 && f[47] & 0x01 != 0
}

fn disconnects(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::Disconnected { .. }))
        .count()
}

#[test]
fn graceful_close_frees_the_qp_while_tcp_lingers_in_time_wait() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    let start = p.now;
    p.a.eng.disconnect(p.now, qa).unwrap();
    p.run_until(|p| p.a.eng.rnic().query_qp(qa).unwrap().state == QpState::Idle);
    assert!(
        p.now.saturating_since(start) < Duration::from_secs(1),
        "Idle after the FIN exchange, not after TIME_WAIT ({:?})",
        p.now.saturating_since(start)
    );
    let ea = p.a.take_events();
    assert_eq!(disconnects(&ea), 1, "{ea:?}");
    assert!(async_kinds(&ea, qa).contains(&AsyncEventKind::LlpCloseComplete));
    assert_eq!(p.a.eng.qp_conn(qa), None, "detached");
    assert_eq!(
        p.a.eng.conn_count(),
        1,
        "the TCP connection is in TIME_WAIT"
    );
    assert_eq!(p.b.eng.conn_count(), 0, "the passive closer is done");
    assert_eq!(p.b.eng.rnic().query_qp(qb).unwrap().state, QpState::Idle);
    assert_eq!(disconnects(&p.b.take_events()), 1);

    // The QP is reusable at once: a new connection from it, while the old one lingers.
    let qb2 = super::b2b::extra_qp(&mut p.b);
    p.a.eng
        .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
        .unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    p.b.eng
        .accept(p.now, conn, qb2, AcceptParams::default())
        .unwrap();
    p.run(false);
    assert!(p
        .a
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Established { qp, .. } if *qp == qa)));
    assert_eq!(p.a.eng.conn_count(), 2);

    // TIME_WAIT ends later without a word to the caller about the old connection.
    p.run_until(|p| p.a.eng.conn_count() == 1);
    let ea = p.a.take_events();
    assert!(ea.is_empty(), "{ea:?}");
    assert_eq!(p.a.eng.rnic().query_qp(qa).unwrap().state, QpState::Rts);
}

#[test]
fn terminate_reaches_error_without_waiting_for_time_wait() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    let start = p.now;
    let m = QpModify {
        state: Some(QpState::Terminate),
        ..QpModify::default()
    };
    p.a.eng.modify_qp(qa, &m).unwrap();
    p.run_until(|p| p.a.eng.rnic().query_qp(qa).unwrap().state == QpState::Error);
    assert!(p.now.saturating_since(start) < Duration::from_secs(1));
    assert_eq!(p.a.eng.qp_conn(qa), None);
    assert_eq!(disconnects(&p.a.take_events()), 1);
    assert!(
        p.a.eng.conn_count() <= 1,
        "at most the TIME_WAIT connection is left"
    );
    let eb = p.b.take_events();
    assert!(
        async_kinds(&eb, qb).iter().any(|k| matches!(
            k,
            AsyncEventKind::TerminateReceived(c) if *c == iwarp_types::TermCode::RDMAP_LOCAL_CATASTROPHIC
        )),
        "{eb:?}"
    );
    // Error to Idle at once: the QP is free for a new connection.
    let idle = QpModify {
        state: Some(QpState::Idle),
        ..QpModify::default()
    };
    p.a.eng.modify_qp(qa, &idle).unwrap();
    assert_eq!(p.a.eng.rnic().query_qp(qa).unwrap().state, QpState::Idle);
}

#[test]
fn fin_wait_2_with_a_silent_peer_is_bounded() {
    let mut ca = config(1);
    ca.llp_close_timeout_ms = 2_000;
    let mut p = Pair::with_configs(ca, config(2));
    establish(&mut p);
    let qa = p.a.qp;
    // B's FIN never arrives (its segments carrying FIN are lost), its ACKs do.
    p.b_to_a = Box::new(|f: &mut Vec<u8>| !carries_fin(f));
    let start = p.now;
    p.a.eng.disconnect(p.now, qa).unwrap();
    p.run_until(|p| p.a.eng.rnic().query_qp(qa).unwrap().state != QpState::Rts);
    p.run_until(|p| p.a.eng.rnic().query_qp(qa).unwrap().state == QpState::Error);
    let waited = p.now.saturating_since(start);
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let ea = p.a.take_events();
    assert!(
        async_kinds(&ea, qa).contains(&AsyncEventKind::LlpConnectionLost),
        "{ea:?}"
    );
    assert_eq!(disconnects(&ea), 1);
    let c = p.a.eng.counters().clone();
    assert_eq!(c.llp_close_timeouts, 1);
    assert!(c.tcp_rsts_sent >= 1, "the connection was reset");
    p.run_until(|p| p.a.eng.conn_count() == 0);
}

/// A QP destroyed while the graceful close it started is under way (its FIN out, every
/// byte acknowledged): the engine leaves the close to TCP instead of resetting, so the
/// peer sees an orderly close (its QP Idle, one Disconnected), as with Linux's iw_cm.
/// Before the FIN is out, or on an open connection, nothing is released (the caller
/// aborts).
#[test]
fn a_qp_destroyed_during_its_close_lets_tcp_finish_it_without_a_reset() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    assert!(!p.a.eng.release_closing_qp(p.now, qa), "an open connection");
    // B's answers are held: A's FIN goes out and stays unacknowledged.
    p.b_to_a = Box::new(|_| false);
    p.a.eng.disconnect(p.now, qa).unwrap();
    p.run(false);
    let conn = p.a.eng.qp_conn(qa).expect("still attached");
    assert_eq!(
        p.a.eng.conn(conn).unwrap().tcp.state(),
        iwarp_tcp::TcpState::FinWait1
    );
    assert!(p.a.eng.release_closing_qp(p.now, qa));
    assert_eq!(p.a.eng.qp_conn(qa), None, "detached");
    p.a.eng.rnic_mut().destroy_qp(qa).unwrap();
    p.run(false);
    assert_eq!(disconnects(&p.a.take_events()), 1);
    // B's answers flow again: the close completes on both sides without a reset.
    p.b_to_a = Box::new(|_| true);
    p.run_until(|p| p.b.eng.conn_count() == 0);
    assert_eq!(p.b.eng.rnic().query_qp(qb).unwrap().state, QpState::Idle);
    let eb = p.b.take_events();
    assert_eq!(disconnects(&eb), 1, "{eb:?}");
    assert!(
        !eb.iter().any(|e| matches!(e, Event::ConnectFailed { .. })),
        "{eb:?}"
    );
    assert_eq!(p.a.eng.counters().tcp_rsts_sent, 0);
}

/// The peer's FIN in RDMA mode is reported at once (`PeerClosed`, as siw tells the CM
/// at `TCP_CLOSE_WAIT`), not when the close completes: here the peer vanishes after its
/// FIN (nothing more from it arrives), so our FIN is never acknowledged and the close
/// completes only by the close timeout. `Disconnected` still follows, once.
#[test]
fn a_peer_close_is_reported_at_once_even_if_the_peer_vanishes() {
    let mut cb = config(2);
    cb.llp_close_timeout_ms = 2_000;
    let mut p = Pair::with_configs(config(1), cb);
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    // A's frames reach B up to and including its FIN; then A is gone.
    let mut fin_sent = false;
    p.a_to_b = Box::new(move |f: &mut Vec<u8>| {
        if fin_sent {
            return false;
        }
        fin_sent = carries_fin(f);
        true
    });
    p.a.eng.disconnect(p.now, qa).unwrap();
    p.run(false);
    let eb = p.b.take_events();
    let peer_closed = eb
        .iter()
        .filter(|e| matches!(e, Event::PeerClosed { qp, .. } if *qp == qb))
        .count();
    assert_eq!(peer_closed, 1, "{eb:?}");
    assert_eq!(disconnects(&eb), 0, "the close is not complete: {eb:?}");
    assert_eq!(p.b.eng.rnic().query_qp(qb).unwrap().state, QpState::Closing);
    let conn =
        p.b.eng
            .qp_conn(qb)
            .expect("still attached until the close completes");
    assert_eq!(
        p.b.eng.conn(conn).unwrap().tcp.state(),
        iwarp_tcp::TcpState::LastAck,
        "our FIN is out"
    );
    // The close ends without A: Disconnected once, no second PeerClosed.
    p.run_until(|p| p.b.eng.qp_conn(qb).is_none());
    let eb = p.b.take_events();
    assert_eq!(disconnects(&eb), 1, "{eb:?}");
    assert!(
        !eb.iter().any(|e| matches!(e, Event::PeerClosed { .. })),
        "{eb:?}"
    );
}
