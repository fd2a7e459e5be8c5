//! Two engines back to back: connect, MPA, Send / Write / Read with data verified,
//! graceful close; and the failure paths (reject, refused, abort).

use core::net::Ipv4Addr;

use iwarp_types::{
    QpId, QpState, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, WcOpcode, WcStatus,
};

use super::harness::{Node, Pair};
use crate::{AcceptParams, ConnectFailure, ConnectParams, Event, PrivateData};

pub(super) const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub(super) const PORT: u16 = 5000;

pub(super) fn pd(s: &[u8]) -> PrivateData {
    PrivateData::new(s).unwrap()
}

pub(super) fn sge(n: &Node, addr: u64, length: u32) -> SgList {
    SgList::single(Sge {
        addr,
        length,
        lkey: n.mr,
    })
}

pub(super) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Connects A to B's listener; returns the two connection ids.
pub(super) fn establish(p: &mut Pair) {
    p.b.eng.listen(PORT, 4).unwrap();
    let params = ConnectParams {
        private_data: pd(b"hello"),
        ..ConnectParams::default()
    };
    let qp_a = p.a.qp;
    p.a.eng.connect(p.now, qp_a, B_IP, PORT, params).unwrap();
    p.run(false);
    let req = p.b.take_events();
    let conn = match req.as_slice() {
        [Event::ConnectRequest {
            conn,
            local_port,
            private_data,
            remote,
            ..
        }] => {
            assert_eq!(*local_port, PORT);
            assert_eq!(private_data.as_slice(), b"hello");
            assert_eq!(*remote.ip(), Ipv4Addr::new(10, 0, 0, 1));
            *conn
        }
        other => panic!("expected one ConnectRequest, got {other:?}"),
    };
    let qp_b = p.b.qp;
    let accept = AcceptParams {
        private_data: pd(b"world"),
        ..AcceptParams::default()
    };
    p.b.eng.accept(p.now, conn, qp_b, accept).unwrap();
    p.run(false);
    let ea = p.a.take_events();
    assert!(
        matches!(ea.as_slice(), [Event::Established { qp, private_data, .. }]
            if *qp == qp_a && private_data.as_slice() == b"world"),
        "A: {ea:?}"
    );
    let eb = p.b.take_events();
    assert!(
        matches!(eb.as_slice(), [Event::Established { qp, .. }] if *qp == qp_b),
        "B: {eb:?}"
    );
    assert_eq!(p.a.eng.rnic().query_qp(qp_a).unwrap().state, QpState::Rts);
    assert_eq!(p.b.eng.rnic().query_qp(qp_b).unwrap().state, QpState::Rts);
}

#[test]
fn connect_send_write_read_close() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);

    // Send: 3000 bytes (three FPDUs at MSS 1460) into a posted receive.
    let data = pattern(3000, 7);
    p.a.fill(0, &data);
    let recv = RecvWr {
        wr_id: 100,
        sgl: sge(&p.b, 4096, 8192),
    };
    p.b.eng.post_recv(qb, &recv).unwrap();
    let send = SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sgl: sge(&p.a, 0, 3000),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qa, &send).unwrap();
    p.run(false);
    let cb = p.b.completions();
    assert_eq!(cb.len(), 1, "{cb:?}");
    assert_eq!(
        (cb[0].wr_id, cb[0].status, cb[0].opcode),
        (100, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(cb[0].byte_len, 3000);
    assert_eq!(p.b.bytes(4096, 3000), &data[..]);
    let ca = p.a.completions();
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert_eq!(
        (ca[0].wr_id, ca[0].status, ca[0].opcode),
        (1, WcStatus::Success, WcOpcode::Send)
    );

    // RDMA Write: 20000 bytes to B at offset 65536.
    let data = pattern(20_000, 3);
    p.a.fill(16_384, &data);
    let write = SendWr {
        wr_id: 2,
        op: SendOp::Write {
            remote_to: 65_536,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 16_384, 20_000),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qa, &write).unwrap();
    p.run(false);
    assert_eq!(p.b.bytes(65_536, 20_000), &data[..]);
    let ca = p.a.completions();
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert_eq!(
        (ca[0].wr_id, ca[0].status, ca[0].opcode),
        (2, WcStatus::Success, WcOpcode::Write)
    );
    assert!(p.b.completions().is_empty(), "a Write consumes no receive");

    // RDMA Read: 10000 bytes of B at 200000 into A at 300000.
    let data = pattern(10_000, 9);
    p.b.fill(200_000, &data);
    let read = SendWr {
        wr_id: 3,
        op: SendOp::Read {
            remote_to: 200_000,
            rkey: p.b.mr,
            invalidate_local: false,
        },
        sgl: sge(&p.a, 300_000, 10_000),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qa, &read).unwrap();
    p.run(false);
    assert_eq!(p.a.bytes(300_000, 10_000), &data[..]);
    let ca = p.a.completions();
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert_eq!(
        (ca[0].wr_id, ca[0].status, ca[0].opcode),
        (3, WcStatus::Success, WcOpcode::Read)
    );

    // Graceful close from A; both sides report Disconnected and forget the connection
    // (A after TIME-WAIT).
    p.a.eng.disconnect(p.now, qa).unwrap();
    p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);
    let ea = p.a.take_events();
    assert!(
        ea.iter()
            .any(|e| matches!(e, Event::Disconnected { qp, .. } if *qp == qa)),
        "{ea:?}"
    );
    let eb = p.b.take_events();
    assert!(
        eb.iter()
            .any(|e| matches!(e, Event::Disconnected { qp, .. } if *qp == qb)),
        "{eb:?}"
    );
    assert_ne!(p.a.eng.rnic().query_qp(qa).unwrap().state, QpState::Rts);
    let c = p.a.eng.counters().clone();
    assert_eq!(c.conns_established, 1);
    assert_eq!(c.conns_closed, 1);
    assert_eq!(c.tcp_checksum_errors, 0);
}

