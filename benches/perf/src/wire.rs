//! What the two ends tell each other in the MPA private data of the connect and the
//! accept (the idea of perftest's `-R`: the buffer's address, rkey and size travel with
//! the connection), little-endian:
//!
//! ```text
//! 0  magic "IWPF"   4  version u8   5  test u8   6  qp_index u16   8  qps u16
//! 10 flags u16 (0)  12 size u64     20 iters u64 28 duration_ms u32 32 depth u32
//! 36 buf_addr u64   44 buf_len u64  52 rkey u32  56 credits u32      60 end
//! ```

use crate::args::Test;

/// `"IWPF"`.
pub const MAGIC: [u8; 4] = *b"IWPF";
/// Version of this layout.
pub const VERSION: u8 = 1;
/// Bytes of an encoded [`Hello`].
pub const HELLO_BYTES: usize = 60;

/// One end's description of the test and its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The test.
    pub test: Test,
    /// Which of the run's QPs this connection is.
    pub qp_index: u16,
    /// QPs of the run.
    pub qps: u16,
    /// Message size in bytes.
    pub size: u64,
    /// Iterations (0 with a duration).
    pub iters: u64,
    /// Duration in milliseconds (0 with a count).
    pub duration_ms: u32,
    /// WRs in flight per QP.
    pub depth: u32,
    /// The address of the sender's buffer (the VA its MR is based at).
    pub buf_addr: u64,
    /// Its length.
    pub buf_len: u64,
    /// Its rkey (the STag the peer names in RDMA WRITE and READ).
    pub rkey: u32,
    /// SEND tests: receives the sender posted (the peer may send this many before the
    /// first credit message).
    pub credits: u32,
}

/// Why private data is not a [`Hello`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Too short.
    Short(usize),
    /// Not ours.
    Magic,
    /// Another layout version.
    Version(u8),
    /// An unknown test code.
    Test(u8),
    /// Inconsistent values (the message names them).
    Invalid(&'static str),
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Short(n) => write!(
                f,
                "private data of {n} bytes, an iwarp-perf hello has {HELLO_BYTES}"
            ),
            WireError::Magic => f.write_str("private data is not from iwarp-perf"),
            WireError::Version(v) => write!(
                f,
                "iwarp-perf hello version {v}, this side speaks {VERSION}"
            ),
            WireError::Test(t) => write!(f, "unknown test code {t}"),
            WireError::Invalid(w) => write!(f, "invalid hello: {w}"),
        }
    }
}

impl std::error::Error for WireError {}

impl Hello {
    /// The bytes.
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut b = [0u8; HELLO_BYTES];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = self.test.code();
        b[6..8].copy_from_slice(&self.qp_index.to_le_bytes());
        b[8..10].copy_from_slice(&self.qps.to_le_bytes());
        b[12..20].copy_from_slice(&self.size.to_le_bytes());
        b[20..28].copy_from_slice(&self.iters.to_le_bytes());
        b[28..32].copy_from_slice(&self.duration_ms.to_le_bytes());
        b[32..36].copy_from_slice(&self.depth.to_le_bytes());
        b[36..44].copy_from_slice(&self.buf_addr.to_le_bytes());
        b[44..52].copy_from_slice(&self.buf_len.to_le_bytes());
        b[52..56].copy_from_slice(&self.rkey.to_le_bytes());
        b[56..60].copy_from_slice(&self.credits.to_le_bytes());
        b
    }

    /// Decodes and checks (trailing bytes are ignored: MPA may pad).
    pub fn decode(b: &[u8]) -> Result<Hello, WireError> {
        if b.len() < HELLO_BYTES {
            return Err(WireError::Short(b.len()));
        }
        if b[0..4] != MAGIC {
            return Err(WireError::Magic);
        }
        if b[4] != VERSION {
            return Err(WireError::Version(b[4]));
        }
        let test = Test::from_code(b[5]).ok_or(WireError::Test(b[5]))?;
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        if u16_at(10) != 0 {
            return Err(WireError::Invalid("reserved flags set"));
        }
        let h = Hello {
            test,
            qp_index: u16_at(6),
            qps: u16_at(8),
            size: u64_at(12),
            iters: u64_at(20),
            duration_ms: u32_at(28),
            depth: u32_at(32),
            buf_addr: u64_at(36),
            buf_len: u64_at(44),
            rkey: u32_at(52),
            credits: u32_at(56),
        };
        if h.qps == 0 || h.qp_index >= h.qps {
            return Err(WireError::Invalid("qp_index not below qps"));
        }
        if h.size == 0 || h.size > h.buf_len {
            return Err(WireError::Invalid("size is 0 or larger than the buffer"));
        }
        if h.depth == 0 {
            return Err(WireError::Invalid("depth 0"));
        }
        if h.buf_addr.checked_add(h.buf_len).is_none() {
            return Err(WireError::Invalid("buffer wraps the address space"));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            test: Test::WriteBw,
            qp_index: 1,
            qps: 4,
            size: 65536,
            iters: 5000,
            duration_ms: 0,
            depth: 128,
            buf_addr: 0x7f00_0000_1000,
            buf_len: 8 << 20,
            rkey: 0x0001_2a05,
            credits: 256,
        }
    }

    #[test]
    fn round_trip() {
        let h = hello();
        let b = h.encode();
        assert_eq!(&b[..4], b"IWPF");
        assert_eq!(Hello::decode(&b), Ok(h));
        let mut padded = b.to_vec();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(Hello::decode(&padded), Ok(h));
        for t in Test::ALL {
            assert_eq!(
                Hello::decode(&Hello { test: t, ..h }.encode())
                    .unwrap()
                    .test,
                t
            );
        }
    }

    #[test]
    fn bad_private_data_is_an_error() {
        let good = hello().encode();
        assert_eq!(Hello::decode(&good[..59]), Err(WireError::Short(59)));
        assert_eq!(Hello::decode(&[]), Err(WireError::Short(0)));
        let mut b = good;
        b[0] = b'X';
        assert_eq!(Hello::decode(&b), Err(WireError::Magic));
        let mut b = good;
        b[4] = 2;
        assert_eq!(Hello::decode(&b), Err(WireError::Version(2)));
        let mut b = good;
        b[5] = 9;
        assert_eq!(Hello::decode(&b), Err(WireError::Test(9)));
        let mut b = good;
        b[10] = 1;
        assert!(matches!(Hello::decode(&b), Err(WireError::Invalid(_))));
        for bad in [
            Hello {
                qp_index: 4,
                ..hello()
            },
            Hello {
                qps: 0,
                qp_index: 0,
                ..hello()
            },
            Hello { size: 0, ..hello() },
            Hello {
                size: (8 << 20) + 1,
                ..hello()
            },
            Hello {
                depth: 0,
                ..hello()
            },
            Hello {
                buf_addr: u64::MAX,
                ..hello()
            },
        ] {
            assert!(
                matches!(Hello::decode(&bad.encode()), Err(WireError::Invalid(_))),
                "{bad:?}"
            );
        }
        // Random bytes never panic.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            let mut b = [0u8; HELLO_BYTES];
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
            b[..4].copy_from_slice(&MAGIC);
            b[4] = VERSION;
            let _ = Hello::decode(&b);
        }
    }
}
