//! The Terminate header (RFC 5040 section 4.8, figures 7 and 8): the body after the
//! untagged DDP header of QN 2.
//!
//! ```text
//!   octet 0: Layer(4) | EType(4)   octet 1: Error Code
//!   octet 2: M 0x80 | D 0x40 | R 0x20 | reserved   octet 3: reserved
//!   [DDP Segment Length(2)] [Terminated DDP header (14/18)] [Terminated RDMA header (28)]
//! ```
//!
//! The segment length is present when M or D is set, the copied DDP header when D is set,
//! the copied Read Request header when R is set (as Linux siw lays them out).
//!
//! Linux siw writes the Terminate Control word with little-endian C bitfields, so its bytes
//! differ from the RFC's: see [`TermControl::parse_siw`] and [`looks_like_siw_bitfields`].

use core::fmt;

use iwarp_types::TermCode;

use super::read_request::{ReadRequest, ReadRequestRepr, READ_REQUEST_LEN};
use super::Opcode;
use crate::ddp::{self, be16, DdpError};

/// Length of the Terminate Control word (control + reserved).
pub const TERM_CONTROL_LEN: usize = 4;
/// Longest Terminate header: control(4) + segment length(2) + untagged DDP header(18) +
/// Read Request header(28).
pub const MAX_TERMINATE_LEN: usize =
    TERM_CONTROL_LEN + 2 + ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_LEN;

/// Terminate octet 2: DDP Segment Length valid.
pub const TERM_FLG_M: u8 = 0x80;
/// Terminate octet 2: Terminated DDP header included.
pub const TERM_FLG_D: u8 = 0x40;
/// Terminate octet 2: Terminated RDMA header included.
pub const TERM_FLG_R: u8 = 0x20;

/// The Terminate Control field: the error and the header-control flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermControl {
    /// Layer, error type, error code.
    pub code: TermCode,
    /// M: DDP Segment Length valid.
    pub m: bool,
    /// D: Terminated DDP header included.
    pub d: bool,
    /// R: Terminated RDMA header included.
    pub r: bool,
}

impl TermControl {
    /// Decodes the first 4 octets as RFC 5040 figure 8 lays them out (reserved bits
    /// ignored).
    pub const fn parse(b: [u8; 4]) -> TermControl {
        TermControl {
            code: TermCode {
                layer: b[0] >> 4,
                etype: b[0] & 0x0f,
                ecode: b[1],
            },
            m: b[2] & TERM_FLG_M != 0,
            d: b[2] & TERM_FLG_D != 0,
            r: b[2] & TERM_FLG_R != 0,
        }
    }

    /// Decodes the first 4 octets as Linux siw sends them: its little-endian bitfields put
    /// the layer in the low nibble of octet 0, the error type in the high nibble, and
    /// M/D/R in bits 0x01/0x02/0x04 of octet 2.
    pub const fn parse_siw(b: [u8; 4]) -> TermControl {
        TermControl {
            code: TermCode {
                layer: b[0] & 0x0f,
                etype: b[0] >> 4,
                ecode: b[1],
            },
            m: b[2] & 0x01 != 0,
            d: b[2] & 0x02 != 0,
            r: b[2] & 0x04 != 0,
        }
    }

    /// The 4 octets, RFC layout, reserved bits zero.
    pub const fn to_bytes(self) -> [u8; 4] {
        let mut flags = 0;
        if self.m {
            flags |= TERM_FLG_M;
        }
        if self.d {
            flags |= TERM_FLG_D;
        }
        if self.r {
            flags |= TERM_FLG_R;
        }
        [
            ((self.code.layer & 0xf) << 4) | (self.code.etype & 0xf),
            self.code.ecode,
            flags,
            0,
        ]
    }
}

/// The layer/type/code triple is one RFC 5040/5041/5044/6581 defines (RDMAP local
/// catastrophic accepts any code, as figure 9 says).
pub const fn is_defined_term_code(c: TermCode) -> bool {
    match (c.layer, c.etype) {
        (0, 0) => true,
        (0, 1) => matches!(c.ecode, 0x00..=0x04 | 0x09 | 0xff),
        (0, 2) => matches!(c.ecode, 0x05..=0x09 | 0xff),
        (1, 0) => c.ecode == 0,
        (1, 1) => c.ecode <= 0x04,
        (1, 2) => matches!(c.ecode, 0x01..=0x06),
        (2, 0) => matches!(c.ecode, 0x01..=0x07),
        _ => false,
    }
}

