//! DDP segment headers (RFC 5041 section 4) with the RDMAP control octet (RFC 5040
//! section 4.1, figure 3).
//!
//! A DDP header starts with two control octets, checked against Linux siw `iwarp.h`
//! (`DDP_FLAG_TAGGED 0x8000`, `DDP_FLAG_LAST 0x4000`, `DDP_MASK_RESERVED 0x3C00`,
//! `DDP_MASK_VERSION 0x0300`, `RDMAP_MASK_VERSION 0x00C0`, `RDMAP_MASK_RESERVED 0x0030`,
//! `RDMAP_MASK_OPCODE 0x000F` over the big-endian 16-bit word):
//!
//! ```text
//!  octet 0 (DDP control)          octet 1 (RDMAP control = first RsvdULP octet)
//!  | T | L | reserved(4) | DV(2) | RV(2) | rsv(2) | opcode(4) |
//! ```
//!
//! Tagged header (14 octets): control(2) + STag(4) + TO(8).
//! Untagged header (18 octets): control(2) + RsvdULP(4: the Invalidate STag of a Send with
//! Invalidate, zero otherwise) + QN(4) + MSN(4) + MO(4). All fields big-endian.
//!
//! [`Packet::new_checked`] reports a bad DDP or RDMAP version as its own error
//! ([`DdpError::DdpVersion`], [`DdpError::RdmapVersion`]) so that the receiver can answer
//! with the right Terminate code ([`DdpError::term_code`]). Reserved bits are written as
//! zero and ignored on receive (RFC 5041 section 4.1, RFC 5040 section 4.1).

use core::fmt;

use iwarp_types::Stag;

use crate::rdmap::Opcode;

mod error;

pub use error::DdpError;

/// DDP version written and accepted (RFC 5041: DV = 01b).
pub const DDP_VERSION: u8 = 1;
/// RDMAP version written and accepted (RFC 5040: RV = 01b). RV = 00b (RDMA Consortium) is
/// reported as [`DdpError::RdmapVersion`], as Linux siw does.
pub const RDMAP_VERSION: u8 = 1;
/// Length of a tagged DDP header, RDMAP control octet included.
pub const TAGGED_HEADER_LEN: usize = field::TO.end;
/// Length of an untagged DDP header, RDMAP control octet included.
pub const UNTAGGED_HEADER_LEN: usize = field::MO.end;
/// The longest DDP header.
pub const MAX_HEADER_LEN: usize = UNTAGGED_HEADER_LEN;

/// DDP control octet: Tagged flag.
pub const FLG_T: u8 = 0x80;
/// DDP control octet: Last flag.
pub const FLG_L: u8 = 0x40;
/// DDP control octet: reserved bits.
pub const MASK_DDP_RSVD: u8 = 0x3c;
/// DDP control octet: version bits.
pub const MASK_DV: u8 = 0x03;
/// RDMAP control octet: version bits.
pub const MASK_RV: u8 = 0xc0;
/// RDMAP control octet: reserved bits.
pub const MASK_RDMAP_RSVD: u8 = 0x30;
/// RDMAP control octet: opcode bits.
pub const MASK_OPCODE: u8 = 0x0f;

mod field {
    pub type Field = core::ops::Range<usize>;

    pub const DDP_CTRL: usize = 0;
    pub const RDMAP_CTRL: usize = 1;
    // Tagged buffer model.
    pub const STAG: Field = 2..6;
    pub const TO: Field = 6..14;
    // Untagged buffer model.
    pub const RSVD_ULP: Field = 2..6;
    pub const QN: Field = 6..10;
    pub const MSN: Field = 10..14;
    pub const MO: Field = 14..18;
}

