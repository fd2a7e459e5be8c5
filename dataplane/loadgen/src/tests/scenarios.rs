use iwarp_engine::{ConnectParams, Event, PrivateData};
use iwarp_rdma::QpAttr;
use iwarp_runtime::App;
use iwarp_types::{Duration, VecMemory};

use super::harness::{Net, NetConfig, IP_B};
use crate::messages::{Op, RejectReason};
use crate::report::{Report, ServerReport};
use crate::spec::{Arena, ClientSpec, ServerConfig};
use crate::{LoadgenClient, LoadgenServer};

const CLIENT_OFFSET: u64 = 4096;

fn spec(op: Op, size: u32, qps: u32, depth: u32, verify: bool) -> ClientSpec {
    ClientSpec {
        peer: IP_B,
        op,
        size,
        qps,
        depth,
        verify,
        warmup: Duration::from_micros(100),
        duration: Duration::from_micros(if size >= 1 << 20 { 3000 } else { 1000 }),
        signal_every: 1,
        ..ClientSpec::default()
    }
}

fn server_cfg(spec: &ClientSpec, buffers: u32) -> ServerConfig {
    ServerConfig {
        buffers,
        max_conns: 64,
        buffer_bytes: spec.layout().stride.max(4096),
        max_depth: 64,
        ..ServerConfig::default()
    }
}

fn net_for(spec: &ClientSpec, scfg: &ServerConfig) -> Net {
    let need = spec.required_arena_bytes().max(scfg.required_arena_bytes()) + 2 * CLIENT_OFFSET;
    Net::new(NetConfig {
        arena_bytes: need as usize,
        ..NetConfig::default()
    })
}

fn server(net: &mut Net, scfg: ServerConfig) -> LoadgenServer {
    let arena = Arena {
        region: net.b.region,
        offset: 0,
        len: scfg.required_arena_bytes(),
    };
    LoadgenServer::new(scfg, arena, &mut net.b.eng, &net.b.mem).expect("server set-up")
}

fn client(net: &mut Net, spec: ClientSpec) -> LoadgenClient {
    let arena = Arena {
        region: net.a.region,
        offset: CLIENT_OFFSET,
        len: spec.required_arena_bytes(),
    };
    LoadgenClient::new(spec, arena, &mut net.a.eng, &net.a.mem).expect("client set-up")
}

/// Runs `c` against `s` until the client is done and the server idle.
fn run(net: &mut Net, c: &mut LoadgenClient, s: &mut LoadgenServer) {
    let done = net.run_until(&mut [c], &mut [s], 3_000_000, |_, a, b| {
        a[0].is_idle() && b[0].is_idle()
    });
    assert!(done, "run did not finish: phase {:?}", c.phase());
}

fn run_pair(spec: ClientSpec) -> (Report, ServerReport) {
    let scfg = server_cfg(&spec, spec.qps);
    let mut net = net_for(&spec, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, spec);
    run(&mut net, &mut c, &mut s);
    // Every verbs object of the client was released; the server kept only its own.
    assert_eq!(net.a.eng.rnic().query_qp(iwarp_types::QpId(1)).ok(), None);
    (c.report(), *s.report())
}

fn assert_clean(op: Op, size: u32, verify: bool, r: &Report, s: &ServerReport) {
    let what = format!("{op} {size} verify {verify}\n{r}\n{s}");
    assert!(r.messages > 0, "{what}");
    assert_eq!(r.bytes, r.messages * u64::from(size), "{what}");
    assert_eq!(r.errors.total(), 0, "{what}");
    assert_eq!(r.setup.established, u64::from(r.qps), "{what}");
    assert!(
        r.latency.count() > 0 && r.latency.quantile(0.5) > 0,
        "{what}"
    );
    assert!(
        r.goodput_gbps() > 0.0 && r.messages_per_sec() > 0.0,
        "{what}"
    );
    assert!(
        (r.seconds - (if size >= 1 << 20 { 0.003 } else { 0.001 })).abs() < 1e-9,
        "{what}"
    );
    assert_eq!(s.accepted, u64::from(r.qps), "{what}");
    assert_eq!(s.served, u64::from(r.qps), "{what}");
    assert_eq!(
        (s.active, s.errors, s.verify_mismatches),
        (0, 0, 0),
        "{what}"
    );
    match (op, verify) {
        (Op::Write, true) => {
            assert!(s.messages_verified >= r.messages, "{what}");
            assert_eq!(s.acks_sent, s.messages_verified, "{what}");
        }
        (Op::Send, true) => {
            assert_eq!(s.messages_verified, s.messages_received, "{what}");
            assert!(s.messages_received >= r.messages, "{what}");
        }
        (Op::Send, false) => {
            assert!(s.messages_received >= r.messages, "{what}");
            assert_eq!(s.messages_verified, 0, "{what}");
            assert!(s.credits_sent > 0, "{what}");
        }
        _ => assert_eq!(s.messages_verified, 0, "{what}"),
    }
}

