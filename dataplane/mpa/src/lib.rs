//! MPA (RFC 5044, RFC 6581): handshake, FPDU framing and deframing, markers, CRC.
//!
//! Sans-IO, seam 2 of `docs/ENGINE.md`. One [`MpaConn`] per connection:
//!
//! - start-up: [`MpaConn::initiator`] queues the MPA Request, [`MpaConn::responder`] waits
//!   for it; the responder's ULP answers [`MpaEvent::RequestReceived`] with
//!   [`MpaConn::accept`] or [`MpaConn::reject`]; [`MpaEvent::Established`] carries the
//!   [`Negotiated`] parameters (revision, CRC, markers, IRD/ORD, peer-to-peer RTR duty);
//! - transmit: [`MpaConn::push_ulpdu`] queues a descriptor, TCP reads records through
//!   [`MpaConn::tx`] (`end_offset`/`seg_len`/`fill`), the bytes come from a
//!   [`UlpduSource`], and [`MpaConn::released`] hands descriptors back once TCP has them
//!   acknowledged;
//! - receive: TCP delivers in-order octets through [`MpaConn::rx`] (`deliver`); each
//!   complete, CRC-verified ULPDU goes to a [`UlpduSink`];
//! - memory: with an [`MpaPool`] per engine ([`MpaConn::rx_pooled`],
//!   [`MpaConn::tx_pooled`], [`MpaConn::take_tx_ring`], [`MpaConn::released_pooled`],
//!   [`MpaConn::return_storage`]) the FPDU ring, the receive staging buffer and the
//!   transmit scratch buffer are lent only while used, and the start-up buffers and event
//!   queue are freed once established: an idle established connection holds no heap
//!   ([`MpaConn::heap_bytes`]).
//!
//! `iwarp-mpa` does not depend on `iwarp-tcp` (ENGINE.md: they meet in `iwarp-engine`), so
//! [`MpaTx`] and [`MpaRx`] expose the `TxSource`/`RxSink` methods as inherent methods with
//! the same signatures; the engine implements the TCP traits on thin wrappers that forward
//! to them.
#![forbid(unsafe_code)]

pub mod config;
pub mod conn;
pub mod event;
pub mod handshake;
pub mod pool;
pub mod rx;
pub mod tx;

pub use config::{CrcPolicy, MarkerPolicy, MpaConfig};
pub use conn::{MpaConn, MpaCounters, MpaRx, MpaTx};
pub use event::{FailReason, Failure, MpaEvent, Negotiated, PrivateData, RequestInfo};
pub use handshake::{MpaApiError, MpaState, Role};
pub use iwarp_wire::mpa::{RtrSet, RtrType, RxCrc};
pub use pool::{MpaPool, PoolCounters, PoolLimits};
pub use rx::{RxCounters, UlpduSink, MIN_ULPDU_LEN};
pub use tx::{PushError, UlpduSource};

#[cfg(test)]
mod tests;
