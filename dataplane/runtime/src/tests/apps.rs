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

/// Holds a receive it hands to the engine only in `before_frames`, as the shared-memory
/// service hands over receives posted to rings it has not served yet.
struct LateReceiver {
    qp: iwarp_types::QpId,
    wr: Option<iwarp_types::RecvWr>,
}

impl<M: iwarp_types::Memory> crate::app::App<M> for LateReceiver {
    fn on_event(
        &mut self,
        _: iwarp_types::Instant,
        _: &mut iwarp_engine::Engine,
        _: &mut M,
        _: &Event,
    ) -> bool {
        false
    }
    fn poll(&mut self, _: iwarp_types::Instant, _: &mut iwarp_engine::Engine, _: &mut M) {}
    fn before_frames(
        &mut self,
        _: iwarp_types::Instant,
        engine: &mut iwarp_engine::Engine,
        _: &mut M,
    ) {
        if let Some(wr) = self.wr.take() {
            engine.post_recv(self.qp, &wr).expect("post_recv");
        }
    }
    fn poll_timeout(&self) -> Option<iwarp_types::Instant> {
        None
    }
    fn shutdown(&mut self, _: iwarp_types::Instant, _: &mut iwarp_engine::Engine, _: &mut M) {}
    fn is_idle(&self) -> bool {
        true
    }
}

#[test]
fn apps_hand_over_receives_before_the_frames_of_a_burst_are_handled() {
    let mut tb = Testbed::new(&TestbedConfig::default()).unwrap();
    tb.a.cores[0].mem_mut().arena_mut(ARENA)[..5].copy_from_slice(b"hello");
    listen_all(&mut tb, Which::B);
    let a = verbs(&mut tb, Which::A, 0, 1 << 20);
    let c = connect(&mut tb, 0, a, 1 << 20);
    // B's receive exists only once `before_frames` ran: the Send's burst must call it
    // before the Send is handled (after it, or never: no buffer, a Terminate).
    let app = LateReceiver {
        qp: c.b.qp,
        wr: Some(iwarp_types::RecvWr {
            wr_id: 0xb1,
            sgl: iwarp_types::SgList::single(iwarp_types::Sge {
                addr: 0x100,
                length: 64,
                lkey: c.b.mr,
            }),
        }),
    };
    let Done::AppStarted(_) = tb
        .call(Which::B, c.b_core, Op::StartApp(AppBox(Box::new(app))))
        .unwrap()
    else {
        panic!("start")
    };
    post_send(
        &mut tb,
        Which::A,
        0,
        c.a.qp,
        wr(0xa1, iwarp_types::SendOp::Send, 0, 5, c.a.mr),
    )
    .unwrap();
    let cb = wait_cqe(&mut tb, Which::B, c.b_core, c.b.cq);
    assert_eq!(
        (cb.wr_id, cb.status, cb.byte_len),
        (0xb1, iwarp_types::WcStatus::Success, 5)
    );
    assert_eq!(
        &tb.b.cores[c.b_core].mem().arena(ARENA)[0x100..0x105],
        b"hello"
    );
    let ca = wait_cqe(&mut tb, Which::A, 0, c.a.cq);
    assert_eq!(
        (ca.wr_id, ca.status),
        (0xa1, iwarp_types::WcStatus::Success)
    );
}