fn matrix(op: Op) {
    for size in [64u32, 4096, 65536, 1 << 20] {
        for verify in [false, true] {
            let depth = if size >= 1 << 20 { 2 } else { 8 };
            let (r, s) = run_pair(spec(op, size, 2, depth, verify));
            assert_clean(op, size, verify, &r, &s);
        }
    }
}

#[test]
fn write_all_sizes_with_and_without_verify() {
    matrix(Op::Write);
}

#[test]
fn read_all_sizes_with_and_without_verify() {
    matrix(Op::Read);
}

#[test]
fn send_all_sizes_with_and_without_verify() {
    matrix(Op::Send);
}

#[test]
fn many_qps_deep_queues_and_selective_signaling() {
    let mut sp = spec(Op::Write, 4096, 16, 32, false);
    sp.signal_every = 8;
    let (r, s) = run_pair(sp);
    assert_clean(Op::Write, 4096, false, &r, &s);
    // Selective signaling: fewer latency samples than messages.
    assert!(r.latency.count() < r.messages, "{r}");
    let (r, s) = run_pair(spec(Op::Send, 64, 8, 16, true));
    assert_clean(Op::Send, 64, true, &r, &s);
}

#[test]
fn messages_cycle_through_fewer_buffers_than_the_depth() {
    for op in [Op::Write, Op::Read, Op::Send] {
        let mut sp = spec(op, 4096, 2, 8, false);
        sp.buffers = 2;
        let (r, s) = run_pair(sp);
        assert_clean(op, 4096, false, &r, &s);
        assert!(r.messages > 16, "{op:?}: more messages than buffers: {r}");
    }
}

#[test]
fn corrupted_read_target_is_reported_with_qp_seq_and_offset() {
    let sp = spec(Op::Read, 4096, 2, 4, true);
    let scfg = server_cfg(&sp, 2);
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    // Until both QPs are up (the server filled its slots with the pattern).
    for _ in 0..100_000 {
        if c.qps_up() == 2 {
            break;
        }
        net.round(&mut [&mut c], &mut [&mut s]);
    }
    assert_eq!(c.qps_up(), 2, "{:?}", c.phase());
    // Flip one byte of slot 1 of the first connection's buffer (buffers are handed out
    // from 0; READ slots have no control area): offset 4096 + 100.
    net.b.mem.arena_mut(net.b.region)[4096 + 100] ^= 0x01;
    run(&mut net, &mut c, &mut s);
    let r = c.report();
    assert!(r.errors.verify_mismatches > 0, "{r}");
    let m = r
        .mismatches
        .iter()
        .next()
        .copied()
        .expect("a mismatch detail");
    assert_eq!((m.seq, m.offset), (1, 96), "{m:?}");
    assert_eq!(m.expected ^ m.got, 0x01 << 32, "{m:?}");
    assert!(r.to_string().contains("mismatch: qp"), "{r}");
}

#[test]
fn corrupted_write_payload_is_caught_by_the_server() {
    let sp = spec(Op::Write, 4096, 1, 4, true);
    let scfg = server_cfg(&sp, 1);
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    // Corrupt the client's source slot 2 after the post filled it with the pattern of
    // seq 2 and before the engine reads it for transmission: the bytes on the wire are
    // wrong (slot 2 is all zeros until then).
    let at = (CLIENT_OFFSET + 2 * 4096 + 8) as usize;
    let mut corrupted = false;
    let mut hook = |a: &mut super::harness::Host, _: &mut super::harness::Host| {
        let arena = a.mem.arena_mut(a.region);
        if !corrupted && arena[at..at + 8] != [0; 8] {
            arena[at] ^= 0xff;
            corrupted = true;
        }
    };
    for _ in 0..2_000_000 {
        if c.finished() && s.report().active == 0 {
            break;
        }
        net.round_hooked(&mut [&mut c], &mut [&mut s], &mut hook);
    }
    assert!(corrupted);
    let (r, sr) = (c.report(), *s.report());
    assert!(c.finished(), "{r}");
    assert!(sr.verify_mismatches >= 1, "{sr}");
    assert_eq!(
        r.errors.verify_mismatches, sr.verify_mismatches,
        "{r}\n{sr}"
    );
    let m = sr.mismatches.iter().next().copied().expect("detail");
    assert_eq!((m.qp, m.seq, m.offset), (0, 2, 8), "{m:?}");
}

