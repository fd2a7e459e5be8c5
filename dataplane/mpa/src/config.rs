//! MPA configuration: revision, CRC and marker policies, RFC 6581 options, bounds.

use iwarp_types::Duration;
use iwarp_wire::mpa::{RtrSet, PRIVATE_DATA_MAX, ULPDU_MAX_LEN};

/// Whether we ask for CRC and what we accept (RFC 5044 section 7.1: CRC is used when
/// either side sets C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcPolicy {
    /// Set C in our Request/Reply: CRC is used on the connection (default).
    Request,
    /// Leave C clear, but use CRC if the peer sets it.
    Off,
    /// Never use CRC: a peer that sets C is refused (siw's `mpa_crc_strict` without
    /// `mpa_crc_required`). Not RFC behaviour; for interop tests.
    Forbid,
}

/// Whether we ask for markers in the stream we receive (RFC 5044: M is per direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerPolicy {
    /// Do not ask for markers; insert them if the peer asks (default).
    Off,
    /// Ask for markers in the stream we receive; insert them if the peer asks.
    Request,
    /// Do not ask and refuse a peer that asks (what Linux siw does).
    Refuse,
}

/// Configuration of one MPA connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaConfig {
    /// MPA revision we speak: 1 (RFC 5044) or 2 (RFC 6581, default). A responder answers
    /// `min(request revision, revision)`; a revision 2 initiator accepts revision 1 replies.
    pub revision: u8,
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Marker policy.
    pub markers: MarkerPolicy,
    /// Initiator: ask for peer-to-peer mode (RFC 6581). A responder always agrees to
    /// peer-to-peer when an offered RTR type is in `rtr`.
    pub p2p: bool,
    /// RTR types: the initiator offers these (never Send: we never send a zero-length
    /// Send as RTR); the responder accepts an offered type from this set, preferring
    /// Write, then Read, then Send. Default Write | Read.
    pub rtr: RtrSet,
    /// Initiator's IRD (14 bits) offered in the Request.
    pub ird: u16,
    /// Initiator's ORD (14 bits) offered in the Request.
    pub ord: u16,
    /// Largest private data we send or accept from the ULP (at most 512, including the
    /// 4 octets of RFC 6581 data in revision 2).
    pub private_data_max: usize,
    /// How long to wait for the peer's Request (responder) or Reply (initiator).
    pub handshake_timeout: Duration,
    /// Capacity of the FPDU transmit ring (FPDUs queued but not yet acknowledged).
    pub tx_queue_len: usize,
    /// Largest ULPDU we send. Sizes the transmit scratch buffer used only when TCP asks
    /// for part of an FPDU (MSS shrank): the engine's shared one ([`crate::MpaPool`]), or
    /// without a pool one the connection allocates the first time.
    pub tx_ulpdu_max_bytes: usize,
    /// Largest ULPDU we accept. Sizes the receive staging buffer: FPDUs that straddle TCP
    /// segments or contain markers are gathered there before their CRC is checked (lent
    /// by a [`crate::MpaPool`] while an FPDU is incomplete, or without a pool allocated by
    /// the connection the first time). Longer ULPDU_Length → Terminate. Default 65535
    /// (any legal FPDU): about 64 KiB per connection; deployments that know the peers'
    /// FPDUs fit one MSS can set e.g. 9216 to save memory.
    pub rx_ulpdu_max_bytes: usize,
    /// A responder sends no FPDU before it received one (RFC 5044 section 7.1.2).
    pub responder_waits_for_first_fpdu: bool,
    /// How long an FPDU whose first octets arrived may go without another octet before
    /// the stream is declared lost (Terminate `LLP_STREAM_LOST`, 0x2001); zero: never.
    ///
    /// A sender writes whole FPDUs, and our receive side consumes every octet at once (the
    /// window never closes on a partial FPDU), so a partial FPDU that stops growing means
    /// its ULPDU_Length is not the one the peer sent (an in-window segment forged or
    /// corrupted past the TCP checksum: the CRC that would catch it is only checked when
    /// the FPDU completes, and the peer may have nothing more to send: it waits for
    /// answers to what is inside) or the peer's retransmissions are failing. Default
    /// 240 s: two of Linux's largest RTO intervals (`TCP_RTO_MAX`, 120 s) without one
    /// octet arriving, so a lossy but live path does not trip it.
    pub fpdu_stall_timeout: Duration,
    /// Place the payload of an FPDU that came whole (an RDMA Write's, a Read Response's,
    /// a Send's, 256 octets or more) in the pass that computes its CRC, and check the CRC
    /// right after, before anything else happens (completion, delivery, error action):
    /// one pass over each received byte instead of a CRC and then a copy, what Linux siw
    /// does. The price: when the CRC then fails, the bytes placed stay where the header
    /// pointed, and a corrupted header (STag, TO) that still names memory the peer may
    /// write moves them there. Default off: no byte is placed before its FPDU's CRC
    /// verified. No effect without CRC.
    pub place_before_crc: bool,
}

impl Default for MpaConfig {
    fn default() -> MpaConfig {
        MpaConfig {
            revision: 2,
            crc: CrcPolicy::Request,
            markers: MarkerPolicy::Off,
            p2p: false,
            rtr: RtrSet::WRITE | RtrSet::READ,
            ird: 16,
            ord: 16,
            private_data_max: PRIVATE_DATA_MAX,
            handshake_timeout: Duration::from_secs(10),
            tx_queue_len: 1024,
            tx_ulpdu_max_bytes: 16 * 1024,
            rx_ulpdu_max_bytes: ULPDU_MAX_LEN,
            responder_waits_for_first_fpdu: true,
            fpdu_stall_timeout: Duration::from_secs(240),
            place_before_crc: false,
        }
    }
}

impl MpaConfig {
    /// The revision clamped to 1..=2.
    pub(crate) fn revision(&self) -> u8 {
        self.revision.clamp(1, 2)
    }

    /// Private data bound clamped to 512.
    pub(crate) fn private_data_max(&self) -> usize {
        self.private_data_max.min(PRIVATE_DATA_MAX)
    }

    /// Transmit ULPDU bound clamped to the 16-bit length field.
    pub(crate) fn tx_ulpdu_max(&self) -> usize {
        self.tx_ulpdu_max_bytes.min(ULPDU_MAX_LEN)
    }

    /// Receive ULPDU bound clamped to the 16-bit length field.
    pub(crate) fn rx_ulpdu_max(&self) -> usize {
        self.rx_ulpdu_max_bytes.min(ULPDU_MAX_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_clamps() {
        let c = MpaConfig::default();
        assert_eq!(c.revision(), 2);
        assert_eq!(c.crc, CrcPolicy::Request);
        assert_eq!(c.markers, MarkerPolicy::Off);
        assert_eq!(c.rtr, RtrSet::WRITE | RtrSet::READ);
        assert_eq!(c.rx_ulpdu_max(), 65535);
        let c = MpaConfig {
            revision: 7,
            private_data_max: 9999,
            tx_ulpdu_max_bytes: 1 << 20,
            ..MpaConfig::default()
        };
        assert_eq!(c.revision(), 2);
        assert_eq!(c.private_data_max(), 512);
        assert_eq!(c.tx_ulpdu_max(), 65535);
        assert_eq!(MpaConfig { revision: 0, ..c }.revision(), 1);
    }
}
