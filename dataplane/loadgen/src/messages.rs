//! The load generator's own wire formats, carried in MPA private data (hello, accept,
//! reject) and in small RDMA SENDs (credits, write checks and their acks).
//!
//! Every format has a fixed layout in network byte order and checked parsing: a short,
//! long or inconsistent input is an error value, never a panic.

use core::fmt;

/// First four bytes of every private-data message: ASCII "LGEN".
pub const MAGIC: u32 = 0x4c47_454e;
/// Version of the formats below.
pub const VERSION: u16 = 1;
/// Bytes of an encoded [`Hello`].
pub const HELLO_LEN: usize = 20;
/// Bytes of an encoded [`AcceptInfo`].
pub const ACCEPT_LEN: usize = 32;
/// Bytes of the fixed part of an encoded reject (magic, version, reason code).
pub const REJECT_HEADER_LEN: usize = 8;
/// Bytes of a [`CtlMsg`] (one credit, check or ack SEND).
pub const CTL_LEN: usize = 16;

/// SENDs a server consumes before it returns their credits in one [`CtlMsg::Credit`]
/// (a QP of `depth` receives). Fewer consumed are kept until the count is reached, so
/// once every credit message arrived a client holds more than `depth - credit_batch`
/// credits: it then knows the server has nothing more to send (and may close).
pub fn credit_batch(depth: u32) -> u32 {
    (depth / 2).max(1)
}

/// The operation a client drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// RDMA WRITE into the server's slots.
    Write = 1,
    /// RDMA READ from the server's slots.
    Read = 2,
    /// SEND into receives the server posted (credit flow control).
    Send = 3,
    /// Only open and hold the connections (set-up rate, memory per QP).
    Connect = 4,
}

impl Op {
    /// From the wire value.
    pub fn from_u8(v: u8) -> Option<Op> {
        match v {
            1 => Some(Op::Write),
            2 => Some(Op::Read),
            3 => Some(Op::Send),
            4 => Some(Op::Connect),
            _ => None,
        }
    }

    /// Lower-case name ("write", "read", "send", "connect").
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
            Op::Send => "send",
            Op::Connect => "connect",
        }
    }

    /// Parses a name as printed by [`Op::name`].
    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "write" => Some(Op::Write),
            "read" => Some(Op::Read),
            "send" => Some(Op::Send),
            "connect" => Some(Op::Connect),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why private data could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the fixed layout.
    Short,
    /// Not "LGEN".
    BadMagic,
    /// Another version of the formats.
    BadVersion(u16),
    /// Unknown operation code.
    BadOp(u8),
    /// Unknown control message kind.
    BadKind(u8),
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(w)
}

fn check_header(b: &[u8], len: usize) -> Result<(), ParseError> {
    if b.len() < len {
        return Err(ParseError::Short);
    }
    if be32(b, 0) != MAGIC {
        return Err(ParseError::BadMagic);
    }
    let v = be16(b, 4);
    if v != VERSION {
        return Err(ParseError::BadVersion(v));
    }
    Ok(())
}

/// What a client asks for in its MPA Request (one per QP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The operation.
    pub op: Op,
    /// The server checks what it receives (and fills READ targets with the pattern).
    pub verify: bool,
    /// Message size in bytes (0 for `Connect`).
    pub size: u32,
    /// WRs outstanding per QP (the number of target slots).
    pub depth: u32,
    /// The client's index of this QP (part of the verify pattern).
    pub qp_index: u32,
}

impl Hello {
    /// Layout: magic u32, version u16, op u8, flags u8 (bit 0 verify), size u32,
    /// depth u32, qp index u32.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&VERSION.to_be_bytes());
        b[6] = self.op as u8;
        b[7] = u8::from(self.verify);
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..16].copy_from_slice(&self.depth.to_be_bytes());
        b[16..20].copy_from_slice(&self.qp_index.to_be_bytes());
        b
    }

    /// Checked parse (trailing bytes are ignored: a later version may append fields).
    pub fn parse(b: &[u8]) -> Result<Hello, ParseError> {
        check_header(b, HELLO_LEN)?;
        let op = Op::from_u8(b[6]).ok_or(ParseError::BadOp(b[6]))?;
        Ok(Hello {
            op,
            verify: b[7] & 1 != 0,
            size: be32(b, 8),
            depth: be32(b, 12),
            qp_index: be32(b, 16),
        })
    }
}

