//! Scale: N connected QPs on one core. Two engines joined by the zero-loss in-memory link
//! of [`crate::pair`] (virtual time, frames shuttled in bursts): B listens and accepts,
//! A opens N QPs (one QP each, sharing one PD and CQ per side) all at once, peer-to-peer
//! mode so that every initiator sends its RTR (RFC 6581) and every responder waits for it.
//!
//! Measured:
//! - set-up: wall-clock and CPU time from the first SYN to the last connection ready on
//!   both sides (`Established` on A and B, and every responder has received its RTR);
//! - memory of the idle established state, per connection: the engines' own accounting
//!   (table slots, what connections hold beyond them, the MPA pool) and the process RSS
//!   delta from before the engines were built (`/proc/self/statm`; includes the verbs
//!   objects and everything else), both divided by the connections of both engines;
//! - one signaled 64-byte RDMA WRITE on every QP, checked byte for byte at B;
//! - sustained load on every QP at once (issue 13, target 6): for a fixed wall time, every
//!   QP keeps [`STREAM_DEPTH`] signaled 4 KiB WRITEs in flight, each into its own 4 KiB of
//!   B's memory, reposted as it completes; the aggregate goodput over all QPs (checked
//!   byte for byte at B), to compare with one QP's (`write_4KiB`);
//! - disconnect of every QP, the TCP connections run out of TIME_WAIT, and memory again.

use std::time::{Duration as WallDuration, Instant as WallInstant};

use iwarp_engine::{AcceptParams, ConnectParams, Engine, EngineConfig, Event};
use iwarp_rdma::{mem::MrAttr, QpAttr, RnicLimits};
use iwarp_types::{
    Access, CqId, Cqe, Duration, Instant, PdId, QpId, RegionId, SendFlags, SendOp, SendWr, SgList,
    Sge, Stag, VecMemory, WcOpcode, WcStatus,
};

use iwarp_testkit::engine::{bench_config, next_deadline, run_due_timers, Shuttle};

use crate::pair::{BenchError, ETH_HEADER_LEN};

/// The listening port of engine B.
const PORT: u16 = 4791;
/// Bytes of each WRITE (one per QP).
pub const WRITE_LEN: usize = 64;
/// Frames moved in one direction per round at most (a NIC burst).
const BURST_FRAMES: usize = 32;
/// Virtual nanoseconds per shuttle round.
const ROUND_NS: u64 = 1_000;
/// Completions polled per call.
const CQ_POLL_BATCH: usize = 64;
/// Bytes of each WRITE of the sustained phase; each QP owns this much of each arena.
pub const STREAM_LEN: usize = 4096;
/// WRITEs each QP keeps in flight in the sustained phase (its send queue's depth).
pub const STREAM_DEPTH: usize = 2;

fn err(what: impl core::fmt::Debug, context: &str) -> BenchError {
    BenchError(format!("{context}: {what:?}"))
}

/// What the scale run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScaleReport {
    /// Connected QPs (on each engine).
    pub conns: usize,
    /// Wall time from the first `connect` to the last connection ready on both sides.
    pub setup_wall: WallDuration,
    /// CPU time of the benchmark's thread over the same span
    /// (`/proc/thread-self/schedstat`; zero if unreadable).
    pub setup_cpu: WallDuration,
    /// Virtual time the set-up took on the link.
    pub setup_virtual_us: u64,
    /// Engine memory of the idle established state per connection (both engines'
    /// connection-table slots, connection heap and MPA pool, divided by `2 * conns`).
    pub engine_bytes_per_conn: f64,
    /// Of which: heap connections hold beyond their slots, per connection.
    pub conn_heap_bytes_per_conn: f64,
    /// Bytes of one connection-table slot (`EngineConfig::conn_slot_bytes`).
    pub slot_bytes: usize,
    /// Process RSS growth from before the engines were built to the idle established
    /// state, divided by `2 * conns` (verbs objects included).
    pub rss_bytes_per_conn: f64,
    /// Wall time of one WRITE on every QP, to the last completion.
    pub write_wall: WallDuration,
    /// Sustained phase: WRITE payload bytes completed within its wall time, all QPs.
    pub stream_bytes: u64,
    /// Sustained phase: its wall time.
    pub stream_wall: WallDuration,
    /// Sustained phase: the QP with the fewest completed WRITEs, and the most.
    pub stream_min_max_per_qp: (u64, u64),
    /// Connection heap per connection once the WRITEs completed and the link went quiet.
    pub conn_heap_bytes_after_write: f64,
    /// FPDU rings the pools allocated (high-water mark, both engines).
    pub pool_rings_allocated: usize,
    /// Times a connection waited for a ring (both engines).
    pub pool_ring_waits: u64,
    /// Wall time of disconnecting every QP (until `Disconnected` on both sides).
    pub disconnect_wall: WallDuration,
    /// Live connections after TIME_WAIT ran out (both engines).
    pub conns_left: usize,
    /// Connection heap after the connections were gone (both engines).
    pub conn_heap_bytes_after_close: usize,
    /// Process RSS growth per connection at the end (allocators keep freed memory).
    pub rss_bytes_per_conn_after_close: f64,
}

