//! Errors of the ring layout, the ring protocol and the slot decoders.

use core::fmt;

/// A ring layout or a shared mapping does not fit, or its header does not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// `entries` is zero, not a power of two, or above [`crate::RingLayout::MAX_ENTRIES`].
    BadEntries(u32),
    /// `slot_size` is zero, not a multiple of 8, or above [`crate::RingLayout::MAX_SLOT_SIZE`].
    BadSlotSize(u32),
    /// The mapping pointer is null or not aligned to [`crate::CACHE_LINE`].
    Misaligned,
    /// The region is smaller than the layout needs.
    TooSmall {
        /// Bytes the layout needs.
        need: usize,
        /// Bytes the region has.
        have: usize,
    },
    /// A sub-region is out of the region's bounds or not cache-line aligned.
    OutOfBounds,
    /// The header's magic number is wrong (not a ring, or not initialised).
    BadMagic(u64),
    /// The header's ABI version is not [`crate::RING_VERSION`].
    BadVersion(u32),
    /// The header describes another kind of ring, or other entries / slot size.
    Mismatch {
        /// Field that differs: `"kind"`, `"entries"` or `"slot_size"`.
        field: &'static str,
        /// The value the caller's layout has.
        expected: u32,
        /// The value found in shared memory.
        found: u32,
    },
    /// The indices found at attach time are inconsistent (`produced - consumed > entries`).
    BadIndices {
        /// Producer index found.
        produced: u64,
        /// Consumer index found.
        consumed: u64,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutError::BadEntries(n) => {
                write!(f, "ring entries {n}: must be a power of two in 1..=2^20")
            }
            LayoutError::BadSlotSize(n) => {
                write!(f, "ring slot_size {n}: must be a multiple of 8 in 8..=4096")
            }
            LayoutError::Misaligned => write!(f, "ring mapping is null or not 64-byte aligned"),
            LayoutError::TooSmall { need, have } => {
                write!(f, "ring mapping has {have} bytes, the layout needs {need}")
            }
            LayoutError::OutOfBounds => write!(f, "sub-region out of bounds or misaligned"),
            LayoutError::BadMagic(m) => write!(f, "ring header magic {m:#x} is wrong"),
            LayoutError::BadVersion(v) => write!(f, "ring ABI version {v} is not supported"),
            LayoutError::Mismatch {
                field,
                expected,
                found,
            } => write!(f, "ring header {field} is {found}, expected {expected}"),
            LayoutError::BadIndices { produced, consumed } => write!(
                f,
                "ring indices inconsistent: produced {produced}, consumed {consumed}"
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// A ring operation could not be done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The ring has no free slot (push).
    Full,
    /// The slot buffer passed has the wrong length.
    WrongSlotSize {
        /// The ring's slot size (or a multiple of it, for bursts).
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// The other side published an index that is impossible
    /// (`produced - consumed > entries`): it is broken or malicious. The ring is left
    /// unchanged; the owner of the ring should tear it down.
    Corrupt {
        /// Producer index seen.
        produced: u64,
        /// Consumer index seen.
        consumed: u64,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RingError::Full => write!(f, "ring full"),
            RingError::WrongSlotSize { expected, got } => {
                write!(f, "slot buffer of {got} bytes, ring needs {expected}")
            }
            RingError::Corrupt { produced, consumed } => write!(
                f,
                "ring corrupt: produced {produced}, consumed {consumed} (peer broken or malicious)"
            ),
        }
    }
}

impl std::error::Error for RingError {}

/// Why a slot copied out of a ring does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// The work request opcode is not one of [`crate::WrOpcode`].
    UnknownOpcode(u8),
    /// More SGEs than [`iwarp_types::MAX_SGE`].
    TooManySge(u8),
    /// Send flags outside `SIGNALED | READ_FENCE | LOCAL_FENCE`.
    UnknownSendFlags(u32),
    /// Access bits outside the defined rights.
    UnknownAccess(u32),
    /// Opcode-specific flag not defined for this opcode.
    UnknownOpFlags(u8),
    /// A reserved field, an unused SGE or a field the opcode does not use is not zero.
    NonZeroField(&'static str),
    /// Completion status not one of [`iwarp_types::WcStatus`].
    UnknownStatus(u8),
    /// Completion opcode not one of [`iwarp_types::WcOpcode`].
    UnknownWcOpcode(u8),
    /// Completion flags outside `HAS_INVALIDATED | SOLICITED`.
    UnknownCqeFlags(u8),
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SlotError::UnknownOpcode(v) => write!(f, "unknown work request opcode {v}"),
            SlotError::TooManySge(n) => write!(f, "{n} SGEs, at most {}", iwarp_types::MAX_SGE),
            SlotError::UnknownSendFlags(v) => write!(f, "unknown send flags {v:#x}"),
            SlotError::UnknownAccess(v) => write!(f, "unknown access bits {v:#x}"),
            SlotError::UnknownOpFlags(v) => write!(f, "op flags {v:#x} not valid for the opcode"),
            SlotError::NonZeroField(name) => write!(f, "field {name} must be zero"),
            SlotError::UnknownStatus(v) => write!(f, "unknown completion status {v}"),
            SlotError::UnknownWcOpcode(v) => write!(f, "unknown completion opcode {v}"),
            SlotError::UnknownCqeFlags(v) => write!(f, "unknown completion flags {v:#x}"),
        }
    }
}

impl std::error::Error for SlotError {}

/// A work request slot that does not decode, with the `wr_id` it carried (always
/// readable), so the core can answer with an error completion for that `wr_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrDecodeError {
    /// The slot's `wr_id` field, as found.
    pub wr_id: u64,
    /// What is wrong.
    pub kind: SlotError,
}

impl fmt::Display for WrDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work request {:#x}: {}", self.wr_id, self.kind)
    }
}

impl std::error::Error for WrDecodeError {}
