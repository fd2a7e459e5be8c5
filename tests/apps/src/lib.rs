//! Whole-system tests of the shared-memory verbs (issue 4): client processes on two
//! `iwarpd` joined by memif. The harness starts the daemons ([`daemon`]), speaks the raw
//! control protocol for admin queries and malicious requests ([`admin`]), and runs the
//! helper binaries of `src/bin` as client processes.
//!
//! The tests need root and DPDK; without either they print why and pass (skip).

pub mod admin;
pub mod daemon;
pub mod raw;
pub mod side;
pub mod system;

pub use admin::RawClient;
pub use daemon::{Daemon, DaemonPair};
pub use system::{skip, SystemLock};
