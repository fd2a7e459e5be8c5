//! Terminate error codes: RFC 5040 section 4.8 (figure 9), RFC 5041 section 7.2,
//! RFC 5044 section 8 (checked against Linux siw `iwarp.h`).

/// The layer that detected the error (Terminate Control, first nibble).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TermLayer {
    /// RDMAP.
    Rdmap = 0,
    /// DDP.
    Ddp = 1,
    /// The LLP (MPA).
    Llp = 2,
}

/// A Terminate error: layer (4 bits), error type (4 bits), error code (8 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// Layer.
    pub layer: u8,
    /// Error type.
    pub etype: u8,
    /// Error code.
    pub ecode: u8,
}

impl TermCode {
    const fn new(layer: TermLayer, etype: u8, ecode: u8) -> TermCode {
        TermCode {
            layer: layer as u8,
            etype,
            ecode,
        }
    }

    /// The 16-bit value `layer << 12 | etype << 8 | ecode` (the verbs spec's notation,
    /// e.g. 0x1100).
    pub const fn as_u16(self) -> u16 {
        ((self.layer as u16 & 0xf) << 12) | ((self.etype as u16 & 0xf) << 8) | self.ecode as u16
    }

    /// A protection error at the peer: RDMAP Remote Protection Error (error type 1) or
    /// a DDP Tagged Buffer Error other than an invalid version (RFC 5040 figure 9,
    /// RFC 5041 section 7.2): an STag, bounds, rights or wrap fault, what a provider
    /// reports as a remote access error (`IBV_WC_REM_ACCESS_ERR`).
    pub const fn is_remote_protection(self) -> bool {
        (self.layer == TermLayer::Rdmap as u8 && self.etype == 1)
            || (self.layer == TermLayer::Ddp as u8 && self.etype == 1 && self.ecode != 0x04)
    }

    /// From the 16-bit notation.
    pub const fn from_u16(v: u16) -> TermCode {
        TermCode {
            layer: (v >> 12) as u8 & 0xf,
            etype: (v >> 8) as u8 & 0xf,
            ecode: v as u8,
        }
    }

