//! The verify pattern: a deterministic function of (QP index, sequence number, offset),
//! generated and checked 8 bytes at a time.
//!
//! Word `i` (bytes `8i..8i+8`, little endian) of message `(qp, seq)` is
//! `seed(qp, seq) + (i + 1) * φ` (φ the 64-bit golden ratio), where `seed` is a 64-bit mix
//! of the QP index and the sequence number: two messages, or two offsets of one message,
//! never share a word, so a misplaced, stale or shifted slot is caught as well as a
//! flipped byte. A message whose length is not a multiple of 8 ends with a prefix of
//! the next word.

use iwarp_types::{Memory, MemoryFault, RegionId};

/// Bytes of the scratch buffer pattern I/O goes through (a multiple of 8).
pub const SCRATCH_LEN: usize = 4096;

const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

/// A verify failure: where, and what was expected and found (the 8-byte word at
/// `offset`, little endian; a partial last word holds only the bytes present).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The client's QP index.
    pub qp: u32,
    /// The message's sequence number (for READ: the slot index).
    pub seq: u64,
    /// Byte offset of the word inside the message.
    pub offset: u64,
    /// The expected word.
    pub expected: u64,
    /// The word found.
    pub got: u64,
}

fn mix64(mut z: u64) -> u64 {
    // splitmix64's finaliser.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of message `(qp, seq)`.
pub fn seed(qp: u32, seq: u64) -> u64 {
    mix64(mix64(u64::from(qp) ^ 0x6c67_656e_0000_0000) ^ seq)
}

/// Word `i` of the message with seed `s`.
#[inline]
pub fn word(s: u64, i: u64) -> u64 {
    s.wrapping_add(i.wrapping_add(1).wrapping_mul(PHI))
}

/// Fills `buf` with the bytes `[start, start + buf.len())` of message `(qp, seq)`.
/// `start` must be a multiple of 8.
pub fn fill_slice(buf: &mut [u8], start: u64, qp: u32, seq: u64) {
    let s = seed(qp, seq);
    let first = start / 8;
    for (k, chunk) in buf.chunks_mut(8).enumerate() {
        let w = word(s, first + k as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first word of `buf` (bytes `[start, ..)` of message `(qp, seq)`) that differs
/// from the pattern. `start` must be a multiple of 8.
pub fn first_mismatch(buf: &[u8], start: u64, qp: u32, seq: u64) -> Option<Mismatch> {
    let s = seed(qp, seq);
    let first = start / 8;
    for (k, chunk) in buf.chunks(8).enumerate() {
        let w = word(s, first + k as u64).to_le_bytes();
        if chunk != &w[..chunk.len()] {
            let mut got = [0u8; 8];
            got[..chunk.len()].copy_from_slice(chunk);
            let mut expected = [0u8; 8];
            expected[..chunk.len()].copy_from_slice(&w[..chunk.len()]);
            return Some(Mismatch {
                qp,
                seq,
                offset: start + 8 * k as u64,
                expected: u64::from_le_bytes(expected),
                got: u64::from_le_bytes(got),
            });
        }
    }
    None
}

/// Writes message `(qp, seq)` of `len` bytes into `region` at `offset`, through
/// `scratch` (a multiple of 8 bytes long).
pub fn fill<M: Memory>(
    mem: &mut M,
    region: RegionId,
    offset: u64,
    len: u64,
    qp: u32,
    seq: u64,
    scratch: &mut [u8],
) -> Result<(), MemoryFault> {
    let step = (scratch.len() & !7).max(8).min(scratch.len()) as u64;
    let mut done = 0u64;
    while done < len {
        let n = step.min(len - done) as usize;
        fill_slice(&mut scratch[..n], done, qp, seq);
        mem.write(region, offset + done, &scratch[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// Checks message `(qp, seq)` of `len` bytes at `offset` of `region`; the first
/// mismatching word, if any.
pub fn check<M: Memory>(
    mem: &M,
    region: RegionId,
    offset: u64,
    len: u64,
    qp: u32,
    seq: u64,
    scratch: &mut [u8],
) -> Result<Option<Mismatch>, MemoryFault> {
    let step = (scratch.len() & !7).max(8).min(scratch.len()) as u64;
    let mut done = 0u64;
    while done < len {
        let n = step.min(len - done) as usize;
        mem.read(region, offset + done, &mut scratch[..n])?;
        if let Some(m) = first_mismatch(&scratch[..n], done, qp, seq) {
            return Ok(Some(m));
        }
        done += n as u64;
    }
    Ok(None)
}

/// Overwrites `len` bytes at `offset` of `region` with a value the pattern never
/// produces in a whole run (so a READ that placed nothing is caught).
pub fn poison<M: Memory>(
    mem: &mut M,
    region: RegionId,
    offset: u64,
    len: u64,
    scratch: &mut [u8],
) -> Result<(), MemoryFault> {
    scratch.fill(0xa5);
    let step = scratch.len() as u64;
    let mut done = 0u64;
    while done < len {
        let n = step.min(len - done) as usize;
        mem.write(region, offset + done, &scratch[..n])?;
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::VecMemory;

    #[test]
    fn fill_then_check_round_trips_at_odd_lengths_and_chunking() {
        let mut mem = VecMemory::new();
        let r = mem.add_arena(20_000);
        let mut scratch = vec![0u8; SCRATCH_LEN];
        for len in [1u64, 7, 8, 9, 64, 4095, 4096, 4097, 10_001] {
            fill(&mut mem, r, 100, len, 3, 77, &mut scratch).unwrap();
            assert_eq!(check(&mem, r, 100, len, 3, 77, &mut scratch), Ok(None));
            // Another sequence number or QP does not match.
            assert!(check(&mem, r, 100, len, 3, 78, &mut scratch)
                .unwrap()
                .is_some());
            assert!(check(&mem, r, 100, len, 4, 77, &mut scratch)
                .unwrap()
                .is_some());
        }
        // A small scratch buffer gives the same bytes.
        let mut small = [0u8; 16];
        fill(&mut mem, r, 0, 1000, 1, 2, &mut small).unwrap();
        let mut whole = vec![0u8; 1000];
        fill_slice(&mut whole, 0, 1, 2);
        assert_eq!(&mem.arena(r)[..1000], &whole[..]);
    }

    #[test]
    fn a_flipped_byte_is_reported_with_its_word() {
        let mut mem = VecMemory::new();
        let r = mem.add_arena(8192);
        let mut scratch = vec![0u8; 64];
        fill(&mut mem, r, 0, 8192, 9, 5, &mut scratch).unwrap();
        mem.arena_mut(r)[1234] ^= 0x40;
        let m = check(&mem, r, 0, 8192, 9, 5, &mut scratch)
            .unwrap()
            .unwrap();
        assert_eq!(m.offset, 1232);
        assert_eq!((m.qp, m.seq), (9, 5));
        assert_eq!(m.expected ^ m.got, 0x40 << 16);
        assert_eq!(m.expected, word(seed(9, 5), 1232 / 8));
    }

    #[test]
    fn words_differ_across_offsets_messages_and_qps() {
        let a = seed(0, 0);
        assert_ne!(word(a, 0), word(a, 1));
        assert_ne!(seed(0, 1), seed(1, 0));
        assert_ne!(seed(0, 1), seed(0, 2));
        let mut mem = VecMemory::new();
        let r = mem.add_arena(64);
        let mut scratch = [0u8; 64];
        poison(&mut mem, r, 0, 64, &mut scratch).unwrap();
        assert!(check(&mem, r, 0, 64, 0, 0, &mut scratch).unwrap().is_some());
        assert_eq!(
            fill(&mut mem, r, 60, 8, 0, 0, &mut scratch),
            Err(MemoryFault)
        );
    }
}
