//! Target `mpa_stream`: `iwarp_mpa::MpaConn` fed through its receive adapter.
//!
//! The first byte picks the mode (bit 0):
//! - **single** ([`single`]): one connection in either role, fed arbitrary octets in
//!   arbitrary chunks (with TCP-like overlapping re-deliveries), accepting or rejecting the
//!   Request as the input says: handshake parsing and the FPDU deframer on garbage.
//! - **pair** ([`pair`]): an initiator and a responder joined by an emulated TCP (segments of
//!   a fuzzer-chosen MSS, cut into arbitrary chunks, re-read for retransmission, one octet
//!   optionally corrupted), both pushing ULPDUs of fuzzer-chosen sizes and contents: what
//!   each sink receives must be what the other side pushed, in order, whole (a prefix of it
//!   after an error; with CRC, even when an octet was corrupted on the way).
//!
//! Both modes check the adapter contract: `deliver` consumes everything, the sink only sees
//! ULPDUs within the configured bounds and nothing after a failure, events stay bounded.

mod pair;
mod single;

use iwarp_mpa::{CrcPolicy, MarkerPolicy, MpaConfig, RtrSet, UlpduSink, MIN_ULPDU_LEN};
use iwarp_types::{Duration, TermCode};

use crate::cursor::Cursor;

/// Mode bit of the first byte: 0 single, 1 pair.
pub const MODE_PAIR: u8 = 1;

/// The body of the `mpa_stream` fuzz target.
pub fn mpa_stream(data: &[u8]) {
    run(data);
}

/// Runs the target; returns the number of ULPDUs the sinks accepted (for tests that check
/// that seeds reach FPDU mode).
fn run(data: &[u8]) -> usize {
    let mut c = Cursor::new(data);
    let mode = c.u8();
    if mode & MODE_PAIR != 0 {
        pair::run(mode, &mut c)
    } else {
        single::run(mode, &mut c)
    }
}

/// Receive bounds the configurations draw from (the default, one MSS, and tiny).
const RX_ULPDU_MAX: [usize; 3] = [65535, 1424, 64];

/// A configuration from two bytes: revision, CRC and marker policies, peer-to-peer, RTR
/// types, IRD/ORD, receive bound. Queues are kept small so their limits are reached.
fn config(c: &mut Cursor<'_>) -> MpaConfig {
    let k = c.u8();
    let l = c.u8();
    MpaConfig {
        revision: 1 + (k & 1),
        crc: [CrcPolicy::Request, CrcPolicy::Off, CrcPolicy::Forbid][usize::from(k >> 1) % 3],
        markers: [
            MarkerPolicy::Off,
            MarkerPolicy::Request,
            MarkerPolicy::Refuse,
        ][usize::from(k >> 3) % 3],
        p2p: k & 0x20 != 0,
        rtr: RtrSet((k >> 6) | (l & 4)),
        ird: u16::from(l >> 4) * 9,
        ord: u16::from(l & 3) * 5,
        rx_ulpdu_max_bytes: RX_ULPDU_MAX[usize::from(l >> 3 & 1) + usize::from(l >> 1 & 1)],
        tx_queue_len: 8,
        tx_ulpdu_max_bytes: 2048,
        handshake_timeout: Duration::from_millis(100),
        ..MpaConfig::default()
    }
}

/// A sink that records ULPDUs, checks their bounds, and refuses the `refuse_at`-th one.
#[derive(Debug, Default)]
struct Sink {
    got: Vec<Vec<u8>>,
    refuse_at: Option<usize>,
    refused: bool,
    max: usize,
}

impl Sink {
    fn new(max: usize, refuse_at: Option<usize>) -> Sink {
        Sink {
            got: Vec::new(),
            refuse_at,
            refused: false,
            max,
        }
    }
}

impl UlpduSink for Sink {
    fn on_ulpdu(&mut self, ulpdu: &[u8]) -> Result<(), TermCode> {
        assert!(!self.refused, "a ULPDU after the sink refused one");
        assert!(
            ulpdu.len() >= MIN_ULPDU_LEN,
            "ULPDU of {} octets",
            ulpdu.len()
        );
        assert!(ulpdu.len() <= self.max, "ULPDU above the receive bound");
        if self.refuse_at == Some(self.got.len()) {
            self.refused = true;
            return Err(TermCode::DDP_LOCAL_CATASTROPHIC);
        }
        self.got.push(ulpdu.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_draws_every_policy() {
        let mut seen_crc = [false; 3];
        for k in 0..=255u8 {
            let cfg = config(&mut Cursor::new(&[k, k]));
            assert!(cfg.revision == 1 || cfg.revision == 2);
            seen_crc[match cfg.crc {
                CrcPolicy::Request => 0,
                CrcPolicy::Off => 1,
                CrcPolicy::Forbid => 2,
            }] = true;
        }
        assert_eq!(seen_crc, [true; 3]);
    }

    /// The seeds made from the captures reach FPDU mode and deliver ULPDUs.
    #[test]
    fn capture_and_pair_seeds_deliver_ulpdus() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/mpa_stream");
        let mut delivered = std::collections::HashMap::new();
        for e in std::fs::read_dir(dir).expect("corpus").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let kind = name.split('-').next().unwrap_or("").to_string();
            let n = run(&std::fs::read(e.path()).expect("file"));
            *delivered.entry(kind).or_insert(0) += n;
        }
        for kind in ["responder", "initiator", "pair"] {
            assert!(
                delivered.get(kind).copied().unwrap_or(0) > 0,
                "{kind} seeds deliver nothing: {delivered:?}"
            );
        }
    }

    #[test]
    fn sink_refuses_once_and_checks_bounds() {
        let mut s = Sink::new(64, Some(1));
        assert_eq!(s.on_ulpdu(&[0u8; 14]), Ok(()));
        assert!(s.on_ulpdu(&[0u8; 14]).is_err());
        assert!(s.refused);
        assert_eq!(s.got.len(), 1);
    }
}
