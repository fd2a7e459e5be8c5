//! When the daemon goes away, clients get a clear error, never a hang (issue 4, scope 8):
//! after SIGKILL every call, post, poll and event wait of a client of that daemon answers
//! `DaemonGone` within a bounded time; after SIGTERM the same, and the peer of its
//! connection sees a disconnect; a restarted daemon serves new contexts, while old
//! contexts stay gone (they never reconnect silently to a daemon that lost their state).

use std::time::{Duration, Instant};

use iwarp_apps::side::*;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];

/// How long a client may take to notice its daemon is gone: at once (milliseconds, see
/// scripts/restart-loop.sh's figures); the bound is for a starved test machine.
const NOTICE: Duration = Duration::from_secs(10);

fn gone<T: std::fmt::Debug>(what: &str, r: Result<T>) {
    match r {
        Err(Error::DaemonGone) => {}
        other => panic!("{what}: expected DaemonGone, got {other:?}"),
    }
}

/// Waits until a cheap call answers DaemonGone; returns how long that took.
fn wait_gone(ctx: &Context) -> Duration {
    let start = Instant::now();
    loop {
        match ctx.alloc_pd() {
            Err(Error::DaemonGone) => return start.elapsed(),
            Err(e) if start.elapsed() < NOTICE => {
                let _ = e;
            }
            Ok(_) if start.elapsed() < NOTICE => {}
            other => panic!("no DaemonGone within {NOTICE:?}: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_everything_gone(b: &mut Side, bqp: &mut Qp) {
    let took = wait_gone(&b.ctx);
    assert!(took < NOTICE, "noticed in {took:?}");
    assert!(b.ctx.is_daemon_gone());
    let sge = b.mr.sge(0, 64).unwrap();
    gone("post_send", bqp.post_send(&wr(1, SendOp::Send, &[sge])));
    gone(
        "post_recv",
        bqp.post_recv(&RecvWr {
            wr_id: 2,
            sgl: SgList::single(sge),
        }),
    );
    let mut wc = [EMPTY_CQE; 4];
    gone("poll", b.cq.poll(&mut wc));
    gone("alloc_arena", b.ctx.alloc_arena(4096).map(|_| ()));
    gone("query_qp", bqp.query());
    // Blocking waits return at once instead of hanging (well before their 30 s).
    let t = Instant::now();
    gone(
        "cm get_event",
        b.cm.get_event_timeout(Duration::from_secs(30)).map(|_| ()),
    );
    gone(
        "async event",
        b.ctx.get_async_event_timeout(Duration::from_secs(30)),
    );
    assert!(t.elapsed() < NOTICE, "waits returned in {:?}", t.elapsed());
}

#[test]
fn killed_daemon_gives_daemon_gone_and_a_restart_serves_new_clients() {
    if skip("killed_daemon_gives_daemon_gone_and_a_restart_serves_new_clients") {
        return;
    }
    let _lock = SystemLock::acquire();
    let mut pair = DaemonPair::start("rstk");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, _aid, mut bqp, _bid) = connect(&mut a, A_IP, &mut b, 9501, b"", b"");

    pair.b.kill();
    check_everything_gone(&mut b, &mut bqp);

    // The restarted daemon serves a new context; the old one stays gone.
    pair.b.restart();
    let b2 = Side::open("B2", &pair.b.socket);
    assert!(b2.ctx.alloc_pd().is_ok());
    gone("old context after restart", b.ctx.alloc_pd().map(|_| ()));
    // Daemon A still serves its client.
    assert!(a.ctx.alloc_pd().is_ok());
}

#[test]
fn stopped_daemon_gives_daemon_gone_and_the_peer_sees_a_disconnect() {
    if skip("stopped_daemon_gives_daemon_gone_and_the_peer_sees_a_disconnect") {
        return;
    }
    let _lock = SystemLock::acquire();
    let mut pair = DaemonPair::start("rsts");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, aid, mut bqp, _bid) = connect(&mut a, A_IP, &mut b, 9502, b"", b"");

    pair.b.stop();
    check_everything_gone(&mut b, &mut bqp);
    let ev =
        a.cm.get_event_timeout(WAIT)
            .unwrap_or_else(|e| panic!("A: no CM event: {e}\n{}", pair.logs()));
    assert_eq!(ev.id, aid.handle(), "{ev:?}");
    assert!(matches!(ev.event, CmEvent::Disconnected), "A sees {ev:?}");
}
