//! The dataplane core loop around the sans-IO engine (`iwarp-engine::Engine`).
//!
//! A dataplane core owns one engine per port, the QPs and TCP connections of those
//! engines, and the memory the engines read and write. It talks to a port through
//! [`FrameIo`] (implemented over DPDK by `iwarpd`, and in memory for tests), and hosts
//! [`App`]s (the shared-memory verbs service, the load generator) that drive the engine
//! from inside the loop: verbs and connections reach an engine only through an app.
//!
//! - [`Core`] (`core.rs`, `core_io.rs`, `core_events.rs`, `core_exec.rs`,
//!   `core_shutdown.rs`): the loop, frames in and out, engine events to apps, command
//!   execution, orderly shutdown.
//! - [`steer`]: symmetric Toeplitz (RSS) steering, the owner core of a frame.
//! - [`forward`]: bounded rings that carry misdirected frames (and ARP copies) to their
//!   owner core.
//! - [`control`]: commands in (start and stop apps, snapshot, shutdown), replies out;
//!   [`ControlHandle`] for the control thread. [`placement`]: which core gets a new QP.
//! - [`counters`]: per-core and per-port counters published as atomics; [`Snapshot`].
//! - [`capture`]: per-core capture rings and the pcap writer thread.
//! - [`memlink`]: an in-memory [`FrameIo`]; [`testutil`]: cores joined by it, and the
//!   [`testutil::Console`] app through which tests run verbs on a core.
#![forbid(unsafe_code)]

pub mod app;
pub mod capture;
pub mod clock;
pub mod control;
pub mod core;
mod core_events;
mod core_exec;
mod core_io;
mod core_shutdown;
pub mod counters;
mod counters_fmt;
pub mod forward;
pub mod io;
pub mod memlink;
pub mod placement;
pub mod ring;
pub mod steer;
pub mod testutil;

#[cfg(test)]
mod tests;

pub use crate::core::{Core, CoreConfig, CoreError, CoreLinks, PortSetup, Work};
pub use app::App;
pub use capture::{Capture, CaptureSummary, CaptureWriter, CoreCapture};
pub use clock::{Clock, ManualClock, SystemClock};
pub use control::{control_channel, Command, ControlError, ControlHandle, Done, Op, Reply};
pub use counters::{CoreStats, Snapshot};
pub use forward::ForwardMesh;
pub use io::{ChecksumCounters, FrameIo, PortCaps, TxOutcome};
pub use memlink::{MemLink, MemLinkConfig, MemPort};
pub use placement::{Placement, PlacementPolicy};
pub use steer::Steering;
