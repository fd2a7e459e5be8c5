//! One message in one datagram: an 8-byte header, then the `postcard` body.
//!
//! ```text
//! offset 0  magic    u32 LE  "IWVP"
//! offset 4  version  u16 LE  PROTOCOL_VERSION
//! offset 6  reserved u16     0
//! offset 8  body             postcard
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

/// `"IWVP"` read as a little-endian `u32`.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"IWVP");
/// Bytes before the body.
pub const FRAME_HEADER_BYTES: usize = 8;

const MAGIC: core::ops::Range<usize> = 0..4;
const VERSION: core::ops::Range<usize> = 4..6;
const RESERVED: core::ops::Range<usize> = 6..8;

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the header.
    TooShort(usize),
    /// Longer than [`MAX_MESSAGE_BYTES`].
    TooLong(usize),
    /// Not our magic number.
    BadMagic(u32),
    /// Another protocol version.
    Version(u16),
    /// Reserved bits set.
    Reserved(u16),
    /// The body does not decode (or encode).
    Body(String),
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::TooShort(n) => write!(f, "message of {n} bytes is shorter than its header"),
            FrameError::TooLong(n) => write!(f, "message of {n} bytes exceeds {MAX_MESSAGE_BYTES}"),
            FrameError::BadMagic(m) => write!(f, "bad magic number {m:#010x}"),
            FrameError::Version(v) => {
                write!(
                    f,
                    "protocol version {v}, this side speaks {PROTOCOL_VERSION}"
                )
            }
            FrameError::Reserved(r) => write!(f, "reserved header bits set ({r:#06x})"),
            FrameError::Body(e) => write!(f, "malformed body: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Encodes `msg` with its header.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    let out = postcard::to_extend(msg, out).map_err(|e| FrameError::Body(e.to_string()))?;
    if out.len() > MAX_MESSAGE_BYTES {
        return Err(FrameError::TooLong(out.len()));
    }
    Ok(out)
}

/// Decodes one datagram: header checked first, then the body; trailing bytes are an error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FrameError> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(FrameError::TooShort(bytes.len()));
    }
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(FrameError::TooLong(bytes.len()));
    }
    let u16_at =
        |r: core::ops::Range<usize>| u16::from_le_bytes([bytes[r.start], bytes[r.start + 1]]);
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    debug_assert_eq!(MAGIC.len(), 4);
    if magic != FRAME_MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let version = u16_at(VERSION);
    if version != PROTOCOL_VERSION {
        return Err(FrameError::Version(version));
    }
    let reserved = u16_at(RESERVED);
    if reserved != 0 {
        return Err(FrameError::Reserved(reserved));
    }
    let (msg, rest) = postcard::take_from_bytes(&bytes[FRAME_HEADER_BYTES..])
        .map_err(|e| FrameError::Body(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Body(format!("{} trailing bytes", rest.len())));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientMsg, Request, ServerMsg};

    #[test]
    fn round_trip_and_header() {
        let m = ClientMsg {
            seq: 7,
            request: Request::Hello {
                version: PROTOCOL_VERSION,
                name: "t".into(),
            },
        };
        let b = encode(&m).unwrap();
        assert_eq!(&b[..4], b"IWVP");
        assert_eq!(&b[4..8], &[PROTOCOL_VERSION as u8, 0, 0, 0]);
        assert_eq!(decode::<ClientMsg>(&b).unwrap(), m);
    }

    #[test]
    fn bad_frames_are_errors() {
        let good = encode(&ClientMsg {
            seq: 1,
            request: Request::AllocPd,
        })
        .unwrap();
        assert_eq!(
            decode::<ClientMsg>(&good[..3]),
            Err(FrameError::TooShort(3))
        );
        let mut b = good.clone();
        b[0] ^= 1;
        assert!(matches!(
            decode::<ClientMsg>(&b),
            Err(FrameError::BadMagic(_))
        ));
        let mut b = good.clone();
        b[4] = 99;
        assert_eq!(decode::<ClientMsg>(&b), Err(FrameError::Version(99)));
        let mut b = good.clone();
        b[7] = 1;
        assert!(matches!(
            decode::<ClientMsg>(&b),
            Err(FrameError::Reserved(_))
        ));
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(decode::<ClientMsg>(&b), Err(FrameError::Body(_))));
        // A body of the wrong type.
        assert!(decode::<ServerMsg>(&[&good[..8], &[200, 200, 200][..]].concat()).is_err());
        let huge = vec![0u8; MAX_MESSAGE_BYTES + 1];
        assert!(matches!(
            decode::<ClientMsg>(&huge),
            Err(FrameError::TooLong(_))
        ));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x1234_5678_9abc_def0;
        for n in 0..20_000usize {
            let len = n % 300;
            let mut b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            if len >= 8 {
                b[..4].copy_from_slice(b"IWVP");
                b[4..8].copy_from_slice(&[PROTOCOL_VERSION as u8, 0, 0, 0]);
            }
            let _ = decode::<ClientMsg>(&b);
            let _ = decode::<ServerMsg>(&b);
        }
    }
}
