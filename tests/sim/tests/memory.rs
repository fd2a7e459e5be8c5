//! Memory registration work requests end to end: Bind Memory Window (type 1 by verb,
//! type 2 by work request) with remote access through the window, Fast-Register, and
//! Invalidate Local STag, with data verified byte for byte.

use iwarp_engine::Event;
use iwarp_rdma::mem::{MwBind, MwType, StagState};
use iwarp_sim::host::{Pair, PairOptions};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{
    Access, AsyncEventKind, Duration, EventResource, QpState, SendFlags, SendOp, SendWr, SgList,
    TermCode, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(10);
const RW: Access = Access(Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0);

fn pair(name: &'static str) -> (Pair, SeedGuard) {
    let seed = seed_or_fresh();
    let g = SeedGuard::new(seed, name);
    (Pair::new(seed, PairOptions::default()), g)
}

fn wr(wr_id: u64, op: SendOp, sgl: SgList) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl,
        flags: SendFlags::SIGNALED,
    }
}

/// Runs until `host` reports an async event of `kind` on its QP; returns it.
fn wait_async(p: &mut Pair, host: usize, want: AsyncEventKind) {
    let seen = |s: &mut iwarp_sim::sim::Sim<iwarp_sim::host::Host>| {
        s.events(host)
            .iter()
            .any(|e| matches!(e, Event::Async(a) if a.kind == want))
    };
    p.sim.run_until(T, seen);
}

#[test]
fn bind_type2_window_then_remote_write_and_read_through_it() {
    let (mut p, _g) = pair("bind_type2_window");
    let (a, b) = (p.a, p.b);
    p.hello();
    // Windows live in VA-based regions: this one maps arena [0, 64 KiB) at VA 0x10_0000.
    let all = Access::LOCAL_READ | Access::LOCAL_WRITE | Access::MW_BIND;
    let mr = p
        .host(b)
        .reg_mr_va(b.pd, b.region, 0, 0x1_0000, 0x10_0000, all);
    let mw = p
        .host(b)
        .engine
        .rnic_mut()
        .alloc_mw(b.pd, MwType::Type2)
        .unwrap();
    let win = mw.with_key(0x42);
    let bind = SendOp::Bind {
        mw: win,
        mr,
        to: 0x10_8000,
        len: 4096,
        access: RW,
        zero_based: true,
    };
    p.host(b)
        .post_send(b.qp, &wr(1, bind, SgList::new()))
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    assert_eq!(
        (cb[0].status, cb[0].opcode),
        (WcStatus::Success, WcOpcode::Bind),
        "{cb:?}"
    );
    let info = p.host(b).engine.rnic().query_mw(win).unwrap();
    assert_eq!(
        (info.state, info.qp, info.len),
        (StagState::Valid, Some(b.qp), 4096)
    );

    // The initiator Writes through the window (zero-based TO 100 = arena 0x8000 + 100).
    let data = p.fill_random(a, 0, 1000);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                2,
                SendOp::Write {
                    remote_to: 100,
                    rkey: win,
                },
                a.sgl(0, 1000),
            ),
        )
        .unwrap();
    let ca = p.wait_cqes(a, 1, T);
    assert_eq!(ca[0].status, WcStatus::Success, "{ca:?}");
    assert_eq!(p.bytes(b, 0x8000 + 100, 1000), &data[..]);
    assert!(p.bytes(b, 0x8000, 100).iter().all(|x| *x == 0));

    // And Reads the window's last 96 bytes back.
    let tail = p.fill_random(b, 0x8000 + 4000, 96);
    let read = SendOp::Read {
        remote_to: 4000,
        rkey: win,
        invalidate_local: false,
    };
    p.host(a)
        .post_send(a.qp, &wr(3, read, a.sgl(0x1_0000, 96)))
        .unwrap();
    let ca = p.wait_cqes(a, 1, T);
    assert_eq!(
        (ca[0].status, ca[0].opcode),
        (WcStatus::Success, WcOpcode::Read),
        "{ca:?}"
    );
    assert_eq!(p.bytes(a, 0x1_0000, 96), &tail[..]);

    // One byte past the window: base and bounds violation at the data sink.
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                4,
                SendOp::Write {
                    remote_to: 4090,
                    rkey: win,
                },
                a.sgl(0, 7),
            ),
        )
        .unwrap();
    wait_async(
        &mut p,
        0,
        AsyncEventKind::TerminateReceived(TermCode::DDP_TAGGED_BASE_BOUNDS),
    );
    assert!(p.sim.events(1).iter().any(|e| matches!(e,
        Event::Async(ev) if ev.resource == EventResource::Qp(b.qp)
            && ev.kind == AsyncEventKind::ProtectionError(TermCode::DDP_TAGGED_BASE_BOUNDS))));
    assert_eq!(
        p.bytes(b, 0x8000 + 4000, 96),
        &tail[..],
        "nothing placed from the refused Write"
    );
    assert_eq!(
        p.bytes(b, 0x8000 + 4096, 1),
        &[0],
        "nothing placed out of bounds"
    );
}

