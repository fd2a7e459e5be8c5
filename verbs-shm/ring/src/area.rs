//! The ring area: one shared mapping per client (docs/APPS.md, "The ring area") holding
//! the [`ClientPage`], one [`DoorbellBlock`] per dataplane core, one [`CqControl`] line
//! per CQ and the ring heap where the daemon places rings.
//!
//! ```text
//! 0                      ClientPage (4 KiB)
//! DOORBELL_OFFSET        MAX_CORES doorbell blocks of DOORBELL_BLOCK_BYTES
//! CQ_CONTROL_OFFSET      MAX_CQS_PER_CLIENT CQ control lines of CQ_CONTROL_BYTES
//! RING_HEAP_OFFSET ..    rings (RingHeader + slots), 64-byte aligned, placed by RingHeap
//! ```
//!
//! Every shared word is a `u64` accessed atomically through [`Region`]. The geometry is
//! fixed by the constants below: [`AreaView::attach`] checks that the header agrees and
//! never re-reads it, so a client that scribbles on its page cannot move anything.

use core::mem::{offset_of, size_of};
use std::collections::BTreeMap;

use crate::abi::CACHE_LINE;
use crate::region::Region;
use crate::{LayoutError, RingLayout};

/// Magic number at offset 0 of a ring area: `"IWCLIENT"` read as a little-endian `u64`.
pub const AREA_MAGIC: u64 = u64::from_le_bytes(*b"IWCLIENT");
/// ABI version of the ring area layout. Bumped on any change.
pub const AREA_VERSION: u32 = 1;
/// Size of a ring area (virtual; pages materialize on use).
pub const RING_AREA_BYTES: usize = 64 << 20;
/// Size of the [`ClientPage`].
pub const CLIENT_PAGE_BYTES: usize = 4096;
/// Bit words of a doorbell block.
pub const DOORBELL_WORDS: usize = 64;
/// Doorbell bits of a doorbell block (one per client-to-core ring of the core).
pub const DOORBELL_BITS: u32 = (DOORBELL_WORDS * 64) as u32;
/// Bytes of a doorbell block: the summary word on its own cache line, then the bit words.
pub const DOORBELL_BLOCK_BYTES: usize =
    (CACHE_LINE + DOORBELL_WORDS * 8).div_ceil(CACHE_LINE) * CACHE_LINE;
/// Largest number of dataplane cores a ring area serves.
pub const MAX_CORES: u32 = 64;
/// Largest number of CQs of one client.
pub const MAX_CQS_PER_CLIENT: u32 = 4096;
/// Bytes of a CQ control line.
pub const CQ_CONTROL_BYTES: usize = CACHE_LINE;
/// Offset of core 0's doorbell block.
pub const DOORBELL_OFFSET: usize = CLIENT_PAGE_BYTES;
/// Offset of CQ 0's control line.
pub const CQ_CONTROL_OFFSET: usize = DOORBELL_OFFSET + MAX_CORES as usize * DOORBELL_BLOCK_BYTES;
/// Offset of the ring heap (page aligned).
pub const RING_HEAP_OFFSET: usize = (CQ_CONTROL_OFFSET
    + MAX_CQS_PER_CLIENT as usize * CQ_CONTROL_BYTES)
    .div_ceil(CLIENT_PAGE_BYTES)
    * CLIENT_PAGE_BYTES;
/// `daemon_state`: the daemon serves the client.
pub const DAEMON_RUNNING: u64 = 1;
/// `daemon_state`: the daemon shut down; every post and poll answers `DaemonGone`.
pub const DAEMON_GONE: u64 = 2;
/// CQ `arm`: no notification requested.
pub const ARM_OFF: u64 = 0;
/// CQ `arm`: notify on the next completion.
pub const ARM_NEXT: u64 = 1;
/// CQ `arm`: notify on the next solicited or error completion.
pub const ARM_SOLICITED: u64 = 2;

