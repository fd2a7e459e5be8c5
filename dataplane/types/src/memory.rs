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
        out.copy_from_slice(&self.arenas[region.0 as usize][s..e]);
        Ok(())
    }

    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        let (s, e) = self.range(region, offset, data.len()).ok_or(MemoryFault)?;
        self.arenas[region.0 as usize][s..e].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