#[test]
fn bind_type1_window_by_verb_then_remote_write() {
    let (mut p, _g) = pair("bind_type1_window");
    let (a, b) = (p.a, p.b);
    // A VA-based region mapping the arena 1:1 (VA = arena offset); windows need one.
    let all = Access::LOCAL_READ | Access::LOCAL_WRITE | Access::MW_BIND;
    let mr = p.host(b).reg_mr_va(b.pd, b.region, 0, 1 << 20, 0, all);
    let mw = p
        .host(b)
        .engine
        .rnic_mut()
        .alloc_mw(b.pd, MwType::Type1)
        .unwrap();
    let win = mw.with_key(0x17);
    let bind = MwBind {
        mw: win,
        mr,
        to: 0x2_0000,
        len: 64 * 1024,
        access: RW,
        zero_based: false,
    };
    p.host(b)
        .engine
        .rnic_mut()
        .bind_mw_type1(b.pd, &bind)
        .unwrap();
    let info = p.host(b).engine.rnic().query_mw(win).unwrap();
    assert_eq!(
        (info.kind, info.state, info.qp),
        (MwType::Type1, StagState::Valid, None)
    );
    // VA-based window in the region's address space: TO 0x2_0000 + 5 is arena 0x2_0005.
    let data = p.fill_random(a, 0, 20_000);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                1,
                SendOp::Write {
                    remote_to: 0x2_0005,
                    rkey: win,
                },
                a.sgl(0, 20_000),
            ),
        )
        .unwrap();
    let ca = p.wait_cqes(a, 1, T);
    assert_eq!(ca[0].status, WcStatus::Success, "{ca:?}");
    assert_eq!(p.bytes(b, 0x2_0005, 20_000), &data[..]);
    // The window's key is checked: the old key is refused (invalid STag).
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                2,
                SendOp::Write {
                    remote_to: 0x2_0000,
                    rkey: mw.with_key(0x18),
                },
                a.sgl(0, 8),
            ),
        )
        .unwrap();
    wait_async(
        &mut p,
        0,
        AsyncEventKind::TerminateReceived(TermCode::DDP_TAGGED_INVALID_STAG),
    );
    assert_eq!(p.bytes(b, 0x2_0000, 5), &[0; 5][..]);
}