/// Byte offset of the summary word in a doorbell block.
const SUMMARY_OFFSET: usize = 0;
/// Byte offset of bit word 0 in a doorbell block.
const BITS_OFFSET: usize = CACHE_LINE;
/// Byte offsets of the CQ control words.
const ARM_OFFSET: usize = 0;
const EVENTS_OFFSET: usize = 8;
const OVERFLOWS_OFFSET: usize = 16;

const _: () = assert!(DOORBELL_BLOCK_BYTES == 576);
const _: () = assert!(DOORBELL_BITS == 4096);
const _: () = assert!(CQ_CONTROL_OFFSET % CLIENT_PAGE_BYTES == 0);
const _: () = assert!(RING_HEAP_OFFSET == 303_104);
const _: () = assert!(RING_HEAP_OFFSET < RING_AREA_BYTES);

/// The first page of a ring area, written by the daemon before it shares the area.
/// Documentation of the ABI (and the C header); the code accesses it word by word.
/// `version`, `client_id`, `cores` are packed in words 1 and 2 in native-endian order.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct ClientPage {
    /// [`AREA_MAGIC`].
    pub magic: u64,
    /// [`AREA_VERSION`].
    pub version: u32,
    /// The daemon's id of the client.
    pub client_id: u32,
    /// Number of dataplane cores (doorbell blocks in use), 1..=[`MAX_CORES`].
    pub cores: u32,
    /// Zero.
    pub reserved0: u32,
    /// [`DAEMON_RUNNING`] or [`DAEMON_GONE`] (atomic).
    pub daemon_state: u64,
    /// [`DOORBELL_OFFSET`].
    pub doorbell_offset: u64,
    /// [`CQ_CONTROL_OFFSET`].
    pub cq_control_offset: u64,
    /// [`RING_HEAP_OFFSET`].
    pub ring_heap_offset: u64,
    /// Bytes of the area.
    pub area_len: u64,
    /// Zero.
    pub reserved1: [u64; 504],
}

const _: () = assert!(size_of::<ClientPage>() == CLIENT_PAGE_BYTES);
const _: () = assert!(offset_of!(ClientPage, magic) == 0);
const _: () = assert!(offset_of!(ClientPage, version) == 8);
const _: () = assert!(offset_of!(ClientPage, client_id) == 12);
const _: () = assert!(offset_of!(ClientPage, cores) == 16);
const _: () = assert!(offset_of!(ClientPage, daemon_state) == DAEMON_STATE_OFFSET);
const _: () = assert!(offset_of!(ClientPage, doorbell_offset) == 32);
const _: () = assert!(offset_of!(ClientPage, cq_control_offset) == 40);
const _: () = assert!(offset_of!(ClientPage, ring_heap_offset) == 48);
const _: () = assert!(offset_of!(ClientPage, area_len) == 56);

const DAEMON_STATE_OFFSET: usize = 24;

