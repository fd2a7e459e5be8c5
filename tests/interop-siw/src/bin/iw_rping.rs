//! iw-rping: rping's client and server (rdma-core's rping, same messages and sequence) over
//! iwarpd's verbs client library, so that `rping` on Linux siw can be the other end.
//!
//!   iw-rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-d DAEMON]
//!   iw-rping -c  -a ADDR  [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d DAEMON]
//!
//! `-S` goes up to 1 MiB (rping: 64 KiB - 1) when both ends are iw-rping.
//! Extra options for interop tests: `--pd HEX` (private data of the connect or accept),
//! `--reject HEX` (server: reject the request with this private data), `--abort` (client:
//! abort instead of disconnecting after the pings), `--timeout-ms N` (each wait),
//! `--linger-ms N` (client: wait before disconnecting after the pings; closing the very
//! moment the connection is up can crash the peer's Linux iw_cm, docs/INTEROP.md
//! difference 11).
//! Exit status 0 when every ping completed (and validated with -V), 1 otherwise, 2 usage.
#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use iwarp_interop_siw::rping::{
    c_len_with_nul, c_str, fill_ping, RdmaInfo, DEFAULT_PORT, DEFAULT_SIZE, INFO_LEN, MAX_SIZE_IW,
    MIN_SIZE,
};
use iwarp_verbs::{
    Access, Arena, CmEvent, CmEventChannel, CmId, ConnParam, Context, Cq, Cqe, Mr, Pd, Qp, QpCap,
    QpInitAttr, RecvWr, SendFlags, SendOp, SendWr, SgList, Stag, WcOpcode, WcStatus, EMPTY_CQE,
};

struct Opts {
    server: bool,
    addr: Ipv4Addr,
    port: u16,
    count: u64,
    size: u32,
    verbose: bool,
    validate: bool,
    daemon: String,
    pd: Vec<u8>,
    reject: Option<Vec<u8>>,
    abort: bool,
    timeout: Duration,
    linger: Duration,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: iw-rping -s|-c [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d DAEMON] \
         [--pd HEX] [--reject HEX] [--abort] [--timeout-ms N] [--linger-ms N]"
    );
    ExitCode::from(2)
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn parse(args: &[String]) -> Option<Opts> {
    let mut o = Opts {
        server: false,
        addr: Ipv4Addr::UNSPECIFIED,
        port: DEFAULT_PORT,
        count: u64::MAX,
        size: DEFAULT_SIZE,
        verbose: false,
        validate: false,
        daemon: "iwarpd".into(),
        pd: Vec::new(),
        reject: None,
        abort: false,
        timeout: Duration::from_secs(20),
        linger: Duration::ZERO,
    };
    let mut mode = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-s" => mode = Some(true),
            "-c" => mode = Some(false),
            "-v" => o.verbose = true,
            "-V" => o.validate = true,
            "--abort" => o.abort = true,
            "-a" => o.addr = it.next()?.parse().ok()?,
            "-p" => o.port = it.next()?.parse().ok()?,
            "-C" => o.count = it.next()?.parse().ok()?,
            "-S" => o.size = it.next()?.parse().ok()?,
            "-d" => o.daemon = it.next()?.clone(),
            "--pd" => o.pd = hex(it.next()?)?,
            "--reject" => o.reject = Some(hex(it.next()?)?),
            "--timeout-ms" => o.timeout = Duration::from_millis(it.next()?.parse().ok()?),
            "--linger-ms" => o.linger = Duration::from_millis(it.next()?.parse().ok()?),
            _ => return None,
        }
    }
    o.server = mode?;
    if !(MIN_SIZE..=MAX_SIZE_IW).contains(&o.size) || (!o.server && o.addr.is_unspecified()) {
        return None;
    }
    Some(o)
}

/// The buffers of one end: start (source) and rdma (sink/read target) of `size` bytes, then
/// the 16-byte receive and send messages, all in one arena under one MR.
struct Bufs {
    arena: Arena,
    mr: Mr,
    size: usize,
}

impl Bufs {
    const START: usize = 0;
    fn rdma(&self) -> usize {
        self.size
    }
    fn recv(&self) -> usize {
        2 * self.size
    }
    fn send(&self) -> usize {
        2 * self.size + INFO_LEN
    }
    fn info(&self, off: usize) -> RdmaInfo {
        RdmaInfo {
            buf: self.mr.addr() + off as u64,
            rkey: self.mr.rkey().0,
            size: self.size as u32,
        }
    }
    fn slice(&self, off: usize, len: usize) -> &[u8] {
        &self.arena.as_slice()[off..off + len]
    }
    fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        &mut self.arena.as_mut_slice()[off..off + len]
    }
    fn sgl(&self, off: usize, len: usize) -> Result<SgList, String> {
        let sge = self
            .mr
            .sge(off as u64, len as u32)
            .map_err(|e| format!("sge: {e}"))?;
        Ok(SgList::single(sge))
    }
}

