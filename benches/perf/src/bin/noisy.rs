//! iwarp-noisy: a client that misbehaves toward its iwarpd while another client measures
//! (scripts/isolation.sh, issue 15 item 5). One mode per run, for `--seconds`:
//!
//! - `objects`: creates QPs until the daemon refuses one, then registers 1 MiB arenas
//!   and MRs until it refuses one; holds them all, then frees them.
//! - `overrun`: a sink thread accepts connections on `--addr`:`--port` and keeps 64
//!   receives posted on each; the main thread connects a QP whose 16-deep CQ it never
//!   polls and posts signaled 64-byte SENDs until its send queue is full: the completions
//!   overrun the CQ (the daemon raises "CQ Overflow Detected" and moves the QP to
//!   Terminate). Each time, it destroys everything and starts again with a fresh QP.
//!
//! Prints what the daemon answered (`objects: 64 QPs, then LimitReached: ...`) and
//! `noisy: done`; exits 0 if every abuse was answered with an error or an event and
//! nothing hung, 1 otherwise.
#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use iwarp_verbs::{
    Access, CmEvent, ConnParam, Context, Cq, Pd, QpCap, QpInitAttr, RecvWr, SendFlags, SendOp,
    SendWr, SgList, Sge, EMPTY_CQE,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// QPs, then arenas and MRs, until refused; held for --seconds.
    Objects,
    /// SENDs from a QP whose CQ is never polled, over and over.
    Overrun,
}

#[derive(Parser, Debug)]
#[command(about = "A client that misbehaves toward its iwarpd (scripts/isolation.sh)")]
struct Args {
    /// What to do.
    mode: Mode,
    /// The iwarpd (its verbs socket /run/iwarpd/NAME.verbs).
    #[arg(long, default_value = "iwarpd")]
    daemon: String,
    /// overrun: the address of the sink's listener (a port address of the daemon other
    /// than the one the QP leaves by; the perf-loopback daemon: 198.18.0.2).
    #[arg(long, default_value = "198.18.0.2")]
    addr: Ipv4Addr,
    /// overrun: the sink's TCP port.
    #[arg(long, default_value_t = 18600)]
    port: u16,
    /// How long to keep at it.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

type Res<T> = Result<T, String>;

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The most objects tried in `objects` mode before calling the daemon limitless.
const OBJECTS_MAX: usize = 100_000;

fn objects(a: &Args) -> Res<()> {
    let ctx = Context::open(&a.daemon).map_err(|e| err("opening iwarpd", e))?;
    let pd = ctx.alloc_pd().map_err(|e| err("alloc_pd", e))?;
    let cq = ctx.create_cq(16, None).map_err(|e| err("create_cq", e))?;
    let mut qps = Vec::new();
    let refused = loop {
        if qps.len() >= OBJECTS_MAX {
            return Err(format!("{OBJECTS_MAX} QPs and never refused"));
        }
        match pd.create_qp(&small_qp(&cq)) {
            Ok(q) => qps.push(q),
            Err(e) => break e,
        }
    };
    println!("objects: {} QPs, then {refused:?}", qps.len());
    let mut held = Vec::new();
    let refused = loop {
        if held.len() >= OBJECTS_MAX {
            return Err(format!("{OBJECTS_MAX} MRs and never refused"));
        }
        let arena = match ctx.alloc_arena(1 << 20) {
            Ok(x) => x,
            Err(e) => break e,
        };
        match pd.reg_mr(&arena, 0, 1 << 20, Access::LOCAL_WRITE) {
            Ok(mr) => held.push((mr, arena)),
            Err(e) => break e,
        }
    };
    println!(
        "objects: {} 1 MiB arenas with MRs, then {refused:?}",
        held.len()
    );
    std::thread::sleep(Duration::from_secs(a.seconds));
    drop(held);
    for q in qps {
        q.destroy().map_err(|e| err("destroy_qp", e))?;
    }
    Ok(())
}

fn small_qp(cq: &Cq) -> QpInitAttr<'_> {
    let mut q = QpInitAttr::new(cq, cq);
    q.cap = QpCap {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 1,
        max_recv_sge: 1,
    };
    q
}

/// The sink: accepts every connection, keeps 64 receives posted on each (reposting what
/// completes), until `stop`.
fn sink(
    daemon: String,
    at: SocketAddrV4,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
) -> Res<()> {
    let ctx = Context::open(&daemon).map_err(|e| err("sink: opening iwarpd", e))?;
    let pd = ctx.alloc_pd().map_err(|e| err("sink: alloc_pd", e))?;
    let arena = ctx
        .alloc_arena(64 * 64)
        .map_err(|e| err("sink: alloc_arena", e))?;
    let mr = pd
        .reg_mr(&arena, 0, 64 * 64, Access::LOCAL_WRITE)
        .map_err(|e| err("sink: reg_mr", e))?;
    let cm = ctx
        .create_cm_event_channel()
        .map_err(|e| err("sink: CM", e))?;
    let listen = cm.create_id().map_err(|e| err("sink: create_id", e))?;
    listen.listen(at, 16).map_err(|e| err("sink: listen", e))?;
    ready.store(true, Ordering::Release);
    let recv = |i: u64| RecvWr {
        wr_id: i,
        sgl: SgList::single(Sge {
            addr: mr.addr() + i * 64,
            length: 64,
            lkey: mr.lkey(),
        }),
    };
    // One connection at a time: the noisy end connects again only after it failed.
    let mut conn = None;
    let mut wc = [EMPTY_CQE; 64];
    while !stop.load(Ordering::Acquire) {
        if let Ok(ev) = cm.get_event_timeout(Duration::from_millis(1)) {
            match (ev.event, ev.request) {
                (CmEvent::ConnectRequest { .. }, Some(req)) => {
                    conn = None; // the previous one is over
                    let cq = ctx
                        .create_cq(128, None)
                        .map_err(|e| err("sink: create_cq", e))?;
                    let mut qp = req
                        .create_qp(&pd, &small_qp(&cq))
                        .map_err(|e| err("sink: create_qp", e))?;
                    for i in 0..64 {
                        qp.post_recv(&recv(i))
                            .map_err(|e| err("sink: post_recv", e))?;
                    }
                    let p = ConnParam {
                        private_data: Vec::new(),
                        responder_resources: 0,
                        initiator_depth: 0,
                    };
                    if req.accept(&qp, &p).is_ok() {
                        conn = Some((req, qp, cq));
                    }
                }
                (CmEvent::Disconnected, _) => conn = None,
                _ => {}
            }
        }
        if let Some((_, qp, cq)) = conn.as_mut() {
            let n = cq.poll(&mut wc).unwrap_or(0);
            for c in &wc[..n] {
                if c.status == iwarp_verbs::WcStatus::Success {
                    let _ = qp.post_recv(&recv(c.wr_id % 64));
                }
            }
        }
    }
    Ok(())
}