#[test]
fn fast_register_remote_write_then_local_invalidate() {
    let (mut p, _g) = pair("fast_register_and_local_invalidate");
    let (a, b) = (p.a, p.b);
    p.hello();
    let stag = p
        .host(b)
        .engine
        .rnic_mut()
        .alloc_mr_stag(b.pd, 64 * 1024, true)
        .unwrap();
    assert_eq!(
        p.host(b).engine.rnic().query_mr(stag).unwrap().state,
        StagState::Invalid
    );
    let key = stag.with_key(7);
    let fr = SendOp::FastReg {
        stag: key,
        region: b.region,
        region_offset: 0x9000,
        len: 8192,
        va: 0x1234_0000,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE | RW,
        zero_based: false,
    };
    p.host(b)
        .post_send(b.qp, &wr(1, fr, SgList::new()))
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    assert_eq!(
        (cb[0].status, cb[0].opcode),
        (WcStatus::Success, WcOpcode::FastReg),
        "{cb:?}"
    );
    assert_eq!(
        p.host(b).engine.rnic().query_mr(key).unwrap().state,
        StagState::Valid
    );

    let data = p.fill_random(a, 0, 8000);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                2,
                SendOp::Write {
                    remote_to: 0x1234_0000 + 10,
                    rkey: key,
                },
                a.sgl(0, 8000),
            ),
        )
        .unwrap();
    let ca = p.wait_cqes(a, 1, T);
    assert_eq!(ca[0].status, WcStatus::Success, "{ca:?}");
    assert_eq!(p.bytes(b, 0x9000 + 10, 8000), &data[..]);

    // Invalidate Local STag, then a Write to it is refused with an invalid-STag Terminate.
    p.host(b)
        .post_send(b.qp, &wr(3, SendOp::LocalInv { stag: key }, SgList::new()))
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    assert_eq!(
        (cb[0].status, cb[0].opcode),
        (WcStatus::Success, WcOpcode::LocalInv),
        "{cb:?}"
    );
    assert_eq!(
        p.host(b).engine.rnic().query_mr(key).unwrap().state,
        StagState::Invalid
    );
    p.host(b).arena_mut(b.region)[0x9000..0x9000 + 8192].fill(0);
    p.host(a)
        .post_send(
            a.qp,
            &wr(
                4,
                SendOp::Write {
                    remote_to: 0x1234_0000,
                    rkey: key,
                },
                a.sgl(0, 100),
            ),
        )
        .unwrap();
    wait_async(
        &mut p,
        0,
        AsyncEventKind::TerminateReceived(TermCode::DDP_TAGGED_INVALID_STAG),
    );
    assert!(
        p.bytes(b, 0x9000, 8192).iter().all(|x| *x == 0),
        "nothing placed through an invalid STag"
    );
    let r = p.sim.try_run_until(Duration::from_secs(600), |s| {
        s.node(0).qp_state(a.qp) == QpState::Error && s.node(1).qp_state(b.qp) == QpState::Error
    });
    eprintln!("both QPs in Error at t={} ns", p.sim.now().0);
    let states = (p.host(a).qp_state(a.qp), p.host(b).qp_state(b.qp));
    assert!(
        r.is_ok(),
        "{r:?}: QP states {states:?}; events a={:?} b={:?}",
        p.sim.events(0),
        p.sim.events(1)
    );
}

#[test]
fn fast_register_needs_a_privileged_qp() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "fast_register_needs_a_privileged_qp");
    let opts = PairOptions {
        qp: |q| {
            q.privileged = false;
            q.fast_reg = false;
        },
        ..PairOptions::default()
    };
    let mut p = Pair::new(seed, opts);
    p.hello();
    let b = p.b;
    let stag = p
        .host(b)
        .engine
        .rnic_mut()
        .alloc_mr_stag(b.pd, 4096, false)
        .unwrap();
    let fr = SendOp::FastReg {
        stag,
        region: b.region,
        region_offset: 0,
        len: 4096,
        va: 0,
        access: Access::LOCAL_WRITE,
        zero_based: true,
    };
    p.host(b)
        .post_send(b.qp, &wr(1, fr, SgList::new()))
        .unwrap();
    let cb = p.wait_cqes(b, 1, T);
    assert_eq!(cb[0].status, WcStatus::QpNotPrivileged, "{cb:?}");
    assert_eq!(
        p.host(b).engine.rnic().query_mr(stag).unwrap().state,
        StagState::Invalid
    );
}
