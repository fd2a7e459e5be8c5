//! Every work request type end to end between two engines, data verified byte for byte:
//! Send, Send SE, Send with Invalidate, Send SE + Invalidate, RDMA Write, RDMA Read,
//! RDMA Read with Invalidate Local STag, zero-length and multi-SGE messages, 1 MiB
//! messages, and the unsignaled completion rule.

use iwarp_rdma::mem::StagState;
use iwarp_sim::host::{Pair, PairOptions, Side};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{
    Access, Cqe, Duration, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(10);

fn pair(name: &'static str) -> (Pair, SeedGuard) {
    let seed = seed_or_fresh();
    let g = SeedGuard::new(seed, name);
    (
        Pair::new(
            seed,
            PairOptions {
                arena_len: 4 << 20,
                ..PairOptions::default()
            },
        ),
        g,
    )
}

fn send(wr_id: u64, op: SendOp, sgl: SgList) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl,
        flags: SendFlags::SIGNALED,
    }
}

fn ok(c: &Cqe, opcode: WcOpcode) {
    assert_eq!(c.status, WcStatus::Success, "{c:?}");
    assert_eq!(c.opcode, opcode, "{c:?}");
}

/// A remotely invalidatable MR on `side` over `[offset, offset + len)` of its arena.
fn remote_mr(p: &mut Pair, side: Side, offset: u64, len: u64) -> Stag {
    let all = Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    p.host(side).reg_mr(side.pd, side.region, offset, len, all)
}

#[test]
fn send_types_deliver_and_report() {
    let (mut p, _g) = pair("send_types_deliver_and_report");
    let (a, b) = (p.a, p.b);
    let inv1 = remote_mr(&mut p, b, 0x30_0000, 4096);
    let inv2 = remote_mr(&mut p, b, 0x30_1000, 4096);
    let cases = [
        (SendOp::Send, WcOpcode::Send, false, None),
        (SendOp::SendSe, WcOpcode::SendSe, true, None),
        (
            SendOp::SendInv { inv_stag: inv1 },
            WcOpcode::SendInv,
            false,
            Some(inv1),
        ),
        (
            SendOp::SendSeInv { inv_stag: inv2 },
            WcOpcode::SendSeInv,
            true,
            Some(inv2),
        ),
    ];
    for (i, (op, opcode, se, inv)) in cases.iter().enumerate() {
        let len = 100 + 37 * i;
        let src = 0x1000 * i;
        let dst = 0x10_0000 + 0x1000 * i;
        let data = p.fill_random(a, src, len);
        p.host(b)
            .post_recv(
                b.qp,
                &RecvWr {
                    wr_id: 100 + i as u64,
                    sgl: b.sgl(dst as u64, 4096),
                },
            )
            .unwrap();
        p.host(a)
            .post_send(a.qp, &send(i as u64, *op, a.sgl(src as u64, len as u32)))
            .unwrap();
        let ca = p.wait_cqes(a, 1, T);
        let cb = p.wait_cqes(b, 1, T);
        ok(&ca[0], *opcode);
        assert_eq!(ca[0].wr_id, i as u64);
        ok(&cb[0], WcOpcode::Recv);
        assert_eq!(cb[0].wr_id, 100 + i as u64);
        assert_eq!(cb[0].byte_len as usize, len);
        assert_eq!(cb[0].solicited, *se, "{op:?}");
        assert_eq!(cb[0].invalidated, *inv, "{op:?}");
        assert_eq!(cb[0].qp, b.qp);
        assert_eq!(p.bytes(b, dst, len), &data[..], "{op:?}");
        // Canary: the rest of the receive buffer is untouched.
        assert!(p.bytes(b, dst + len, 4096 - len).iter().all(|x| *x == 0));
        if let Some(stag) = inv {
            let info = p.host(b).engine.rnic().query_mr(*stag).unwrap();
            assert_eq!(
                info.state,
                StagState::Invalid,
                "{op:?} invalidated the STag"
            );
        }
    }
    // Remote invalidation is not an error: no asynchronous event at the receiver.
    assert!(p
        .sim
        .events(1)
        .iter()
        .all(|e| !matches!(e, iwarp_engine::Event::Async(_))));
}

