//! The roles: a server that serves runs until killed, a client that measures each size
//! over fresh connections, and loopback (both ends in one thread).

use std::net::SocketAddrV4;
use std::time::Duration;

use crate::args::{Args, Role, Test};
use crate::client::{self, Length, MAX_SAMPLES};
use crate::progress::Progress;
use crate::report::{self, Measured, SizeResult};
use crate::responder::Responder;
use crate::setup::{Endpoint, Side};
use crate::stats::Samples;
use crate::wire::Hello;
use crate::PerfError;

/// Server steps between looks at the CM channel.
const CM_CHECK_EVERY: u32 = 1024;

fn noop() -> Result<(), PerfError> {
    Ok(())
}

fn length(args: &Args) -> Length {
    match args.duration_s {
        Some(s) => Length::Time(Duration::from_secs(u64::from(s))),
        None => Length::Iters(args.iterations()),
    }
}

fn hello(args: &Args, size: u64) -> Hello {
    Hello {
        test: args.test,
        qp_index: 0,
        qps: args.qp_count() as u16,
        size,
        iters: args.duration_s.map_or(args.iterations(), |_| 0),
        duration_ms: args.duration_s.map_or(0, |s| s * 1000),
        depth: args.effective_depth(),
        buf_addr: 0,
        buf_len: 0,
        rkey: 0,
        credits: 0,
    }
}

fn max_size(args: &Args) -> u64 {
    args.sizes().into_iter().max().unwrap_or(args.size)
}

/// Serves runs until the process is killed.
pub fn server(args: &Args) -> Result<(), PerfError> {
    let mut side = Side::open(&args.daemon, args.qps, max_size(args))?;
    let listener = side
        .cm
        .create_id()
        .map_err(|e| PerfError::verbs("create_id", e))?;
    listener
        .listen(args.port, 64)
        .map_err(|e| PerfError::verbs(format!("listen on port {}", args.port), e))?;
    eprintln!(
        "iwarp-perf: listening on port {} of iwarpd {} (buffers {} x {} bytes)",
        args.port, args.daemon, args.qps, side.buf_len
    );
    let (ird, ord) = (
        side.rd_atomic(args.ird, false),
        side.rd_atomic(args.ord, true),
    );
    loop {
        let eps = side.accept(ird, ord, noop, None)?;
        let mut r = Responder::new(eps);
        let mut n = 0u32;
        loop {
            r.progress(&mut side.arena)?;
            n += 1;
            if n.is_multiple_of(CM_CHECK_EVERY) && side.poll_disconnects(r.endpoints())? {
                break;
            }
        }
    }
}

/// The daemon's TCP retransmissions so far (None when it does not tell this client).
fn retransmissions_of(ctx: &iwarp_verbs::Context) -> impl FnMut() -> Option<u64> + 'static {
    let ctx = ctx.clone();
    move || ctx.counter("tcp_retransmissions").ok().flatten()
}

/// Measures one size over `eps`.
fn measure(
    args: &Args,
    side: &mut Side,
    eps: &mut [Endpoint],
    size: u64,
    samples: &mut Samples,
    ord: u32,
    idle: &mut dyn FnMut() -> Result<(), PerfError>,
) -> Result<SizeResult, PerfError> {
    let test = args.test;
    let size32 = size as u32;
    if test.is_latency() {
        samples.clear();
        let ep = eps
            .first_mut()
            .ok_or_else(|| PerfError::Setup("no connection".into()))?;
        let div = if test.reports_half_rtt() { 2 } else { 1 };
        let mut progress = Progress::new(args.interval(), size, div)
            .with_retransmissions(retransmissions_of(&side.ctx));
        let n = client::latency(
            test,
            ep,
            &mut side.arena,
            size32,
            (args.warmup, length(args)),
            samples,
            &mut progress,
            idle,
        )?;
        let s = samples
            .summary(div)
            .ok_or_else(|| PerfError::Run("no sample".into()))?;
        Ok(SizeResult {
            size,
            iterations: n,
            measured: Measured::Latency(s),
            intervals: progress.intervals,
            cdf: samples.cdf(div),
        })
    } else {
        let mut depth = args.effective_depth();
        if test == Test::ReadBw {
            // Outstanding READs are bounded by the ORD.
            depth = depth.min(ord.max(1));
        }
        let mut progress = Progress::new(args.interval(), size, 1)
            .with_retransmissions(retransmissions_of(&side.ctx));
        let b = client::bandwidth(test, eps, size32, depth, length(args), &mut progress, idle)?;
        Ok(SizeResult {
            size,
            iterations: b.messages,
            measured: Measured::Bandwidth(b),
            intervals: progress.intervals,
            cdf: Vec::new(),
        })
    }
}

