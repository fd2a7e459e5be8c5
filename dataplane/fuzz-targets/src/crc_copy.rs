//! Fuzz target `crc_copy`: the one-pass copy + CRC32c of `iwarp_crc_copy`, its plain copy
//! and its CRC without a copy, against a copy and the `crc32c` crate, at any length,
//! alignment, split and initial CRC.
//!
//! Input: byte 0 picks the source's and the destination's offsets (0-63 each, low and
//! high nibble times 4, so both misalign), bytes 1-4 the initial CRC (little-endian),
//! bytes 5-6 where the copy is split in two calls (modulo the length + 1); the rest is
//! the data.

/// The body.
pub fn crc_copy(data: &[u8]) {
    let Some((&offsets, rest)) = data.split_first() else {
        return;
    };
    let Some((init, rest)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let Some((split, payload)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let (so, dof) = (
        usize::from(offsets & 0x0f) * 4,
        usize::from(offsets >> 4) * 4,
    );
    let init = u32::from_le_bytes(*init);
    let cut = usize::from(u16::from_le_bytes(*split)) % (payload.len() + 1);
    let mut src = vec![0u8; so + payload.len()];
    src[so..].copy_from_slice(payload);
    let src = &src[so..];
    let mut dst = vec![0xa5u8; dof + payload.len() + 3];
    let out = &mut dst[dof..dof + payload.len()];
    let a = iwarp_crc_copy::copy_crc32c(&mut out[..cut], &src[..cut], init);
    let b = iwarp_crc_copy::copy_crc32c(&mut out[cut..], &src[cut..], a);
    assert_eq!(
        b,
        crc32c_reference(init, payload),
        "CRC of {} bytes",
        payload.len()
    );
    assert_eq!(out, payload, "copy of {} bytes", payload.len());
    // Nothing written past the end.
    assert!(dst[dof + payload.len()..].iter().all(|&x| x == 0xa5));
    // The CRC alone, in the same two pieces.
    let a = iwarp_crc_copy::crc32c_append(init, &src[..cut]);
    let c = iwarp_crc_copy::crc32c_append(a, &src[cut..]);
    assert_eq!(c, b, "CRC without copy of {} bytes", payload.len());
    // The plain copy, in the same two pieces.
    dst.fill(0xa5);
    let out = &mut dst[dof..dof + payload.len()];
    iwarp_crc_copy::copy(&mut out[..cut], &src[..cut]);
    iwarp_crc_copy::copy(&mut out[cut..], &src[cut..]);
    assert_eq!(out, payload, "plain copy of {} bytes", payload.len());
    assert!(dst[dof + payload.len()..].iter().all(|&x| x == 0xa5));
}

/// The `crc32c` crate's answer (not `iwarp_wire`'s CRC, which takes `iwarp_crc_copy`'s
/// kernel on some CPUs): an independent implementation.
fn crc32c_reference(init: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(init, data)
}
