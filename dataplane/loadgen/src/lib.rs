//! The built-in load generator of `iwarpd` (in the spirit of testpmd's txonly mode, but
//! iWARP): a [`LoadgenClient`] opens N QPs to a peer daemon's [`LoadgenServer`] and
//! drives RDMA WRITE, READ or SEND of a given size at full speed, then reports goodput,
//! message rate and latency percentiles ([`Report`]); the server verifies data when
//! asked ([`ServerReport`]).
//!
//! Both are [`iwarp_runtime::App`]s: a dataplane core calls them with its engine and
//! memory (`on_event` for every engine event, `poll` once per loop iteration). Each is
//! given one [`Arena`] of the core's memory at construction (size it with
//! [`ClientSpec::required_arena_bytes`] / [`ServerConfig::required_arena_bytes`]) and
//! registers its own MRs over it. Nothing is allocated after set-up; completions are
//! polled [`CQ_BATCH`] at a time; every queue is kept full.
//!
//! Wire formats (hello in the MPA Request, slot address in the Reply, a reason in a
//! Reject, credits/checks/acks in 16-byte SENDs) are in [`messages`]; the verify pattern
//! in [`pattern`].
//!
//! Signaling: verify runs signal every WR; otherwise every `signal_every`-th WR and the
//! last WR of every posting batch are signaled, and a signaled completion completes
//! every older WR of its QP (successful WRs retire in order). Latency is sampled on
//! signaled WRs, from `post_send` to the `poll` that found the completion (verified
//! WRITEs: to the server's ack).
//!
//! Close: a run ends with a graceful close on every QP (FIN both ways, no RST, no
//! Terminate). The client disconnects only when neither end has anything in flight: its
//! own WRs completed and, for SENDs, the server's last credits arrived (see
//! [`client`]); how each connection ended is in [`Report::close`] ([`CloseStats`]), and a
//! close that was not graceful counts as an error.
#![forbid(unsafe_code)]

pub mod client;
mod client_data;
pub mod histogram;
pub mod messages;
pub mod pattern;
pub mod report;
mod res;
pub mod server;
pub mod spec;

#[cfg(test)]
mod tests;

pub use client::{LoadgenClient, Phase, CQ_BATCH};
pub use histogram::Histogram;
pub use messages::{Op, RejectReason};
pub use pattern::Mismatch;
pub use report::{CloseStats, ErrorCounts, MismatchLog, Report, ServerReport, SetupStats};
pub use server::LoadgenServer;
pub use spec::{Arena, ClientSpec, ServerConfig, SetupError, DEFAULT_PORT};