/// Header length announced by a DDP control octet.
pub const fn header_len_for(ddp_ctrl: u8) -> usize {
    if ddp_ctrl & FLG_T != 0 {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// A view of a DDP segment (header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without any check (emission).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps untrusted bytes: length first enough to read the control octets, then the DDP
    /// and RDMAP versions, then the length of the header the T flag announces.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, DdpError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_version()?;
        packet.check_len()?;
        Ok(packet)
    }

    /// The buffer holds the whole header its T flag announces: every accessor is then
    /// panic-free.
    pub fn check_len(&self) -> Result<(), DdpError> {
        let data = self.buffer.as_ref();
        match data.first() {
            Some(&ctrl) if data.len() >= header_len_for(ctrl) => Ok(()),
            _ => Err(DdpError::Truncated),
        }
    }

    /// DV and RV hold the supported versions (needs the two control octets).
    pub fn check_version(&self) -> Result<(), DdpError> {
        let data = self.buffer.as_ref();
        let (Some(&ddp), Some(&rdmap)) = (data.first(), data.get(1)) else {
            return Err(DdpError::Truncated);
        };
        if ddp & MASK_DV != DDP_VERSION {
            return Err(DdpError::DdpVersion {
                tagged: ddp & FLG_T != 0,
                version: ddp & MASK_DV,
            });
        }
        if rdmap >> 6 != RDMAP_VERSION {
            return Err(DdpError::RdmapVersion {
                version: rdmap >> 6,
            });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The DDP control octet.
    pub fn ddp_ctrl(&self) -> u8 {
        self.buffer.as_ref()[field::DDP_CTRL]
    }

    /// The RDMAP control octet.
    pub fn rdmap_ctrl(&self) -> u8 {
        self.buffer.as_ref()[field::RDMAP_CTRL]
    }

    /// T: tagged buffer model.
    pub fn is_tagged(&self) -> bool {
        self.ddp_ctrl() & FLG_T != 0
    }

    /// L: last segment of the DDP message.
    pub fn is_last(&self) -> bool {
        self.ddp_ctrl() & FLG_L != 0
    }

    /// DV.
    pub fn ddp_version(&self) -> u8 {
        self.ddp_ctrl() & MASK_DV
    }

    /// RV.
    pub fn rdmap_version(&self) -> u8 {
        self.rdmap_ctrl() >> 6
    }

    /// The raw 4-bit RDMAP opcode (see [`Opcode::from_u8`]).
    pub fn opcode(&self) -> u8 {
        self.rdmap_ctrl() & MASK_OPCODE
    }

    /// Header length, from the T flag.
    pub fn header_len(&self) -> usize {
        header_len_for(self.ddp_ctrl())
    }

    /// Tagged: the data sink STag.
    pub fn stag(&self) -> Stag {
        Stag(be32(&self.buffer.as_ref()[field::STAG]))
    }

    /// Tagged: the tagged offset.
    pub fn to(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::TO])
    }

    /// Untagged: octets 2-5 of RsvdULP (the Invalidate STag of a Send with Invalidate).
    pub fn rsvd_ulp(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::RSVD_ULP])
    }

    /// Untagged: the Invalidate STag (same octets as [`Packet::rsvd_ulp`]).
    pub fn inv_stag(&self) -> Stag {
        Stag(self.rsvd_ulp())
    }

    /// Untagged: queue number.
    pub fn qn(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::QN])
    }

    /// Untagged: message sequence number.
    pub fn msn(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::MSN])
    }

    /// Untagged: message offset. Returns 0 on a buffer too short for it (a tagged segment
    /// of 14 bytes), so that it never panics.
    pub fn mo(&self) -> u32 {
        self.buffer.as_ref().get(field::MO).map_or(0, be32)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header (the ULP payload or the RDMAP header of Read Request and
    /// Terminate).
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        data.get(header_len_for(data[field::DDP_CTRL])..)
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes both control octets: T, L, DV = 1, RV = 1, reserved bits zero.
    pub fn set_ctrl(&mut self, tagged: bool, last: bool, opcode: u8) {
        let data = self.buffer.as_mut();
        let mut ddp = DDP_VERSION;
        if tagged {
            ddp |= FLG_T;
        }
        if last {
            ddp |= FLG_L;
        }
        data[field::DDP_CTRL] = ddp;
        data[field::RDMAP_CTRL] = (RDMAP_VERSION << 6) | (opcode & MASK_OPCODE);
    }

    /// Writes the raw DDP control octet.
    pub fn set_ddp_ctrl(&mut self, v: u8) {
        self.buffer.as_mut()[field::DDP_CTRL] = v;
    }

    /// Writes the raw RDMAP control octet.
    pub fn set_rdmap_ctrl(&mut self, v: u8) {
        self.buffer.as_mut()[field::RDMAP_CTRL] = v;
    }

    /// Tagged: sets the STag.
    pub fn set_stag(&mut self, v: Stag) {
        self.buffer.as_mut()[field::STAG].copy_from_slice(&v.0.to_be_bytes());
    }

    /// Tagged: sets the tagged offset.
    pub fn set_to(&mut self, v: u64) {
        self.buffer.as_mut()[field::TO].copy_from_slice(&v.to_be_bytes());
    }

    /// Untagged: sets RsvdULP octets 2-5.
    pub fn set_rsvd_ulp(&mut self, v: u32) {
        self.buffer.as_mut()[field::RSVD_ULP].copy_from_slice(&v.to_be_bytes());
    }

    /// Untagged: sets the queue number.
    pub fn set_qn(&mut self, v: u32) {
        self.buffer.as_mut()[field::QN].copy_from_slice(&v.to_be_bytes());
    }

    /// Untagged: sets the message sequence number.
    pub fn set_msn(&mut self, v: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&v.to_be_bytes());
    }

    /// Untagged: sets the message offset.
    pub fn set_mo(&mut self, v: u32) {
        self.buffer.as_mut()[field::MO].copy_from_slice(&v.to_be_bytes());
    }

    /// The bytes after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let data = self.buffer.as_mut();
        let start = header_len_for(data[field::DDP_CTRL]);
        &mut data[start..]
    }
}

