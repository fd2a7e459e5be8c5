//! Two dataplane cores per daemon: QPs of one client spread over both cores, one MR
//! (replicated on every core under one STag) serves QPs on either core, one CQ gathers
//! the completions of both (a sub-ring per core), passive QPs land on the core that
//! received the request. Four busy lcores share the CI machine's two CPUs, so this is
//! about correctness, not speed.

use std::collections::BTreeSet;

use iwarp_apps::side::*;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];
const QPS: usize = 6;
const CHUNK: usize = 8192;

#[test]
fn qps_on_two_cores_share_one_mr_and_one_cq() {
    if skip("qps_on_two_cores_share_one_mr_and_one_cq") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start_on("mc", "0,1", "0,1");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    assert_eq!(a.ctx.cores(), 2, "daemon A has two dataplane cores");
    let listener = a.cm.create_id().unwrap();
    listener.listen(9601, 16).unwrap();
    let mut conns = Vec::new();
    for _ in 0..QPS {
        let c = connect_via(&mut a, &listener, A_IP, &mut b, 9601, b"mc", b"ok");
        conns.push(c);
    }
    let b_cores: BTreeSet<u32> = conns.iter().map(|(_, _, bqp, _)| bqp.core()).collect();
    let a_cores: BTreeSet<u32> = conns.iter().map(|(aqp, _, _, _)| aqp.core()).collect();
    assert_eq!(
        b_cores.len(),
        2,
        "active QPs placed on both cores: {b_cores:?}"
    );
    assert_eq!(a_cores.len(), 2, "passive QPs on both cores: {a_cores:?}");

    let a_base = a.arena.addr(0);
    let rkey = a.mr.rkey();
    for (i, (aqp, _aid, bqp, _bid)) in conns.iter_mut().enumerate() {
        let off = i * CHUNK;
        let seed = 40 + i as u8;
        // WRITE B -> A through A's one MR.
        b.fill(off, CHUNK, seed);
        let sge = b.mr.sge(off as u64, CHUNK as u32).unwrap();
        let op = SendOp::Write {
            remote_to: a_base + off as u64,
            rkey,
        };
        let c = b.post_and_complete(bqp, wr(100 + i as u64, op, &[sge]));
        check_cqe(&c, 100 + i as u64, WcOpcode::Write, WcStatus::Success);
        assert!(
            a.wait_holds(off, CHUNK, seed),
            "Write of QP {i} (core {})",
            bqp.core()
        );
        // READ it back into another part of B's arena.
        let back = (QPS + i) * CHUNK;
        let sge = b.mr.sge(back as u64, CHUNK as u32).unwrap();
        let op = SendOp::Read {
            remote_to: a_base + off as u64,
            rkey,
            invalidate_local: false,
        };
        let c = b.post_and_complete(bqp, wr(200 + i as u64, op, &[sge]));
        check_cqe(&c, 200 + i as u64, WcOpcode::Read, WcStatus::Success);
        assert!(b.holds(back, CHUNK, seed), "Read of QP {i}");
        // SEND B -> A: A's receive completes in A's one CQ, from the QP's core.
        let recv_off = (2 * QPS + i) * CHUNK;
        a.post_recv(aqp, 300 + i as u64, recv_off as u64, CHUNK as u32);
        let sge = b.mr.sge(off as u64, 256).unwrap();
        let c = b.post_and_complete(bqp, wr(400 + i as u64, SendOp::Send, &[sge]));
        check_cqe(&c, 400 + i as u64, WcOpcode::Send, WcStatus::Success);
        let r = a.poll_one();
        check_cqe(&r, 300 + i as u64, WcOpcode::Recv, WcStatus::Success);
        assert_eq!(r.qp.0, aqp.handle().0, "the receive names its QP");
        assert!(a.holds(recv_off, 256, seed), "Send payload of QP {i}");
    }

    drop(conns);
    drop(listener);
    drop(a);
    drop(b);
    pair.a
        .wait_objects_freed(&[], std::time::Duration::from_secs(10));
    pair.b
        .wait_objects_freed(&[], std::time::Duration::from_secs(10));
}
