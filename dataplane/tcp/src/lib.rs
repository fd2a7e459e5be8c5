//! Sans-IO TCP built for MPA: FPDU-aligned segments, direct placement, retransmission
//! re-read from registered memory.
//!
//! - [`TcpSegment`] parses untrusted bytes; [`TcpHeader`] emits into caller buffers.
//! - [`TcpConn`] is one connection (RFC 9293 state machine with RFC 5961, RFC 7323,
//!   RFC 2018 / RFC 6675, RFC 6298, RFC 5681 / RFC 6582 and RFC 9438), driven by
//!   `handle_segment` / `handle_timeout` and polled with `poll_transmit` /
//!   `poll_event` / `poll_timeout`.
//! - Payload never sits in TCP on the send side: [`TxSource`] produces it (again, on
//!   retransmission); in-order received bytes go straight to [`RxSink`].
//! - [`reply_to_unknown`] answers segments that match no connection;
//!   [`IsnGenerator`] makes RFC 6528 initial sequence numbers.
#![forbid(unsafe_code)]

mod cc;
mod config;
mod conn;
mod input;
mod isn;
mod ooo;
mod output;
mod rtt;
mod scoreboard;
mod segmap;
mod segment;
mod seq;
mod timeout;
mod timer;
mod unknown;

#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod test_harness;
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests_data;
#[cfg(test)]
mod tests_open_close;
#[cfg(test)]
mod tests_robust;

pub use config::{Congestion, KeepaliveConfig, TcpConfig};
pub use conn::{RxSink, TcpConn, TcpCounters, TcpEvent, TcpState, TxSource};
pub use isn::IsnGenerator;
pub use segment::{
    FourTuple, TcpFlags, TcpHeader, TcpOptions, TcpParseError, TcpSegment, MAX_SACK_BLOCKS,
    TCP_HEADER_LEN, TCP_MAX_HEADER_LEN,
};
pub use seq::SeqNumber;
pub use timer::Timer;
pub use unknown::{reply_to_unknown, ResetReply};
