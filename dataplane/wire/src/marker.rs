//! MPA markers (RFC 5044 section 4.3 and 5).
//!
//! When a receiver asks for markers (M flag in its Request/Reply), the sender inserts a
//! 4-octet marker every 512 octets of TCP sequence space in that direction. The first
//! marker sits immediately before the first FPDU of full operation (at the stream offset
//! where FPDU mode starts, the `base` of a [`MarkerLayout`]); the others at
//! `base + k * 512`. Positions here are stream offsets (`u64`, never wrapping), which
//! differ from TCP sequence numbers by a constant, so `(SN - SeqStart) mod 512` is the same.
//!
//! Marker format (siw `struct mpa_marker`):
//!
//! ```text
//!  0..2  reserved (zero when sent, not checked)
//!  2..4  FPDUPTR (big-endian): octets from the start of the FPDU's ULPDU_Length field back
//!        to the first octet of this marker; two low bits zero.
//! ```
//!
//! Conventions of this implementation (RFC 5044 says the first marker has FPDUPTR 0):
//! a marker that falls exactly on an FPDU boundary precedes the next FPDU's header, belongs
//! to that FPDU and carries FPDUPTR 0; it is not covered by the CRC. A marker inside an FPDU
//! (after its header, up to just before its CRC field) carries `marker - header` and is
//! covered by the CRC, as are all octets between ULPDU_Length and the CRC field. FPDUs are
//! multiples of 4 octets, so markers never split the ULPDU_Length or the CRC field.
//!
//! Linux siw does not implement markers (it rejects M); these rules are used between two
//! instances of this engine.

use crate::{Result, WireError};

/// Marker spacing in octets of TCP sequence space.
pub const MARKER_INTERVAL: u64 = 512;
/// Length of a marker.
pub const MARKER_LEN: usize = 4;

mod field {
    use core::ops::Range;
    pub const RESERVED: Range<usize> = 0..2;
    pub const FPDUPTR: Range<usize> = 2..4;
}

/// A view of one marker.
#[derive(Debug, Clone)]
pub struct Marker<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Marker<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Marker<T> {
        Marker { buffer }
    }

    /// Wraps and checks the length.
    pub fn new_checked(buffer: T) -> Result<Marker<T>> {
        let m = Marker::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// Checks that the 4 octets are present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MARKER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// The reserved field.
    pub fn reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::RESERVED];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// FPDUPTR with its two low bits cleared (receivers treat them as zero).
    pub fn fpduptr(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::FPDUPTR];
        u16::from_be_bytes([b[0], b[1]]) & !3
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Marker<T> {
    /// Writes a marker: reserved zero, FPDUPTR `ptr`.
    pub fn set(&mut self, ptr: u16) {
        self.buffer.as_mut()[..MARKER_LEN].copy_from_slice(&marker_bytes(ptr));
    }
}

/// The octets of a marker with FPDUPTR `ptr`.
pub const fn marker_bytes(ptr: u16) -> [u8; MARKER_LEN] {
    let p = ptr.to_be_bytes();
    [0, 0, p[0], p[1]]
}

/// Where the markers of one direction are: `base + k * 512` for every `k >= 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerLayout {
    base: u64,
}

impl MarkerLayout {
    /// Markers from stream offset `base` (where FPDU mode starts) on.
    pub const fn new(base: u64) -> MarkerLayout {
        MarkerLayout { base }
    }

    /// Offset of the first marker.
    pub const fn base(&self) -> u64 {
        self.base
    }

    /// A marker starts at `pos`.
    #[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than our MSRV
    pub const fn is_marker_at(&self, pos: u64) -> bool {
        pos >= self.base && (pos - self.base) % MARKER_INTERVAL == 0
    }

    /// The first marker position at or after `pos` (`u64::MAX` if none is representable).
    pub const fn next_at_or_after(&self, pos: u64) -> u64 {
        if pos <= self.base {
            return self.base;
        }
        let d = pos - self.base;
        let k = d.div_ceil(MARKER_INTERVAL);
        match k.checked_mul(MARKER_INTERVAL) {
            Some(x) => match self.base.checked_add(x) {
                Some(v) => v,
                None => u64::MAX,
            },
            None => u64::MAX,
        }
    }

    /// Number of markers starting in `[start, end)`.
    pub fn count_in(&self, start: u64, end: u64) -> u64 {
        let first = self.next_at_or_after(start);
        if first >= end {
            return 0;
        }
        (end - 1 - first) / MARKER_INTERVAL + 1
    }

