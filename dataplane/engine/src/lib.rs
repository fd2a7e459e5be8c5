//! The sans-IO iWARP engine of one dataplane core: Ethernet/ARP/IPv4/ICMP, TCP, MPA,
//! DDP, RDMAP and verbs.
//!
//! Inputs are frames ([`Engine::handle_frame`]), timer expiry ([`Engine::handle_timeout`]),
//! verbs ([`Engine::post_send`], [`Engine::post_recv`], [`Engine::modify_qp`], the rest
//! through [`Engine::rnic_mut`] followed by [`Engine::qp_doorbell`] when it gives a QP
//! work) and connection-management calls; outputs are frames written
//! into caller buffers ([`Engine::poll_transmit`]), events ([`Engine::poll_event`]),
//! completions (polled from the in-engine CQs through [`Engine::rnic_mut`], or written by
//! a CQ's sink where its creator put them: `iwarp_rdma::cq::CqSink`) and the next deadline
//! ([`Engine::poll_timeout`]). No clock, randomness, thread or socket inside; seeds come in
//! through [`EngineConfig`].
//!
//! Call order after any `handle_*`, verb or CM call: `poll_transmit` until `None`, then
//! `poll_event` until `None`, then `poll_timeout`. A caller with a burst of frame buffers
//! sends through one [`Transmitter`] ([`Engine::transmitter`]) instead: the same frames, a
//! connection keeping its turn for up to `EngineConfig::tx_turn_segs_max` segments
//! (default [`TX_TURN_SEGS_MAX`]), with less work per segment. A burst of inbound frames
//! goes in through one [`Receiver`] ([`Engine::receiver`]): the same outputs as
//! `handle_frame` per frame, a connection serviced once per run of its segments.
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
//! - Verbs that give a QP work have wrappers that ring its connection's doorbell:
//!   `post_send`, `post_recv`, `modify_qp`; after posting through `rnic_mut()` directly,
//!   call `qp_doorbell(qp)` (the engine keeps a ready list instead of scanning).
//! - A QP is detached from its connection (`Disconnected`, QP Idle or Error) when TCP
//!   enters TIME_WAIT (our FIN acknowledged, the peer's received), on LAST_ACK
//!   completion, RST or timeout; the TCP connection lingers in TIME_WAIT without a QP.
//!   The peer's FIN in RDMA mode is reported before that (`PeerClosed`, once), as siw
//!   reports it to the CM at `TCP_CLOSE_WAIT`.
//!   A close the engine started is bounded by `llp_close_timeout_ms` (then RST, and the
//!   QP hears `LlpEvent::TimedOut`).
//! - `LlpParams::role` is `LlpRole::Responder` only for a responder awaiting a Send RTR
//!   (the QP must not consume a receive for it); other responders are associated as
//!   `LlpRole::Initiator` without RTR: MPA's gate already holds FPDUs back until the
//!   first inbound FPDU, so ULPDUs can queue in MPA ready to go, while
//!   `LlpRole::Responder` would not generate them before that FPDU arrives.
//! - MPA revision 1 with `ConnectParams::p2p`: the initiator sends a zero-length Write
//!   RTR (no negotiation exists in revision 1).
//!
//! # Layout
//!
//! `iface/` (Ethernet, ARP cache, IPv4, ICMP), `conn_table.rs` (slab, 4-tuple demux,
//! listeners, ports), `conn.rs` (one connection), `engine.rs` (inputs, timers),
//! `rx_predict.rs` (header prediction on input), `transmit.rs` (outputs), `sched.rs`
//! (ready list and timer heap: no scans),
//! `cm.rs` (connection management), `verbs.rs` (verbs wrappers that ring the doorbell),
//! `conn_service.rs` (glue between TCP, MPA and the QP after each input), `glue.rs` (the MPA
//! source and sink adapters over the RDMA layer), `event.rs`, `counters.rs`, `config.rs`.
#![forbid(unsafe_code)]

pub mod cm;
pub mod config;
pub mod conn;
mod conn_service;
pub mod conn_table;
pub mod counters;
pub mod engine;
pub mod event;
pub mod glue;
pub mod iface;
mod nudge;
mod receive;
mod rx_predict;
pub mod sched;
mod transmit;
mod verbs;

#[cfg(test)]
mod tests;

pub use cm::CmError;
pub use config::{ConfigError, EngineConfig};
pub use conn::{AcceptParams, Conn, ConnState, ConnectParams, Role};
pub use conn_table::ListenError;
pub use counters::{Counters, DropReason};
pub use engine::Engine;
pub use event::{ConnectFailure, Event, PrivateData, PRIVATE_DATA_MAX};
pub use receive::Receiver;
pub use transmit::{Transmitter, TX_TURN_SEGS_MAX};
