//! MPA Request/Reply frames, RFC 6581 data, FPDUs and markers.

use iwarp_wire::crc;
use iwarp_wire::marker::{Marker, MarkerLayout, MARKER_INTERVAL, MARKER_LEN};
use iwarp_wire::mpa::{
    self, EnhancedData, Fpdu, Frame, FrameRepr, FRAME_HEADER_LEN, FRAME_MAX_LEN, PRIVATE_DATA_MAX,
};

use crate::cursor::Cursor;

/// Request/Reply frame: accessors in bounds, repr round trip, RFC 6581 data round trip.
pub(super) fn mpa_frame(data: &[u8]) {
    if let Ok(e) = EnhancedData::parse(data) {
        let b = e.to_bytes();
        assert_eq!(EnhancedData::parse(&b), Ok(e));
        let _ = e.rtr.preferred();
    }
    let Ok(f) = Frame::new_checked(data) else {
        return;
    };
    let total = f.total_len();
    assert!(total <= data.len() && total <= FRAME_MAX_LEN);
    assert_eq!(f.private_data().len(), usize::from(f.pd_len()));
    assert!(usize::from(f.pd_len()) <= PRIVATE_DATA_MAX);
    let _ = (
        f.key(),
        f.kind(),
        f.flags(),
        f.markers(),
        f.crc(),
        f.reject(),
    );
    let _ = (f.enhanced(), f.revision());
    let Ok(repr) = FrameRepr::parse(&f) else {
        return;
    };
    let len = repr.buffer_len();
    assert_eq!(len, total);
    let mut buf = [0u8; FRAME_MAX_LEN];
    repr.emit(&mut Frame::new_unchecked(&mut buf[..len]));
    let back = Frame::new_checked(&buf[..len]).expect("an emitted frame is whole");
    assert_eq!(FrameRepr::parse(&back), Ok(repr));
    // The header differs at most in the flag octet: unknown bits are not emitted, and the
    // enhanced bit only with revision 2 data.
    let flags = mpa::FLAG_MARKERS | mpa::FLAG_CRC | mpa::FLAG_REJECT;
    let e = if repr.enhanced.is_some() {
        mpa::FLAG_ENHANCED
    } else {
        0
    };
    assert_eq!(buf[16], (data[16] & flags) | e);
    assert_eq!(buf[..16], data[..16]);
    assert_eq!(buf[17..FRAME_HEADER_LEN], data[17..FRAME_HEADER_LEN]);
    assert_eq!(buf[FRAME_HEADER_LEN..len], data[FRAME_HEADER_LEN..len]);
}

/// One FPDU: accessors in bounds; `finish` makes a CRC that verifies (with both CRC
/// helpers agreeing) and zero pad; a copy refinished keeps its ULPDU.
pub(super) fn fpdu(data: &[u8]) {
    let Ok(f) = Fpdu::new_checked(data) else {
        return;
    };
    let n = usize::from(f.ulpdu_len());
    let total = f.total_len();
    assert_eq!(total, mpa::fpdu_len(n));
    assert!(total <= data.len());
    assert_eq!(total % 4, 0);
    assert_eq!(f.ulpdu().len(), n);
    assert_eq!(f.pad().len(), mpa::pad_len(n));
    assert_eq!(f.verify_crc(), crc::verify_mpa_crc(&data[..total]));
    assert_eq!(f.compute_crc(), crc::crc32c(&data[..total - mpa::CRC_LEN]));
    let _ = f.crc_field();
    let mut buf = data[..total].to_vec();
    let mut g = Fpdu::new_unchecked(&mut buf[..]);
    g.finish(true);
    assert!(g.verify_crc());
    assert!(g.pad().iter().all(|&b| b == 0));
    assert_eq!(g.ulpdu(), f.ulpdu());
    g.finish(false);
    assert_eq!(g.crc_field(), 0);
    let mut inc = crc::Crc32c::new();
    let covered = &data[..total - mpa::CRC_LEN];
    let (a, b) = covered.split_at(covered.len() / 2);
    inc.update(a);
    inc.update(b);
    assert_eq!(inc.value(), f.compute_crc());
    assert_eq!(
        inc.matches_wire(&data[total - mpa::CRC_LEN..total]),
        f.verify_crc()
    );
}

