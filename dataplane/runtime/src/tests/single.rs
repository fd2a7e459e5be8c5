//! One core per side, single-threaded, manual clock.

use iwarp_engine::Event;
use iwarp_types::{Memory, RecvWr, SendOp, SgList, Sge, WcOpcode, WcStatus};
use iwarp_wire::pcap::{PcapReader, TsResolution};

use super::frames::echo_request;
use super::helpers::*;
use crate::capture::CaptureWriter;
use crate::control::{AppBox, AppId, ControlError, Op};
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
    listen_all(&mut tb, Which::B);
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
    post_send(&mut tb, Which::A, 0, c.a.qp, w).unwrap();
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
    post_recv(&mut tb, Which::B, 0, c.b.qp, recv).unwrap();
    let s = wr(3, SendOp::Send, 32 * 1024, 8 * 1024, c.a.mr);
    post_send(&mut tb, Which::A, 0, c.a.qp, s).unwrap();
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
    post_send(&mut tb, Which::A, 0, c.a.qp, r).unwrap();
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
    // The core's vocabulary: a command for a port it does not have, an app it does not
    // host.
    tb.a.handles[0]
        .send(5, Op::StartApp(AppBox(Box::new(idle_app()))))
        .unwrap();
    tb.step();
    let r = tb.a.handles[0].poll_reply().unwrap();
    assert_eq!(r.result.unwrap_err(), ControlError::NoSuchPort);
    assert_eq!(
        tb.call(Which::A, 0, Op::StopApp(AppId(4242))).unwrap_err(),
        ControlError::NoSuchApp
    );
    // Verbs and CM refuse through the engine's API, which apps call.
    let (destroy, region, connect) = tb.exec(Which::A, 0, |cx| {
        let destroy = cx.engine.rnic_mut().destroy_qp(iwarp_types::QpId(99));
        let pd = cx.engine.rnic_mut().alloc_pd().unwrap();
        let mut attr = mr_attr(pd, 16);
        attr.region = iwarp_types::RegionId(7);
        let len = cx.mem.region_len(attr.region);
        let region = cx.engine.rnic_mut().reg_mr(&attr, len);
        let connect = cx.connect(
            iwarp_types::QpId(12345),
            core::net::SocketAddrV4::new(IP_B, PORT),
            Default::default(),
        );
        (destroy, region, connect)
    });
    assert!(destroy.is_err());
    assert!(
        region.is_err(),
        "an MR over a region the core does not have"
    );
    assert!(connect.is_err(), "CM refuses an unknown QP");
}

#[test]
fn a_connect_request_no_app_takes_is_rejected() {
    let mut tb = testbed(false);
    // B listens without telling its console: no app takes the request.
    tb.exec(Which::B, 0, |cx| cx.engine.listen(PORT, 8))
        .unwrap();
    let a = verbs(&mut tb, Which::A, 0, 4096);
    start_connect(&mut tb, 0, a.qp).unwrap();
    let (_, ev) = tb.wait_event(Which::A, |e| {
        matches!(e, Event::Rejected { .. } | Event::ConnectFailed { .. })
    });
    assert!(matches!(ev, Event::Rejected { .. }), "{ev:?}");
    let s = tb.b.cores[0].final_snapshot(tb.clock.now());
    assert!(s.core.events_unclaimed >= 1, "{s}");
}

#[test]
fn reject_answers_the_peer_with_its_private_data() {
    let mut tb = testbed(false);
    listen_all(&mut tb, Which::B);
    let a = verbs(&mut tb, Which::A, 0, 4096);
    start_connect(&mut tb, 0, a.qp).unwrap();
    let (_, req) = tb.wait_event(Which::B, |e| matches!(e, Event::ConnectRequest { .. }));
    let Event::ConnectRequest { conn, .. } = req else {
        unreachable!()
    };
    tb.exec(Which::B, 0, move |cx| {
        let pd = iwarp_engine::PrivateData::new(b"no").unwrap();
        cx.engine.reject(cx.now, conn, pd)
    })
    .unwrap();
    let (_, ev) = tb.wait_event(Which::A, |e| matches!(e, Event::Rejected { .. }));
    let Event::Rejected { private_data, .. } = ev else {
        unreachable!()
    };
    assert_eq!(private_data.as_slice(), b"no");
}
