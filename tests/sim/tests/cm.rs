//! Connection management and MPA negotiation end to end: private data both ways, reject
//! with private data, refused connections, MPA revision 1 and 2, CRC on and off (and the
//! mixed case), markers, and peer-to-peer mode with each RTR type our initiator sends.

use iwarp_engine::{ConnectFailure, EngineConfig, Event, PrivateData};
use iwarp_mpa::{CrcPolicy, MarkerPolicy, RtrSet, RtrType};
use iwarp_sim::host::{connect, ConnectSpec, Pair, PairOptions};
use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_types::{Duration, QpState, RecvWr, SendFlags, SendOp, SendWr, WcOpcode, WcStatus};

const T: Duration = Duration::from_secs(10);

/// Adjusts the engine configuration of host `i`.
type Tweak = fn(usize, &mut EngineConfig);

/// Send both ways, a Write and a Read from the initiator; data verified.
fn exchange(p: &mut Pair) {
    let (a, b) = (p.a, p.b);
    let da = p.fill_random(a, 0, 10_000);
    let db = p.fill_random(b, 0, 7_000);
    p.host(b)
        .post_recv(
            b.qp,
            &RecvWr {
                wr_id: 1,
                sgl: b.sgl(0x1_0000, 10_000),
            },
        )
        .unwrap();
    p.host(a)
        .post_recv(
            a.qp,
            &RecvWr {
                wr_id: 1,
                sgl: a.sgl(0x1_0000, 7_000),
            },
        )
        .unwrap();
    let send = |side: iwarp_sim::host::Side, n| SendWr {
        wr_id: 2,
        op: SendOp::Send,
        sgl: side.sgl(0, n),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &send(a, 10_000)).unwrap();
    p.host(b).post_send(b.qp, &send(b, 7_000)).unwrap();
    let w = SendWr {
        wr_id: 3,
        op: SendOp::Write {
            remote_to: 0x2_0000,
            rkey: b.mr,
        },
        sgl: a.sgl(0, 10_000),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &w).unwrap();
    let r = SendWr {
        wr_id: 4,
        op: SendOp::Read {
            remote_to: 0,
            rkey: b.mr,
            invalidate_local: false,
        },
        sgl: a.sgl(0x3_0000, 7_000),
        flags: SendFlags::SIGNALED,
    };
    p.host(a).post_send(a.qp, &r).unwrap();
    p.sim.run_until(T, |s| {
        s.node(0).cqe_count(a.cq) == 4 && s.node(1).cqe_count(b.cq) == 2
    });
    for side in [a, b] {
        for c in p.host(side).take_cqes(side.cq) {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
    }
    assert_eq!(p.bytes(b, 0x1_0000, 10_000), &da[..]);
    assert_eq!(p.bytes(a, 0x1_0000, 7_000), &db[..]);
    assert_eq!(p.bytes(b, 0x2_0000, 10_000), &da[..]);
    assert_eq!(p.bytes(a, 0x3_0000, 7_000), &db[..]);
}

fn negotiated(p: &Pair, host: usize) -> iwarp_mpa::Negotiated {
    let conn = if host == 0 {
        p.connected.conn_a
    } else {
        p.connected.conn_b
    };
    *p.sim
        .node(host)
        .engine
        .conn(conn)
        .expect("conn")
        .mpa
        .negotiated()
        .expect("negotiated")
}

fn with(seed: u64, engine: fn(usize, &mut EngineConfig), p2p: bool) -> Pair {
    let mut connect = ConnectSpec::default();
    connect.connect.p2p = p2p;
    Pair::new(
        seed,
        PairOptions {
            engine,
            connect,
            ..PairOptions::default()
        },
    )
}

#[test]
fn private_data_travels_both_ways() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "private_data_travels_both_ways");
    let mut spec = ConnectSpec::default();
    spec.connect.private_data = PrivateData::new(b"hello from the initiator").unwrap();
    // 512 bytes of MPA private data less the 4 bytes of RFC 6581 IRD/ORD (revision 2).
    spec.accept.private_data = PrivateData::new(&[0xa5; 508]).unwrap();
    let p = Pair::new(
        seed,
        PairOptions {
            connect: spec,
            ..PairOptions::default()
        },
    );
    assert_eq!(
        p.connected.request_private_data.as_slice(),
        b"hello from the initiator"
    );
    assert_eq!(p.connected.reply_private_data.as_slice(), &[0xa5; 508][..]);
}