/// Two `u32`s packed in one native-endian word, as `#[repr(C)]` lays them out.
fn pack(lo: u32, hi: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&lo.to_ne_bytes());
    b[4..].copy_from_slice(&hi.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The inverse of [`pack`].
fn unpack(w: u64) -> (u32, u32) {
    let b = w.to_ne_bytes();
    (
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// A checked view of a ring area. Geometry comes from the constants and the values
/// validated once at `init` / `attach`.
#[derive(Clone, Debug)]
pub struct AreaView {
    region: Region,
    client_id: u32,
    cores: u32,
    area_len: usize,
}

impl AreaView {
    /// Daemon side: writes a fresh [`ClientPage`] (state [`DAEMON_RUNNING`]) and zeroes
    /// the doorbell blocks and CQ control lines. `cores` must be in 1..=[`MAX_CORES`];
    /// the region must hold at least the ring heap offset.
    pub fn init(region: Region, client_id: u32, cores: u32) -> Result<AreaView, LayoutError> {
        check_cores(cores)?;
        check_len(&region)?;
        let zero = [0u8; CACHE_LINE];
        let mut off = CACHE_LINE;
        while off < RING_HEAP_OFFSET {
            if !region.store_bytes(off, &zero) {
                return Err(LayoutError::OutOfBounds);
            }
            off += CACHE_LINE;
        }
        let area_len = region.len();
        let words = [
            (8, pack(AREA_VERSION, client_id)),
            (16, pack(cores, 0)),
            (DAEMON_STATE_OFFSET, DAEMON_RUNNING),
            (32, DOORBELL_OFFSET as u64),
            (40, CQ_CONTROL_OFFSET as u64),
            (48, RING_HEAP_OFFSET as u64),
            (56, area_len as u64),
            // The magic last (Release): whoever sees it sees the rest.
            (0, AREA_MAGIC),
        ];
        for (off, w) in words {
            if !region.store_u64(off, w) {
                return Err(LayoutError::OutOfBounds);
            }
        }
        Ok(AreaView {
            region,
            client_id,
            cores,
            area_len,
        })
    }

    /// Client side: checks the [`ClientPage`] in `region` (magic, version, cores, the
    /// three offsets, `area_len` not beyond the region) and returns the view.
    pub fn attach(region: Region) -> Result<AreaView, LayoutError> {
        check_len(&region)?;
        let word = |off: usize| region.load_u64(off).ok_or(LayoutError::OutOfBounds);
        let magic = word(0)?;
        if magic != AREA_MAGIC {
            return Err(LayoutError::BadMagic(magic));
        }
        let (version, client_id) = unpack(word(8)?);
        if version != AREA_VERSION {
            return Err(LayoutError::BadVersion(version));
        }
        let (cores, _) = unpack(word(16)?);
        check_cores(cores)?;
        for (field, off, expected) in [
            ("doorbell_offset", 32, DOORBELL_OFFSET),
            ("cq_control_offset", 40, CQ_CONTROL_OFFSET),
            ("ring_heap_offset", 48, RING_HEAP_OFFSET),
        ] {
            let found = word(off)?;
            if found != expected as u64 {
                return Err(LayoutError::Mismatch {
                    field,
                    expected: expected as u32,
                    found: u32::try_from(found).unwrap_or(u32::MAX),
                });
            }
        }
        let area_len = word(56)?;
        if area_len > region.len() as u64 || area_len < RING_HEAP_OFFSET as u64 {
            return Err(LayoutError::TooSmall {
                need: usize::try_from(area_len).unwrap_or(usize::MAX),
                have: region.len(),
            });
        }
        Ok(AreaView {
            region,
            client_id,
            cores,
            area_len: area_len as usize,
        })
    }

    /// The client id written by the daemon.
    pub fn client_id(&self) -> u32 {
        self.client_id
    }

    /// Number of dataplane cores (doorbell blocks in use).
    pub fn cores(&self) -> u32 {
        self.cores
    }

    /// Bytes of the area (the ring heap ends here).
    pub fn area_len(&self) -> usize {
        self.area_len
    }

    /// The whole area.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// [`DAEMON_RUNNING`], [`DAEMON_GONE`] or whatever a peer wrote (`Acquire`).
    pub fn daemon_state(&self) -> u64 {
        self.region
            .load_u64(DAEMON_STATE_OFFSET)
            .unwrap_or(DAEMON_GONE)
    }

    /// Stores `daemon_state` (`Release`).
    pub fn set_daemon_state(&self, state: u64) {
        self.region.store_u64(DAEMON_STATE_OFFSET, state);
    }

    /// The doorbell block of `core`, `None` if `core >= cores`.
    pub fn doorbell(&self, core: u32) -> Option<DoorbellBlock> {
        if core >= self.cores {
            return None;
        }
        let off = DOORBELL_OFFSET + core as usize * DOORBELL_BLOCK_BYTES;
        let region = self.region.sub(off, DOORBELL_BLOCK_BYTES).ok()?;
        Some(DoorbellBlock { region })
    }

    /// The control line of CQ `index`, `None` if `index >= MAX_CQS_PER_CLIENT`.
    pub fn cq_control(&self, index: u32) -> Option<CqControl> {
        if index >= MAX_CQS_PER_CLIENT {
            return None;
        }
        let off = CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES;
        let region = self.region.sub(off, CQ_CONTROL_BYTES).ok()?;
        Some(CqControl { region })
    }

    /// The sub-region of the ring with `layout` at byte `offset` (a `RingRef` offset):
    /// 64-byte aligned and inside the ring heap, else [`LayoutError::OutOfBounds`].
    pub fn ring_region(&self, offset: u64, layout: RingLayout) -> Result<Region, LayoutError> {
        let offset = usize::try_from(offset).map_err(|_| LayoutError::OutOfBounds)?;
        let len = layout.total_bytes();
        let end = offset.checked_add(len).ok_or(LayoutError::OutOfBounds)?;
        if offset < RING_HEAP_OFFSET || end > self.area_len {
            return Err(LayoutError::OutOfBounds);
        }
        self.region.sub(offset, len)
    }
}

fn check_cores(cores: u32) -> Result<(), LayoutError> {
    if cores == 0 || cores > MAX_CORES {
        return Err(LayoutError::Mismatch {
            field: "cores",
            expected: MAX_CORES,
            found: cores,
        });
    }
    Ok(())
}

fn check_len(region: &Region) -> Result<(), LayoutError> {
    if region.len() < RING_HEAP_OFFSET {
        return Err(LayoutError::TooSmall {
            need: RING_HEAP_OFFSET,
            have: region.len(),
        });
    }
    Ok(())
}

/// A core's doorbell block: a summary word (bit w set: bit word w may have bits) and
/// [`DOORBELL_WORDS`] bit words (bit b: the ring with doorbell bit b was pushed).
#[derive(Clone, Debug)]
pub struct DoorbellBlock {
    region: Region,
}

impl DoorbellBlock {
    /// A doorbell block over `region` (at least [`DOORBELL_BLOCK_BYTES`]); for tests and
    /// for tools. [`AreaView::doorbell`] is the normal way.
    pub fn new(region: Region) -> Result<DoorbellBlock, LayoutError> {
        if region.len() < DOORBELL_BLOCK_BYTES {
            return Err(LayoutError::TooSmall {
                need: DOORBELL_BLOCK_BYTES,
                have: region.len(),
            });
        }
        Ok(DoorbellBlock { region })
    }

    /// Client side, after the push published the producer index: sets bit `bit`, then
    /// its summary bit (both `fetch_or`, `Release`). False if `bit >= DOORBELL_BITS`.
    pub fn ring(&self, bit: u32) -> bool {
        if bit >= DOORBELL_BITS {
            return false;
        }
        let w = (bit / 64) as usize;
        self.region
            .fetch_or_u64(BITS_OFFSET + w * 8, 1 << (bit % 64))
            .and_then(|_| self.region.fetch_or_u64(SUMMARY_OFFSET, 1 << w))
            .is_some()
    }

    /// Service side: takes the summary (`swap(0)`, `Acquire`) and each flagged bit word
    /// (`swap(0)`, `Acquire`) and merges the bits into `out` (not cleared first). Returns
    /// true if any bit was taken. Every push whose doorbell was taken is visible.
    ///
    /// An empty summary is only read, not swapped: the service polls this line all the
    /// time, and a swap (an `xchg`, which takes the line exclusive even when it writes
    /// the same zero) would pull it away from the clients' CPUs on every poll. A bit set
    /// after the read is taken at the next poll, as one set after a swap would be.
    pub fn take(&self, out: &mut DoorbellSet) -> bool {
        if self.region.load_u64(SUMMARY_OFFSET).unwrap_or(0) == 0 {
            return false;
        }
        let mut summary = self.region.swap_u64(SUMMARY_OFFSET, 0).unwrap_or(0);
        let mut any = false;
        while summary != 0 {
            let w = summary.trailing_zeros() as usize;
            summary &= summary - 1;
            let m = self.region.swap_u64(BITS_OFFSET + w * 8, 0).unwrap_or(0);
            out.words[w] |= m;
            any |= m != 0;
        }
        any
    }
}

/// A set of doorbell bits (fixed size, no allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellSet {
    words: [u64; DOORBELL_WORDS],
}

impl Default for DoorbellSet {
    fn default() -> Self {
        DoorbellSet::new()
    }
}

impl DoorbellSet {
    /// The empty set.
    pub const fn new() -> DoorbellSet {
        DoorbellSet {
            words: [0; DOORBELL_WORDS],
        }
    }

    /// Removes every bit.
    pub fn clear(&mut self) {
        self.words = [0; DOORBELL_WORDS];
    }

    /// True if no bit is set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Adds `bit`; false if `bit >= DOORBELL_BITS`.
    pub fn insert(&mut self, bit: u32) -> bool {
        if bit >= DOORBELL_BITS {
            return false;
        }
        self.words[(bit / 64) as usize] |= 1 << (bit % 64);
        true
    }

    /// Removes `bit`; true if it was set.
    pub fn remove(&mut self, bit: u32) -> bool {
        let was = self.contains(bit);
        if was {
            self.words[(bit / 64) as usize] &= !(1 << (bit % 64));
        }
        was
    }

    /// True if `bit` is set.
    pub fn contains(&self, bit: u32) -> bool {
        bit < DOORBELL_BITS && self.words[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    /// The set bits, in increasing order.
    pub fn iter(&self) -> DoorbellIter<'_> {
        DoorbellIter {
            set: self,
            word: 0,
            rest: self.words[0],
        }
    }
}

impl<'a> IntoIterator for &'a DoorbellSet {
    type Item = u32;
    type IntoIter = DoorbellIter<'a>;
    fn into_iter(self) -> DoorbellIter<'a> {
        self.iter()
    }
}

/// Iterator over the bits of a [`DoorbellSet`].
#[derive(Clone, Debug)]
pub struct DoorbellIter<'a> {
    set: &'a DoorbellSet,
    word: usize,
    rest: u64,
}

impl Iterator for DoorbellIter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        loop {
            if self.rest != 0 {
                let b = self.rest.trailing_zeros();
                self.rest &= self.rest - 1;
                return Some(self.word as u32 * 64 + b);
            }
            self.word += 1;
            self.rest = *self.set.words.get(self.word)?;
        }
    }
}

