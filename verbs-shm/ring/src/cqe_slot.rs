//! The completion slot of CQ rings.

use core::mem::{offset_of, size_of};

use iwarp_types::{Cqe, QpId, Stag, WcOpcode, WcStatus};

use crate::sgl::{check_zero, get_u32, get_u64, put_u32, put_u64, put_u8};
use crate::SlotError;

/// A [`Cqe`] in a CQ ring (`#[repr(C)]`, native-endian). Reserved fields are zero, and
/// `invalidated` is zero unless [`CqeSlot::HAS_INVALIDATED`] is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct CqeSlot {
    /// The WR's identifier.
    pub wr_id: u64,
    /// Bytes received (Receive only).
    pub byte_len: u32,
    /// The QP the WR was posted on.
    pub qp: u32,
    /// The STag an incoming Send with Invalidate invalidated.
    pub invalidated: u32,
    /// A [`WcStatus`] value.
    pub status: u8,
    /// A [`WcOpcode`] value.
    pub opcode: u8,
    /// [`CqeSlot::HAS_INVALIDATED`], [`CqeSlot::SOLICITED`].
    pub flags: u8,
    /// Zero.
    pub reserved0: u8,
    /// Zero.
    pub reserved1: u64,
}

impl CqeSlot {
    /// `flags` bit: `invalidated` holds an STag.
    pub const HAS_INVALIDATED: u8 = 1 << 0;
    /// `flags` bit: the incoming message carried the Solicited Event flag.
    pub const SOLICITED: u8 = 1 << 1;
}

/// Size of [`CqeSlot`]: the slot size of CQ rings (two per cache line).
pub const CQE_SLOT_SIZE: usize = size_of::<CqeSlot>();

const _: () = assert!(CQE_SLOT_SIZE == 32);
const _: () = assert!(offset_of!(CqeSlot, wr_id) == 0);
const _: () = assert!(offset_of!(CqeSlot, byte_len) == 8);
const _: () = assert!(offset_of!(CqeSlot, qp) == 12);
const _: () = assert!(offset_of!(CqeSlot, invalidated) == 16);
const _: () = assert!(offset_of!(CqeSlot, status) == 20);
const _: () = assert!(offset_of!(CqeSlot, opcode) == 21);
const _: () = assert!(offset_of!(CqeSlot, flags) == 22);
const _: () = assert!(offset_of!(CqeSlot, reserved0) == 23);
const _: () = assert!(offset_of!(CqeSlot, reserved1) == 24);

/// Every completion opcode, indexed by its ABI value.
const WC_OPCODES: [WcOpcode; 11] = [
    WcOpcode::Send,
    WcOpcode::SendSe,
    WcOpcode::SendInv,
    WcOpcode::SendSeInv,
    WcOpcode::Write,
    WcOpcode::Read,
    WcOpcode::ReadInv,
    WcOpcode::Bind,
    WcOpcode::FastReg,
    WcOpcode::LocalInv,
    WcOpcode::Recv,
];

const _: () = {
    let mut i = 0;
    while i < WC_OPCODES.len() {
        assert!(WC_OPCODES[i] as usize == i);
        i += 1;
    }
};

/// Encodes a completion into slot bytes.
pub fn encode_cqe(cqe: &Cqe) -> [u8; CQE_SLOT_SIZE] {
    let mut b = [0u8; CQE_SLOT_SIZE];
    put_u64(&mut b, offset_of!(CqeSlot, wr_id), cqe.wr_id);
    put_u32(&mut b, offset_of!(CqeSlot, byte_len), cqe.byte_len);
    put_u32(&mut b, offset_of!(CqeSlot, qp), cqe.qp.0);
    put_u8(&mut b, offset_of!(CqeSlot, status), cqe.status as u8);
    put_u8(&mut b, offset_of!(CqeSlot, opcode), cqe.opcode as u8);
    let mut flags = 0;
    if let Some(stag) = cqe.invalidated {
        put_u32(&mut b, offset_of!(CqeSlot, invalidated), stag.0);
        flags |= CqeSlot::HAS_INVALIDATED;
    }
    if cqe.solicited {
        flags |= CqeSlot::SOLICITED;
    }
    put_u8(&mut b, offset_of!(CqeSlot, flags), flags);
    b
}