/// Heuristic: the Terminate header (at least its 4 control octets) looks as if it was
/// written by Linux siw's little-endian bitfields rather than in RFC order.
///
/// True when siw's flag bits (0x07 of octet 2) are set while the RFC's (0xe0) are clear and
/// the siw reading is a defined code; or, with no flag set either way, when only the
/// nibble-swapped reading is a defined code. For surfacing only: never used to decide what
/// to place.
pub fn looks_like_siw_bitfields(bytes: &[u8]) -> bool {
    let Some(b) = bytes.get(..TERM_CONTROL_LEN) else {
        return false;
    };
    let b = [b[0], b[1], b[2], b[3]];
    let rfc = TermControl::parse(b);
    let siw = TermControl::parse_siw(b);
    let siw_ok = is_defined_term_code(siw.code);
    if b[2] & 0xe0 != 0 {
        return false;
    }
    if b[2] & 0x07 != 0 {
        return siw_ok;
    }
    siw_ok && !is_defined_term_code(rfc.code)
}

/// A copy of the DDP header of the segment a Terminate is about (14 or 18 octets, kept raw:
/// it may be the malformed header that caused the Terminate).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopiedDdpHeader {
    bytes: [u8; ddp::MAX_HEADER_LEN],
    len: u8,
}

impl CopiedDdpHeader {
    /// Copies the header at the start of `segment`: 14 octets if its T flag is set, else 18.
    pub fn from_segment(segment: &[u8]) -> crate::Result<CopiedDdpHeader> {
        let ctrl = *segment.first().ok_or(crate::WireError::Truncated)?;
        let len = ddp::header_len_for(ctrl);
        let src = segment.get(..len).ok_or(crate::WireError::Truncated)?;
        let mut bytes = [0u8; ddp::MAX_HEADER_LEN];
        bytes[..len].copy_from_slice(src);
        Ok(CopiedDdpHeader {
            bytes,
            len: len as u8,
        })
    }

    /// From a header repr.
    pub fn from_repr(repr: &ddp::Repr) -> CopiedDdpHeader {
        let mut bytes = [0u8; ddp::MAX_HEADER_LEN];
        let len = repr.emit_bytes(&mut bytes);
        CopiedDdpHeader {
            bytes,
            len: len as u8,
        }
    }

    /// The copied octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Decodes the copy (fails if the copied header itself was bad).
    pub fn parse(&self) -> Result<ddp::Repr, DdpError> {
        ddp::Repr::parse_bytes(self.as_bytes())
    }
}

impl fmt::Debug for CopiedDdpHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CopiedDdpHeader({:02x?})", self.as_bytes())
    }
}

impl fmt::Display for CopiedDdpHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parse() {
            Ok(r) => write!(f, "{r}"),
            Err(_) => write!(f, "{:02x?}", self.as_bytes()),
        }
    }
}

/// A Terminate header (the body after the untagged DDP header of QN 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateRepr {
    /// Layer, error type and error code.
    pub code: TermCode,
    /// DDP Segment Length, when valid (M flag).
    pub ddp_segment_len: Option<u16>,
    /// Terminated DDP header (D flag).
    pub ddp_header: Option<CopiedDdpHeader>,
    /// Terminated RDMA header (R flag): only for a Terminate about a Read Request.
    pub rdma_header: Option<ReadRequestRepr>,
}

impl TerminateRepr {
    /// A Terminate with only the error (local errors, RFC 5040 section 7.1 case 1).
    pub const fn bare(code: TermCode) -> TerminateRepr {
        TerminateRepr {
            code,
            ddp_segment_len: None,
            ddp_header: None,
            rdma_header: None,
        }
    }

    /// A Terminate about an inbound segment: segment length (M), its DDP header (D) and,
    /// for a Read Request, its RDMAP header (R). `segment` is the whole DDP segment.
    pub fn about_segment(code: TermCode, segment: &[u8]) -> TerminateRepr {
        let Ok(hdr) = CopiedDdpHeader::from_segment(segment) else {
            return TerminateRepr::bare(code);
        };
        let seg_len = segment.len().saturating_sub(hdr.as_bytes().len());
        let is_read_req = hdr.parse().is_ok_and(|r| r.opcode == Opcode::ReadRequest);
        let rdma_header = if is_read_req {
            segment
                .get(hdr.as_bytes().len()..)
                .and_then(|b| ReadRequestRepr::parse_bytes(b).ok())
        } else {
            None
        };
        TerminateRepr {
            code,
            ddp_segment_len: Some(u16::try_from(seg_len).unwrap_or(u16::MAX)),
            ddp_header: Some(hdr),
            rdma_header,
        }
    }