fn close(eps: Vec<Endpoint>) {
    for e in &eps {
        let _ = e.id.disconnect();
    }
}

/// Connects to `server` for every size and measures; `server_side` is the loopback's
/// other end (served from this thread).
pub fn client(
    args: &Args,
    server: SocketAddrV4,
    mut loopback: Option<&mut Side>,
) -> Result<Vec<SizeResult>, PerfError> {
    let daemon = match (&loopback, &args.peer_daemon) {
        (Some(_), Some(p)) => p.clone(),
        _ => args.daemon.clone(),
    };
    let mut side = Side::open(&daemon, args.qp_count(), max_size(args))?;
    let (ird, ord) = (
        side.rd_atomic(args.ird, false),
        side.rd_atomic(args.ord, true),
    );
    let cap = match length(args) {
        Length::Iters(n) => (n as usize).min(MAX_SAMPLES),
        Length::Time(_) => MAX_SAMPLES,
    };
    let mut samples = Samples::with_capacity(if args.test.is_latency() { cap } else { 0 });
    let mut results = Vec::new();
    println!("{}", report::header(args.test));
    for size in args.sizes() {
        let pending = side.start_connect(&hello(args, size), server, ird, ord)?;
        let (mut eps, mut responder) = match loopback.as_deref_mut() {
            Some(srv) => {
                let (sird, sord) = (
                    srv.rd_atomic(args.ird, false),
                    srv.rd_atomic(args.ord, true),
                );
                let srv_eps = srv.accept(sird, sord, noop, Some(crate::setup::CM_TIMEOUT))?;
                (
                    side.finish_connect(pending, noop)?,
                    Some(Responder::new(srv_eps)),
                )
            }
            None => (side.finish_connect(pending, noop)?, None),
        };
        let r = {
            let srv_arena = loopback.as_deref_mut().map(|s| &mut s.arena);
            let mut idle: Box<dyn FnMut() -> Result<(), PerfError>> =
                match (responder.as_mut(), srv_arena) {
                    (Some(r), Some(a)) => Box::new(move || r.progress(a)),
                    _ => Box::new(noop),
                };
            measure(
                args,
                &mut side,
                &mut eps,
                size,
                &mut samples,
                ord,
                &mut *idle,
            )?
        };
        println!("{}", report::row(&r));
        results.push(r);
        close(eps);
        if let Some(r) = responder.take() {
            drop(r);
        }
    }
    Ok(results)
}

/// Runs the role `args` asks for; returns the results of a client.
pub fn run(args: &Args) -> Result<Vec<SizeResult>, PerfError> {
    match args.role() {
        Role::Server => server(args).map(|()| Vec::new()),
        Role::Client(ip) => client(args, SocketAddrV4::new(ip, args.port), None),
        Role::Loopback => {
            let mut srv = Side::open(&args.daemon, args.qp_count(), max_size(args))?;
            // One daemon with two ports wired to each other: the server end is reached
            // at the second port's address, the client's QPs leave through port 0.
            let ports = srv.ctx.ports();
            let one_daemon_two_ports = args.peer_daemon.is_none() && ports.len() >= 2;
            let port = ports
                .get(usize::from(one_daemon_two_ports))
                .ok_or_else(|| PerfError::Setup("the daemon has no port".into()))?
                .ip;
            let listener = srv
                .cm
                .create_id()
                .map_err(|e| PerfError::verbs("create_id", e))?;
            listener
                .listen(args.port, 64)
                .map_err(|e| PerfError::verbs(format!("listen on port {}", args.port), e))?;
            if args.peer_daemon.is_none() && !one_daemon_two_ports {
                eprintln!("iwarp-perf: loopback on one daemon with one port: the engine may refuse a connection to its own address; give --peer-daemon or a daemon with two ports");
            }
            let r = client(
                args,
                SocketAddrV4::new(port.into(), args.port),
                Some(&mut srv),
            );
            drop(listener);
            r
        }
    }
}
