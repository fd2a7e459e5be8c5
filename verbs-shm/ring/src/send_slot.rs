//! The send work request slot of SQ rings: every [`SendOp`] in one fixed layout.
//!
//! Field use per opcode (every field an opcode does not use must be zero):
//!
//! | opcode              | `stag`   | `aux_stag` | `remote_to`     | `length` | `va` | `access` | `op_flags`          |
//! |---------------------|----------|------------|-----------------|----------|------|----------|---------------------|
//! | Send, SendSe        |          |            |                 |          |      |          |                     |
//! | SendInv, SendSeInv  | inv_stag |            |                 |          |      |          |                     |
//! | Write               | rkey     |            | remote_to       |          |      |          |                     |
//! | Read                | rkey     |            | remote_to       |          |      |          | `INVALIDATE_LOCAL`  |
//! | Bind                | mw       | mr         | to              | len      |      | access   | `ZERO_BASED`        |
//! | FastReg             | stag     | region     | region_offset   | len      | va   | access   | `ZERO_BASED`        |
//! | LocalInv            | stag     |            |                 |          |      |          |                     |

use core::mem::{offset_of, size_of};

use iwarp_types::{Access, RegionId, SendFlags, SendOp, SendWr, Stag, MAX_SGE};

use crate::sgl::{
    check_sgl, check_zero, encode_sgl, get_u32, get_u64, put_u32, put_u64, put_u8, sgl_into,
    SgeSlot,
};
use crate::{SlotError, WrDecodeError};

/// The opcode of a [`SendSlot`] (ABI values, never reassigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WrOpcode {
    /// [`SendOp::Send`].
    Send = 0,
    /// [`SendOp::SendSe`].
    SendSe = 1,
    /// [`SendOp::SendInv`].
    SendInv = 2,
    /// [`SendOp::SendSeInv`].
    SendSeInv = 3,
    /// [`SendOp::Write`].
    Write = 4,
    /// [`SendOp::Read`].
    Read = 5,
    /// [`SendOp::Bind`].
    Bind = 6,
    /// [`SendOp::FastReg`].
    FastReg = 7,
    /// [`SendOp::LocalInv`].
    LocalInv = 8,
}

impl WrOpcode {
    /// Every opcode.
    pub const ALL: [WrOpcode; 9] = [
        WrOpcode::Send,
        WrOpcode::SendSe,
        WrOpcode::SendInv,
        WrOpcode::SendSeInv,
        WrOpcode::Write,
        WrOpcode::Read,
        WrOpcode::Bind,
        WrOpcode::FastReg,
        WrOpcode::LocalInv,
    ];

    /// From the ABI value.
    pub fn from_u8(v: u8) -> Option<WrOpcode> {
        WrOpcode::ALL.get(v as usize).copied()
    }
}

/// A [`SendWr`] in an SQ ring (`#[repr(C)]`, native-endian). See the module table for
/// which fields each opcode uses; unused fields, reserved fields and SGEs past
/// `num_sge` are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SendSlot {
    /// The consumer's identifier.
    pub wr_id: u64,
    /// A [`WrOpcode`] value.
    pub opcode: u8,
    /// Number of valid entries in `sge` (at most [`MAX_SGE`]).
    pub num_sge: u8,
    /// [`SendSlot::INVALIDATE_LOCAL`] (Read), [`SendSlot::ZERO_BASED`] (Bind, FastReg).
    pub op_flags: u8,
    /// Zero.
    pub reserved0: u8,
    /// [`SendFlags`] bits.
    pub send_flags: u32,
    /// The opcode's STag: `inv_stag`, `rkey`, `mw` or the STag to register / invalidate.
    pub stag: u32,
    /// Bind: the region STag `mr`; FastReg: the [`RegionId`] of the caller memory.
    pub aux_stag: u32,
    /// Write / Read: `remote_to`; Bind: `to`; FastReg: `region_offset`.
    pub remote_to: u64,
    /// Bind / FastReg: `len`.
    pub length: u64,
    /// FastReg: `va`.
    pub va: u64,
    /// Bind / FastReg: [`Access`] bits.
    pub access: u32,
    /// Zero.
    pub reserved1: u32,
    /// Scatter/gather list.
    pub sge: [SgeSlot; MAX_SGE],
    /// Zero (room for growth within the version).
    pub reserved2: [u64; 5],
}

