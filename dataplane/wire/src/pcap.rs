//! Classic libpcap files (not pcapng) with `LINKTYPE_ETHERNET`: a checked reader over the
//! bytes of a file and a writer into any [`std::io::Write`].
//!
//! File header (24 octets): magic `0xa1b2c3d4` (microsecond timestamps) or `0xa1b23c4d`
//! (nanosecond), in the writer's byte order; version 2.4; thiszone; sigfigs; snaplen;
//! link type. Record header (16 octets): seconds, fraction (µs or ns), captured length,
//! original length. The reader accepts both byte orders and both resolutions; a truncated or
//! hostile file gives a [`PcapError`], never a panic or an unbounded allocation (records
//! are slices of the input).

use core::fmt;
use std::io::{self, Write};

use iwarp_types::Instant;

/// Link type of Ethernet frames (without FCS).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Magic of microsecond-resolution files.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic of nanosecond-resolution files.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest record the reader accepts and the snap length the writer declares (libpcap's
/// `MAXIMUM_SNAPLEN`).
pub const MAX_SNAPLEN: u32 = 262_144;

mod field {
    pub type Field = core::ops::Range<usize>;

    // File header.
    pub const MAGIC: Field = 0..4;
    pub const VERSION_MAJOR: Field = 4..6;
    pub const VERSION_MINOR: Field = 6..8;
    pub const SNAPLEN: Field = 16..20;
    pub const LINKTYPE: Field = 20..24;
    // Record header.
    pub const TS_SEC: Field = 0..4;
    pub const TS_FRAC: Field = 4..8;
    pub const INCL_LEN: Field = 8..12;
    pub const ORIG_LEN: Field = 12..16;
}

/// Timestamp resolution of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsResolution {
    /// Microseconds (`0xa1b2c3d4`).
    Micros,
    /// Nanoseconds (`0xa1b23c4d`).
    Nanos,
}

/// Why a pcap file was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// The file header or a record is cut short.
    Truncated,
    /// Not a classic pcap magic number.
    BadMagic(u32),
    /// Not version 2.x.
    BadVersion(u16),
    /// Link type other than Ethernet.
    UnsupportedLinkType(u32),
    /// A record claims more than [`MAX_SNAPLEN`] bytes, or a fraction of a second out of
    /// range.
    BadRecord,
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Truncated => write!(f, "pcap file truncated"),
            PcapError::BadMagic(m) => write!(f, "not a pcap file (magic {m:#010x})"),
            PcapError::BadVersion(v) => write!(f, "pcap version {v}"),
            PcapError::UnsupportedLinkType(l) => write!(f, "pcap link type {l}"),
            PcapError::BadRecord => write!(f, "pcap record header out of range"),
        }
    }
}

impl std::error::Error for PcapError {}

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapHeader {
    /// Timestamp resolution.
    pub resolution: TsResolution,
    /// The file was written big-endian.
    pub big_endian: bool,
    /// Declared snap length.
    pub snaplen: u32,
    /// Link type (always [`LINKTYPE_ETHERNET`] once accepted).
    pub linktype: u32,
}

/// One captured frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapRecord<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts: Instant,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// The captured bytes (`orig_len` or fewer).
    pub data: &'a [u8],
}

/// Reader over the bytes of a whole pcap file; iterates over records.
#[derive(Clone, Debug)]
pub struct PcapReader<'a> {
    bytes: &'a [u8],
    offset: usize,
    header: PcapHeader,
    failed: bool,
}

fn u32_at(b: &[u8], r: field::Field, big: bool) -> Option<u32> {
    let a: [u8; 4] = b.get(r)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    })
}

fn u16_at(b: &[u8], r: field::Field, big: bool) -> Option<u16> {
    let a: [u8; 2] = b.get(r)?.try_into().ok()?;
    Some(if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    })
}