#[test]
fn zero_length_and_multi_sge_sends() {
    let (mut p, _g) = pair("zero_length_and_multi_sge_sends");
    let (a, b) = (p.a, p.b);
    // Zero bytes: an empty SGL, into a receive with a buffer.
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 1,
                sgl: b.sgl(0x1000, 64),
            },
        )
        .unwrap();
    p.host(a)
        .post_send(a.qp, &send(1, SendOp::Send, SgList::new()))
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    ok(&cb[0], WcOpcode::Recv);
    assert_eq!(cb[0].byte_len, 0);
    assert!(p.bytes(b, 0x1000, 64).iter().all(|x| *x == 0));
    p.wait_cqes(a, 1, T);
    // Six source SGEs into three receive SGEs.
    let pieces = [
        (0u64, 10u32),
        (100, 1),
        (200, 3000),
        (4000, 77),
        (5000, 1500),
        (9000, 8),
    ];
    let mut sent = Vec::new();
    for (off, len) in pieces {
        sent.extend(p.fill_random(a, off as usize, len as usize));
    }
    let sges: Vec<Sge> = pieces.iter().map(|&(o, l)| a.sge(o, l)).collect();
    let rsges = [
        b.sge(0x2_0000, 1000),
        b.sge(0x3_0000, 2000),
        b.sge(0x4_0000, 3000),
    ];
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 2,
                sgl: SgList::from_slice(&rsges).unwrap(),
            },
        )
        .unwrap();
    p.host(a)
        .post_send(
            a.qp,
            &send(2, SendOp::Send, SgList::from_slice(&sges).unwrap()),
        )
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    ok(&cb[0], WcOpcode::Recv);
    assert_eq!(cb[0].byte_len as usize, sent.len());
    let mut got = Vec::new();
    got.extend_from_slice(p.bytes(b, 0x2_0000, 1000));
    got.extend_from_slice(p.bytes(b, 0x3_0000, 2000));
    got.extend_from_slice(p.bytes(b, 0x4_0000, sent.len() - 3000));
    assert_eq!(got, sent);
    assert!(p
        .bytes(b, 0x4_0000 + sent.len() - 3000, 100)
        .iter()
        .all(|x| *x == 0));
}

#[test]
fn rdma_write_small_and_one_mib() {
    let (mut p, _g) = pair("rdma_write_small_and_one_mib");
    let (a, b) = (p.a, p.b);
    for (i, len) in [0usize, 1, 1448, 65_536, 1 << 20].into_iter().enumerate() {
        let data = p.fill_random(a, 0, len);
        let dst = 0x20_0000 + 7 * i;
        let wr = send(
            i as u64,
            SendOp::Write {
                remote_to: dst as u64,
                rkey: b.mr,
            },
            a.sgl(0, len as u32),
        );
        p.host(a).post_send(a.qp, &wr).unwrap();
        let ca = p.wait_cqes(a, 1, Duration::from_secs(60));
        ok(&ca[0], WcOpcode::Write);
        assert_eq!(p.bytes(b, dst, len), &data[..], "write of {len}");
        // Writes produce no completion at the data sink.
        assert_eq!(p.host(b).cqe_count(b.cq), 0);
        assert_eq!(p.bytes(b, dst + len, 1), &[0]);
        p.host(b).arena_mut(b.region)[dst..dst + len].fill(0);
    }
}

