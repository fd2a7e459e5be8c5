//! RDMAP (RFC 5040 section 4): opcodes, the RDMA Read Request header
//! (`read_request`), the Terminate header (`terminate`), and a whole-segment parser
//! ([`Segment`]) that combines them with the DDP header of [`crate::ddp`].
//!
//! Opcodes and their DDP use (RFC 5040 figure 4): Write and Read Response are tagged; the
//! four Sends go to untagged queue 0, Read Requests to queue 1, Terminates to queue 2.

use core::fmt;

use iwarp_types::Stag;

use crate::ddp::{self, DdpError, Model};

mod read_request;
mod terminate;

pub use read_request::{ReadRequest, ReadRequestRepr, READ_REQUEST_LEN};
pub use terminate::{
    is_defined_term_code, looks_like_siw_bitfields, CopiedDdpHeader, TermControl, TerminateRepr,
    MAX_TERMINATE_LEN, TERM_CONTROL_LEN, TERM_FLG_D, TERM_FLG_M, TERM_FLG_R,
};

/// Queue number of the Send types (RFC 5040 section 3.1).
pub const QN_SEND: u32 = 0;
/// Queue number of RDMA Read Requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Queue number of Terminate messages.
pub const QN_TERMINATE: u32 = 2;

/// RDMAP opcode (RFC 5040 figure 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write (tagged).
    Write = 0,
    /// RDMA Read Request (untagged, QN 1).
    ReadRequest = 1,
    /// RDMA Read Response (tagged).
    ReadResponse = 2,
    /// Send (untagged, QN 0).
    Send = 3,
    /// Send with Invalidate (untagged, QN 0).
    SendInv = 4,
    /// Send with Solicited Event (untagged, QN 0).
    SendSe = 5,
    /// Send with Solicited Event and Invalidate (untagged, QN 0).
    SendSeInv = 6,
    /// Terminate (untagged, QN 2).
    Terminate = 7,
}

impl Opcode {
    /// Every opcode.
    pub const ALL: [Opcode; 8] = [
        Opcode::Write,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInv,
        Opcode::SendSe,
        Opcode::SendSeInv,
        Opcode::Terminate,
    ];

    /// From the 4-bit field; 8..15 are reserved ([`DdpError::ReservedOpcode`], Terminate
    /// 0x0206).
    pub const fn from_u8(v: u8) -> Result<Opcode, DdpError> {
        match v {
            0 => Ok(Opcode::Write),
            1 => Ok(Opcode::ReadRequest),
            2 => Ok(Opcode::ReadResponse),
            3 => Ok(Opcode::Send),
            4 => Ok(Opcode::SendInv),
            5 => Ok(Opcode::SendSe),
            6 => Ok(Opcode::SendSeInv),
            7 => Ok(Opcode::Terminate),
            opcode => Err(DdpError::ReservedOpcode { opcode }),
        }
    }

    /// The message uses the tagged buffer model (RDMA Write, Read Response).
    pub const fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The untagged queue the message goes to, `None` for tagged messages.
    pub const fn qn(self) -> Option<u32> {
        match self {
            Opcode::Write | Opcode::ReadResponse => None,
            Opcode::ReadRequest => Some(QN_READ_REQUEST),
            Opcode::Terminate => Some(QN_TERMINATE),
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv => Some(QN_SEND),
        }
    }

    /// One of the four Send types.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv
        )
    }

    /// The RsvdULP word carries an Invalidate STag.
    pub const fn has_inv_stag(self) -> bool {
        matches!(self, Opcode::SendInv | Opcode::SendSeInv)
    }

    /// Carries the Solicited Event flag.
    pub const fn is_solicited(self) -> bool {
        matches!(self, Opcode::SendSe | Opcode::SendSeInv)
    }

    /// The message may carry ULP payload (all but Read Request and Terminate).
    pub const fn has_payload(self) -> bool {
        !matches!(self, Opcode::ReadRequest | Opcode::Terminate)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What follows the DDP header of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// ULP payload (Write, Read Response, Sends).
    Payload(&'a [u8]),
    /// RDMA Read Request header.
    ReadRequest(ReadRequestRepr),
    /// Terminate header.
    Terminate(TerminateRepr),
}

/// A decoded DDP segment: DDP header, RDMAP header (if the opcode has one) and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// DDP header (with the RDMAP opcode).
    pub header: ddp::Repr,
    /// The rest.
    pub body: Body<'a>,
}

