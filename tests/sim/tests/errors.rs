//! Error paths end to end: an inbound message that breaks a rule makes the data sink
//! (or source) send a Terminate with the RFC code, raise the matching asynchronous event,
//! and both QPs leave RTS; the requester's WR completes in error when no data was
//! placed; nothing is placed where it must not be.

use iwarp_engine::Event;
use iwarp_sim::host::{Pair, PairOptions, Side};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{
    Access, AsyncEventKind, Cqe, Duration, EventResource, QpState, RecvWr, SendFlags, SendOp,
    SendWr, SgList, Stag, TermCode, WcStatus,
};

const T: Duration = Duration::from_secs(10);

fn pair_with(name: &'static str, opts: PairOptions) -> (Pair, SeedGuard) {
    let seed = seed_or_fresh();
    let g = SeedGuard::new(seed, name);
    let mut p = Pair::new(seed, opts);
    p.hello();
    (p, g)
}

fn pair(name: &'static str) -> (Pair, SeedGuard) {
    pair_with(name, PairOptions::default())
}

fn wr(wr_id: u64, op: SendOp, sgl: SgList) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl,
        flags: SendFlags::SIGNALED,
    }
}

/// Runs until the requester (host 0) got `TerminateReceived(code)` and the responder
/// (host 1) raised `responder_kind` (`None`: the error was reported by a completion, so
/// no asynchronous event, verbs 6.2.3); then until both QPs left RTS.
fn expect_terminate(p: &mut Pair, code: TermCode, responder_kind: Option<AsyncEventKind>) {
    let (a, b) = (p.a, p.b);
    let want_a = AsyncEventKind::TerminateReceived(code);
    let r = p.sim.try_run_until(T, |s| {
        let got_a = s.events(0).iter().any(|e| matches!(e, Event::Async(ev) if ev.kind == want_a && ev.resource == EventResource::Qp(a.qp)));
        let got_b = match responder_kind {
            Some(k) => s.events(1).iter().any(|e| matches!(e, Event::Async(ev) if ev.kind == k && ev.resource == EventResource::Qp(b.qp))),
            None => true,
        };
        got_a && got_b
    });
    assert!(
        r.is_ok(),
        "{r:?}\nrequester events {:?}\nresponder events {:?}",
        p.sim.events(0),
        p.sim.events(1)
    );
    p.sim.run_until(T, |s| {
        s.node(0).qp_state(a.qp) != QpState::Rts && s.node(1).qp_state(b.qp) != QpState::Rts
    });
    let ta = p
        .host(a)
        .query_qp(a.qp)
        .terminate
        .expect("requester keeps the Terminate it received");
    assert_eq!((ta.code, ta.local), (code, false));
    let tb = p
        .host(b)
        .query_qp(b.qp)
        .terminate
        .expect("responder keeps the Terminate it sent");
    assert_eq!((tb.code, tb.local), (code, true));
    if responder_kind.is_none() {
        let unexpected = p.sim.events(1).iter().find(|e| matches!(e, Event::Async(ev) if !matches!(ev.kind, AsyncEventKind::QpErrorStateEntered | AsyncEventKind::LlpCloseComplete)));
        assert!(
            unexpected.is_none(),
            "error reported by a completion raises no async event: {unexpected:?}"
        );
    }
}

fn cqes_until(p: &mut Pair, side: Side, n: usize) -> Vec<Cqe> {
    p.sim.run_until(Duration::from_secs(300), |s| {
        s.node(side.host).cqe_count(side.cq) >= n
    });
    p.host(side).take_cqes(side.cq)
}

#[test]
fn write_to_an_invalid_stag() {
    let (mut p, _g) = pair("write_to_an_invalid_stag");
    let (a, b) = (p.a, p.b);
    let bad = Stag(b.mr.0 ^ 0x100);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                1,
                SendOp::Write {
                    remote_to: 0,
                    rkey: bad,
                },
                a.sgl(0, 500),
            ),
        )
        .unwrap();
    let code = TermCode::DDP_TAGGED_INVALID_STAG;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
    let ca = cqes_until(&mut p, a, 1);
    assert_eq!(ca[0].wr_id, 1);
    assert_ne!(
        ca[0].status,
        WcStatus::Flushed,
        "the WR the Terminate relates to carries its own status: {ca:?}"
    );
    assert!(p.bytes(b, 0, 500).iter().all(|x| *x == 0));
}

