//! Every work request type between two client contexts on two daemons joined by memif,
//! through the client library: Send (one and two SGEs), Send with Solicited Event (waking
//! an epoll on the completion channel, while a plain Send does not), RDMA Write, RDMA
//! Read, Bind (type 2 window by WR) and the type 1 Bind verb; in a second test
//! Fast-Register, Send with Invalidate, Local Invalidate and Read with Invalidate Local. Every byte that landed is checked, and every
//! completion's opcode, status, length and wr_id.

use std::time::Duration;

use iwarp_apps::side::*;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];

#[test]
fn every_work_request_type_moves_verified_bytes() {
    if skip("every_work_request_type_moves_verified_bytes") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("wr");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (mut aqp, _aid, mut bqp, _bid) =
        connect(&mut a, A_IP, &mut b, 9400, b"B asks", b"A answers");
    let rkey = a.mr.rkey();
    let a_base = a.arena.addr(0);
    let a_va = move |off: usize| a_base + off as u64;

    // Send: 1000 bytes into A's receive at 64 KiB.
    a.post_recv(&mut aqp, 100, 65536, 4096);
    b.fill(0, 1000, 1);
    let sge = b.mr.sge(0, 1000).unwrap();
    let c = b.post_and_complete(&mut bqp, wr(1, SendOp::Send, &[sge]));
    check_cqe(&c, 1, WcOpcode::Send, WcStatus::Success);
    let r = a.poll_one();
    check_cqe(&r, 100, WcOpcode::Recv, WcStatus::Success);
    assert_eq!(
        (r.byte_len, r.qp.0, r.solicited, r.invalidated),
        (1000, aqp.qp_num(), false, None)
    );
    assert!(a.holds(65536, 1000, 1), "Send payload");

    // Two SGEs gathered into one Send.
    a.post_recv(&mut aqp, 101, 65536, 4096);
    b.fill(4096, 300, 2);
    b.fill(8192, 200, 3);
    let sges = [b.mr.sge(4096, 300).unwrap(), b.mr.sge(8192, 200).unwrap()];
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(2, SendOp::Send, &sges)),
        2,
        WcOpcode::Send,
        WcStatus::Success,
    );
    let r = a.poll_one();
    check_cqe(&r, 101, WcOpcode::Recv, WcStatus::Success);
    assert_eq!(r.byte_len, 500);
    let mut want = vec![0u8; 500];
    pattern(&mut want[..300], 2);
    pattern(&mut want[300..], 3);
    assert_eq!(
        &a.arena.as_slice()[65536..65536 + 500],
        &want[..],
        "gathered Send payload"
    );

    // Solicited-only notification: a plain Send does not wake A, a Send with SE does.
    a.cq.req_notify(true).unwrap();
    a.post_recv(&mut aqp, 102, 65536, 4096);
    a.post_recv(&mut aqp, 103, 69632, 4096);
    b.fill(0, 64, 4);
    let sge = b.mr.sge(0, 64).unwrap();
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(3, SendOp::Send, &[sge])),
        3,
        WcOpcode::Send,
        WcStatus::Success,
    );
    let r = a.poll_one();
    check_cqe(&r, 102, WcOpcode::Recv, WcStatus::Success);
    assert!(!r.solicited);
    assert!(
        !epoll_readable(&a.chan, Duration::from_millis(300)),
        "a plain Send fired a solicited-only notification"
    );
    b.fill(0, 64, 5);
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(4, SendOp::SendSe, &[sge])),
        4,
        WcOpcode::SendSe,
        WcStatus::Success,
    );
    assert!(
        epoll_readable(&a.chan, WAIT),
        "Send with SE did not wake the completion channel"
    );
    assert_eq!(a.chan.get_cq_event().unwrap(), a.cq.handle());
    a.chan.ack_cq_events(1);
    let r = a.poll_one();
    check_cqe(&r, 103, WcOpcode::Recv, WcStatus::Success);
    assert!(r.solicited, "the SE flag reaches the receive completion");
    assert_eq!(r.byte_len, 64);
    assert!(a.holds(69632, 64, 5));

    // Next-completion notification: any completion wakes.
    a.cq.req_notify(false).unwrap();
    a.post_recv(&mut aqp, 104, 65536, 4096);
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(5, SendOp::Send, &[sge])),
        5,
        WcOpcode::Send,
        WcStatus::Success,
    );
    assert!(
        epoll_readable(&a.chan, WAIT),
        "req_notify(next) did not wake"
    );
    assert_eq!(a.chan.get_cq_event().unwrap(), a.cq.handle());
    a.chan.ack_cq_events(1);
    check_cqe(&a.poll_one(), 104, WcOpcode::Recv, WcStatus::Success);
    assert!(a.cq.events() >= 2);

    // RDMA Write: 64 KiB at A's 128 KiB.
    b.fill(0, 65536, 6);
    let sge = b.mr.sge(0, 65536).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(
            6,
            SendOp::Write {
                remote_to: a_va(131072),
                rkey,
            },
            &[sge],
        ),
    );
    check_cqe(&c, 6, WcOpcode::Write, WcStatus::Success);
    assert!(a.wait_holds(131072, 65536, 6), "Write payload");

    // RDMA Read: 32 KiB of A's 256 KiB into B's 512 KiB.
    a.fill(262144, 32768, 7);
    let sge = b.mr.sge(524288, 32768).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(
            7,
            SendOp::Read {
                remote_to: a_va(262144),
                rkey,
                invalidate_local: false,
            },
            &[sge],
        ),
    );
    check_cqe(&c, 7, WcOpcode::Read, WcStatus::Success);
    assert!(b.holds(524288, 32768, 7), "Read payload");

    // Bind WR: a type 2 window over A's 448 KiB..452 KiB; B writes through it.
    let mw2 = a.pd.alloc_mw(MwKind::Type2).unwrap();
    let mw_off = 458752;
    let bind = mw2.bind_op(
        0x31,
        &a.mr,
        a_va(mw_off),
        4096,
        Access::REMOTE_WRITE | Access::REMOTE_READ,
        false,
    );
    check_cqe(
        &a.post_and_complete(&mut aqp, wr(15, bind, &[])),
        15,
        WcOpcode::Bind,
        WcStatus::Success,
    );
    let mw2_rkey = mw2.rkey().with_key(0x31);
    b.fill(0, 4096, 10);
    let sge = b.mr.sge(0, 4096).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(
            16,
            SendOp::Write {
                remote_to: a_va(mw_off),
                rkey: mw2_rkey,
            },
            &[sge],
        ),
    );
    check_cqe(&c, 16, WcOpcode::Write, WcStatus::Success);
    assert!(
        a.wait_holds(mw_off, 4096, 10),
        "Write through the type 2 window"
    );

    // Everything deallocates cleanly.
    mw2.dealloc().unwrap();
    aqp.destroy().unwrap();
    bqp.destroy().unwrap();
}

