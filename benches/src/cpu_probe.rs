//! What crossing between two CPUs costs, two ways:
//!
//! - [`cross_cpu_round_trip_ns`]: the round trip of one cache line: one thread pinned on
//!   each CPU writes a counter the other waits for; the time per exchange is what moving a
//!   line there and back costs;
//! - [`cross_cpu_ring_gbps`]: frames copied through a ring of buffers from one CPU to the
//!   other, as memif does (a producer copies each frame into a free ring buffer, the
//!   consumer copies it out and frees the buffer; DPDK's memif defaults: 1,024 buffers of
//!   10 KiB, jumbo frames), in Gbit/s of frames.
//!
//! Two daemons joined by memif pay both on every frame (a ring slot handed over, every
//! byte copied in on one CPU and out on the other), so their throughput follows them; a
//! benchmark records them beside its figures.
//!
//! Why it matters here: the CPUs of a virtual machine are threads of the host, and the
//! host may move them between its core complexes while a benchmark runs. On the 2-CPU
//! AMD EPYC VM of docs/BENCHMARKS.md the round trip flips between about 55 ns (both CPUs
//! on one complex, sharing its L3) and about 350 ns (on two), for seconds at a time, and
//! the ring's throughput with it (about 200 Gbit/s against about 40), without iwarpd
//! anywhere; the two-daemon memif figures flip the same way.
//!
//! Plain `std` threads, atomics and `crossbeam-queue`; the threads are pinned with
//! rustix's `sched_setaffinity` (already workspace dependencies). Every wait is bounded: a
//! side that hears nothing for [`SILENCE_MAX`] gives up, so a thread that cannot run (both
//! on one CPU, a CPU taken away) ends the probe with an error instead of a hang.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// Longest a side waits for the other's answer before the probe fails.
pub const SILENCE_MAX: Duration = Duration::from_secs(2);
/// Exchanges between two looks at the clock.
const EXCHANGES_PER_CHECK: u64 = 256;
/// Spins between two looks at the clock while waiting.
const SPINS_PER_CHECK: u32 = 1 << 14;
/// The value that tells the responder to stop.
const STOP: u64 = u64::MAX;
/// Most rounds of one probe.
pub const ROUNDS_MAX: u32 = 10_000;

/// The line the two threads hand each other, alone in its cache lines (128 bytes: the
/// adjacent-line prefetcher fetches pairs).
#[repr(align(128))]
struct Line(AtomicU64);

/// What to measure.
#[derive(Clone, Copy, Debug)]
pub struct ProbeConfig {
    /// The CPU of the measuring thread and the CPU of the responder.
    pub cpus: (usize, usize),
    /// Rounds; each gives one figure.
    pub rounds: u32,
    /// Length of one round.
    pub round: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            cpus: (0, 1),
            rounds: 10,
            round: Duration::from_millis(100),
        }
    }
}

/// Why a probe could not measure.
#[derive(Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// The two CPUs are the same one (the threads would take turns, not exchange lines).
    SameCpu(usize),
    /// The CPU is not one this process may run on.
    CpuNotAllowed(usize),
    /// `rounds` is 0 or above [`ROUNDS_MAX`], or `round` is zero.
    BadRounds,
    /// A side heard nothing from the other for [`SILENCE_MAX`].
    Silent,
    /// The ring's sizes are out of range (a frame larger than a buffer, no buffers, ...).
    BadRing,
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::SameCpu(c) => write!(f, "both threads on CPU {c}: give two CPUs"),
            ProbeError::CpuNotAllowed(c) => {
                write!(f, "CPU {c} is not one this process may run on")
            }
            ProbeError::BadRounds => write!(
                f,
                "rounds must be 1..={ROUNDS_MAX} and the round length above zero"
            ),
            ProbeError::BadRing => write!(
                f,
                "ring: 1..={RING_SLOTS_MAX} buffers of 1..={RING_SLOT_BYTES_MAX} bytes, frames no larger than a buffer"
            ),
            ProbeError::Silent => write!(
                f,
                "no answer from the other CPU for {} s (is it running something else?)",
                SILENCE_MAX.as_secs()
            ),
        }
    }
}

impl std::error::Error for ProbeError {}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = sched_getaffinity(None) else {
        return Vec::new();
    };
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

/// Pins the calling thread on `cpu` (one of [`allowed_cpus`]).
fn pin(cpu: usize) -> Result<(), ProbeError> {
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).map_err(|_| ProbeError::CpuNotAllowed(cpu))
}

