//! The server against fake cores over socket pairs: Hello and policy, objects across
//! cores, isolation, malformed frames, admin totals, teardown on close (the harness is
//! [`crate::testkit`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use iwarp_shm_mem::RegionTable;
use iwarp_shm_socket::*;

use crate::testkit::*;
use crate::{AccountDb, ControlConfig, ControlServer, Policy};

#[test]
fn objects_span_cores_stay_private_and_go_with_their_client() {
    let (mut s, log, regions) = server(false);
    let (mut p, w) = connect(&mut s);
    assert_eq!(w.doorbells.len(), 2);
    let pd = ok(p.call(&mut s, Request::AllocPd), |r| {
        if let Response::Pd(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let cq = ok(
        p.call(
            &mut s,
            Request::CreateCq(CqCreate {
                depth: 16,
                channel: None,
            }),
        ),
        |r| {
            if let Response::Cq(x) = r {
                Some(x)
            } else {
                None
            }
        },
    );
    assert_eq!(cq.rings.len(), 2, "one sub-ring per core");
    let qp = QpCreate::new(pd, cq.cq);
    let q = ok(p.call(&mut s, Request::CreateQp(qp)), |r| {
        if let Response::Qp(x) = r {
            Some(x)
        } else {
            None
        }
    });
    assert!(q.rq.is_some() && q.sq.doorbell_bit != q.rq.unwrap().doorbell_bit);
    let (r, fds) = p.call(
        &mut s,
        Request::AllocArena {
            len: 8192,
            hugepages_required: false,
        },
    );
    let arena = match r.unwrap() {
        Response::Arena { arena, .. } => arena,
        o => panic!("{o:?}"),
    };
    assert_eq!(fds.len(), 1);
    assert_eq!(regions.len(), 1);
    let reg = MrReg {
        pd,
        arena,
        offset: 0,
        len: 4096,
        va: 0,
        zero_based: true,
        access: AccessFlags::LOCAL_WRITE,
    };
    ok(p.call(&mut s, Request::RegMr(reg)), |r| {
        if let Response::Stag(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let e = p
        .call(&mut s, Request::RegMr(MrReg { len: 8193, ..reg }))
        .0
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidLength);
    assert_eq!(
        p.call(&mut s, Request::DeallocPd(pd)).0.unwrap_err().code,
        ErrorCode::InUse
    );

    // Another client cannot name any of it.
    let (mut o, w2) = connect(&mut s);
    assert_ne!(w2.client_id, w.client_id);
    assert_eq!(
        o.call(&mut s, Request::DeallocPd(pd)).0.unwrap_err().code,
        ErrorCode::NoSuchObject
    );
    assert_eq!(
        o.call(&mut s, Request::DestroyCq(cq.cq))
            .0
            .unwrap_err()
            .code,
        ErrorCode::NoSuchObject
    );
    assert_eq!(
        o.call(&mut s, Request::FreeArena(arena))
            .0
            .unwrap_err()
            .code,
        ErrorCode::NoSuchObject
    );
    assert_eq!(
        o.call(&mut s, Request::QueryQp(q.qp)).0.unwrap_err().code,
        ErrorCode::NoSuchObject
    );
    // Malformed frames get BadMessage; Hello twice is NotReady.
    o.chan.send_raw(b"not a frame", &[]).unwrap();
    assert_eq!(o.reply(&mut s).0.unwrap_err().code, ErrorCode::BadMessage);
    let e = o
        .call(
            &mut s,
            Request::Hello {
                version: PROTOCOL_VERSION,
                name: "x".into(),
            },
        )
        .0
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotReady);

    let status = ok(o.call(&mut s, Request::Admin(AdminRequest::Status)), |r| {
        if let Response::Admin(AdminResponse::Status(x)) = r {
            Some(x)
        } else {
            None
        }
    });
    assert_eq!(
        (
            status.totals.pds,
            status.totals.cqs,
            status.totals.qps,
            status.totals.mrs,
            status.totals.arenas
        ),
        (1, 1, 1, 1, 1)
    );
    assert_eq!(status.clients, 2);

    // Killed: the socket closes; everything goes, on every core, arenas last.
    drop(p);
    for _ in 0..20 {
        s.step(Duration::from_millis(1));
    }
    assert_eq!(s.clients(), 1);
    assert_eq!(regions.len(), 0, "arena left the region table");
    let l = log.lock().unwrap();
    assert_eq!(
        l.detached,
        vec![w.client_id, w.client_id],
        "detached on both cores"
    );
    let fences = l
        .requests
        .iter()
        .rposition(|r| r.ends_with(":Fence"))
        .unwrap();
    let detach = l
        .requests
        .iter()
        .rposition(|r| r.ends_with(":DetachClient"))
        .unwrap();
    assert!(fences > detach, "fence after detach: {:?}", l.requests);
    drop(l);
    let status = ok(o.call(&mut s, Request::Admin(AdminRequest::Status)), |r| {
        if let Response::Admin(AdminResponse::Status(x)) = r {
            Some(x)
        } else {
            None
        }
    });
    assert_eq!(status.totals, ObjectTotals::default());
}

#[test]
fn replication_failure_rolls_back_and_limits_hold() {
    let (mut s, log, _) = server(true);
    let (mut p, _) = connect(&mut s);
    let pd = ok(p.call(&mut s, Request::AllocPd), |r| {
        if let Response::Pd(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let e = p
        .call(
            &mut s,
            Request::AllocMw {
                pd,
                kind: MwKind::Type1,
            },
        )
        .0
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InsufficientResources);
    assert!(
        log.lock()
            .unwrap()
            .requests
            .iter()
            .any(|r| r == "0:DeallocStag"),
        "core 0 rolled back"
    );
    for _ in 0..7 {
        p.call(&mut s, Request::AllocPd).0.unwrap();
    }
    assert_eq!(
        p.call(&mut s, Request::AllocPd).0.unwrap_err().code,
        ErrorCode::LimitReached
    );
    let e = p
        .call(
            &mut s,
            Request::AllocArena {
                len: 2 << 20,
                hugepages_required: false,
            },
        )
        .0
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::LimitReached);
    assert_eq!(
        p.call(&mut s, Request::Admin(AdminRequest::Clients))
            .0
            .map(|_| ()),
        Ok(())
    );
}

#[test]
fn refused_peers_and_versions() {
    let (mut s, _, _) = server(false);
    let (a, b) = Channel::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    s.adopt(b).unwrap();
    let mut p = Peer { chan: a, seq: 0 };
    let (r, _) = p.call(
        &mut s,
        Request::Hello {
            version: PROTOCOL_VERSION + 1,
            name: "v".into(),
        },
    );
    assert_eq!(r.unwrap_err().code, ErrorCode::VersionMismatch);
    assert_eq!(s.stats().refused_protocol, 1);
    let db = AccountDb::from_text("", "");
    s.set_policy(Policy::resolve(&db, &[], &[], &[]).unwrap(), db);
    let (a, b) = Channel::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap()
        == 0;
    if root {
        s.adopt(b).expect("root is always admitted");
        let mut p = Peer { chan: a, seq: 0 };
        let (r, _) = p.call(
            &mut s,
            Request::Hello {
                version: PROTOCOL_VERSION,
                name: "u".into(),
            },
        );
        assert!(r.is_ok(), "root is always admitted");
    } else {
        assert_eq!(s.adopt(b), None, "refused at accept");
        assert_eq!(early_refusal(&a), ErrorCode::PermissionDenied);
    }
}

fn port(index: u32, ip: [u8; 4]) -> PortAttr {
    PortAttr {
        index,
        ip,
        prefix_len: 24,
        mac: [2, 0, 0, 0, 0, index as u8],
        mtu: 1500,
        device: format!("net_memif{index}"),
        link_up: true,
        speed_mbps: 0,
        ..PortAttr::default()
    }
}

#[test]
fn two_ports_active_qps_leave_by_port_0_and_listens_follow_the_address() {
    let log = Arc::new(Mutex::new(Log::default()));
    // Services 0 and 1 drive port 0 (cores 0, 1); services 2 and 3 port 1.
    let cores = fake_cores(4, &log, false);
    let regions = Arc::new(RegionTable::new(64));
    let cfg = ControlConfig {
        max_objects: 8,
        max_arena_bytes: 1 << 20,
        ..ControlConfig::default()
    };
    let ports = vec![port(0, [10, 0, 0, 1]), port(1, [10, 0, 0, 2])];
    let mut s = ControlServer::new(cfg, cores, regions, device(), ports, None).unwrap();
    assert!(
        s.set_service_ports(vec![0, 1]).is_err(),
        "one port per service"
    );
    assert!(s.set_service_ports(vec![0, 0, 2, 2]).is_err(), "no port 2");
    assert!(
        s.set_service_ports(vec![1, 1, 1, 1]).is_err(),
        "active QPs need port 0"
    );
    s.set_service_ports(vec![0, 0, 1, 1]).unwrap();
    admit_self(&mut s);
    let (mut p, w) = connect(&mut s);
    assert_eq!(
        w.doorbells.len(),
        4,
        "a doorbell block per (core, port) service"
    );

    let pd = ok(p.call(&mut s, Request::AllocPd), |r| {
        if let Response::Pd(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let cq = ok(
        p.call(
            &mut s,
            Request::CreateCq(CqCreate {
                depth: 64,
                channel: None,
            }),
        ),
        |r| {
            if let Response::Cq(x) = r {
                Some(x)
            } else {
                None
            }
        },
    );
    let qp = QpCreate {
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
        },
        ..QpCreate::new(pd, cq.cq)
    };
    let mut placed = Vec::new();
    for _ in 0..4 {
        let q = ok(p.call(&mut s, Request::CreateQp(qp)), |r| {
            if let Response::Qp(x) = r {
                Some(x)
            } else {
                None
            }
        });
        placed.push(q.core);
    }
    placed.sort_unstable();
    assert_eq!(
        placed,
        vec![0, 0, 1, 1],
        "active QPs spread over the services of port 0 only"
    );

    let listens = |log: &Arc<Mutex<Log>>| -> Vec<String> {
        let mut l = log.lock().unwrap();
        let v = l
            .requests
            .iter()
            .filter(|r| r.ends_with("isten"))
            .cloned()
            .collect();
        l.requests.clear();
        v
    };
    listens(&log);
    let id = ok(p.call(&mut s, Request::CreateCmId), |r| {
        if let Response::CmId(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let addr = Addr {
        ip: [10, 0, 0, 2],
        port: 7000,
    };
    p.call(
        &mut s,
        Request::Listen {
            id,
            addr,
            backlog: 4,
        },
    )
    .0
    .unwrap();
    assert_eq!(
        listens(&log),
        vec!["2:Listen", "3:Listen"],
        "only the services of the port with that address"
    );
    p.call(&mut s, Request::DestroyCmId(id)).0.unwrap();
    assert_eq!(listens(&log), vec!["2:Unlisten", "3:Unlisten"]);
    let id = ok(p.call(&mut s, Request::CreateCmId), |r| {
        if let Response::CmId(x) = r {
            Some(x)
        } else {
            None
        }
    });
    p.call(
        &mut s,
        Request::Listen {
            id,
            addr: Addr {
                ip: [0; 4],
                port: 7000,
            },
            backlog: 4,
        },
    )
    .0
    .unwrap();
    assert_eq!(
        listens(&log),
        vec!["0:Listen", "1:Listen", "2:Listen", "3:Listen"],
        "0.0.0.0: every service"
    );
    let id2 = ok(p.call(&mut s, Request::CreateCmId), |r| {
        if let Response::CmId(x) = r {
            Some(x)
        } else {
            None
        }
    });
    let e = p
        .call(
            &mut s,
            Request::Listen {
                id: id2,
                addr: Addr {
                    ip: [10, 0, 0, 9],
                    port: 7001,
                },
                backlog: 4,
            },
        )
        .0
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NoRoute);
}

// --- Admission: policy at accept, full daemon, per-uid and pending bounds, Hello deadline.

/// A server over fake cores with `cfg`, admitting uids 1000, 2000, 3000 and (admin) 0.
fn admission_server(cfg: ControlConfig) -> ControlServer<FakeCore> {
    let log = Arc::new(Mutex::new(Log::default()));
    let cores = fake_cores(2, &log, false);
    let regions = Arc::new(RegionTable::new(64));
    let mut s = ControlServer::new(cfg, cores, regions, device(), Vec::new(), None).unwrap();
    let db = AccountDb::from_text("", "");
    let users = ["1000".to_string(), "2000".into(), "3000".into()];
    s.set_policy(Policy::resolve(&db, &users, &[], &[]).unwrap(), db);
    s
}

fn cred(uid: u32) -> PeerCred {
    PeerCred {
        pid: u32::MAX,
        uid,
        gid: uid,
    }
}

/// A connection from `uid`, silent so far: the test's end, and the server's id if kept.
fn open_as(s: &mut ControlServer<FakeCore>, uid: u32) -> (Channel, Option<u32>) {
    let (a, b) = Channel::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let id = s.adopt_as(b, cred(uid));
    (a, id)
}

/// What a connection refused before its first message read: one reply with sequence
/// number 0, then end of file.
fn early_refusal(chan: &Channel) -> ErrorCode {
    let code = match chan.recv::<ServerMsg>() {
        Ok((
            ServerMsg::Reply {
                seq: 0,
                result: Err(e),
            },
            _,
        )) => e.code,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(
        matches!(chan.recv::<ServerMsg>(), Err(RecvError::Closed)),
        "closed after the refusal"
    );
    code
}

fn hello(s: &mut ControlServer<FakeCore>, chan: Channel) -> (Peer, Result<Response, ErrorReply>) {
    let mut p = Peer { chan, seq: 0 };
    let (r, _) = p.call(
        s,
        Request::Hello {
            version: PROTOCOL_VERSION,
            name: "t".into(),
        },
    );
    (p, r)
}

type LogLines = Arc<Mutex<Vec<(tracing::Level, String)>>>;

std::thread_local! {
    /// Where this thread's events go while a test captures them.
    static LOG_SINK: std::cell::RefCell<Option<LogLines>> = const { std::cell::RefCell::new(None) };
}

/// Stops the capture of this thread's events when dropped.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        LOG_SINK.with(|s| *s.borrow_mut() = None);
    }
}

/// Records the level and the message of every `tracing` event of this thread in `lines`
/// (until the guard is dropped). The recording layer is the process's global subscriber,
/// installed once: every callsite is then always enabled, whatever thread of the test
/// binary reaches it first (a thread-local subscriber lost events to callsites another
/// test's thread had already cached as disabled). Other threads' events are ignored.
fn capture_log(lines: &LogLines) -> CaptureGuard {
    use tracing_subscriber::layer::SubscriberExt;

    struct Capture;
    struct Message(String);
    impl tracing::field::Visit for Message {
        fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
            if f.name() == "message" {
                self.0 = format!("{v:?}");
            }
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
        fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            LOG_SINK.with(|sink| {
                if let Some(lines) = sink.borrow().as_ref() {
                    let mut m = Message(String::new());
                    e.record(&mut m);
                    lines.lock().unwrap().push((*e.metadata().level(), m.0));
                }
            });
        }
    }
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let _ =
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture));
        tracing::callsite::rebuild_interest_cache();
    });
    LOG_SINK.with(|s| *s.borrow_mut() = Some(Arc::clone(lines)));
    CaptureGuard
}

#[test]
fn users_the_policy_refuses_are_answered_at_once_and_hold_nothing() {
    let mut s = admission_server(ControlConfig::default());
    let lines = Arc::new(Mutex::new(Vec::<(tracing::Level, String)>::new()));
    let _log = capture_log(&lines);
    let start = std::time::Instant::now();
    let mut refused = Vec::new();
    for _ in 0..300 {
        let (chan, id) = open_as(&mut s, 65534);
        assert_eq!(id, None);
        assert_eq!(s.clients(), 0, "a refused connection holds no slot");
        refused.push(chan);
    }
    for chan in &refused {
        assert_eq!(early_refusal(chan), ErrorCode::PermissionDenied);
    }
    assert_eq!(s.stats().refused_policy, 300);
    assert_eq!(s.stats().refused, 300);
    // While the refused ends are still open, an admitted user gets in.
    let (chan, id) = open_as(&mut s, 1000);
    assert!(id.is_some());
    let (_p, r) = hello(&mut s, chan);
    assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
    // Logged: refusals (rate-limited), then the admission.
    let secs = start.elapsed().as_secs() as usize + 1;
    let lines = lines.lock().unwrap();
    let (first_level, first) = &lines[0];
    assert_eq!(*first_level, tracing::Level::WARN);
    assert!(
        first.contains("uid 65534") && first.contains("PermissionDenied"),
        "{first}"
    );
    assert!(
        lines.len() <= secs * crate::admission::LOG_LINES_PER_S as usize + 1,
        "{} lines in {secs} s",
        lines.len()
    );
    let (last_level, last) = lines.last().unwrap();
    assert_eq!(
        *last_level,
        tracing::Level::INFO,
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    assert!(last.contains("admitted: uid 1000"), "{last}");
}

#[test]
fn a_full_daemon_answers_daemon_full() {
    let cfg = ControlConfig {
        max_clients: 2,
        ..ControlConfig::default()
    };
    let mut s = admission_server(cfg);
    // Three connect before any says Hello: the third Hello finds the daemon full.
    let conns: Vec<Channel> = (0..3)
        .map(|_| {
            let (c, id) = open_as(&mut s, 1000);
            assert!(id.is_some());
            c
        })
        .collect();
    let mut kept = Vec::new();
    for (i, chan) in conns.into_iter().enumerate() {
        let (p, r) = hello(&mut s, chan);
        if i < 2 {
            assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
            kept.push(p);
        } else {
            assert_eq!(r.unwrap_err().code, ErrorCode::DaemonFull);
        }
    }
    // Full: a new connection is answered at once, whoever it is (root too: every core
    // service serves max_clients clients).
    for uid in [1000, 2000, 0] {
        let (chan, id) = open_as(&mut s, uid);
        assert_eq!(id, None);
        assert_eq!(early_refusal(&chan), ErrorCode::DaemonFull);
    }
    assert_eq!(s.stats().refused_full, 4);
    // One leaves: the next one gets in.
    let p = kept.pop().unwrap();
    drop(p);
    for _ in 0..10 {
        s.step(Duration::from_millis(1));
    }
    let (chan, _) = open_as(&mut s, 2000);
    let (_p, r) = hello(&mut s, chan);
    assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
}

#[test]
fn one_uid_cannot_crowd_out_another() {
    let cfg = ControlConfig {
        max_conns_per_uid: 4,
        max_pending: 6,
        ..ControlConfig::default()
    };
    let mut s = admission_server(cfg);
    // uid 3000 has two pending connections.
    let others: Vec<Channel> = (0..2).map(|_| open_as(&mut s, 3000).0).collect();
    // uid 2000 floods with silent connections: it only ever pushes out its own.
    let mut flood = Vec::new();
    for _ in 0..100 {
        let (chan, id) = open_as(&mut s, 2000);
        assert!(
            id.is_some(),
            "the newest is kept, the oldest of the same uid goes"
        );
        flood.push(chan);
        assert!(s.pending() <= 6);
    }
    assert_eq!(s.stats().pending_evicted, 96);
    assert_eq!(s.pending(), 6, "4 of uid 2000, 2 of uid 3000");
    for chan in &flood[..96] {
        assert_eq!(early_refusal(chan), ErrorCode::LimitReached);
    }
    for chan in &others {
        assert!(
            matches!(chan.recv::<ServerMsg>(), Err(RecvError::WouldBlock)),
            "uid 3000's connections are untouched"
        );
    }
    // The pending table is full; a third user gets in by pushing out the oldest
    // connection of the user holding the most (uid 2000).
    let (chan, id) = open_as(&mut s, 1000);
    assert!(id.is_some());
    assert_eq!(early_refusal(&flood[96]), ErrorCode::LimitReached);
    let (_legit, r) = hello(&mut s, chan);
    assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
    let mut kept = Vec::new();
    for chan in others {
        let (p, r) = hello(&mut s, chan);
        assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
        kept.push(p);
    }
    // A uid whose connections are all welcomed is refused past its bound.
    let mut mine = Vec::new();
    for _ in 0..3 {
        let (chan, _) = open_as(&mut s, 1000);
        let (p, r) = hello(&mut s, chan);
        assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
        mine.push(p);
    }
    let (chan, id) = open_as(&mut s, 1000);
    assert_eq!(id, None);
    assert_eq!(early_refusal(&chan), ErrorCode::LimitReached);
    assert_eq!(s.stats().refused_uid_limit, 1);
    // Root (an admin) is not bound per uid.
    let root: Vec<Peer> = (0..6)
        .map(|_| {
            let (chan, id) = open_as(&mut s, 0);
            assert!(id.is_some());
            let (p, r) = hello(&mut s, chan);
            assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
            p
        })
        .collect();
    assert_eq!(root.len(), 6);
}

#[test]
fn silent_connections_are_closed_at_the_hello_deadline() {
    // A long deadline: a silent connection stays (pending) across steps.
    let mut s = admission_server(ControlConfig {
        hello_timeout: Duration::from_secs(600),
        ..ControlConfig::default()
    });
    let (chan, id) = open_as(&mut s, 1000);
    assert!(id.is_some());
    for _ in 0..5 {
        s.step(Duration::from_millis(1));
    }
    assert_eq!(s.pending(), 1);
    assert!(matches!(
        chan.recv::<ServerMsg>(),
        Err(RecvError::WouldBlock)
    ));

    // A short one: closed with NotReady once it passed; a client that said Hello in
    // time is welcomed and stays.
    let mut s = admission_server(ControlConfig {
        hello_timeout: Duration::from_millis(20),
        ..ControlConfig::default()
    });
    let (silent, _) = open_as(&mut s, 1000);
    let (talker, _) = open_as(&mut s, 2000);
    let (mut talker, r) = hello(&mut s, talker);
    assert!(matches!(r, Ok(Response::Welcome(_))), "{r:?}");
    std::thread::sleep(Duration::from_millis(100));
    s.step(Duration::from_millis(1));
    let e = match silent.recv::<ServerMsg>() {
        Ok((
            ServerMsg::Reply {
                seq: 0,
                result: Err(e),
            },
            _,
        )) => e,
        other => panic!("expected NotReady, got {other:?}"),
    };
    assert_eq!(e.code, ErrorCode::NotReady);
    assert!(
        e.message.contains("control.hello_timeout_ms"),
        "{}",
        e.message
    );
    assert!(matches!(silent.recv::<ServerMsg>(), Err(RecvError::Closed)));
    assert_eq!(s.stats().hello_timeouts, 1);
    assert_eq!(s.pending(), 0);
    assert_eq!(s.clients(), 1);
    let (r, _) = talker.call(&mut s, Request::AllocPd);
    assert!(matches!(r, Ok(Response::Pd(_))), "{r:?}");
}

#[test]
fn query_port_answers_the_live_link_state() {
    // Issue 17 item 5: QueryPort answered the link read once at start-up (down while
    // a memif link came up a moment later, and for ever after).
    let log = Arc::new(Mutex::new(Log::default()));
    let cores = fake_cores(1, &log, false);
    let regions = Arc::new(RegionTable::new(64));
    let cfg = ControlConfig {
        max_objects: 8,
        max_arena_bytes: 1 << 20,
        ..ControlConfig::default()
    };
    let mut down = port(0, [10, 0, 0, 1]);
    down.link_up = false;
    let mut s = ControlServer::new(cfg, cores, regions, device(), vec![down], None).unwrap();
    admit_self(&mut s);
    let link = Arc::new(Mutex::new((true, 10_000u32, 1u64, 0u64)));
    let l2 = link.clone();
    s.set_links(Box::new(move |i| (i == 0).then(|| *l2.lock().unwrap())));
    let (mut p, w) = connect(&mut s);
    assert!(w.ports[0].link_up, "Welcome carries the live state");
    let query = |p: &mut Peer, s: &mut ControlServer<FakeCore>| {
        ok(p.call(s, Request::QueryPort(0)), |r| {
            if let Response::Port(a) = r {
                Some((a.link_up, a.speed_mbps, a.link_downs))
            } else {
                None
            }
        })
    };
    assert_eq!(query(&mut p, &mut s), (true, 10_000, 0));
    *link.lock().unwrap() = (false, 0, 1, 1);
    s.step(Duration::from_millis(1));
    assert_eq!(
        query(&mut p, &mut s),
        (false, 0, 1),
        "the link-down count follows"
    );
    assert!(!s.ports()[0].link_up);
}

/// A PD, a CQ and a QP of `p` (the QP's handle).
fn make_qp(p: &mut Peer, s: &mut ControlServer<FakeCore>) -> QpHandle {
    ok(try_make_qp(p, s), |r| match r {
        Response::Qp(x) => Some(x.qp),
        _ => None,
    })
}

/// A PD and a CQ of `p`, then the daemon's answer to creating a QP on them.
fn try_make_qp(
    p: &mut Peer,
    s: &mut ControlServer<FakeCore>,
) -> (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>) {
    let pd = ok(p.call(s, Request::AllocPd), |r| match r {
        Response::Pd(x) => Some(x),
        _ => None,
    });
    let cq = ok(
        p.call(
            s,
            Request::CreateCq(CqCreate {
                depth: 16,
                channel: None,
            }),
        ),
        |r| match r {
            Response::Cq(x) => Some(x),
            _ => None,
        },
    );
    let qp = QpCreate::new(pd, cq.cq);
    p.call(s, Request::CreateQp(qp))
}

/// Issue 15 item 5: one client holding QPs until refused must be stopped by its own
/// limit (`control.max_qps`), below what the cores hold, so that the next client still
/// gets a QP. Before, the limit was `control.max_objects` (4096), above a core's 1024
/// QPs: scripts/isolation.sh's noisy client took them all and locked everyone out.
#[test]
fn a_client_holds_qps_up_to_its_own_limit_and_others_still_get_theirs() {
    let log = Arc::new(Mutex::new(Log::default()));
    let cores = fake_cores(2, &log, false);
    let regions = Arc::new(RegionTable::new(64));
    let cfg = ControlConfig {
        max_objects: 8,
        max_qps: 2,
        max_arena_bytes: 1 << 20,
        ..ControlConfig::default()
    };
    let mut s = ControlServer::new(cfg, cores, regions, device(), Vec::new(), None).unwrap();
    admit_self(&mut s);
    let (mut noisy, _) = connect(&mut s);
    make_qp(&mut noisy, &mut s);
    make_qp(&mut noisy, &mut s);
    let e = try_make_qp(&mut noisy, &mut s).0.unwrap_err();
    assert_eq!(e.code, ErrorCode::LimitReached);
    assert!(e.message.contains("control.max_qps (2)"), "{}", e.message);
    let (mut other, _) = connect(&mut s);
    make_qp(&mut other, &mut s);
}

/// `iwarpctl qp reset` and `disconnect-client` (issue 16 item 4): the QP goes to Error on
/// its core and its owner gets a QP-fatal event; a disconnected client is torn down on
/// every core and its socket closes; unknown ids, and a client naming itself, are refused
/// with their codes; a client that is not admin is refused.
#[test]
fn admin_resets_a_qp_and_disconnects_a_client() {
    let (mut s, log, _) = server(false);
    let (mut p, wp) = connect(&mut s);
    let (mut o, wo) = connect(&mut s);
    let qp = make_qp(&mut p, &mut s);

    let done = |r: (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>)| match r.0 {
        Ok(Response::Admin(AdminResponse::Done(what))) => what,
        other => panic!("{other:?}"),
    };
    let code = |r: (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>)| r.0.unwrap_err().code;

    let what = done(o.call(
        &mut s,
        Request::Admin(AdminRequest::ResetQp {
            client: wp.client_id,
            qp: qp.0,
        }),
    ));
    assert!(what.contains("Error"), "{what}");
    assert!(
        log.lock()
            .unwrap()
            .requests
            .iter()
            .any(|r| r.ends_with(":ModifyQp")),
        "ModifyQp reached the QP's core"
    );
    // The owner hears of it.
    let mut fatal = false;
    for _ in 0..50 {
        s.step(Duration::from_millis(1));
        if let Ok((ServerMsg::Event(Event::Async(a)), _)) = p.chan.recv::<ServerMsg>() {
            assert_eq!(a.resource, EventResourceRef::Qp(qp));
            assert_eq!(a.kind, AsyncKind::LocalQpCatastrophic);
            fatal = true;
            break;
        }
    }
    assert!(fatal, "no QP-fatal event");
    assert_eq!(
        code(o.call(
            &mut s,
            Request::Admin(AdminRequest::ResetQp {
                client: wp.client_id,
                qp: qp.0 + 100,
            }),
        )),
        ErrorCode::NoSuchObject
    );
    assert_eq!(
        code(o.call(
            &mut s,
            Request::Admin(AdminRequest::DisconnectClient(wo.client_id))
        )),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(o.call(&mut s, Request::Admin(AdminRequest::DisconnectClient(9999)))),
        ErrorCode::NoSuchObject
    );

    let what = done(o.call(
        &mut s,
        Request::Admin(AdminRequest::DisconnectClient(wp.client_id)),
    ));
    assert!(what.contains("disconnected"), "{what}");
    assert_eq!(s.clients(), 1);
    assert_eq!(
        log.lock().unwrap().detached,
        vec![wp.client_id, wp.client_id],
        "torn down on both cores"
    );
    // Its socket is closed: what it reads ends.
    let mut closed = false;
    for _ in 0..50 {
        match p.chan.recv::<ServerMsg>() {
            Err(RecvError::Closed) => {
                closed = true;
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    assert!(closed, "the disconnected client's socket stays open");

    // Not an admin: refused.
    let db = AccountDb::from_text("", "");
    s.set_policy(Policy::resolve(&db, &[], &[], &[]).unwrap(), db);
    for c in s.clients.values_mut() {
        c.admin = false;
    }
    assert_eq!(
        code(o.call(
            &mut s,
            Request::Admin(AdminRequest::DisconnectClient(wp.client_id))
        )),
        ErrorCode::NotAdmin
    );
}
