//! The client side of a perftest run: this side connects to a perftest tool started as the
//! server (`ib_send_bw -R` without a server name) and plays perftest's client: the channel
//! script of [`super::script`], the data connection, the test itself, and perftest's end
//! (one more `pingpong_dest` round, then both sides disconnect the data connection).

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use iwarp_verbs::{SendOp, Stag, WcOpcode};

use super::script::{script, Step};
use super::session::{err, Session, Test, DATA, REFUSED};
use super::wire::{report_fields, version_msg, Dest, DEST_LEN};

/// What the client is asked to do.
pub struct ClientOpts {
    /// The test.
    pub test: Test,
    /// The perftest server.
    pub server: SocketAddrV4,
    /// Message size in bytes.
    pub size: u32,
    /// Iterations.
    pub iters: u64,
    /// The server's receive depth (`-r` of both tools; SEND tests).
    pub rx_depth: u32,
    /// WRs in flight (`-t` of perftest, bandwidth tests).
    pub tx_depth: u32,
    /// Whole-run limit.
    pub timeout: Duration,
    /// Daemon name.
    pub daemon: String,
}

/// What the client measured.
#[derive(Debug, Default)]
pub struct ClientReport {
    /// Channel rounds.
    pub rounds: u32,
    /// Data operations completed.
    pub completed: u64,
    /// Data receives completed (SEND latency test).
    pub recvs: u64,
    /// Wall time of the test phase.
    pub elapsed: Duration,
    /// Latency samples (full round trips for the latency tests), nanoseconds, sorted.
    pub rtt_ns: Vec<u64>,
}

impl ClientReport {
    /// Megabytes (10^6) per second of the test phase.
    pub fn mb_per_s(&self, size: u32) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.completed as f64 * f64::from(size) / s / 1e6
        } else {
            0.0
        }
    }

    /// The median of the samples divided by `div` (2: half round trip), microseconds.
    pub fn median_us(&self, div: u64) -> f64 {
        match self.rtt_ns.get(self.rtt_ns.len() / 2) {
            Some(&ns) => ns as f64 / div.max(1) as f64 / 1000.0,
            None => 0.0,
        }
    }
}

/// Runs the client.
pub fn run_client(o: &ClientOpts) -> Result<ClientReport, String> {
    let deadline = Instant::now() + o.timeout;
    let mut s = Session::open(&o.daemon, o.size)?;
    connect_retrying(&mut s, o, false)?;
    let mut r = ClientReport::default();
    let mut peer: Option<Dest> = None;
    for step in script(o.test).steps() {
        match step {
            Step::Version => {
                round(&mut s, &mut r, &version_msg(), deadline)?;
            }
            Step::PageSize => {
                round(&mut s, &mut r, &4096u32.to_be_bytes(), deadline)?;
            }
            Step::CacheLine => {
                round(&mut s, &mut r, &64u32.to_be_bytes(), deadline)?;
            }
            Step::Mtu => {
                round(&mut s, &mut r, b"3\0", deadline)?;
            }
            Step::ZeroDest => {
                round(&mut s, &mut r, &[0u8; DEST_LEN], deadline)?;
            }
            Step::Dest => {
                let mine = s.my_dest(o.test).encode();
                let reply = round(&mut s, &mut r, &mine, deadline)?;
                let d = Dest::decode(&reply).map_err(|e| e.to_string())?;
                if !d.is_zero() {
                    peer = Some(d);
                }
            }
            Step::ConnectData => connect_retrying(&mut s, o, true)?,
            Step::Run => {
                let p = peer.ok_or("no pingpong_dest from the server before the test")?;
                run_test(&mut s, o, &p, &mut r, deadline)?;
            }
            Step::Reports => {
                let mbps = r.mb_per_s(o.size);
                let rate = r.completed as f64 / r.elapsed.as_secs_f64().max(1e-9) / 1e6;
                for f in report_fields(u64::from(o.size), o.iters, mbps, mbps, rate) {
                    round(&mut s, &mut r, &f, deadline)?;
                }
            }
        }
    }
    // perftest's end: both sides disconnect the data connection and wait for it.
    if let Some(c) = s.data.as_ref() {
        if !s.data_down {
            let _ = c.id.disconnect();
        }
    }
    while !s.data_down {
        if Instant::now() > deadline {
            return Err("timeout waiting for the data connection's disconnect".into());
        }
        s.cm_poll()?;
        s.data_poll()?;
        std::thread::sleep(Duration::from_micros(50));
    }
    if let Some(c) = s.chan.as_ref() {
        let _ = c.id.disconnect();
    }
    let end = Instant::now() + Duration::from_secs(2);
    while !s.chan_down && Instant::now() < end {
        s.cm_poll()?;
        let _ = s.chan_poll();
        std::thread::sleep(Duration::from_micros(50));
    }
    r.rtt_ns.sort_unstable();
    Ok(r)
}

