//! `[mpa]`: MPA defaults of every connection (RFC 5044, RFC 6581).

use iwarp_mpa::{CrcPolicy, MarkerPolicy, MpaConfig, RtrSet, MIN_ULPDU_LEN};
use iwarp_types::Duration;
use iwarp_wire::mpa::{PRIVATE_DATA_MAX, ULPDU_MAX_LEN};
use serde::{Deserialize, Serialize};

use crate::error::{ensure, ConfigError};
use crate::limits::IRD_ORD_MAX;

/// Whether MPA CRC is used (RFC 5044 section 7.1: it is when either side sets C).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrcMode {
    /// Ask for CRC: it is used on every connection (default).
    #[default]
    Request,
    /// Do not ask, use it if the peer asks.
    Off,
    /// Never use it; refuse a peer that asks (not RFC behaviour; interop tests only).
    Forbid,
}

/// Whether markers are asked for in the stream we receive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarkerMode {
    /// Do not ask; insert them if the peer asks (default).
    #[default]
    Off,
    /// Ask for them; insert them if the peer asks.
    Request,
    /// Do not ask and refuse a peer that asks (what Linux siw does).
    Refuse,
}

/// A ready-to-receive message type (RFC 6581).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtrKind {
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send (accepted from an initiator, never offered by us).
    Send,
}

/// `[mpa]`: the MPA parameters of every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MpaSection {
    /// MPA revision we speak: 1 (RFC 5044) or 2 (RFC 6581).
    pub revision: u8,
    /// CRC: `request`, `off` or `forbid`.
    pub crc: CrcMode,
    /// Markers: `off`, `request` or `refuse`.
    pub markers: MarkerMode,
    /// Initiators ask for peer-to-peer mode (RFC 6581, revision 2 only): the initiator
    /// sends a ready-to-receive message before any other FPDU.
    pub p2p: bool,
    /// RTR types offered (initiator; never `send`) and accepted (responder, preferring
    /// write, then read, then send).
    pub rtr: Vec<RtrKind>,
    /// IRD an initiator offers in its Request (at most `limits.max_ird`).
    pub ird: u16,
    /// ORD an initiator offers in its Request (at most `limits.max_ord`).
    pub ord: u16,
    /// Largest private data exchanged in the handshake (at most 512 bytes).
    pub private_data_max: u32,
    /// How long to wait for the peer's Request or Reply, milliseconds.
    pub handshake_timeout_ms: u64,
    /// How long an FPDU begun may go without another octet before the stream is
    /// declared lost (Terminate 0x2001), milliseconds; 0 = never.
    pub fpdu_stall_timeout_ms: u64,
    /// FPDUs queued or unacknowledged per connection.
    pub tx_queue_len: u32,
    /// Largest ULPDU we send (FPDUs follow the MSS; this sizes a scratch buffer).
    pub tx_ulpdu_max_bytes: u32,
    /// Largest inbound ULPDU; a peer sending longer FPDUs gets a Terminate.
    pub rx_ulpdu_max_bytes: u32,
    /// A responder sends no FPDU before it received one (RFC 5044 section 7.1.2).
    pub responder_waits_for_first_fpdu: bool,
    /// Initiator: first check for a silent responder, milliseconds after RDMA mode began
    /// (then 4, 16, 64 times as long); a QP that sent and received nothing sends a
    /// zero-length RDMA Write. 0 = off.
    pub initiator_nudge_ms: u64,
    /// FPDU rings the engine's MPA pool lends at once (connections with FPDUs in flight);
    /// a connection finding none waits until one comes back.
    pub pool_rings: u32,
    /// Receive staging buffers the pool lends at once (connections in the middle of an
    /// FPDU that straddles segments).
    pub pool_staging: u32,
    /// Place a whole FPDU's payload in the pass that computes its CRC, then check it
    /// (one pass over received bytes, as Linux siw; see `MpaConfig::place_before_crc`
    /// for what a CRC error then leaves in memory). Default off.
    pub place_before_crc: bool,
}