    /// Wire length of a record of `content_len` non-marker octets starting at stream
    /// offset `start`: the content plus every marker starting inside the record.
    pub fn record_wire_len(&self, start: u64, content_len: usize) -> usize {
        let mut markers = 0u64;
        loop {
            let end = start + content_len as u64 + markers * MARKER_LEN as u64;
            let n = self.count_in(start, end);
            if n == markers {
                return end.saturating_sub(start) as usize;
            }
            markers = n;
        }
    }

    /// Most markers that can start inside any run of `len` octets.
    pub const fn max_markers_in(len: usize) -> usize {
        len.div_ceil(MARKER_INTERVAL as usize)
    }

    /// Spreads an FPDU record in place and writes its markers. On entry the record's
    /// content (ULPDU_Length up to and including the CRC field, no markers) occupies the
    /// last `content_len` octets of `out`; `out.len()` must be
    /// `record_wire_len(start, content_len)`. On return `out` is the wire image with the
    /// markers, FPDUPTRs per the module rules. Returns the offset in `out` of the
    /// ULPDU_Length field (4 when a marker precedes the header, else 0).
    pub fn spread_in_place(&self, start: u64, out: &mut [u8], content_len: usize) -> usize {
        let wire_len = out.len();
        let header = if self.is_marker_at(start) {
            MARKER_LEN
        } else {
            0
        };
        let mut w = 0usize;
        let mut r = wire_len - content_len;
        while r < wire_len {
            let pos = start + w as u64;
            if self.is_marker_at(pos) {
                let ptr = if w == 0 { 0 } else { (w - header) as u16 };
                out[w..w + MARKER_LEN].copy_from_slice(&marker_bytes(ptr));
                w += MARKER_LEN;
                continue;
            }
            let next = self.next_at_or_after(pos);
            let room = (next - pos).min((wire_len - r) as u64) as usize;
            out.copy_within(r..r + room, w);
            w += room;
            r += room;
        }
        header
    }

