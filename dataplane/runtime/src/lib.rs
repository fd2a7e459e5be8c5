//! The dataplane core loop around the sans-IO engine (`iwarp-proto::Engine`).
//!
//! A dataplane core owns one engine per port, the QPs and TCP connections of those
//! engines, and the memory the engines read and write. It talks to a port through
//! [`FrameIo`] (implemented over DPDK by `iwarpd`, and in memory for tests), and hosts
//! [`App`]s (the load generator, and later the shared-memory verbs clients) that drive
//! the engine from inside the loop.
#![forbid(unsafe_code)]

pub mod app;
pub mod io;

pub use app::App;
pub use io::{FrameIo, PortCaps, TxOutcome};
