//! Shared memory of verbs clients (docs/APPS.md, "Memory"): sealed memfd arenas mapped by
//! the daemon and the client ([`SharedMapping`]), the table of arenas shared by every
//! dataplane core ([`RegionTable`]) and [`ShmMemory`], the engine's view of them
//! (`iwarp_types::Memory`).
//!
//! Payload memory is written by the client and by the engine at the same time, like the
//! memory of a real RDMA NIC: races on payload bytes are the application's business.
//! What this crate guarantees is that no peer can make the daemon touch memory outside a
//! mapping (bounds are checked against lengths the daemon knows) or fault on it (files
//! are sealed against shrinking before they are trusted).

mod mapping;
mod memory;
mod table;

pub use mapping::{Backing, SharedMapping};
pub use memory::ShmMemory;
pub use table::{RegionTable, DEFAULT_TABLE_SLOTS, MAX_READERS};