    /// Copies the non-marker octets of `wire` (stream offsets `[start, start +
    /// wire.len())`) into `out`, calling `on_marker(position, fpduptr)` for each whole
    /// marker. Octets of a marker cut by either end of `wire` are skipped. Returns the
    /// number of octets written; stops early if `out` is full.
    pub fn strip(
        &self,
        start: u64,
        wire: &[u8],
        out: &mut [u8],
        mut on_marker: impl FnMut(u64, u16),
    ) -> usize {
        let mut i = 0usize;
        let mut o = 0usize;
        // A marker that began before `start`.
        let prev = self.next_at_or_after(start.saturating_sub(MARKER_LEN as u64 - 1));
        if prev < start {
            i = ((prev + MARKER_LEN as u64) - start) as usize;
        }
        while i < wire.len() && o < out.len() {
            let pos = start + i as u64;
            if self.is_marker_at(pos) {
                if let Some(m) = wire.get(i..i + MARKER_LEN) {
                    on_marker(pos, Marker::new_unchecked(m).fpduptr());
                }
                i += MARKER_LEN;
                continue;
            }
            let next = self.next_at_or_after(pos);
            let n = ((next - pos) as usize)
                .min(wire.len() - i)
                .min(out.len() - o);
            out[o..o + n].copy_from_slice(&wire[i..i + n]);
            o += n;
            i += n;
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_view() {
        let m = Marker::new_checked(&[0x00, 0x00, 0x01, 0xfc][..]).unwrap();
        assert_eq!(m.reserved(), 0);
        assert_eq!(m.fpduptr(), 508);
        // Low two bits are treated as zero.
        let m = Marker::new_checked(&[0x12, 0x34, 0x01, 0xff][..]).unwrap();
        assert_eq!(m.reserved(), 0x1234);
        assert_eq!(m.fpduptr(), 508);
        assert!(Marker::new_checked(&[0u8; 3][..]).is_err());
        let mut b = [0xffu8; 4];
        Marker::new_unchecked(&mut b[..]).set(0x0200);
        assert_eq!(b, [0, 0, 0x02, 0x00]);
    }

    #[test]
    fn positions() {
        let l = MarkerLayout::new(24);
        assert!(l.is_marker_at(24));
        assert!(l.is_marker_at(536));
        assert!(!l.is_marker_at(0));
        assert!(!l.is_marker_at(25));
        assert_eq!(l.next_at_or_after(0), 24);
        assert_eq!(l.next_at_or_after(24), 24);
        assert_eq!(l.next_at_or_after(25), 536);
        assert_eq!(l.next_at_or_after(u64::MAX), u64::MAX);
        assert_eq!(l.count_in(0, 24), 0);
        assert_eq!(l.count_in(0, 25), 1);
        assert_eq!(l.count_in(24, 537), 2);
        assert_eq!(l.count_in(25, 536), 0);
        assert_eq!(MarkerLayout::max_markers_in(1448), 3);
        assert_eq!(MarkerLayout::max_markers_in(512), 1);
    }

    #[test]
    fn record_lengths() {
        let l = MarkerLayout::new(0);
        // First FPDU: leading marker at 0.
        assert_eq!(l.record_wire_len(0, 8), 12);
        // 508 content octets after the leading marker end exactly at 512: next marker
        // belongs to the next record.
        assert_eq!(l.record_wire_len(0, 508), 512);
        assert_eq!(l.record_wire_len(0, 509), 517);
        assert_eq!(l.record_wire_len(512, 4), 8);
        assert_eq!(l.record_wire_len(100, 412), 412);
        assert_eq!(l.record_wire_len(100, 413), 417);
        assert_eq!(l.record_wire_len(4, 1500), 1500 + 4 * 2);
    }

    #[test]
    fn spread_first_fpdu_literal() {
        // Layout base 0, an 8-octet FPDU (ULPDU_Length 2, ULPDU "ab", CRC 4 octets).
        let l = MarkerLayout::new(0);
        let content = [0x00, 0x02, b'a', b'b', 0xc1, 0xc2, 0xc3, 0xc4];
        let mut out = [0u8; 12];
        out[4..].copy_from_slice(&content);
        let h = l.spread_in_place(0, &mut out, content.len());
        assert_eq!(h, 4);
        assert_eq!(
            out,
            [0, 0, 0, 0, 0x00, 0x02, b'a', b'b', 0xc1, 0xc2, 0xc3, 0xc4]
        );
    }

    #[test]
    fn spread_marker_inside_literal() {
        // Record at 504 of 16 content octets: marker at 512 (8 octets after the header).
        let l = MarkerLayout::new(0);
        let content: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        let mut out = [0u8; 20];
        out[4..].copy_from_slice(&content);
        assert_eq!(l.record_wire_len(504, 16), 20);
        let h = l.spread_in_place(504, &mut out, 16);
        assert_eq!(h, 0);
        assert_eq!(
            out,
            [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 8, 9, 10, 11, 12, 13, 14, 15, 16]
        );
        // Strip gives back the content and reports the marker.
        let mut back = [0u8; 16];
        let mut seen = None;
        let n = l.strip(504, &out, &mut back, |p, ptr| seen = Some((p, ptr)));
        assert_eq!(n, 16);
        assert_eq!(back, content);
        assert_eq!(seen, Some((512, 8)));
    }

    #[test]
    fn spread_strip_round_trip_many() {
        for base in [0u64, 3, 24, 511] {
            let l = MarkerLayout::new(base);
            let mut pos = base;
            for len in [8usize, 12, 508, 512, 1448, 3000] {
                let content: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                let wl = l.record_wire_len(pos, len);
                let mut out = vec![0u8; wl];
                out[wl - len..].copy_from_slice(&content);
                let h = l.spread_in_place(pos, &mut out, len);
                let mut back = vec![0u8; len];
                let mut markers = 0;
                let n = l.strip(pos, &out, &mut back, |p, ptr| {
                    markers += 1;
                    let expect = if p == pos { 0 } else { p - pos - h as u64 };
                    assert_eq!(ptr as u64, expect);
                });
                assert_eq!(n, len);
                assert_eq!(back, content);
                assert_eq!(markers as u64, l.count_in(pos, pos + wl as u64));
                pos += wl as u64;
            }
        }
    }

    #[test]
    fn strip_skips_cut_marker() {
        let l = MarkerLayout::new(0);
        // Stream [510, 520): marker at 512..516 whole, bytes 510,511,516.. content.
        let wire = [1, 2, 0, 0, 0, 4, 3, 4, 5, 6];
        let mut out = [0u8; 10];
        let n = l.strip(510, &wire, &mut out, |_, _| {});
        assert_eq!(&out[..n], &[1, 2, 3, 4, 5, 6]);
        // Starting inside the marker (at 514): its last two octets are skipped.
        let n = l.strip(514, &wire[4..], &mut out, |_, _| {
            panic!("cut marker reported")
        });
        assert_eq!(&out[..n], &[3, 4, 5, 6]);
    }
}
