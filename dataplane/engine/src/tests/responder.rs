//! The MPA responder before the initiator's first FPDU (RFC 5044 7.1.2), and
//! peer-to-peer mode over MPA revision 1 (the initiator's zero-length Write RTR).

use std::cell::Cell;
use std::rc::Rc;

use iwarp_rdma::mem::{MrAttr, StagState};
use iwarp_types::{Access, RecvWr, SendFlags, SendOp, SendWr, SgList, Stag, WcOpcode, WcStatus};

use super::b2b::{establish, pattern, sge, tcp_payload_at, B_IP, PORT};
use super::harness::{config, Node, Pair};
use crate::{AcceptParams, ConnectParams, EngineConfig, Event};

/// Counts the frames B sends that carry TCP payload.
fn count_b_payload(p: &mut Pair) -> Rc<Cell<usize>> {
    let n = Rc::new(Cell::new(0));
    let seen = n.clone();
    p.b_to_a = Box::new(move |f: &mut Vec<u8>| {
        if tcp_payload_at(f).is_some() {
            seen.set(seen.get() + 1);
        }
        true
    });
    n
}

fn second_mr(n: &mut Node) -> Stag {
    let pd = n.eng.rnic().query_qp(n.qp).unwrap().attr.pd;
    let attr = MrAttr {
        pd,
        region: n.region,
        region_offset: 0,
        len: 4096,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE,
        key: 0x22,
        remote_access_flag: false,
    };
    n.eng
        .rnic_mut()
        .reg_mr(&attr, Some(super::harness::ARENA_LEN as u64))
        .unwrap()
}

#[test]
fn responder_completes_local_work_and_queues_fpdus_before_the_first_fpdu() {
    let mut p = Pair::new();
    establish(&mut p);
    let (qa, qb) = (p.a.qp, p.b.qp);
    let sent_by_b = count_b_payload(&mut p);

    // B (the responder) has heard no FPDU yet. A local-only WR completes at once.
    let mr = second_mr(&mut p.b);
    let inv = SendWr {
        wr_id: 1,
        op: SendOp::LocalInv { stag: mr },
        sgl: SgList::new(),
        flags: SendFlags::SIGNALED,
    };
    p.b.eng.post_send(qb, &inv).unwrap();
    // A Write bigger than MPA's ring queues (bounded) but stays off the wire.
    let data = pattern(600_000, 5);
    p.b.fill(0, &data);
    let write = SendWr {
        wr_id: 2,
        op: SendOp::Write {
            remote_to: 100_000,
            rkey: p.a.mr,
        },
        sgl: sge(&p.b, 0, 600_000),
        flags: SendFlags::SIGNALED,
    };
    p.b.eng.post_send(qb, &write).unwrap();
    p.run(false);
    let cb = p.b.completions();
    assert_eq!(cb.len(), 1, "{cb:?}");
    assert_eq!(
        (cb[0].wr_id, cb[0].status, cb[0].opcode),
        (1, WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(
        p.b.eng.rnic().query_mr(mr).unwrap().state,
        StagState::Invalid
    );
    assert_eq!(
        sent_by_b.get(),
        0,
        "no FPDU leaves before the initiator's first"
    );
    let conn_b = p.b.eng.qp_conn(qb).unwrap();
    let queued = p.b.eng.conn(conn_b).unwrap().mpa.tx_queued();
    assert!(queued > 0, "ULPDUs wait in MPA");
    assert!(
        queued <= p.b.eng.config().mpa.tx_queue_len,
        "{queued} FPDUs queued"
    );

    // A's first FPDU opens the gate: the Write lands, then completes.
    p.b.eng
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 3,
                sgl: sge(&p.b, 700_000, 64),
            },
        )
        .unwrap();
    p.a.fill(0, b"first");
    let send = SendWr {
        wr_id: 4,
        op: SendOp::Send,
        sgl: sge(&p.a, 0, 5),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(qa, &send).unwrap();
    let mut cb = Vec::new();
    p.run_until(|p| {
        cb.extend(p.b.completions());
        cb.iter().any(|c| c.wr_id == 2)
    });
    assert!(sent_by_b.get() > 0);
    assert_eq!(p.a.bytes(100_000, 600_000), &data[..]);
    assert!(cb
        .iter()
        .all(|c| c.status == WcStatus::Success && (c.wr_id == 2 || c.wr_id == 3)));
    assert_eq!(p.b.bytes(700_000, 5), b"first");
}

fn rev1(last: u8) -> EngineConfig {
    let mut c = config(last);
    c.mpa.revision = 1;
    c
}

/// Connects A (p2p) to B, B accepts; B then sends first. Returns A's Write messages
/// sent (the RTR) and the payload bytes of those Writes.
fn p2p_responder_sends_first(mut p: Pair) -> (u64, u64) {
    p.b.eng.listen(PORT, 4).unwrap();
    let (qa, qb) = (p.a.qp, p.b.qp);
    let params = ConnectParams {
        p2p: true,
        ..ConnectParams::default()
    };
    p.a.eng.connect(p.now, qa, B_IP, PORT, params).unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    p.b.eng
        .accept(p.now, conn, qb, AcceptParams::default())
        .unwrap();
    p.run(false);
    let neg = p.a.eng.conn(p.a.eng.qp_conn(qa).unwrap()).unwrap();
    assert_eq!(neg.mpa.negotiated().unwrap().revision, 1);
    p.a.eng
        .post_recv(
            qa,
            &RecvWr {
                wr_id: 1,
                sgl: sge(&p.a, 0, 64),
            },
        )
        .unwrap();
    p.b.fill(0, b"responder speaks first");
    let send = SendWr {
        wr_id: 2,
        op: SendOp::Send,
        sgl: sge(&p.b, 0, 22),
        flags: SendFlags::SIGNALED,
    };
    p.b.eng.post_send(qb, &send).unwrap();
    let mut ca = Vec::new();
    p.run_until(|p| {
        ca.extend(p.a.completions());
        !ca.is_empty()
    });
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::Success));
    assert_eq!(p.a.bytes(0, 22), b"responder speaks first");
    let c = p.a.eng.rnic().qp_counters(qa).unwrap();
    // Opcode 0 is RDMA Write.
    (c.msgs_out[0], c.bytes_out[0])
}

#[test]
fn mpa_v1_peer_to_peer_initiator_sends_a_zero_length_write_rtr() {
    let (writes, bytes) = p2p_responder_sends_first(Pair::with_configs(rev1(1), rev1(2)));
    assert_eq!((writes, bytes), (1, 0), "one zero-length Write: the RTR");
}

#[test]
fn revision_2_initiator_falls_back_to_the_v1_rtr_with_a_v1_responder() {
    let (writes, bytes) = p2p_responder_sends_first(Pair::with_configs(config(1), rev1(2)));
    assert_eq!((writes, bytes), (1, 0));
}

#[test]
fn mpa_v1_without_p2p_sends_no_rtr() {
    let mut p = Pair::with_configs(rev1(1), rev1(2));
    establish(&mut p);
    let c = p.a.eng.rnic().qp_counters(p.a.qp).unwrap();
    assert_eq!(c.msgs_out, [0; 8]);
}