impl ScaleReport {
    /// Sustained phase: aggregate goodput in bytes per second.
    pub fn stream_bytes_per_s(&self) -> f64 {
        self.stream_bytes as f64 / self.stream_wall.as_secs_f64().max(1e-9)
    }

    /// Connections per second through set-up (TCP + MPA + RTR, both sides ready).
    pub fn setup_rate(&self) -> f64 {
        self.conns as f64 / self.setup_wall.as_secs_f64().max(1e-9)
    }

    /// CPU microseconds per connection set-up (both engines' work together).
    pub fn setup_cpu_us_per_conn(&self) -> f64 {
        self.setup_cpu.as_secs_f64() * 1e6 / self.conns.max(1) as f64
    }

    /// The report as lines of text.
    pub fn lines(&self) -> Vec<String> {
        vec![
            format!(
                "scale_setup: {} QPs connected (TCP + MPA rev 2 + RTR, both sides ready) in {:.3} s wall: {:.0} conn/s, {:.1} us CPU per connection ({} us virtual)",
                self.conns,
                self.setup_wall.as_secs_f64(),
                self.setup_rate(),
                self.setup_cpu_us_per_conn(),
                self.setup_virtual_us
            ),
            format!(
                "scale_memory_idle: {:.0} B per connection by engine accounting (slot {} B, connection heap {:.0} B), {:.0} B per connection process RSS (verbs objects included)",
                self.engine_bytes_per_conn,
                self.slot_bytes,
                self.conn_heap_bytes_per_conn,
                self.rss_bytes_per_conn
            ),
            format!(
                "scale_write: one {WRITE_LEN} B WRITE on each of {} QPs verified in {:.3} s; connection heap after {:.0} B per connection; pool rings allocated {}, ring waits {}",
                self.conns,
                self.write_wall.as_secs_f64(),
                self.conn_heap_bytes_after_write,
                self.pool_rings_allocated,
                self.pool_ring_waits
            ),
            format!(
                "scale_stream: {} QPs x {STREAM_DEPTH} signaled {} KiB WRITEs in flight each for {:.1} s: {:.2} Gbit/s aggregate, verified; per QP {} to {} WRITEs completed",
                self.conns,
                STREAM_LEN / 1024,
                self.stream_wall.as_secs_f64(),
                self.stream_bytes_per_s() * 8.0 / 1e9,
                self.stream_min_max_per_qp.0,
                self.stream_min_max_per_qp.1
            ),
            format!(
                "scale_close: {} QPs disconnected in {:.3} s; after TIME_WAIT {} connections left, connection heap {} B, RSS growth {:.0} B per connection (freed memory stays with the allocator)",
                self.conns,
                self.disconnect_wall.as_secs_f64(),
                self.conns_left,
                self.conn_heap_bytes_after_close,
                self.rss_bytes_per_conn_after_close
            ),
        ]
    }
}

/// Resident set size of the process in bytes (0 if `/proc` is unreadable).
pub fn rss_bytes() -> usize {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// CPU time the calling thread has run (0 if `/proc` is unreadable).
pub fn cpu_time() -> WallDuration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    WallDuration::from_nanos(ns)
}

/// The engine configuration for `n` connections with one QP each.
pub fn scale_config(last: u8, n: usize) -> EngineConfig {
    let mut c = EngineConfig {
        max_conns: n + 64,
        backlog_max: n.max(1),
        event_queue_len: 2 * n + 256,
        ..bench_config(last, EngineConfig::default().mtu, true)
    };
    c.mpa.p2p = true;
    c.rnic.limits = RnicLimits {
        max_qps: (n + 64) as u32,
        max_async_events: (2 * n + 256) as u32,
        ..RnicLimits::default()
    };
    c
}

