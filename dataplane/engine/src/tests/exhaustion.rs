//! A full connection table (issue 15 item 6): SYNs beyond it are dropped and counted,
//! the initiator's retransmissions wait, and a connection that closes makes room; an
//! active open on a full table is refused at once and sends nothing.

use iwarp_types::{ConnId, QpId};

use super::b2b::{B_IP, PORT};
use super::harness::{config, Node, Pair};
use crate::counters::DropReason;
use crate::{AcceptParams, CmError, ConnectParams, Event};

fn new_qp(n: &mut Node) -> QpId {
    let attr = n.eng.rnic().query_qp(n.qp).unwrap().attr;
    n.eng.rnic_mut().create_qp(&attr).unwrap().0
}

fn requests(events: Vec<Event>) -> Vec<ConnId> {
    events
        .into_iter()
        .filter_map(|e| match e {
            Event::ConnectRequest { conn, .. } => Some(conn),
            _ => None,
        })
        .collect()
}

fn established(events: &[Event]) -> Vec<QpId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Established { qp, .. } => Some(*qp),
            _ => None,
        })
        .collect()
}

#[test]
fn a_full_connection_table_drops_syns_and_makes_room_when_one_closes() {
    let mut b_cfg = config(2);
    b_cfg.max_conns = 2;
    let mut p = Pair::with_configs(config(1), b_cfg);
    p.b.eng.listen(PORT, 8).unwrap();
    let qps: Vec<QpId> = (0..3).map(|_| new_qp(&mut p.a)).collect();
    for &qp in &qps {
        p.a.eng
            .connect(p.now, qp, B_IP, PORT, ConnectParams::default())
            .unwrap();
    }
    p.run(false);
    let first = requests(p.b.take_events());
    assert_eq!(first.len(), 2, "B's table holds two");
    assert!(p.b.eng.counters().drops_of(DropReason::TcpBacklogFull) >= 1);
    for &c in &first {
        let qp = new_qp(&mut p.b);
        p.b.eng
            .accept(p.now, c, qp, AcceptParams::default())
            .unwrap();
    }
    p.run(false);
    let up = established(&p.a.take_events());
    assert_eq!(up.len(), 2);
    let waiting = *qps.iter().find(|q| !up.contains(q)).unwrap();
    assert!(p.a.eng.qp_conn(waiting).is_some(), "still trying");
    // One of the two closes; its slot on B frees when B's close completes, and the
    // waiting SYN's next retransmission gets in.
    p.a.eng.disconnect(p.now, up[0]).unwrap();
    let mut late = Vec::new();
    p.run_until(|p| {
        late.extend(requests(p.b.take_events()));
        !late.is_empty()
    });
    let qp = new_qp(&mut p.b);
    p.b.eng
        .accept(p.now, late[0], qp, AcceptParams::default())
        .unwrap();
    let mut now_up = Vec::new();
    p.run_until(|p| {
        now_up.extend(established(&p.a.take_events()));
        !now_up.is_empty()
    });
    assert_eq!(now_up, [waiting]);
    assert_eq!(p.b.eng.conn_count(), 2);
}

#[test]
fn an_active_open_on_a_full_table_is_refused_and_sends_nothing() {
    let mut a_cfg = config(1);
    a_cfg.max_conns = 1;
    let mut p = Pair::with_configs(a_cfg, config(2));
    p.b.eng.listen(PORT, 8).unwrap();
    let (q1, q2) = (new_qp(&mut p.a), new_qp(&mut p.a));
    p.a.eng
        .connect(p.now, q1, B_IP, PORT, ConnectParams::default())
        .unwrap();
    let r =
        p.a.eng
            .connect(p.now, q2, B_IP, PORT, ConnectParams::default());
    assert_eq!(r.err(), Some(CmError::TableFull), "{r:?}");
    assert_eq!(p.a.eng.qp_conn(q2), None);
    p.run(false);
    assert_eq!(requests(p.b.take_events()).len(), 1, "one SYN only");
}
