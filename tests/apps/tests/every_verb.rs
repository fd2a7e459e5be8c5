//! Every verb through the client library, on two daemons joined by memif: query device
//! and port, arenas, PDs, MR register / query / reregister / deregister (and
//! `reg_user_mr` of an ordinary buffer, then sent from), memory windows, CQs with a
//! completion channel (create, resize, destroy), QP create / query / modify (to Error:
//! receives flushed) / destroy, SRQ create / modify / query / post with its limit event,
//! the connection manager (listen, connect, accept and reject with private data both
//! ways, disconnect seen by both sides) and asynchronous events. At the end both daemons
//! hold no object.

use std::net::SocketAddrV4;
use std::time::Duration;

use iwarp_apps::side::*;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];

fn wait_async(ctx: &Context, mut f: impl FnMut(&AsyncEventMsg) -> bool) -> AsyncEventMsg {
    let end = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    while std::time::Instant::now() < end {
        if let Ok(e) = ctx.get_async_event_timeout(Duration::from_millis(200)) {
            if f(&e) {
                return e;
            }
            seen.push(e);
        }
    }
    panic!("no matching async event in {WAIT:?}; saw {seen:?}");
}

#[test]
fn every_verb_works_and_leaves_nothing_behind() {
    if skip("every_verb_works_and_leaves_nothing_behind") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("verb");
    {
        run(&pair);
    }
    // Every context is gone: both daemons hold nothing.
    pair.a.wait_objects_freed(&[], WAIT);
    pair.b.wait_objects_freed(&[], WAIT);
}

