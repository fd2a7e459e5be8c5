//! Each side's core on its own thread with the real clock; the test thread is the
//! control thread and talks to the cores only through their control handles and their
//! consoles.

use core::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_types::{CqId, Cqe, RecvWr, SendOp, SendWr, SgList, Sge, VecMemory, WcStatus};

use super::helpers::*;
use crate::clock::SystemClock;
use crate::control::{ControlError, Op};
use crate::counters::Snapshot;
use crate::testutil::{ConsoleHandle, CoreParts, TestbedConfig, TestbedParts, ARENA, IP_B};

const T: StdDuration = StdDuration::from_secs(10);
const ARENA_LEN: usize = 1 << 20;

/// Runs a core on a thread until it shuts down; returns its final counters and memory.
fn spawn(parts: CoreParts) -> std::thread::JoinHandle<(Snapshot, VecMemory)> {
    std::thread::spawn(move || {
        let mut core = parts.build().unwrap();
        let stop = AtomicBool::new(false);
        let snap = core.run(&SystemClock::new(), &stop);
        (snap, core.mem().clone())
    })
}

fn wait_cqe(c: &ConsoleHandle<VecMemory>, cq: CqId) -> Cqe {
    let deadline = std::time::Instant::now() + T;
    while std::time::Instant::now() < deadline {
        let polled = c
            .run(T, move |cx| {
                let mut one = [iwarp_types::Cqe::EMPTY];
                let n = cx.engine.rnic_mut().poll_cq(cq, &mut one).expect("poll_cq");
                (n == 1).then_some(one[0])
            })
            .expect("the core runs jobs");
        if let Some(c) = polled {
            return c;
        }
        std::thread::sleep(StdDuration::from_micros(200));
    }
    panic!("no completion");
}

#[test]
fn two_cores_on_two_threads_move_verified_bytes() {
    let cfg = TestbedConfig {
        arena_bytes: ARENA_LEN,
        core: crate::core::CoreConfig {
            idle_yield: true,
            ..Default::default()
        },
        ..TestbedConfig::default()
    };
    let mut parts = TestbedParts::new(&cfg).unwrap();
    let src = pattern(64 * 1024, 3);
    let mut pa = parts.a.cores.pop().unwrap();
    pa.mem.arena_mut(ARENA)[..src.len()].copy_from_slice(&src);
    let pb = parts.b.cores.pop().unwrap();
    let mut ha = parts.a.handles.pop().unwrap();
    let mut hb = parts.b.handles.pop().unwrap();
    let ca = parts.a.consoles.pop().unwrap();
    let cb = parts.b.consoles.pop().unwrap();
    let ta = spawn(pa);
    let tb = spawn(pb);

    cb.run(T, |cx| cx.listen(PORT, 4)).unwrap().unwrap();
    let a = ca.run(T, |cx| make_verbs(cx, ARENA_LEN as u64)).unwrap();
    let b = cb.run(T, |cx| make_verbs(cx, ARENA_LEN as u64)).unwrap();
    let qa = a.qp;
    ca.run(T, move |cx| {
        cx.connect(qa, SocketAddrV4::new(IP_B, PORT), ConnectParams::default())
    })
    .unwrap()
    .unwrap();
    let req = cb
        .wait_event(T, |e| matches!(e, Event::ConnectRequest { .. }))
        .expect("connect request");
    let Event::ConnectRequest { conn, .. } = req else {
        unreachable!()
    };
    let qb = b.qp;
    cb.run(T, move |cx| cx.accept(conn, qb, AcceptParams::default()))
        .unwrap()
        .unwrap();
    ca.wait_event(T, |e| matches!(e, Event::Established { .. }))
        .expect("A established");
    cb.wait_event(T, |e| matches!(e, Event::Established { .. }))
        .expect("B established");

    // WRITE A[0..32K] -> B[0..32K]; SEND A[32K..40K] -> B[64K..]; READ B[0..32K] -> A[128K..].
    let post = |c: &ConsoleHandle<VecMemory>, qp, w: SendWr| {
        c.run(T, move |cx| cx.engine.post_send(qp, &w))
            .unwrap()
            .unwrap()
    };
    let w = wr(
        1,
        SendOp::Write {
            remote_to: 0,
            rkey: b.mr,
        },
        0,
        32 * 1024,
        a.mr,
    );
    post(&ca, a.qp, w);
    assert_eq!(wait_cqe(&ca, a.cq).status, WcStatus::Success);
    let recv = RecvWr {
        wr_id: 2,
        sgl: SgList::single(Sge {
            addr: 64 * 1024,
            length: 8 * 1024,
            lkey: b.mr,
        }),
    };
    cb.run(T, move |cx| cx.engine.post_recv(qb, &recv))
        .unwrap()
        .unwrap();
    let s = wr(3, SendOp::Send, 32 * 1024, 8 * 1024, a.mr);
    post(&ca, a.qp, s);
    assert_eq!(wait_cqe(&cb, b.cq).byte_len, 8 * 1024);
    assert_eq!(wait_cqe(&ca, a.cq).wr_id, 3);
    let r = wr(
        4,
        SendOp::Read {
            remote_to: 0,
            rkey: b.mr,
            invalidate_local: false,
        },
        128 * 1024,
        32 * 1024,
        a.mr,
    );
    post(&ca, a.qp, r);
    let cqe = wait_cqe(&ca, a.cq);
    assert_eq!((cqe.wr_id, cqe.status), (4, WcStatus::Success));

    // Orderly shutdown of A: B sees the connection close.
    ha.call(0, Op::Shutdown { grace_ms: 3_000 }, T).unwrap();
    cb.wait_event(T, |e| matches!(e, Event::Disconnected { .. }))
        .expect("B sees Disconnected");
    let (sa, mem_a) = ta.join().unwrap();
    hb.call(0, Op::Shutdown { grace_ms: 3_000 }, T).unwrap();
    let (sb, mem_b) = tb.join().unwrap();

    let (ma, mb) = (mem_a.arena(ARENA), mem_b.arena(ARENA));
    assert_eq!(&mb[..32 * 1024], &src[..32 * 1024]);
    assert_eq!(&mb[64 * 1024..72 * 1024], &src[32 * 1024..40 * 1024]);
    assert_eq!(&ma[128 * 1024..160 * 1024], &src[..32 * 1024]);
    assert_eq!(sa.total().c.tcp_rsts_sent, 0, "{sa}");
    assert!(sb.total().c.frames_rx > 0);
    assert_eq!(Snapshot::sum([&sa, &sb]).cores, 2);

    // The core is gone: a call fails cleanly instead of hanging.
    let t = std::time::Instant::now();
    let r = ha.call(0, Op::Snapshot, StdDuration::from_millis(50));
    assert_eq!(r.unwrap_err(), ControlError::CoreGone);
    assert!(t.elapsed() < StdDuration::from_secs(2));
    assert!(!ha.core_alive());
}

