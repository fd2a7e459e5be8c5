//! The measuring end: latency ping-pongs and round trips, bandwidth with `depth` WRs in
//! flight per QP. `idle` runs whenever a loop waits (loopback: the server's step).

use std::time::{Duration, Instant};

use iwarp_verbs::{Arena, Cqe, RecvWr, SendFlags, SendOp, SendWr, SgList, Stag, WcOpcode};

use crate::args::Test;
use crate::progress::Progress;
use crate::responder::{blank_cqe, check, credit_batch, peek, POLL_BATCH};
use crate::setup::Endpoint;
use crate::stats::{Bandwidth, Samples};
use crate::PerfError;

/// Most latency samples kept per size with -D (the run ends early when full).
pub const MAX_SAMPLES: usize = 1 << 22;
/// A wait longer than this is a failure (a lost message, a dead peer).
const STALL: Duration = Duration::from_secs(10);

/// How long a size runs.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// This many measured iterations.
    Iters(u64),
    /// This long.
    Time(Duration),
}

fn op_wr(
    test: Test,
    ep: &Endpoint,
    size: u32,
    wr_id: u64,
    signaled: bool,
) -> Result<SendWr, PerfError> {
    let op = match test {
        Test::WriteBw | Test::WriteLat => SendOp::Write {
            remote_to: ep.remote.buf_addr,
            rkey: Stag(ep.remote.rkey),
        },
        Test::ReadBw | Test::ReadLat => SendOp::Read {
            remote_to: ep.remote.buf_addr,
            rkey: Stag(ep.remote.rkey),
            invalidate_local: false,
        },
        Test::SendBw | Test::SendLat => SendOp::Send,
    };
    Ok(SendWr {
        wr_id,
        op,
        sgl: SgList::single(ep.mr.sge(0, size).map_err(|e| PerfError::verbs("sge", e))?),
        flags: if signaled {
            SendFlags::SIGNALED
        } else {
            SendFlags::NONE
        },
    })
}

fn repost_recv(ep: &mut Endpoint, wr_id: u64) -> Result<(), PerfError> {
    let full = ep
        .mr
        .sge(0, ep.mr.len().min(u32::MAX as u64) as u32)
        .map_err(|e| PerfError::verbs("sge", e))?;
    ep.qp
        .post_recv(&RecvWr {
            wr_id,
            sgl: SgList::single(full),
        })
        .map_err(|e| PerfError::verbs("post_recv", e))
}

/// One latency measurement of `size` bytes on `ep` (`warmup` unmeasured iterations, then
/// `length`): round trip samples in `samples`.
#[allow(clippy::too_many_arguments)] // the measuring loop's inputs, each used in it
pub fn latency(
    test: Test,
    ep: &mut Endpoint,
    arena: &mut Arena,
    size: u32,
    (warmup, length): (u64, Length),
    samples: &mut Samples,
    progress: &mut Progress,
    idle: &mut dyn FnMut() -> Result<(), PerfError>,
) -> Result<u64, PerfError> {
    let mut wc: [Cqe; POLL_BATCH] = [blank_cqe(); POLL_BATCH];
    let last = ep.off + size as usize - 1;
    let start = Instant::now();
    let mut i: u64 = 0;
    loop {
        let measured = i.saturating_sub(warmup);
        if i == warmup {
            progress.start(0);
        } else if i > warmup && progress.due() {
            progress.tick(measured, Some(samples.as_slice()));
        }
        match length {
            Length::Iters(n) if measured >= n => break,
            Length::Time(d) if i >= warmup && start.elapsed() >= d => break,
            _ => {}
        }
        if i >= warmup && samples.is_full() {
            break;
        }
        let v = (i % 255 + 1) as u8;
        if test == Test::WriteLat {
            arena.as_mut_slice()[last] = v;
        }
        let t0 = Instant::now();
        ep.qp
            .post_send(&op_wr(test, ep, size, i, true)?)
            .map_err(|e| PerfError::verbs("post_send", e))?;
        // Wait for the answer: our buffer's last byte (write_lat), the echo (send_lat),
        // the READ's completion (read_lat).
        let mut done = false;
        while !done {
            if test == Test::WriteLat && peek(arena, last) == v {
                done = true;
            }
            let n = ep
                .cq
                .poll(&mut wc)
                .map_err(|e| PerfError::verbs("poll_cq", e))?;
            for c in &wc[..n] {
                check(c, test.name())?;
                match (test, c.opcode) {
                    (Test::SendLat, WcOpcode::Recv) => {
                        repost_recv(ep, c.wr_id)?;
                        done = true;
                    }
                    (Test::ReadLat, WcOpcode::Read) => done = true,
                    _ => {}
                }
            }
            if !done {
                if t0.elapsed() > STALL {
                    return Err(PerfError::Run(format!(
                        "{}: no answer to message {i} in {STALL:?}",
                        test.name()
                    )));
                }
                idle()?;
            }
        }
        let ns = t0.elapsed().as_nanos() as u64;
        if i >= warmup {
            samples.record(ns);
        }
        i += 1;
    }
    progress.finish(i.saturating_sub(warmup), Some(samples.as_slice()));
    // Drain the last send completions (write_lat: the answer can beat our completion).
    Ok(i.saturating_sub(warmup))
}

