//! The machine's own limit, measured in the same run as the engine.
//!
//! Definition: for a buffer of the message size, one core does what two software iWARP
//! endpoints must do with every payload byte at the least, once per side:
//!
//! 1. CRC32c over the source (the sender's MPA CRC),
//! 2. copy the source into a frame buffer (the sender's `fill` from registered memory),
//! 3. CRC32c over the frame (the receiver's MPA CRC check),
//! 4. copy the frame into the destination (the receiver's placement).
//!
//! The limit is message bytes divided by the time of these four steps, in bytes/s. It calls
//! the engine's own CRC32c function ([`iwarp_wire::mpa::crc32c`], the one MPA uses on both
//! sides), so a faster or slower CRC moves the limit and the engine together, and it uses
//! cache-warm buffers (like the benchmark's). Its copies are the engine's own copy
//! ([`iwarp_crc_copy::copy`]): on CPUs where glibc's `memcpy` takes a slow `rep movsb` for
//! some distances between source and destination (AMD Zen, the `iwarp_crc_copy` docs), a
//! limit measured with `copy_from_slice` moved with the buffers' addresses (7 Gbit/s at
//! 64 KiB against 47 at 8,948 bytes in one run) instead of saying what the machine can do.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The three buffers of the limit loop.
pub struct CopyCrc {
    src: Vec<u8>,
    frame: Vec<u8>,
    dst: Vec<u8>,
}

impl CopyCrc {
    /// Buffers of `len` bytes (source filled with a pattern).
    pub fn new(len: usize) -> CopyCrc {
        let src = (0..len)
            .map(|i| (i as u8).wrapping_mul(13).wrapping_add(1))
            .collect();
        CopyCrc {
            src,
            frame: vec![0; len],
            dst: vec![0; len],
        }
    }

    /// Bytes per pass.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// True for zero-length buffers.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// One pass: CRC the source, copy it into the frame, CRC the frame, copy the frame
    /// into the destination. Returns both CRCs xored (equal CRCs: zero).
    pub fn pass(&mut self) -> u32 {
        let tx_crc = iwarp_wire::mpa::crc32c(black_box(&self.src));
        iwarp_crc_copy::copy(&mut self.frame, &self.src);
        let rx_crc = iwarp_wire::mpa::crc32c(black_box(&self.frame));
        iwarp_crc_copy::copy(&mut self.dst, &self.frame);
        black_box(&mut self.dst);
        tx_crc ^ rx_crc
    }

    /// The destination (equals the source after one pass).
    pub fn dst(&self) -> &[u8] {
        &self.dst
    }

    /// The source.
    pub fn src(&self) -> &[u8] {
        &self.src
    }
}

/// Runs passes for at least `min_time` (and at least 16 passes); returns bytes/s.
pub fn limit_bytes_per_s(len: usize, min_time: Duration) -> f64 {
    let mut b = CopyCrc::new(len.max(1));
    // Warm the caches and the CRC path.
    for _ in 0..16 {
        black_box(b.pass());
    }
    let len = b.len();
    bytes_per_s(len, min_time, || {
        black_box(b.pass());
    })
}

/// Calls `pass` (one message of `len` bytes) in batches of 16 for at least `min_time`;
/// returns bytes/s.
fn bytes_per_s(len: usize, min_time: Duration, mut pass: impl FnMut()) -> f64 {
    let mut passes = 0u64;
    let start = Instant::now();
    let mut elapsed;
    loop {
        for _ in 0..16 {
            pass();
        }
        passes += 16;
        elapsed = start.elapsed();
        if elapsed >= min_time {
            break;
        }
    }
    (passes as f64 * len as f64) / elapsed.as_secs_f64()
}

/// The limit when the messages are spread over `slots` buffers of `len` bytes each at
/// the source and at the destination (as `slots` QPs each writing its own `len` bytes),
/// visited in a fixed shuffled order: the same four steps per message, but the sources
/// and destinations come from memory instead of the caches once `2 * slots * len`
/// exceeds them. Set against [`limit_bytes_per_s`] at the same `len`, it is what the
/// machine loses to the working set alone (issue 13, target 6: 10,000 QPs). Bytes/s.
pub fn limit_spread_bytes_per_s(len: usize, slots: usize, min_time: Duration) -> f64 {
    let len = len.max(1);
    let slots = slots.max(1);
    let src: Vec<u8> = (0..len * slots)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(1))
        .collect();
    let mut dst = vec![0u8; len * slots];
    let mut frame = vec![0u8; len];
    let stride = visit_stride(slots);
    let mut slot = 0usize;
    let mut pass = |slot: usize| {
        let s = &src[slot * len..(slot + 1) * len];
        let tx_crc = iwarp_wire::mpa::crc32c(black_box(s));
        iwarp_crc_copy::copy(&mut frame, s);
        let rx_crc = iwarp_wire::mpa::crc32c(black_box(&frame));
        iwarp_crc_copy::copy(&mut dst[slot * len..(slot + 1) * len], &frame);
        black_box(&mut dst);
        tx_crc ^ rx_crc
    };
    // One round to fault every page in and warm the CRC path.
    for _ in 0..slots {
        black_box(pass(slot));
        slot = (slot + stride) % slots;
    }
    bytes_per_s(len, min_time, || {
        black_box(pass(slot));
        slot = (slot + stride) % slots;
    })
}

/// The step of [`limit_spread_bytes_per_s`]'s visiting order (`slot = (slot + step) %
/// slots`): a large step coprime with `slots`, so that every slot is visited once per
/// round and consecutive visits are far apart (no prefetcher follows them).
pub(crate) fn visit_stride(slots: usize) -> usize {
    (1..slots)
        .map(|k| (slots / 2 + k * 7919) % slots)
        .find(|&k| k > 0 && gcd(k, slots) == 1)
        .unwrap_or(1)
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_copies_and_both_crcs_agree() {
        let mut b = CopyCrc::new(4096);
        assert_eq!(b.pass(), 0, "CRC of the frame equals CRC of the source");
        assert_eq!(b.dst(), b.src());
        assert_eq!(b.len(), 4096);
    }

    #[test]
    fn crc_is_the_iscsi_crc32c() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
    }

    #[test]
    fn spread_limit_visits_every_slot_once_a_round_and_is_positive() {
        for slots in [1, 2, 3, 10, 12, 4096, 10_000] {
            let step = visit_stride(slots);
            let mut seen = vec![false; slots];
            let mut slot = 0;
            for _ in 0..slots {
                assert!(!seen[slot], "{slots}: slot {slot} twice in a round");
                seen[slot] = true;
                slot = (slot + step) % slots;
            }
            if slots > 12 {
                assert!(step > 64 && step < slots - 64, "{slots}: step {step}");
            }
            let r = limit_spread_bytes_per_s(64, slots, Duration::from_millis(2));
            // Positive only: a rate over 2 ms of wall clock says nothing on a loaded
            // machine (one preemption and a batch of passes looks slow).
            assert!(r.is_finite() && r > 0.0, "{slots}: {r}");
        }
        assert_eq!(gcd(12, 8), 4);
        assert_eq!(gcd(7, 10_000), 1);
    }

    #[test]
    fn limit_is_positive_and_finite() {
        let r = limit_bytes_per_s(64, Duration::from_millis(5));
        assert!(r.is_finite() && r > 0.0, "{r}");
        let r = limit_bytes_per_s(0, Duration::from_millis(1));
        assert!(r.is_finite() && r > 0.0, "{r}");
    }
}