    /// The control word this repr emits.
    pub const fn control(&self) -> TermControl {
        TermControl {
            code: self.code,
            m: self.ddp_segment_len.is_some(),
            d: self.ddp_header.is_some(),
            r: self.rdma_header.is_some(),
        }
    }

    /// Parses a Terminate header laid out as RFC 5040 says.
    pub fn parse(bytes: &[u8]) -> crate::Result<TerminateRepr> {
        let b = bytes
            .get(..TERM_CONTROL_LEN)
            .ok_or(crate::WireError::Truncated)?;
        let ctl = TermControl::parse([b[0], b[1], b[2], b[3]]);
        TerminateRepr::parse_rest(ctl, bytes)
    }

    /// Parses a Terminate header as Linux siw sends it (control word in its bitfield
    /// order; the rest is laid out as the RFC says).
    pub fn parse_siw(bytes: &[u8]) -> crate::Result<TerminateRepr> {
        let b = bytes
            .get(..TERM_CONTROL_LEN)
            .ok_or(crate::WireError::Truncated)?;
        let ctl = TermControl::parse_siw([b[0], b[1], b[2], b[3]]);
        TerminateRepr::parse_rest(ctl, bytes)
    }

    /// Parses with [`TerminateRepr::parse_siw`] when [`looks_like_siw_bitfields`] says so,
    /// else as the RFC says. Returns the repr and whether the siw reading was used.
    pub fn parse_any(bytes: &[u8]) -> crate::Result<(TerminateRepr, bool)> {
        if looks_like_siw_bitfields(bytes) {
            Ok((TerminateRepr::parse_siw(bytes)?, true))
        } else {
            Ok((TerminateRepr::parse(bytes)?, false))
        }
    }

    fn parse_rest(ctl: TermControl, bytes: &[u8]) -> crate::Result<TerminateRepr> {
        let mut off = TERM_CONTROL_LEN;
        let mut ddp_segment_len = None;
        let mut ddp_header = None;
        let mut rdma_header = None;
        if ctl.m || ctl.d {
            let b = bytes.get(off..off + 2).ok_or(crate::WireError::Truncated)?;
            if ctl.m {
                ddp_segment_len = Some(be16(b));
            }
            off += 2;
        }
        if ctl.d {
            let rest = bytes.get(off..).ok_or(crate::WireError::Truncated)?;
            let hdr = CopiedDdpHeader::from_segment(rest)?;
            off += hdr.as_bytes().len();
            ddp_header = Some(hdr);
        }
        if ctl.r {
            let rest = bytes.get(off..).unwrap_or(&[]);
            match ReadRequestRepr::parse_bytes(rest) {
                Ok(r) => rdma_header = Some(r),
                // siw sets R for Send-with-Invalidate protection errors but appends no RDMA
                // header: tolerate R without one unless the copied header is a Read Request.
                Err(e) => {
                    let is_rreq = ddp_header
                        .map(|h| h.parse().is_ok_and(|r| r.opcode == Opcode::ReadRequest))
                        .unwrap_or(true);
                    if is_rreq {
                        return Err(e);
                    }
                }
            }
        }
        Ok(TerminateRepr {
            code: ctl.code,
            ddp_segment_len,
            ddp_header,
            rdma_header,
        })
    }

    /// Emitted length.
    pub fn buffer_len(&self) -> usize {
        let mut n = TERM_CONTROL_LEN;
        if self.ddp_segment_len.is_some() || self.ddp_header.is_some() {
            n += 2;
        }
        if let Some(h) = &self.ddp_header {
            n += h.as_bytes().len();
        }
        if self.rdma_header.is_some() {
            n += READ_REQUEST_LEN;
        }
        n
    }

    /// Writes the header into `buf[..self.buffer_len()]` (RFC layout) and returns the
    /// length. The segment length field is zero when present but not valid (D without M).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        buf[..TERM_CONTROL_LEN].copy_from_slice(&self.control().to_bytes());
        let mut off = TERM_CONTROL_LEN;
        if self.ddp_segment_len.is_some() || self.ddp_header.is_some() {
            let v = self.ddp_segment_len.unwrap_or(0);
            buf[off..off + 2].copy_from_slice(&v.to_be_bytes());
            off += 2;
        }
        if let Some(h) = &self.ddp_header {
            let b = h.as_bytes();
            buf[off..off + b.len()].copy_from_slice(b);
            off += b.len();
        }
        if let Some(r) = &self.rdma_header {
            r.emit(&mut ReadRequest::new_unchecked(
                &mut buf[off..off + READ_REQUEST_LEN],
            ));
            off += READ_REQUEST_LEN;
        }
        off
    }
}

