//! The `tokio` feature of the client crate against two daemons: CM events as a `Stream`,
//! `Cq::next().await` on a send and a receive CQ that share one completion channel and
//! wait at the same time, ping-pong with verified data between two tasks of one
//! current-thread runtime (every wait is a real wake-up through the eventfd and the
//! reactor), and a killed daemon ending every wait with `DaemonGone` (never a hang).

use std::net::SocketAddrV4;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use iwarp_apps::side::{pattern, ARENA_BYTES};
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const PORT: u16 = 7180;
const ROUNDS: u64 = 100;
const MSG: u32 = 1024;
/// Receives posted ahead (the n-th message lands in the n-th receive).
const AHEAD: u64 = 8;
/// Liveness only: the whole exchange on a loaded 2-core machine.
const LIVENESS: Duration = Duration::from_secs(120);

struct Side {
    _ctx: Context,
    pd: Pd,
    send_cq: Cq,
    recv_cq: Cq,
    arena: Arena,
    mr: Mr,
    cm: CmEventStream,
    _chan: CompChannel,
}

impl Side {
    fn open(socket: &std::path::Path) -> Side {
        let ctx = Context::open_path(socket).expect("open");
        let pd = ctx.alloc_pd().expect("alloc_pd");
        let chan = ctx.create_comp_channel().expect("comp channel");
        // Both CQs on one channel: their waits must not steal each other's wake-ups.
        let send_cq = ctx.create_cq(64, Some(&chan)).expect("send cq");
        let recv_cq = ctx.create_cq(64, Some(&chan)).expect("recv cq");
        let arena = ctx.alloc_arena(ARENA_BYTES).expect("arena");
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mr = pd.reg_mr(&arena, 0, ARENA_BYTES, access).expect("reg_mr");
        let cm = ctx
            .create_cm_event_channel()
            .expect("cm channel")
            .into_stream()
            .expect("into_stream inside the runtime");
        Side {
            _ctx: ctx,
            pd,
            send_cq,
            recv_cq,
            arena,
            mr,
            cm,
            _chan: chan,
        }
    }

    fn qp_attr(&self) -> QpInitAttr<'_> {
        let mut a = QpInitAttr::new(&self.send_cq, &self.recv_cq);
        a.sq_sig_all = true;
        a
    }

    fn slot(n: u64) -> u64 {
        (n % AHEAD) * MSG as u64
    }

    fn post_recv(&self, qp: &mut Qp, n: u64) {
        let sge = self.mr.sge(Side::slot(n), MSG).expect("sge");
        qp.post_recv(&RecvWr {
            wr_id: n,
            sgl: SgList::single(sge),
        })
        .expect("post_recv");
    }

    fn post_ahead(&self, qp: &mut Qp) {
        for n in 0..AHEAD {
            self.post_recv(qp, n);
        }
        qp.query().expect("query orders after the posts");
    }

    /// Fills the send buffer with the pattern of `seed` and posts a SEND (wr_id `seed`).
    fn post_send(&mut self, qp: &mut Qp, seed: u64) {
        let off = AHEAD as usize * MSG as usize;
        pattern(
            &mut self.arena.as_mut_slice()[off..off + MSG as usize],
            seed as u8,
        );
        let sge = self.mr.sge(off as u64, MSG).expect("sge");
        qp.post_send(&SendWr {
            wr_id: seed,
            op: SendOp::Send,
            sgl: SgList::single(sge),
            flags: SendFlags::SIGNALED,
        })
        .expect("post_send");
    }

    /// Checks receive `n` (a completion) holds the pattern of `seed`, reposts it.
    fn check_recv(&self, qp: &mut Qp, c: &Cqe, n: u64, seed: u64) {
        assert_eq!(
            (c.wr_id, c.opcode, c.status, c.byte_len),
            (n, WcOpcode::Recv, WcStatus::Success, MSG),
            "receive {n}: {c:?}"
        );
        let off = Side::slot(n) as usize;
        let mut want = vec![0u8; MSG as usize];
        pattern(&mut want, seed as u8);
        assert!(
            self.arena.as_slice()[off..off + MSG as usize] == want[..],
            "receive {n}: wrong data"
        );
        self.post_recv(qp, n + AHEAD);
    }
}

