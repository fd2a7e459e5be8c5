//! MPA (RFC 5044) wire formats: the MPA Request/Reply frames of connection set-up, the
//! RFC 6581 enhanced set-up data carried at the start of their private data, and the FPDU
//! (framed PDU) of full operation.
//!
//! MPA Request/Reply frame (RFC 5044 section 7.1; bit values checked against Linux siw
//! `iwarp.h`, `MPA_RR_FLAG_*` over the big-endian 16-bit word at octet 16):
//!
//! ```text
//!  0..16   Key: "MPA ID Req Frame" or "MPA ID Rep Frame"
//!  16      |M|C|R|E|G|res(3)|   M 0x80 markers, C 0x40 CRC, R 0x20 reject,
//!                               E 0x10 siw "enhanced set-up" (reserved in RFC 5044),
//!                               G 0x08 siw GSO experiment (never set; ignored)
//!  17      Rev (1 = RFC 5044, 2 = RFC 6581)
//!  18..20  PD_Length (big-endian, at most 512)
//!  20..    Private data (PD_Length octets)
//! ```
//!
//! RFC 6581 enhanced set-up data: the first 4 octets of the private data of a revision 2
//! frame (siw `struct mpa_v2_data`, `MPA_V2_*`):
//!
//! ```text
//!  0..2  |A|B| IRD (14 bits) |    A 0x8000 peer-to-peer, B 0x4000 zero-length Send RTR
//!  2..4  |C|D| ORD (14 bits) |    C 0x8000 zero-length Write RTR, D 0x4000 zero-length Read RTR
//! ```
//!
//! FPDU (RFC 5044 section 4.1), without markers (see [`crate::marker`]):
//!
//! ```text
//!  0..2        ULPDU_Length (big-endian)
//!  2..2+len    ULPDU (DDP header + payload)
//!  ..          PAD: 0-3 zero octets so that 2 + len + pad is a multiple of 4
//!  last 4      CRC32c over ULPDU_Length, ULPDU, PAD (and any markers in between)
//! ```
//!
//! The CRC is the standard CRC32c (Castagnoli, reflected, initial and final XOR
//! 0xffffffff) and is sent least significant octet first: Linux siw writes the digest of
//! the kernel `crc32c` shash as is. Verified on `03-write-bw-mpa2-crc.pcap`: the FPDU
//! `00 16 41 43 .. 10 00` carries `2f d8 88 6e` for the CRC32c value 0x6e88d82f. When CRC
//! is not in use the field is present and siw sends zero.

use crate::{Result, WireError};

/// Key of an MPA Request frame.
pub const KEY_REQ: &[u8; 16] = b"MPA ID Req Frame";
/// Key of an MPA Reply frame.
pub const KEY_REP: &[u8; 16] = b"MPA ID Rep Frame";

/// M: the sender wants markers in the stream it receives.
pub const FLAG_MARKERS: u8 = 0x80;
/// C: the sender wants CRC (used when either side sets it).
pub const FLAG_CRC: u8 = 0x40;
/// R: the Reply rejects the connection.
pub const FLAG_REJECT: u8 = 0x20;
/// siw's "enhanced connection set-up" flag (a reserved bit of RFC 5044): set with
/// revision 2, announces the RFC 6581 data at the start of the private data.
pub const FLAG_ENHANCED: u8 = 0x10;
/// siw's GSO experiment flag: never set by us, ignored on receive.
pub const FLAG_GSO: u8 = 0x08;

/// RFC 5044 revision.
pub const REVISION_1: u8 = 1;
/// RFC 6581 revision (enhanced connection establishment).
pub const REVISION_2: u8 = 2;

/// Length of the Request/Reply header (key, flags, revision, PD_Length).
pub const FRAME_HEADER_LEN: usize = 20;
/// Largest private data of a Request/Reply frame (RFC 5044 section 7.1).
pub const PRIVATE_DATA_MAX: usize = 512;
/// Largest Request/Reply frame.
pub const FRAME_MAX_LEN: usize = FRAME_HEADER_LEN + PRIVATE_DATA_MAX;
/// Length of the RFC 6581 enhanced set-up data.
pub const ENHANCED_LEN: usize = 4;