impl<'a> Segment<'a> {
    /// Decodes a whole ULPDU (one DDP segment). A Read Request must be exactly its two
    /// headers ([`DdpError::TrailingBytes`] otherwise); a Terminate header is decoded as the
    /// RFC says (see [`TerminateRepr::parse_any`] for siw's) and trailing bytes are ignored.
    ///
    /// Always inlined (the daemon's fat LTO kept it out of line even with `#[inline]`):
    /// out of line, its result came back through memory written in narrow stores and read
    /// back wider by the caller, which stalls store-to-load forwarding (two thirds of the
    /// receive path's `qp_on_ulpdu` in the daemon's profile).
    #[inline(always)]
    pub fn parse(ulpdu: &'a [u8]) -> Result<Segment<'a>, DdpError> {
        let packet = ddp::Packet::new_checked(ulpdu)?;
        let header = ddp::Repr::parse(&packet)?;
        let rest = packet.payload();
        let body = match header.opcode {
            Opcode::ReadRequest => {
                let r = ReadRequestRepr::parse_bytes(rest).map_err(|_| DdpError::Truncated)?;
                if rest.len() > READ_REQUEST_LEN {
                    return Err(DdpError::TrailingBytes);
                }
                Body::ReadRequest(r)
            }
            Opcode::Terminate => {
                Body::Terminate(TerminateRepr::parse(rest).map_err(|_| DdpError::Truncated)?)
            }
            _ => Body::Payload(rest),
        };
        Ok(Segment { header, body })
    }

    /// The ULP payload (empty for Read Request and Terminate).
    pub fn payload(&self) -> &'a [u8] {
        match self.body {
            Body::Payload(p) => p,
            _ => &[],
        }
    }

    /// Emitted length.
    pub fn buffer_len(&self) -> usize {
        self.header.buffer_len()
            + match &self.body {
                Body::Payload(p) => p.len(),
                Body::ReadRequest(_) => READ_REQUEST_LEN,
                Body::Terminate(t) => t.buffer_len(),
            }
    }

    /// Writes the segment into `buf[..self.buffer_len()]`; returns the length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let h = self.header.emit_bytes(buf);
        let rest = &mut buf[h..];
        h + match &self.body {
            Body::Payload(p) => {
                rest[..p.len()].copy_from_slice(p);
                p.len()
            }
            Body::ReadRequest(r) => {
                r.emit(&mut ReadRequest::new_unchecked(
                    &mut rest[..READ_REQUEST_LEN],
                ));
                READ_REQUEST_LEN
            }
            Body::Terminate(t) => t.emit(rest),
        }
    }
}

impl fmt::Display for Segment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.header)?;
        match &self.body {
            Body::Payload(p) => write!(f, " len={}", p.len()),
            Body::ReadRequest(r) => write!(f, " {r}"),
            Body::Terminate(t) => write!(f, " {t}"),
        }
    }
}

/// Convenience: the DDP header of a Terminate message (untagged, L, QN 2, MO 0).
pub const fn terminate_header(msn: u32) -> ddp::Repr {
    ddp::Repr {
        last: true,
        opcode: Opcode::Terminate,
        model: Model::Untagged {
            inv_stag: Stag(0),
            qn: QN_TERMINATE,
            msn,
            mo: 0,
        },
    }
}

#[cfg(test)]
pub(crate) mod test_vectors {
    use super::ReadRequestRepr;
    use iwarp_types::Stag;

    // RDMA Read Request from 04-read-bw-mpa2-crc.pcap, frame 33 (after the MPA length
    // 0x002e, before the CRC 2e 43 c7 46): untagged L, opcode 1, QN 1, MSN 1, MO 0; sink
    // STag 0xd49b6e00 TO 0x55f03337e000, size 65536, src STag 0xa7d7b400 TO 0x56231c023000.
    pub static READ_REQ: [u8; 46] = [
        0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, // DDP untagged header
        0xd4, 0x9b, 0x6e, 0x00, 0x00, 0x00, 0x55, 0xf0, 0x33, 0x37, 0xe0, 0x00, 0x00, 0x01, 0x00,
        0x00, 0xa7, 0xd7, 0xb4, 0x00, 0x00, 0x00, 0x56, 0x23, 0x1c, 0x02, 0x30, 0x00,
    ];