/// One engine with its memory, one PD, one CQ, one MR and `n` small QPs.
struct Side {
    eng: Engine,
    mem: VecMemory,
    cq: CqId,
    mr: Stag,
    qps: Vec<QpId>,
    region: RegionId,
}

impl Side {
    fn new(last: u8, n: usize) -> Result<Side, BenchError> {
        let mut eng = Engine::try_new(scale_config(last, n)).map_err(|e| err(e, "engine"))?;
        let mut mem = VecMemory::new();
        let arena = n * STREAM_LEN;
        let region = mem.add_arena(arena);
        let r = eng.rnic_mut();
        let pd: PdId = r.alloc_pd().map_err(|e| err(e, "alloc_pd"))?;
        let (cq, _) = r.create_cq(4096).map_err(|e| err(e, "create_cq"))?;
        let attr = QpAttr {
            sq_depth: STREAM_DEPTH as u32,
            inbound_write: true,
            ..QpAttr::new(pd, cq)
        };
        let mut qps = Vec::with_capacity(n);
        for _ in 0..n {
            qps.push(r.create_qp(&attr).map_err(|e| err(e, "create_qp"))?.0);
        }
        let mr_attr = MrAttr {
            pd,
            region,
            region_offset: 0,
            len: arena as u64,
            va: 0,
            zero_based: true,
            access: Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            key: 0x42,
            remote_access_flag: true,
        };
        let mr = r
            .reg_mr(&mr_attr, Some(arena as u64))
            .map_err(|e| err(e, "reg_mr"))?;
        Ok(Side {
            eng,
            mem,
            cq,
            mr,
            qps,
            region,
        })
    }

    /// Table slots, connection heap and MPA pool: the engine's connection memory.
    fn engine_bytes(&self) -> usize {
        self.eng.conn_table_bytes() + self.eng.conns_heap_bytes() + self.eng.mpa_pool().heap_bytes()
    }
}

/// Both engines and the link between them.
struct Scale {
    a: Side,
    b: Side,
    now: Instant,
    link: Shuttle,
    cqes: Vec<Cqe>,
}

/// What the events of one round brought.
#[derive(Default)]
struct Tally {
    a_established: usize,
    b_established: usize,
    a_disconnected: usize,
    b_disconnected: usize,
}

impl Scale {
    /// One burst each way; returns the frames moved.
    fn shuttle(&mut self) -> usize {
        let mut moved = 0;
        for dir in 0..2 {
            let (tx, rx) = if dir == 0 {
                (&mut self.a, &mut self.b)
            } else {
                (&mut self.b, &mut self.a)
            };
            let (n, _) =
                self.link
                    .burst(self.now, (&mut tx.eng, &tx.mem), (&mut rx.eng, &mut rx.mem));
            moved += n;
        }
        moved
    }

    fn timers(&mut self) {
        for s in [&mut self.a, &mut self.b] {
            run_due_timers(self.now, &mut s.eng, &mut s.mem);
        }
    }

    /// One round: clock, timers, a burst each way; when nothing moved and `jump`, the
    /// clock jumps to the next deadline. Returns the frames moved.
    fn round(&mut self, jump: bool) -> usize {
        self.now += Duration::from_nanos(ROUND_NS);
        self.timers();
        let moved = self.shuttle();
        if moved == 0 && jump {
            if let Some(t) = next_deadline(&self.a.eng, &self.b.eng) {
                self.now = self.now.max(t);
                self.timers();
            }
        }
        moved
    }

    /// Polls up to a batch of A's completions into `cqes`; a failed one is an error.
    fn poll_a(&mut self) -> Result<usize, BenchError> {
        let got = self
            .a
            .eng
            .rnic_mut()
            .poll_cq(self.a.cq, &mut self.cqes)
            .map_err(|e| err(e, "poll_cq"))?;
        match self.cqes[..got]
            .iter()
            .find(|c| c.status != WcStatus::Success)
        {
            Some(c) => Err(err(c, "WRITE completion")),
            None => Ok(got),
        }
    }

