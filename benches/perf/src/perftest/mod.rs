//! perftest compatibility (linux-rdma/perftest `ib_*_bw`/`ib_*_lat` with `-R`): the messages
//! perftest exchanges over its rdma_cm communication channel, as facts (docs/INTEROP.md,
//! "perftest's `-R` exchange"), and both ends of a run. Used by the `iwarp-perftest` binary.

pub mod client;
pub mod script;
pub mod server;
pub mod session;
pub mod wire;