/// Length of the ULPDU_Length field.
pub const ULPDU_LENGTH_LEN: usize = 2;
/// Length of the CRC field.
pub const CRC_LEN: usize = 4;
/// Largest ULPDU an FPDU can carry (16-bit length field).
pub const ULPDU_MAX_LEN: usize = 0xffff;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const KEY: Range<usize> = 0..16;
    pub const FLAGS: usize = 16;
    pub const REV: usize = 17;
    pub const PD_LEN: Range<usize> = 18..20;
    pub const PRIVATE_DATA: RangeFrom<usize> = 20..;

    pub const V2_IRD: Range<usize> = 0..2;
    pub const V2_ORD: Range<usize> = 2..4;

    pub const ULPDU_LENGTH: Range<usize> = 0..2;
}

/// Kind of a Request/Reply frame, from its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// "MPA ID Req Frame".
    Request,
    /// "MPA ID Rep Frame".
    Reply,
}

impl FrameKind {
    /// The key of this kind.
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            FrameKind::Request => KEY_REQ,
            FrameKind::Reply => KEY_REP,
        }
    }
}

/// A view of an MPA Request/Reply frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps and checks the length (header, PD_Length at most 512, private data present).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that every accessor is panic-free: the header is present, PD_Length is at
    /// most 512 ([`WireError::Malformed`] otherwise) and the private data is present.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < FRAME_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let pd = self.pd_len() as usize;
        if pd > PRIVATE_DATA_MAX {
            return Err(WireError::Malformed);
        }
        if b.len() < FRAME_HEADER_LEN + pd {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The 16-octet key.
    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[field::KEY]
    }

    /// The frame kind, or `None` if the key is neither.
    pub fn kind(&self) -> Option<FrameKind> {
        match self.key() {
            k if k == KEY_REQ => Some(FrameKind::Request),
            k if k == KEY_REP => Some(FrameKind::Reply),
            _ => None,
        }
    }

    /// The flag octet.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// M flag.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_MARKERS != 0
    }

    /// C flag.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_CRC != 0
    }

    /// R flag.
    pub fn reject(&self) -> bool {
        self.flags() & FLAG_REJECT != 0
    }

    /// siw enhanced flag.
    pub fn enhanced(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }

    /// Revision.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref()[field::REV]
    }

    /// PD_Length.
    pub fn pd_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PD_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The private data (PD_Length octets).
    pub fn private_data(&self) -> &[u8] {
        let n = self.pd_len() as usize;
        &self.buffer.as_ref()[field::PRIVATE_DATA][..n]
    }

    /// Length of the whole frame.
    pub fn total_len(&self) -> usize {
        FRAME_HEADER_LEN + self.pd_len() as usize
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Writes the key.
    pub fn set_key(&mut self, kind: FrameKind) {
        self.buffer.as_mut()[field::KEY].copy_from_slice(kind.key());
    }

    /// Writes the flag octet.
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    /// Writes the revision.
    pub fn set_revision(&mut self, rev: u8) {
        self.buffer.as_mut()[field::REV] = rev;
    }

    /// Writes PD_Length.
    pub fn set_pd_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::PD_LEN].copy_from_slice(&len.to_be_bytes());
    }

    /// The private data, mutable (PD_Length octets).
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let n = self.pd_len() as usize;
        &mut self.buffer.as_mut()[field::PRIVATE_DATA][..n]
    }
}

/// The RTR (ready-to-receive) message types of RFC 6581 section 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RtrType {
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send (an FPDU with an empty Send).
    Send,
}

/// A set of RTR types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RtrSet(pub u8);

