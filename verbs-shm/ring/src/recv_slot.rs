//! The receive work request slot of RQ and SRQ rings.

use core::mem::{offset_of, size_of};

use iwarp_types::{RecvWr, MAX_SGE};

use crate::sgl::{check_zero, decode_sgl, encode_sgl, get_u64, put_u64, put_u8, SgeSlot};
use crate::{SlotError, WrDecodeError};

/// A [`RecvWr`] in an RQ or SRQ ring (`#[repr(C)]`, native-endian). Reserved fields
/// and SGEs past `num_sge` are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RecvSlot {
    /// The consumer's identifier.
    pub wr_id: u64,
    /// Number of valid entries in `sge` (at most [`MAX_SGE`]).
    pub num_sge: u8,
    /// Zero.
    pub reserved0: [u8; 7],
    /// Where an incoming Send is placed.
    pub sge: [SgeSlot; MAX_SGE],
    /// Zero.
    pub reserved1: [u64; 2],
}

/// Size of [`RecvSlot`]: the slot size of RQ and SRQ rings.
pub const RECV_SLOT_SIZE: usize = size_of::<RecvSlot>();

const _: () = assert!(RECV_SLOT_SIZE == 128);
const _: () = assert!(offset_of!(RecvSlot, wr_id) == 0);
const _: () = assert!(offset_of!(RecvSlot, num_sge) == 8);
const _: () = assert!(offset_of!(RecvSlot, reserved0) == 9);
const _: () = assert!(offset_of!(RecvSlot, sge) == 16);
const _: () = assert!(offset_of!(RecvSlot, reserved1) == 112);

/// Encodes a receive work request into slot bytes.
pub fn encode_recv_wr(wr: &RecvWr) -> [u8; RECV_SLOT_SIZE] {
    let mut b = [0u8; RECV_SLOT_SIZE];
    put_u64(&mut b, offset_of!(RecvSlot, wr_id), wr.wr_id);
    put_u8(&mut b, offset_of!(RecvSlot, num_sge), wr.sgl.len() as u8);
    encode_sgl(&mut b, offset_of!(RecvSlot, sge), &wr.sgl);
    b
}

/// Decodes slot bytes copied out of an RQ / SRQ ring, validating every field.
pub fn decode_recv_wr(b: &[u8; RECV_SLOT_SIZE]) -> Result<RecvWr, WrDecodeError> {
    let wr_id = get_u64(b, offset_of!(RecvSlot, wr_id));
    decode_fields(b)
        .map(|sgl| RecvWr { wr_id, sgl })
        .map_err(|kind| WrDecodeError { wr_id, kind })
}

fn decode_fields(b: &[u8; RECV_SLOT_SIZE]) -> Result<iwarp_types::SgList, SlotError> {
    check_zero(
        &b[offset_of!(RecvSlot, reserved0)..offset_of!(RecvSlot, sge)],
        "reserved0",
    )?;
    check_zero(&b[offset_of!(RecvSlot, reserved1)..], "reserved1")?;
    decode_sgl(
        b,
        offset_of!(RecvSlot, sge),
        b[offset_of!(RecvSlot, num_sge)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{SgList, Sge, Stag};

    fn wr(n: usize) -> RecvWr {
        let sges: Vec<Sge> = (0..n)
            .map(|i| Sge {
                addr: 0x1000 * i as u64 + 7,
                length: 100 + i as u32,
                lkey: Stag::new(i as u32 + 1, 0x42),
            })
            .collect();
        RecvWr {
            wr_id: 0xdead_beef_0000 + n as u64,
            sgl: SgList::from_slice(&sges).unwrap(),
        }
    }

    #[test]
    fn round_trip_every_sge_count() {
        for n in 0..=MAX_SGE {
            let w = wr(n);
            assert_eq!(decode_recv_wr(&encode_recv_wr(&w)), Ok(w));
        }
    }

    #[test]
    fn malformed_rejected_with_wr_id() {
        let good = encode_recv_wr(&wr(2));
        let mut b = good;
        b[8] = MAX_SGE as u8 + 1;
        assert_eq!(
            decode_recv_wr(&b),
            Err(WrDecodeError {
                wr_id: wr(2).wr_id,
                kind: SlotError::TooManySge(7)
            })
        );
        let mut b = good;
        b[10] = 1;
        assert_eq!(
            decode_recv_wr(&b).unwrap_err().kind,
            SlotError::NonZeroField("reserved0")
        );
        let mut b = good;
        b[RECV_SLOT_SIZE - 1] = 1;
        assert_eq!(
            decode_recv_wr(&b).unwrap_err().kind,
            SlotError::NonZeroField("reserved1")
        );
        // An SGE past num_sge.
        let mut b = good;
        b[16 + 2 * 16] = 1;
        assert_eq!(
            decode_recv_wr(&b).unwrap_err().kind,
            SlotError::NonZeroField("unused sge")
        );
    }
}