#[test]
fn reject_reaches_the_initiator() {
    let mut p = Pair::new();
    p.b.eng.listen(PORT, 4).unwrap();
    let qa = p.a.qp;
    let a_conn =
        p.a.eng
            .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
            .unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    p.b.eng.reject(p.now, conn, pd(b"no thanks")).unwrap();
    p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);
    let ea = p.a.take_events();
    assert!(
        matches!(ea.first(), Some(Event::Rejected { conn, private_data })
            if *conn == a_conn && private_data.as_slice() == b"no thanks"),
        "{ea:?}"
    );
    assert_eq!(
        p.a.eng.rnic().query_qp(qa).unwrap().state,
        QpState::Idle,
        "QP never left Idle"
    );
    // The backlog slot came back: a second connection is accepted.
    p.a.eng
        .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
        .unwrap();
    p.run(false);
    assert!(matches!(
        p.b.take_events().as_slice(),
        [Event::ConnectRequest { .. }]
    ));
}

#[test]
fn connect_to_closed_port_is_refused() {
    let mut p = Pair::new();
    let qa = p.a.qp;
    let conn =
        p.a.eng
            .connect(p.now, qa, B_IP, 7777, ConnectParams::default())
            .unwrap();
    p.run(false);
    assert_eq!(
        p.a.take_events(),
        vec![Event::ConnectFailed {
            conn,
            reason: ConnectFailure::Refused
        }]
    );
    assert_eq!(p.a.eng.conn_count(), 0);
    assert_eq!(p.b.eng.counters().tcp_rsts_sent, 1);
}

#[test]
fn abort_resets_both_sides() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    let recv = RecvWr {
        wr_id: 9,
        sgl: sge(&p.b, 0, 100),
    };
    p.b.eng.post_recv(qb, &recv).unwrap();
    let rsts_before = p.a.eng.counters().tcp_rsts_sent;
    p.a.eng.abort(p.now, qa).unwrap();
    p.run(false);
    assert_eq!(
        p.a.eng.counters().tcp_rsts_sent,
        rsts_before + 1,
        "the abort's RST is counted where it leaves"
    );
    assert_eq!(p.b.eng.counters().tcp_rsts_received, 1);
    assert_eq!(p.a.eng.conn_count(), 0);
    assert_eq!(p.b.eng.conn_count(), 0);
    assert!(p
        .a
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Disconnected { .. })));
    assert!(p
        .b
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Disconnected { .. })));
    assert_eq!(p.b.eng.rnic().query_qp(qb).unwrap().state, QpState::Error);
    let cb = p.b.completions();
    assert!(
        cb.iter()
            .any(|c| c.wr_id == 9 && c.status == WcStatus::Flushed),
        "{cb:?}"
    );
}