#[test]
fn the_stop_flag_shuts_a_running_core_down() {
    let parts = TestbedParts::new(&TestbedConfig {
        core: crate::core::CoreConfig {
            idle_yield: true,
            default_grace_ms: 200,
            ..Default::default()
        },
        ..TestbedConfig::default()
    })
    .unwrap();
    let mut cores = parts.a.cores;
    let p = cores.pop().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let t = std::thread::spawn(move || {
        let mut core = p.build().unwrap();
        core.run(&SystemClock::new(), &stop2)
    });
    std::thread::sleep(StdDuration::from_millis(20));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let snap = t.join().unwrap();
    assert!(snap.core.iterations > 0);
}

#[test]
fn stats_made_by_the_caller_are_checked_and_used() {
    let parts = TestbedParts::new(&TestbedConfig::default()).unwrap();
    let mut cores = parts.a.cores;
    let p = cores.pop().unwrap();
    let stats = Arc::new(crate::counters::CoreStats::new(0, &[0]));
    let mut core = p.build_with_stats(Some(Arc::clone(&stats))).unwrap();
    core.run_once(iwarp_types::Instant(5));
    assert_eq!(stats.snapshot().core.iterations, 1);
    let p = parts.b.cores.into_iter().next().unwrap();
    let wrong = Arc::new(crate::counters::CoreStats::new(0, &[7]));
    assert!(p.build_with_stats(Some(wrong)).is_err());
}

#[test]
fn a_call_to_a_stopped_core_times_out() {
    // The loop has ended but the core still exists: nobody reads its commands.
    let mut parts = TestbedParts::new(&TestbedConfig::default()).unwrap();
    let p = parts.a.cores.pop().unwrap();
    let mut h = parts.a.handles.pop().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let mut core = p.build().unwrap();
        // The stop flag is set from the start: shutdown with nothing to close ends at
        // once.
        let stop = AtomicBool::new(true);
        core.run(&SystemClock::new(), &stop);
        let _ = done_tx.send(());
        // Keep the stopped core alive until the test is done.
        let _ = rx.recv();
        drop(core);
    });
    done_rx.recv_timeout(T).unwrap();
    let start = std::time::Instant::now();
    let r = h.call(0, Op::Snapshot, StdDuration::from_millis(100));
    assert_eq!(r.unwrap_err(), ControlError::Timeout);
    let took = start.elapsed();
    assert!(took >= StdDuration::from_millis(100) && took < StdDuration::from_secs(3));
    let _ = tx.send(());
    t.join().unwrap();
}
