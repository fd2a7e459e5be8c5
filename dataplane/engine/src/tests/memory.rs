//! Memory per connection: an idle established connection holds no heap beyond its table
//! slot (TCP's storage is lazy, MPA's buffers are lent by the engine's pool only while
//! used), and a pool smaller than the busy connections makes them wait, never fail.

use iwarp_types::{ConnId, QpId, SendFlags, SendOp, SendWr, WcStatus};

use super::b2b::{pattern, sge, B_IP, PORT};
use super::harness::{config, Node, Pair};
use crate::{AcceptParams, ConnectParams, EngineConfig, Event};

/// Connections of the test.
const N: usize = 6;
/// Bytes of each WRITE: several FPDUs, so a ring is held over several round trips.
const WRITE_LEN: usize = 20_000;
/// The bound the test holds the idle connection to: its `Conn` slot (about 2.2 KB; it
/// was 4.8 KB with MPA's start-up buffers and the connect parameters inline) and no heap.
const IDLE_SLOT_BYTES_MAX: usize = 2_500;

/// One FPDU ring for everybody: connections take turns.
fn one_ring(last: u8) -> EngineConfig {
    let mut c = config(last);
    c.max_conns = N + 4;
    c.mpa_pool_rings = 1;
    c.mpa_pool_staging = 1;
    c
}

fn new_qp(n: &mut Node) -> QpId {
    let attr = n.eng.rnic().query_qp(n.qp).unwrap().attr;
    n.eng.rnic_mut().create_qp(&attr).unwrap().0
}

/// `N` connections established between A and B (A's ids and QPs, B's ids).
fn connect_all(p: &mut Pair) -> (Vec<ConnId>, Vec<QpId>, Vec<ConnId>) {
    p.b.eng.listen(PORT, N).unwrap();
    let mut ids = Vec::new();
    let mut qps = Vec::new();
    for _ in 0..N {
        let qp = new_qp(&mut p.a);
        ids.push(
            p.a.eng
                .connect(p.now, qp, B_IP, PORT, ConnectParams::default())
                .unwrap(),
        );
        qps.push(qp);
    }
    p.run(false);
    let mut b_ids = Vec::new();
    for ev in p.b.take_events() {
        if let Event::ConnectRequest { conn, .. } = ev {
            let qp = new_qp(&mut p.b);
            p.b.eng
                .accept(p.now, conn, qp, AcceptParams::default())
                .unwrap();
            b_ids.push(conn);
        }
    }
    assert_eq!(b_ids.len(), N);
    p.run(true);
    let up = p.a.take_events();
    let n = up
        .iter()
        .filter(|e| matches!(e, Event::Established { .. }))
        .count();
    assert_eq!(n, N, "{up:?}");
    p.b.take_events();
    (ids, qps, b_ids)
}

/// A signaled WRITE of `WRITE_LEN` bytes on A's `qp`, from and to connection `i`'s slot.
fn post_write(p: &mut Pair, qp: QpId, i: usize, wr_id: u64) {
    let off = (i * WRITE_LEN) as u64;
    let wr = SendWr {
        wr_id,
        op: SendOp::Write {
            remote_to: off,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, off, WRITE_LEN as u32),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qp, &wr).unwrap();
}

fn assert_idle(p: &Pair, a: &[ConnId], b: &[ConnId]) {
    for (node, ids) in [(&p.a, a), (&p.b, b)] {
        for &id in ids {
            assert_eq!(node.eng.conn_heap_bytes(id), Some(0), "{id:?}");
        }
        assert_eq!(node.eng.conns_heap_bytes(), 0);
        assert_eq!(node.eng.mpa_pool().rings_out(), 0);
        assert_eq!(node.eng.mpa_pool().staging_out(), 0);
        let slot = node.eng.config().conn_slot_bytes();
        assert!(slot <= IDLE_SLOT_BYTES_MAX, "{slot} bytes per slot");
    }
}

#[test]
fn an_idle_established_connection_holds_no_heap_before_and_after_traffic() {
    let mut p = Pair::with_configs(one_ring(1), one_ring(2));
    let (ids, qps, b_ids) = connect_all(&mut p);
    assert_idle(&p, &ids, &b_ids);

    // Every connection WRITEs at once through a pool of one ring: they take turns.
    let data = pattern(WRITE_LEN * N, 3);
    p.a.fill(0, &data);
    for (i, &qp) in qps.iter().enumerate() {
        post_write(&mut p, qp, i, i as u64);
    }
    let mut done = Vec::new();
    p.run_until(|p| {
        done.extend(p.a.completions());
        done.len() == N
    });
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    assert_eq!(p.b.bytes(0, data.len()), &data[..]);
    let pool = p.a.eng.mpa_pool().counters();
    assert!(pool.ring_waits > 0, "the connections waited: {pool:?}");
    assert_eq!(pool.rings_allocated, 1, "one ring, lent in turn: {pool:?}");

    // Quiet again: the ring is back in the pool, TCP released its storage.
    p.run(true);
    assert_idle(&p, &ids, &b_ids);
    assert!(p.a.eng.mpa_pool().heap_bytes() >= p.a.eng.config().mpa_ring_bytes());
}

#[test]
fn busy_connections_take_turns_on_the_pool_s_rings() {
    // Every connection keeps many WRITEs queued, far more FPDUs than one turn: without
    // turns the first to get the ring would keep it until its queue ran dry.
    const WRS: usize = 12;
    let mut p = Pair::with_configs(one_ring(1), one_ring(2));
    let (_ids, qps, _b_ids) = connect_all(&mut p);
    let data = pattern(WRITE_LEN * N, 5);
    p.a.fill(0, &data);
    for (i, &qp) in qps.iter().enumerate() {
        for k in 0..WRS {
            post_write(&mut p, qp, i, (i * WRS + k) as u64);
        }
    }
    assert!(
        WRS * WRITE_LEN / 1448 > 2 * usize::from(crate::conn_service::RING_TURN_FPDUS),
        "the test must need several turns per connection"
    );
    let mut done = Vec::new();
    p.run_until(|p| {
        done.extend(p.a.completions());
        done.len() == N * WRS
    });
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(p.b.bytes(0, data.len()), &data[..]);
    // By the time the first connection completed its last WRITE, every connection had
    // completed some of its own: they took turns.
    let first_finished = qps
        .iter()
        .map(|&qp| done.iter().rposition(|c| c.qp == qp).unwrap())
        .min()
        .unwrap();
    for &qp in &qps {
        let before = done[..first_finished].iter().filter(|c| c.qp == qp).count();
        assert!(
            before > 0,
            "{qp:?} completed nothing before another finished all"
        );
    }
    let pool = p.a.eng.mpa_pool().counters();
    assert_eq!(pool.rings_allocated, 1, "one ring, lent in turn: {pool:?}");
    p.run(true);
    assert_eq!(p.a.eng.mpa_pool().rings_out(), 0);
}