impl fmt::Display for TerminateRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Terminate code={:#06x}", self.code.as_u16())?;
        if let Some(l) = self.ddp_segment_len {
            write!(f, " seg_len={l}")?;
        }
        if let Some(h) = &self.ddp_header {
            write!(f, " [{h}]")?;
        }
        if let Some(r) = &self.rdma_header {
            write!(f, " [{r}]")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::Model;
    use crate::rdmap::test_vectors::{rr, READ_REQ, TERM_RFC, TERM_SIW};
    use iwarp_types::Stag;

    #[test]
    fn terminate_rfc_trio() {
        let t = TerminateRepr::parse(&TERM_RFC).unwrap();
        assert_eq!(t.code, TermCode::DDP_UNTAGGED_NO_BUFFER);
        assert_eq!(t.ddp_segment_len, Some(1));
        let h = t.ddp_header.unwrap();
        assert_eq!(h.as_bytes(), &TERM_RFC[6..24]);
        let hr = h.parse().unwrap();
        assert_eq!(hr.opcode, Opcode::Send);
        assert_eq!(
            hr.model,
            Model::Untagged {
                inv_stag: Stag(0),
                qn: 0,
                msn: 5,
                mo: 0
            }
        );
        assert_eq!(t.rdma_header, None);

        let mut buf = [0xa5u8; 24];
        assert_eq!(t.buffer_len(), 24);
        assert_eq!(t.emit(&mut buf), 24);
        assert_eq!(buf, TERM_RFC);

        assert_eq!(
            TerminateRepr::parse(&TERM_RFC[..3]),
            Err(crate::WireError::Truncated)
        );
        assert_eq!(
            TerminateRepr::parse(&TERM_RFC[..5]),
            Err(crate::WireError::Truncated)
        );
        assert_eq!(
            TerminateRepr::parse(&TERM_RFC[..23]),
            Err(crate::WireError::Truncated)
        );
    }

    #[test]
    fn terminate_siw_decoding() {
        // An RFC reader sees an LLP error with an impossible type.
        let rfc = TermControl::parse([0x21, 0x02, 0x03, 0x00]);
        assert_eq!(rfc.code.as_u16(), 0x2102);
        assert!(!rfc.m && !rfc.d && !rfc.r);
        assert!(!is_defined_term_code(rfc.code));
        let siw = TermControl::parse_siw([0x21, 0x02, 0x03, 0x00]);
        assert_eq!(siw.code, TermCode::DDP_UNTAGGED_NO_BUFFER);
        assert!(siw.m && siw.d && !siw.r);

        assert!(looks_like_siw_bitfields(&TERM_SIW));
        assert!(!looks_like_siw_bitfields(&TERM_RFC));
        assert!(!looks_like_siw_bitfields(&TERM_SIW[..3]));
        let (t, was_siw) = TerminateRepr::parse_any(&TERM_SIW).unwrap();
        assert!(was_siw);
        assert_eq!(t, TerminateRepr::parse(&TERM_RFC).unwrap());
        assert_eq!(TerminateRepr::parse_siw(&TERM_SIW).unwrap(), t);
        let (t2, was_siw) = TerminateRepr::parse_any(&TERM_RFC).unwrap();
        assert!(!was_siw);
        assert_eq!(t2, t);

        // No flags: only the swapped reading is defined (DDP tagged invalid STag from siw
        // = 0x11 either way: ambiguous, so RFC; RDMAP remote op 0x0208 from siw = 0x20 0x08,
        // undefined as an LLP code; 0x20 0x06 reads as LLP 0x2006 too: ambiguous).
        assert!(!looks_like_siw_bitfields(&[0x11, 0x00, 0x00, 0x00]));
        assert!(looks_like_siw_bitfields(&[0x20, 0x08, 0x00, 0x00]));
        assert!(!looks_like_siw_bitfields(&[0x20, 0x06, 0x00, 0x00]));
        assert!(!looks_like_siw_bitfields(&[0x02, 0x06, 0x00, 0x00]));
        // LLP CRC error from siw: `02 02 00 00` reads as RDMAP remote operation 0x02 (not
        // defined) in RFC order, as 0x2002 (MPA CRC) swapped.
        assert!(looks_like_siw_bitfields(&[0x02, 0x02, 0x00, 0x00]));
        // RDMAP local catastrophic (all zero) is the same either way.
        assert!(!looks_like_siw_bitfields(&[0x00, 0x00, 0x00, 0x00]));
    }

    #[test]
    fn terminate_with_rdma_header() {
        let t = TerminateRepr::about_segment(TermCode::RDMAP_INVALID_STAG, &READ_REQ);
        assert_eq!(t.ddp_segment_len, Some(28));
        assert_eq!(t.ddp_header.unwrap().as_bytes(), &READ_REQ[..18]);
        assert_eq!(t.rdma_header, Some(rr()));
        let c = t.control();
        assert!(c.m && c.d && c.r);
        let mut buf = [0xa5u8; MAX_TERMINATE_LEN];
        let n = t.emit(&mut buf);
        assert_eq!(n, MAX_TERMINATE_LEN);
        assert_eq!(&buf[..4], &[0x01, 0x00, 0xe0, 0x00]);
        assert_eq!(&buf[4..6], &[0x00, 28]);
        assert_eq!(&buf[6..24], &READ_REQ[..18]);
        assert_eq!(&buf[24..52], &READ_REQ[18..]);
        assert_eq!(TerminateRepr::parse(&buf[..n]).unwrap(), t);
        // R set but the RDMA header is cut: error for a Read Request.
        assert_eq!(
            TerminateRepr::parse(&buf[..n - 1]),
            Err(crate::WireError::Truncated)
        );
    }

    #[test]
    fn terminate_siw_quirk_r_without_rdma_header() {
        // siw: remote protection on a Send with Invalidate sets M, D and R but copies only
        // the 18-octet Send header.
        let mut b = [0u8; 24];
        b[..4].copy_from_slice(&[0x10, 0x00, 0x07, 0x00]); // siw order: layer 0 etype 1
        b[4..6].copy_from_slice(&[0x00, 0x00]);
        b[6..24].copy_from_slice(&[
            0x41, 0x44, 0x00, 0x00, 0x12, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        ]);
        let (t, siw) = TerminateRepr::parse_any(&b).unwrap();
        assert!(siw);
        assert_eq!(t.code, TermCode::RDMAP_INVALID_STAG);
        assert_eq!(
            t.ddp_header.unwrap().parse().unwrap().opcode,
            Opcode::SendInv
        );
        assert_eq!(t.rdma_header, None);
    }

    #[test]
    fn terminate_bare_and_d_without_m() {
        let t = TerminateRepr::bare(TermCode::RDMAP_LOCAL_CATASTROPHIC);
        let mut buf = [0xa5u8; 4];
        assert_eq!(t.emit(&mut buf), 4);
        assert_eq!(buf, [0, 0, 0, 0]);
        assert_eq!(TerminateRepr::parse(&buf).unwrap(), t);

        let hdr = CopiedDdpHeader::from_segment(&READ_REQ).unwrap();
        let t = TerminateRepr {
            ddp_header: Some(hdr),
            ..TerminateRepr::bare(TermCode::LLP_CRC)
        };
        let mut buf = [0xa5u8; 24];
        assert_eq!(t.emit(&mut buf), 24);
        assert_eq!(&buf[..6], &[0x20, 0x02, 0x40, 0x00, 0x00, 0x00]);
        assert_eq!(TerminateRepr::parse(&buf).unwrap(), t);
    }

    #[test]
    fn copied_header_keeps_bad_bytes() {
        let bad = [0x82u8, 0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        let h = CopiedDdpHeader::from_segment(&bad).unwrap();
        assert_eq!(h.as_bytes(), &bad);
        assert!(h.parse().is_err());
        assert!(CopiedDdpHeader::from_segment(&bad[..13]).is_err());
        assert!(CopiedDdpHeader::from_segment(&[]).is_err());
    }

    #[test]
    fn term_codes_defined() {
        for c in [
            TermCode::RDMAP_INVALID_STAG,
            TermCode::RDMAP_PROT_UNSPECIFIED,
            TermCode::RDMAP_OP_CANNOT_INVALIDATE,
            TermCode::DDP_TAGGED_INVALID_VERSION,
            TermCode::DDP_UNTAGGED_INVALID_VERSION,
            TermCode::LLP_NO_MATCHING_RTR,
        ] {
            assert!(is_defined_term_code(c), "{c:?}");
            assert_eq!(
                TermControl::parse(
                    TermControl {
                        code: c,
                        m: true,
                        d: false,
                        r: true
                    }
                    .to_bytes()
                )
                .code,
                c
            );
        }
        assert!(!is_defined_term_code(TermCode::from_u16(0x0105)));
        assert!(!is_defined_term_code(TermCode::from_u16(0x1300)));
        assert!(!is_defined_term_code(TermCode::from_u16(0x3000)));
    }
}