/// A CQ's control line: `arm` (client writes, services clear), `events` (notifications
/// fired), `overflows` (CQEs a service could not push).
#[derive(Clone, Debug)]
pub struct CqControl {
    region: Region,
}

impl CqControl {
    /// A control line over `region` (at least [`CQ_CONTROL_BYTES`]); for tests.
    /// [`AreaView::cq_control`] is the normal way.
    pub fn new(region: Region) -> Result<CqControl, LayoutError> {
        if region.len() < CQ_CONTROL_BYTES {
            return Err(LayoutError::TooSmall {
                need: CQ_CONTROL_BYTES,
                have: region.len(),
            });
        }
        Ok(CqControl { region })
    }

    /// Client: request a notification for the next completion (or only the next solicited
    /// or error one).
    pub fn arm(&self, solicited_only: bool) {
        let v = if solicited_only {
            ARM_SOLICITED
        } else {
            ARM_NEXT
        };
        self.region.store_u64(ARM_OFFSET, v);
    }

    /// Stores [`ARM_OFF`].
    pub fn disarm(&self) {
        self.region.store_u64(ARM_OFFSET, ARM_OFF);
    }

    /// The `arm` word as found (a peer may write anything; only 1 and 2 fire).
    pub fn arm_state(&self) -> u64 {
        self.region.load_u64(ARM_OFFSET).unwrap_or(ARM_OFF)
    }