/// Completions polled while waiting for another opcode, kept for their own wait.
const PENDING_MAX: usize = 16;

/// One connected end.
struct End {
    qp: Qp,
    cq: Cq,
    id: CmId,
    bufs: Bufs,
    /// Successful completions not claimed yet (at most [`PENDING_MAX`]).
    pending: Vec<Cqe>,
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

fn make_bufs(ctx: &Context, pd: &Pd, size: u32) -> Result<Bufs, String> {
    let size = size as usize;
    let len = (2 * size + 2 * INFO_LEN).div_ceil(4096) * 4096;
    let arena = ctx.alloc_arena(len).map_err(|e| err("alloc_arena", e))?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let mr = pd
        .reg_mr(&arena, 0, len, access)
        .map_err(|e| err("reg_mr", e))?;
    Ok(Bufs { arena, mr, size })
}

fn qp_attr(cq: &Cq) -> QpInitAttr<'_> {
    let mut a = QpInitAttr::new(cq, cq);
    a.cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
    };
    a.ird = 1;
    a.ord = 1;
    a.remote_read = true;
    a.remote_write = true;
    a
}

fn conn_param(pd: &[u8]) -> ConnParam {
    ConnParam {
        private_data: pd.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
    }
}

fn post_recv(e: &mut End) -> Result<(), String> {
    let sgl = e.bufs.sgl(e.bufs.recv(), INFO_LEN)?;
    e.qp.post_recv(&RecvWr { wr_id: 1, sgl })
        .map_err(|x| err("post_recv", x))
}

fn post(e: &mut End, wr_id: u64, op: SendOp, off: usize, len: usize) -> Result<(), String> {
    let sgl = e.bufs.sgl(off, len)?;
    e.qp.post_send(&SendWr {
        wr_id,
        op,
        sgl,
        flags: SendFlags::SIGNALED,
    })
    .map_err(|x| err("post_send", x))
}