impl SendSlot {
    /// `op_flags` bit: RDMA Read with Invalidate Local STag.
    pub const INVALIDATE_LOCAL: u8 = 1 << 0;
    /// `op_flags` bit: the window / region is zero-based.
    pub const ZERO_BASED: u8 = 1 << 1;
}

/// Size of [`SendSlot`]: the slot size of SQ rings (three cache lines).
pub const SEND_SLOT_SIZE: usize = size_of::<SendSlot>();

const _: () = assert!(SEND_SLOT_SIZE == 192);
const _: () = assert!(offset_of!(SendSlot, wr_id) == 0);
const _: () = assert!(offset_of!(SendSlot, opcode) == 8);
const _: () = assert!(offset_of!(SendSlot, num_sge) == 9);
const _: () = assert!(offset_of!(SendSlot, op_flags) == 10);
const _: () = assert!(offset_of!(SendSlot, reserved0) == 11);
const _: () = assert!(offset_of!(SendSlot, send_flags) == 12);
const _: () = assert!(offset_of!(SendSlot, stag) == 16);
const _: () = assert!(offset_of!(SendSlot, aux_stag) == 20);
const _: () = assert!(offset_of!(SendSlot, remote_to) == 24);
const _: () = assert!(offset_of!(SendSlot, length) == 32);
const _: () = assert!(offset_of!(SendSlot, va) == 40);
const _: () = assert!(offset_of!(SendSlot, access) == 48);
const _: () = assert!(offset_of!(SendSlot, reserved1) == 52);
const _: () = assert!(offset_of!(SendSlot, sge) == 56);
const _: () = assert!(offset_of!(SendSlot, reserved2) == 152);

const OFF_STAG: usize = offset_of!(SendSlot, stag);
const OFF_AUX: usize = offset_of!(SendSlot, aux_stag);
const OFF_TO: usize = offset_of!(SendSlot, remote_to);
const OFF_LEN: usize = offset_of!(SendSlot, length);
const OFF_VA: usize = offset_of!(SendSlot, va);
const OFF_ACCESS: usize = offset_of!(SendSlot, access);

/// Every defined [`SendFlags`] bit.
const SEND_FLAGS_ALL: u32 =
    SendFlags::SIGNALED.0 | SendFlags::READ_FENCE.0 | SendFlags::LOCAL_FENCE.0;
/// Every defined [`Access`] bit.
const ACCESS_ALL: u32 = Access::LOCAL_READ.0
    | Access::LOCAL_WRITE.0
    | Access::REMOTE_READ.0
    | Access::REMOTE_WRITE.0
    | Access::MW_BIND.0;

