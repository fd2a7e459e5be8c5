//! The scatter/gather element of the slot ABI, and byte helpers shared by the slot
//! codecs (native-endian fields at fixed offsets of a copied slot).

use core::mem::{offset_of, size_of};

use iwarp_types::{SgList, Sge, Stag, MAX_SGE};

use crate::SlotError;

/// One scatter/gather element in a work request slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SgeSlot {
    /// Tagged offset of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local STag.
    pub lkey: u32,
}

/// Size of [`SgeSlot`].
pub(crate) const SGE_SLOT_SIZE: usize = size_of::<SgeSlot>();

const _: () = assert!(SGE_SLOT_SIZE == 16);
const _: () = assert!(offset_of!(SgeSlot, addr) == 0);
const _: () = assert!(offset_of!(SgeSlot, length) == 8);
const _: () = assert!(offset_of!(SgeSlot, lkey) == 12);

pub(crate) fn put_u8(buf: &mut [u8], off: usize, v: u8) {
    buf[off] = v;
}

pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) {
    buf[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], off: usize, v: u64) {
    buf[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

pub(crate) fn get_u32(buf: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[off..off + 4]);
    u32::from_ne_bytes(b)
}

pub(crate) fn get_u64(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_ne_bytes(b)
}

/// `Err(NonZeroField(name))` unless `buf[range]` is all zero.
///
/// Every byte is OR-ed in, without stopping at the first non-zero one: a valid slot is
/// all zero there anyway, and a loop without an early exit is vectorised (`all` stopped
/// at each byte: the zero checks were most of a WR's 71 ns decode, benches/slot_decode).
pub(crate) fn check_zero(buf: &[u8], name: &'static str) -> Result<(), SlotError> {
    let (words, rest) = buf.as_chunks::<8>();
    let acc = words.iter().fold(0u64, |a, w| a | u64::from_ne_bytes(*w))
        | rest.iter().fold(0u64, |a, &b| a | u64::from(b));
    if acc == 0 {
        Ok(())
    } else {
        Err(SlotError::NonZeroField(name))
    }
}

/// Writes `sgl` as `MAX_SGE` [`SgeSlot`]s at `off` (unused entries zero).
pub(crate) fn encode_sgl(buf: &mut [u8], off: usize, sgl: &SgList) {
    for i in 0..MAX_SGE {
        let sge = sgl.as_slice().get(i).copied().unwrap_or_default();
        let o = off + i * SGE_SLOT_SIZE;
        put_u64(buf, o + offset_of!(SgeSlot, addr), sge.addr);
        put_u32(buf, o + offset_of!(SgeSlot, length), sge.length);
        put_u32(buf, o + offset_of!(SgeSlot, lkey), sge.lkey.0);
    }
}

/// Reads `num_sge` [`SgeSlot`]s at `off`; the unused entries must be zero.
#[inline(always)]
pub(crate) fn decode_sgl(buf: &[u8], off: usize, num_sge: u8) -> Result<SgList, SlotError> {
    let n = check_sgl(buf, off, num_sge)?;
    let mut sgl = SgList::new();
    sgl_into(buf, off, n, &mut sgl);
    Ok(sgl)
}

/// Validates the SGE count at `off` (at most [`MAX_SGE`]) and that the unused entries
/// are zero; returns the count. [`sgl_into`] then writes the list.
#[inline(always)]
pub(crate) fn check_sgl(buf: &[u8], off: usize, num_sge: u8) -> Result<usize, SlotError> {
    let n = num_sge as usize;
    if n > MAX_SGE {
        return Err(SlotError::TooManySge(num_sge));
    }
    // Every SGE slot is read and the unused ones OR-ed in: a loop of a fixed count is
    // unrolled without branches, where `check_zero` on the variable-length tail was a
    // call and a loop of its own (2 % of the daemon's core at 64 B WRITE).
    let mut acc = 0u64;
    for i in 0..MAX_SGE {
        let o = off + i * SGE_SLOT_SIZE;
        let words = get_u64(buf, o) | get_u64(buf, o + 8);
        acc |= if i >= n { words } else { 0 };
    }
    if acc != 0 {
        return Err(SlotError::NonZeroField("unused sge"));
    }
    Ok(n)
}

/// Sets `sgl` to the first `n` (at most [`MAX_SGE`]: more are not read) [`SgeSlot`]s at
/// `off`, in place. A decoder writes the list last and where it stays: a list built
/// first and moved was read back with wide loads that waited on the narrow stores that
/// built it (store-to-load forwarding fails), a quarter of the daemon's SQ decode.
#[inline(always)]
pub(crate) fn sgl_into(buf: &[u8], off: usize, n: usize, sgl: &mut SgList) {
    sgl.clear();
    for i in 0..n.min(MAX_SGE) {
        let o = off + i * SGE_SLOT_SIZE;
        let sge = Sge {
            addr: get_u64(buf, o + offset_of!(SgeSlot, addr)),
            length: get_u32(buf, o + offset_of!(SgeSlot, length)),
            lkey: Stag(get_u32(buf, o + offset_of!(SgeSlot, lkey))),
        };
        // Cannot fail: at most `MAX_SGE` pushes.
        let _ = sgl.push(sge);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any single non-zero byte, at any position of a buffer of any length (whole words
    /// and the tail), makes the check fail; an all-zero buffer passes.
    #[test]
    fn check_zero_sees_every_byte() {
        for len in 0..=100 {
            let mut buf = vec![0u8; len];
            assert_eq!(check_zero(&buf, "f"), Ok(()));
            for i in 0..len {
                for v in [1u8, 0x80, 0xff] {
                    buf[i] = v;
                    assert_eq!(check_zero(&buf, "f"), Err(SlotError::NonZeroField("f")));
                    buf[i] = 0;
                }
            }
        }
    }
}