#[test]
fn reject_with_private_data() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "reject_with_private_data");
    let (mut sim, a, b) = Pair::unconnected(seed, PairOptions::default());
    sim.node_mut(1).engine.listen(4791, 4).unwrap();
    let now = sim.now();
    let ip = sim.node(1).ip();
    let params = ConnectSpec::default().connect;
    let conn_a = sim
        .node_mut(0)
        .engine
        .connect(now, a.qp, ip, 4791, params)
        .unwrap();
    sim.run_until(T, |s| {
        s.events(1)
            .iter()
            .any(|e| matches!(e, Event::ConnectRequest { .. }))
    });
    let Some(Event::ConnectRequest { conn, .. }) =
        sim.take_event(1, |e| matches!(e, Event::ConnectRequest { .. }))
    else {
        unreachable!()
    };
    let now = sim.now();
    sim.node_mut(1)
        .engine
        .reject(now, conn, PrivateData::new(b"go away").unwrap())
        .unwrap();
    sim.run_until(T, |s| {
        s.events(0)
            .iter()
            .any(|e| matches!(e, Event::Rejected { .. }))
    });
    let Some(Event::Rejected {
        conn: c,
        private_data,
    }) = sim.take_event(0, |e| matches!(e, Event::Rejected { .. }))
    else {
        unreachable!()
    };
    assert_eq!(c, conn_a);
    assert_eq!(private_data.as_slice(), b"go away");
    assert_eq!(sim.node(0).qp_state(a.qp), QpState::Idle);
    assert_eq!(sim.node(1).qp_state(b.qp), QpState::Idle);
    // The connections go away; the QPs can connect again.
    sim.run_until(Duration::from_secs(300), |s| {
        s.node(0).engine.conn_count() == 0 && s.node(1).engine.conn_count() == 0
    });
    connect(&mut sim, 0, a.qp, 1, b.qp, &ConnectSpec::default());
    assert_eq!(sim.node(0).qp_state(a.qp), QpState::Rts);
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "connect_to_a_closed_port_is_refused");
    let (mut sim, a, _b) = Pair::unconnected(seed, PairOptions::default());
    let now = sim.now();
    let ip = sim.node(1).ip();
    sim.node_mut(0)
        .engine
        .connect(now, a.qp, ip, 9999, ConnectSpec::default().connect)
        .unwrap();
    sim.run_until(T, |s| {
        s.events(0)
            .iter()
            .any(|e| matches!(e, Event::ConnectFailed { .. }))
    });
    let ev = sim.take_event(0, |e| matches!(e, Event::ConnectFailed { .. }));
    assert!(
        matches!(
            ev,
            Some(Event::ConnectFailed {
                reason: ConnectFailure::Refused,
                ..
            })
        ),
        "{ev:?}"
    );
    assert_eq!(sim.node(0).qp_state(a.qp), QpState::Idle);
    assert!(sim.node_mut(1).counters().tcp_rsts_sent >= 1);
}

#[test]
fn mpa_revision_1_and_2_with_and_without_crc() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "mpa_revision_1_and_2_with_and_without_crc");
    let cases: [(Tweak, u8, bool); 5] = [
        (|_, c| c.mpa.crc = CrcPolicy::Request, 2, true),
        (|_, c| c.mpa.crc = CrcPolicy::Off, 2, false),
        (
            |_, c| {
                c.mpa.revision = 1;
                c.mpa.crc = CrcPolicy::Request
            },
            1,
            true,
        ),
        (
            |_, c| {
                c.mpa.revision = 1;
                c.mpa.crc = CrcPolicy::Off
            },
            1,
            false,
        ),
        // Only the responder asks for CRC: it is used in both directions.
        (
            |i, c| {
                c.mpa.crc = if i == 1 {
                    CrcPolicy::Request
                } else {
                    CrcPolicy::Off
                }
            },
            2,
            true,
        ),
    ];
    for (i, (engine, rev, crc)) in cases.into_iter().enumerate() {
        let mut p = with(iwarp_sim::rng::run_seed(seed, i as u64), engine, false);
        for h in 0..2 {
            let n = negotiated(&p, h);
            assert_eq!((n.revision, n.crc), (rev, crc), "case {i} host {h}: {n:?}");
        }
        exchange(&mut p);
    }
}