fn run(pair: &DaemonPair) {
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);

    // Query device and port.
    let dev = b.ctx.query_device().unwrap();
    assert_eq!((dev.ports, dev.cores), (1, 1), "{dev:?}");
    assert!(
        dev.max_sge >= 2 && dev.max_qp > 0 && dev.max_cqe > 0 && dev.max_mr > 0,
        "{dev:?}"
    );
    assert!(dev.memory_windows && dev.srq, "{dev:?}");
    let port = b.ctx.query_port(0).unwrap();
    assert_eq!(port.ip, [198, 18, 0, 2]);
    assert!(b.ctx.query_port(7).is_err(), "a port that does not exist");

    // Arenas and MRs: register, query, reregister (new range and rights), zero-based,
    // deregister.
    let arena = b.ctx.alloc_arena(65536).unwrap();
    assert!(arena.len() >= 65536);
    let mut mr =
        b.pd.reg_mr(&arena, 4096, 8192, Access::LOCAL_WRITE)
            .unwrap();
    let q = mr.query().unwrap();
    assert!(
        q.valid && q.len == 8192 && q.offset == 4096 && q.va == arena.addr(4096),
        "{q:?}"
    );
    let old = mr.lkey();
    mr.rereg(
        &arena,
        16384,
        4096,
        Access::LOCAL_WRITE | Access::REMOTE_READ,
    )
    .unwrap();
    let q = mr.query().unwrap();
    assert!(q.valid && q.len == 4096 && q.offset == 16384, "{q:?}");
    assert!(q.access.contains(proto::AccessFlags::REMOTE_READ), "{q:?}");
    assert_eq!(mr.lkey().index(), old.index(), "rereg keeps the STag index");
    mr.rereg_access(Access::LOCAL_WRITE).unwrap();
    assert!(!mr
        .query()
        .unwrap()
        .access
        .contains(proto::AccessFlags::REMOTE_READ));
    let zb =
        b.pd.reg_mr_zero_based(&arena, 0, 4096, Access::LOCAL_WRITE)
            .unwrap();
    assert_eq!(zb.query().unwrap().va, 0);
    mr.dereg().unwrap();
    zb.dereg().unwrap();

    // Memory windows of both types allocated and deallocated (binding them: every_wr.rs).
    b.pd.alloc_mw(MwKind::Type1).unwrap().dealloc().unwrap();
    b.pd.alloc_mw(MwKind::Type2).unwrap().dealloc().unwrap();

    // CQ create and destroy: the daemon's count goes up and down.
    let cqs = pair.b.totals().cqs;
    let extra = b.ctx.create_cq(16, Some(&b.chan)).unwrap();
    assert_eq!(pair.b.totals().cqs, cqs + 1);
    drop(extra);
    assert_eq!(pair.b.totals().cqs, cqs);

    // CM: a rejected request carries the reject's private data back.
    let listener = a.cm.create_id().unwrap();
    listener.listen(9500, 8).unwrap();
    {
        let qp = b.pd.create_qp(&b.qp_attr()).unwrap();
        let id = b.cm.create_id().unwrap();
        let param = ConnParam {
            private_data: b"let me in".to_vec(),
            ..ConnParam::default()
        };
        id.connect(&qp, SocketAddrV4::new(A_IP.into(), 9500), &param)
            .unwrap();
        let ev = a.cm_event();
        match &ev.event {
            CmEvent::ConnectRequest { private_data, .. } => assert_eq!(private_data, b"let me in"),
            other => panic!("expected ConnectRequest: {other:?}"),
        }
        ev.request
            .expect("request id")
            .reject(b"not today")
            .unwrap();
        match b.cm_event().event {
            CmEvent::Rejected { private_data } => assert_eq!(private_data, b"not today"),
            other => panic!("expected Rejected: {other:?}"),
        }
    }

    // Connect and accept (private data both ways), query the QPs.
    let (mut aqp, aid, mut bqp, bid) = connect_via(
        &mut a, &listener, A_IP, &mut b, 9500, b"hello A", b"hello B",
    );
    let qi = bqp.query().unwrap();
    assert_eq!(
        (qi.state, qi.connected, qi.qp),
        (QpStateValue::Rts, true, bqp.handle()),
        "{qi:?}"
    );
    assert!(
        qi.cap.max_send_wr >= 128 && qi.cap.max_send_sge >= 2,
        "{qi:?}"
    );

    // reg_user_mr of an ordinary buffer: it keeps its address and bytes, and sends.
    let mut buf = vec![0u8; 3 * 4096 + 100];
    pattern(&mut buf, 21);
    let addr = buf.as_ptr() as u64;
    #[allow(unsafe_code)]
    let umr = {
        // SAFETY: `add(50)` and the 3 * 4096 bytes after it stay inside `buf` (3 * 4096 +
        // 100 bytes); `buf` is this thread's own heap memory, nobody else writes it during
        // the call, and it outlives `umr` (dropped below, before `buf`).
        unsafe {
            b.pd.reg_user_mr(buf.as_mut_ptr().add(50), 3 * 4096, Access::LOCAL_WRITE)
        }
    }
    .unwrap();
    assert_eq!(buf.as_ptr() as u64, addr, "the buffer kept its address");
    let mut want = vec![0u8; buf.len()];
    pattern(&mut want, 21);
    assert_eq!(buf, want, "the buffer kept its bytes");
    a.post_recv(&mut aqp, 200, 0, 16384);
    let sge = Sge {
        addr: addr + 50,
        length: 3 * 4096,
        lkey: umr.lkey(),
    };
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(20, SendOp::Send, &[sge])),
        20,
        WcOpcode::Send,
        WcStatus::Success,
    );
    let r = a.poll_one();
    check_cqe(&r, 200, WcOpcode::Recv, WcStatus::Success);
    assert_eq!(r.byte_len, 3 * 4096);
    assert_eq!(
        &a.arena.as_slice()[..3 * 4096],
        &want[50..50 + 3 * 4096],
        "reg_user_mr bytes"
    );
    // The buffer is still the application's: a write to it is what the next Send carries.
    buf[50..60].copy_from_slice(b"0123456789");
    a.post_recv(&mut aqp, 201, 0, 16384);
    let sge = Sge {
        addr: addr + 50,
        length: 10,
        lkey: umr.lkey(),
    };
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(21, SendOp::Send, &[sge])),
        21,
        WcOpcode::Send,
        WcStatus::Success,
    );
    check_cqe(&a.poll_one(), 201, WcOpcode::Recv, WcStatus::Success);
    assert_eq!(&a.arena.as_slice()[..10], b"0123456789");
    drop(umr);

    // CQ resize: completions keep flowing through the new rings.
    b.cq.resize(1024).unwrap();
    assert!(b.cq.depth() >= 1024);
    a.post_recv(&mut aqp, 202, 0, 4096);
    let sge = b.mr.sge(0, 100).unwrap();
    check_cqe(
        &b.post_and_complete(&mut bqp, wr(22, SendOp::Send, &[sge])),
        22,
        WcOpcode::Send,
        WcStatus::Success,
    );
    check_cqe(&a.poll_one(), 202, WcOpcode::Recv, WcStatus::Success);

    // Disconnect: both sides see it.
    bid.disconnect().unwrap();
    for s in [&a, &b] {
        loop {
            match s.cm_event().event {
                CmEvent::Disconnected => break,
                CmEvent::Established { .. } => continue,
                other => panic!("{}: expected Disconnected: {other:?}", s.name),
            }
        }
    }
    // rdma_disconnect after the connection ended (the peer closed first, or twice) is
    // 0, as the kernel's iWARP CM answers.
    aid.disconnect().expect("disconnect after the peer closed");
    bid.disconnect().expect("a second disconnect");
    drop((aid, bid));
    aqp.destroy().unwrap();
    bqp.destroy().unwrap();

    // QP modify to Error: posted receives are flushed.
    let mut q = b.pd.create_qp(&b.qp_attr()).unwrap();
    assert_eq!(q.query().unwrap().state, QpStateValue::Idle);
    b.post_recv(&mut q, 300, 0, 64);
    q.modify(QpModifyReq {
        state: Some(QpStateValue::Error),
        ..QpModifyReq::default()
    })
    .unwrap();
    let c = b.poll_one();
    assert_eq!(
        (c.wr_id, c.status, c.qp.0),
        (300, WcStatus::Flushed, q.qp_num()),
        "{c:?}"
    );
    assert_eq!(q.query().unwrap().state, QpStateValue::Error);
    q.destroy().unwrap();

    srq_and_limit_event(&mut a, &mut b, &listener);
}