/// Fast-Register, Send with Invalidate, Local Invalidate and Read with Invalidate Local
/// (they all need a fast-registered STag).
#[test]
fn fast_register_and_invalidations_move_verified_bytes() {
    if skip("fast_register_and_invalidations_move_verified_bytes") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("fr");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (mut aqp, _aid, mut bqp, _bid) =
        connect(&mut a, A_IP, &mut b, 9401, b"B asks", b"A answers");
    let rkey = a.mr.rkey();
    let a_base = a.arena.addr(0);
    let a_va = move |off: usize| a_base + off as u64;

    // Fast-Register on A (key 0x11) over A's 384 KiB..392 KiB; B writes through it.
    let frmr = a.pd.alloc_mr(16).unwrap();
    let fr_off = 393216;
    // Remote Read needs Local Read, Remote Write needs Local Write (verbs 7.2.4).
    let access =
        Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let fr = frmr
        .fast_reg_wr(8, 0x11, &a.arena, fr_off, 8192, access)
        .unwrap();
    check_cqe(
        &a.post_and_complete(&mut aqp, fr),
        8,
        WcOpcode::FastReg,
        WcStatus::Success,
    );
    let fr_stag = frmr.stag().with_key(0x11);
    b.fill(0, 8192, 8);
    let sge = b.mr.sge(0, 8192).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(
            9,
            SendOp::Write {
                remote_to: a_va(fr_off),
                rkey: fr_stag,
            },
            &[sge],
        ),
    );
    check_cqe(&c, 9, WcOpcode::Write, WcStatus::Success);
    assert!(
        a.wait_holds(fr_off, 8192, 8),
        "Write through the fast-registered STag"
    );

    // Send with Invalidate of that STag: A's receive reports it.
    a.post_recv(&mut aqp, 105, 65536, 4096);
    let sge = b.mr.sge(0, 32).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(10, SendOp::SendInv { inv_stag: fr_stag }, &[sge]),
    );
    check_cqe(&c, 10, WcOpcode::SendInv, WcStatus::Success);
    let r = a.poll_one();
    check_cqe(&r, 105, WcOpcode::Recv, WcStatus::Success);
    assert_eq!((r.byte_len, r.invalidated), (32, Some(fr_stag)), "{r:?}");

    // Fast-Register again (key 0x12), then Local Invalidate on A.
    let fr = frmr
        .fast_reg_wr(11, 0x12, &a.arena, fr_off, 4096, access)
        .unwrap();
    check_cqe(
        &a.post_and_complete(&mut aqp, fr),
        11,
        WcOpcode::FastReg,
        WcStatus::Success,
    );
    let li = wr(
        12,
        SendOp::LocalInv {
            stag: frmr.stag().with_key(0x12),
        },
        &[],
    );
    check_cqe(
        &a.post_and_complete(&mut aqp, li),
        12,
        WcOpcode::LocalInv,
        WcStatus::Success,
    );

    // Read with Invalidate Local: B reads into a fast-registered sink that the Read
    // invalidates.
    let bfr = b.pd.alloc_mr(4).unwrap();
    let sink = 655360;
    // A Read sink needs Remote Write in iWARP (the response is placed like a Write).
    let fr = bfr
        .fast_reg_wr(
            13,
            0x21,
            &b.arena,
            sink,
            4096,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    check_cqe(
        &b.post_and_complete(&mut bqp, fr),
        13,
        WcOpcode::FastReg,
        WcStatus::Success,
    );
    a.fill(262144, 4096, 9);
    let sink_sge = Sge {
        addr: b.arena.addr(sink),
        length: 4096,
        lkey: bfr.stag().with_key(0x21),
    };
    let rd = wr(
        14,
        SendOp::Read {
            remote_to: a_va(262144),
            rkey,
            invalidate_local: true,
        },
        &[sink_sge],
    );
    let c = b.post_and_complete(&mut bqp, rd);
    check_cqe(&c, 14, WcOpcode::ReadInv, WcStatus::Success);
    assert!(b.holds(sink, 4096, 9), "Read with Invalidate Local payload");

    frmr.dealloc().unwrap();
    bfr.dealloc().unwrap();
    aqp.destroy().unwrap();
    bqp.destroy().unwrap();
}