/// Encodes a send work request into slot bytes.
pub fn encode_send_wr(wr: &SendWr) -> [u8; SEND_SLOT_SIZE] {
    let mut b = [0u8; SEND_SLOT_SIZE];
    put_u64(&mut b, offset_of!(SendSlot, wr_id), wr.wr_id);
    put_u8(&mut b, offset_of!(SendSlot, num_sge), wr.sgl.len() as u8);
    put_u32(&mut b, offset_of!(SendSlot, send_flags), wr.flags.0);
    encode_sgl(&mut b, offset_of!(SendSlot, sge), &wr.sgl);
    let zb = |z: bool| if z { SendSlot::ZERO_BASED } else { 0 };
    let (opcode, op_flags) = match wr.op {
        SendOp::Send => (WrOpcode::Send, 0),
        SendOp::SendSe => (WrOpcode::SendSe, 0),
        SendOp::SendInv { inv_stag } => {
            put_u32(&mut b, OFF_STAG, inv_stag.0);
            (WrOpcode::SendInv, 0)
        }
        SendOp::SendSeInv { inv_stag } => {
            put_u32(&mut b, OFF_STAG, inv_stag.0);
            (WrOpcode::SendSeInv, 0)
        }
        SendOp::Write { remote_to, rkey } => {
            put_u32(&mut b, OFF_STAG, rkey.0);
            put_u64(&mut b, OFF_TO, remote_to);
            (WrOpcode::Write, 0)
        }
        SendOp::Read {
            remote_to,
            rkey,
            invalidate_local,
        } => {
            put_u32(&mut b, OFF_STAG, rkey.0);
            put_u64(&mut b, OFF_TO, remote_to);
            let f = if invalidate_local {
                SendSlot::INVALIDATE_LOCAL
            } else {
                0
            };
            (WrOpcode::Read, f)
        }
        SendOp::Bind {
            mw,
            mr,
            to,
            len,
            access,
            zero_based,
        } => {
            put_u32(&mut b, OFF_STAG, mw.0);
            put_u32(&mut b, OFF_AUX, mr.0);
            put_u64(&mut b, OFF_TO, to);
            put_u64(&mut b, OFF_LEN, len);
            put_u32(&mut b, OFF_ACCESS, access.0);
            (WrOpcode::Bind, zb(zero_based))
        }
        SendOp::FastReg {
            stag,
            region,
            region_offset,
            len,
            va,
            access,
            zero_based,
        } => {
            put_u32(&mut b, OFF_STAG, stag.0);
            put_u32(&mut b, OFF_AUX, region.0);
            put_u64(&mut b, OFF_TO, region_offset);
            put_u64(&mut b, OFF_LEN, len);
            put_u64(&mut b, OFF_VA, va);
            put_u32(&mut b, OFF_ACCESS, access.0);
            (WrOpcode::FastReg, zb(zero_based))
        }
        SendOp::LocalInv { stag } => {
            put_u32(&mut b, OFF_STAG, stag.0);
            (WrOpcode::LocalInv, 0)
        }
    };
    put_u8(&mut b, offset_of!(SendSlot, opcode), opcode as u8);
    put_u8(&mut b, offset_of!(SendSlot, op_flags), op_flags);
    b
}

/// Decodes slot bytes copied out of an SQ ring, validating every field: a known
/// opcode, at most [`MAX_SGE`] SGEs, only defined flag and access bits, and zero in
/// every reserved or unused field. The error carries the slot's `wr_id`.
pub fn decode_send_wr(b: &[u8; SEND_SLOT_SIZE]) -> Result<SendWr, WrDecodeError> {
    let mut wr = SendWr::EMPTY;
    decode_send_wr_into(b, &mut wr)?;
    Ok(wr)
}

/// [`decode_send_wr`] into `wr`, where the WR will stay (the daemon decodes straight
/// into the engine's WQE: decoded on the stack and copied, the copy's wide loads waited
/// on the decoder's narrow stores). On an error `wr` holds part of the slot: use it only
/// after `Ok`.
#[inline(always)]
pub fn decode_send_wr_into(b: &[u8; SEND_SLOT_SIZE], wr: &mut SendWr) -> Result<(), WrDecodeError> {
    let wr_id = get_u64(b, offset_of!(SendSlot, wr_id));
    decode_fields(b, wr_id, wr).map_err(|kind| WrDecodeError { wr_id, kind })
}

/// Which optional fields an opcode uses.
struct Uses {
    stag: bool,
    aux: bool,
    to: bool,
    len: bool,
    va: bool,
    access: bool,
    op_flags: u8,
}

impl WrOpcode {
    fn uses(self) -> Uses {
        let none = Uses {
            stag: false,
            aux: false,
            to: false,
            len: false,
            va: false,
            access: false,
            op_flags: 0,
        };
        match self {
            WrOpcode::Send | WrOpcode::SendSe => none,
            WrOpcode::SendInv | WrOpcode::SendSeInv | WrOpcode::LocalInv => {
                Uses { stag: true, ..none }
            }
            WrOpcode::Write => Uses {
                stag: true,
                to: true,
                ..none
            },
            WrOpcode::Read => Uses {
                stag: true,
                to: true,
                op_flags: SendSlot::INVALIDATE_LOCAL,
                ..none
            },
            WrOpcode::Bind => Uses {
                stag: true,
                aux: true,
                to: true,
                len: true,
                access: true,
                op_flags: SendSlot::ZERO_BASED,
                ..none
            },
            WrOpcode::FastReg => Uses {
                stag: true,
                aux: true,
                to: true,
                len: true,
                va: true,
                access: true,
                op_flags: SendSlot::ZERO_BASED,
            },
        }
    }
}

