//! `iwarp-stag-guess [GUESSES] [--seed S] [--parallel K]`: a peer that guesses engine B's
//! STags (issue 15 item 3), on the in-process engine pair (`iwarp_benches::pair`).
//!
//! Each guess is one RDMA WRITE of 64 bytes (or, every other guess, a READ) from A with a
//! guessed STag and tagged offset, on a connection of its own: the first invalid STag
//! ends a connection (RFC 5040 / verbs: B answers with a Terminate and its QP leaves RTS),
//! so a connection is what one guess costs an attacker. Half the guesses draw the whole
//! 32-bit STag at random; half know the index of B's MR and guess only its 8-bit key (an
//! attacker who saw an earlier STag of B). The guesses go in batches of K connections at
//! once (`--parallel`, default 64: an attacker opens many), each batch on fresh
//! connections. Checked for every batch: B's memory holds exactly what the hits wrote
//! (each hit WRITE its own pattern, nothing anywhere else), no invalid READ brought
//! anything back, every invalid guess completed in error at A and drew one Terminate
//! from B. Prints the counts, the guesses per second and the guesses a key-only attacker
//! needs on average (the key space, 256).
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant as WallClock;

use iwarp_benches::pair::{Pair, PairConfig};
use iwarp_benches::BenchError;
use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_types::{Cqe, QpId, SendFlags, SendOp, SendWr, SgList, Sge, Stag, WcOpcode, WcStatus};
use rand::{Rng, SeedableRng};

const LEN: u32 = 64;
/// B's arena: small, so that checking it after each batch costs little.
const ARENA: usize = 4096;
/// Most connections per batch (each slot's pattern is its index + 1, one byte).
const PARALLEL_MAX: usize = 255;
/// The guessers' listening port on B (the pair's own port has a backlog of 1).
const GUESS_PORT: u16 = 4792;
/// Shuttle rounds a batch may take before it counts as stuck.
const ROUNDS_MAX: usize = 1_000_000;

#[derive(Default, Debug)]
struct Tally {
    guesses: u64,
    random: u64,
    key_only: u64,
    hits: u64,
    terminates: u64,
    failed_at_a: u64,
    placed_by_invalid: u64,
    read_by_invalid: u64,
}

/// One guess of a batch.
#[derive(Clone, Copy, Debug)]
struct Guess {
    stag: Stag,
    hit: bool,
    read: bool,
    to: u64,
}

/// The QPs of the batch: A's, in slot order, and B's (matched by the connections).
struct Qps {
    a: Vec<QpId>,
    b: Vec<QpId>,
}

fn fail(what: &str, e: impl std::fmt::Debug) -> BenchError {
    BenchError(format!("{what}: {e:?}"))
}

/// Aborts the QPs' connections (if still up), destroys the QPs, creates `k` fresh ones on
/// each side and connects them: A connects each, B accepts each request with one of its
/// fresh QPs.
fn reconnect(p: &mut Pair, qps: &mut Qps, k: usize) -> Result<(), BenchError> {
    let now = p.now;
    for &q in &qps.a {
        if p.a.eng.qp_conn(q).is_some() {
            let _ = p.a.eng.abort(now, q);
        }
    }
    for &q in &qps.b {
        if p.b.eng.qp_conn(q).is_some() {
            let _ = p.b.eng.abort(now, q);
        }
    }
    for _ in 0..ROUNDS_MAX {
        p.round();
        while p.a.eng.poll_event().is_some() {}
        while p.b.eng.poll_event().is_some() {}
        // Detached, and their TCP connections gone too (TIME_WAIT passes while the
        // link is idle: the shuttle's clock jumps to the next deadline); the pair's own
        // connection stays.
        let a_gone = qps.a.iter().all(|&q| p.a.eng.qp_conn(q).is_none());
        let b_gone = qps.b.iter().all(|&q| p.b.eng.qp_conn(q).is_none());
        if a_gone && b_gone && p.a.eng.conn_count() == 1 && p.b.eng.conn_count() == 1 {
            break;
        }
    }
    let attr_a =
        p.a.eng
            .rnic()
            .query_qp(p.a.qp)
            .map_err(|e| fail("query_qp", e))?
            .attr;
    let attr_b =
        p.b.eng
            .rnic()
            .query_qp(p.b.qp)
            .map_err(|e| fail("query_qp", e))?
            .attr;
    for q in qps.a.drain(..) {
        p.a.eng
            .rnic_mut()
            .destroy_qp(q)
            .map_err(|e| fail("destroy_qp A", e))?;
    }
    for q in qps.b.drain(..) {
        p.b.eng
            .rnic_mut()
            .destroy_qp(q)
            .map_err(|e| fail("destroy_qp B", e))?;
    }
    let mut fresh_b = Vec::with_capacity(k);
    for _ in 0..k {
        qps.a.push(
            p.a.eng
                .rnic_mut()
                .create_qp(&attr_a)
                .map_err(|e| fail("create_qp A", e))?
                .0,
        );
        fresh_b.push(
            p.b.eng
                .rnic_mut()
                .create_qp(&attr_b)
                .map_err(|e| fail("create_qp B", e))?
                .0,
        );
    }
    let b_ip = p.b.eng.config().ipv4;
    for &q in &qps.a {
        p.a.eng
            .connect(p.now, q, b_ip, GUESS_PORT, ConnectParams::default())
            .map_err(|e| fail("connect", e))?;
    }
    let (mut a_up, mut b_up) = (0usize, 0usize);
    for _ in 0..ROUNDS_MAX {
        p.round();
        while let Some(ev) = p.a.eng.poll_event() {
            a_up += usize::from(matches!(ev, Event::Established { .. }));
        }
        while let Some(ev) = p.b.eng.poll_event() {
            match ev {
                Event::ConnectRequest { conn, .. } => {
                    let q = fresh_b
                        .pop()
                        .ok_or_else(|| BenchError("more requests than QPs".into()))?;
                    p.b.eng
                        .accept(p.now, conn, q, AcceptParams::default())
                        .map_err(|e| fail("accept", e))?;
                    qps.b.push(q);
                }
                Event::Established { .. } => b_up += 1,
                _ => {}
            }
        }
        if a_up == k && b_up == k {
            return Ok(());
        }
    }
    Err(BenchError(format!(
        "reconnect: {a_up} / {b_up} of {k} established"
    )))
}