    // --- RDMAP layer (RFC 5040 figure 9) ---
    /// Local catastrophic error.
    pub const RDMAP_LOCAL_CATASTROPHIC: TermCode = TermCode::new(TermLayer::Rdmap, 0, 0x00);
    /// Remote protection error: invalid STag.
    pub const RDMAP_INVALID_STAG: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x00);
    /// Remote protection error: base or bounds violation.
    pub const RDMAP_BASE_BOUNDS: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x01);
    /// Remote protection error: access rights violation.
    pub const RDMAP_ACCESS_RIGHTS: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x02);
    /// Remote protection error: STag not associated with RDMAP stream.
    pub const RDMAP_STAG_NOT_ASSOCIATED: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x03);
    /// Remote protection error: TO wrap.
    pub const RDMAP_TO_WRAP: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x04);
    /// Remote protection error: STag cannot be invalidated.
    pub const RDMAP_PROT_CANNOT_INVALIDATE: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x09);
    /// Remote protection error: unspecified.
    pub const RDMAP_PROT_UNSPECIFIED: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0xff);
    /// Remote operation error: invalid RDMAP version.
    pub const RDMAP_INVALID_VERSION: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x05);
    /// Remote operation error: unexpected opcode.
    pub const RDMAP_UNEXPECTED_OPCODE: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x06);
    /// Remote operation error: catastrophic error localized to the RDMAP stream.
    pub const RDMAP_CATASTROPHIC_STREAM: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x07);
    /// Remote operation error: catastrophic error, global.
    pub const RDMAP_CATASTROPHIC_GLOBAL: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x08);
    /// Remote operation error: STag cannot be invalidated.
    pub const RDMAP_OP_CANNOT_INVALIDATE: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x09);
    /// Remote operation error: unspecified.
    pub const RDMAP_OP_UNSPECIFIED: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0xff);

    // --- DDP layer (RFC 5041 section 7.2) ---
    /// Local catastrophic.
    pub const DDP_LOCAL_CATASTROPHIC: TermCode = TermCode::new(TermLayer::Ddp, 0, 0x00);
    /// Tagged buffer error: invalid STag.
    pub const DDP_TAGGED_INVALID_STAG: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x00);
    /// Tagged buffer error: base or bounds violation.
    pub const DDP_TAGGED_BASE_BOUNDS: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x01);
    /// Tagged buffer error: STag not associated with DDP stream.
    pub const DDP_TAGGED_STAG_NOT_ASSOCIATED: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x02);
    /// Tagged buffer error: TO wrap.
    pub const DDP_TAGGED_TO_WRAP: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x03);
    /// Tagged buffer error: invalid DDP version.
    pub const DDP_TAGGED_INVALID_VERSION: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x04);
    /// Untagged buffer error: invalid QN.
    pub const DDP_UNTAGGED_INVALID_QN: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x01);
    /// Untagged buffer error: invalid MSN, no buffer available.
    pub const DDP_UNTAGGED_NO_BUFFER: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x02);
    /// Untagged buffer error: invalid MSN, MSN range not valid.
    pub const DDP_UNTAGGED_MSN_RANGE: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x03);
    /// Untagged buffer error: invalid MO.
    pub const DDP_UNTAGGED_INVALID_MO: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x04);
    /// Untagged buffer error: message too long for the available buffer.
    pub const DDP_UNTAGGED_TOO_LONG: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x05);
    /// Untagged buffer error: invalid DDP version.
    pub const DDP_UNTAGGED_INVALID_VERSION: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x06);

    // --- LLP layer, MPA (RFC 5044 section 8, RFC 6581) ---
    /// TCP stream lost.
    pub const LLP_STREAM_LOST: TermCode = TermCode::new(TermLayer::Llp, 0, 0x01);
    /// MPA CRC error.
    pub const LLP_CRC: TermCode = TermCode::new(TermLayer::Llp, 0, 0x02);
    /// Marker and ULPDU length disagree on the FPDU start.
    pub const LLP_FPDU_START: TermCode = TermCode::new(TermLayer::Llp, 0, 0x03);
    /// Invalid MPA Request/Reply.
    pub const LLP_INVALID_REQ_RESP: TermCode = TermCode::new(TermLayer::Llp, 0, 0x04);
    /// Local catastrophic (enhanced connection set-up).
    pub const LLP_LOCAL_CATASTROPHIC: TermCode = TermCode::new(TermLayer::Llp, 0, 0x05);
    /// Insufficient IRD resources (RFC 6581).
    pub const LLP_INSUFFICIENT_IRD: TermCode = TermCode::new(TermLayer::Llp, 0, 0x06);
    /// No matching RTR (RFC 6581).
    pub const LLP_NO_MATCHING_RTR: TermCode = TermCode::new(TermLayer::Llp, 0, 0x07);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u16_notation() {
        assert_eq!(TermCode::DDP_TAGGED_INVALID_STAG.as_u16(), 0x1100);
        assert_eq!(TermCode::DDP_UNTAGGED_NO_BUFFER.as_u16(), 0x1202);
        assert_eq!(TermCode::RDMAP_TO_WRAP.as_u16(), 0x0104);
        assert_eq!(TermCode::LLP_CRC.as_u16(), 0x2002);
        assert_eq!(
            TermCode::from_u16(0x0206),
            TermCode::RDMAP_UNEXPECTED_OPCODE
        );
    }

    #[test]
    fn protection_errors_are_the_remote_access_class() {
        for c in [
            TermCode::RDMAP_INVALID_STAG,
            TermCode::RDMAP_BASE_BOUNDS,
            TermCode::RDMAP_ACCESS_RIGHTS,
            TermCode::RDMAP_STAG_NOT_ASSOCIATED,
            TermCode::RDMAP_TO_WRAP,
            TermCode::RDMAP_PROT_UNSPECIFIED,
            TermCode::DDP_TAGGED_INVALID_STAG,
            TermCode::DDP_TAGGED_BASE_BOUNDS,
            TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
            TermCode::DDP_TAGGED_TO_WRAP,
        ] {
            assert!(c.is_remote_protection(), "{c:?}");
        }
        for c in [
            TermCode::DDP_TAGGED_INVALID_VERSION,
            TermCode::DDP_UNTAGGED_NO_BUFFER,
            TermCode::DDP_UNTAGGED_TOO_LONG,
            TermCode::RDMAP_UNEXPECTED_OPCODE,
            TermCode::RDMAP_LOCAL_CATASTROPHIC,
            TermCode::LLP_CRC,
        ] {
            assert!(!c.is_remote_protection(), "{c:?}");
        }
    }
}
