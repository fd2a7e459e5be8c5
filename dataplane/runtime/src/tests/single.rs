//! One core per side, single-threaded, manual clock.

use iwarp_engine::Event;
use iwarp_types::{RecvWr, SendOp, SgList, Sge, WcOpcode, WcStatus};
use iwarp_wire::pcap::{PcapReader, TsResolution};

use super::frames::echo_request;
use super::helpers::*;
use crate::capture::CaptureWriter;
use crate::control::{ControlError, Done, Op};
use crate::testutil::{Testbed, TestbedConfig, Which, ARENA, IP_A, IP_B};

const ARENA_LEN: usize = 1 << 20;

fn testbed(capture: bool) -> Testbed {
    let cfg = TestbedConfig {
        arena_bytes: ARENA_LEN,
        capture: capture.then_some((8192, 2048)),
        ..TestbedConfig::default()
    };
    Testbed::new(&cfg).unwrap()
}

#[test]
fn write_read_send_move_the_right_bytes_and_everything_is_captured() {
    let mut tb = testbed(true);
    let out = SharedBuf::default();
    let cap = tb.a.capture.clone().unwrap();
    let writer = CaptureWriter::spawn(&cap, out.clone(), TsResolution::Nanos).unwrap();

    let src = pattern(64 * 1024, 7);
    tb.a.cores[0].mem_mut().arena_mut(ARENA)[..src.len()].copy_from_slice(&src);
    tb.call(
        Which::B,
        0,
        Op::Listen {
            port: PORT,
            backlog: 8,
        },
    )
    .unwrap();
    let a = verbs(&mut tb, Which::A, 0, ARENA_LEN as u64);
    let c = connect(&mut tb, 0, a, ARENA_LEN as u64);

    // WRITE 32 KiB: A[0..32K] -> B[0..32K].
    let w = wr(
        1,
        SendOp::Write {
            remote_to: 0,
            rkey: c.b.mr,
        },
        0,
        32 * 1024,
        c.a.mr,
    );
    tb.call(Which::A, 0, Op::PostSend { qp: c.a.qp, wr: w })
        .unwrap();
    let cqe = wait_cqe(&mut tb, Which::A, 0, c.a.cq);
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (1, WcStatus::Success, WcOpcode::Write)
    );
    assert_eq!(
        &tb.b.cores[0].mem().arena(ARENA)[..32 * 1024],
        &src[..32 * 1024]
    );

    // SEND 8 KiB: A[32K..40K] -> B's receive buffer at 64K.
    let recv = RecvWr {
        wr_id: 2,
        sgl: SgList::single(Sge {
            addr: 64 * 1024,
            length: 16 * 1024,
            lkey: c.b.mr,
        }),
    };
    tb.call(
        Which::B,
        0,
        Op::PostRecv {
            qp: c.b.qp,
            wr: recv,
        },
    )
    .unwrap();
    let s = wr(3, SendOp::Send, 32 * 1024, 8 * 1024, c.a.mr);
    tb.call(Which::A, 0, Op::PostSend { qp: c.a.qp, wr: s })
        .unwrap();
    let rc = wait_cqe(&mut tb, Which::B, 0, c.b.cq);
    assert_eq!(
        (rc.wr_id, rc.status, rc.byte_len),
        (2, WcStatus::Success, 8 * 1024)
    );
    assert_eq!(wait_cqe(&mut tb, Which::A, 0, c.a.cq).wr_id, 3);
    let b_mem = tb.b.cores[0].mem().arena(ARENA);
    assert_eq!(&b_mem[64 * 1024..72 * 1024], &src[32 * 1024..40 * 1024]);

    // READ 32 KiB: B[0..32K] -> A[128K..160K].
    let r = wr(
        4,
        SendOp::Read {
            remote_to: 0,
            rkey: c.b.mr,
            invalidate_local: false,
        },
        128 * 1024,
        32 * 1024,
        c.a.mr,
    );
    tb.call(Which::A, 0, Op::PostSend { qp: c.a.qp, wr: r })
        .unwrap();
    let cqe = wait_cqe(&mut tb, Which::A, 0, c.a.cq);
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (4, WcStatus::Success, WcOpcode::Read)
    );
    let a_mem = tb.a.cores[0].mem().arena(ARENA);
    assert_eq!(&a_mem[128 * 1024..160 * 1024], &src[..32 * 1024]);

    // ARP was resolved through the loop: A asked, B answered.
    let now = tb.clock.now();
    let sa = tb.a.cores[0].final_snapshot(now);
    let sb = tb.b.cores[0].final_snapshot(now);
    let (ta, tbt) = (sa.total(), sb.total());
    assert!(
        ta.c.arp_requests_out >= 1 && ta.c.arp_replies_in >= 1,
        "{sa}"
    );
    assert!(tbt.c.arp_requests_in >= 1, "{sb}");
    assert_eq!(ta.c.conns_established, 1);
    assert_eq!(ta.c.qps_rts, 1);
    assert_eq!(ta.c.frames_tx, tbt.c.frames_rx, "lossless link");
    assert_eq!(ta.c.tcp_retransmissions, 0);
    assert!(sa.core.busy_iterations > 0 && sa.core.iterations >= sa.core.busy_iterations);

    // Everything A sent and received is in the capture, readable by PcapReader.
    let summary = writer.finish().unwrap();
    let sa = tb.a.cores[0].final_snapshot(tb.clock.now());
    let ta = sa.total();
    assert_eq!(sa.core.capture_drops, 0);
    assert_eq!(summary.frames, ta.c.frames_rx + ta.c.frames_tx);
    assert_eq!(sa.core.captured, summary.frames);
    let bytes = out.0.lock().unwrap().clone();
    let recs = PcapReader::new(&bytes)
        .unwrap()
        .collect::<Result<Vec<_>, _>>();
    let n = recs.unwrap().len() as u64;
    assert_eq!(n, summary.frames);
}

