//! The memory interface: registered memory is owned by the caller, the engine reads and
//! writes it through [`Memory`].
//!
//! A memory region (MR) is a range `[region_offset, region_offset + len)` of a caller
//! arena named by a [`RegionId`]. The engine validates every access against its MR/MW
//! tables before it calls `read` or `write`, so an implementation only has to check that
//! the range lies inside the arena (and return [`MemoryFault`] if not — never panic).

use crate::RegionId;

/// An access outside a caller arena, or to an arena that does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryFault;

/// Caller-owned memory arenas, read and written by the engine.
///
/// `write` is how received payload is placed: the engine calls it with slices of the
/// received frame, so a payload byte is copied exactly once, from the frame into the
/// destination. `read` is how transmitted payload (including retransmissions) is fetched
/// from registered memory into the caller's frame buffer.
pub trait Memory {
    /// Length of arena `region` in bytes, or `None` if it does not exist.
    fn region_len(&self, region: RegionId) -> Option<u64>;

    /// Copies `out.len()` bytes from `region` at `offset` into `out`.
    fn read(&self, region: RegionId, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault>;

    /// Copies `data` into `region` at `offset`.
    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault>;

    /// Copies as [`Memory::read`] and returns the CRC32c of the bytes copied into `out`,
    /// continued from `crc` (0 to start): the MPA CRC of an outbound payload gathered in
    /// the same pass. Implementations copy and CRC in one pass where they can; this
    /// default reads, then computes the CRC over `out`.
    fn read_crc32c(
        &self,
        region: RegionId,
        offset: u64,
        out: &mut [u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.read(region, offset, out)?;
        Ok(iwarp_crc_copy::crc32c_append(crc, out))
    }

    /// Copies as [`Memory::write`] and returns the CRC32c of `data` continued from `crc`:
    /// a received payload placed in the pass that checks its FPDU's MPA CRC. Nothing is
    /// written if the range is not inside the arena. Implementations copy and CRC in one
    /// pass where they can; this default writes, then computes the CRC over `data`.
    fn write_crc32c(
        &mut self,
        region: RegionId,
        offset: u64,
        data: &[u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.write(region, offset, data)?;
        Ok(iwarp_crc_copy::crc32c_append(crc, data))
    }

    /// A hint that `len` bytes of `region` at `offset` are about to be read (a WR's
    /// source, when the WR starts): an implementation may ask the CPU to bring (the first
    /// page of) them into its caches. Never fails and never changes what is read; a
    /// range outside the arena is ignored. The default does nothing.
    fn prefetch(&self, region: RegionId, offset: u64, len: usize) {
        let _ = (region, offset, len);
    }

    /// Called by the loop that owns this memory before a batch of accesses (one
    /// iteration of a dataplane core), [`Memory::end_batch`] after it. An implementation
    /// may do per batch what it would otherwise do per access: shared memory announces
    /// its reader once per batch instead of around every copy. Accesses outside a batch
    /// stay valid (slower where the implementation has per-batch state). The default
    /// does nothing.
    fn begin_batch(&mut self) {}

    /// Ends the batch [`Memory::begin_batch`] began; nothing if none is open. Must come
    /// soon: shared memory's region removal waits for the batches open when it starts.
    fn end_batch(&mut self) {}
}

/// Arenas held in `Vec<u8>`s: the memory of simulations, tests and benchmarks.
/// `RegionId(i)` is the `i`-th arena.
#[derive(Clone, Debug, Default)]
pub struct VecMemory {
    /// The arenas.
    pub arenas: Vec<Vec<u8>>,
}

impl VecMemory {
    /// No arena.
    pub fn new() -> VecMemory {
        VecMemory::default()
    }

    /// Adds a zero-filled arena of `len` bytes and returns its id.
    pub fn add_arena(&mut self, len: usize) -> RegionId {
        self.arenas.push(vec![0; len]);
        RegionId((self.arenas.len() - 1) as u32)
    }

    /// The bytes of an arena.
    pub fn arena(&self, region: RegionId) -> &[u8] {
        &self.arenas[region.0 as usize]
    }

    /// The bytes of an arena, mutable.
    pub fn arena_mut(&mut self, region: RegionId) -> &mut [u8] {
        &mut self.arenas[region.0 as usize]
    }

    fn range(&self, region: RegionId, offset: u64, len: usize) -> Option<(usize, usize)> {
        let arena = self.arenas.get(region.0 as usize)?;
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        (end <= arena.len()).then_some((start, end))
    }
}

impl Memory for VecMemory {
    fn region_len(&self, region: RegionId) -> Option<u64> {
        self.arenas.get(region.0 as usize).map(|a| a.len() as u64)
    }

    fn read(&self, region: RegionId, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault> {
        let (s, e) = self.range(region, offset, out.len()).ok_or(MemoryFault)?;
        // Not `copy_from_slice`: `iwarp_crc_copy::copy` never takes `rep movsb` (its docs).
        iwarp_crc_copy::copy(out, &self.arenas[region.0 as usize][s..e]);
        Ok(())
    }

    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        let (s, e) = self.range(region, offset, data.len()).ok_or(MemoryFault)?;
        iwarp_crc_copy::copy(&mut self.arenas[region.0 as usize][s..e], data);
        Ok(())
    }

    fn read_crc32c(
        &self,
        region: RegionId,
        offset: u64,
        out: &mut [u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        let (s, e) = self.range(region, offset, out.len()).ok_or(MemoryFault)?;
        Ok(iwarp_crc_copy::copy_crc32c(
            out,
            &self.arenas[region.0 as usize][s..e],
            crc,
        ))
    }

    fn write_crc32c(
        &mut self,
        region: RegionId,
        offset: u64,
        data: &[u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        let (s, e) = self.range(region, offset, data.len()).ok_or(MemoryFault)?;
        Ok(iwarp_crc_copy::copy_crc32c(
            &mut self.arenas[region.0 as usize][s..e],
            data,
            crc,
        ))
    }

    fn prefetch(&self, region: RegionId, offset: u64, len: usize) {
        // `iwarp_crc_copy::prefetch` asks for the first page only.
        if let Some((s, e)) = self.range(region, offset, len) {
            iwarp_crc_copy::prefetch(&self.arenas[region.0 as usize][s..e]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_is_a_hint_inside_or_outside_an_arena() {
        let mut m = VecMemory::new();
        let r = m.add_arena(8192);
        m.arena_mut(r)[100] = 7;
        m.prefetch(r, 0, 8192);
        m.prefetch(r, 8000, 1 << 30);
        m.prefetch(r, u64::MAX, 64);
        m.prefetch(RegionId(9), 0, 64);
        assert_eq!(m.arena(r)[100], 7);
        assert_eq!(m.arena(r).len(), 8192);
    }

    #[test]
    fn vec_memory_bounds() {
        let mut m = VecMemory::new();
        let r = m.add_arena(16);
        m.write(r, 10, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 3];
        m.read(r, 10, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert_eq!(m.write(r, 14, &[0; 3]), Err(MemoryFault));
        assert_eq!(m.write(r, u64::MAX, &[0; 3]), Err(MemoryFault));
        assert_eq!(m.read(RegionId(9), 0, &mut out), Err(MemoryFault));
        assert_eq!(m.region_len(r), Some(16));
    }

    #[test]
    fn read_crc32c_copies_and_continues_the_crc() {
        let mut m = VecMemory::new();
        let r = m.add_arena(5000);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 13 + 1) as u8).collect();
        m.write(r, 0, &data).unwrap();
        for (off, len) in [(0, 0), (3, 100), (7, 4000), (0, 5000)] {
            let mut out = vec![0u8; len];
            let head = iwarp_crc_copy::crc32c_append(0, b"header");
            let c = m.read_crc32c(r, off as u64, &mut out, head).unwrap();
            assert_eq!(out, data[off..off + len]);
            assert_eq!(
                c,
                iwarp_crc_copy::crc32c_append(head, &data[off..off + len])
            );
        }
        let mut out = [0u8; 8];
        assert_eq!(m.read_crc32c(r, 4995, &mut out, 0), Err(MemoryFault));
        assert_eq!(m.read_crc32c(RegionId(3), 0, &mut out, 0), Err(MemoryFault));
    }

    #[test]
    fn write_crc32c_places_and_continues_the_crc() {
        let mut m = VecMemory::new();
        let r = m.add_arena(5000);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 29 + 5) as u8).collect();
        for (off, len) in [(0, 0), (3, 100), (9, 4000), (0, 5000)] {
            m.arena_mut(r).fill(0xee);
            let head = iwarp_crc_copy::crc32c_append(0, b"header");
            let c = m.write_crc32c(r, off as u64, &data[..len], head).unwrap();
            assert_eq!(c, iwarp_crc_copy::crc32c_append(head, &data[..len]));
            assert_eq!(&m.arena(r)[off..off + len], &data[..len]);
            // Nothing outside the range.
            assert!(m.arena(r)[..off].iter().all(|&b| b == 0xee));
            assert!(m.arena(r)[off + len..].iter().all(|&b| b == 0xee));
        }
        m.arena_mut(r).fill(0);
        assert_eq!(m.write_crc32c(r, 4995, &data[..8], 0), Err(MemoryFault));
        assert!(m.arena(r).iter().all(|&b| b == 0), "a refused write wrote");
        assert_eq!(
            m.write_crc32c(RegionId(3), 0, &data[..8], 0),
            Err(MemoryFault)
        );
    }
}
