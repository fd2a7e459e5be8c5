//! The `tokio` feature against the fake daemon: futures polled by hand, so that the
//! order of events is exact (no reactor turn happens in between).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use super::{cqe, start};
use crate::*;

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter::default());
    (c.clone(), Waker::from(c))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap()
}

#[test]
fn next_returns_what_is_there_and_arms_when_empty() {
    let (d, ctx) = start(2);
    let rt = runtime();
    let _g = rt.enter();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq(8, Some(&ch)).unwrap();
    let h = cq.handle();
    d.push_cqe(h.0, 1, &cqe(5, 1));
    let (_, w) = counter();
    let mut cx = TaskContext::from_waker(&w);
    {
        let mut f = pin!(cq.next());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(c)) => assert_eq!(c.wr_id, 5),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(d.arm_state(h.0), 0, "not armed when not empty");
    let mut f = pin!(cq.next());
    assert!(f.as_mut().poll(&mut cx).is_pending());
    assert_eq!(d.arm_state(h.0), 1, "armed before waiting");
    // A CQ without a channel cannot wait.
    let mut lone = ctx.create_cq(8, None).unwrap();
    let mut f = pin!(lone.next());
    assert!(matches!(
        f.as_mut().poll(&mut cx),
        Poll::Ready(Err(Error::InvalidArgument(_)))
    ));
}

/// Two CQs on one channel, each awaited by its own task: the task of CQ 1 drains the
/// eventfd and collects the notification of CQ 2, which the reactor then never reports
/// (the eventfd is no longer readable when it looks): the task of CQ 2 must be woken by
/// the collector, else it waits forever.
#[test]
fn a_notification_collected_by_another_cqs_waiter_wakes_its_own() {
    let (d, ctx) = start(1);
    let rt = runtime();
    let _g = rt.enter();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq1 = ctx.create_cq(8, Some(&ch)).unwrap();
    let mut cq2 = ctx.create_cq(8, Some(&ch)).unwrap();
    let h2 = cq2.handle();
    let (c2, w2) = counter();
    let (_c1, w1) = counter();
    let mut cx2 = TaskContext::from_waker(&w2);
    let mut cx1 = TaskContext::from_waker(&w1);

    let mut f2 = pin!(cq2.next());
    assert!(f2.as_mut().poll(&mut cx2).is_pending());
    assert_eq!(d.arm_state(h2.0), 1);
    // The core completes into CQ 2 and fires; the control thread writes the eventfd.
    d.push_cqe(h2.0, 0, &cqe(9, 2));
    assert!(d.fire(h2.0, false));
    d.wake_channel(0);
    // CQ 1's waiter runs first and drains the eventfd.
    let mut f1 = pin!(cq1.next());
    assert!(f1.as_mut().poll(&mut cx1).is_pending());
    assert!(
        c2.0.load(Ordering::SeqCst) > 0,
        "CQ 2's waiter was not woken"
    );
    match f2.as_mut().poll(&mut cx2) {
        Poll::Ready(Ok(c)) => assert_eq!(c.wr_id, 9),
        other => panic!("CQ 2: {other:?}"),
    }
    assert!(f1.as_mut().poll(&mut cx1).is_pending(), "nothing for CQ 1");
}

#[test]
fn streams_and_waits_end_with_daemon_gone() {
    let (d, ctx) = start(1);
    // Outside a runtime: an error, not a panic.
    let cm = ctx.create_cm_event_channel().unwrap();
    assert!(matches!(cm.into_stream(), Err(Error::InvalidArgument(_))));
    let rt = runtime();
    rt.block_on(async {
        let ch = ctx.create_comp_channel().unwrap();
        let mut cq = ctx.create_cq(8, Some(&ch)).unwrap();
        let mut cm = ctx
            .create_cm_event_channel()
            .unwrap()
            .into_stream()
            .unwrap();
        let mut events = ctx.async_event_stream().unwrap();
        assert!(
            matches!(ctx.async_event_stream(), Err(Error::Io(_))),
            "one async event stream per context"
        );
        let kill = async {
            tokio::task::yield_now().await;
            d.kill();
        };
        let (r, e, a, ()) = tokio::join!(cq.next(), cm.get_event(), events.get_event(), kill);
        assert!(matches!(r, Err(Error::DaemonGone)), "{r:?}");
        assert!(matches!(e, Err(Error::DaemonGone)), "{e:?}");
        assert!(matches!(a, Err(Error::DaemonGone)), "{a:?}");
        let end = std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut cm), cx)
        })
        .await;
        assert!(end.is_none(), "the stream ended");
    });
}