/// Decodes slot bytes copied out of a CQ ring, validating every field.
pub fn decode_cqe(b: &[u8; CQE_SLOT_SIZE]) -> Result<Cqe, SlotError> {
    check_zero(
        &b[offset_of!(CqeSlot, reserved0)..offset_of!(CqeSlot, reserved1)],
        "reserved0",
    )?;
    check_zero(&b[offset_of!(CqeSlot, reserved1)..], "reserved1")?;
    let raw = b[offset_of!(CqeSlot, status)];
    let status = WcStatus::from_u8(raw).ok_or(SlotError::UnknownStatus(raw))?;
    let raw = b[offset_of!(CqeSlot, opcode)];
    let opcode = *WC_OPCODES
        .get(raw as usize)
        .ok_or(SlotError::UnknownWcOpcode(raw))?;
    let flags = b[offset_of!(CqeSlot, flags)];
    if flags & !(CqeSlot::HAS_INVALIDATED | CqeSlot::SOLICITED) != 0 {
        return Err(SlotError::UnknownCqeFlags(flags));
    }
    let inv = get_u32(b, offset_of!(CqeSlot, invalidated));
    let invalidated = if flags & CqeSlot::HAS_INVALIDATED != 0 {
        Some(Stag(inv))
    } else if inv != 0 {
        return Err(SlotError::NonZeroField("invalidated"));
    } else {
        None
    };
    Ok(Cqe {
        wr_id: get_u64(b, offset_of!(CqeSlot, wr_id)),
        status,
        opcode,
        byte_len: get_u32(b, offset_of!(CqeSlot, byte_len)),
        qp: QpId(get_u32(b, offset_of!(CqeSlot, qp))),
        invalidated,
        solicited: flags & CqeSlot::SOLICITED != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(status: WcStatus, opcode: WcOpcode, inv: Option<Stag>, se: bool) -> Cqe {
        Cqe {
            wr_id: 0x0123_4567_89ab_cdef,
            status,
            opcode,
            byte_len: 65536,
            qp: QpId(77),
            invalidated: inv,
            solicited: se,
        }
    }

    #[test]
    fn round_trip_every_status_and_opcode() {
        for status in WcStatus::ALL {
            for opcode in WC_OPCODES {
                for inv in [None, Some(Stag(0)), Some(Stag::new(0xabcdef, 0x12))] {
                    for se in [false, true] {
                        let c = cqe(status, opcode, inv, se);
                        assert_eq!(decode_cqe(&encode_cqe(&c)), Ok(c));
                    }
                }
            }
        }
    }

    #[test]
    fn malformed_rejected() {
        let good = encode_cqe(&cqe(WcStatus::Success, WcOpcode::Recv, None, false));
        let mut b = good;
        b[20] = WcStatus::ALL.len() as u8;
        assert_eq!(decode_cqe(&b), Err(SlotError::UnknownStatus(22)));
        let mut b = good;
        b[21] = 11;
        assert_eq!(decode_cqe(&b), Err(SlotError::UnknownWcOpcode(11)));
        let mut b = good;
        b[22] = 4;
        assert_eq!(decode_cqe(&b), Err(SlotError::UnknownCqeFlags(4)));
        let mut b = good;
        b[16] = 1;
        assert_eq!(decode_cqe(&b), Err(SlotError::NonZeroField("invalidated")));
        let mut b = good;
        b[23] = 1;
        assert_eq!(decode_cqe(&b), Err(SlotError::NonZeroField("reserved0")));
        let mut b = good;
        b[31] = 1;
        assert_eq!(decode_cqe(&b), Err(SlotError::NonZeroField("reserved1")));
    }
}