impl Default for MpaSection {
    fn default() -> MpaSection {
        MpaSection {
            revision: 2,
            crc: CrcMode::Request,
            markers: MarkerMode::Off,
            p2p: true,
            rtr: vec![RtrKind::Write, RtrKind::Read],
            ird: 16,
            ord: 16,
            private_data_max: PRIVATE_DATA_MAX as u32,
            handshake_timeout_ms: 10_000,
            fpdu_stall_timeout_ms: 240_000,
            tx_queue_len: iwarp_engine::config::DEFAULT_MPA_TX_QUEUE_LEN as u32,
            tx_ulpdu_max_bytes: 16 * 1024,
            rx_ulpdu_max_bytes: iwarp_engine::config::DEFAULT_MPA_RX_ULPDU_BYTES as u32,
            responder_waits_for_first_fpdu: true,
            initiator_nudge_ms: iwarp_engine::config::DEFAULT_INITIATOR_NUDGE_MS,
            pool_rings: iwarp_engine::config::DEFAULT_MPA_POOL_RINGS as u32,
            pool_staging: iwarp_engine::config::DEFAULT_MPA_POOL_STAGING as u32,
            place_before_crc: false,
        }
    }
}

impl MpaSection {
    /// The engine's MPA configuration.
    pub fn mpa_config(&self) -> MpaConfig {
        let rtr = self.rtr.iter().fold(RtrSet::NONE, |set, k| {
            set.union(match k {
                RtrKind::Write => RtrSet::WRITE,
                RtrKind::Read => RtrSet::READ,
                RtrKind::Send => RtrSet::SEND,
            })
        });
        MpaConfig {
            revision: self.revision,
            crc: match self.crc {
                CrcMode::Request => CrcPolicy::Request,
                CrcMode::Off => CrcPolicy::Off,
                CrcMode::Forbid => CrcPolicy::Forbid,
            },
            markers: match self.markers {
                MarkerMode::Off => MarkerPolicy::Off,
                MarkerMode::Request => MarkerPolicy::Request,
                MarkerMode::Refuse => MarkerPolicy::Refuse,
            },
            p2p: self.p2p,
            rtr,
            ird: self.ird,
            ord: self.ord,
            private_data_max: self.private_data_max as usize,
            handshake_timeout: Duration::from_millis(self.handshake_timeout_ms),
            fpdu_stall_timeout: Duration::from_millis(self.fpdu_stall_timeout_ms),
            tx_queue_len: self.tx_queue_len as usize,
            tx_ulpdu_max_bytes: self.tx_ulpdu_max_bytes as usize,
            rx_ulpdu_max_bytes: self.rx_ulpdu_max_bytes as usize,
            responder_waits_for_first_fpdu: self.responder_waits_for_first_fpdu,
            place_before_crc: self.place_before_crc,
        }
    }