/// SRQ create / modify / query / post; a QP on it receives; the limit event fires.
fn srq_and_limit_event(a: &mut Side, b: &mut Side, listener: &CmId) {
    let mut srq =
        a.pd.create_srq(&SrqInitAttr {
            max_wr: 64,
            max_sge: 1,
            limit: 0,
        })
        .unwrap();
    let info = srq.query().unwrap();
    assert!(
        info.max_wr >= 64 && info.max_sge >= 1 && !info.armed,
        "{info:?}"
    );
    let info = srq.modify(None, Some(2)).unwrap();
    assert!(info.armed && info.limit == 2, "{info:?}");
    for i in 0..4u64 {
        let sge = a.mr.sge(i * 4096, 4096).unwrap();
        srq.post_recv(&RecvWr {
            wr_id: 400 + i,
            sgl: SgList::single(sge),
        })
        .unwrap();
    }
    let bqp_attr = b.qp_attr();
    let mut bqp = b.pd.create_qp(&bqp_attr).unwrap();
    let bid = b.cm.create_id().unwrap();
    bid.connect(
        &bqp,
        SocketAddrV4::new(A_IP.into(), 9500),
        &ConnParam::default(),
    )
    .unwrap();
    let ev = a.cm_event();
    assert_eq!(ev.id, listener.handle());
    let pid = ev.request.expect("request id");
    let mut attr = a.qp_attr();
    attr.srq = Some(&srq);
    let aqp = pid.create_qp(&a.pd, &attr).unwrap();
    pid.accept(&aqp, &ConnParam::default()).unwrap();
    assert!(matches!(b.cm_event().event, CmEvent::Established { .. }));
    assert!(matches!(a.cm_event().event, CmEvent::Established { .. }));
    for i in 0..3u64 {
        b.fill(0, 512, 30 + i as u8);
        let sge = b.mr.sge(0, 512).unwrap();
        check_cqe(
            &b.post_and_complete(&mut bqp, wr(40 + i, SendOp::Send, &[sge])),
            40 + i,
            WcOpcode::Send,
            WcStatus::Success,
        );
        let r = a.poll_one();
        check_cqe(&r, 400 + i, WcOpcode::Recv, WcStatus::Success);
        assert_eq!((r.byte_len, r.qp.0), (512, aqp.qp_num()), "{r:?}");
        assert!(
            a.holds(i as usize * 4096, 512, 30 + i as u8),
            "SRQ receive {i}"
        );
    }
    let sh = srq.handle();
    let e = wait_async(&a.ctx, |e| e.resource == EventResourceRef::Srq(sh));
    assert_eq!(e.kind, AsyncKind::SrqLimitReached, "{e:?}");
    assert!(!srq.query().unwrap().armed, "the limit event disarms");
    drop((bid, pid));
    drop(aqp);
    drop(bqp);
}