#[inline(always)]
fn decode_fields(b: &[u8; SEND_SLOT_SIZE], wr_id: u64, wr: &mut SendWr) -> Result<(), SlotError> {
    let raw_opcode = b[offset_of!(SendSlot, opcode)];
    let opcode = WrOpcode::from_u8(raw_opcode).ok_or(SlotError::UnknownOpcode(raw_opcode))?;
    let uses = opcode.uses();
    check_zero(
        &b[offset_of!(SendSlot, reserved0)..offset_of!(SendSlot, send_flags)],
        "reserved0",
    )?;
    check_zero(
        &b[offset_of!(SendSlot, reserved1)..offset_of!(SendSlot, sge)],
        "reserved1",
    )?;
    check_zero(&b[offset_of!(SendSlot, reserved2)..], "reserved2")?;
    let op_flags = b[offset_of!(SendSlot, op_flags)];
    if op_flags & !uses.op_flags != 0 {
        return Err(SlotError::UnknownOpFlags(op_flags));
    }
    let flags = get_u32(b, offset_of!(SendSlot, send_flags));
    if flags & !SEND_FLAGS_ALL != 0 {
        return Err(SlotError::UnknownSendFlags(flags));
    }
    let num_sge = check_sgl(
        b,
        offset_of!(SendSlot, sge),
        b[offset_of!(SendSlot, num_sge)],
    )?;
    let field = |used: bool, off: usize, len: usize, name: &'static str| {
        if !used {
            check_zero(&b[off..off + len], name)?;
        }
        Ok::<(), SlotError>(())
    };
    field(uses.stag, OFF_STAG, 4, "stag")?;
    field(uses.aux, OFF_AUX, 4, "aux_stag")?;
    field(uses.to, OFF_TO, 8, "remote_to")?;
    field(uses.len, OFF_LEN, 8, "length")?;
    field(uses.va, OFF_VA, 8, "va")?;
    field(uses.access, OFF_ACCESS, 4, "access")?;
    let access = get_u32(b, OFF_ACCESS);
    if access & !ACCESS_ALL != 0 {
        return Err(SlotError::UnknownAccess(access));
    }
    let stag = Stag(get_u32(b, OFF_STAG));
    let aux = get_u32(b, OFF_AUX);
    let to = get_u64(b, OFF_TO);
    let len = get_u64(b, OFF_LEN);
    let zero_based = op_flags & SendSlot::ZERO_BASED != 0;
    let op = match opcode {
        WrOpcode::Send => SendOp::Send,
        WrOpcode::SendSe => SendOp::SendSe,
        WrOpcode::SendInv => SendOp::SendInv { inv_stag: stag },
        WrOpcode::SendSeInv => SendOp::SendSeInv { inv_stag: stag },
        WrOpcode::Write => SendOp::Write {
            remote_to: to,
            rkey: stag,
        },
        WrOpcode::Read => SendOp::Read {
            remote_to: to,
            rkey: stag,
            invalidate_local: op_flags & SendSlot::INVALIDATE_LOCAL != 0,
        },
        WrOpcode::Bind => SendOp::Bind {
            mw: stag,
            mr: Stag(aux),
            to,
            len,
            access: Access(access),
            zero_based,
        },
        WrOpcode::FastReg => SendOp::FastReg {
            stag,
            region: RegionId(aux),
            region_offset: to,
            len,
            va: get_u64(b, OFF_VA),
            access: Access(access),
            zero_based,
        },
        WrOpcode::LocalInv => SendOp::LocalInv { stag },
    };
    wr.wr_id = wr_id;
    wr.op = op;
    wr.flags = SendFlags(flags);
    sgl_into(b, offset_of!(SendSlot, sge), num_sge, &mut wr.sgl);
    Ok(())
}

#[cfg(test)]
mod tests;