#[test]
fn peer_to_peer_rtr_lets_the_responder_send_first_after_it() {
    let mut p = Pair::new();
    p.b.eng.listen(PORT, 4).unwrap();
    let (qa, qb) = (p.a.qp, p.b.qp);
    let params = ConnectParams {
        p2p: true,
        ..ConnectParams::default()
    };
    p.a.eng.connect(p.now, qa, B_IP, PORT, params).unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest {
            conn, p2p: true, ..
        }] => *conn,
        other => panic!("{other:?}"),
    };
    p.b.eng
        .accept(p.now, conn, qb, AcceptParams::default())
        .unwrap();
    // The responder sends first (a Send to A), which is allowed once the RTR arrived.
    let recv = RecvWr {
        wr_id: 5,
        sgl: sge(&p.a, 0, 64),
    };
    p.a.eng.post_recv(qa, &recv).unwrap();
    p.b.fill(0, b"after the RTR");
    let send = SendWr {
        wr_id: 6,
        op: SendOp::Send,
        sgl: sge(&p.b, 0, 13),
        flags: SendFlags::SIGNALED,
    };
    p.b.eng.post_send(qb, &send).unwrap();
    p.run(false);
    let ca = p.a.completions();
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert_eq!(ca[0].byte_len, 13);
    assert_eq!(p.a.bytes(0, 13), b"after the RTR");
    // The Send completes once A's (delayed) ACK covers it.
    let mut cb = Vec::new();
    p.run_until(|p| {
        cb.extend(p.b.completions());
        !cb.is_empty()
    });
    assert_eq!((cb[0].wr_id, cb[0].status), (6, WcStatus::Success));
}

/// Is this an Ethernet/IPv4/TCP frame with payload? Returns the payload offset.
pub(super) fn tcp_payload_at(f: &[u8]) -> Option<usize> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return None;
    }
    let data_off = usize::from(f[46] >> 4) * 4;
    let at = 34 + data_off;
    (f.len() > at).then_some(at)
}

#[test]
fn lost_segments_are_retransmitted_from_registered_memory() {
    let mut p = Pair::new();
    establish(&mut p);
    let qa = p.a.qp;
    let mut n = 0u32;
    // Drop every 7th data segment from A to B.
    p.a_to_b = Box::new(move |f| {
        if tcp_payload_at(f).is_none() {
            return true;
        }
        n += 1;
        if n == 7 {
            n = 0;
            return false;
        }
        true
    });
    let data = pattern(64 * 1024, 5);
    p.a.fill(0, &data);
    let write = SendWr {
        wr_id: 77,
        op: SendOp::Write {
            remote_to: 131_072,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 0, 64 * 1024),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qa, &write).unwrap();
    let mut ca = Vec::new();
    p.run_until(|p| {
        ca.extend(p.a.completions());
        !ca.is_empty()
    });
    assert_eq!((ca[0].wr_id, ca[0].status), (77, WcStatus::Success));
    assert_eq!(p.b.bytes(131_072, 64 * 1024), &data[..]);
    assert!(p.a.eng.counters().tcp_retransmissions > 0);
}

#[test]
fn initiator_abort_before_accept_is_reported_to_both() {
    let mut p = Pair::new();
    p.b.eng.listen(PORT, 1).unwrap();
    let qa = p.a.qp;
    let a_conn =
        p.a.eng
            .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
            .unwrap();
    p.run(false);
    let b_conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    p.a.eng.abort(p.now, qa).unwrap();
    p.run(false);
    assert_eq!(
        p.a.take_events(),
        vec![Event::ConnectFailed {
            conn: a_conn,
            reason: ConnectFailure::Aborted
        }]
    );
    assert_eq!(
        p.b.take_events(),
        vec![Event::ConnectFailed {
            conn: b_conn,
            reason: ConnectFailure::Reset
        }]
    );
    let qb = p.b.qp;
    assert_eq!(
        p.b.eng.accept(p.now, b_conn, qb, AcceptParams::default()),
        Err(crate::CmError::InvalidConnection)
    );
    // The backlog slot (1) is free again and the QP can connect again.
    p.a.eng
        .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
        .unwrap();
    p.run(false);
    assert!(matches!(
        p.b.take_events().as_slice(),
        [Event::ConnectRequest { .. }]
    ));
}

/// A second QP on a node, like the harness's first.
pub(super) fn extra_qp(n: &mut Node) -> iwarp_types::QpId {
    let info = n.eng.rnic().query_qp(n.qp).unwrap();
    n.eng.rnic_mut().create_qp(&info.attr).unwrap().0
}