/// What the server answers in its MPA Reply: where the client's slots are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceptInfo {
    /// STag of the target slots (remote write for WRITE, remote read for READ).
    pub stag: u32,
    /// Tagged offset of slot 0.
    pub base: u64,
    /// Bytes of the slots (depth x size).
    pub len: u64,
    /// SEND credits granted (receives posted) at the start.
    pub credits: u32,
}

impl AcceptInfo {
    /// Layout: magic u32, version u16, reserved u16, stag u32, base u64, len u64,
    /// credits u32.
    pub fn encode(&self) -> [u8; ACCEPT_LEN] {
        let mut b = [0u8; ACCEPT_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&VERSION.to_be_bytes());
        b[8..12].copy_from_slice(&self.stag.to_be_bytes());
        b[12..20].copy_from_slice(&self.base.to_be_bytes());
        b[20..28].copy_from_slice(&self.len.to_be_bytes());
        b[28..32].copy_from_slice(&self.credits.to_be_bytes());
        b
    }

    /// Checked parse.
    pub fn parse(b: &[u8]) -> Result<AcceptInfo, ParseError> {
        check_header(b, ACCEPT_LEN)?;
        Ok(AcceptInfo {
            stag: be32(b, 8),
            base: be64(b, 12),
            len: be64(b, 20),
            credits: be32(b, 28),
        })
    }
}

/// Why a server refused a hello (carried in the MPA Reject's private data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum RejectReason {
    /// The private data is not a loadgen hello (magic or length).
    NotHello = 1,
    /// Another version of the formats.
    BadVersion = 2,
    /// Unknown operation.
    BadOp = 3,
    /// Message size zero or above the server's limit.
    BadSize = 4,
    /// Depth zero or above the server's limit.
    BadDepth = 5,
    /// The server's connection table is full.
    TooManyConnections = 6,
    /// No free target buffer (or depth x size does not fit one).
    NoBuffer = 7,
    /// Creating the QP, registering memory or posting receives failed.
    Resources = 8,
    /// Anything else.
    Other = 0xffff,
}

impl RejectReason {
    /// From the wire value (unknown values become `Other`).
    pub fn from_u16(v: u16) -> RejectReason {
        match v {
            1 => RejectReason::NotHello,
            2 => RejectReason::BadVersion,
            3 => RejectReason::BadOp,
            4 => RejectReason::BadSize,
            5 => RejectReason::BadDepth,
            6 => RejectReason::TooManyConnections,
            7 => RejectReason::NoBuffer,
            8 => RejectReason::Resources,
            _ => RejectReason::Other,
        }
    }

    /// A short human-readable reason (also sent as text after the code).
    pub fn text(self) -> &'static str {
        match self {
            RejectReason::NotHello => "private data is not a loadgen hello",
            RejectReason::BadVersion => "unsupported loadgen version",
            RejectReason::BadOp => "unknown operation",
            RejectReason::BadSize => "message size zero or above the server limit",
            RejectReason::BadDepth => "depth zero or above the server limit",
            RejectReason::TooManyConnections => "server connection table full",
            RejectReason::NoBuffer => "no free target buffer of that size",
            RejectReason::Resources => "server could not create the QP or register memory",
            RejectReason::Other => "rejected",
        }
    }

    /// Layout: magic u32, version u16, reason u16, then the reason text (ASCII).
    /// Returns the buffer and its used length.
    pub fn encode(self) -> ([u8; 96], usize) {
        let mut b = [0u8; 96];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&VERSION.to_be_bytes());
        b[6..8].copy_from_slice(&(self as u16).to_be_bytes());
        let t = self.text().as_bytes();
        let n = t.len().min(b.len() - REJECT_HEADER_LEN);
        b[REJECT_HEADER_LEN..REJECT_HEADER_LEN + n].copy_from_slice(&t[..n]);
        (b, REJECT_HEADER_LEN + n)
    }

    /// Checked parse of the code (the text is informational).
    pub fn parse(b: &[u8]) -> Result<RejectReason, ParseError> {
        if b.len() < REJECT_HEADER_LEN {
            return Err(ParseError::Short);
        }
        if be32(b, 0) != MAGIC {
            return Err(ParseError::BadMagic);
        }
        Ok(RejectReason::from_u16(be16(b, 6)))
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// A small control SEND between client and server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtlMsg {
    /// Server → client: `n` more receives were posted for SENDs; `bad` of the SENDs
    /// consumed since the last credit failed verification.
    Credit {
        /// Credits returned.
        n: u32,
        /// Verify mismatches since the last credit message.
        bad: u32,
    },
    /// Client → server (verified WRITE): slot `slot` now holds the pattern of `seq`.
    Check {
        /// The slot written.
        slot: u32,
        /// The sequence number of the WRITE.
        seq: u64,
    },
    /// Server → client: the slot was checked (`ok` false: a mismatch was counted).
    Ack {
        /// The slot checked.
        slot: u32,
        /// The sequence number checked.
        seq: u64,
        /// The slot held the expected pattern.
        ok: bool,
    },
}