#[test]
fn mpa_revision_1_initiator_with_revision_2_responder() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "mpa_revision_1_initiator_with_revision_2_responder");
    let mut p = with(
        seed,
        |i, c| c.mpa.revision = if i == 0 { 1 } else { 2 },
        false,
    );
    assert_eq!(negotiated(&p, 0).revision, 1);
    assert_eq!(negotiated(&p, 1).revision, 1);
    exchange(&mut p);
}

#[test]
fn markers_requested_by_either_side() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "markers_requested_by_either_side");
    for (i, who) in [0usize, 1].into_iter().enumerate() {
        let engine: fn(usize, &mut EngineConfig) = if who == 0 {
            |i, c| {
                c.mpa.markers = if i == 0 {
                    MarkerPolicy::Request
                } else {
                    MarkerPolicy::Off
                }
            }
        } else {
            |i, c| {
                c.mpa.markers = if i == 1 {
                    MarkerPolicy::Request
                } else {
                    MarkerPolicy::Off
                }
            }
        };
        let mut p = with(iwarp_sim::rng::run_seed(seed, i as u64), engine, false);
        let (na, nb) = (negotiated(&p, 0), negotiated(&p, 1));
        // The side that asked receives markers; the other side inserts them.
        let asked = if who == 0 { na } else { nb };
        let other = if who == 0 { nb } else { na };
        assert!(asked.markers_rx && other.markers_tx, "{na:?} {nb:?}");
        exchange(&mut p);
    }
}

#[test]
fn peer_to_peer_with_each_rtr_type() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "peer_to_peer_with_each_rtr_type");
    let cases: [(Tweak, RtrType); 3] = [
        (|_, c| c.mpa.rtr = RtrSet::WRITE, RtrType::Write),
        (|_, c| c.mpa.rtr = RtrSet::READ, RtrType::Read),
        // The responder prefers a zero-length Write when both are offered.
        (
            |_, c| c.mpa.rtr = RtrSet::WRITE | RtrSet::READ,
            RtrType::Write,
        ),
    ];
    for (i, (engine, rtr)) in cases.into_iter().enumerate() {
        let mut p = with(iwarp_sim::rng::run_seed(seed, i as u64), engine, true);
        let (na, nb) = (negotiated(&p, 0), negotiated(&p, 1));
        assert!(na.p2p && nb.p2p, "{na:?} {nb:?}");
        assert_eq!(na.send_rtr, Some(rtr));
        assert_eq!(nb.await_rtr, Some(rtr));
        // In peer-to-peer mode the responder may speak first.
        let (a, b) = (p.a, p.b);
        let data = p.fill_random(b, 0, 3000);
        p.host(a)
            .post_recv(
                a.qp,
                &RecvWr {
                    wr_id: 1,
                    sgl: a.sgl(0x1_0000, 3000),
                },
            )
            .unwrap();
        let wr = SendWr {
            wr_id: 1,
            op: SendOp::Send,
            sgl: b.sgl(0, 3000),
            flags: SendFlags::SIGNALED,
        };
        p.host(b).post_send(b.qp, &wr).unwrap();
        let ca = p.wait_cqes(a, 1, T);
        assert_eq!(
            (ca[0].status, ca[0].opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "{ca:?}"
        );
        assert_eq!(p.bytes(a, 0x1_0000, 3000), &data[..]);
        p.wait_cqes(b, 1, T);
        exchange(&mut p);
    }
}

#[test]
fn peer_to_peer_without_a_common_rtr_fails() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "peer_to_peer_without_a_common_rtr_fails");
    let opts = PairOptions {
        engine: |i, c| c.mpa.rtr = if i == 0 { RtrSet::WRITE } else { RtrSet::READ },
        ..PairOptions::default()
    };
    let (mut sim, a, b) = Pair::unconnected(seed, opts);
    let mut spec = ConnectSpec::default();
    spec.connect.p2p = true;
    let r = iwarp_sim::host::try_connect(&mut sim, 0, a.qp, 1, b.qp, &spec);
    assert!(r.is_err(), "no RTR in common: {r:?}");
    sim.run_until(T, |s| {
        s.events(0)
            .iter()
            .any(|e| matches!(e, Event::ConnectFailed { .. } | Event::Rejected { .. }))
    });
    assert_eq!(sim.node(0).qp_state(a.qp), QpState::Idle);
}
