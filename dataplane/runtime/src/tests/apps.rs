//! Apps inside the loop: started and stopped by command, polled every iteration, given
//! their QP's events, told to shut down.

use std::sync::atomic::Ordering::Relaxed;

use iwarp_engine::Event;

use super::helpers::*;
use crate::control::{AppBox, AppId, ControlError, Done, Op};
use crate::testutil::{Testbed, TestbedConfig, Which, WriteLoop, ARENA};

#[test]
fn an_app_streams_writes_and_shuts_down_with_the_core() {
    let mut tb = Testbed::new(&TestbedConfig::default()).unwrap();
    let src = pattern(64 * 1024, 9);
    tb.a.cores[0].mem_mut().arena_mut(ARENA)[..src.len()].copy_from_slice(&src);
    listen_all(&mut tb, Which::B);
    let a = verbs(&mut tb, Which::A, 0, 1 << 20);
    let c = connect(&mut tb, 0, a, 1 << 20);
    // The console hands the QP to the app: its events are the app's from now on.
    let qa = c.a.qp;
    tb.exec(Which::A, 0, move |cx| cx.release(qa));
    let app = WriteLoop::new(c.a.qp, c.a.cq, c.a.mr, c.b.mr, 64 * 1024, 8, 50);
    let stats = app.stats.clone();
    let Done::AppStarted(_) = tb
        .call(Which::A, 0, Op::StartApp(AppBox(Box::new(app))))
        .unwrap()
    else {
        panic!("start")
    };
    assert!(tb.run_until(200_000, |_| stats.completed.load(Relaxed) == 50));
    assert_eq!(stats.errors.load(Relaxed), 0);
    assert_eq!(&tb.b.cores[0].mem().arena(ARENA)[..64 * 1024], &src[..]);
    let s = tb.a.cores[0].final_snapshot(tb.clock.now());
    assert_eq!(s.core.apps, 2, "the console and the app");
    assert!(s.total().c.bytes_tx > 50 * 64 * 1024, "{s}");

    // Shutdown: the app disconnects its QP, takes the Disconnected event, is idle.
    tb.call(Which::A, 0, Op::Shutdown { grace_ms: 1_000 })
        .unwrap();
    assert!(tb.run_until(100_000, |tb| tb.a.cores[0].is_finished()));
    let qb = c.b.qp;
    tb.wait_event(
        Which::B,
        |e| matches!(e, Event::Disconnected { qp, .. } if *qp == qb),
    );
    assert!(
        tb.take_event(Which::A, |e| matches!(e, Event::Disconnected { .. }))
            .is_none(),
        "the app took its QP's event"
    );
}

#[test]
fn apps_are_stopped_and_handed_back() {
    let mut tb = Testbed::new(&TestbedConfig::default()).unwrap();
    let app = idle_app();
    let Done::AppStarted(id) = tb
        .call(Which::A, 0, Op::StartApp(AppBox(Box::new(app))))
        .unwrap()
    else {
        panic!("start")
    };
    let Done::AppStopped(_app) = tb.call(Which::A, 0, Op::StopApp(id)).unwrap() else {
        panic!("stop")
    };
    assert_eq!(
        tb.call(Which::A, 0, Op::StopApp(id)).unwrap_err(),
        ControlError::NoSuchApp
    );
    assert_eq!(
        tb.call(Which::A, 0, Op::StopApp(AppId(999))).unwrap_err(),
        ControlError::NoSuchApp
    );
}
