//! The ring header: the `#[repr(C)]` ABI shared by the client library (Rust or C) and
//! the dataplane, and [`RingLayout`], the geometry of one ring.
//!
//! A ring occupies `HEADER_SIZE + entries * slot_size` bytes of a mapping, starting on a
//! cache line:
//!
//! ```text
//! offset   0  line 0: magic, version, kind, entries, slot_size   (written once, at init)
//! offset  64  line 1: producer_index                              (written by the producer)
//! offset 128  line 2: consumer_index                              (written by the consumer)
//! offset 192  slot 0, slot 1, ... slot entries-1                  (slot_size bytes each)
//! ```
//!
//! Indices are free-running `u64` counters (slot = index mod entries); each lives on its
//! own cache line so the two sides never false-share.

use core::mem::{align_of, offset_of, size_of};

use crate::LayoutError;

/// Cache line size the layout is aligned to.
pub const CACHE_LINE: usize = 64;

/// Magic number at offset 0 of every ring: `"IWSHRING"` read as a little-endian `u64`.
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"IWSHRING");

/// ABI version of the header and of every slot layout. Bumped on any change.
pub const RING_VERSION: u32 = 1;

/// The ring header in shared memory. Field values are native-endian; the indices are
/// accessed atomically (`AtomicU64`) by the ring code, the other fields are written once
/// by the daemon before the mapping is shared.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub struct RingHeader {
    /// [`RING_MAGIC`].
    pub magic: u64,
    /// [`RING_VERSION`].
    pub version: u32,
    /// A [`RingKind`] value.
    pub kind: u32,
    /// Number of slots (a power of two).
    pub entries: u32,
    /// Bytes per slot (a multiple of 8).
    pub slot_size: u32,
    /// Zero.
    pub reserved0: [u64; 5],
    /// Number of slots ever published by the producer (the doorbell).
    pub producer_index: u64,
    /// Zero (reserved for a future wake-up request flag).
    pub reserved1: [u64; 7],
    /// Number of slots ever consumed by the consumer.
    pub consumer_index: u64,
    /// Zero.
    pub reserved2: [u64; 7],
}

/// Size of [`RingHeader`]: the offset of slot 0.
pub const HEADER_SIZE: usize = size_of::<RingHeader>();

const _: () = assert!(HEADER_SIZE == 3 * CACHE_LINE);
const _: () = assert!(align_of::<RingHeader>() == CACHE_LINE);
const _: () = assert!(offset_of!(RingHeader, magic) == 0);
const _: () = assert!(offset_of!(RingHeader, version) == 8);
const _: () = assert!(offset_of!(RingHeader, kind) == 12);
const _: () = assert!(offset_of!(RingHeader, entries) == 16);
const _: () = assert!(offset_of!(RingHeader, slot_size) == 20);
const _: () = assert!(offset_of!(RingHeader, producer_index) == CACHE_LINE);
const _: () = assert!(offset_of!(RingHeader, consumer_index) == 2 * CACHE_LINE);

/// Byte offset of the producer index.
pub(crate) const PRODUCER_INDEX_OFFSET: usize = offset_of!(RingHeader, producer_index);
/// Byte offset of the consumer index.
pub(crate) const CONSUMER_INDEX_OFFSET: usize = offset_of!(RingHeader, consumer_index);

/// What a ring carries; recorded in the header so that an SQ is never attached as a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RingKind {
    /// Untyped slots (tests, future rings).
    Raw = 0,
    /// Send queue: [`crate::SendSlot`]s, client to core.
    Send = 1,
    /// Receive queue: [`crate::RecvSlot`]s, client to core.
    Recv = 2,
    /// Shared receive queue: [`crate::RecvSlot`]s, client to core.
    SharedRecv = 3,
    /// Completion queue: [`crate::CqeSlot`]s, core to client.
    Completion = 4,
}

/// Geometry of one ring: its kind, number of slots and slot size. Each side builds its
/// own from its own knowledge (the daemon from the resource it created, the client from
/// the control reply) and checks the header against it once, at attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingLayout {
    kind: RingKind,
    entries: u32,
    slot_size: u32,
}

impl RingLayout {
    /// Largest number of slots of a ring.
    pub const MAX_ENTRIES: u32 = 1 << 20;
    /// Largest slot size in bytes.
    pub const MAX_SLOT_SIZE: u32 = 4096;