/// Waits until `line` holds `want` (or [`STOP`], or silence). Returns what it saw.
fn wait_for(line: &Line, want: u64) -> Result<u64, ProbeError> {
    let mut since: Option<Instant> = None;
    loop {
        for _ in 0..SPINS_PER_CHECK {
            let v = line.0.load(Ordering::Acquire);
            if v == want || v == STOP {
                return Ok(v);
            }
            std::hint::spin_loop();
        }
        let start = *since.get_or_insert_with(Instant::now);
        if start.elapsed() > SILENCE_MAX {
            return Err(ProbeError::Silent);
        }
    }
}

/// The responder: answers every odd value `v` with `v + 1` until [`STOP`].
fn respond(line: &Line) -> Result<(), ProbeError> {
    let mut want = 1;
    loop {
        if wait_for(line, want)? == STOP {
            return Ok(());
        }
        line.0.store(want + 1, Ordering::Release);
        want += 2;
    }
}

/// Measures `cfg.rounds` rounds; returns each round's mean round trip in nanoseconds.
/// Both sides run on threads of their own: the caller's thread keeps its affinity.
pub fn cross_cpu_round_trip_ns(cfg: &ProbeConfig) -> Result<Vec<f64>, ProbeError> {
    let (a, b) = cfg.cpus;
    if a == b {
        return Err(ProbeError::SameCpu(a));
    }
    if cfg.rounds == 0 || cfg.rounds > ROUNDS_MAX || cfg.round.is_zero() {
        return Err(ProbeError::BadRounds);
    }
    let allowed = allowed_cpus();
    if let Some(&c) = [a, b].iter().find(|c| !allowed.contains(c)) {
        return Err(ProbeError::CpuNotAllowed(c));
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let theirs = Arc::clone(&line);
    let (pinned_tx, pinned_rx) = mpsc::channel();
    let responder = thread::spawn(move || {
        let pinned = pin(b);
        let ok = pinned.is_ok();
        // The measuring side starts only once the responder sits on its CPU.
        let _ = pinned_tx.send(pinned);
        if ok {
            respond(&theirs)
        } else {
            Ok(())
        }
    });
    let ours = Arc::clone(&line);
    let cfg = *cfg;
    let measurer = thread::spawn(move || match pinned_rx.recv_timeout(SILENCE_MAX) {
        Ok(Ok(())) => pin(a).and_then(|()| measure(&ours, &cfg)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ProbeError::Silent),
    });
    let measured = measurer.join().unwrap_or(Err(ProbeError::Silent));
    // Whatever happened, the responder stops.
    line.0.store(STOP, Ordering::Release);
    let answered = responder.join().unwrap_or(Err(ProbeError::Silent));
    let rounds = measured?;
    answered?;
    Ok(rounds)
}

/// The measuring side's rounds.
fn measure(line: &Line, cfg: &ProbeConfig) -> Result<Vec<f64>, ProbeError> {
    let mut out = Vec::with_capacity(cfg.rounds as usize);
    let mut v = 0u64;
    for _ in 0..cfg.rounds {
        let start = Instant::now();
        let mut exchanges = 0u64;
        while start.elapsed() < cfg.round {
            for _ in 0..EXCHANGES_PER_CHECK {
                line.0.store(v + 1, Ordering::Release);
                if wait_for(line, v + 2)? == STOP {
                    return Err(ProbeError::Silent);
                }
                v += 2;
            }
            exchanges += EXCHANGES_PER_CHECK;
        }
        out.push(start.elapsed().as_nanos() as f64 / exchanges as f64);
    }
    Ok(out)
}

/// A ring of buffers copied through from one CPU to the other.
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    /// The producer's CPU and the consumer's CPU; the rounds as in [`ProbeConfig`].
    pub probe: ProbeConfig,
    /// Buffers in the ring (memif's default: 1,024).
    pub slots: usize,
    /// Bytes of one buffer (iwarpd's memif ports at MTU 9000: 10,240).
    pub slot_bytes: usize,
    /// Bytes copied in and out per frame (a jumbo frame: 9,014).
    pub frame_bytes: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            probe: ProbeConfig::default(),
            slots: 1024,
            slot_bytes: 10_240,
            frame_bytes: 9_014,
        }
    }
}

/// Most buffers of a ring.
pub const RING_SLOTS_MAX: usize = 1 << 16;
/// Most bytes of one buffer.
pub const RING_SLOT_BYTES_MAX: usize = 1 << 20;
/// Buffers each side copies from (producer) or into (consumer), in turn, like an
/// engine's frames: its own memory, not the ring's.
const LOCAL_FRAMES: usize = 64;

