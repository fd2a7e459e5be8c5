//! The sans-IO iWARP engine of one dataplane core: Ethernet/ARP/IPv4/ICMP, TCP, MPA,
//! DDP, RDMAP and verbs.
//!
//! Inputs are frames ([`Engine::handle_frame`]), timer expiry ([`Engine::handle_timeout`]),
//! verbs ([`Engine::rnic_mut`]) and connection-management calls; outputs are frames written
//! into caller buffers ([`Engine::poll_transmit`]), events ([`Engine::poll_event`]),
//! completions (polled from the CQs through [`Engine::rnic_mut`]) and the next deadline
//! ([`Engine::poll_timeout`]). No clock, randomness, thread or socket inside; seeds come in
//! through [`EngineConfig`].
//!
//! Call order after any `handle_*`, verb or CM call: `poll_transmit` until `None`, then
//! `poll_event` until `None`, then `poll_timeout`.
//!
//! # Differences from the Seam 4 sketch of `docs/ENGINE.md`
//!
//! - Every CM call that can start timers or send takes `now` first:
//!   `connect(now, qp, remote_ip, remote_port, ConnectParams)`,
//!   `accept(now, conn, qp, AcceptParams)`, `reject(now, conn, PrivateData)`,
//!   `disconnect(now, qp)`, `abort(now, qp)`. `listen(port, backlog)` does not.
//! - CM calls return `Result<_, CmError>`.
//! - Private data is [`PrivateData`] (the `iwarp-mpa` type: 512 bytes inline + length).
//! - `Engine::try_new` returns the config error; `Engine::new` panics on it.
//! - Active opens from a chosen port: `choose_local_port(remote_ip, remote_port, f)` then
//!   `connect_from(now, qp, local_port, remote_ip, remote_port, params)`.
//!
//! # Layout
//!
//! `iface/` (Ethernet, ARP cache, IPv4, ICMP), `conn_table.rs` (slab, 4-tuple demux,
//! listeners, ports), `conn.rs` (one connection), `engine.rs` (inputs and outputs),
//! `cm.rs` (connection management), `service.rs` (glue between TCP, MPA and the QP after
//! each input), `glue.rs` (the MPA source and sink adapters over the RDMA layer),
//! `event.rs`, `counters.rs`, `config.rs`.
#![forbid(unsafe_code)]

pub mod cm;
pub mod config;
pub mod conn;
pub mod conn_table;
pub mod counters;
pub mod engine;
pub mod event;
pub mod glue;
pub mod iface;
mod service;

#[cfg(test)]
mod tests;

pub use cm::CmError;
pub use config::{ConfigError, EngineConfig};
pub use conn::{AcceptParams, Conn, ConnState, ConnectParams, Role};
pub use conn_table::ListenError;
pub use counters::{Counters, DropReason};
pub use engine::Engine;
pub use event::{ConnectFailure, Event, PrivateData, PRIVATE_DATA_MAX};