/// Two connections from A to B's listener: A's QPs `qa[i]` to B's `qb[i]` (A's default
/// QP is `qa[0]`, B's `qb[0]`), both established.
pub(super) fn establish_two(p: &mut Pair) -> ([QpId; 2], [QpId; 2]) {
    p.b.eng.listen(PORT, 4).unwrap();
    let qa = [p.a.qp, extra_qp(&mut p.a)];
    let qb = [p.b.qp, extra_qp(&mut p.b)];
    for (i, q) in qa.iter().enumerate() {
        let params = ConnectParams {
            private_data: pd(&[i as u8]),
            ..ConnectParams::default()
        };
        p.a.eng.connect(p.now, *q, B_IP, PORT, params).unwrap();
    }
    p.run(false);
    let reqs = p.b.take_events();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    for ev in reqs {
        let Event::ConnectRequest {
            conn, private_data, ..
        } = ev
        else {
            panic!("{ev:?}")
        };
        // Connection i goes to B's QP i.
        let i = usize::from(private_data.as_slice()[0]);
        p.b.eng
            .accept(p.now, conn, qb[i], AcceptParams::default())
            .unwrap();
    }
    p.run(false);
    assert_eq!(p.a.take_events().len(), 2);
    assert_eq!(p.b.take_events().len(), 2);
    assert_eq!(p.a.eng.conn_count(), 2);
    (qa, qb)
}

#[test]
fn two_connections_are_demultiplexed() {
    let mut p = Pair::new();
    let (qa, _) = establish_two(&mut p);
    // Interleaved Writes on both, to different places.
    for (i, q) in qa.iter().enumerate() {
        let data = pattern(5000, i as u8);
        p.a.fill(i * 8192, &data);
        let wr = SendWr {
            wr_id: i as u64,
            op: SendOp::Write {
                remote_to: 500_000 + i as u64 * 8192,
                rkey: p.b.mr,
            },
            sgl: sge(&p.a, (i * 8192) as u64, 5000),
            flags: SendFlags::SIGNALED,
        };
        p.a.eng.post_send(*q, &wr).unwrap();
    }
    let mut ca = Vec::new();
    p.run_until(|p| {
        ca.extend(p.a.completions());
        ca.len() == 2
    });
    for (i, q) in qa.iter().enumerate() {
        assert_eq!(
            p.b.bytes(500_000 + i * 8192, 5000),
            &pattern(5000, i as u8)[..]
        );
        let done = |c: &iwarp_types::Cqe| c.wr_id == i as u64 && c.qp == *q;
        assert!(ca.iter().any(|c| done(c) && c.status == WcStatus::Success));
    }
    let t0 = p.a.eng.conn(p.a.eng.qp_conn(qa[0]).unwrap()).unwrap().tuple;
    let t1 = p.a.eng.conn(p.a.eng.qp_conn(qa[1]).unwrap()).unwrap().tuple;
    assert_ne!(t0.local_port, t1.local_port);
}

#[test]
fn random_segments_on_a_live_connection_never_panic() {
    let mut p = Pair::new();
    establish(&mut p);
    let tuple =
        p.a.eng
            .conn(p.a.eng.qp_conn(p.a.qp).unwrap())
            .unwrap()
            .tuple;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let src = core::net::Ipv4Addr::new(10, 0, 0, 1);
    for i in 0..3_000 {
        let payload_len = (next() % 200) as usize;
        let mut f = vec![0u8; 54 + payload_len];
        crate::iface::emit_eth(
            &mut f,
            [0x02, 0, 0, 0, 0, 2],
            [0x02, 0, 0, 0, 0, 1],
            smoltcp::wire::EthernetProtocol::Ipv4,
        );
        let mut ip = smoltcp::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len((40 + payload_len) as u16);
        ip.set_hop_limit(64);
        ip.set_next_header(smoltcp::wire::IpProtocol::Tcp);
        ip.set_src_addr(src);
        ip.set_dst_addr(B_IP);
        ip.fill_checksum();
        for b in f[34..].iter_mut() {
            *b = next() as u8;
        }
        // Ports of the live connection most of the time; data offset sane half the time.
        if i % 4 != 0 {
            f[34..36].copy_from_slice(&tuple.local_port.to_be_bytes());
            f[36..38].copy_from_slice(&tuple.remote_port.to_be_bytes());
        }
        if i % 2 == 0 {
            f[46] = 0x50;
        }
        let mut t = smoltcp::wire::TcpPacket::new_unchecked(&mut f[34..]);
        if i % 8 != 0 {
            t.fill_checksum(&src.into(), &B_IP.into());
        }
        p.b.eng.handle_frame(p.now, &f, &mut p.b.mem);
        p.b.drain(p.now);
        p.b.frames_out.clear();
        p.b.events.clear();
    }
    let c = p.b.eng.counters().clone();
    assert!(c.tcp_checksum_errors > 0);
    assert!(c.drops_of(crate::DropReason::TcpMalformed) > 0);
}