impl RtrSet {
    /// No type.
    pub const NONE: RtrSet = RtrSet(0);
    /// Zero-length RDMA Write.
    pub const WRITE: RtrSet = RtrSet(1);
    /// Zero-length RDMA Read.
    pub const READ: RtrSet = RtrSet(2);
    /// Zero-length Send.
    pub const SEND: RtrSet = RtrSet(4);

    /// The set holding only `t`.
    pub const fn of(t: RtrType) -> RtrSet {
        match t {
            RtrType::Write => RtrSet::WRITE,
            RtrType::Read => RtrSet::READ,
            RtrType::Send => RtrSet::SEND,
        }
    }

    /// `t` is in the set.
    pub const fn contains(self, t: RtrType) -> bool {
        self.0 & RtrSet::of(t).0 != 0
    }

    /// Union.
    pub const fn union(self, o: RtrSet) -> RtrSet {
        RtrSet(self.0 | o.0)
    }

    /// Intersection.
    pub const fn intersect(self, o: RtrSet) -> RtrSet {
        RtrSet(self.0 & o.0)
    }

    /// Without the types of `o`.
    pub const fn without(self, o: RtrSet) -> RtrSet {
        RtrSet(self.0 & !o.0)
    }

    /// True if no type is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 & 7 == 0
    }

    /// The preferred member: Write, then Read, then Send (siw prefers Write too).
    pub const fn preferred(self) -> Option<RtrType> {
        if self.contains(RtrType::Write) {
            Some(RtrType::Write)
        } else if self.contains(RtrType::Read) {
            Some(RtrType::Read)
        } else if self.contains(RtrType::Send) {
            Some(RtrType::Send)
        } else {
            None
        }
    }
}

impl core::ops::BitOr for RtrSet {
    type Output = RtrSet;
    fn bitor(self, rhs: RtrSet) -> RtrSet {
        self.union(rhs)
    }
}

/// IRD/ORD value mask (14 bits).
pub const IRD_ORD_MASK: u16 = 0x3fff;
/// Peer-to-peer flag (IRD word).
pub const V2_PEER_TO_PEER: u16 = 0x8000;
/// Zero-length Send RTR flag (IRD word).
pub const V2_SEND_RTR: u16 = 0x4000;
/// Zero-length Write RTR flag (ORD word).
pub const V2_WRITE_RTR: u16 = 0x8000;
/// Zero-length Read RTR flag (ORD word).
pub const V2_READ_RTR: u16 = 0x4000;

/// The RFC 6581 enhanced set-up data (first 4 octets of the private data, revision 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnhancedData {
    /// Inbound RDMA Read queue depth (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits).
    pub ord: u16,
    /// Peer-to-peer mode.
    pub p2p: bool,
    /// RTR types: offered (Request) or chosen (Reply).
    pub rtr: RtrSet,
}

impl EnhancedData {
    /// Parses the first 4 octets of `pd`.
    pub fn parse(pd: &[u8]) -> Result<EnhancedData> {
        let ird_b = pd.get(field::V2_IRD).ok_or(WireError::Truncated)?;
        let ord_b = pd.get(field::V2_ORD).ok_or(WireError::Truncated)?;
        let ird_w = u16::from_be_bytes([ird_b[0], ird_b[1]]);
        let ord_w = u16::from_be_bytes([ord_b[0], ord_b[1]]);
        let mut rtr = RtrSet::NONE;
        if ird_w & V2_SEND_RTR != 0 {
            rtr = rtr | RtrSet::SEND;
        }
        if ord_w & V2_WRITE_RTR != 0 {
            rtr = rtr | RtrSet::WRITE;
        }
        if ord_w & V2_READ_RTR != 0 {
            rtr = rtr | RtrSet::READ;
        }
        Ok(EnhancedData {
            ird: ird_w & IRD_ORD_MASK,
            ord: ord_w & IRD_ORD_MASK,
            p2p: ird_w & V2_PEER_TO_PEER != 0,
            rtr,
        })
    }