/// Markers: the view, and spread → strip giving back the record with the FPDUPTRs the
/// module rules promise; strip of arbitrary wire bytes stays in bounds.
pub(super) fn markers(data: &[u8]) {
    let mut c = Cursor::new(data);
    // Positions are stream offsets (internal, not untrusted): keep them far from u64::MAX.
    let base = c.u32() as u64;
    let start = base + 4 * u64::from(c.u16());
    let content_len = 4 * c.below(4096);
    let layout = MarkerLayout::new(base);
    let wire = c.rest();
    if let Ok(m) = Marker::new_checked(wire) {
        assert_eq!(m.fpduptr() & 3, 0);
        let _ = m.reserved();
    }
    // Strip arbitrary bytes: only non-marker bytes come out.
    let mut out = vec![0u8; wire.len()];
    let mut last = None;
    let got = layout.strip(start, wire, &mut out, |pos, _| {
        assert!(layout.is_marker_at(pos));
        assert!(last.is_none_or(|l| pos > l));
        last = Some(pos);
    });
    let markers = layout.count_in(start, start + wire.len() as u64);
    assert!(got <= wire.len());
    assert!(got + (markers as usize) * MARKER_LEN >= wire.len().saturating_sub(MARKER_LEN));
    // Spread a record whose content is the wire bytes, then strip it back.
    let content: Vec<u8> = (0..content_len)
        .map(|i| wire.get(i % wire.len().max(1)).copied().unwrap_or(0))
        .collect();
    let wl = layout.record_wire_len(start, content_len);
    assert!(wl >= content_len);
    let mut rec = vec![0u8; wl];
    rec[wl - content_len..].copy_from_slice(&content);
    let header = layout.spread_in_place(start, &mut rec, content_len);
    assert!(header == 0 || header == MARKER_LEN);
    let mut back = vec![0u8; content_len];
    let mut seen = 0u64;
    let n = layout.strip(start, &rec, &mut back, |pos, ptr| {
        seen += 1;
        let expect = if pos == start {
            0
        } else {
            pos - start - header as u64
        };
        assert_eq!(u64::from(ptr), expect);
    });
    assert_eq!(n, content_len);
    assert_eq!(back, content);
    assert_eq!(seen, layout.count_in(start, start + wl as u64));
    assert!(seen as usize <= MarkerLayout::max_markers_in(wl) + 1);
    assert!(layout.next_at_or_after(start) >= start);
    assert!(layout.next_at_or_after(start) - start < MARKER_INTERVAL || start < base);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siw_request_frame_and_fpdu_literals() {
        // siw MPA Request: rev 2, C=0, E set, 4 bytes of RFC 6581 data (IRD/ORD 128, Write
        // RTR), as in 01-rping.
        let mut f = Vec::from(&mpa::KEY_REQ[..]);
        f.extend_from_slice(&[0x10, 0x02, 0x00, 0x04, 0x00, 0x80, 0x80, 0x80]);
        mpa_frame(&f);
        // Unknown flag bits (0x07) are not emitted; the rest of the header is.
        f[16] |= 0x07;
        mpa_frame(&f);
        // An FPDU: ULPDU_Length 2, "ab", no pad, CRC zero.
        fpdu(&[0x00, 0x02, b'a', b'b', 0, 0, 0, 0]);
        // Truncated FPDU.
        fpdu(&[0x00, 0x03, b'a', b'b', 0, 0, 0, 0]);
    }

    #[test]
    fn markers_with_header_marker_and_inside_marker() {
        // base 0, start 0, 8 content bytes: a marker precedes the header.
        markers(&[0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8]);
        // base 0, start 504 (126 * 4), 16 content bytes: marker inside.
        markers(&[0, 0, 0, 0, 0, 126, 0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        // Far base, large record.
        markers(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 9]);
    }
}