    /// Service, after pushing a CQE: if armed for it (`ARM_NEXT`, or `ARM_SOLICITED` and
    /// `solicited_or_error`), disarms with a compare-exchange; the one winner bumps
    /// `events` and returns true (it queues the wake-up). Bounded retries.
    pub fn try_fire(&self, solicited_or_error: bool) -> bool {
        let mut cur = self.arm_state();
        for _ in 0..4 {
            let fires = cur == ARM_NEXT || (cur == ARM_SOLICITED && solicited_or_error);
            if !fires {
                return false;
            }
            match self.region.compare_exchange_u64(ARM_OFFSET, cur, ARM_OFF) {
                Some(Ok(_)) => {
                    self.region.fetch_add_u64(EVENTS_OFFSET, 1);
                    return true;
                }
                Some(Err(actual)) => cur = actual,
                None => return false,
            }
        }
        false
    }

    /// Notifications fired so far.
    pub fn events(&self) -> u64 {
        self.region.load_u64(EVENTS_OFFSET).unwrap_or(0)
    }

    /// Counts one CQE that did not fit its sub-ring.
    pub fn add_overflow(&self) {
        self.region.fetch_add_u64(OVERFLOWS_OFFSET, 1);
    }

    /// Overflows so far.
    pub fn overflows(&self) -> u64 {
        self.region.load_u64(OVERFLOWS_OFFSET).unwrap_or(0)
    }
}