/// Draws slot `s`'s guess.
fn draw(rng: &mut rand::rngs::SmallRng, live: Stag, t: &mut Tally) -> Guess {
    let stag = if rng.gen::<bool>() {
        t.key_only += 1;
        Stag((live.0 & !0xff) | u32::from(rng.gen::<u8>()))
    } else {
        t.random += 1;
        Stag(rng.gen())
    };
    Guess {
        stag,
        hit: stag == live,
        read: rng.gen::<bool>(),
        to: rng.gen_range(0..(ARENA as u64 - u64::from(LEN))),
    }
}

/// One batch: a guess on each of the `qps.a` connections, all posted at once, then
/// checked.
fn batch(
    p: &mut Pair,
    qps: &Qps,
    rng: &mut rand::rngs::SmallRng,
    t: &mut Tally,
) -> Result<(), BenchError> {
    let k = qps.a.len();
    p.b.mem.arena_mut(p.b.region).fill(0);
    let live = p.b.mr;
    let terms_before = p.b.eng.counters().terminates_sent;
    let guesses: Vec<Guess> = (0..k).map(|_| draw(rng, live, t)).collect();
    // A's arena: slot s's source (its pattern) at s * 128, its READ sink (zero) after it.
    {
        let a = p.a.mem.arena_mut(p.a.region);
        for s in 0..k {
            let at = s * 2 * LEN as usize;
            a[at..at + LEN as usize].fill(s as u8 + 1);
            a[at + LEN as usize..at + 2 * LEN as usize].fill(0);
        }
    }
    for (s, (g, &qa)) in guesses.iter().zip(&qps.a).enumerate() {
        let at = (s * 2 * LEN as usize) as u64;
        let op = if g.read {
            SendOp::Read {
                remote_to: g.to,
                rkey: g.stag,
                invalidate_local: false,
            }
        } else {
            SendOp::Write {
                remote_to: g.to,
                rkey: g.stag,
            }
        };
        let sge = Sge {
            addr: if g.read { at + u64::from(LEN) } else { at },
            length: LEN,
            lkey: p.a.mr,
        };
        p.a.eng
            .rnic_mut()
            .post_send(
                qa,
                &SendWr {
                    wr_id: s as u64,
                    op,
                    sgl: SgList::single(sge),
                    flags: SendFlags::SIGNALED,
                },
            )
            .map_err(|e| fail("post_send", e))?;
        p.a.eng.qp_doorbell(qa);
    }
    let mut status: Vec<Option<WcStatus>> = vec![None; k];
    let mut done = 0;
    let mut out = [Cqe {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Write,
        byte_len: 0,
        qp: QpId(0),
        invalidated: None,
        solicited: false,
    }; 64];
    for _ in 0..ROUNDS_MAX {
        p.round();
        let cq = p.a.cq;
        let n =
            p.a.eng
                .rnic_mut()
                .poll_cq(cq, &mut out)
                .map_err(|e| fail("poll_cq", e))?;
        for c in &out[..n] {
            if let Some(slot) = status.get_mut(c.wr_id as usize) {
                if slot.is_none() {
                    *slot = Some(c.status);
                    done += 1;
                }
            }
        }
        if done == k {
            break;
        }
    }
    if done < k {
        return Err(BenchError(format!("{done} of {k} guesses completed")));
    }
    t.guesses += k as u64;
    let mut invalid = 0u64;
    for (g, st) in guesses.iter().zip(&status) {
        if g.hit {
            t.hits += 1;
            continue;
        }
        invalid += 1;
        if *st != Some(WcStatus::Success) {
            t.failed_at_a += 1;
        }
    }
    // Every invalid guess drew a Terminate (the counter moves once per connection).
    let terms = p.b.eng.counters().terminates_sent - terms_before;
    t.terminates += terms.min(invalid);
    // B's memory: each byte is zero, or, inside the window of a hit WRITE, that slot's
    // pattern (two hits may overlap: either pattern).
    let b = p.b.mem.arena(p.b.region);
    let hit_writes: Vec<(u8, &Guess)> = guesses
        .iter()
        .enumerate()
        .filter(|(_, g)| g.hit && !g.read)
        .map(|(s, g)| (s as u8 + 1, g))
        .collect();
    let mut wrong = false;
    for (i, &byte) in b.iter().enumerate() {
        let i = i as u64;
        let mut covered = false;
        let mut allowed = false;
        for &(pattern, g) in &hit_writes {
            if (g.to..g.to + u64::from(LEN)).contains(&i) {
                covered = true;
                allowed |= byte == pattern;
            }
        }
        if (covered && !allowed) || (!covered && byte != 0) {
            wrong = true;
            break;
        }
    }
    t.placed_by_invalid += u64::from(wrong);
    // A's READ sinks: zero unless the guess hit.
    let a = p.a.mem.arena(p.a.region);
    for (s, g) in guesses.iter().enumerate() {
        let at = s * 2 * LEN as usize + LEN as usize;
        if g.read && !g.hit && a[at..at + LEN as usize].iter().any(|&x| x != 0) {
            t.read_by_invalid += 1;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut n: u64 = 100_000;
    let mut seed: u64 = 1;
    let mut k: usize = 64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let ok = match a.as_str() {
            "--seed" => args.next().and_then(|v| v.parse().ok()).map(|v| seed = v),
            "--parallel" => args
                .next()
                .and_then(|v| v.parse().ok())
                .filter(|v| (1..=PARALLEL_MAX).contains(v))
                .map(|v| k = v),
            v => v.parse().ok().map(|v| n = v),
        };
        if ok.is_none() {
            eprintln!("usage: iwarp-stag-guess [GUESSES] [--seed S] [--parallel 1..=255]");
            return ExitCode::from(2);
        }
    }
    match run(n, seed, k) {
        Ok(ok) if ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("stag-guess: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(n: u64, seed: u64, k: usize) -> Result<bool, BenchError> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut t = Tally::default();
    let cfg = PairConfig {
        arena_bytes: ARENA.max(k * 2 * LEN as usize),
        cq_depth: 1024.max(2 * k as u32),
        max_conns: 2 * k + 2,
        ..PairConfig::default()
    };
    let mut p = Pair::connected(cfg)?;
    p.b.eng
        .listen(GUESS_PORT, k)
        .map_err(|e| fail("listen", e))?;
    let mut qps = Qps {
        a: Vec::new(),
        b: Vec::new(),
    };
    let start = WallClock::now();
    let mut last_report = start;
    while t.guesses < n {
        let this = k.min((n - t.guesses) as usize);
        reconnect(&mut p, &mut qps, this)?;
        batch(&mut p, &qps, &mut rng, &mut t)?;
        if last_report.elapsed().as_secs() >= 60 {
            last_report = WallClock::now();
            eprintln!(
                "stag-guess: {} guesses, {:.0}/s, {} hits, {} placed, {} read",
                t.guesses,
                t.guesses as f64 / start.elapsed().as_secs_f64(),
                t.hits,
                t.placed_by_invalid,
                t.read_by_invalid
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let invalid = t.guesses - t.hits;
    println!(
        "stag-guess: {} guesses ({} random 32-bit, {} key-only) in {:.1} s, {} connections at once: {:.0} guesses/s (a connection each)",
        t.guesses,
        t.random,
        t.key_only,
        secs,
        k,
        t.guesses as f64 / secs
    );
    println!(
        "stag-guess: {} hit B's live STag (key-only guesses find it 1 time in 256 on average); of the {} invalid: {} answered with a Terminate, {} failed at A, {} batches placed bytes outside the hits' windows, {} invalid READs read bytes",
        t.hits, invalid, t.terminates, t.failed_at_a, t.placed_by_invalid, t.read_by_invalid
    );
    let ok = t.placed_by_invalid == 0
        && t.read_by_invalid == 0
        && t.terminates == invalid
        && t.failed_at_a == invalid;
    println!("stag-guess: {}", if ok { "ok" } else { "FAILED" });
    Ok(ok)
}