/// Catches the `Rejected` event of a connection made by hand.
struct Catcher(Option<Result<RejectReason, crate::messages::ParseError>>);

impl App<VecMemory> for Catcher {
    fn on_event(
        &mut self,
        _: iwarp_types::Instant,
        _: &mut iwarp_engine::Engine,
        _: &mut VecMemory,
        event: &Event,
    ) -> bool {
        if let Event::Rejected { private_data, .. } = event {
            self.0 = Some(RejectReason::parse(private_data.as_slice()));
            return true;
        }
        false
    }
    fn poll(&mut self, _: iwarp_types::Instant, _: &mut iwarp_engine::Engine, _: &mut VecMemory) {}
    fn poll_timeout(&self) -> Option<iwarp_types::Instant> {
        None
    }
    fn shutdown(
        &mut self,
        _: iwarp_types::Instant,
        _: &mut iwarp_engine::Engine,
        _: &mut VecMemory,
    ) {
    }
    fn is_idle(&self) -> bool {
        true
    }
}

#[test]
fn bad_hellos_are_rejected_with_a_reason() {
    // Depth above the server's limit: every QP rejected, the reason parsed.
    let sp = spec(Op::Write, 4096, 3, 16, false);
    let scfg = ServerConfig {
        max_depth: 8,
        ..server_cfg(&sp, 1)
    };
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    run(&mut net, &mut c, &mut s);
    let r = c.report();
    assert_eq!(r.errors.rejected, 3, "{r}");
    assert_eq!(r.errors.reject_reason, Some(RejectReason::BadDepth));
    assert_eq!(r.messages, 0);
    assert_eq!(s.report().rejected, 3);
    assert_eq!(s.report().accepted, 0);

    // Private data that is not a hello at all.
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let r = net.a.eng.rnic_mut();
    let pd = r.alloc_pd().unwrap();
    let (cq, _) = r.create_cq(16).unwrap();
    let attr = QpAttr {
        sq_depth: 4,
        rq_depth: 4,
        inbound_write: true,
        ..QpAttr::new(pd, cq)
    };
    let (qp, _) = r.create_qp(&attr).unwrap();
    let params = ConnectParams {
        private_data: PrivateData::new(b"hello, not loadgen").unwrap(),
        ..ConnectParams::default()
    };
    net.a
        .eng
        .connect(net.now, qp, IP_B, scfg.port, params)
        .unwrap();
    let mut catcher = Catcher(None);
    for _ in 0..10_000 {
        net.round(&mut [&mut catcher], &mut [&mut s]);
        if catcher.0.is_some() {
            break;
        }
    }
    let rejected = catcher.0;
    assert_eq!(rejected, Some(Ok(RejectReason::NotHello)));
    assert_eq!(s.report().rejected, 1);
}

