//! Sans-IO TCP built for MPA: FPDU-aligned segments, direct placement, retransmission
//! re-read from registered memory.
//!
//! - [`TcpSegment`] parses untrusted bytes; [`TcpHeader`] emits into caller buffers;
//!   [`TcpSegment::parse_usual`] reads the usual segment (timestamp option alone, ACK)
//!   at fixed offsets (`usual.rs`).
//! - [`TcpConn`] is one connection (RFC 9293 state machine with RFC 5961, RFC 7323,
//!   RFC 2018 / RFC 6675, RFC 6298, RFC 5681 / RFC 6582 and RFC 9438), driven by
//!   `handle_segment` / `handle_timeout` and polled with `poll_transmit` /
//!   `poll_event` / `poll_timeout`.
//! - Payload never sits in TCP on the send side: [`TxSource`] produces it (again, on
//!   retransmission); in-order received bytes go straight to [`RxSink`].
//! - Header prediction: the next in-order data segment of an established connection
//!   that acknowledges nothing new skips the checks of a segment that could be anything
//!   (`input.rs`; the same outcome as the full path, `tests_prediction.rs`).
//! - No ACK war: answers to unacceptable segments are rate-limited and duplicate ACKs
//!   never move TS.Recent (`ack_limit.rs`). A FIN ahead of missing data is kept.
//! - Memory: loss-recovery storage is allocated on first use and released when idle
//!   ([`TcpConn::heap_bytes`] is 0 for an idle connection; `memory.rs`).
//! - [`reply_to_unknown`] answers segments that match no connection;
//!   [`IsnGenerator`] makes RFC 6528 initial sequence numbers.
#![forbid(unsafe_code)]

mod ack_limit;
mod cc;
mod config;
mod conn;
mod input;
mod isn;
mod memory;
mod ooo;
mod output;
mod pmtu;
mod receive;
mod rtt;
mod scoreboard;
mod segmap;
mod segment;
mod seq;
mod timeout;
mod timer;
mod unknown;
mod usual;

#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod test_harness;
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests_ack_war;
#[cfg(test)]
mod tests_data;
#[cfg(test)]
mod tests_memory;
#[cfg(test)]
mod tests_open_close;
#[cfg(test)]
mod tests_pmtu;
#[cfg(test)]
mod tests_prediction;
#[cfg(test)]
mod tests_robust;
#[cfg(test)]
mod tests_spurious_rto;
#[cfg(test)]
mod tests_zero_window;

pub use config::{Congestion, KeepaliveConfig, TcpConfig};
pub use conn::{RxSink, TcpConn, TcpCounters, TcpEvent, TcpState, TxSource};
pub use isn::IsnGenerator;
pub use segment::{
    has_rst, FourTuple, TcpFlags, TcpHeader, TcpOptions, TcpParseError, TcpSegment,
    MAX_SACK_BLOCKS, TCP_HEADER_LEN, TCP_MAX_HEADER_LEN,
};
pub use seq::SeqNumber;
pub use timer::Timer;
pub use unknown::{reply_to_unknown, ResetReply};
pub use usual::{is_usual_header, FLAGS_OFFSET, FLAG_PSH, USUAL_HEADER_LEN, USUAL_VARYING};
