//! The single-producer / single-consumer index protocol.
//!
//! The producer copies a slot into shared memory (relaxed word stores), then publishes
//! the new producer index with a `Release` store: that store is the doorbell the
//! consumer polls with an `Acquire` load, so the slot words happen-before the consumer's
//! copy. Symmetrically the consumer copies slots out, then publishes the consumer index
//! with `Release`; the producer reads it with `Acquire` before overwriting a slot, so the
//! consumer's copy happens-before the overwrite.
//!
//! Each side keeps its own index in private memory and never reads it back from the
//! shared header (the other side could have changed it). The other side's index is
//! trusted only if `0 <= produced - consumed <= entries` (wrapping `u64` arithmetic);
//! otherwise the operation returns [`RingError::Corrupt`] and changes nothing.

use crate::abi::{RingLayout, CACHE_LINE, CONSUMER_INDEX_OFFSET, PRODUCER_INDEX_OFFSET};
use crate::region::{Ordering, Region};
use crate::{LayoutError, RingError};

/// Checks `region` against `layout` and reads both indices.
fn attach(region: &Region, layout: &RingLayout) -> Result<(u64, u64), LayoutError> {
    let need = layout.total_bytes();
    if region.len() < need {
        return Err(LayoutError::TooSmall {
            need,
            have: region.len(),
        });
    }
    let mut line = [0u8; CACHE_LINE];
    if !region.load_bytes(0, &mut line) {
        return Err(LayoutError::TooSmall {
            need,
            have: region.len(),
        });
    }
    layout.check_header_line(&line)?;
    let produced = load_index(region, PRODUCER_INDEX_OFFSET);
    let consumed = load_index(region, CONSUMER_INDEX_OFFSET);
    if produced.wrapping_sub(consumed) > layout.entries() as u64 {
        return Err(LayoutError::BadIndices { produced, consumed });
    }
    Ok((produced, consumed))
}

/// `Acquire` load of an index word (inside the header, checked by `attach`).
fn load_index(region: &Region, offset: usize) -> u64 {
    region.word(offset).map_or(0, |w| w.load(Ordering::Acquire))
}

/// `Release` store of an index word (inside the header, checked by `attach`).
fn store_index(region: &Region, offset: usize, value: u64) {
    if let Some(w) = region.word(offset) {
        w.store(value, Ordering::Release);
    }
}

/// Writes a fresh header (magic, version, geometry, both indices zero) at the start of
/// `region`. Done once by the daemon, before the mapping is shared with the client.
pub(crate) fn init(region: &Region, layout: &RingLayout) -> Result<(), LayoutError> {
    let need = layout.total_bytes();
    if region.len() < need {
        return Err(LayoutError::TooSmall {
            need,
            have: region.len(),
        });
    }
    let zero = [0u8; CACHE_LINE];
    // Indices and reserved lines first; the header line (with the magic) last.
    let ok = region.store_bytes(CACHE_LINE, &zero)
        && region.store_bytes(2 * CACHE_LINE, &zero)
        && region.store_bytes(0, &layout.header_line());
    if !ok {
        return Err(LayoutError::TooSmall {
            need,
            have: region.len(),
        });
    }
    // Publish the initialisation to whoever attaches with an Acquire load of an index.
    store_index(region, PRODUCER_INDEX_OFFSET, 0);
    store_index(region, CONSUMER_INDEX_OFFSET, 0);
    Ok(())
}

/// The producing end of a ring: the client for SQ / RQ / SRQ, the core for a CQ.
#[derive(Debug)]
pub struct Producer {
    region: Region,
    layout: RingLayout,
    /// Slots ever published (private copy; the shared one is write-only for us).
    produced: u64,
    /// Last consumer index read and validated.
    consumed: u64,
}

impl Producer {
    /// Initialises a ring in `region` (see [`Producer::attach`] for the other side) and
    /// returns its producer. For the side that creates the ring.
    pub fn init(region: Region, layout: RingLayout) -> Result<Producer, LayoutError> {
        init(&region, &layout)?;
        Producer::attach(region, layout)
    }

