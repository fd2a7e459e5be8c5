//! `iwarp-stag-guess [GUESSES] [--seed S]`: a peer that guesses engine B's STags
//! (issue 15 item 3), on the in-process engine pair (`iwarp_benches::pair`).
//!
//! Each guess is one RDMA WRITE of 64 bytes (or, every other guess, a READ) from A with a
//! guessed STag and tagged offset, on a connection of its own: the first invalid STag
//! ends a connection (RFC 5040 / verbs: B answers with a Terminate and its QP leaves RTS),
//! so a connection is what one guess costs an attacker. Half the guesses draw the whole
//! 32-bit STag at random; half know the index of B's MR and guess only its 8-bit key (an
//! attacker who saw an earlier STag of B). Checked for every guess: a guess that is not
//! B's live STag places nothing in B's memory, reads nothing from it, gets a Terminate
//! from B and completes in error at A. Prints the counts, the guesses per second and the
//! guesses a key-only attacker needs on average (the key space, 256).
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant as WallClock;

use iwarp_benches::pair::{Pair, PairConfig};
use iwarp_benches::BenchError;
use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_types::{Cqe, QpId, SendFlags, SendOp, SendWr, SgList, Sge, Stag, WcOpcode, WcStatus};
use rand::{Rng, SeedableRng};

const LEN: u32 = 64;
/// B's arena: small, so that checking it after each guess costs little.
const ARENA: usize = 4096;

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

/// New QPs on both engines (the old ones, in Error or closing after the guess, reset and
/// destroyed) and a new connection between them: B keeps listening, A connects.
fn reconnect(p: &mut Pair) -> Result<(), BenchError> {
    let now = p.now;
    let (old_a, old_b) = (p.a.qp, p.b.qp);
    for (node, old) in [(&mut p.a, old_a), (&mut p.b, old_b)] {
        if node.eng.qp_conn(old).is_some() {
            let _ = node.eng.abort(now, old);
        }
    }
    // The aborted connections leave; then the old QPs go and new ones take their place.
    for _ in 0..1_000 {
        p.round();
        if p.a.eng.qp_conn(old_a).is_none() && p.b.eng.qp_conn(old_b).is_none() {
            break;
        }
    }
    for (node, old) in [(&mut p.a, old_a), (&mut p.b, old_b)] {
        let attr = node
            .eng
            .rnic()
            .query_qp(old)
            .map_err(|e| BenchError(format!("query_qp: {e:?}")))?
            .attr;
        node.eng
            .rnic_mut()
            .destroy_qp(old)
            .map_err(|e| BenchError(format!("destroy_qp: {e:?}")))?;
        node.qp = node
            .eng
            .rnic_mut()
            .create_qp(&attr)
            .map_err(|e| BenchError(format!("create_qp: {e:?}")))?
            .0;
    }
    let b_ip = p.b.eng.config().ipv4;
    let qa = p.a.qp;
    p.a.eng
        .connect(
            p.now,
            qa,
            b_ip,
            iwarp_benches::pair::PORT,
            ConnectParams::default(),
        )
        .map_err(|e| BenchError(format!("connect: {e:?}")))?;
    let (mut a_up, mut b_up) = (false, false);
    for _ in 0..100_000 {
        p.round();
        while let Some(ev) = p.a.eng.poll_event() {
            a_up |= matches!(ev, Event::Established { qp, .. } if qp == qa);
        }
        while let Some(ev) = p.b.eng.poll_event() {
            match ev {
                Event::ConnectRequest { conn, .. } => {
                    let qb = p.b.qp;
                    p.b.eng
                        .accept(p.now, conn, qb, AcceptParams::default())
                        .map_err(|e| BenchError(format!("accept: {e:?}")))?;
                }
                Event::Established { qp, .. } if qp == p.b.qp => b_up = true,
                _ => {}
            }
        }
        if a_up && b_up {
            return Ok(());
        }
    }
    Err(BenchError("reconnect: not established".into()))
}