/// One round of `overrun`: connect, post SENDs until the SQ is full, wait for the QP to
/// fail (the CQ overruns); returns the SENDs posted and what ended it.
fn overrun_round(ctx: &Context, pd: &Pd, a: &Args, src: &iwarp_verbs::Mr) -> Res<(u64, String)> {
    let cq = ctx.create_cq(16, None).map_err(|e| err("create_cq", e))?;
    let mut qp = pd
        .create_qp(&small_qp(&cq))
        .map_err(|e| err("create_qp", e))?;
    let cm = ctx.create_cm_event_channel().map_err(|e| err("CM", e))?;
    let id = cm.create_id().map_err(|e| err("create_id", e))?;
    let p = ConnParam {
        private_data: Vec::new(),
        responder_resources: 0,
        initiator_depth: 0,
    };
    id.connect(&qp, SocketAddrV4::new(a.addr, a.port), &p)
        .map_err(|e| err("connect", e))?;
    match cm.get_event_timeout(Duration::from_secs(10)) {
        Ok(ev) if matches!(ev.event, CmEvent::Established { .. }) => {}
        Ok(ev) => return Err(format!("connect: {:?}", ev.event)),
        Err(e) => return Err(err("connect", e)),
    }
    let send = SendWr {
        wr_id: 0,
        op: SendOp::Send,
        sgl: SgList::single(Sge {
            addr: src.addr(),
            length: 64,
            lkey: src.lkey(),
        }),
        flags: SendFlags::SIGNALED,
    };
    let mut posted = 0u64;
    let end = Instant::now() + Duration::from_secs(10);
    // Post until the SQ is full (the CQ is never polled, so it stays full), then wait
    // for the daemon to end the QP: the CQ's overflow (async event). Other events (the
    // close of the round before) are skipped.
    let why = loop {
        match qp.post_send(&send) {
            Ok(()) => posted += 1,
            Err(iwarp_verbs::Error::QueueFull) => {}
            Err(e) => break format!("post_send: {e}"),
        }
        if let Ok(ev) = ctx.get_async_event_timeout(Duration::from_millis(1)) {
            if ev.kind == iwarp_verbs::AsyncKind::CqOverflow {
                break "async event CqOverflow".to_string();
            }
        }
        if Instant::now() > end {
            return Err(format!(
                "{posted} SENDs posted, CQ never polled: no overflow in 10 s"
            ));
        }
    };
    let _ = id.disconnect();
    drop(id);
    qp.destroy().map_err(|e| err("destroy_qp", e))?;
    Ok((posted, why))
}

fn overrun(a: &Args) -> Res<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let at = SocketAddrV4::new(a.addr, a.port);
    let sink = {
        let (d, s, r) = (a.daemon.clone(), Arc::clone(&stop), Arc::clone(&ready));
        std::thread::spawn(move || sink(d, at, s, r))
    };
    let ctx = Context::open(&a.daemon).map_err(|e| err("opening iwarpd", e))?;
    let pd = ctx.alloc_pd().map_err(|e| err("alloc_pd", e))?;
    let arena = ctx.alloc_arena(4096).map_err(|e| err("alloc_arena", e))?;
    let src = pd
        .reg_mr(&arena, 0, 4096, Access::LOCAL_WRITE)
        .map_err(|e| err("reg_mr", e))?;
    let t0 = Instant::now();
    while !ready.load(Ordering::Acquire) {
        if t0.elapsed() > Duration::from_secs(10) || sink.is_finished() {
            stop.store(true, Ordering::Release);
            return match sink.join() {
                Ok(Err(e)) => Err(e),
                _ => Err("the sink never listened".into()),
            };
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let end = t0 + Duration::from_secs(a.seconds);
    let (mut rounds, mut sends) = (0u64, 0u64);
    let mut last = String::new();
    let mut result = Ok(());
    while Instant::now() < end {
        match overrun_round(&ctx, &pd, a, &src) {
            Ok((n, why)) => {
                rounds += 1;
                sends += n;
                last = why;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    stop.store(true, Ordering::Release);
    if let Ok(Err(e)) = sink.join() {
        result = result.and(Err(e));
    }
    println!(
        "overrun: {rounds} QPs overran their CQ ({sends} SENDs posted); the last ended by {last}"
    );
    result
}

fn main() -> ExitCode {
    let a = Args::parse();
    let r = match a.mode {
        Mode::Objects => objects(&a),
        Mode::Overrun => overrun(&a),
    };
    match r {
        Ok(()) => {
            println!("noisy: done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("noisy: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