#[test]
fn rdma_read_and_read_with_invalidate() {
    let (mut p, _g) = pair("rdma_read_and_read_with_invalidate");
    let (a, b) = (p.a, p.b);
    for (i, len) in [0usize, 3, 4096, 1 << 20].into_iter().enumerate() {
        let data = p.fill_random(b, 0x10_0000, len);
        let dst = 0x20_0000 + 13 * i;
        let wr = send(
            i as u64,
            SendOp::Read {
                remote_to: 0x10_0000,
                rkey: b.mr,
                invalidate_local: false,
            },
            a.sgl(dst as u64, len as u32),
        );
        p.host(a).post_send(a.qp, &wr).unwrap();
        let ca = p.wait_cqes(a, 1, Duration::from_secs(60));
        ok(&ca[0], WcOpcode::Read);
        assert_eq!(p.bytes(a, dst, len), &data[..], "read of {len}");
        assert_eq!(p.bytes(a, dst + len, 1), &[0]);
    }
    // Read with Invalidate Local STag: the sink STag is invalid once the Read completed.
    let data = p.fill_random(b, 0x5000, 5000);
    let sink = remote_mr(&mut p, a, 0x30_0000, 8192);
    let wr = send(
        9,
        SendOp::Read {
            remote_to: 0x5000,
            rkey: b.mr,
            invalidate_local: true,
        },
        SgList::single(Sge {
            addr: 100,
            length: 5000,
            lkey: sink,
        }),
    );
    p.host(a).post_send(a.qp, &wr).unwrap();
    let ca = p.wait_cqes(a, 1, T);
    ok(&ca[0], WcOpcode::ReadInv);
    assert_eq!(p.bytes(a, 0x30_0000 + 100, 5000), &data[..]);
    let info = p.host(a).engine.rnic().query_mr(sink).unwrap();
    assert_eq!(info.state, StagState::Invalid);
}

#[test]
fn unsignaled_successes_complete_silently() {
    let (mut p, _g) = pair("unsignaled_successes_complete_silently");
    let (a, b) = (p.a, p.b);
    let data = p.fill_random(a, 0, 3000);
    for i in 0..3u64 {
        let wr = SendWr {
            wr_id: i,
            op: SendOp::Write {
                remote_to: 1000 * i,
                rkey: b.mr,
            },
            sgl: a.sgl(1000 * i, 1000),
            flags: if i == 2 {
                SendFlags::SIGNALED
            } else {
                SendFlags::NONE
            },
        };
        p.host(a).post_send(a.qp, &wr).unwrap();
    }
    let ca = p.wait_cqes(a, 1, T);
    p.sim.run_for(Duration::from_millis(10));
    assert_eq!(ca.len(), 1, "only the signaled WR completes: {ca:?}");
    assert_eq!(ca[0].wr_id, 2);
    assert_eq!(p.host(a).cqe_count(a.cq), 0);
    assert_eq!(p.bytes(b, 0, 3000), &data[..]);
}

#[test]
fn both_directions_at_once() {
    let (mut p, _g) = pair("both_directions_at_once");
    let (a, b) = (p.a, p.b);
    let da = p.fill_random(a, 0, 200_000);
    let db = p.fill_random(b, 0, 150_000);
    p.host(a)
        .post_recv(
            a.qp,
            &RecvWr {
                wr_id: 1,
                sgl: a.sgl(0x10_0000, 150_000),
            },
        )
        .unwrap();
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 1,
                sgl: b.sgl(0x10_0000, 200_000),
            },
        )
        .unwrap();
    p.host(a)
        .post_send(a.qp, &send(2, SendOp::Send, a.sgl(0, 200_000)))
        .unwrap();
    p.host(b)
        .post_send(b.qp, &send(2, SendOp::Send, b.sgl(0, 150_000)))
        .unwrap();
    p.sim.run_until(Duration::from_secs(30), |s| {
        s.node(0).cqe_count(a.cq) == 2 && s.node(1).cqe_count(b.cq) == 2
    });
    assert_eq!(p.bytes(b, 0x10_0000, 200_000), &da[..]);
    assert_eq!(p.bytes(a, 0x10_0000, 150_000), &db[..]);
    for side in [a, b] {
        for c in p.host(side).take_cqes(side.cq) {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
    }
}
