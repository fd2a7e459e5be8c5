//! CRC32c (Castagnoli, RFC 3720 appendix B.4) and the MPA CRC convention (RFC 5044
//! section 4.4).
//!
//! The MPA CRC covers the whole FPDU before it: ULPDU_Length, ULPDU, pad (and markers, when
//! they are in use). On the wire its 4 octets are the CRC32c value in **little-endian**
//! order: Linux siw hands the `crc32c` shash output (stored little-endian) to the socket
//! unconverted ("CRC32 is computed, transmitted and received directly in NBO",
//! `siw_qp_rx.c`), and the captures agree: the 76-octet Send FPDU of
//! `03-write-bw-mpa2-crc.pcap` frame 26 has CRC32c 0x1f92db5a and ends in `5a db 92 1f`
//! (the same byte order as iSCSI's digests and RFC 3720's test vectors).
//!
//! With CRC not negotiated the field is still present and siw sends zero ([`NO_CRC`]).
//!
//! Four implementations compute it, whichever is faster on the CPU (measured with
//! `benches/benches/crc.rs`, see docs/BENCHMARKS.md): up to
//! `iwarp_crc_copy::SHORT_MAX_LEN` octets (128: ULPDU_Length, a DDP/RDMAP header, a pad,
//! a 64-byte WRITE's FPDU) the `crc32` instruction inline, 8 octets per instruction, started or continued
//! (AMD Zen 4: 3.5 / 3.8 / 4.3 ns at 2 / 18 / 80 octets against `crc-fast`'s 7.6 / 5.5 /
//! 5.8 and the `crc32c` crate's 11.6 / 8.1 / 9.0, whose set-up dominates there,
//! 2026-12-06; on CPUs without SSE 4.2 the next one takes these too); up to [`CRC_FAST_MAX_LEN`] octets from a fresh start,
//! `crc-fast` (CRC-32/ISCSI: a dedicated path for short buffers, no digest set-up);
//! above it `iwarp_crc_copy::crc32c_append`, the carry-less folding of
//! the transmit copy without its stores: 512 bits at a time on CPUs with AVX-512 and
//! VPCLMULQDQ (AMD Zen 4: 40 GiB/s at 1448 octets against `crc-fast`'s 25, 50 at 8948
//! against 45, both 53 at 64 KiB, 2026-12-06), 256 bits on CPUs with AVX2 and VPCLMULQDQ
//! but no AVX-512 (AMD Zen 3: 17.9 GiB/s at 1448 octets and 19.0 at 8948 against the
//! `crc32c` crate's 9.8 and 14.2, 2026-12-03), the `crc32c` crate (SSE 4.2 / ARMv8 CRC
//! instruction, 3-way interleaved) on the others, where it beats `crc-fast`'s 128-bit
//! folding. Payload copied and CRC'd in one pass (transmit) is `iwarp-crc-copy`'s too.
//! All compute the same function (tested).

/// Length of the MPA CRC field.
pub const MPA_CRC_LEN: usize = 4;

/// What the CRC field holds when CRC was not negotiated.
pub const NO_CRC: [u8; MPA_CRC_LEN] = [0; MPA_CRC_LEN];

/// Longest buffer [`crc32c()`] hands to `crc-fast`.
pub const CRC_FAST_MAX_LEN: usize = 256;

/// CRC32c of one slice. Inlined: a dispatch on the length, several times per FPDU.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    if data.len() <= iwarp_crc_copy::SHORT_MAX_LEN && iwarp_crc_copy::has_crc32_instruction() {
        return iwarp_crc_copy::crc32c_append(0, data);
    }
    if data.len() <= CRC_FAST_MAX_LEN {
        crc_fast::crc32_iscsi(data)
    } else {
        iwarp_crc_copy::crc32c_append(0, data)
    }
}

/// Continues a CRC32c: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    if crc == 0 {
        // The common case (an FPDU's first piece).
        return crc32c(data);
    }
    iwarp_crc_copy::crc32c_append(crc, data)
}

/// CRC32c of the concatenation of several slices (a header, payload pieces, pad).
pub fn crc32c_slices<'a>(slices: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    slices.into_iter().fold(0, crc32c_append)
}

/// An incremental CRC32c, for an FPDU whose bytes arrive or are produced in pieces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crc32c {
    crc: u32,
}

impl Crc32c {
    /// Nothing hashed yet.
    pub const fn new() -> Crc32c {
        Crc32c { crc: 0 }
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.crc = crc32c_append(self.crc, data);
    }

    /// The CRC32c of everything added.
    pub const fn value(&self) -> u32 {
        self.crc
    }

    /// The CRC field as it goes on the wire.
    pub const fn to_wire(&self) -> [u8; MPA_CRC_LEN] {
        mpa_crc_to_wire(self.crc)
    }

    /// The received CRC field matches what was hashed.
    pub fn matches_wire(&self, field: &[u8]) -> bool {
        mpa_crc_from_wire(field) == Some(self.crc)
    }
}

/// The 4 octets of the MPA CRC field for a CRC32c value.
pub const fn mpa_crc_to_wire(crc: u32) -> [u8; MPA_CRC_LEN] {
    crc.to_le_bytes()
}