/// Measures `cfg.probe.rounds` rounds of frames copied through the ring; returns each
/// round's Gbit/s of frames consumed. Both sides run on threads of their own.
pub fn cross_cpu_ring_gbps(cfg: &RingConfig) -> Result<Vec<f64>, ProbeError> {
    let (a, b) = cfg.probe.cpus;
    if a == b {
        return Err(ProbeError::SameCpu(a));
    }
    let p = &cfg.probe;
    if p.rounds == 0 || p.rounds > ROUNDS_MAX || p.round.is_zero() {
        return Err(ProbeError::BadRounds);
    }
    if !(1..=RING_SLOTS_MAX).contains(&cfg.slots)
        || !(1..=RING_SLOT_BYTES_MAX).contains(&cfg.slot_bytes)
        || !(1..=cfg.slot_bytes).contains(&cfg.frame_bytes)
    {
        return Err(ProbeError::BadRing);
    }
    let allowed = allowed_cpus();
    if let Some(&c) = [a, b].iter().find(|c| !allowed.contains(c)) {
        return Err(ProbeError::CpuNotAllowed(c));
    }
    let ring = Arc::new(Ring {
        free: ArrayQueue::new(cfg.slots),
        full: ArrayQueue::new(cfg.slots),
        consumed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    for _ in 0..cfg.slots {
        // Written once so the pages exist before the first round.
        let _ = ring.free.push(vec![0u8; cfg.slot_bytes].into_boxed_slice());
    }
    let cfg = *cfg;
    let theirs = Arc::clone(&ring);
    let consumer = thread::spawn(move || consume(b, &cfg, &theirs));
    let ours = Arc::clone(&ring);
    let producer = thread::spawn(move || {
        let done = produce(a, &cfg, &ours);
        ours.stop.store(true, Ordering::Relaxed);
        done
    });
    let produced = producer.join().unwrap_or(Err(ProbeError::Silent));
    ring.stop.store(true, Ordering::Relaxed);
    let drained = consumer.join().unwrap_or(Err(ProbeError::Silent));
    let rounds = produced?;
    drained?;
    Ok(rounds)
}

/// The ring both sides share: free buffers, full ones, the consumer's count and the stop.
struct Ring {
    free: ArrayQueue<Box<[u8]>>,
    full: ArrayQueue<Box<[u8]>>,
    consumed: AtomicU64,
    stop: AtomicBool,
}

/// A buffer from `q`, or `None` while it is empty (the caller tries again); an error
/// once it has been empty for [`SILENCE_MAX`] since the last buffer (`quiet_since`).
fn take(
    q: &ArrayQueue<Box<[u8]>>,
    quiet_since: &mut Option<Instant>,
) -> Result<Option<Box<[u8]>>, ProbeError> {
    match q.pop() {
        Some(buf) => {
            *quiet_since = None;
            Ok(Some(buf))
        }
        None => {
            if quiet_since.get_or_insert_with(Instant::now).elapsed() > SILENCE_MAX {
                return Err(ProbeError::Silent);
            }
            std::hint::spin_loop();
            Ok(None)
        }
    }
}

/// The consumer: copies each full buffer out into its own frames and frees it, until
/// the stop.
fn consume(cpu: usize, cfg: &RingConfig, ring: &Ring) -> Result<(), ProbeError> {
    pin(cpu)?;
    let frame = cfg.frame_bytes;
    let mut local = vec![0u8; LOCAL_FRAMES * frame];
    let mut n = 0usize;
    let mut quiet_since = None;
    while !ring.stop.load(Ordering::Relaxed) {
        let Some(buf) = take(&ring.full, &mut quiet_since)? else {
            continue;
        };
        let at = (n % LOCAL_FRAMES) * frame;
        local[at..at + frame].copy_from_slice(&buf[..frame]);
        n += 1;
        // Room for every buffer: the ring never holds more than it was given.
        let _ = ring.free.push(buf);
        ring.consumed.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The producer's rounds: fills free buffers from its own frames, hands them over, and
/// reads the consumer's count at each round's end.
fn produce(cpu: usize, cfg: &RingConfig, ring: &Ring) -> Result<Vec<f64>, ProbeError> {
    pin(cpu)?;
    let frame = cfg.frame_bytes;
    let local: Vec<u8> = (0..LOCAL_FRAMES * frame).map(|i| i as u8).collect();
    let mut out = Vec::with_capacity(cfg.probe.rounds as usize);
    let mut n = 0usize;
    let mut quiet_since = None;
    for _ in 0..cfg.probe.rounds {
        let start = Instant::now();
        let first = ring.consumed.load(Ordering::Relaxed);
        while start.elapsed() < cfg.probe.round {
            for _ in 0..EXCHANGES_PER_CHECK {
                let Some(mut buf) = take(&ring.free, &mut quiet_since)? else {
                    continue;
                };
                let at = (n % LOCAL_FRAMES) * frame;
                buf[..frame].copy_from_slice(&local[at..at + frame]);
                n += 1;
                let _ = ring.full.push(buf);
            }
        }
        let frames = ring.consumed.load(Ordering::Relaxed) - first;
        let secs = start.elapsed().as_secs_f64();
        out.push(frames as f64 * frame as f64 * 8.0 / secs / 1e9);
    }
    Ok(out)
}

/// The median of `v` (the mean of the middle two for an even count); `None` if empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_cpus() -> (usize, usize) {
        let ids = allowed_cpus();
        assert!(
            ids.len() >= 2,
            "the probe needs two CPUs this process may use; found {ids:?}"
        );
        (ids[0], ids[1])
    }

    #[test]
    fn measures_each_round_between_two_cpus() {
        let cfg = ProbeConfig {
            cpus: two_cpus(),
            rounds: 3,
            round: Duration::from_millis(20),
        };
        let v = cross_cpu_round_trip_ns(&cfg).expect("probe");
        assert_eq!(v.len(), 3);
        for ns in &v {
            // A round trip is at least two memory operations and well under the silence
            // bound; nothing tighter holds on a loaded machine.
            assert!(
                ns.is_finite() && *ns > 1.0 && *ns < 2e9,
                "round trip {ns} ns"
            );
        }
        // Again on the swapped CPUs: the threads stop and can be started again.
        let back = ProbeConfig {
            cpus: (cfg.cpus.1, cfg.cpus.0),
            ..cfg
        };
        assert_eq!(cross_cpu_round_trip_ns(&back).expect("probe").len(), 3);
    }

    #[test]
    fn refuses_what_it_cannot_measure() {
        let (a, _) = two_cpus();
        let cfg = |cpus, rounds| ProbeConfig {
            cpus,
            rounds,
            round: Duration::from_millis(1),
        };
        assert_eq!(
            cross_cpu_round_trip_ns(&cfg((a, a), 1)),
            Err(ProbeError::SameCpu(a))
        );
        assert_eq!(
            cross_cpu_round_trip_ns(&cfg((a, 1 << 20), 1)),
            Err(ProbeError::CpuNotAllowed(1 << 20))
        );
        assert_eq!(
            cross_cpu_round_trip_ns(&cfg((1 << 20, a), 1)),
            Err(ProbeError::CpuNotAllowed(1 << 20))
        );
        assert_eq!(
            cross_cpu_round_trip_ns(&cfg((a, a + 1), 0)),
            Err(ProbeError::BadRounds)
        );
    }

    #[test]
    fn copies_frames_through_the_ring() {
        let cfg = RingConfig {
            probe: ProbeConfig {
                cpus: two_cpus(),
                rounds: 3,
                round: Duration::from_millis(50),
            },
            slots: 64,
            slot_bytes: 2048,
            frame_bytes: 1514,
        };
        let v = cross_cpu_ring_gbps(&cfg).expect("ring");
        assert_eq!(v.len(), 3);
        // Frames went through (a round of 50 ms moves thousands; on a loaded machine the
        // consumer thread may miss a whole round, so not necessarily in every one).
        assert!(v.iter().all(|g| g.is_finite() && *g >= 0.0), "{v:?}");
        assert!(v.iter().sum::<f64>() > 0.0, "{v:?}");
        let bad = |slots, slot_bytes, frame_bytes| RingConfig {
            slots,
            slot_bytes,
            frame_bytes,
            ..cfg
        };
        for b in [
            bad(0, 2048, 64),
            bad(4, 0, 0),
            bad(4, 64, 65),
            bad(4, 64, 0),
        ] {
            assert_eq!(cross_cpu_ring_gbps(&b), Err(ProbeError::BadRing));
        }
        let same = RingConfig {
            probe: ProbeConfig {
                cpus: (cfg.probe.cpus.0, cfg.probe.cpus.0),
                ..cfg.probe
            },
            ..cfg
        };
        assert_eq!(
            cross_cpu_ring_gbps(&same),
            Err(ProbeError::SameCpu(cfg.probe.cpus.0))
        );
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
    }
}