    /// Drains both engines' events: B accepts requests (with its next QP); the rest is
    /// counted. A failure is an error.
    fn events(&mut self, t: &mut Tally, next_b_qp: &mut usize) -> Result<(), BenchError> {
        while let Some(ev) = self.a.eng.poll_event() {
            match ev {
                Event::Established { .. } => t.a_established += 1,
                Event::Disconnected { .. } => t.a_disconnected += 1,
                // The close completes at `Disconnected` (counted there).
                Event::PeerClosed { .. } | Event::Async(_) | Event::CqNotify(_) => {}
                other => return Err(err(other, "A")),
            }
        }
        while let Some(ev) = self.b.eng.poll_event() {
            match ev {
                Event::ConnectRequest { conn, .. } => {
                    let qp = *self
                        .b
                        .qps
                        .get(*next_b_qp)
                        .ok_or_else(|| BenchError("more requests than QPs".into()))?;
                    *next_b_qp += 1;
                    self.b
                        .eng
                        .accept(self.now, conn, qp, AcceptParams::default())
                        .map_err(|e| err(e, "accept"))?;
                }
                Event::Established { .. } => t.b_established += 1,
                Event::Disconnected { .. } => t.b_disconnected += 1,
                Event::PeerClosed { .. } | Event::Async(_) | Event::CqNotify(_) => {}
                other => return Err(err(other, "B")),
            }
        }
        Ok(())
    }
}

/// Responders that have not received their RTR (their first FPDU) yet: not ready.
fn rtrs_missing(s: &Scale) -> usize {
    s.b.qps
        .iter()
        .filter(|&&qp| {
            let conn = s.b.eng.qp_conn(qp).and_then(|id| s.b.eng.conn(id));
            conn.is_none_or(|c| c.mpa.counters().fpdus_rx == 0)
        })
        .count()
}

/// Virtual time an idle link is run for so that delayed ACKs go out and TCP gives back its
/// loss-recovery storage (`buffer_release_ms`, 1 s by default).
const SETTLE_MS: u64 = 3_000;

/// Runs the link, jumping from timer to timer, for [`SETTLE_MS`] of virtual time.
fn settle(s: &mut Scale, t: &mut Tally, next_b_qp: &mut usize) -> Result<(), BenchError> {
    let until = s.now + Duration::from_millis(SETTLE_MS);
    for _ in 0..100_000 {
        if s.now >= until {
            break;
        }
        s.round(true);
        s.events(t, next_b_qp)?;
    }
    Ok(())
}