/// The CRC32c value of a received MPA CRC field (`None` unless exactly 4 octets).
pub fn mpa_crc_from_wire(field: &[u8]) -> Option<u32> {
    let b: [u8; MPA_CRC_LEN] = field.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// The MPA CRC field of the FPDU bytes `covered` (everything before the CRC field).
pub fn mpa_crc(covered: &[u8]) -> [u8; MPA_CRC_LEN] {
    mpa_crc_to_wire(crc32c(covered))
}

/// Checks a whole FPDU, CRC field last. `false` if shorter than the CRC field.
pub fn verify_mpa_crc(fpdu: &[u8]) -> bool {
    let Some(split) = fpdu.len().checked_sub(MPA_CRC_LEN) else {
        return false;
    };
    let (covered, field) = fpdu.split_at(split);
    mpa_crc_from_wire(field) == Some(crc32c(covered))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Send FPDU of 03-write-bw-mpa2-crc.pcap frame 26: ULPDU_Length 0x004a, untagged Send
    // L=1, QN 0, MSN 6, MO 0, 56 zero payload octets, no pad, CRC `5a db 92 1f`.
    fn capture_fpdu() -> [u8; 80] {
        let mut f = [0u8; 80];
        f[..4].copy_from_slice(&[0x00, 0x4a, 0x41, 0x43]);
        f[15] = 0x06;
        f[76..].copy_from_slice(&[0x5a, 0xdb, 0x92, 0x1f]);
        f
    }

    #[test]
    fn rfc3720_vectors() {
        // RFC 3720 appendix B.4 (the values; the wire bytes there are little-endian too).
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(mpa_crc(&[0u8; 32]), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let inc: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(crc32c(&inc), 0x46dd_794e);
        let dec: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        assert_eq!(crc32c(&dec), 0x113f_db5c);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[]), 0);
    }

    #[test]
    fn both_crates_agree_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..2048u32)
            .map(|i| (i.wrapping_mul(131) >> 3) as u8)
            .collect();
        for start in 0..8 {
            for len in (0..=600).chain([1444, 1448, 1449, 2040]) {
                let b = &data[start..start + len];
                let expect = crc32c::crc32c(b);
                assert_eq!(crc32c(b), expect, "start {start} len {len}");
                assert_eq!(crc_fast::crc32_iscsi(b), expect, "start {start} len {len}");
                assert_eq!(crc32c_slices([&b[..len / 3], &b[len / 3..]]), expect);
            }
        }
    }

    /// xorshift64: a reproducible stream for the property tests (no dependency).
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn same_as_the_crc32c_crate_up_to_10000_octets_with_random_splits() {
        let mut rng = 0x1313_1313_u64;
        let data: Vec<u8> = (0..10_064).map(|_| next(&mut rng) as u8).collect();
        for len in 0..=10_000 {
            let start = (next(&mut rng) % 64) as usize;
            let b = &data[start..start + len];
            let expect = crc32c::crc32c(b);
            assert_eq!(crc32c(b), expect, "start {start} len {len}");
            // Appended in random pieces, from a random prior CRC too.
            let prior = next(&mut rng) as u32;
            let (mut crc, mut from_prior) = (0, prior);
            let mut rest = b;
            while !rest.is_empty() {
                let take = (next(&mut rng) % (rest.len() as u64 + 1)) as usize;
                let (piece, tail) = rest.split_at(take);
                crc = crc32c_append(crc, piece);
                from_prior = crc32c_append(from_prior, piece);
                rest = tail;
            }
            assert_eq!(crc, expect, "pieces, len {len}");
            assert_eq!(from_prior, crc32c::crc32c_append(prior, b), "len {len}");
        }
    }

    #[test]
    fn capture_vector() {
        let f = capture_fpdu();
        assert_eq!(crc32c(&f[..76]), 0x1f92_db5a);
        assert_eq!(mpa_crc(&f[..76]), [0x5a, 0xdb, 0x92, 0x1f]);
        assert!(verify_mpa_crc(&f));
        let mut bad = f;
        bad[40] ^= 1;
        assert!(!verify_mpa_crc(&bad));
        let mut bad = f;
        bad[79] ^= 0x80;
        assert!(!verify_mpa_crc(&bad));
        assert!(!verify_mpa_crc(&f[..3]));
    }

    #[test]
    fn pieces_equal_whole() {
        let f = capture_fpdu();
        let whole = crc32c(&f[..76]);
        assert_eq!(crc32c_slices([&f[..2], &f[2..20], &f[20..76]]), whole);
        assert_eq!(crc32c_slices([&f[..0], &f[..76]]), whole);
        assert_eq!(crc32c_append(crc32c(&f[..33]), &f[33..76]), whole);
        let mut h = Crc32c::new();
        for chunk in f[..76].chunks(7) {
            h.update(chunk);
        }
        assert_eq!(h.value(), whole);
        assert_eq!(h.to_wire(), [0x5a, 0xdb, 0x92, 0x1f]);
        assert!(h.matches_wire(&f[76..]));
        assert!(!h.matches_wire(&f[75..]));
        assert!(!h.matches_wire(&NO_CRC));
    }

    #[test]
    fn wire_order() {
        assert_eq!(mpa_crc_to_wire(0x0102_0304), [4, 3, 2, 1]);
        assert_eq!(mpa_crc_from_wire(&[4, 3, 2, 1]), Some(0x0102_0304));
        assert_eq!(mpa_crc_from_wire(&[4, 3, 2]), None);
    }
}
