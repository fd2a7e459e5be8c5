//! Criterion benchmarks of the iWARP engine: two engines on one core over an in-memory,
//! zero-loss link, MPA CRC on, measuring RDMA WRITE goodput and message rate beside the
//! machine's own limit (one core copying and CRC32c-ing every byte twice, see [`limit`]).
//!
//! - [`pair`]: the two engines and the frame shuttle between them;
//! - [`stream`]: the WRITE workload (full send queue, signaled every N);
//! - [`limit`]: the 2x copy + CRC limit;
//! - [`report`]: medians and the one-line results;
//! - [`scale`]: N connected QPs on one core: set-up rate and memory per connection;
//! - [`shm`]: the shared-memory verbs path (engine, `ShmService`, client rings) in one
//!   process, for counting the instructions of a `send_lat` round trip;
//! - [`cpu_probe`]: the cache-line round trip between two CPUs (what memif between two
//!   cores pays per line; it moves on a virtual machine);
//! - [`case`]: the benchmark cases and timed runs used by `benches/engine.rs` and the
//!   `iwarp-bench-report` binary.
#![forbid(unsafe_code)]

pub mod case;
pub mod cpu_probe;
pub mod limit;
pub mod pair;
pub mod report;
pub mod scale;
pub mod shm;
pub mod stream;

pub use case::{extra_cases, measure, standard_cases, target_met, Case, Running};
pub use pair::{BenchError, LinkStats, Node, Pair, PairConfig};
pub use report::{Metric, SampleLog, Summary};
pub use stream::{WriteConfig, WriteStream};