/// The buffer model of a segment and its model-specific fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// Tagged buffer model (RDMA Write, RDMA Read Response).
    Tagged {
        /// Data sink STag.
        stag: Stag,
        /// Tagged offset of the first payload byte.
        to: u64,
    },
    /// Untagged buffer model (Sends, RDMA Read Request, Terminate).
    Untagged {
        /// RsvdULP octets 2-5: the Invalidate STag of a Send with Invalidate, else zero.
        inv_stag: Stag,
        /// Queue number.
        qn: u32,
        /// Message sequence number.
        msn: u32,
        /// Message offset of the first payload byte.
        mo: u32,
    },
}

/// A validated DDP header: versions checked, opcode defined and consistent with the T
/// flag. QN/MSN/MO/STag are not judged here (that is the RDMA layer's job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// L flag.
    pub last: bool,
    /// RDMAP opcode.
    pub opcode: Opcode,
    /// Buffer model and its fields.
    pub model: Model,
}

impl Repr {
    /// Parses a checked packet. Fails on a reserved opcode or an opcode whose buffer model
    /// disagrees with the T flag.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr, DdpError> {
        packet.check_version()?;
        packet.check_len()?;
        let tagged = packet.is_tagged();
        let opcode = Opcode::from_u8(packet.opcode())?;
        if opcode.is_tagged() != tagged {
            return Err(DdpError::OpcodeModel { opcode, tagged });
        }
        let model = if tagged {
            Model::Tagged {
                stag: packet.stag(),
                to: packet.to(),
            }
        } else {
            Model::Untagged {
                inv_stag: packet.inv_stag(),
                qn: packet.qn(),
                msn: packet.msn(),
                mo: packet.mo(),
            }
        };
        Ok(Repr {
            last: packet.is_last(),
            opcode,
            model,
        })
    }

    /// Parses the header at the start of untrusted bytes.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Repr, DdpError> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    /// Header length (14 tagged, 18 untagged).
    pub const fn buffer_len(&self) -> usize {
        match self.model {
            Model::Tagged { .. } => TAGGED_HEADER_LEN,
            Model::Untagged { .. } => UNTAGGED_HEADER_LEN,
        }
    }

    /// True for the tagged model.
    pub const fn is_tagged(&self) -> bool {
        matches!(self.model, Model::Tagged { .. })
    }

    /// Writes the header into the first [`Repr::buffer_len`] bytes of `packet`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ctrl(self.is_tagged(), self.last, self.opcode as u8);
        match self.model {
            Model::Tagged { stag, to } => {
                packet.set_stag(stag);
                packet.set_to(to);
            }
            Model::Untagged {
                inv_stag,
                qn,
                msn,
                mo,
            } => {
                packet.set_rsvd_ulp(inv_stag.0);
                packet.set_qn(qn);
                packet.set_msn(msn);
                packet.set_mo(mo);
            }
        }
    }

    /// Writes the header at the start of `buf` (at least [`Repr::buffer_len`] bytes) and
    /// returns its length.
    pub fn emit_bytes(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        self.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        len
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DDP {}{}",
            self.opcode,
            if self.last { " L" } else { "" }
        )?;
        match self.model {
            Model::Tagged { stag, to } => write!(f, " stag={:#010x} to={:#x}", stag.0, to),
            Model::Untagged {
                inv_stag,
                qn,
                msn,
                mo,
            } => {
                write!(f, " qn={qn} msn={msn} mo={mo}")?;
                if self.opcode.has_inv_stag() {
                    write!(f, " inv_stag={:#010x}", inv_stag.0)?;
                }
                Ok(())
            }
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(&Packet::new_unchecked(self.buffer.as_ref())) {
            Ok(repr) => {
                let len = self.buffer.as_ref().len().saturating_sub(repr.buffer_len());
                write!(f, "{repr} len={len}")
            }
            Err(e) => write!(f, "DDP ({e})"),
        }
    }
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireError;
    use iwarp_types::TermCode;

    // Tagged RDMA Write segment from 03-write-bw-mpa2-crc.pcap, frame 34 (after the MPA
    // length 0x05a2): T=1 L=0 DV=1, RV=1 opcode 0, STag 0x3f4e8900, TO 0x560f467df000,
    // then the first 4 payload bytes.
    static TAGGED: [u8; 18] = [
        0x81, 0x40, 0x3f, 0x4e, 0x89, 0x00, 0x00, 0x00, 0x56, 0x0f, 0x46, 0x7d, 0xf0, 0x00, 0x25,
        0xb5, 0x04, 0x7c,
    ];

    // Untagged Send, L=1, QN 0, MSN 1, MO 0 and 1 payload byte (the shape of the 1-byte
    // ib_send_bw Sends of 02-send-bw-mpa2-crc.pcap).
    static UNTAGGED: [u8; 19] = [
        0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x7a,
    ];

    // Send with SE and Invalidate, L=1, Invalidate STag 0x12345678, QN 0, MSN 7, MO 4096.
    static SEND_SE_INV: [u8; 18] = [
        0x41, 0x46, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00,
        0x00, 0x10, 0x00,
    ];

    #[test]
    fn deconstruct_tagged() {
        let p = Packet::new_checked(&TAGGED[..]).unwrap();
        assert!(p.is_tagged());
        assert!(!p.is_last());
        assert_eq!(p.ddp_version(), 1);
        assert_eq!(p.rdmap_version(), 1);
        assert_eq!(p.opcode(), 0);
        assert_eq!(p.stag(), Stag(0x3f4e_8900));
        assert_eq!(p.to(), 0x0000_560f_467d_f000);
        assert_eq!(p.header_len(), 14);
        assert_eq!(p.payload(), &[0x25, 0xb5, 0x04, 0x7c]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                last: false,
                opcode: Opcode::Write,
                model: Model::Tagged {
                    stag: Stag(0x3f4e_8900),
                    to: 0x0000_560f_467d_f000
                }
            }
        );
    }

    #[test]
    fn deconstruct_untagged() {
        let p = Packet::new_checked(&UNTAGGED[..]).unwrap();
        assert!(!p.is_tagged());
        assert!(p.is_last());
        assert_eq!(p.opcode(), 3);
        assert_eq!((p.qn(), p.msn(), p.mo(), p.rsvd_ulp()), (0, 1, 0, 0));
        assert_eq!(p.payload(), &[0x7a]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.opcode, Opcode::Send);
        assert_eq!(
            r.model,
            Model::Untagged {
                inv_stag: Stag(0),
                qn: 0,
                msn: 1,
                mo: 0
            }
        );

        let r = Repr::parse_bytes(&SEND_SE_INV).unwrap();
        assert_eq!(r.opcode, Opcode::SendSeInv);
        assert_eq!(
            r.model,
            Model::Untagged {
                inv_stag: Stag(0x1234_5678),
                qn: 0,
                msn: 7,
                mo: 4096
            }
        );
    }

    #[test]
    fn construct() {
        let r = Repr::parse_bytes(&TAGGED).unwrap();
        let mut buf = [0xa5u8; 14];
        assert_eq!(r.emit_bytes(&mut buf), 14);
        assert_eq!(buf, TAGGED[..14]);

        let mut buf = [0xa5u8; 18];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_ctrl(false, true, 3);
        p.set_rsvd_ulp(0);
        p.set_qn(0);
        p.set_msn(1);
        p.set_mo(0);
        assert_eq!(buf, UNTAGGED[..18]);

        let r = Repr::parse_bytes(&SEND_SE_INV).unwrap();
        let mut buf = [0xa5u8; 18];
        r.emit(&mut Packet::new_unchecked(&mut buf));
        assert_eq!(buf, SEND_SE_INV);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&[][..]).unwrap_err(),
            DdpError::Truncated
        );
        assert_eq!(
            Packet::new_checked(&TAGGED[..1]).unwrap_err(),
            DdpError::Truncated
        );
        assert_eq!(
            Packet::new_checked(&TAGGED[..13]).unwrap_err(),
            DdpError::Truncated
        );
        assert!(Packet::new_checked(&TAGGED[..14]).is_ok());
        assert_eq!(
            Packet::new_checked(&UNTAGGED[..17]).unwrap_err(),
            DdpError::Truncated
        );
        assert!(Packet::new_checked(&UNTAGGED[..18]).is_ok());
        assert_eq!(
            Packet::new_checked(&UNTAGGED[..18]).unwrap().payload(),
            &[] as &[u8]
        );
        // mo() on a bare tagged header never panics.
        assert_eq!(Packet::new_checked(&TAGGED[..14]).unwrap().mo(), 0);
        assert_eq!(WireError::from(DdpError::Truncated), WireError::Truncated);
    }

    #[test]
    fn versions_are_distinct_errors() {
        let mut b = TAGGED;
        b[0] = 0x80; // DV = 0, tagged
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(
            e,
            DdpError::DdpVersion {
                tagged: true,
                version: 0
            }
        );
        assert_eq!(e.term_code().as_u16(), 0x1104);

        let mut b = UNTAGGED;
        b[0] = 0x42; // DV = 2, untagged
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(
            e,
            DdpError::DdpVersion {
                tagged: false,
                version: 2
            }
        );
        assert_eq!(e.term_code().as_u16(), 0x1206);
        // Version beats length: a short segment with a bad version still names the version.
        assert_eq!(
            Packet::new_checked(&b[..3]).unwrap_err(),
            DdpError::DdpVersion {
                tagged: false,
                version: 2
            }
        );

        let mut b = UNTAGGED;
        b[1] = 0x03; // RV = 0 (RDMA Consortium)
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(e, DdpError::RdmapVersion { version: 0 });
        assert_eq!(e.term_code().as_u16(), 0x0205);
        assert_eq!(WireError::from(e), WireError::Malformed);
    }

    #[test]
    fn reserved_bits_ignored() {
        let mut b = UNTAGGED;
        b[0] |= MASK_DDP_RSVD;
        b[1] |= MASK_RDMAP_RSVD;
        let r = Repr::parse_bytes(&b).unwrap();
        assert_eq!(r.opcode, Opcode::Send);
        let mut out = [0u8; 18];
        r.emit_bytes(&mut out);
        assert_eq!(out, UNTAGGED[..18]); // written back as zero
    }

    #[test]
    fn opcode_errors() {
        for op in 8u8..16 {
            let mut b = UNTAGGED;
            b[1] = 0x40 | op;
            let e = Repr::parse_bytes(&b).unwrap_err();
            assert_eq!(e, DdpError::ReservedOpcode { opcode: op });
            assert_eq!(e.term_code().as_u16(), 0x0206);
        }
        // RDMA Write with T = 0.
        let mut b = UNTAGGED;
        b[1] = 0x40;
        let e = Repr::parse_bytes(&b).unwrap_err();
        assert_eq!(
            e,
            DdpError::OpcodeModel {
                opcode: Opcode::Write,
                tagged: false
            }
        );
        assert_eq!(e.term_code(), TermCode::RDMAP_UNEXPECTED_OPCODE);
        // Send with T = 1.
        let mut b = TAGGED;
        b[1] = 0x43;
        assert_eq!(
            Repr::parse_bytes(&b).unwrap_err(),
            DdpError::OpcodeModel {
                opcode: Opcode::Send,
                tagged: true
            }
        );
    }

    #[test]
    fn round_trip_all_opcodes() {
        for op in Opcode::ALL {
            let model = if op.is_tagged() {
                Model::Tagged {
                    stag: Stag(0xfedc_ba98),
                    to: u64::MAX - 3,
                }
            } else {
                Model::Untagged {
                    inv_stag: Stag(if op.has_inv_stag() { 0x0102_0304 } else { 0 }),
                    qn: op.qn().unwrap_or(0),
                    msn: u32::MAX,
                    mo: 0x8000_0000,
                }
            };
            for last in [false, true] {
                let r = Repr {
                    last,
                    opcode: op,
                    model,
                };
                let mut buf = [0xa5u8; MAX_HEADER_LEN];
                let n = r.emit_bytes(&mut buf);
                assert_eq!(n, r.buffer_len());
                assert_eq!(Repr::parse_bytes(&buf[..n]).unwrap(), r);
            }
        }
    }

    #[test]
    fn display() {
        let r = Repr::parse_bytes(&SEND_SE_INV).unwrap();
        assert_eq!(
            r.to_string(),
            "DDP SendSeInv L qn=0 msn=7 mo=4096 inv_stag=0x12345678"
        );
        let p = Packet::new_unchecked(&TAGGED[..]);
        assert_eq!(
            p.to_string(),
            "DDP Write stag=0x3f4e8900 to=0x560f467df000 len=4"
        );
        let p = Packet::new_unchecked(&[0x80u8, 0x40][..]);
        assert_eq!(p.to_string(), "DDP (DDP version 0 (tagged=true))");
    }
}