/// Runs the scale benchmark with `n` QPs on each engine, the sustained phase for
/// `stream_for` of wall time.
pub fn run(n: usize, stream_for: WallDuration) -> Result<ScaleReport, BenchError> {
    if n == 0 || n > 60_000 {
        return Err(BenchError("QP count must be in 1..=60000".into()));
    }
    let rss0 = rss_bytes();
    let a = Side::new(1, n)?;
    let b = Side::new(2, n)?;
    let frame_len = a.eng.config().mtu + ETH_HEADER_LEN;
    let mut s = Scale {
        a,
        b,
        now: Instant::ZERO,
        link: Shuttle::new(frame_len, BURST_FRAMES),
        cqes: vec![
            Cqe {
                wr_id: 0,
                status: WcStatus::Success,
                opcode: WcOpcode::Write,
                byte_len: 0,
                qp: QpId(0),
                invalidated: None,
                solicited: false,
            };
            CQ_POLL_BATCH
        ],
    };
    let mut rep = ScaleReport {
        conns: n,
        slot_bytes: s.a.eng.config().conn_slot_bytes(),
        ..ScaleReport::default()
    };
    s.b.eng.listen(PORT, n).map_err(|e| err(e, "listen"))?;
    let b_ip = s.b.eng.config().ipv4;
    let params = ConnectParams {
        p2p: true,
        ..ConnectParams::default()
    };

    // Set-up: every connect at once, then shuttle until both sides are established and
    // the link is quiet (the RTRs delivered).
    let (wall0, cpu0, virt0) = (WallInstant::now(), cpu_time(), s.now);
    for i in 0..n {
        let qp = s.a.qps[i];
        s.a.eng
            .connect(s.now, qp, b_ip, PORT, params)
            .map_err(|e| err(e, "connect"))?;
    }
    let mut t = Tally::default();
    let mut next_b_qp = 0;
    for _ in 0..(2_000 + 200 * n) {
        let moved = s.round(false);
        s.events(&mut t, &mut next_b_qp)?;
        if moved > 0 {
            continue;
        }
        // The link is quiet: done once both sides are established and every responder
        // has its RTR; otherwise something waits on a timer (a delayed ACK that gives an
        // FPDU ring back to the pool): jump to it.
        if t.a_established == n && t.b_established == n && rtrs_missing(&s) == 0 {
            break;
        }
        s.round(true);
        s.events(&mut t, &mut next_b_qp)?;
    }
    rep.setup_wall = wall0.elapsed();
    rep.setup_cpu = cpu_time().saturating_sub(cpu0);
    rep.setup_virtual_us = s.now.saturating_since(virt0).as_micros();
    if t.a_established != n || t.b_established != n {
        return Err(BenchError(format!(
            "established A {} B {} of {n}",
            t.a_established, t.b_established
        )));
    }
    let missing = rtrs_missing(&s);
    if missing > 0 {
        return Err(BenchError(format!(
            "{missing} responders without their RTR"
        )));
    }

    // Idle established memory: once the last delayed ACKs went out and TCP's release
    // timers ran (virtual time jumps from timer to timer; nothing else is sent).
    settle(&mut s, &mut t, &mut next_b_qp)?;
    let both = (2 * n) as f64;
    rep.engine_bytes_per_conn = (s.a.engine_bytes() + s.b.engine_bytes()) as f64 / both;
    rep.conn_heap_bytes_per_conn =
        (s.a.eng.conns_heap_bytes() + s.b.eng.conns_heap_bytes()) as f64 / both;
    rep.rss_bytes_per_conn = rss_bytes().saturating_sub(rss0) as f64 / both;

    // One WRITE on every QP, each to its own 64 bytes of B's arena.
    {
        let arena = s.a.mem.arena_mut(s.a.region);
        for (i, byte) in arena.iter_mut().enumerate().take(n * WRITE_LEN) {
            *byte = (i / WRITE_LEN) as u8 ^ (i as u8).wrapping_mul(31);
        }
    }
    let wall0 = WallInstant::now();
    for i in 0..n {
        post_write(&mut s, i, WRITE_LEN)?;
    }
    let mut done = 0;
    let mut quiet = 0;
    for _ in 0..(2_000 + 200 * n) {
        let moved = s.round(true);
        s.events(&mut t, &mut next_b_qp)?;
        loop {
            let got = s.poll_a()?;
            done += got;
            if got < s.cqes.len() {
                break;
            }
        }
        quiet = if moved == 0 { quiet + 1 } else { 0 };
        if done == n && quiet >= 2 {
            break;
        }
    }
    rep.write_wall = wall0.elapsed();
    if done != n {
        return Err(BenchError(format!("{done} of {n} WRITEs completed")));
    }
    let src = s.a.mem.arena(s.a.region);
    let dst = s.b.mem.arena(s.b.region);
    if src[..n * WRITE_LEN] != dst[..n * WRITE_LEN] {
        return Err(BenchError("WRITE data differs at B".into()));
    }
    settle(&mut s, &mut t, &mut next_b_qp)?;
    stream(&mut s, &mut t, &mut next_b_qp, stream_for, &mut rep)?;
    settle(&mut s, &mut t, &mut next_b_qp)?;
    rep.conn_heap_bytes_after_write =
        (s.a.eng.conns_heap_bytes() + s.b.eng.conns_heap_bytes()) as f64 / both;
    let (pa, pb) = (s.a.eng.mpa_pool().counters(), s.b.eng.mpa_pool().counters());
    rep.pool_rings_allocated = (pa.rings_allocated + pb.rings_allocated) as usize;
    rep.pool_ring_waits = pa.ring_waits + pb.ring_waits;

    // Disconnect everything; then run the clock past TIME_WAIT.
    let wall0 = WallInstant::now();
    for i in 0..n {
        let qp = s.a.qps[i];
        s.a.eng
            .disconnect(s.now, qp)
            .map_err(|e| err(e, "disconnect"))?;
    }
    for _ in 0..(2_000 + 200 * n) {
        s.round(true);
        s.events(&mut t, &mut next_b_qp)?;
        if t.a_disconnected == n && t.b_disconnected == n {
            break;
        }
    }
    rep.disconnect_wall = wall0.elapsed();
    if t.a_disconnected != n || t.b_disconnected != n {
        return Err(BenchError(format!(
            "disconnected A {} B {} of {n}",
            t.a_disconnected, t.b_disconnected
        )));
    }
    for _ in 0..10_000 {
        if s.a.eng.conn_count() + s.b.eng.conn_count() == 0 {
            break;
        }
        s.round(true);
        s.events(&mut t, &mut next_b_qp)?;
    }
    rep.conns_left = s.a.eng.conn_count() + s.b.eng.conn_count();
    rep.conn_heap_bytes_after_close = s.a.eng.conns_heap_bytes() + s.b.eng.conns_heap_bytes();
    rep.rss_bytes_per_conn_after_close = rss_bytes().saturating_sub(rss0) as f64 / both;
    Ok(rep)
}

