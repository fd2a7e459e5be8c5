//! Receives on a QP's RQ and on a shared receive queue, with the SRQ limit event; an SRQ
//! shared by two connections.

use iwarp_engine::Event;
use iwarp_rdma::srq::SrqModify;
use iwarp_sim::host::{connect, make_side, ConnectSpec, Pair, PairOptions};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{
    AsyncEventKind, Duration, EventResource, RecvWr, SendFlags, SendOp, SendWr, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(10);

fn limit_events(p: &Pair, host: usize) -> usize {
    p.sim
        .events(host)
        .iter()
        .filter(|e| matches!(e, Event::Async(a) if a.kind == AsyncEventKind::SrqLimitReached))
        .count()
}

#[test]
fn srq_receives_in_order_and_fires_the_limit_once() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "srq_receives_in_order_and_fires_the_limit_once");
    let mut p = Pair::new(
        seed,
        PairOptions {
            srq: Some((16, 4)),
            ..PairOptions::default()
        },
    );
    let (a, b) = (p.a, p.b);
    let srq = b.srq.expect("srq");
    for i in 0..8u64 {
        p.host(b)
            .post_srq_recv(
                srq,
                &RecvWr {
                    wr_id: i,
                    sgl: b.sgl(i * 4096, 4096),
                },
            )
            .unwrap();
    }
    let mut sent = Vec::new();
    for i in 0..4u64 {
        sent.push(p.fill_random(a, (i * 4096) as usize, 1000 + i as usize));
        let wr = SendWr {
            wr_id: i,
            op: SendOp::Send,
            sgl: a.sgl(i * 4096, 1000 + i as u32),
            flags: SendFlags::SIGNALED,
        };
        p.host(a).post_send(a.qp, &wr).unwrap();
    }
    let cb = p.wait_cqes(b, 4, T);
    assert_eq!(
        limit_events(&p, 1),
        0,
        "8 - 4 = 4 posted: not below the limit yet"
    );
    // The fifth Send leaves 3 < 4: the one-shot event.
    sent.push(p.fill_random(a, 4 * 4096, 10));
    let wr = SendWr {
        wr_id: 4,
        op: SendOp::Send,
        sgl: a.sgl(4 * 4096, 10),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &wr).unwrap();
    p.sim.run_until(T, |s| {
        s.events(1)
            .iter()
            .any(|e| matches!(e, Event::Async(x) if x.kind == AsyncEventKind::SrqLimitReached))
    });
    let ev = p.sim.events(1).iter().find_map(|e| match e {
        Event::Async(x) if x.kind == AsyncEventKind::SrqLimitReached => Some(*x),
        _ => None,
    });
    assert_eq!(ev.map(|e| e.resource), Some(EventResource::Srq(srq)));
    let mut cb = [cb, p.wait_cqes(b, 1, T)].concat();
    // A sixth Send: no second event until re-armed.
    sent.push(p.fill_random(a, 5 * 4096, 20));
    let wr = SendWr {
        wr_id: 5,
        op: SendOp::Send,
        sgl: a.sgl(5 * 4096, 20),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &wr).unwrap();
    cb.extend(p.wait_cqes(b, 1, T));
    assert_eq!(limit_events(&p, 1), 1, "one shot");
    for (i, c) in cb.iter().enumerate() {
        assert_eq!(
            (c.wr_id, c.status, c.opcode, c.qp),
            (i as u64, WcStatus::Success, WcOpcode::Recv, b.qp),
            "{c:?}"
        );
        assert_eq!(p.bytes(b, i * 4096, sent[i].len()), &sent[i][..]);
    }
    // Re-arm with a limit of 2 (2 WRs posted now): the next take leaves 1 < 2 and fires.
    p.host(b)
        .engine
        .rnic_mut()
        .modify_srq(
            srq,
            SrqModify {
                limit: Some(2),
                arm: true,
                ..SrqModify::default()
            },
        )
        .unwrap();
    let wr = SendWr {
        wr_id: 6,
        op: SendOp::Send,
        sgl: a.sgl(0, 1),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &wr).unwrap();
    p.wait_cqes(b, 1, T);
    assert_eq!(limit_events(&p, 1), 2, "re-armed event fired: 1 posted < 2");
}

#[test]
fn one_srq_shared_by_two_connections() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "one_srq_shared_by_two_connections");
    let (mut sim, a1, b1) = Pair::unconnected(
        seed,
        PairOptions {
            srq: Some((32, 0)),
            ..PairOptions::default()
        },
    );
    let srq = b1.srq.expect("srq");
    // A second QP on host 1 using the same SRQ, and a second QP on host 0.
    let a2 = make_side(&mut sim, 0, 1 << 16, None, |_| {});
    let h1 = sim.node_mut(1);
    let mut attr = iwarp_sim::host::qp_attr(b1.pd, b1.cq);
    attr.srq = Some(srq);
    let qb2 = h1.create_qp(&attr);
    connect(&mut sim, 0, a1.qp, 1, b1.qp, &ConnectSpec::default());
    connect(&mut sim, 0, a2.qp, 1, qb2, &ConnectSpec::default());
    for i in 0..4u64 {
        sim.node_mut(1)
            .post_srq_recv(
                srq,
                &RecvWr {
                    wr_id: i,
                    sgl: b1.sgl(i * 4096, 4096),
                },
            )
            .unwrap();
    }
    let s = |side: &iwarp_sim::host::Side, id| SendWr {
        wr_id: id,
        op: SendOp::Send,
        sgl: side.sgl(0, 100),
        flags: SendFlags::SIGNALED,
    };
    sim.node_mut(0).post_send(a1.qp, &s(&a1, 1)).unwrap();
    sim.node_mut(0).post_send(a2.qp, &s(&a2, 2)).unwrap();
    sim.run_until(T, |s| s.node(1).cqe_count(b1.cq) == 2);
    let cb = sim.node_mut(1).take_cqes(b1.cq);
    let mut qps: Vec<_> = cb.iter().map(|c| c.qp).collect();
    qps.sort();
    let mut want = vec![b1.qp, qb2];
    want.sort();
    assert_eq!(qps, want, "each QP consumed one SRQ WR: {cb:?}");
    assert!(cb
        .iter()
        .all(|c| c.status == WcStatus::Success && c.byte_len == 100));
    let mut ids: Vec<u64> = cb.iter().map(|c| c.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![0, 1], "taken in FIFO order");
}
