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
}