/// Daemon-side allocator of the ring heap `[RING_HEAP_OFFSET, area_len)` (private
/// memory, not shared): first fit in 64-byte units, frees coalesce with neighbours, at
/// most [`RingHeap::MAX_BLOCKS`] live blocks.
#[derive(Clone, Debug)]
pub struct RingHeap {
    /// Free extents: offset -> bytes.
    free: BTreeMap<u64, u64>,
    /// Live blocks: offset -> bytes.
    live: BTreeMap<u64, u64>,
}

impl RingHeap {
    /// Largest number of live blocks.
    pub const MAX_BLOCKS: usize = 65536;

    /// The heap of an area of `area_len` bytes (empty if it has no heap).
    pub fn new(area_len: u64) -> RingHeap {
        let start = RING_HEAP_OFFSET as u64;
        let end = area_len / CACHE_LINE as u64 * CACHE_LINE as u64;
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        RingHeap {
            free,
            live: BTreeMap::new(),
        }
    }

    /// A 64-byte aligned block of at least `bytes` (rounded up to 64), or `None` if
    /// `bytes` is 0, nothing fits or [`Self::MAX_BLOCKS`] blocks are live.
    pub fn alloc(&mut self, bytes: u64) -> Option<u64> {
        if bytes == 0 || self.live.len() >= Self::MAX_BLOCKS {
            return None;
        }
        let need = bytes.checked_next_multiple_of(CACHE_LINE as u64)?;
        let (&off, &len) = self.free.iter().find(|(_, &len)| len >= need)?;
        self.free.remove(&off);
        if len > need {
            self.free.insert(off + need, len - need);
        }
        self.live.insert(off, need);
        Some(off)
    }

    /// Frees the block at `offset`; false if no live block starts there.
    pub fn free(&mut self, offset: u64) -> bool {
        let Some(mut len) = self.live.remove(&offset) else {
            return false;
        };
        let mut start = offset;
        if let Some((&prev, &plen)) = self.free.range(..offset).next_back() {
            if prev + plen == offset {
                self.free.remove(&prev);
                start = prev;
                len += plen;
            }
        }
        if let Some(next_len) = self.free.remove(&(start + len)) {
            len += next_len;
        }
        self.free.insert(start, len);
        true
    }

    /// Number of live blocks.
    pub fn live_blocks(&self) -> usize {
        self.live.len()
    }

    /// Free bytes (in all extents).
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// Number of free extents (1 when everything is free and coalesced).
    pub fn free_extents(&self) -> usize {
        self.free.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Consumer, Producer};

    fn area() -> (AreaView, Region) {
        let r = Region::alloc(RING_HEAP_OFFSET + (1 << 20));
        (AreaView::init(r.clone(), 7, 2).unwrap(), r)
    }