fn one(p: &mut Pair, rng: &mut rand::rngs::SmallRng, t: &mut Tally) -> Result<(), BenchError> {
    if t.guesses > 0 {
        reconnect(p)?;
    }
    p.b.mem.arena_mut(p.b.region).fill(0);
    let live = p.b.mr;
    let terms_before = p.b.eng.counters().terminates_sent;
    let key_only = rng.gen::<bool>();
    let guess = if key_only {
        t.key_only += 1;
        Stag((live.0 & !0xff) | u32::from(rng.gen::<u8>()))
    } else {
        t.random += 1;
        Stag(rng.gen())
    };
    let hit = guess == live;
    t.hits += u64::from(hit);
    let read = rng.gen::<bool>();
    // A's source bytes are not zero; B's arena starts zeroed; a READ's sink at A is zeroed.
    p.a.mem.arena_mut(p.a.region)[..LEN as usize].fill(0xa5);
    p.a.mem.arena_mut(p.a.region)[1024..1024 + LEN as usize].fill(0);
    let to = rng.gen_range(0..(ARENA as u64 - u64::from(LEN)));
    let op = if read {
        SendOp::Read {
            remote_to: to,
            rkey: guess,
            invalidate_local: false,
        }
    } else {
        SendOp::Write {
            remote_to: to,
            rkey: guess,
        }
    };
    let sge = Sge {
        addr: if read { 1024 } else { 0 },
        length: LEN,
        lkey: p.a.mr,
    };
    let qa = p.a.qp;
    p.a.eng
        .rnic_mut()
        .post_send(
            qa,
            &SendWr {
                wr_id: 1,
                op,
                sgl: SgList::single(sge),
                flags: SendFlags::SIGNALED,
            },
        )
        .map_err(|e| BenchError(format!("post_send: {e:?}")))?;
    p.a.eng.qp_doorbell(qa);
    let mut cqe: Option<Cqe> = None;
    let mut out = [Cqe {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Write,
        byte_len: 0,
        qp: QpId(0),
        invalidated: None,
        solicited: false,
    }; 4];
    for _ in 0..100_000 {
        p.round();
        let cq = p.a.cq;
        let n =
            p.a.eng
                .rnic_mut()
                .poll_cq(cq, &mut out)
                .map_err(|e| BenchError(format!("poll_cq: {e:?}")))?;
        if n > 0 {
            cqe = Some(out[0]);
            break;
        }
    }
    let cqe = cqe.ok_or_else(|| BenchError("no completion".into()))?;
    t.guesses += 1;
    if hit {
        return Ok(());
    }
    if cqe.status != WcStatus::Success {
        t.failed_at_a += 1;
    }
    t.terminates += u64::from(p.b.eng.counters().terminates_sent > terms_before);
    if p.b.mem.arena(p.b.region).iter().any(|&b| b != 0) {
        t.placed_by_invalid += 1;
    }
    if read
        && p.a.mem.arena(p.a.region)[1024..1024 + LEN as usize]
            .iter()
            .any(|&b| b != 0)
    {
        t.read_by_invalid += 1;
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut n: u64 = 100_000;
    let mut seed: u64 = 1;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let ok = match a.as_str() {
            "--seed" => args.next().and_then(|v| v.parse().ok()).map(|v| seed = v),
            v => v.parse().ok().map(|v| n = v),
        };
        if ok.is_none() {
            eprintln!("usage: iwarp-stag-guess [GUESSES] [--seed S]");
            return ExitCode::from(2);
        }
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut t = Tally::default();
    let cfg = PairConfig {
        arena_bytes: ARENA,
        ..PairConfig::default()
    };
    let mut p = match Pair::connected(cfg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("stag-guess: {e}");
            return ExitCode::FAILURE;
        }
    };
    let start = WallClock::now();
    for _ in 0..n {
        if let Err(e) = one(&mut p, &mut rng, &mut t) {
            eprintln!("stag-guess: {e}");
            return ExitCode::FAILURE;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let invalid = t.guesses - t.hits;
    println!(
        "stag-guess: {} guesses ({} random 32-bit, {} key-only) in {:.1} s: {:.0} guesses/s (a connection each)",
        t.guesses,
        t.random,
        t.key_only,
        secs,
        t.guesses as f64 / secs
    );
    println!(
        "stag-guess: {} hit B's live STag (key-only guesses find it 1 time in 256 on average); of the {} invalid: {} answered with a Terminate, {} failed at A, {} placed bytes, {} read bytes",
        t.hits, invalid, t.terminates, t.failed_at_a, t.placed_by_invalid, t.read_by_invalid
    );
    let ok = t.placed_by_invalid == 0
        && t.read_by_invalid == 0
        && t.terminates == invalid
        && t.failed_at_a == invalid;
    println!("stag-guess: {}", if ok { "ok" } else { "FAILED" });
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