    // Terminate (RFC layout): DDP layer, untagged buffer, no buffer available, M=1, D=1,
    // segment length 1, copied Send header (QN 0, MSN 5, MO 0).
    pub static TERM_RFC: [u8; 24] = [
        0x12, 0x02, 0xc0, 0x00, 0x00, 0x01, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,
    ];

    // The same Terminate as siw sends it (targets.md: `21 02 03 00`).
    pub static TERM_SIW: [u8; 24] = [
        0x21, 0x02, 0x03, 0x00, 0x00, 0x01, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,
    ];

    pub fn rr() -> ReadRequestRepr {
        ReadRequestRepr {
            sink_stag: Stag(0xd49b_6e00),
            sink_to: 0x55f0_3337_e000,
            size: 65536,
            src_stag: Stag(0xa7d7_b400),
            src_to: 0x5623_1c02_3000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_vectors::{rr, READ_REQ, TERM_RFC};
    use super::*;
    use iwarp_types::TermCode;

    #[test]
    fn opcode_table() {
        for (i, op) in Opcode::ALL.iter().enumerate() {
            assert_eq!(Opcode::from_u8(i as u8), Ok(*op));
            assert_eq!(*op as u8, i as u8);
        }
        assert_eq!(
            Opcode::from_u8(8),
            Err(DdpError::ReservedOpcode { opcode: 8 })
        );
        assert_eq!(
            Opcode::from_u8(15).unwrap_err().term_code().as_u16(),
            0x0206
        );
        assert!(Opcode::Write.is_tagged() && Opcode::ReadResponse.is_tagged());
        assert_eq!(Opcode::Write.qn(), None);
        assert_eq!(Opcode::ReadRequest.qn(), Some(1));
        assert_eq!(Opcode::Terminate.qn(), Some(2));
        assert_eq!(Opcode::SendSeInv.qn(), Some(0));
        assert!(Opcode::SendInv.has_inv_stag() && !Opcode::SendSe.has_inv_stag());
        assert!(Opcode::SendSe.is_solicited() && !Opcode::Send.is_solicited());
        assert!(!Opcode::ReadRequest.has_payload() && Opcode::Send.has_payload());
        assert_eq!(Opcode::ALL.iter().filter(|o| o.is_send()).count(), 4);
    }

    #[test]
    fn read_request_segment() {
        let s = Segment::parse(&READ_REQ).unwrap();
        assert_eq!(s.header.opcode, Opcode::ReadRequest);
        assert_eq!(s.body, Body::ReadRequest(rr()));
        assert_eq!(s.payload(), &[] as &[u8]);
        let mut buf = [0xa5u8; 46];
        assert_eq!(s.buffer_len(), 46);
        assert_eq!(s.emit(&mut buf), 46);
        assert_eq!(buf, READ_REQ);
        assert_eq!(
            Segment::parse(&READ_REQ[..45]).unwrap_err(),
            DdpError::Truncated
        );
        let mut long = [0u8; 47];
        long[..46].copy_from_slice(&READ_REQ);
        assert_eq!(Segment::parse(&long).unwrap_err(), DdpError::TrailingBytes);
    }

    #[test]
    fn terminate_segment_round_trip() {
        let t = TerminateRepr::about_segment(TermCode::DDP_UNTAGGED_NO_BUFFER, &TERM_RFC[6..]);
        let s = Segment {
            header: terminate_header(1),
            body: Body::Terminate(t),
        };
        let mut buf = [0xa5u8; 64];
        let n = s.emit(&mut buf);
        assert_eq!(n, 18 + 24);
        assert_eq!(
            &buf[..18],
            &[0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        let p = Segment::parse(&buf[..n]).unwrap();
        assert_eq!(p, s);
        assert_eq!(
            p.to_string(),
            "DDP Terminate L qn=2 msn=1 mo=0 Terminate code=0x1202 seg_len=0 \
             [DDP Send L qn=0 msn=5 mo=0]"
        );
        assert_eq!(Segment::parse(&buf[..20]).unwrap_err(), DdpError::Truncated);
    }

    #[test]
    fn segment_payload() {
        let b = [
            0x41u8, 0x45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 3,
        ];
        let s = Segment::parse(&b).unwrap();
        assert_eq!(s.header.opcode, Opcode::SendSe);
        assert_eq!(s.payload(), &[1, 2, 3]);
        assert_eq!(s.to_string(), "DDP SendSe L qn=0 msn=3 mo=0 len=3");
        let mut out = [0xa5u8; 21];
        assert_eq!(s.emit(&mut out), 21);
        assert_eq!(out, b);
    }
}