    #[test]
    fn init_then_attach_agree() {
        let (daemon, r) = area();
        let client = AreaView::attach(r.clone()).unwrap();
        assert_eq!((client.client_id(), client.cores()), (7, 2));
        assert_eq!(client.area_len(), r.len());
        assert_eq!(client.daemon_state(), DAEMON_RUNNING);
        daemon.set_daemon_state(DAEMON_GONE);
        assert_eq!(client.daemon_state(), DAEMON_GONE);
        assert_eq!(r.load_u64(0), Some(AREA_MAGIC));
        assert!(client.doorbell(1).is_some() && client.doorbell(2).is_none());
        assert!(client.cq_control(MAX_CQS_PER_CLIENT - 1).is_some());
        assert!(client.cq_control(MAX_CQS_PER_CLIENT).is_none());
    }

    #[test]
    fn attach_rejects_bad_headers() {
        let small = Region::alloc(RING_HEAP_OFFSET - 64);
        assert!(matches!(
            AreaView::init(small.clone(), 1, 1),
            Err(LayoutError::TooSmall { .. })
        ));
        assert!(matches!(
            AreaView::attach(small),
            Err(LayoutError::TooSmall { .. })
        ));
        let r = Region::alloc(RING_HEAP_OFFSET);
        assert!(matches!(
            AreaView::init(r.clone(), 1, 0),
            Err(LayoutError::Mismatch { field: "cores", .. })
        ));
        assert!(AreaView::init(r.clone(), 1, MAX_CORES + 1).is_err());
        assert!(matches!(
            AreaView::attach(r.clone()),
            Err(LayoutError::BadMagic(0))
        ));
        let (_, r) = area();
        let mutate = |off: usize, v: u64| {
            let old = r.load_u64(off).unwrap();
            r.store_u64(off, v);
            let e = AreaView::attach(r.clone()).unwrap_err();
            r.store_u64(off, old);
            e
        };
        assert_eq!(mutate(8, pack(2, 7)), LayoutError::BadVersion(2));
        assert!(matches!(
            mutate(16, pack(65, 0)),
            LayoutError::Mismatch { field: "cores", .. }
        ));
        assert!(matches!(
            mutate(32, 0),
            LayoutError::Mismatch {
                field: "doorbell_offset",
                ..
            }
        ));
        assert!(matches!(
            mutate(40, u64::MAX),
            LayoutError::Mismatch {
                field: "cq_control_offset",
                ..
            }
        ));
        assert!(matches!(
            mutate(48, 4096),
            LayoutError::Mismatch {
                field: "ring_heap_offset",
                ..
            }
        ));
        assert!(matches!(mutate(56, u64::MAX), LayoutError::TooSmall { .. }));
        assert!(AreaView::attach(r).is_ok());
    }

    #[test]
    fn ring_regions_are_bounded_to_the_heap() {
        let (a, _) = area();
        let l = RingLayout::send_queue(16).unwrap();
        let off = RING_HEAP_OFFSET as u64;
        let reg = a.ring_region(off, l).unwrap();
        let mut p = Producer::init(reg, l).unwrap();
        let mut c = Consumer::attach(a.ring_region(off, l).unwrap(), l).unwrap();
        p.push(&[1u8; crate::SEND_SLOT_SIZE]).unwrap();
        assert_eq!(c.len(), Ok(1));
        assert!(matches!(
            a.ring_region(off - 64, l),
            Err(LayoutError::OutOfBounds)
        ));
        assert!(a.ring_region(0, l).is_err());
        assert!(a.ring_region(off + 8, l).is_err());
        assert!(a.ring_region(a.area_len() as u64 - 64, l).is_err());
        assert!(a.ring_region(u64::MAX, l).is_err());
        let end = (a.area_len() - l.total_bytes()) as u64 / 64 * 64;
        assert!(a.ring_region(end, l).is_ok());
    }