    /// A [`RingKind::Raw`] ring of `entries` slots (a power of two, at most
    /// [`Self::MAX_ENTRIES`]) of `slot_size` bytes (a multiple of 8, at most
    /// [`Self::MAX_SLOT_SIZE`]).
    pub fn new(entries: u32, slot_size: u32) -> Result<RingLayout, LayoutError> {
        RingLayout::with_kind(RingKind::Raw, entries, slot_size)
    }

    /// A ring of the given kind; see [`RingLayout::new`] for the limits.
    pub fn with_kind(
        kind: RingKind,
        entries: u32,
        slot_size: u32,
    ) -> Result<RingLayout, LayoutError> {
        if entries == 0 || !entries.is_power_of_two() || entries > Self::MAX_ENTRIES {
            return Err(LayoutError::BadEntries(entries));
        }
        if slot_size == 0 || slot_size % 8 != 0 || slot_size > Self::MAX_SLOT_SIZE {
            return Err(LayoutError::BadSlotSize(slot_size));
        }
        Ok(RingLayout {
            kind,
            entries,
            slot_size,
        })
    }

    /// A send queue of `entries` [`crate::SendSlot`]s.
    pub fn send_queue(entries: u32) -> Result<RingLayout, LayoutError> {
        RingLayout::with_kind(RingKind::Send, entries, crate::SEND_SLOT_SIZE as u32)
    }

    /// A receive queue of `entries` [`crate::RecvSlot`]s.
    pub fn recv_queue(entries: u32) -> Result<RingLayout, LayoutError> {
        RingLayout::with_kind(RingKind::Recv, entries, crate::RECV_SLOT_SIZE as u32)
    }

    /// A shared receive queue of `entries` [`crate::RecvSlot`]s.
    pub fn shared_recv_queue(entries: u32) -> Result<RingLayout, LayoutError> {
        RingLayout::with_kind(RingKind::SharedRecv, entries, crate::RECV_SLOT_SIZE as u32)
    }

    /// A completion queue of `entries` [`crate::CqeSlot`]s.
    pub fn completion_queue(entries: u32) -> Result<RingLayout, LayoutError> {
        RingLayout::with_kind(RingKind::Completion, entries, crate::CQE_SLOT_SIZE as u32)
    }

    /// The kind recorded in the header.
    pub fn kind(&self) -> RingKind {
        self.kind
    }

    /// Number of slots.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Bytes per slot.
    pub fn slot_size(&self) -> usize {
        self.slot_size as usize
    }

    /// Total bytes of the ring (header and slots), a multiple of [`CACHE_LINE`] so that
    /// rings can be packed one after another in a mapping.
    pub fn total_bytes(&self) -> usize {
        let raw = HEADER_SIZE + self.entries as usize * self.slot_size as usize;
        raw.div_ceil(CACHE_LINE) * CACHE_LINE
    }

    /// Byte offset of slot `pos` (`pos < entries`).
    pub(crate) fn slot_offset(&self, pos: u64) -> usize {
        HEADER_SIZE + pos as usize * self.slot_size as usize
    }

    /// The header words of a freshly initialised ring (indices zero), as stored.
    pub(crate) fn header_line(&self) -> [u8; CACHE_LINE] {
        let mut line = [0u8; CACHE_LINE];
        line[0..8].copy_from_slice(&RING_MAGIC.to_ne_bytes());
        line[8..12].copy_from_slice(&RING_VERSION.to_ne_bytes());
        line[12..16].copy_from_slice(&(self.kind as u32).to_ne_bytes());
        line[16..20].copy_from_slice(&self.entries.to_ne_bytes());
        line[20..24].copy_from_slice(&self.slot_size.to_ne_bytes());
        line
    }