impl CtlMsg {
    /// Layout: kind u8 (1 credit, 2 check, 3 ack), flags u8 (ack: bit 0 ok),
    /// reserved u16, n or slot u32, seq (credit: bad) u64.
    pub fn encode(&self) -> [u8; CTL_LEN] {
        let mut b = [0u8; CTL_LEN];
        let (kind, flags, word, seq) = match *self {
            CtlMsg::Credit { n, bad } => (1u8, 0u8, n, u64::from(bad)),
            CtlMsg::Check { slot, seq } => (2, 0, slot, seq),
            CtlMsg::Ack { slot, seq, ok } => (3, u8::from(ok), slot, seq),
        };
        b[0] = kind;
        b[1] = flags;
        b[4..8].copy_from_slice(&word.to_be_bytes());
        b[8..16].copy_from_slice(&seq.to_be_bytes());
        b
    }

    /// Checked parse.
    pub fn parse(b: &[u8]) -> Result<CtlMsg, ParseError> {
        if b.len() < CTL_LEN {
            return Err(ParseError::Short);
        }
        let word = be32(b, 4);
        let seq = be64(b, 8);
        match b[0] {
            1 => Ok(CtlMsg::Credit {
                n: word,
                bad: seq.min(u64::from(u32::MAX)) as u32,
            }),
            2 => Ok(CtlMsg::Check { slot: word, seq }),
            3 => Ok(CtlMsg::Ack {
                slot: word,
                seq,
                ok: b[1] & 1 != 0,
            }),
            k => Err(ParseError::BadKind(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_checked_parse() {
        let h = Hello {
            op: Op::Read,
            verify: true,
            size: 65536,
            depth: 16,
            qp_index: 7,
        };
        let b = h.encode();
        assert_eq!(Hello::parse(&b), Ok(h));
        assert_eq!(&b[0..4], b"LGEN");
        assert_eq!(Hello::parse(&b[..HELLO_LEN - 1]), Err(ParseError::Short));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(Hello::parse(&bad), Err(ParseError::BadMagic));
        let mut bad = b;
        bad[5] = 9;
        assert_eq!(Hello::parse(&bad), Err(ParseError::BadVersion(9)));
        let mut bad = b;
        bad[6] = 0;
        assert_eq!(Hello::parse(&bad), Err(ParseError::BadOp(0)));
        assert_eq!(Hello::parse(&[]), Err(ParseError::Short));
    }

    #[test]
    fn accept_reject_ctl_round_trip() {
        let a = AcceptInfo {
            stag: 0x1234_5678,
            base: 1 << 40,
            len: 3 << 20,
            credits: 64,
        };
        assert_eq!(AcceptInfo::parse(&a.encode()), Ok(a));
        assert_eq!(AcceptInfo::parse(&a.encode()[..31]), Err(ParseError::Short));
        let (b, n) = RejectReason::BadDepth.encode();
        assert_eq!(RejectReason::parse(&b[..n]), Ok(RejectReason::BadDepth));
        assert!(core::str::from_utf8(&b[REJECT_HEADER_LEN..n])
            .unwrap()
            .contains("depth"));
        assert_eq!(RejectReason::parse(&b[..4]), Err(ParseError::Short));
        for m in [
            CtlMsg::Credit { n: 5, bad: 2 },
            CtlMsg::Check {
                slot: 3,
                seq: u64::MAX,
            },
            CtlMsg::Ack {
                slot: 1,
                seq: 9,
                ok: false,
            },
            CtlMsg::Ack {
                slot: 1,
                seq: 9,
                ok: true,
            },
        ] {
            assert_eq!(CtlMsg::parse(&m.encode()), Ok(m));
        }
        assert_eq!(CtlMsg::parse(&[9; CTL_LEN]), Err(ParseError::BadKind(9)));
        assert_eq!(CtlMsg::parse(&[1; 3]), Err(ParseError::Short));
        for op in [Op::Write, Op::Read, Op::Send, Op::Connect] {
            assert_eq!(Op::parse(op.name()), Some(op));
            assert_eq!(Op::from_u8(op as u8), Some(op));
        }
    }
}
