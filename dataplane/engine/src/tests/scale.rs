//! Scaling: with 5,000 idle connections on one engine, `poll_timeout`, `poll_transmit`
//! and `handle_timeout` visit only the connections with work (counted by
//! `Counters::conn_visits`), never the idle ones.

use iwarp_types::{ConnId, Instant, QpId, SendFlags, SendOp, SendWr};

use super::b2b::{sge, B_IP, PORT};
use super::harness::{config, Node, Pair};
use crate::{AcceptParams, ConnectParams, EngineConfig, Event};

const N: usize = 5_000;

/// Room for `N` connections with small per-connection buffers.
fn big_table(last: u8) -> EngineConfig {
    let mut c = config(last);
    c.max_conns = N + 16;
    c.backlog_max = N;
    c.event_queue_len = 2 * N + 64;
    c.rnic.limits.max_qps = (N + 16) as u32;
    c.tcp.ooo_max_bytes = 2048;
    c.tcp.max_inflight_segments = 16;
    c.mpa.tx_queue_len = 8;
    c.mpa.rx_ulpdu_max_bytes = 2048;
    c
}

fn small_qp(n: &mut Node) -> QpId {
    let mut attr = n.eng.rnic().query_qp(n.qp).unwrap().attr;
    attr.sq_depth = 2;
    attr.rq_depth = 2;
    n.eng.rnic_mut().create_qp(&attr).unwrap().0
}

/// The earliest deadline computed the slow way, over the interface and every connection.
fn naive_deadline(p: &Pair, ids: &[ConnId]) -> Option<Instant> {
    ids.iter()
        .filter_map(|id| p.a.eng.conn(*id))
        .filter_map(|c| c.deadline())
        .chain(p.a.eng.core.iface.poll_timeout())
        .min()
}

fn visits(n: &mut Node) -> u64 {
    n.eng.counters().conn_visits
}

#[test]
fn idle_connections_cost_nothing_per_call() {
    let mut p = Pair::with_configs(big_table(1), big_table(2));
    p.b.eng.listen(PORT, N).unwrap();
    let mut ids = Vec::with_capacity(N);
    let mut qps = Vec::with_capacity(N);
    for _ in 0..N {
        let qp = small_qp(&mut p.a);
        let id =
            p.a.eng
                .connect(p.now, qp, B_IP, PORT, ConnectParams::default())
                .unwrap();
        ids.push(id);
        qps.push(qp);
    }
    p.run(false);
    let requests: Vec<ConnId> =
        p.b.take_events()
            .iter()
            .filter_map(|e| match e {
                Event::ConnectRequest { conn, .. } => Some(*conn),
                _ => None,
            })
            .collect();
    assert_eq!(requests.len(), N);
    for conn in requests {
        let qp = small_qp(&mut p.b);
        p.b.eng
            .accept(p.now, conn, qp, AcceptParams::default())
            .unwrap();
    }
    p.run(true);
    let established =
        p.a.take_events()
            .iter()
            .filter(|e| matches!(e, Event::Established { .. }))
            .count();
    assert_eq!(established, N);
    assert_eq!(p.a.eng.conn_count(), N);
    p.b.take_events();

    // Idle: the heap's answer is the slow answer, and no call visits a connection.
    assert_eq!(p.a.eng.poll_timeout(), naive_deadline(&p, &ids));
    let before = visits(&mut p.a);
    let mut buf = [0u8; 1514];
    for _ in 0..1_000 {
        assert_eq!(p.a.eng.poll_transmit(p.now, &mut buf, &p.a.mem), None);
        let _ = p.a.eng.poll_timeout();
        p.a.eng.handle_timeout(p.now, &mut p.a.mem);
    }
    assert_eq!(visits(&mut p.a), before, "idle calls visit no connection");

    // Work on one connection visits that connection (a few times), not the others.
    let k = N / 2;
    p.a.fill(0, &[7; 4000]);
    let write = SendWr {
        wr_id: 9,
        op: SendOp::Write {
            remote_to: 0,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 0, 4000),
        flags: SendFlags::SIGNALED,
    };
    let before = visits(&mut p.a);
    p.a.eng.post_send(qps[k], &write).unwrap();
    let mut done = false;
    p.run_until(|p| {
        done |= p.a.completions().iter().any(|c| c.wr_id == 9);
        done
    });
    let spent = visits(&mut p.a) - before;
    assert!(
        spent < 100,
        "{spent} visits for one Write among {N} connections"
    );

    // Timers: the heap agrees with the slow answer, and handling the earliest deadline
    // visits the connections due then only.
    assert_eq!(p.a.eng.poll_timeout(), naive_deadline(&p, &ids));
    if let Some(due) = p.a.eng.poll_timeout() {
        let before = visits(&mut p.a);
        p.a.eng.handle_timeout(due, &mut p.a.mem);
        assert!(visits(&mut p.a) - before <= 2);
        assert_eq!(p.a.eng.poll_timeout(), naive_deadline(&p, &ids));
    }
}