#[test]
fn write_out_of_bounds() {
    let (mut p, _g) = pair("write_out_of_bounds");
    let (a, b) = (p.a, p.b);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                1,
                SendOp::Write {
                    remote_to: (1 << 20) - 3,
                    rkey: b.mr,
                },
                a.sgl(0, 4),
            ),
        )
        .unwrap();
    let code = TermCode::DDP_TAGGED_BASE_BOUNDS;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
    assert!(p.bytes(b, (1 << 20) - 3, 3).iter().all(|x| *x == 0));
}

#[test]
fn write_without_remote_write_right_is_ddp_0x1102() {
    let (mut p, _g) = pair("write_without_remote_write_right_is_ddp_0x1102");
    let (a, b) = (p.a, p.b);
    // Local rights only: an inbound Write is a tagged access rights violation, reported
    // at the DDP layer (verbs figure 24 #18, inventory 5.7: 0x1102), not as RDMAP 0x0102
    // (which R figure 10 reserves for Read Request / Send with Invalidate).
    let rkey = p.host(b).reg_mr(
        b.pd,
        b.region,
        0,
        4096,
        Access::LOCAL_READ | Access::LOCAL_WRITE,
    );
    p.host(a)
        .post_send(
            a.qp,
            &wr(1, SendOp::Write { remote_to: 0, rkey }, a.sgl(0, 64)),
        )
        .unwrap();
    let code = TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
    assert!(p.bytes(b, 0, 64).iter().all(|x| *x == 0));
}

#[test]
fn read_from_an_invalid_stag_completes_in_error() {
    let (mut p, _g) = pair("read_from_an_invalid_stag_completes_in_error");
    let (a, b) = (p.a, p.b);
    let bad = Stag(b.mr.0 ^ 0x100);
    let read = SendOp::Read {
        remote_to: 0,
        rkey: bad,
        invalidate_local: false,
    };
    p.host(a).arena_mut(a.region)[..100].fill(0x5c);
    p.host(a)
        .post_send(a.qp, &wr(1, read, a.sgl(0, 100)))
        .unwrap();
    let code = TermCode::RDMAP_INVALID_STAG;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
    let ca = cqes_until(&mut p, a, 1);
    assert_eq!(ca[0].wr_id, 1);
    assert_eq!(
        ca[0].status,
        WcStatus::RemoteAccessError,
        "a Read answered by a protection Terminate completes with a remote access error"
    );
    assert!(
        p.bytes(a, 0, 100).iter().all(|x| *x == 0x5c),
        "sink untouched"
    );
}

#[test]
fn read_beyond_the_source_region() {
    let (mut p, _g) = pair("read_beyond_the_source_region");
    let (a, b) = (p.a, p.b);
    let read = SendOp::Read {
        remote_to: (1 << 20) - 10,
        rkey: b.mr,
        invalidate_local: false,
    };
    p.host(a)
        .post_send(a.qp, &wr(1, read, a.sgl(0, 11)))
        .unwrap();
    let code = TermCode::RDMAP_BASE_BOUNDS;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
}

#[test]
fn send_without_a_posted_receive() {
    let (mut p, _g) = pair("send_without_a_posted_receive");
    let (a, b) = (p.a, p.b);
    p.host(a)
        .post_send(a.qp, &wr(1, SendOp::Send, a.sgl(0, 100)))
        .unwrap();
    let code = TermCode::DDP_UNTAGGED_NO_BUFFER;
    // Verbs figure 37 #23: "RQ Protection Error - Invalid MSN".
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
    assert!(p.bytes(b, 0, 100).iter().all(|x| *x == 0));
}

#[test]
fn send_longer_than_the_receive_buffer() {
    let (mut p, _g) = pair("send_longer_than_the_receive_buffer");
    let (a, b) = (p.a, p.b);
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 9,
                sgl: b.sgl(0x1000, 50),
            },
        )
        .unwrap();
    p.fill_random(a, 0, 100);
    p.host(a)
        .post_send(a.qp, &wr(1, SendOp::Send, a.sgl(0, 100)))
        .unwrap();
    let code = TermCode::DDP_UNTAGGED_TOO_LONG;
    // The receive completes in error (a completion-reported error: no async event).
    expect_terminate(&mut p, code, None);
    let cb = cqes_until(&mut p, b, 1);
    assert_eq!(cb[0].wr_id, 9);
    assert_ne!(cb[0].status, WcStatus::Success, "{cb:?}");
    assert!(
        p.bytes(b, 0x1000 + 50, 50).iter().all(|x| *x == 0),
        "nothing beyond the buffer"
    );
}