#[test]
fn a_ping_is_answered_and_the_reply_captured() {
    let mut tb = testbed(true);
    let out = SharedBuf::default();
    let cap = tb.a.capture.clone().unwrap();
    let writer = CaptureWriter::spawn(&cap, out.clone(), TsResolution::Micros).unwrap();
    let mac_a = tb.a.cores[0].engine(0).unwrap().config().mac;
    let mac_b = tb.b.cores[0].engine(0).unwrap().config().mac;
    let ping = echo_request(mac_a, mac_b, IP_B.octets(), IP_A.octets(), 0x77, 1);
    assert!(tb.a.injectors[0].inject(&ping));
    tb.run_until(100, |tb| {
        let s = tb.a.cores[0].final_snapshot(tb.clock.now());
        s.total().c.icmp_echo_replies == 1 && s.total().c.frames_tx >= 1
    });
    let s = tb.a.cores[0].final_snapshot(tb.clock.now());
    assert_eq!(s.total().c.icmp_echo_replies, 1, "{s}");
    writer.finish().unwrap();
    let bytes = out.0.lock().unwrap().clone();
    let recs: Vec<_> = PcapReader::new(&bytes)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(recs[0].data, &ping[..], "the request, as received");
    let reply = recs
        .iter()
        .find(|r| r.data.len() >= 42 && r.data[23] == 1 && r.data[34] == 0)
        .expect("an echo reply was sent");
    assert_eq!(&reply.data[0..6], &mac_b);
    assert_eq!(&reply.data[26..30], &IP_A.octets());
    assert_eq!(&reply.data[30..34], &IP_B.octets());
    assert_eq!(&reply.data[38..40], &0x77u16.to_be_bytes());
}

#[test]
fn bad_commands_get_errors_not_panics() {
    let mut tb = testbed(false);
    let bad = tb.call(Which::A, 0, Op::DestroyQp(iwarp_types::QpId(99)));
    assert!(matches!(bad, Err(ControlError::Verb(_))));
    let Done::Pd(pd) = tb.call(Which::A, 0, Op::AllocPd).unwrap() else {
        panic!()
    };
    let mut attr = mr_attr(pd, 16);
    attr.region = iwarp_types::RegionId(7);
    assert_eq!(
        tb.call(Which::A, 0, Op::RegMr(attr)).unwrap_err(),
        ControlError::NoSuchRegion
    );
    let h = &mut tb.a.handles[0];
    h.send(5, Op::AllocPd).unwrap();
    tb.step();
    let r = tb.a.handles[0].poll_reply().unwrap();
    assert_eq!(r.result.unwrap_err(), ControlError::NoSuchPort);
    let poll = Op::PollCq {
        cq: iwarp_types::CqId(1),
        max: 100,
    };
    assert_eq!(
        tb.call(Which::A, 0, poll).unwrap_err(),
        ControlError::BadBatch
    );
    // Connecting an unknown QP is refused by CM.
    let op = Op::Connect {
        qp: iwarp_types::QpId(12345),
        remote: core::net::SocketAddrV4::new(IP_B, PORT),
        params: Default::default(),
    };
    assert!(matches!(tb.call(Which::A, 0, op), Err(ControlError::Cm(_))));
}

#[test]
fn a_connect_request_nobody_takes_is_a_notice_and_reject_works() {
    let mut tb = testbed(false);
    tb.call(
        Which::B,
        0,
        Op::Listen {
            port: PORT,
            backlog: 8,
        },
    )
    .unwrap();
    let a = verbs(&mut tb, Which::A, 0, 4096);
    let op = Op::Connect {
        qp: a.qp,
        remote: core::net::SocketAddrV4::new(IP_B, PORT),
        params: Default::default(),
    };
    tb.call(Which::A, 0, op).unwrap();
    let req = wait_notice(&mut tb, Which::B, |n| {
        matches!(n.event, Event::ConnectRequest { .. })
    });
    let Event::ConnectRequest { conn, .. } = req.event else {
        unreachable!()
    };
    let op = Op::Reject {
        conn,
        private_data: iwarp_engine::PrivateData::new(b"no").unwrap(),
    };
    tb.call(Which::B, 0, op).unwrap();
    let n = wait_notice(&mut tb, Which::A, |n| {
        matches!(n.event, Event::Rejected { .. })
    });
    let Event::Rejected { private_data, .. } = n.event else {
        unreachable!()
    };
    assert_eq!(private_data.as_slice(), b"no");
}