#[test]
fn connect_op_opens_and_holds_a_thousand_qps() {
    let sp = ClientSpec {
        peer: IP_B,
        op: Op::Connect,
        size: 0,
        depth: 0,
        qps: 1000,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(1),
        ..ClientSpec::default()
    };
    let scfg = ServerConfig {
        max_conns: 1000,
        buffers: 0,
        ..ServerConfig::default()
    };
    let mut net = Net::new(NetConfig {
        max_conns: 2100,
        max_qps: 1100,
        arena_bytes: 4096,
        mtu: 1500,
        ..NetConfig::default()
    });
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    run(&mut net, &mut c, &mut s);
    let r = c.report();
    assert_eq!(r.setup.established, 1000, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");
    assert!(r.setup.rate_per_sec() > 0.0, "{r}");
    assert!(r.setup.latency.quantile(0.5) > 0, "{r}");
    let sr = s.report();
    assert_eq!((sr.accepted, sr.served, sr.active), (1000, 1000, 0), "{sr}");
    assert!(r.to_json().contains("\"established\":1000"));
}

#[test]
fn a_server_serves_two_clients_one_after_another() {
    let first = spec(Op::Write, 4096, 1, 8, true);
    let second = spec(Op::Send, 4096, 1, 8, true);
    // One buffer: the second client gets it only if the first released it.
    let scfg = server_cfg(&first, 1);
    let mut net = net_for(&first, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c1 = client(&mut net, first);
    run(&mut net, &mut c1, &mut s);
    let r1 = c1.report();
    assert_clean(Op::Write, 4096, true, &r1, s.report());
    let mut c2 = client(&mut net, second);
    run(&mut net, &mut c2, &mut s);
    let r2 = c2.report();
    assert!(r2.messages > 0 && r2.errors.total() == 0, "{r2}");
    let sr = s.report();
    assert_eq!((sr.accepted, sr.served, sr.active), (2, 2, 0), "{sr}");
    assert_eq!(sr.verify_mismatches, 0);
    assert!(sr.messages_received > 0);
    let mut both = r1.clone();
    both.merge(&r2);
    assert_eq!(both.messages, r1.messages + r2.messages);
}

/// Both daemons stop at once while WRITEs stream: everything ends (no hang), the server
/// releases both connections. The close cannot be graceful: the server's FIN reaches QPs
/// with WRITEs still in flight (a Bad LLP Close), and the client's report says so. (A
/// client stopped alone closes gracefully: `close.rs`.)
#[test]
fn shutdown_closes_a_running_client_and_server() {
    let sp = ClientSpec {
        duration: Duration::from_secs(3600),
        ..spec(Op::Write, 65536, 2, 8, false)
    };
    let scfg = server_cfg(&sp, 2);
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    for _ in 0..3000 {
        net.round(&mut [&mut c], &mut [&mut s]);
    }
    assert_eq!(c.qps_up(), 2);
    let now = net.now;
    App::<VecMemory>::shutdown(&mut c, now, &mut net.a.eng, &mut net.a.mem);
    App::<VecMemory>::shutdown(&mut s, now, &mut net.b.eng, &mut net.b.mem);
    run(&mut net, &mut c, &mut s);
    let r = c.report();
    assert_eq!(r.errors.total(), r.errors.bad_close, "{r}");
    assert_eq!(r.errors.bad_close, r.close.unclean(), "{r}");
    assert_eq!(r.close.graceful + r.close.unclean(), 2, "{r}");
    assert!(r.messages > 0, "{r}");
    assert_eq!((s.report().served, s.report().active), (2, 0));
}

#[test]
fn setup_errors_name_the_problem() {
    let sp = spec(Op::Write, 4096, 1, 8, false);
    let mut net = net_for(&sp, &server_cfg(&sp, 1));
    let small = Arena {
        region: net.a.region,
        offset: 0,
        len: 10,
    };
    assert!(matches!(
        LoadgenClient::new(sp, small, &mut net.a.eng, &net.a.mem),
        Err(crate::SetupError::Arena { .. })
    ));
    let outside = Arena {
        region: net.a.region,
        offset: u64::MAX - 5,
        len: u64::MAX,
    };
    assert!(LoadgenClient::new(sp, outside, &mut net.a.eng, &net.a.mem).is_err());
    let bad = ClientSpec { depth: 0, ..sp };
    let arena = Arena {
        region: net.a.region,
        offset: 0,
        len: 1 << 20,
    };
    assert!(matches!(
        LoadgenClient::new(bad, arena, &mut net.a.eng, &net.a.mem),
        Err(crate::SetupError::Field { field: "depth", .. })
    ));
    // Nothing leaked: a valid client still fits every table.
    assert!(LoadgenClient::new(sp, arena, &mut net.a.eng, &net.a.mem).is_ok());
}

/// In-process message rate on this machine (both engines and both apps on one thread):
/// printed, not asserted beyond sanity. `cargo test --release -p iwarp-loadgen wall_clock
/// -- --nocapture` for a meaningful figure. `LOADGEN_RATE_MS=N` runs N ms of virtual time
/// (default 2) with 32 QPs (default 4): `perf stat -e instructions:u` of two durations,
/// difference over the difference in messages, is the CPU work per WR of both sides
/// (engines and apps), independent of the load on the machine.
#[test]
fn wall_clock_rate_of_64_byte_writes() {
    let ms = std::env::var("LOADGEN_RATE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let qps = if ms.is_some() { 32 } else { 4 };
    let mut sp = spec(Op::Write, 64, qps, 64, false);
    sp.signal_every = 16;
    sp.duration = Duration::from_millis(ms.unwrap_or(2));
    let scfg = server_cfg(&sp, qps);
    let mut net = net_for(&sp, &scfg);
    let mut s = server(&mut net, scfg);
    let mut c = client(&mut net, sp);
    let t0 = std::time::Instant::now();
    run(&mut net, &mut c, &mut s);
    let wall = t0.elapsed().as_secs_f64();
    let r = c.report();
    assert!(r.messages > 0 && r.errors.total() == 0, "{r}");
    eprintln!(
        "64 B WRITE in-process: {} messages in {:.3} s wall ({:.0} WR/s over the whole run incl. set-up), {} frames",
        r.messages,
        wall,
        r.messages as f64 / wall,
        net.frames_moved
    );
}