    /// The 4 octets (IRD/ORD masked to 14 bits).
    pub fn to_bytes(&self) -> [u8; ENHANCED_LEN] {
        let mut ird = self.ird & IRD_ORD_MASK;
        let mut ord = self.ord & IRD_ORD_MASK;
        if self.p2p {
            ird |= V2_PEER_TO_PEER;
        }
        if self.rtr.contains(RtrType::Send) {
            ird |= V2_SEND_RTR;
        }
        if self.rtr.contains(RtrType::Write) {
            ord |= V2_WRITE_RTR;
        }
        if self.rtr.contains(RtrType::Read) {
            ord |= V2_READ_RTR;
        }
        let i = ird.to_be_bytes();
        let o = ord.to_be_bytes();
        [i[0], i[1], o[0], o[1]]
    }
}

/// A parsed Request/Reply frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M flag.
    pub markers: bool,
    /// C flag.
    pub crc: bool,
    /// R flag.
    pub reject: bool,
    /// Revision.
    pub revision: u8,
    /// RFC 6581 data: present when revision is 2 and the enhanced flag is set (emitted
    /// with the enhanced flag).
    pub enhanced: Option<EnhancedData>,
    /// The ULP's private data (after the enhanced data, if any).
    pub private_data: &'a [u8],
}

impl<'a> FrameRepr<'a> {
    /// Parses a checked frame. Unknown key → [`WireError::Malformed`]; an enhanced
    /// revision 2 frame with fewer than 4 octets of private data → `Malformed`. The
    /// revision is reported as is (the caller decides what it accepts).
    pub fn parse(frame: &Frame<&'a [u8]>) -> Result<FrameRepr<'a>> {
        frame.check_len()?;
        let kind = frame.kind().ok_or(WireError::Malformed)?;
        let buf: &'a [u8] = frame.buffer;
        let pd = &buf[FRAME_HEADER_LEN..frame.total_len()];
        let (enhanced, private_data) = if frame.revision() == REVISION_2 && frame.enhanced() {
            let e = EnhancedData::parse(pd).map_err(|_| WireError::Malformed)?;
            (Some(e), pd.get(ENHANCED_LEN..).unwrap_or(&[]))
        } else {
            (None, pd)
        };
        Ok(FrameRepr {
            kind,
            markers: frame.markers(),
            crc: frame.crc(),
            reject: frame.reject(),
            revision: frame.revision(),
            enhanced,
            private_data,
        })
    }

    /// Length of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        FRAME_HEADER_LEN + self.pd_len()
    }

    fn pd_len(&self) -> usize {
        self.private_data.len()
            + if self.enhanced.is_some() {
                ENHANCED_LEN
            } else {
                0
            }
    }

    /// Emits into a frame of at least `buffer_len()` octets. The caller guarantees the
    /// private data fits (at most 512 octets with the enhanced data).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_key(self.kind);
        let mut flags = 0;
        if self.markers {
            flags |= FLAG_MARKERS;
        }
        if self.crc {
            flags |= FLAG_CRC;
        }
        if self.reject {
            flags |= FLAG_REJECT;
        }
        if self.enhanced.is_some() {
            flags |= FLAG_ENHANCED;
        }
        frame.set_flags(flags);
        frame.set_revision(self.revision);
        frame.set_pd_len(self.pd_len() as u16);
        let pd = frame.private_data_mut();
        let rest = match &self.enhanced {
            Some(e) => {
                pd[..ENHANCED_LEN].copy_from_slice(&e.to_bytes());
                &mut pd[ENHANCED_LEN..]
            }
            None => pd,
        };
        rest.copy_from_slice(self.private_data);
    }
}

/// Pad octets after a ULPDU of `ulpdu_len` octets.
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ULPDU_LENGTH_LEN + ulpdu_len) % 4) % 4
}

/// Length of the FPDU (without markers) carrying a ULPDU of `ulpdu_len` octets.
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    ULPDU_LENGTH_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// The CRC32c helpers live in [`crate::crc`]; re-exported for the MPA framer.
pub use crate::crc::{crc32c, crc32c_append};

