//! Why a DDP/RDMAP header is refused, and the Terminate code each reason calls for.

use core::fmt;

use iwarp_types::TermCode;

use crate::rdmap::Opcode;
use crate::WireError;

/// Why a DDP/RDMAP header was refused. Each reason maps to the Terminate code the receiver
/// sends ([`DdpError::term_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DdpError {
    /// Shorter than the header its T flag announces (or than the RDMAP header its opcode
    /// requires).
    Truncated,
    /// DV is not [`DDP_VERSION`](crate::ddp::DDP_VERSION); `tagged` is the segment's T flag.
    DdpVersion {
        /// The T flag of the refused segment.
        tagged: bool,
        /// The version found.
        version: u8,
    },
    /// RV is not [`RDMAP_VERSION`](crate::ddp::RDMAP_VERSION).
    RdmapVersion {
        /// The version found.
        version: u8,
    },
    /// Opcode 8..15 (reserved in RFC 5040).
    ReservedOpcode {
        /// The opcode found.
        opcode: u8,
    },
    /// The opcode requires the other buffer model (for example an RDMA Write with T = 0).
    OpcodeModel {
        /// The opcode found.
        opcode: Opcode,
        /// The T flag found.
        tagged: bool,
    },
    /// A message that carries no ULP payload (Read Request) is longer than its header.
    TrailingBytes,
}

impl DdpError {
    /// The Terminate code to send for this error: DDP version → 0x1104 (tagged) or 0x1206
    /// (untagged), RDMAP version → 0x0205, opcode → 0x0206, length → 0x1000 (DDP local
    /// catastrophic, the verbs spec's "segment size invalid").
    pub const fn term_code(self) -> TermCode {
        match self {
            DdpError::Truncated | DdpError::TrailingBytes => TermCode::DDP_LOCAL_CATASTROPHIC,
            DdpError::DdpVersion { tagged: true, .. } => TermCode::DDP_TAGGED_INVALID_VERSION,
            DdpError::DdpVersion { tagged: false, .. } => TermCode::DDP_UNTAGGED_INVALID_VERSION,
            DdpError::RdmapVersion { .. } => TermCode::RDMAP_INVALID_VERSION,
            DdpError::ReservedOpcode { .. } | DdpError::OpcodeModel { .. } => {
                TermCode::RDMAP_UNEXPECTED_OPCODE
            }
        }
    }
}

impl From<DdpError> for WireError {
    fn from(e: DdpError) -> WireError {
        match e {
            DdpError::Truncated => WireError::Truncated,
            _ => WireError::Malformed,
        }
    }
}

impl fmt::Display for DdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DdpError::Truncated => write!(f, "DDP segment truncated"),
            DdpError::DdpVersion { tagged, version } => {
                write!(f, "DDP version {version} (tagged={tagged})")
            }
            DdpError::RdmapVersion { version } => write!(f, "RDMAP version {version}"),
            DdpError::ReservedOpcode { opcode } => write!(f, "reserved RDMAP opcode {opcode}"),
            DdpError::OpcodeModel { opcode, tagged } => {
                write!(f, "opcode {opcode} with T={}", u8::from(tagged))
            }
            DdpError::TrailingBytes => write!(f, "bytes after a header-only message"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_codes() {
        let t = |e: DdpError| e.term_code().as_u16();
        assert_eq!(
            t(DdpError::DdpVersion {
                tagged: true,
                version: 0
            }),
            0x1104
        );
        assert_eq!(
            t(DdpError::DdpVersion {
                tagged: false,
                version: 2
            }),
            0x1206
        );
        assert_eq!(t(DdpError::RdmapVersion { version: 0 }), 0x0205);
        assert_eq!(t(DdpError::ReservedOpcode { opcode: 9 }), 0x0206);
        let model = DdpError::OpcodeModel {
            opcode: Opcode::Send,
            tagged: true,
        };
        assert_eq!(t(model), 0x0206);
        assert_eq!(t(DdpError::Truncated), 0x1000);
        assert_eq!(t(DdpError::TrailingBytes), 0x1000);
    }

    #[test]
    fn wire_error_and_display() {
        assert_eq!(WireError::from(DdpError::Truncated), WireError::Truncated);
        assert_eq!(
            WireError::from(DdpError::TrailingBytes),
            WireError::Malformed
        );
        assert_eq!(
            DdpError::RdmapVersion { version: 0 }.to_string(),
            "RDMAP version 0"
        );
        let model = DdpError::OpcodeModel {
            opcode: Opcode::Write,
            tagged: false,
        };
        assert_eq!(model.to_string(), "opcode Write with T=0");
    }
}