impl<'a> PcapReader<'a> {
    /// Checks the file header.
    pub fn new(bytes: &'a [u8]) -> Result<PcapReader<'a>, PcapError> {
        let hdr = bytes.get(..FILE_HEADER_LEN).ok_or(PcapError::Truncated)?;
        let le = u32_at(hdr, field::MAGIC, false).ok_or(PcapError::Truncated)?;
        let (resolution, big_endian) = match le {
            MAGIC_MICROS => (TsResolution::Micros, false),
            MAGIC_NANOS => (TsResolution::Nanos, false),
            m if m.swap_bytes() == MAGIC_MICROS => (TsResolution::Micros, true),
            m if m.swap_bytes() == MAGIC_NANOS => (TsResolution::Nanos, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        let major = u16_at(hdr, field::VERSION_MAJOR, big_endian).ok_or(PcapError::Truncated)?;
        let _minor = u16_at(hdr, field::VERSION_MINOR, big_endian).ok_or(PcapError::Truncated)?;
        if major != 2 {
            return Err(PcapError::BadVersion(major));
        }
        let snaplen = u32_at(hdr, field::SNAPLEN, big_endian).ok_or(PcapError::Truncated)?;
        let linktype = u32_at(hdr, field::LINKTYPE, big_endian).ok_or(PcapError::Truncated)?;
        // The upper 16 bits may carry FCS information; the link type is the low 16.
        if linktype & 0xffff != LINKTYPE_ETHERNET {
            return Err(PcapError::UnsupportedLinkType(linktype));
        }
        Ok(PcapReader {
            bytes,
            offset: FILE_HEADER_LEN,
            header: PcapHeader {
                resolution,
                big_endian,
                snaplen,
                linktype,
            },
            failed: false,
        })
    }

    /// The file header.
    pub fn header(&self) -> PcapHeader {
        self.header
    }

    /// The next record: `None` at the clean end of the file, `Some(Err(_))` once (then
    /// `None`) if the rest of the file is bad.
    pub fn next_record(&mut self) -> Option<Result<PcapRecord<'a>, PcapError>> {
        if self.failed || self.offset == self.bytes.len() {
            return None;
        }
        let r = self.read_record();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }

    fn read_record(&mut self) -> Result<PcapRecord<'a>, PcapError> {
        let big = self.header.big_endian;
        let rest = self.bytes.get(self.offset..).ok_or(PcapError::Truncated)?;
        let rh = rest.get(..RECORD_HEADER_LEN).ok_or(PcapError::Truncated)?;
        let sec = u32_at(rh, field::TS_SEC, big).ok_or(PcapError::Truncated)?;
        let frac = u32_at(rh, field::TS_FRAC, big).ok_or(PcapError::Truncated)?;
        let incl = u32_at(rh, field::INCL_LEN, big).ok_or(PcapError::Truncated)?;
        let orig = u32_at(rh, field::ORIG_LEN, big).ok_or(PcapError::Truncated)?;
        let frac_ns = match self.header.resolution {
            TsResolution::Micros if frac < 1_000_000 => u64::from(frac) * 1_000,
            TsResolution::Nanos if frac < 1_000_000_000 => u64::from(frac),
            _ => return Err(PcapError::BadRecord),
        };
        if incl > MAX_SNAPLEN {
            return Err(PcapError::BadRecord);
        }
        let incl = incl as usize;
        let end = RECORD_HEADER_LEN
            .checked_add(incl)
            .ok_or(PcapError::BadRecord)?;
        let data = rest
            .get(RECORD_HEADER_LEN..end)
            .ok_or(PcapError::Truncated)?;
        self.offset += end;
        Ok(PcapRecord {
            ts: Instant(u64::from(sec) * 1_000_000_000 + frac_ns),
            orig_len: orig,
            data,
        })
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<PcapRecord<'a>, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// Writes a pcap file (little-endian, Ethernet) into `W`.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    resolution: TsResolution,
    frames: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut out: W, resolution: TsResolution) -> io::Result<PcapWriter<W>> {
        let magic = match resolution {
            TsResolution::Micros => MAGIC_MICROS,
            TsResolution::Nanos => MAGIC_NANOS,
        };
        let mut h = [0u8; FILE_HEADER_LEN];
        h[field::MAGIC].copy_from_slice(&magic.to_le_bytes());
        h[field::VERSION_MAJOR].copy_from_slice(&2u16.to_le_bytes());
        h[field::VERSION_MINOR].copy_from_slice(&4u16.to_le_bytes());
        h[field::SNAPLEN].copy_from_slice(&MAX_SNAPLEN.to_le_bytes());
        h[field::LINKTYPE].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            resolution,
            frames: 0,
        })
    }

    /// Appends one frame captured at `ts` (nanoseconds since the Unix epoch, or since the
    /// simulation's start). Frames longer than [`MAX_SNAPLEN`] are cut, keeping their
    /// original length.
    pub fn write_frame(&mut self, ts: Instant, frame: &[u8]) -> io::Result<()> {
        let ns = ts.as_nanos();
        let sec = u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX);
        let frac = match self.resolution {
            TsResolution::Micros => (ns % 1_000_000_000) / 1_000,
            TsResolution::Nanos => ns % 1_000_000_000,
        } as u32;
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig.min(MAX_SNAPLEN);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[field::TS_SEC].copy_from_slice(&sec.to_le_bytes());
        h[field::TS_FRAC].copy_from_slice(&frac.to_le_bytes());
        h[field::INCL_LEN].copy_from_slice(&incl.to_le_bytes());
        h[field::ORIG_LEN].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..incl as usize])?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and gives the output back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// Flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The output.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A microsecond file with one 4-byte record at 1.000002 s, and a nanosecond big-endian
    // file with one 2-byte record at 3.000000005 s.
    static MICROS: [u8; 44] = [
        0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x04,
        0x00, 0x01, 0x00, 0x00, 0x00, // header, snaplen 262144, Ethernet
        0x01, 0, 0, 0, 0x02, 0, 0, 0, 0x04, 0, 0, 0, 0x3c, 0, 0, 0, // record header
        0xde, 0xad, 0xbe, 0xef,
    ];
    static NANOS_BE: [u8; 42] = [
        0xa1, 0xb2, 0x3c, 0x4d, 0x00, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x01, // header, snaplen 65535, Ethernet
        0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 2, // record header
        0x12, 0x34,
    ];

    #[test]
    fn deconstruct() {
        let mut r = PcapReader::new(&MICROS).unwrap();
        assert_eq!(
            r.header(),
            PcapHeader {
                resolution: TsResolution::Micros,
                big_endian: false,
                snaplen: 262_144,
                linktype: 1
            }
        );
        let rec = r.next().unwrap().unwrap();
        assert_eq!(rec.ts, Instant(1_000_002_000));
        assert_eq!(rec.orig_len, 60);
        assert_eq!(rec.data, &[0xde, 0xad, 0xbe, 0xef]);
        assert!(r.next().is_none());

        let mut r = PcapReader::new(&NANOS_BE).unwrap();
        assert!(r.header().big_endian);
        assert_eq!(r.header().resolution, TsResolution::Nanos);
        let rec = r.next().unwrap().unwrap();
        assert_eq!(rec.ts, Instant(3_000_000_005));
        assert_eq!(rec.data, &[0x12, 0x34]);
        assert!(r.next().is_none());
    }

    #[test]
    fn construct() {
        let mut w = PcapWriter::new(Vec::new(), TsResolution::Micros).unwrap();
        w.write_frame(Instant(1_000_002_999), &[0xde, 0xad, 0xbe, 0xef])
            .unwrap();
        let mut bytes = w.into_inner();
        // Our writer records orig_len = data length (4); the literal says 60.
        assert_eq!(bytes[..36], MICROS[..36]);
        bytes[36] = 0x3c;
        assert_eq!(bytes, MICROS);
    }

    #[test]
    fn truncated_and_hostile() {
        for n in 0..MICROS.len() {
            let r = PcapReader::new(&MICROS[..n]);
            if n < FILE_HEADER_LEN {
                assert_eq!(r.unwrap_err(), PcapError::Truncated);
            } else if n == FILE_HEADER_LEN {
                assert!(r.unwrap().next().is_none());
            } else {
                let mut r = r.unwrap();
                assert_eq!(r.next(), Some(Err(PcapError::Truncated)));
                assert_eq!(r.next(), None); // stops after the error
            }
        }
        let mut b = MICROS;
        b[0] = 0;
        assert!(matches!(PcapReader::new(&b), Err(PcapError::BadMagic(_))));
        let mut b = MICROS;
        b[4] = 3;
        assert_eq!(PcapReader::new(&b).unwrap_err(), PcapError::BadVersion(3));
        let mut b = MICROS;
        b[20] = 113; // Linux cooked
        assert_eq!(
            PcapReader::new(&b).unwrap_err(),
            PcapError::UnsupportedLinkType(113)
        );
        // A record claiming 4 GiB.
        let mut b = MICROS;
        b[32..36].copy_from_slice(&[0xff; 4]);
        assert_eq!(
            PcapReader::new(&b).unwrap().next(),
            Some(Err(PcapError::BadRecord))
        );
        // Microseconds out of range.
        let mut b = MICROS;
        b[28..32].copy_from_slice(&2_000_000u32.to_le_bytes());
        assert_eq!(
            PcapReader::new(&b).unwrap().next(),
            Some(Err(PcapError::BadRecord))
        );
        // Maximum timestamp does not overflow.
        let mut b = NANOS_BE;
        b[24..32].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x3b, 0x9a, 0xc9, 0xff]);
        let rec = PcapReader::new(&b).unwrap().next().unwrap().unwrap();
        assert_eq!(
            rec.ts,
            Instant(u64::from(u32::MAX) * 1_000_000_000 + 999_999_999)
        );
    }

    #[test]
    fn round_trip_nanos() {
        let frames: [&[u8]; 3] = [&[1, 2, 3], &[], &[9; 1514]];
        let mut w = PcapWriter::new(Vec::new(), TsResolution::Nanos).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write_frame(Instant(i as u64 * 1_500_000_001), f).unwrap();
        }
        assert_eq!(w.frames(), 3);
        let bytes = w.finish().unwrap();
        let recs: Vec<_> = PcapReader::new(&bytes)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(recs.len(), 3);
        for (i, (rec, f)) in recs.iter().zip(frames).enumerate() {
            assert_eq!(rec.ts, Instant(i as u64 * 1_500_000_001));
            assert_eq!(rec.data, f);
            assert_eq!(rec.orig_len as usize, f.len());
        }
    }
}