/// The next CM event through the `Stream` impl.
async fn next_cm(s: &mut CmEventStream) -> Option<Result<CmEventInfo>> {
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

fn check_send(c: Cqe, seed: u64) {
    assert_eq!(
        (c.wr_id, c.opcode, c.status),
        (seed, WcOpcode::Send, WcStatus::Success),
        "send {seed}: {c:?}"
    );
}

/// A: answers each ping with a pong, waiting on one CQ at a time.
async fn serve(a: &mut Side, qp: &mut Qp) {
    for i in 0..ROUNDS {
        let c = a.recv_cq.next().await.expect("A: recv next");
        a.check_recv(qp, &c, i, 2 * i);
        a.post_send(qp, 2 * i + 1);
        check_send(a.send_cq.next().await.expect("A: send next"), 2 * i + 1);
    }
}

/// B: pings and waits for the pong, while another task waits for the completions of its
/// sends on the other CQ of the same channel (two tasks parked on one eventfd).
async fn ping(b: &mut Side, qp: &mut Qp, mut send_cq: Cq) -> Cq {
    let sends = tokio::task::spawn_local(async move {
        for i in 0..ROUNDS {
            check_send(send_cq.next().await.expect("B: send next"), 2 * i);
        }
        send_cq
    });
    for i in 0..ROUNDS {
        b.post_send(qp, 2 * i);
        let r = b.recv_cq.next().await;
        b.check_recv(qp, &r.expect("B: recv next"), i, 2 * i + 1);
    }
    sends.await.expect("B's send task")
}

#[test]
fn cq_next_and_cm_stream_on_tokio_between_two_daemons() {
    if skip("cq_next_and_cm_stream_on_tokio_between_two_daemons") {
        return;
    }
    let _lock = SystemLock::acquire();
    let mut pair = DaemonPair::start("as");

    // Outside a runtime the async API says so instead of panicking.
    let ctx = Context::open_path(&pair.b.socket).expect("open");
    let chan = ctx.create_cm_event_channel().expect("cm channel");
    assert!(
        matches!(chan.into_stream(), Err(Error::InvalidArgument(_))),
        "into_stream outside a runtime"
    );
    drop(ctx);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        tokio::time::timeout(LIVENESS, exchange(&mut pair))
            .await
            .unwrap_or_else(|_| panic!("async exchange hung for {LIVENESS:?}"))
    });
    drop(rt);
    pair.a.wait_objects_freed(&[], Duration::from_secs(10));
}

async fn exchange(pair: &mut DaemonPair) {
    let mut a = Side::open(&pair.a.socket);
    let mut b = Side::open(&pair.b.socket);

    // A CQ without a channel cannot wait.
    let mut lone = b._ctx.create_cq(4, None).expect("cq");
    assert!(matches!(lone.next().await, Err(Error::InvalidArgument(_))));

    let listener = a.cm.channel().create_id().expect("listener");
    listener.listen(PORT, 4).expect("listen");
    let mut bqp = b.pd.create_qp(&b.qp_attr()).expect("B qp");
    b.post_ahead(&mut bqp);
    let bid = b.cm.channel().create_id().expect("B id");
    let remote = SocketAddrV4::new(pair.a.ip.into(), PORT);
    bid.connect(&bqp, remote, &ConnParam::default())
        .expect("connect");

    let ev = next_cm(&mut a.cm)
        .await
        .expect("A stream")
        .expect("A event");
    assert_eq!(ev.id, listener.handle());
    assert!(matches!(ev.event, CmEvent::ConnectRequest { .. }), "{ev:?}");
    let aid = ev.request.expect("request id");
    let mut aqp = aid.create_qp(&a.pd, &a.qp_attr()).expect("A qp");
    a.post_ahead(&mut aqp);
    aid.accept(&aqp, &ConnParam::default()).expect("accept");
    let ev = b.cm.get_event().await.expect("B event");
    assert!(
        matches!(ev.event, CmEvent::Established { qp, .. } if qp == bqp.handle()),
        "{ev:?}"
    );
    let ev = next_cm(&mut a.cm)
        .await
        .expect("A stream")
        .expect("A event");
    assert!(matches!(ev.event, CmEvent::Established { .. }), "{ev:?}");

    // Ping-pong between two tasks of this one thread: each wait really parks.
    let b_send_cq = std::mem::replace(&mut b.send_cq, lone);
    let (_, b_send_cq) = tokio::join!(serve(&mut a, &mut aqp), ping(&mut b, &mut bqp, b_send_cq));
    let lone = std::mem::replace(&mut b.send_cq, b_send_cq);

    // Daemon B killed while B waits for a completion and for a CM event: both end
    // with DaemonGone, the stream then ends.
    let gone = async {
        // A removal notice may come first (orderly shutdown); a SIGKILL sends none.
        loop {
            match next_cm(&mut b.cm).await {
                Some(Ok(CmEventInfo {
                    event: CmEvent::DeviceRemoval,
                    ..
                })) => continue,
                other => break other,
            }
        }
    };
    let (r, ev, ()) = tokio::join!(b.recv_cq.next(), gone, async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        pair.b.kill();
    });
    assert!(
        matches!(r, Err(Error::DaemonGone)),
        "B recv after kill: {r:?}"
    );
    assert!(
        matches!(ev, Some(Err(Error::DaemonGone))),
        "B CM stream after kill: {ev:?}"
    );
    assert!(next_cm(&mut b.cm).await.is_none(), "stream ended");
    assert!(matches!(b.send_cq.next().await, Err(Error::DaemonGone)));
    drop((aqp, aid, listener, lone));
}