    #[test]
    fn doorbells_ring_and_take() {
        let (a, _) = area();
        let (d0, d1) = (a.doorbell(0).unwrap(), a.doorbell(1).unwrap());
        assert!(d0.ring(0) && d0.ring(65) && d0.ring(4095) && d0.ring(65));
        assert!(!d0.ring(DOORBELL_BITS));
        let mut set = DoorbellSet::new();
        assert!(!d1.take(&mut set) && set.is_empty());
        assert!(d0.take(&mut set));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 65, 4095]);
        assert!(!d0.take(&mut set), "taken bits are cleared");
        assert!(set.remove(65) && !set.remove(65) && !set.contains(65) && set.contains(0));
        assert!(set.insert(64) && !set.insert(4096) && !set.contains(u32::MAX));
        assert_eq!((&set).into_iter().collect::<Vec<_>>(), vec![0, 64, 4095]);
        set.clear();
        assert_eq!(set.iter().next(), None);
        // A summary bit without bits (a scribbling client) takes nothing.
        a.region().store_u64(DOORBELL_OFFSET, u64::MAX);
        assert!(!d0.take(&mut set) && set.is_empty());
        assert!(DoorbellBlock::new(Region::alloc(512)).is_err());
    }

    #[test]
    fn cq_control_fires_once_per_arm() {
        let (a, _) = area();
        let cq = a.cq_control(3).unwrap();
        assert!(!cq.try_fire(true), "not armed");
        cq.arm(false);
        assert_eq!(cq.arm_state(), ARM_NEXT);
        assert!(cq.try_fire(false));
        assert!(!cq.try_fire(true), "fired once");
        assert_eq!((cq.events(), cq.arm_state()), (1, ARM_OFF));
        cq.arm(true);
        assert!(!cq.try_fire(false), "solicited only");
        assert!(cq.try_fire(true));
        cq.arm(true);
        cq.disarm();
        assert!(!cq.try_fire(true));
        a.region().store_u64(CQ_CONTROL_OFFSET + 3 * 64, 77);
        assert!(!cq.try_fire(true), "garbage arm never fires");
        cq.add_overflow();
        cq.add_overflow();
        assert_eq!((cq.events(), cq.overflows()), (2, 2));
        assert_eq!(a.cq_control(2).unwrap().events(), 0);
        assert!(
            CqControl::new(Region::alloc(0)).is_ok() && CqControl::new(Region::alloc(64)).is_ok()
        );
    }

    #[test]
    fn ring_heap_first_fit_and_coalesce() {
        let len = (RING_HEAP_OFFSET + 64 * 100) as u64;
        let mut h = RingHeap::new(len);
        let base = RING_HEAP_OFFSET as u64;
        assert_eq!(h.alloc(0), None);
        let a = h.alloc(1).unwrap();
        let b = h.alloc(65).unwrap();
        let c = h.alloc(64).unwrap();
        assert_eq!((a, b, c), (base, base + 64, base + 192));
        assert_eq!(h.free_bytes(), 64 * 96);
        assert!(h.free(b) && !h.free(b) && !h.free(base + 8));
        assert_eq!(h.alloc(64), Some(base + 64), "first fit reuses the hole");
        assert_eq!(h.alloc(128), Some(base + 256));
        assert!(h.free(base + 64) && h.free(a) && h.free(c) && h.free(base + 256));
        assert_eq!(
            (h.free_extents(), h.free_bytes(), h.live_blocks()),
            (1, 64 * 100, 0)
        );
        assert_eq!(h.alloc(64 * 101), None);
        assert_eq!(h.alloc(64 * 100), Some(base));
        assert_eq!(h.alloc(1), None);
        assert_eq!(RingHeap::new(100).alloc(64), None);
        assert_eq!(RingHeap::new(u64::MAX).alloc(u64::MAX), None);
    }

    #[test]
    fn ring_heap_is_bounded() {
        let mut h = RingHeap::new((RING_HEAP_OFFSET + 64 * (RingHeap::MAX_BLOCKS + 8)) as u64);
        for _ in 0..RingHeap::MAX_BLOCKS {
            assert!(h.alloc(64).is_some());
        }
        assert_eq!(h.alloc(64), None);
        assert!(h.free(RING_HEAP_OFFSET as u64));
        assert!(h.alloc(64).is_some());
    }

    #[test]
    fn pack_is_repr_c_order() {
        assert_eq!(unpack(pack(AREA_VERSION, 9)), (AREA_VERSION, 9));
        assert_eq!(pack(5, 0).to_ne_bytes()[..4], 5u32.to_ne_bytes());
    }
}