#[test]
fn send_with_invalidate_of_a_local_only_stag() {
    let (mut p, _g) = pair("send_with_invalidate_of_a_local_only_stag");
    let (a, b) = (p.a, p.b);
    let local = p.host(b).reg_mr(
        b.pd,
        b.region,
        0x8000,
        4096,
        Access::LOCAL_READ | Access::LOCAL_WRITE,
    );
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 9,
                sgl: b.sgl(0x1000, 64),
            },
        )
        .unwrap();
    p.host(a)
        .post_send(
            a.qp,
            &wr(1, SendOp::SendInv { inv_stag: local }, a.sgl(0, 10)),
        )
        .unwrap();
    let code = TermCode::RDMAP_ACCESS_RIGHTS;
    expect_terminate(&mut p, code, None);
    let cb = cqes_until(&mut p, b, 1);
    assert_eq!(cb[0].wr_id, 9);
    assert_ne!(cb[0].status, WcStatus::Success, "{cb:?}");
    let info = p.host(b).engine.rnic().query_mr(local).unwrap();
    assert_eq!(
        info.state,
        iwarp_rdma::mem::StagState::Valid,
        "not invalidated"
    );
}

#[test]
fn inbound_read_disabled_on_the_responder() {
    let opts = PairOptions {
        qp: |q| q.inbound_read = false,
        ..PairOptions::default()
    };
    let (mut p, _g) = pair_with("inbound_read_disabled_on_the_responder", opts);
    let (a, b) = (p.a, p.b);
    let read = SendOp::Read {
        remote_to: 0,
        rkey: b.mr,
        invalidate_local: false,
    };
    p.host(a)
        .post_send(a.qp, &wr(1, read, a.sgl(0, 8)))
        .unwrap();
    let code = TermCode::DDP_UNTAGGED_INVALID_QN;
    expect_terminate(
        &mut p,
        code,
        Some(AsyncEventKind::RemoteOperationError(code)),
    );
}

#[test]
fn local_protection_error_completes_and_terminates() {
    let (mut p, _g) = pair("local_protection_error_completes_and_terminates");
    let (a, b) = (p.a, p.b);
    // A Send whose source SGE names an STag that does not exist: completion error on
    // the SQ, then a Terminate "local catastrophic" to the peer (verbs 8.3.2).
    let sgl = SgList::single(iwarp_types::Sge {
        addr: 0,
        length: 10,
        lkey: Stag(a.mr.0 ^ 0x100),
    });
    p.host(a)
        .post_send(a.qp, &wr(1, SendOp::Send, sgl))
        .unwrap();
    let ca = cqes_until(&mut p, a, 1);
    assert_eq!(
        (ca[0].wr_id, ca[0].status),
        (1, WcStatus::InvalidStag),
        "{ca:?}"
    );
    let want = AsyncEventKind::TerminateReceived(TermCode::RDMAP_LOCAL_CATASTROPHIC);
    p.sim.run_until(T, |s| {
        s.events(1)
            .iter()
            .any(|e| matches!(e, Event::Async(ev) if ev.kind == want))
    });
    assert_ne!(p.host(b).qp_state(b.qp), QpState::Rts);
}

#[test]
fn first_fpdu_in_error_still_gets_a_terminate() {
    // No hello: the responder's first inbound FPDU is the bad Write.
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "first_fpdu_in_error_still_gets_a_terminate");
    let mut p = Pair::new(seed, PairOptions::default());
    let (a, b) = (p.a, p.b);
    let bad = Stag(b.mr.0 ^ 0x100);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                1,
                SendOp::Write {
                    remote_to: 0,
                    rkey: bad,
                },
                a.sgl(0, 100),
            ),
        )
        .unwrap();
    let code = TermCode::DDP_TAGGED_INVALID_STAG;
    expect_terminate(&mut p, code, Some(AsyncEventKind::ProtectionError(code)));
}