    /// The producer of the ring already initialised in `region`; the header is checked
    /// once against `layout` (magic, version, kind, entries, slot size, indices).
    pub fn attach(region: Region, layout: RingLayout) -> Result<Producer, LayoutError> {
        let (produced, consumed) = attach(&region, &layout)?;
        Ok(Producer {
            region,
            layout,
            produced,
            consumed,
        })
    }

    /// The ring's layout.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// Re-reads the consumer index and returns the number of free slots.
    fn refresh(&mut self) -> Result<u64, RingError> {
        let consumed = load_index(&self.region, CONSUMER_INDEX_OFFSET);
        let used = self.produced.wrapping_sub(consumed);
        if used > self.layout.entries() as u64 {
            return Err(RingError::Corrupt {
                produced: self.produced,
                consumed,
            });
        }
        self.consumed = consumed;
        Ok(self.layout.entries() as u64 - used)
    }

    /// Free slots according to the last consumer index read, refreshed if that says
    /// fewer than `want`.
    fn free_for(&mut self, want: u64) -> Result<u64, RingError> {
        // `produced - consumed <= entries` holds: both were validated together.
        let free = self.layout.entries() as u64 - self.produced.wrapping_sub(self.consumed);
        if free >= want {
            return Ok(free);
        }
        self.refresh()
    }

    /// Copies one slot of bytes into the ring and rings the doorbell.
    /// `slot.len()` must be the slot size.
    pub fn push(&mut self, slot: &[u8]) -> Result<(), RingError> {
        self.push_keeping(slot, 0)
    }

    /// [`Producer::push`], but [`RingError::Full`] unless `keep` slots stay free after
    /// it: room the producer keeps for a slot of its own (a CQ ring keeps one for the
    /// marker that ends it at a resize).
    pub fn push_keeping(&mut self, slot: &[u8], keep: u32) -> Result<(), RingError> {
        let size = self.layout.slot_size();
        if slot.len() != size {
            return Err(RingError::WrongSlotSize {
                expected: size,
                got: slot.len(),
            });
        }
        let need = u64::from(keep) + 1;
        if self.free_for(need)? < need {
            return Err(RingError::Full);
        }
        self.write_slot(self.produced, slot);
        self.produced = self.produced.wrapping_add(1);
        store_index(&self.region, PRODUCER_INDEX_OFFSET, self.produced);
        Ok(())
    }

    /// Copies as many of `slots` (concatenated slots, a multiple of the slot size) as
    /// fit and rings the doorbell once. Returns how many were pushed (0 if full).
    pub fn push_burst(&mut self, slots: &[u8]) -> Result<usize, RingError> {
        let size = self.layout.slot_size();
        if slots.len() % size != 0 {
            return Err(RingError::WrongSlotSize {
                expected: size,
                got: slots.len(),
            });
        }
        let want = (slots.len() / size) as u64;
        if want == 0 {
            return Ok(0);
        }
        let n = self.free_for(want)?.min(want);
        for (i, slot) in slots.chunks_exact(size).take(n as usize).enumerate() {
            self.write_slot(self.produced.wrapping_add(i as u64), slot);
        }
        if n > 0 {
            self.produced = self.produced.wrapping_add(n);
            store_index(&self.region, PRODUCER_INDEX_OFFSET, self.produced);
        }
        Ok(n as usize)
    }

    /// Slots published and not yet consumed (re-reads the consumer index).
    pub fn len(&mut self) -> Result<u32, RingError> {
        let free = self.refresh()?;
        Ok(self.layout.entries() - free as u32)
    }

    /// True if every published slot was consumed (re-reads the consumer index).
    pub fn is_empty(&mut self) -> Result<bool, RingError> {
        Ok(self.len()? == 0)
    }

    /// Free slots (re-reads the consumer index).
    pub fn free(&mut self) -> Result<u32, RingError> {
        Ok(self.refresh()? as u32)
    }

    fn write_slot(&self, index: u64, slot: &[u8]) {
        let pos = index & (self.layout.entries() as u64 - 1);
        // In bounds: `attach` checked the region holds every slot.
        let stored = self.region.store_bytes(self.layout.slot_offset(pos), slot);
        debug_assert!(stored, "slot inside the checked region");
    }
}

