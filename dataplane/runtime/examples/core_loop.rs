//! Goodput and message rate through the whole core loop: two cores (one per side)
//! joined by the memory link, run on this one thread with a manual clock, a `WriteLoop`
//! app on side A keeping WRITEs in flight. Both cores' work shares one CPU, so the
//! figures are a lower bound of one core's.
//!
//! `cargo run --release -p iwarp-runtime --example core_loop [count_64k] [count_64b]`

use core::net::SocketAddrV4;
use std::sync::atomic::Ordering::Relaxed;

use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_runtime::control::{AppBox, Op};
use iwarp_runtime::testutil::{Testbed, TestbedConfig, Which, WriteLoop, ARENA, IP_B};
use iwarp_types::{Access, CqId, QpId, Stag};

const ARENA_LEN: u64 = 1 << 20;

/// A PD, a CQ, a QP and an MR over the arena, made on the side's core by its console.
fn verbs(tb: &mut Testbed, w: Which) -> (QpId, CqId, Stag) {
    tb.exec(w, 0, |cx| {
        let rnic = cx.engine.rnic_mut();
        let pd = rnic.alloc_pd().expect("pd");
        let (cq, _) = rnic.create_cq(1024).expect("cq");
        let attr = QpAttr {
            sq_depth: 512,
            rq_depth: 16,
            ord: 8,
            ird: 8,
            inbound_read: true,
            inbound_write: true,
            ..QpAttr::new(pd, cq)
        };
        let (qp, _) = rnic.create_qp(&attr).expect("qp");
        let mr = MrAttr {
            pd,
            region: ARENA,
            region_offset: 0,
            len: ARENA_LEN,
            va: 0,
            zero_based: true,
            access: Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            key: 1,
            remote_access_flag: true,
        };
        let stag = rnic.reg_mr(&mr, Some(ARENA_LEN)).expect("mr");
        cx.own_qp(qp);
        (qp, cq, stag)
    })
}

fn run(len: u32, count: u64, depth: u32) {
    let cfg = TestbedConfig {
        arena_bytes: ARENA_LEN as usize,
        mtu: 9000,
        ..TestbedConfig::default()
    };
    let mut tb = Testbed::new(&cfg).expect("testbed");
    tb.exec(Which::B, 0, |cx| cx.listen(4791, 4))
        .expect("listen");
    let (qa, cqa, mra) = verbs(&mut tb, Which::A);
    let (qb, _, mrb) = verbs(&mut tb, Which::B);
    tb.exec(Which::A, 0, move |cx| {
        cx.connect(qa, SocketAddrV4::new(IP_B, 4791), ConnectParams::default())
    })
    .expect("connect");
    let (_, req) = tb.wait_event(Which::B, |e| matches!(e, Event::ConnectRequest { .. }));
    let Event::ConnectRequest { conn, .. } = req else {
        unreachable!()
    };
    tb.exec(Which::B, 0, move |cx| {
        cx.accept(conn, qb, AcceptParams::default())
    })
    .expect("accept");
    tb.wait_event(Which::A, |e| matches!(e, Event::Established { .. }));
    // The QP goes to the app: its events are the app's from now on.
    tb.exec(Which::A, 0, move |cx| cx.release(qa));
    let app = WriteLoop::new(qa, cqa, mra, mrb, len, depth, count);
    let stats = app.stats.clone();
    tb.call(Which::A, 0, Op::StartApp(AppBox(Box::new(app))))
        .expect("start");
    let t = std::time::Instant::now();
    let mut steps = 0u64;
    while stats.completed.load(Relaxed) < count && steps < 100_000_000 {
        tb.step();
        steps += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    let done = stats.completed.load(Relaxed);
    let s = tb.a.cores[0].final_snapshot(tb.clock.now());
    println!(
        "{len:>6} B WRITEs: {done} in {secs:.3} s = {:.2} Gbit/s goodput, {:.3} M msg/s \
         ({} frames out, {} retransmissions, {} loop iterations per side)",
        done as f64 * f64::from(len) * 8.0 / secs / 1e9,
        done as f64 / secs / 1e6,
        s.total().c.frames_tx,
        s.total().c.tcp_retransmissions,
        s.core.iterations,
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n_big = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let n_small = args.next().and_then(|a| a.parse().ok()).unwrap_or(500_000);
    run(64 * 1024, n_big, 16);
    run(64, n_small, 256);
}