/// One signaled WRITE of `len` bytes on A's QP number `i`, from and to the QP's own
/// `len` bytes of each arena (offset `i * len`).
fn post_write(s: &mut Scale, i: usize, len: usize) -> Result<(), BenchError> {
    let off = (i * len) as u64;
    let wr = SendWr {
        wr_id: i as u64,
        op: SendOp::Write {
            remote_to: off,
            rkey: s.b.mr,
        },
        sgl: SgList::single(Sge {
            addr: off,
            length: len as u32,
            lkey: s.a.mr,
        }),
        flags: SendFlags::SIGNALED,
    };
    s.a.eng
        .post_send(s.a.qps[i], &wr)
        .map_err(|e| err(e, "post_send"))
}

/// The sustained phase: every QP keeps `STREAM_DEPTH` WRITEs in flight for `wall` (each
/// completion reposts on its QP), then the rest drains; B's memory is compared with A's.
fn stream(
    s: &mut Scale,
    t: &mut Tally,
    next_b_qp: &mut usize,
    wall: WallDuration,
    rep: &mut ScaleReport,
) -> Result<(), BenchError> {
    let n = s.a.qps.len();
    {
        let arena = s.a.mem.arena_mut(s.a.region);
        for (i, byte) in arena.iter_mut().enumerate() {
            *byte = (i / STREAM_LEN) as u8 ^ (i as u8).wrapping_mul(13) ^ 0x5a;
        }
    }
    let mut per_qp = vec![0u64; n];
    let mut in_flight = 0usize;
    for _ in 0..STREAM_DEPTH {
        for i in 0..n {
            post_write(s, i, STREAM_LEN)?;
            in_flight += 1;
        }
    }
    let start = WallInstant::now();
    let mut timed_bytes = 0u64;
    let mut timing = true;
    // Bounded: the timed part ends by the clock; the drain by completions or this count.
    for _ in 0..(10_000_000 + 200 * n) {
        if timing && start.elapsed() >= wall {
            timing = false;
            rep.stream_wall = start.elapsed();
            rep.stream_bytes = timed_bytes;
        }
        if !timing && in_flight == 0 {
            break;
        }
        s.round(true);
        s.events(t, next_b_qp)?;
        loop {
            let got = s.poll_a()?;
            for k in 0..got {
                let i = s.cqes[k].wr_id as usize;
                per_qp[i] += 1;
                in_flight -= 1;
                if timing {
                    timed_bytes += STREAM_LEN as u64;
                    post_write(s, i, STREAM_LEN)?;
                    in_flight += 1;
                }
            }
            if got < s.cqes.len() {
                break;
            }
        }
    }
    if timing || in_flight != 0 {
        return Err(BenchError(format!(
            "stream: {in_flight} WRITEs still in flight at the end"
        )));
    }
    rep.stream_min_max_per_qp = (
        per_qp.iter().copied().min().unwrap_or(0),
        per_qp.iter().copied().max().unwrap_or(0),
    );
    let src = s.a.mem.arena(s.a.region);
    let dst = s.b.mem.arena(s.b.region);
    if src[..n * STREAM_LEN] != dst[..n * STREAM_LEN] {
        return Err(BenchError("stream: WRITE data differs at B".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_hundred_qps_connect_write_and_close_with_idle_connections_holding_no_heap() {
        let r = run(200, WallDuration::from_millis(200)).unwrap();
        assert_eq!(r.conns, 200);
        assert_eq!(r.conn_heap_bytes_per_conn, 0.0, "{r:?}");
        assert_eq!(r.conn_heap_bytes_after_write, 0.0, "{r:?}");
        assert_eq!(r.conns_left, 0, "{r:?}");
        assert_eq!(r.conn_heap_bytes_after_close, 0);
        assert!(r.slot_bytes < 2_500, "{r:?}");
        assert!(r.setup_rate() > 0.0);
        assert_eq!(r.lines().len(), 5);
        // Every QP moved data in the sustained phase (no QP starved), all verified.
        assert!(r.stream_bytes > 0, "{r:?}");
        assert!(r.stream_min_max_per_qp.0 >= 1, "{r:?}");
    }

    #[test]
    fn bad_counts_are_errors() {
        assert!(run(0, WallDuration::ZERO).is_err());
        assert!(run(1_000_000, WallDuration::ZERO).is_err());
    }
}