/// Per-QP progress of a bandwidth run.
#[derive(Clone, Copy, Debug, Default)]
struct Flow {
    posted: u64,
    completed: u64,
    target: u64,
    credits: u64,
}

/// One bandwidth measurement of `size` bytes over `eps`, `depth` WRs in flight per QP,
/// a completion requested every `signal_every` WRs.
pub fn bandwidth(
    test: Test,
    eps: &mut [Endpoint],
    size: u32,
    depth: u32,
    length: Length,
    progress: &mut Progress,
    idle: &mut dyn FnMut() -> Result<(), PerfError>,
) -> Result<Bandwidth, PerfError> {
    let mut wc: [Cqe; POLL_BATCH] = [blank_cqe(); POLL_BATCH];
    let sig = u64::from((depth / 4).clamp(1, 64));
    let mut flows: Vec<Flow> = eps
        .iter()
        .map(|e| Flow {
            target: match length {
                Length::Iters(n) => n,
                Length::Time(_) => u64::MAX,
            },
            credits: if test == Test::SendBw {
                u64::from(e.remote.credits)
            } else {
                u64::MAX
            },
            ..Flow::default()
        })
        .collect();
    let batch = eps
        .first()
        .map_or(1, |e| u64::from(credit_batch(e.remote.credits)));
    let start = Instant::now();
    let mut last_progress = start;
    let mut end = start;
    progress.start(0);
    loop {
        if progress.due() {
            progress.tick(flows.iter().map(|f| f.completed).sum(), None);
        }
        if let Length::Time(d) = length {
            if flows[0].target == u64::MAX && start.elapsed() >= d {
                for f in flows.iter_mut() {
                    f.target = f.posted.div_ceil(sig) * sig;
                }
            }
        }
        let mut all_done = true;
        for (ep, f) in eps.iter_mut().zip(flows.iter_mut()) {
            while f.posted < f.target && f.posted - f.completed < u64::from(depth) && f.credits > 0
            {
                let signaled = (f.posted + 1) % sig == 0 || f.posted + 1 == f.target;
                match ep.qp.post_send(&op_wr(test, ep, size, f.posted, signaled)?) {
                    Ok(()) => {}
                    Err(iwarp_verbs::Error::QueueFull) => break,
                    Err(e) => return Err(PerfError::verbs("post_send", e)),
                }
                f.posted += 1;
                if test == Test::SendBw {
                    f.credits -= 1;
                }
            }
            let n = ep
                .cq
                .poll(&mut wc)
                .map_err(|e| PerfError::verbs("poll_cq", e))?;
            for c in &wc[..n] {
                check(c, test.name())?;
                if c.opcode == WcOpcode::Recv {
                    f.credits += batch;
                    repost_recv(ep, c.wr_id)?;
                } else {
                    f.completed = f.completed.max(c.wr_id + 1);
                    last_progress = Instant::now();
                    end = last_progress;
                }
            }
            all_done &= f.completed >= f.target;
        }
        if all_done {
            break;
        }
        if last_progress.elapsed() > STALL {
            return Err(PerfError::Run(format!(
                "{}: no completion in {STALL:?}",
                test.name()
            )));
        }
        idle()?;
    }
    let messages: u64 = flows.iter().map(|f| f.completed).sum();
    progress.finish(messages, None);
    Ok(Bandwidth {
        messages,
        bytes: messages * u64::from(size),
        elapsed_s: (end - start).as_secs_f64(),
    })
}
