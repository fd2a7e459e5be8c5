//! Every run ends with a graceful close on every QP: FIN both ways, no RST, no
//! Terminate on either engine; the server sees every connection end (served ==
//! accepted, none active) and the client's report says so. With the daemon's shape of
//! run (MTU 1500, depth 16, selective signaling) for every op, with and without verify,
//! and for an orderly shutdown in the middle of a run.

use iwarp_engine::Counters;
use iwarp_runtime::App;
use iwarp_types::{Duration, VecMemory};

use super::harness::{Host, Net, NetConfig, IP_B};
use crate::messages::Op;
use crate::report::{Report, ServerReport};
use crate::spec::{Arena, ClientSpec, ServerConfig};
use crate::{LoadgenClient, LoadgenServer, Phase};

const CLIENT_OFFSET: u64 = 4096;

/// A run shaped like `iwarpd loadgen --qps 2 --depth 16` (signal every depth / 4).
fn daemon_spec(op: Op, size: u32, verify: bool) -> ClientSpec {
    ClientSpec {
        peer: IP_B,
        op,
        size: if op == Op::Connect { 0 } else { size },
        qps: 2,
        depth: if op == Op::Connect { 0 } else { 16 },
        verify,
        warmup: Duration::from_micros(100),
        duration: Duration::from_micros(1000),
        signal_every: if verify { 1 } else { 4 },
        ..ClientSpec::default()
    }
}

struct Setup {
    net: Net,
    client: LoadgenClient,
    server: LoadgenServer,
}

fn setup(sp: ClientSpec, mtu: usize) -> Setup {
    let scfg = ServerConfig {
        buffers: sp.qps.max(1),
        max_conns: 64,
        buffer_bytes: sp.layout().stride.max(4096),
        max_depth: 64,
        ..ServerConfig::default()
    };
    let need = sp.required_arena_bytes().max(scfg.required_arena_bytes()) + 2 * CLIENT_OFFSET;
    let mut net = Net::new(NetConfig {
        arena_bytes: need as usize,
        mtu,
        ..NetConfig::default()
    });
    let arena = Arena {
        region: net.b.region,
        offset: 0,
        len: scfg.required_arena_bytes(),
    };
    let server = LoadgenServer::new(scfg, arena, &mut net.b.eng, &net.b.mem).expect("server");
    let arena = Arena {
        region: net.a.region,
        offset: CLIENT_OFFSET,
        len: sp.required_arena_bytes(),
    };
    let client = LoadgenClient::new(sp, arena, &mut net.a.eng, &net.a.mem).expect("client");
    Setup {
        net,
        client,
        server,
    }
}

/// Runs until the client finished and the server holds no connection, then a little
/// longer (anything late, such as a retransmitted FIN or an RST, would show).
fn finish(s: &mut Setup) -> (Report, ServerReport, Counters, Counters) {
    let Setup {
        net,
        client,
        server,
    } = s;
    let done = net.run_until(&mut [client], &mut [server], 3_000_000, |_, a, b| {
        a[0].is_idle() && b[0].is_idle()
    });
    assert!(done, "run did not finish: {:?}", client.phase());
    for _ in 0..2_000 {
        net.round(&mut [client], &mut [server]);
    }
    (
        client.report(),
        *server.report(),
        net.a.eng.counters().clone(),
        net.b.eng.counters().clone(),
    )
}

/// The close was graceful on both engines and both apps.
fn assert_graceful(what: &str, r: &Report, s: &ServerReport, ca: &Counters, cb: &Counters) {
    let what = format!("{what}\n{r}\n{s}\nclient {ca:?}\nserver {cb:?}");
    for c in [ca, cb] {
        assert_eq!(
            (
                c.tcp_rsts_sent,
                c.tcp_rsts_received,
                c.terminates_sent,
                c.terminates_received,
                c.llp_close_timeouts,
                c.tcp_timeouts
            ),
            (0, 0, 0, 0, 0, 0),
            "RST, Terminate or timeout: {what}"
        );
        // No QP is still associated with a connection, in any state.
        assert_eq!(c.qps_by_state, [0; 5], "{what}");
        assert_eq!(c.conns_established, u64::from(r.qps), "{what}");
    }
    assert_eq!(s.accepted, u64::from(r.qps), "{what}");
    assert_eq!((s.served, s.active), (s.accepted, 0), "{what}");
    assert_eq!((s.failed, s.errors), (0, 0), "{what}");
    assert_eq!(r.close.graceful, u64::from(r.qps), "{what}");
    assert_eq!(r.close.unclean(), 0, "{what}");
    assert_eq!(
        (r.close.terminates_sent, r.close.terminates_received),
        (0, 0),
        "{what}"
    );
    assert_eq!(r.errors.total(), 0, "{what}");
    let text = r.to_string();
    assert!(
        text.contains("close: 2 of 2 connections graceful"),
        "{text}"
    );
    assert!(
        r.to_json()
            .contains("\"close\":{\"graceful\":2,\"reset\":0,\"aborted\":0"),
        "{}",
        r.to_json()
    );
}

