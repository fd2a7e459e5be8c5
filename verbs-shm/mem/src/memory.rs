//! [`ShmMemory`]: one core's view of the [`RegionTable`], the engine's `Memory`.

use std::io;
use std::sync::Arc;

use iwarp_types::{Memory, MemoryFault, RegionId};

use crate::{Backing, RegionTable, SharedMapping};

/// The arenas of every client as seen by one dataplane core: a handle on the shared
/// [`RegionTable`] with the core's own reader counter, and a section line of its own
/// while the table has one free: between [`Memory::begin_batch`] and
/// [`Memory::end_batch`] an access is one load instead of two locked instructions (the
/// table's documentation). Cloning takes another counter and line (one clone per core).
#[derive(Debug)]
pub struct ShmMemory {
    table: Arc<RegionTable>,
    reader: usize,
    /// The section line this view owns, if it got one.
    section: Option<usize>,
    /// While a batch is open: the section line it entered (this view's `section`).
    batch: Option<usize>,
}

impl Clone for ShmMemory {
    fn clone(&self) -> Self {
        ShmMemory::new(self.table.clone())
    }
}

impl Drop for ShmMemory {
    fn drop(&mut self) {
        // A core that stops inside a batch (a panic unwinding) must not hold up `remove`.
        self.end_batch();
        if let Some(line) = self.section {
            self.table.release_section(line);
        }
    }
}

impl ShmMemory {
    /// A view of `table`.
    pub fn new(table: Arc<RegionTable>) -> ShmMemory {
        let reader = table.reader_index();
        let section = table.claim_section();
        ShmMemory {
            table,
            reader,
            section,
            batch: None,
        }
    }

    /// Runs `f` on the mapping of `region`: inside a batch through the section, else
    /// announced for this access alone.
    #[inline]
    fn with<R>(&self, region: RegionId, f: impl FnOnce(&SharedMapping) -> R) -> Option<R> {
        match self.batch {
            Some(line) => {
                // `batch` holds this view's own line (claimed in `new`, released in
                // `drop`) from `enter_section` in `begin_batch` until `leave_section` in
                // `end_batch`, and nothing ends the batch during this call.
                // SAFETY: `line` is this view's own section line and it is open (above).
                unsafe { self.table.with_in_section(line, region, f) }
            }
            None => self.table.with(self.reader, region, f),
        }
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
        self.with(region, |m| m.len() as u64)
    }

    fn read(&self, region: RegionId, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault> {
        self.with(region, |m| m.read(offset, out))
            .unwrap_or(Err(MemoryFault))
    }

    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.with(region, |m| m.write(offset, data))
            .unwrap_or(Err(MemoryFault))
    }

