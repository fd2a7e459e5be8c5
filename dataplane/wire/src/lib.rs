//! Zero-copy checked views of the wire formats the appliance speaks.
//!
//! Contract (smoltcp's): `Packet::new_unchecked` only wraps; `check_len` makes every
//! accessor panic-free; `new_checked` = both and is the only way to view untrusted bytes;
//! emission uses `new_unchecked` on a buffer of exactly `buffer_len()` bytes. Field offsets
//! are declared once per format in a private `mod field`.
//!
//! Ethernet, ARP, IPv4, ICMP and TCP come from `smoltcp::wire` (re-exported in [`l2l4`]);
//! the iWARP formats (MPA, DDP, RDMAP) are ours.
#![forbid(unsafe_code)]

pub mod crc;
pub mod ddp;
pub mod l2l4;
pub mod marker;
pub mod mpa;
pub mod pcap;
pub mod rdmap;

/// Error of a checked view: the bytes are too short or a field holds an impossible value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Buffer shorter than the format requires.
    Truncated,
    /// A field holds a value the format does not allow.
    Malformed,
}

/// Result of parsing.
pub type Result<T> = core::result::Result<T, WireError>;