/// The CRC field octets of a CRC value (least significant octet first, as siw sends).
pub const fn crc_to_wire(crc: u32) -> [u8; CRC_LEN] {
    crate::crc::mpa_crc_to_wire(crc)
}

/// The CRC value of the CRC field octets.
pub const fn crc_from_wire(b: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(b)
}

mod rx_crc;
pub use rx_crc::{RxCrc, FUSED_MIN_LEN};

/// A view of one FPDU without markers.
#[derive(Debug, Clone)]
pub struct Fpdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Fpdu<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Fpdu<T> {
        Fpdu { buffer }
    }

    /// Wraps and checks that the whole FPDU announced by ULPDU_Length is present.
    pub fn new_checked(buffer: T) -> Result<Fpdu<T>> {
        let f = Fpdu::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that the header and the whole FPDU are present.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < ULPDU_LENGTH_LEN {
            return Err(WireError::Truncated);
        }
        if b.len() < fpdu_len(self.ulpdu_len() as usize) {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// ULPDU_Length.
    pub fn ulpdu_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ULPDU_LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Length of the whole FPDU.
    pub fn total_len(&self) -> usize {
        fpdu_len(self.ulpdu_len() as usize)
    }

    /// The ULPDU.
    pub fn ulpdu(&self) -> &[u8] {
        let n = self.ulpdu_len() as usize;
        &self.buffer.as_ref()[ULPDU_LENGTH_LEN..ULPDU_LENGTH_LEN + n]
    }

    /// The pad octets.
    pub fn pad(&self) -> &[u8] {
        let n = self.ulpdu_len() as usize;
        let s = ULPDU_LENGTH_LEN + n;
        &self.buffer.as_ref()[s..s + pad_len(n)]
    }

    /// The CRC field value.
    pub fn crc_field(&self) -> u32 {
        let end = self.total_len();
        let b = &self.buffer.as_ref()[end - CRC_LEN..end];
        crc_from_wire([b[0], b[1], b[2], b[3]])
    }

    /// The CRC32c computed over ULPDU_Length, ULPDU and PAD.
    pub fn compute_crc(&self) -> u32 {
        let end = self.total_len() - CRC_LEN;
        crc32c(&self.buffer.as_ref()[..end])
    }

    /// The CRC field matches the computed CRC.
    pub fn verify_crc(&self) -> bool {
        self.crc_field() == self.compute_crc()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Fpdu<T> {
    /// Writes ULPDU_Length.
    pub fn set_ulpdu_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::ULPDU_LENGTH].copy_from_slice(&len.to_be_bytes());
    }

    /// The ULPDU, mutable.
    pub fn ulpdu_mut(&mut self) -> &mut [u8] {
        let n = self.ulpdu_len() as usize;
        &mut self.buffer.as_mut()[ULPDU_LENGTH_LEN..ULPDU_LENGTH_LEN + n]
    }

    /// Zeroes the pad and writes the CRC field: the computed CRC32c if `crc`, zero
    /// otherwise (what siw sends without CRC).
    pub fn finish(&mut self, crc: bool) {
        let n = self.ulpdu_len() as usize;
        let s = ULPDU_LENGTH_LEN + n;
        let p = pad_len(n);
        zero_pad(&mut self.buffer.as_mut()[s..s + p]);
        let v = if crc { self.compute_crc() } else { 0 };
        let end = self.total_len();
        self.buffer.as_mut()[end - CRC_LEN..end].copy_from_slice(&crc_to_wire(v));
    }
}

/// Zeroes an FPDU's pad (0 to 3 octets) with stores of known width: `fill(0)` on a
/// slice of unknown length is a call of `memset`, once per FPDU sent.
#[inline]
pub fn zero_pad(pad: &mut [u8]) {
    match pad {
        [] => {}
        [a] => *a = 0,
        [a, b] => (*a, *b) = (0, 0),
        [a, b, c] => (*a, *b, *c) = (0, 0, 0),
        longer => longer.fill(0),
    }
}

#[cfg(test)]
mod tests;