    /// Checks the section; `max_ird`/`max_ord` are the `[limits]` bounds.
    pub(crate) fn validate(&self, max_ird: u32, max_ord: u32) -> Result<(), ConfigError> {
        ensure(
            (1..=2).contains(&self.revision),
            "mpa.revision",
            "must be 1 (RFC 5044) or 2 (RFC 6581)",
        )?;
        ensure(
            !self.p2p || self.revision == 2,
            "mpa.p2p",
            "peer-to-peer mode needs revision 2",
        )?;
        for (i, k) in self.rtr.iter().enumerate() {
            ensure(
                !self.rtr[..i].contains(k),
                "mpa.rtr",
                format!("`{k:?}` is listed twice"),
            )?;
        }
        let offerable = self.rtr.iter().any(|k| *k != RtrKind::Send);
        ensure(
            !self.p2p || offerable,
            "mpa.rtr",
            "peer-to-peer mode needs `write` or `read` among the RTR types",
        )?;
        ensure(
            u32::from(self.ird) <= max_ird.min(IRD_ORD_MAX),
            "mpa.ird",
            format!("must be at most limits.max_ird ({max_ird})"),
        )?;
        ensure(
            u32::from(self.ord) <= max_ord.min(IRD_ORD_MAX),
            "mpa.ord",
            format!("must be at most limits.max_ord ({max_ord})"),
        )?;
        ensure(
            self.private_data_max as usize <= PRIVATE_DATA_MAX,
            "mpa.private_data_max",
            format!("must be at most {PRIVATE_DATA_MAX}"),
        )?;
        ensure(
            (1..=600_000).contains(&self.handshake_timeout_ms),
            "mpa.handshake_timeout_ms",
            "must be in 1..=600000",
        )?;
        ensure(
            self.fpdu_stall_timeout_ms == 0
                || (1_000..=3_600_000).contains(&self.fpdu_stall_timeout_ms),
            "mpa.fpdu_stall_timeout_ms",
            "must be 0 (never) or in 1000..=3600000",
        )?;
        ensure(
            self.initiator_nudge_ms <= iwarp_engine::config::INITIATOR_NUDGE_MS_MAX,
            "mpa.initiator_nudge_ms",
            "must be in 0..=60000 (0 = off)",
        )?;
        ensure(
            (1..=1 << 16).contains(&self.tx_queue_len),
            "mpa.tx_queue_len",
            "must be in 1..=65536",
        )?;
        for (key, v) in [
            ("pool_rings", self.pool_rings),
            ("pool_staging", self.pool_staging),
        ] {
            ensure(
                (1..=1 << 20).contains(&v),
                format!("mpa.{key}"),
                format!("{v} is outside 1..=1048576"),
            )?;
        }
        let ulpdu = MIN_ULPDU_LEN as u32..=ULPDU_MAX_LEN as u32;
        for (key, v) in [
            ("tx_ulpdu_max_bytes", self.tx_ulpdu_max_bytes),
            ("rx_ulpdu_max_bytes", self.rx_ulpdu_max_bytes),
        ] {
            ensure(
                ulpdu.contains(&v),
                format!("mpa.{key}"),
                format!("{v} is outside {}..={}", ulpdu.start(), ulpdu.end()),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(f: impl FnOnce(&mut MpaSection)) -> String {
        let mut m = MpaSection::default();
        f(&mut m);
        m.validate(16, 16).unwrap_err().field
    }

    #[test]
    fn rules_name_their_field() {
        MpaSection::default().validate(16, 16).unwrap();
        assert_eq!(err(|m| m.revision = 3), "mpa.revision");
        assert_eq!(
            err(|m| {
                m.revision = 1;
                m.p2p = true;
            }),
            "mpa.p2p"
        );
        assert_eq!(err(|m| m.rtr = vec![RtrKind::Send]), "mpa.rtr");
        assert_eq!(
            err(|m| m.rtr = vec![RtrKind::Read, RtrKind::Read]),
            "mpa.rtr"
        );
        assert_eq!(err(|m| m.ird = 17), "mpa.ird");
        assert_eq!(err(|m| m.ord = 17), "mpa.ord");
        assert_eq!(err(|m| m.private_data_max = 513), "mpa.private_data_max");
        assert_eq!(
            err(|m| m.handshake_timeout_ms = 0),
            "mpa.handshake_timeout_ms"
        );
        assert_eq!(err(|m| m.tx_queue_len = 0), "mpa.tx_queue_len");
        assert_eq!(
            err(|m| m.initiator_nudge_ms = 60_001),
            "mpa.initiator_nudge_ms"
        );
        assert_eq!(
            err(|m| m.tx_ulpdu_max_bytes = 70_000),
            "mpa.tx_ulpdu_max_bytes"
        );
        assert_eq!(err(|m| m.rx_ulpdu_max_bytes = 1), "mpa.rx_ulpdu_max_bytes");
        assert_eq!(err(|m| m.pool_rings = 0), "mpa.pool_rings");
        assert_eq!(err(|m| m.pool_staging = 0), "mpa.pool_staging");
        let m = MpaSection {
            revision: 1,
            p2p: false,
            rtr: vec![],
            ..MpaSection::default()
        };
        m.validate(16, 16).unwrap();
    }

    #[test]
    fn maps_onto_the_engine() {
        let m = MpaSection {
            crc: CrcMode::Forbid,
            markers: MarkerMode::Refuse,
            rtr: vec![RtrKind::Read, RtrKind::Send],
            handshake_timeout_ms: 1500,
            ..MpaSection::default()
        };
        let c = m.mpa_config();
        assert_eq!(c.crc, CrcPolicy::Forbid);
        assert_eq!(c.markers, MarkerPolicy::Refuse);
        assert_eq!(c.rtr, RtrSet::READ.union(RtrSet::SEND));
        assert_eq!(c.handshake_timeout, Duration::from_millis(1500));
        assert!(c.p2p);
        assert_eq!(c.revision, 2);
    }
}
