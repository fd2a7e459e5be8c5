//! Seeded network simulator and whole-system scenario tests of the iWARP engine.
//!
//! - [`rng`]: the run's seed (`IWARP_SEED` replays a run, printed on failure) and its
//!   ChaCha stream;
//! - [`link`]: a one-way link with loss, reordering, duplication, corruption, delay,
//!   jitter, MTU and bandwidth (bounded queue) on virtual time, with counters;
//! - capture of the frames the links carry through `iwarp_wire::pcap`; [`tshark`]: its dissection check;
//! - [`sim`]: nodes joined by links (a pair, or a switch by MAC), a virtual clock that
//!   jumps to the next event, `step`/`run_until` with hang detection;
//! - [`host`]: an engine with its memory as a node, verbs set-up helpers, and the
//!   connection-management dance ([`host::connect`], [`host::Pair`]);
//! - [`workload`] and [`suite`]: the seeded plans and checks of the randomized suite;
//! - [`session`]: the representative session of `scripts/sim-pcap.sh`;
//! - [`trace`]: one-line frame descriptions (`IWARP_SIM_TRACE=1`).
#![forbid(unsafe_code)]

pub mod host;
pub mod link;
pub mod rng;
pub mod session;
pub mod sim;
pub mod suite;
pub mod trace;
pub mod tshark;
pub mod workload;