    fn read_crc32c(
        &self,
        region: RegionId,
        offset: u64,
        out: &mut [u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.with(region, |m| m.read_crc32c(offset, out, crc))
            .unwrap_or(Err(MemoryFault))
    }

    fn write_crc32c(
        &mut self,
        region: RegionId,
        offset: u64,
        data: &[u8],
        crc: u32,
    ) -> Result<u32, MemoryFault> {
        self.with(region, |m| m.write_crc32c(offset, data, crc))
            .unwrap_or(Err(MemoryFault))
    }

    fn prefetch(&self, region: RegionId, offset: u64, len: usize) {
        self.with(region, |m| m.prefetch(offset, len));
    }

    fn begin_batch(&mut self) {
        if let (None, Some(line)) = (self.batch, self.section) {
            self.table.enter_section(line);
            self.batch = Some(line);
        }
    }

    fn end_batch(&mut self) {
        if let Some(line) = self.batch.take() {
            self.table.leave_section(line);
        }
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
        // A prefetch is a hint: inside, past the end, an unknown region; nothing changes.
        m.prefetch(RegionId(0), 0, 4096);
        m.prefetch(RegionId(1), 98, 1 << 20);
        m.prefetch(RegionId(7), 0, 64);
        other_core.read(RegionId(0), 50, &mut back).unwrap();
        assert_eq!(back, big[1000..3000]);
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

    fn table_with(len: usize) -> (Arc<RegionTable>, RegionId) {
        let t = Arc::new(RegionTable::new(4));
        let m = SharedMapping::create("b", len, Backing::Pages).unwrap();
        let id = t.insert(Arc::new(m)).unwrap();
        (t, id)
    }

    #[test]
    fn remove_waits_for_a_batch_open_when_it_starts() {
        let (t, id) = table_with(4096);
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t2 = t.clone();
        let core = std::thread::spawn(move || {
            let mut m = ShmMemory::new(t2);
            m.begin_batch();
            m.write(id, 0, &[7; 64]).unwrap();
            // An access in progress when the region is removed finishes with the mapping
            // it loaded.
            let r = m.with(id, |mapping| {
                entered_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                mapping.write(4000, &[9; 96])
            });
            // The next access of the same batch finds the region gone.
            let after = m.write(id, 0, &[1]);
            m.end_batch();
            (r.map(|w| w.is_ok()), after)
        });
        entered_rx.recv().unwrap();
        let gone = crate::table::remove_while_held(&t, id, || go_tx.send(()).unwrap()).unwrap();
        assert_eq!(core.join().unwrap(), (Some(true), Err(MemoryFault)));
        let mut b = [0u8; 2];
        gone.read(63, &mut b[..1]).unwrap();
        gone.read(4095, &mut b[1..]).unwrap();
        assert_eq!(b, [7, 9]);
    }

    #[test]
    fn a_batch_begun_after_remove_sees_the_region_gone() {
        let (t, id) = table_with(4096);
        let mut m = ShmMemory::new(t.clone());
        m.begin_batch();
        let mut out = [0u8; 4];
        assert_eq!(m.read(id, 0, &mut out), Ok(()));
        m.end_batch();
        // Between batches the view holds nothing up.
        assert!(t.remove(id).is_some());
        m.begin_batch();
        assert_eq!(m.read(id, 0, &mut out), Err(MemoryFault));
        assert_eq!(m.region_len(id), None);
        m.end_batch();
        // Batches may be empty, and an end without a begin is nothing.
        m.end_batch();
        m.begin_batch();
        m.begin_batch();
        m.end_batch();
    }

    #[test]
    fn views_beyond_the_section_lines_announce_every_access() {
        let (t, id) = table_with(4096);
        let mut views: Vec<ShmMemory> = (0..crate::table::MAX_SECTIONS + 2)
            .map(|_| ShmMemory::new(t.clone()))
            .collect();
        assert!(views[..crate::table::MAX_SECTIONS]
            .iter()
            .all(|v| v.section.is_some()));
        assert!(views[crate::table::MAX_SECTIONS..]
            .iter()
            .all(|v| v.section.is_none()));
        for (i, v) in views.iter_mut().enumerate() {
            v.begin_batch();
            v.write(id, i as u64, &[i as u8]).unwrap();
            v.end_batch();
        }
        let mut out = [0u8; 3];
        views[0]
            .read(id, crate::table::MAX_SECTIONS as u64 - 1, &mut out)
            .unwrap();
        assert_eq!(
            out,
            [
                crate::table::MAX_SECTIONS as u8 - 1,
                crate::table::MAX_SECTIONS as u8,
                crate::table::MAX_SECTIONS as u8 + 1
            ]
        );
        // A dropped view gives its line back.
        views.remove(3);
        assert!(ShmMemory::new(t.clone()).section.is_some());
        // A view dropped inside its batch (a core unwinding) does not hold up `remove`.
        views[0].begin_batch();
        views.remove(0);
        assert!(t.remove(id).is_some());
    }

    #[test]
    fn batches_race_with_insert_and_remove() {
        let t = Arc::new(RegionTable::new(2));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, stop) = (t.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut m = ShmMemory::new(t);
                    let (mut ok, mut gone) = (0u64, 0u64);
                    let mut out = [0u8; 256];
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        m.begin_batch();
                        for _ in 0..16 {
                            match m.read(RegionId(0), 0, &mut out) {
                                Ok(()) => {
                                    assert!(out.iter().all(|&b| b == out[0]));
                                    ok += 1;
                                }
                                Err(MemoryFault) => gone += 1,
                            }
                        }
                        m.end_batch();
                    }
                    (ok, gone)
                })
            })
            .collect();
        for round in 0..200u32 {
            let m = SharedMapping::create("r", 4096, Backing::Pages).unwrap();
            m.write(0, &[round as u8; 4096]).unwrap();
            let id = t.insert(Arc::new(m)).unwrap();
            std::thread::yield_now();
            let back = t.remove(id).unwrap();
            assert_eq!(Arc::strong_count(&back), 1);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            let (ok, gone) = r.join().unwrap();
            assert!(ok + gone > 0);
        }
    }
}
