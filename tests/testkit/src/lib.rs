//! The test kit of the workspace: what the engine's tests, the fuzz target `engine_rx`,
//! the load generator's tests and the benchmarks share.
//!
//! - [`wire`]: two stations (engines, or anything that sends and receives frames) joined
//!   by a lossless wire on virtual time: frames moved until both are quiet, time jumped to
//!   the next timer, every loop bounded. No engine dependency.
//! - [`engine`] (feature `engine`, on by default): engine configurations of the
//!   benchmark network, the burst shuttle that moves frames between two engines from
//!   preallocated buffers, timer and completion helpers.
//! - `fake_daemon` (feature `fake-daemon`): the fake iwarpd the client libraries (Rust
//!   and C) are tested against.

pub mod wire;

#[cfg(feature = "engine")]
pub mod engine;

#[cfg(feature = "fake-daemon")]
pub mod fake_daemon;