/// The consuming end of a ring: the core for SQ / RQ / SRQ, the client for a CQ.
#[derive(Debug)]
pub struct Consumer {
    region: Region,
    layout: RingLayout,
    /// Slots ever consumed (private copy; the shared one is write-only for us).
    consumed: u64,
    /// Last producer index read and validated.
    produced: u64,
}

impl Consumer {
    /// Initialises a ring in `region` and returns its consumer. For the side that
    /// creates the ring.
    pub fn init(region: Region, layout: RingLayout) -> Result<Consumer, LayoutError> {
        init(&region, &layout)?;
        Consumer::attach(region, layout)
    }

    /// The consumer of the ring already initialised in `region`; the header is checked
    /// once against `layout` (magic, version, kind, entries, slot size, indices).
    pub fn attach(region: Region, layout: RingLayout) -> Result<Consumer, LayoutError> {
        let (produced, consumed) = attach(&region, &layout)?;
        Ok(Consumer {
            region,
            layout,
            consumed,
            produced,
        })
    }

    /// The ring's layout.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// Polls the producer index (the doorbell) and returns the slots available.
    fn refresh(&mut self) -> Result<u64, RingError> {
        let produced = load_index(&self.region, PRODUCER_INDEX_OFFSET);
        let avail = produced.wrapping_sub(self.consumed);
        if avail > self.layout.entries() as u64 {
            return Err(RingError::Corrupt {
                produced,
                consumed: self.consumed,
            });
        }
        self.produced = produced;
        Ok(avail)
    }

    /// Available slots according to the last producer index read, refreshed if that
    /// says fewer than `want`.
    fn avail_for(&mut self, want: u64) -> Result<u64, RingError> {
        let avail = self.produced.wrapping_sub(self.consumed);
        if avail >= want {
            return Ok(avail);
        }
        self.refresh()
    }

    /// Copies the oldest slot out of the ring into `out` (the slot size) and frees it.
    /// Returns `Ok(false)` if the ring is empty. The copy is untrusted bytes: decode it.
    pub fn pop(&mut self, out: &mut [u8]) -> Result<bool, RingError> {
        let size = self.layout.slot_size();
        if out.len() != size {
            return Err(RingError::WrongSlotSize {
                expected: size,
                got: out.len(),
            });
        }
        if self.avail_for(1)? == 0 {
            return Ok(false);
        }
        self.read_slot(self.consumed, out);
        self.consumed = self.consumed.wrapping_add(1);
        store_index(&self.region, CONSUMER_INDEX_OFFSET, self.consumed);
        Ok(true)
    }

    /// Copies up to `out.len() / slot_size` slots out (`out.len()` a multiple of the
    /// slot size), frees them with one index store, and returns how many.
    pub fn pop_burst(&mut self, out: &mut [u8]) -> Result<usize, RingError> {
        let size = self.layout.slot_size();
        if out.len() % size != 0 {
            return Err(RingError::WrongSlotSize {
                expected: size,
                got: out.len(),
            });
        }
        let want = (out.len() / size) as u64;
        if want == 0 {
            return Ok(0);
        }
        let n = self.avail_for(want)?.min(want);
        for (i, slot) in out.chunks_exact_mut(size).take(n as usize).enumerate() {
            self.read_slot(self.consumed.wrapping_add(i as u64), slot);
        }
        if n > 0 {
            self.consumed = self.consumed.wrapping_add(n);
            store_index(&self.region, CONSUMER_INDEX_OFFSET, self.consumed);
        }
        Ok(n as usize)
    }

    /// Slots available to pop (polls the producer index).
    pub fn len(&mut self) -> Result<u32, RingError> {
        Ok(self.refresh()? as u32)
    }

    /// True if no slot is available (polls the producer index).
    pub fn is_empty(&mut self) -> Result<bool, RingError> {
        Ok(self.len()? == 0)
    }

    /// Slots the producer could still publish (polls the producer index).
    pub fn free(&mut self) -> Result<u32, RingError> {
        Ok(self.layout.entries() - self.len()?)
    }

    fn read_slot(&self, index: u64, out: &mut [u8]) {
        let pos = index & (self.layout.entries() as u64 - 1);
        // In bounds: `attach` checked the region holds every slot.
        if !self.region.load_bytes(self.layout.slot_offset(pos), out) {
            // Unreachable by the attach check; a defined answer all the same.
            out.fill(0);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