/// One channel round: sends `msg` (the receive for the answer is posted), waits for the
/// answer of the same length and posts the next receive. Returns the answer.
fn round(
    s: &mut Session,
    r: &mut ClientReport,
    msg: &[u8],
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    s.chan_send(msg, deadline.saturating_duration_since(Instant::now()))?;
    loop {
        if let Some(len) = s.chan_poll()? {
            let reply = s.chan_msg(len);
            s.post_chan_recv()?;
            r.rounds += 1;
            if len != msg.len() {
                return Err(format!(
                    "channel round {}: sent {} bytes, the server answered {len}",
                    r.rounds,
                    msg.len()
                ));
            }
            return Ok(reply);
        }
        if s.chan_closing() {
            return Err(format!(
                "the server closed the channel in round {}",
                r.rounds + 1
            ));
        }
        if Instant::now() > deadline {
            return Err(format!("timeout in channel round {}", r.rounds + 1));
        }
        s.cm_poll()?;
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Connect tries against a server that does not listen yet (perftest's own client:
/// `retry_rdma_connect`, 10 tries 100 ms apart).
const CONNECT_TRIES: u32 = 10;
const CONNECT_RETRY: Duration = Duration::from_millis(100);

/// Creates the channel's or the data connection's QP (SEND latency: receives first, as
/// perftest) and connects it; a refused connection is tried again on a new CM id and QP.
fn connect_retrying(s: &mut Session, o: &ClientOpts, data: bool) -> Result<(), String> {
    for tries_left in (0..CONNECT_TRIES).rev() {
        let id = s.cm.create_id().map_err(|e| err("create_id", e))?;
        if data {
            let (depth, recv) = match o.test {
                Test::SendLat => (64, 20),
                _ => (2 * o.tx_depth.max(1) + 8, 4),
            };
            s.data = Some(s.make_conn(id, depth, recv, false)?);
            if o.test == Test::SendLat {
                for _ in 0..16 {
                    s.post_data_recv()?;
                }
            }
        } else {
            s.chan = Some(s.make_conn(id, 8, 2, false)?);
            s.post_chan_recv()?;
        }
        match s.connect(data, o.server, o.timeout) {
            Err(e) if e == REFUSED && tries_left > 0 => std::thread::sleep(CONNECT_RETRY),
            r => return r,
        }
    }
    Err(REFUSED.into())
}

/// The test phase.
fn run_test(
    s: &mut Session,
    o: &ClientOpts,
    p: &Dest,
    r: &mut ClientReport,
    deadline: Instant,
) -> Result<(), String> {
    let remote = SendOp::Write {
        remote_to: p.vaddr,
        rkey: Stag(p.rkey),
    };
    let read = SendOp::Read {
        remote_to: p.vaddr,
        rkey: Stag(p.rkey),
        invalidate_local: false,
    };
    let size = o.size as usize;
    let recv_off = s.data_recv();
    if o.test.is_lat() {
        // No allocation inside the timed loop (bounded: samples past this still record).
        r.rtt_ns.reserve(o.iters.min(1 << 24) as usize);
    }
    let start = Instant::now();
    let mut posted = 0u64;
    let check = |r: &ClientReport| -> Result<(), String> {
        if Instant::now() > deadline {
            Err(format!(
                "timeout in the test after {} operations",
                r.completed
            ))
        } else {
            Ok(())
        }
    };
    match o.test {
        Test::SendBw | Test::WriteBw | Test::ReadBw => {
            let window = u64::from(o.tx_depth.max(1));
            // iWARP SEND credits: the server writes its receive count into our credit word.
            let rx_depth = u64::from(super::wire::send_rx_depth(o.rx_depth, o.iters).max(1));
            while r.completed < o.iters {
                check(r)?;
                let credit = u64::from(s.credit_word());
                let credit_ok = o.test != Test::SendBw || posted < credit + rx_depth;
                if posted < o.iters && posted - r.completed < window && credit_ok {
                    let (op, off) = match o.test {
                        Test::SendBw => (SendOp::Send, DATA),
                        Test::WriteBw => (remote, DATA),
                        _ => (read, recv_off),
                    };
                    s.post_data(posted, op, off, o.size)?;
                    posted += 1;
                    continue;
                }
                s.data_poll()?;
                r.completed += s
                    .data_cqes
                    .drain(..)
                    .filter(|c| c.opcode != WcOpcode::Recv)
                    .count() as u64;
                s.cm_poll()?;
            }
        }
        Test::ReadLat => {
            while r.completed < o.iters {
                let t0 = Instant::now();
                s.post_data(posted, read, recv_off, o.size)?;
                posted += 1;
                loop {
                    check(r)?;
                    s.data_poll()?;
                    if s.data_cqes.drain(..).any(|c| c.opcode == WcOpcode::Read) {
                        break;
                    }
                }
                r.rtt_ns.push(t0.elapsed().as_nanos() as u64);
                r.completed += 1;
            }
        }
        Test::SendLat => {
            // The client sends first; each answer (a SEND of the same size) ends a round.
            while r.completed < o.iters {
                let t0 = Instant::now();
                s.post_data(posted, SendOp::Send, DATA, o.size)?;
                posted += 1;
                loop {
                    check(r)?;
                    s.data_poll()?;
                    let got = s
                        .data_cqes
                        .drain(..)
                        .filter(|c| c.opcode == WcOpcode::Recv)
                        .count();
                    if got > 0 {
                        r.recvs += got as u64;
                        for _ in 0..got {
                            s.post_data_recv()?;
                        }
                        break;
                    }
                }
                r.rtt_ns.push(t0.elapsed().as_nanos() as u64);
                r.completed += 1;
            }
        }
        Test::WriteLat => {
            // The server writes first: wait for its write number n, answer with ours.
            let mut t0 = Instant::now();
            while r.completed < o.iters {
                let want = (r.completed + 1) as u8;
                loop {
                    check(r)?;
                    if s.arena.as_slice()[recv_off + size - 1] == want {
                        break;
                    }
                    s.data_poll()?;
                    s.data_cqes.clear();
                }
                if r.completed > 0 {
                    r.rtt_ns.push(t0.elapsed().as_nanos() as u64);
                }
                t0 = Instant::now();
                s.arena.as_mut_slice()[DATA + size - 1] = want;
                s.post_data(posted, remote, DATA, o.size)?;
                posted += 1;
                r.completed += 1;
            }
        }
    }
    r.elapsed = start.elapsed();
    Ok(())
}