fn graceful_run(op: Op, size: u32, verify: bool, mtu: usize) {
    let what = format!("{op} {size} B verify {verify} mtu {mtu}");
    let mut s = setup(daemon_spec(op, size, verify), mtu);
    let (r, sr, ca, cb) = finish(&mut s);
    if op != Op::Connect {
        assert!(r.messages > 0, "{what}\n{r}");
    }
    assert_graceful(&what, &r, &sr, &ca, &cb);
    // The server let go of every connection's QP, MR and buffer: the same buffers serve
    // a second client, which closes as cleanly.
    let arena = Arena {
        region: s.net.a.region,
        offset: CLIENT_OFFSET,
        len: s.client.spec().required_arena_bytes(),
    };
    let sp = *s.client.spec();
    s.client = LoadgenClient::new(sp, arena, &mut s.net.a.eng, &s.net.a.mem).expect("again");
    let (r2, sr2, ca2, cb2) = finish(&mut s);
    assert_eq!(sr2.accepted, 4, "{what}\n{sr2}");
    assert_eq!((sr2.served, sr2.active), (4, 0), "{what}\n{sr2}");
    assert_eq!(r2.close.graceful, 2, "{what}\n{r2}");
    for c in [&ca2, &cb2] {
        assert_eq!(
            (c.tcp_rsts_sent, c.terminates_sent, c.qps_by_state),
            (0, 0, [0; 5]),
            "{what}\n{c:?}"
        );
    }
}

#[test]
fn write_closes_gracefully_with_and_without_verify() {
    for size in [64, 4096, 65536] {
        for verify in [false, true] {
            graceful_run(Op::Write, size, verify, 1500);
        }
    }
    graceful_run(Op::Write, 4096, true, 9000);
}

#[test]
fn read_closes_gracefully_with_and_without_verify() {
    for size in [64, 4096, 65536] {
        for verify in [false, true] {
            graceful_run(Op::Read, size, verify, 1500);
        }
    }
}

/// SEND is the op where the server talks back on its own (credits): the client closes
/// only once the last credit message arrived.
#[test]
fn send_closes_gracefully_with_and_without_verify() {
    for size in [64, 4096, 65536] {
        for verify in [false, true] {
            graceful_run(Op::Send, size, verify, 1500);
        }
    }
    graceful_run(Op::Send, 4096, false, 9000);
    // Depth 1 (credits one at a time) and an odd depth (a batch of 3 of 7).
    for depth in [1, 7] {
        let sp = ClientSpec {
            depth,
            ..daemon_spec(Op::Send, 256, true)
        };
        let mut s = setup(sp, 1500);
        let (r, sr, ca, cb) = finish(&mut s);
        assert_graceful(&format!("send depth {depth}"), &r, &sr, &ca, &cb);
    }
}

#[test]
fn connect_closes_gracefully() {
    graceful_run(Op::Connect, 0, false, 1500);
}

/// An orderly shutdown in the middle of the measurement window (SIGINT to the client
/// daemon): outstanding WRs and the server's last credits or acks drain first, then
/// every QP closes with a FIN.
#[test]
fn shutdown_mid_run_drains_then_closes_gracefully() {
    for (op, verify) in [
        (Op::Write, false),
        (Op::Write, true),
        (Op::Read, true),
        (Op::Send, false),
        (Op::Send, true),
    ] {
        let sp = ClientSpec {
            duration: Duration::from_secs(3600),
            ..daemon_spec(op, 4096, verify)
        };
        let mut s = setup(sp, 1500);
        for _ in 0..3000 {
            s.net.round(&mut [&mut s.client], &mut [&mut s.server]);
        }
        assert_eq!(s.client.qps_up(), 2, "{op}");
        let now = s.net.now;
        App::<VecMemory>::shutdown(&mut s.client, now, &mut s.net.a.eng, &mut s.net.a.mem);
        let (r, sr, ca, cb) = finish(&mut s);
        assert!(r.messages > 0, "{op}\n{r}");
        assert_graceful(&format!("shutdown {op} verify {verify}"), &r, &sr, &ca, &cb);
    }
}

/// The close outcome is reported and counted: a client whose close cannot finish (from
/// the end of the window on, nothing it sends arrives) resets its QPs after the close
/// timeout and says so.
#[test]
fn a_close_that_cannot_finish_is_reported_as_aborted() {
    let sp = ClientSpec {
        drain_timeout: Duration::from_millis(1),
        close_timeout: Duration::from_millis(5),
        ..daemon_spec(Op::Write, 4096, false)
    };
    let mut s = setup(sp, 1500);
    let Setup {
        net,
        client,
        server,
    } = &mut s;
    for _ in 0..1_000_000 {
        if client.phase() >= Phase::Draining {
            break;
        }
        net.round(&mut [client], &mut [server]);
    }
    assert_eq!(client.phase(), Phase::Draining);
    let mut buf = vec![0u8; 2048];
    for _ in 0..1_000_000 {
        if client.finished() {
            break;
        }
        let now = net.now;
        // The client's frames are lost: its FINs (and finally its RSTs) never arrive.
        let mut drop_client_frames = |a: &mut Host, _: &mut Host| {
            while a.eng.poll_transmit(now, &mut buf, &a.mem).is_some() {}
        };
        net.round_hooked(&mut [client], &mut [server], &mut drop_client_frames);
    }
    let r = client.report();
    assert!(client.finished(), "{r}");
    assert_eq!((r.close.graceful, r.close.aborted), (0, 2), "{r}");
    assert_eq!(r.errors.bad_close, 2, "{r}");
    assert!(
        r.to_string().contains("close: 0 of 2 connections graceful"),
        "{r}"
    );
    assert!(
        r.to_string().contains("2 aborted after the close timeout"),
        "{r}"
    );
    assert!(r.to_json().contains("\"bad_close\":2"), "{}", r.to_json());
    assert!(net.a.eng.counters().tcp_rsts_sent >= 2);
}
