//! What MPA reports to the engine: [`MpaEvent`] and the values it carries.

use iwarp_types::TermCode;
use iwarp_wire::mpa::{RtrSet, RtrType, PRIVATE_DATA_MAX};

/// Private data of an MPA frame, held inline (no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PrivateData {
    len: u16,
    bytes: [u8; PRIVATE_DATA_MAX],
}

impl PrivateData {
    /// No private data.
    pub const EMPTY: PrivateData = PrivateData {
        len: 0,
        bytes: [0; PRIVATE_DATA_MAX],
    };

    /// Copies `data`; `None` if longer than 512 octets.
    pub fn new(data: &[u8]) -> Option<PrivateData> {
        if data.len() > PRIVATE_DATA_MAX {
            return None;
        }
        let mut p = PrivateData::EMPTY;
        p.bytes[..data.len()].copy_from_slice(data);
        p.len = data.len() as u16;
        Some(p)
    }

    /// The octets.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Length in octets.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Debug for PrivateData {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PrivateData({:02x?})", self.as_slice())
    }
}

/// An MPA Request as the responder's ULP sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// The ULP private data (RFC 6581 data removed).
    pub private_data: PrivateData,
    /// Revision of the Request.
    pub revision: u8,
    /// Initiator's IRD (RFC 6581; 0 for revision 1).
    pub ird: u16,
    /// Initiator's ORD (RFC 6581; 0 for revision 1).
    pub ord: u16,
    /// The initiator asked for peer-to-peer mode.
    pub p2p: bool,
    /// RTR types the initiator offered.
    pub rtr: RtrSet,
    /// The initiator set C.
    pub crc: bool,
    /// The initiator asked for markers.
    pub markers: bool,
}

/// The parameters of an established MPA connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Revision in use (1 or 2).
    pub revision: u8,
    /// CRC is generated and checked.
    pub crc: bool,
    /// We insert markers in the stream we send.
    pub markers_tx: bool,
    /// The peer inserts markers in the stream we receive.
    pub markers_rx: bool,
    /// Our IRD: inbound RDMA Reads we must be able to hold (the peer's ORD is at most this).
    pub ird: u16,
    /// Our ORD: outbound RDMA Reads we may have outstanding (at most the peer's IRD).
    pub ord: u16,
    /// Peer-to-peer mode was negotiated.
    pub p2p: bool,
    /// Initiator in peer-to-peer mode: the RTR it must send as its first FPDU.
    pub send_rtr: Option<RtrType>,
    /// Responder in peer-to-peer mode: the RTR it waits for before it sends.
    pub await_rtr: Option<RtrType>,
    /// The peer's private data (Reply for the initiator, Request for the responder).
    pub private_data: PrivateData,
}

/// Why MPA failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// The frame key is not the one expected (includes a Reply sent to a responder and a
    /// Request sent to an initiator).
    BadKey,
    /// Revision we cannot interoperate with (not 1 or 2).
    BadRevision,
    /// PD_Length above 512.
    PrivateDataTooLong,
    /// Revision 2 with the enhanced flag but fewer than 4 octets of private data, or a
    /// revision 2 Reply to an enhanced Request missing its RFC 6581 data.
    MissingEnhancedData,
    /// Octets arrived where none are allowed (after a Request, before the ULP accepted,
    /// or after a Reject).
    UnexpectedData,
    /// The peer requires CRC and our policy forbids it.
    CrcMismatch,
    /// The peer requires markers and our policy refuses them.
    MarkersRefused,
    /// The responder's ORD exceeds our IRD (RFC 6581).
    InsufficientIrd,
    /// No common RTR type (RFC 6581).
    NoMatchingRtr,
    /// The peer's frame did not arrive in time.
    Timeout,
    /// An FPDU failed its CRC.
    Crc,
    /// A marker disagreed with the FPDU start.
    MarkerMismatch,
    /// ULPDU_Length smaller than a DDP header or larger than the receive bound.
    SegmentSize,
    /// The ULP (DDP/RDMAP) refused a ULPDU.
    Ulp,
    /// Delivered bytes left a gap in the stream.
    StreamGap,
    /// An FPDU begun did not complete: no octet of it arrived for
    /// `MpaConfig::fpdu_stall_timeout` (its length was corrupted in an undetected way,
    /// or the peer stopped sending in the middle of one).
    FpduStalled,
}

/// A failure: the reason and the Terminate code to send, if the RFC gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong.
    pub reason: FailReason,
    /// Terminate code (RFC 5044 section 8 / RFC 6581), if any.
    pub term: Option<TermCode>,
}

/// Events of an MPA connection, polled with `MpaConn::poll_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpaEvent {
    /// Responder: a valid Request arrived; call `accept` or `reject`.
    RequestReceived(RequestInfo),
    /// FPDU mode: ULPDUs may be pushed and are delivered.
    Established(Negotiated),
    /// Initiator: the responder rejected (Reply with R); the engine closes.
    Rejected {
        /// The responder's private data.
        private_data: PrivateData,
    },
    /// The connection failed; the engine sends the Terminate (if any and possible) and
    /// closes.
    Failed(Failure),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_bounds() {
        assert!(PrivateData::new(&[0u8; 512]).is_some());
        assert!(PrivateData::new(&[0u8; 513]).is_none());
        let p = PrivateData::new(b"abc").unwrap();
        assert_eq!(p.as_slice(), b"abc");
        assert_eq!(p.len(), 3);
        assert!(PrivateData::EMPTY.is_empty());
        assert_eq!(format!("{p:?}"), "PrivateData([61, 62, 63])");
    }
}