    /// Checks a header line read from shared memory against this layout.
    pub(crate) fn check_header_line(&self, line: &[u8; CACHE_LINE]) -> Result<(), LayoutError> {
        let u32_at =
            |o: usize| u32::from_ne_bytes([line[o], line[o + 1], line[o + 2], line[o + 3]]);
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&line[0..8]);
        let magic = u64::from_ne_bytes(magic);
        if magic != RING_MAGIC {
            return Err(LayoutError::BadMagic(magic));
        }
        let version = u32_at(8);
        if version != RING_VERSION {
            return Err(LayoutError::BadVersion(version));
        }
        for (field, off, expected) in [
            ("kind", 12, self.kind as u32),
            ("entries", 16, self.entries),
            ("slot_size", 20, self.slot_size),
        ] {
            let found = u32_at(off);
            if found != expected {
                return Err(LayoutError::Mismatch {
                    field,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_limits() {
        assert_eq!(RingLayout::new(0, 8), Err(LayoutError::BadEntries(0)));
        assert_eq!(RingLayout::new(3, 8), Err(LayoutError::BadEntries(3)));
        assert_eq!(
            RingLayout::new(1 << 21, 8),
            Err(LayoutError::BadEntries(1 << 21))
        );
        assert_eq!(RingLayout::new(4, 0), Err(LayoutError::BadSlotSize(0)));
        assert_eq!(RingLayout::new(4, 12), Err(LayoutError::BadSlotSize(12)));
        assert_eq!(
            RingLayout::new(4, 4104),
            Err(LayoutError::BadSlotSize(4104))
        );
        let l = RingLayout::new(1 << 20, 4096).unwrap();
        assert_eq!(l.total_bytes(), HEADER_SIZE + (1 << 32));
        let l = RingLayout::new(1, 8).unwrap();
        assert_eq!(l.total_bytes(), 4 * CACHE_LINE);
        assert_eq!(l.total_bytes() % CACHE_LINE, 0);
    }

    #[test]
    fn typed_layouts() {
        let sq = RingLayout::send_queue(64).unwrap();
        assert_eq!(sq.kind(), RingKind::Send);
        assert_eq!(sq.slot_size(), crate::SEND_SLOT_SIZE);
        assert_eq!(sq.total_bytes(), HEADER_SIZE + 64 * crate::SEND_SLOT_SIZE);
        assert_eq!(RingLayout::recv_queue(8).unwrap().kind(), RingKind::Recv);
        assert_eq!(
            RingLayout::shared_recv_queue(8).unwrap().slot_size(),
            crate::RECV_SLOT_SIZE
        );
        assert_eq!(
            RingLayout::completion_queue(8).unwrap().slot_size(),
            crate::CQE_SLOT_SIZE
        );
    }

    #[test]
    fn header_line_matches_repr_c() {
        let l = RingLayout::with_kind(RingKind::Completion, 16, 32).unwrap();
        let line = l.header_line();
        let h = RingHeader {
            magic: RING_MAGIC,
            version: RING_VERSION,
            kind: RingKind::Completion as u32,
            entries: 16,
            slot_size: 32,
            ..RingHeader::default()
        };
        assert_eq!(&line[0..8], &h.magic.to_ne_bytes());
        assert_eq!(&line[8..12], &h.version.to_ne_bytes());
        assert_eq!(&line[12..16], &h.kind.to_ne_bytes());
        assert_eq!(&line[16..20], &h.entries.to_ne_bytes());
        assert_eq!(&line[20..24], &h.slot_size.to_ne_bytes());
        assert_eq!(l.check_header_line(&line), Ok(()));
    }

    #[test]
    fn header_check_rejects_each_field() {
        let l = RingLayout::with_kind(RingKind::Send, 16, 192).unwrap();
        let good = l.header_line();
        let mut bad = good;
        bad[0] ^= 1;
        assert!(matches!(
            l.check_header_line(&bad),
            Err(LayoutError::BadMagic(_))
        ));
        let mut bad = good;
        bad[8..12].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(l.check_header_line(&bad), Err(LayoutError::BadVersion(2)));
        let cq = RingLayout::with_kind(RingKind::Completion, 16, 192).unwrap();
        assert_eq!(
            cq.check_header_line(&good),
            Err(LayoutError::Mismatch {
                field: "kind",
                expected: 4,
                found: 1
            })
        );
        let other = RingLayout::with_kind(RingKind::Send, 32, 192).unwrap();
        assert!(matches!(
            other.check_header_line(&good),
            Err(LayoutError::Mismatch {
                field: "entries",
                ..
            })
        ));
        let other = RingLayout::with_kind(RingKind::Send, 16, 128).unwrap();
        assert!(matches!(
            other.check_header_line(&good),
            Err(LayoutError::Mismatch {
                field: "slot_size",
                ..
            })
        ));
    }
}