/// The type 1 Bind verb: a window over A's memory that B reads through.
#[test]
fn type1_window_bound_by_verb_exposes_verified_bytes() {
    if skip("type1_window_bound_by_verb_exposes_verified_bytes") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("mw1");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, _aid, mut bqp, _bid) = connect(&mut a, A_IP, &mut b, 9402, b"B asks", b"A answers");
    let a_base = a.arena.addr(0);
    let a_va = move |off: usize| a_base + off as u64;
    // Bind verb: a type 1 window over A's 480 KiB..484 KiB, zero-based; B reads it.
    let mut mw1 = a.pd.alloc_mw(MwKind::Type1).unwrap();
    let mw1_off = 491520;
    mw1.bind(&a.mr, a_va(mw1_off), 4096, Access::REMOTE_READ, true)
        .unwrap();
    a.fill(mw1_off, 4096, 11);
    let sge = b.mr.sge(0, 4096).unwrap();
    let c = b.post_and_complete(
        &mut bqp,
        wr(
            17,
            SendOp::Read {
                remote_to: 0,
                rkey: mw1.rkey(),
                invalidate_local: false,
            },
            &[sge],
        ),
    );
    check_cqe(&c, 17, WcOpcode::Read, WcStatus::Success);
    assert!(b.holds(0, 4096, 11), "Read through the type 1 window");

    assert!(a.mr.query().unwrap().windows_bound >= 1);
    mw1.dealloc().unwrap();
}

/// An RDMA Read into an MR with Local Write only. iWARP places a Read Response like a
/// tagged Write, so the sink STag needs Remote Write (verbs 7.4.2 / 7.5.2, checklist row
/// 150): the Read fails when its response arrives and nothing lands in the sink.
#[test]
fn read_into_a_local_write_only_mr_fails_as_iwarp_requires() {
    if skip("read_into_a_local_write_only_mr_fails_as_iwarp_requires") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("rdlw");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, _aid, mut bqp, _bid) = connect(&mut a, A_IP, &mut b, 9403, b"", b"");
    let sink = b.pd.reg_mr(&b.arena, 0, 4096, Access::LOCAL_WRITE).unwrap();
    a.fill(0, 4096, 12);
    let rd = SendOp::Read {
        remote_to: a.arena.addr(0),
        rkey: a.mr.rkey(),
        invalidate_local: false,
    };
    b.fill(0, 4096, 13);
    let c = b.post_and_complete(&mut bqp, wr(18, rd, &[sink.sge(0, 4096).unwrap()]));
    assert_eq!(c.wr_id, 18);
    assert_ne!(
        c.status,
        WcStatus::Success,
        "a Read sink without Remote Write: {c:?}"
    );
    assert!(b.holds(0, 4096, 13), "nothing placed in the sink");
}