/// Waits for the completion of opcode `want`; successful completions of other opcodes are
/// kept for later waits (a peer's next SEND may complete before our own SEND's completion
/// is polled), except our own SENDs' while waiting for something else: as in rping, whose
/// completion handler only logs them, nobody waits for them, and kept they filled the
/// list after 8 pings (the client never waits for its SENDs). Flushed completions are
/// skipped, as rping's completion handler does: the peer's disconnect flushes the
/// receive posted for a next ping that never comes, and the CM Disconnected event, not
/// the flush, ends the wait. A CM Disconnected while waiting is an error
/// (`disconnected`).
fn wait_cqe(e: &mut End, cm: &CmEventChannel, want: WcOpcode, t: Duration) -> Result<Cqe, String> {
    if let Some(i) = e.pending.iter().position(|c| c.opcode == want) {
        return Ok(e.pending.remove(i));
    }
    let end = Instant::now() + t;
    let mut wc = [EMPTY_CQE; 4];
    let mut spins = 0u32;
    loop {
        let n = e.cq.poll(&mut wc).map_err(|x| err("poll_cq", x))?;
        let mut found = None;
        for c in &wc[..n] {
            if c.status == WcStatus::Flushed {
                continue;
            }
            if c.status != WcStatus::Success {
                return Err(format!(
                    "completion error {:?} (opcode {:?}, wr_id {})",
                    c.status, c.opcode, c.wr_id
                ));
            }
            if c.opcode == want && found.is_none() {
                found = Some(*c);
            } else if c.opcode == WcOpcode::Send {
                // Done; see above.
            } else if e.pending.len() < PENDING_MAX {
                e.pending.push(*c);
            } else {
                return Err(format!("more than {PENDING_MAX} completions unclaimed"));
            }
        }
        if let Some(c) = found {
            return Ok(c);
        }
        if n == 0 {
            spins += 1;
            if spins.is_multiple_of(1024) {
                if let Ok(ev) = cm.try_get_event() {
                    if matches!(ev.event, CmEvent::Disconnected) {
                        return Err("disconnected".into());
                    }
                }
                if Instant::now() > end {
                    return Err(format!("timeout waiting for a {want:?} completion"));
                }
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

fn wait_event(cm: &CmEventChannel, t: Duration) -> Result<iwarp_verbs::CmEventInfo, String> {
    cm.get_event_timeout(t).map_err(|e| err("CM event", e))
}

fn run_client(o: &Opts) -> Result<(), String> {
    let ctx = Context::open(&o.daemon).map_err(|e| err("opening iwarpd", e))?;
    let pd = ctx.alloc_pd().map_err(|e| err("alloc_pd", e))?;
    let bufs = make_bufs(&ctx, &pd, o.size)?;
    let cq = ctx.create_cq(16, None).map_err(|e| err("create_cq", e))?;
    let qp = pd
        .create_qp(&qp_attr(&cq))
        .map_err(|e| err("create_qp", e))?;
    let cm = ctx
        .create_cm_event_channel()
        .map_err(|e| err("CM channel", e))?;
    let id = cm.create_id().map_err(|e| err("create_id", e))?;
    let mut e = End {
        qp,
        cq,
        id,
        bufs,
        pending: Vec::with_capacity(PENDING_MAX),
    };
    post_recv(&mut e)?;
    let server = SocketAddrV4::new(o.addr, o.port);
    e.id.connect(&e.qp, server, &conn_param(&o.pd))
        .map_err(|x| err("connect", x))?;
    match wait_event(&cm, o.timeout)?.event {
        CmEvent::Established { private_data, .. } => {
            println!("established pd={}", to_hex(&private_data))
        }
        CmEvent::Rejected { private_data } => {
            println!("rejected pd={}", to_hex(&private_data));
            return Err("rejected".into());
        }
        other => return Err(format!("connect: {other:?}")),
    }
    let size = o.size as usize;
    let mut ping = 0u64;
    while ping < o.count {
        fill_ping(e.bufs.slice_mut(Bufs::START, size), ping);
        e.bufs.slice_mut(e.bufs.rdma(), size).fill(0);
        // SEND the source's info; the server READs it and answers "go".
        let info = e.bufs.info(Bufs::START).encode();
        let s = e.bufs.send();
        e.bufs.slice_mut(s, INFO_LEN).copy_from_slice(&info);
        post(&mut e, 2, SendOp::Send, s, INFO_LEN)?;
        wait_cqe(&mut e, &cm, WcOpcode::Recv, o.timeout)?;
        post_recv(&mut e)?;
        // SEND the sink's info; the server WRITEs what it read and answers "go".
        let info = e.bufs.info(e.bufs.rdma()).encode();
        e.bufs.slice_mut(s, INFO_LEN).copy_from_slice(&info);
        post(&mut e, 3, SendOp::Send, s, INFO_LEN)?;
        wait_cqe(&mut e, &cm, WcOpcode::Recv, o.timeout)?;
        post_recv(&mut e)?;
        if o.validate && e.bufs.slice(Bufs::START, size) != e.bufs.slice(e.bufs.rdma(), size) {
            return Err(format!("data mismatch in ping {ping}"));
        }
        if o.verbose {
            println!("ping data: {}", c_str(e.bufs.slice(e.bufs.rdma(), size)));
        }
        ping += 1;
    }
    std::thread::sleep(o.linger);
    if o.abort {
        e.id.abort().map_err(|x| err("abort", x))?;
        println!("aborted after {ping} pings");
        return Ok(());
    }
    e.id.disconnect().map_err(|x| err("disconnect", x))?;
    let end = Instant::now() + o.timeout;
    while Instant::now() < end {
        match cm.get_event_timeout(Duration::from_millis(100)) {
            Ok(ev) if matches!(ev.event, CmEvent::Disconnected) => break,
            _ => {}
        }
    }
    println!("client done: {ping} pings");
    Ok(())
}

fn run_server(o: &Opts) -> Result<(), String> {
    let ctx = Context::open(&o.daemon).map_err(|e| err("opening iwarpd", e))?;
    let pd = ctx.alloc_pd().map_err(|e| err("alloc_pd", e))?;
    let cm = ctx
        .create_cm_event_channel()
        .map_err(|e| err("CM channel", e))?;
    let listen = cm.create_id().map_err(|e| err("create_id", e))?;
    listen
        .listen(SocketAddrV4::new(o.addr, o.port), 4)
        .map_err(|e| err("listen", e))?;
    println!("listening on {}:{}", o.addr, o.port);
    let ev = wait_event(&cm, o.timeout)?;
    let (req, pdata) = match (ev.event, ev.request) {
        (CmEvent::ConnectRequest { private_data, .. }, Some(req)) => (req, private_data),
        (other, _) => return Err(format!("expected a connect request, got {other:?}")),
    };
    println!("connect request pd={}", to_hex(&pdata));
    if let Some(r) = &o.reject {
        req.reject(r).map_err(|e| err("reject", e))?;
        println!("rejected");
        return Ok(());
    }
    let bufs = make_bufs(&ctx, &pd, o.size)?;
    let cq = ctx.create_cq(16, None).map_err(|e| err("create_cq", e))?;
    let qp = req
        .create_qp(&pd, &qp_attr(&cq))
        .map_err(|e| err("create_qp", e))?;
    let mut e = End {
        qp,
        cq,
        id: req,
        bufs,
        pending: Vec::with_capacity(PENDING_MAX),
    };
    post_recv(&mut e)?;
    e.id.accept(&e.qp, &conn_param(&o.pd))
        .map_err(|x| err("accept", x))?;
    match wait_event(&cm, o.timeout)?.event {
        CmEvent::Established { .. } => println!("established"),
        other => return Err(format!("accept: {other:?}")),
    }
    let size = o.size as usize;
    let mut ping = 0u64;
    let s = e.bufs.send();
    e.bufs.slice_mut(s, INFO_LEN).fill(0);
    let mut disconnected = false;
    while ping < o.count {
        // The client's source: READ it.
        let src = match wait_cqe(&mut e, &cm, WcOpcode::Recv, o.timeout) {
            Ok(c) => c,
            Err(x) if x == "disconnected" => {
                disconnected = true;
                break;
            }
            Err(x) => return Err(x),
        };
        let info = RdmaInfo::decode(e.bufs.slice(e.bufs.recv(), src.byte_len as usize))
            .map_err(|x| x.to_string())?;
        post_recv(&mut e)?;
        let len = (info.size as usize).min(size);
        let rd = SendOp::Read {
            remote_to: info.buf,
            rkey: Stag(info.rkey),
            invalidate_local: false,
        };
        let r = e.bufs.rdma();
        post(&mut e, 4, rd, r, len)?;
        wait_cqe(&mut e, &cm, WcOpcode::Read, o.timeout)?;
        if o.verbose {
            println!("server ping data: {}", c_str(e.bufs.slice(r, size)));
        }
        post(&mut e, 5, SendOp::Send, s, INFO_LEN)?;
        // The client's sink: WRITE what was read (strlen + 1 bytes).
        wait_cqe(&mut e, &cm, WcOpcode::Recv, o.timeout)?;
        let info =
            RdmaInfo::decode(e.bufs.slice(e.bufs.recv(), INFO_LEN)).map_err(|x| x.to_string())?;
        post_recv(&mut e)?;
        let wlen = c_len_with_nul(e.bufs.slice(r, len)).min(info.size as usize);
        let wr = SendOp::Write {
            remote_to: info.buf,
            rkey: Stag(info.rkey),
        };
        post(&mut e, 6, wr, r, wlen)?;
        wait_cqe(&mut e, &cm, WcOpcode::Write, o.timeout)?;
        post(&mut e, 7, SendOp::Send, s, INFO_LEN)?;
        wait_cqe(&mut e, &cm, WcOpcode::Send, o.timeout)?;
        ping += 1;
    }
    // Wait for the client's disconnect (rping's server loops until it comes), unless it
    // already came: waiting for a second one held a server whose client was killed for
    // its whole timeout more (scripts/soak.sh saw it stuck past 60 s).
    let end = Instant::now()
        + if disconnected {
            Duration::ZERO
        } else {
            o.timeout
        };
    while Instant::now() < end {
        match cm.get_event_timeout(Duration::from_millis(100)) {
            Ok(ev) if matches!(ev.event, CmEvent::Disconnected) => break,
            _ => {}
        }
    }
    println!("server done: {ping} pings");
    Ok(())
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(o) = parse(&args) else {
        return usage();
    };
    let r = if o.server {
        run_server(&o)
    } else {
        run_client(&o)
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_rpings_options() {
        let o = parse(&args("-c -a 198.18.0.11 -p 7174 -C 3 -S 100 -v -V -d siw")).unwrap();
        assert!(!o.server && o.verbose && o.validate);
        assert_eq!((o.port, o.count, o.size), (7174, 3, 100));
        assert_eq!(o.daemon, "siw");
        let o = parse(&args("-s --reject 0a0b --pd ff")).unwrap();
        assert!(o.server);
        assert_eq!(o.reject, Some(vec![10, 11]));
        assert_eq!(o.pd, vec![255]);
    }

    #[test]
    fn refuses_bad_options() {
        assert!(parse(&args("-c")).is_none(), "client needs -a");
        assert!(parse(&args("-a 1.2.3.4")).is_none(), "needs -s or -c");
        assert!(parse(&args("-s -S 8")).is_none(), "below rping's minimum");
        assert!(
            parse(&args("-s -S 1048577")).is_none(),
            "above iw-rping's maximum (1 MiB)"
        );
        assert!(
            parse(&args("-s -S 65536")).is_some(),
            "above rping's maximum, within iw-rping's (both ends iw-rping)"
        );
        assert!(parse(&args("-s --pd abc")).is_none(), "odd hex");
        assert!(parse(&args("-s -x")).is_none());
    }
}
