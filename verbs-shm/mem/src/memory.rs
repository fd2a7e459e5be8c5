//! [`ShmMemory`]: one core's view of the [`RegionTable`], the engine's `Memory`.

use std::io;
use std::sync::Arc;

use iwarp_types::{Memory, MemoryFault, RegionId};

use crate::{Backing, RegionTable, SharedMapping};

/// The arenas of every client as seen by one dataplane core: a handle on the shared
/// [`RegionTable`] with the core's own reader counter. Cloning takes another counter
/// (one clone per core).
#[derive(Debug)]
pub struct ShmMemory {
    table: Arc<RegionTable>,
    reader: usize,
}

impl Clone for ShmMemory {
    fn clone(&self) -> Self {
        ShmMemory::new(self.table.clone())
    }
}

impl ShmMemory {
    /// A view of `table`.
    pub fn new(table: Arc<RegionTable>) -> ShmMemory {
        let reader = table.reader_index();
        ShmMemory { table, reader }
    }

    /// A new table of [`crate::DEFAULT_TABLE_SLOTS`] slots whose first arenas are private
    /// memfds of the given lengths (never shared with a client): `RegionId(0)`,
    /// `RegionId(1)`, ... in order. For the daemon's own uses (the load generator's
    /// server and client arenas).
    pub fn with_heap_arenas(lens: &[usize]) -> io::Result<ShmMemory> {
        let table = Arc::new(RegionTable::default());
        for (i, &len) in lens.iter().enumerate() {
            let m = SharedMapping::create(&format!("iwarpd-heap-{i}"), len, Backing::Pages)?;
            match table.insert(Arc::new(m)) {
                Some(RegionId(id)) if id as usize == i => {}
                _ => return Err(io::Error::other("heap arena did not get its region id")),
            }
        }
        Ok(ShmMemory::new(table))
    }

    /// The shared table.
    pub fn table(&self) -> &Arc<RegionTable> {
        &self.table
    }
}

impl Memory for ShmMemory {
    fn region_len(&self, region: RegionId) -> Option<u64> {
        self.table.with(self.reader, region, |m| m.len() as u64)
    }

    fn read(&self, region: RegionId, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault> {
        self.table
            .with(self.reader, region, |m| m.read(offset, out))
            .unwrap_or(Err(MemoryFault))
    }

    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.table
            .with(self.reader, region, |m| m.write(offset, data))
            .unwrap_or(Err(MemoryFault))
    }

    fn read_crc32c(
        &self,
        region: RegionId,
        offset: u64,
        out: &mut [u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.table
            .with(self.reader, region, |m| m.read_crc32c(offset, out, crc))
            .unwrap_or(Err(MemoryFault))
    }

    fn write_crc32c(
        &mut self,
        region: RegionId,
        offset: u64,
        data: &[u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.table
            .with(self.reader, region, |m| m.write_crc32c(offset, data, crc))
            .unwrap_or(Err(MemoryFault))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_arenas_and_faults() {
        let mut m = ShmMemory::with_heap_arenas(&[4096, 100]).unwrap();
        assert_eq!(m.region_len(RegionId(0)), Some(4096));
        assert_eq!(m.region_len(RegionId(1)), Some(100));
        assert_eq!(m.region_len(RegionId(2)), None);
        m.write(RegionId(1), 97, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 3];
        let other_core = m.clone();
        other_core.read(RegionId(1), 97, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert_eq!(m.write(RegionId(1), 98, &[0; 3]), Err(MemoryFault));
        assert_eq!(m.read(RegionId(0), u64::MAX, &mut out), Err(MemoryFault));
        assert_eq!(m.read(RegionId(7), 0, &mut out), Err(MemoryFault));
        assert_eq!(m.write(RegionId(u32::MAX), 0, &out), Err(MemoryFault));
        // The CRC-computing read: same bytes, same faults, the CRC of what it copied.
        let big: Vec<u8> = (0..4096u32).map(|i| (i * 31 + 7) as u8).collect();
        m.write(RegionId(0), 0, &big).unwrap();
        let mut copy = vec![0u8; 4000];
        let c = m
            .read_crc32c(RegionId(0), 96, &mut copy, 0x1234_5678)
            .unwrap();
        assert_eq!(copy, big[96..]);
        assert_eq!(c, iwarp_crc_copy::crc32c_append(0x1234_5678, &big[96..]));
        assert_eq!(
            m.read_crc32c(RegionId(1), 98, &mut out, 0),
            Err(MemoryFault)
        );
        assert_eq!(m.read_crc32c(RegionId(7), 0, &mut out, 0), Err(MemoryFault));
        // The CRC-computing write: placed, the CRC of the data, the same faults.
        let c = m
            .write_crc32c(RegionId(0), 50, &big[1000..3000], 0x0bad_cafe)
            .unwrap();
        assert_eq!(
            c,
            iwarp_crc_copy::crc32c_append(0x0bad_cafe, &big[1000..3000])
        );
        let mut back = vec![0u8; 2000];
        other_core.read(RegionId(0), 50, &mut back).unwrap();
        assert_eq!(back, big[1000..3000]);
        assert_eq!(m.write_crc32c(RegionId(1), 98, &out, 0), Err(MemoryFault));
        assert_eq!(m.write_crc32c(RegionId(7), 0, &out, 0), Err(MemoryFault));
        assert!(ShmMemory::with_heap_arenas(&[0]).is_err());
    }

    #[test]
    fn client_arenas_appear_and_disappear() {
        let mut m = ShmMemory::with_heap_arenas(&[]).unwrap();
        let daemon = Arc::new(SharedMapping::create("a", 8192, Backing::Pages).unwrap());
        let client = SharedMapping::from_fd(daemon.dup_fd().unwrap(), 8192).unwrap();
        let id = m.table().insert(daemon).unwrap();
        client.write(100, b"from the client").unwrap();
        let mut out = [0u8; 15];
        m.read(id, 100, &mut out).unwrap();
        assert_eq!(&out, b"from the client");
        m.write(id, 0, b"engine").unwrap();
        let mut back = [0u8; 6];
        client.read(0, &mut back).unwrap();
        assert_eq!(&back, b"engine");
        assert!(m.table().remove(id).is_some());
        assert_eq!(m.read(id, 0, &mut out), Err(MemoryFault));
        assert_eq!(m.region_len(id), None);
    }
}
