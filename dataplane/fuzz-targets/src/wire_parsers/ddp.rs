//! DDP headers and RDMAP bodies (Read Request, Terminate, whole segments).

use iwarp_wire::ddp::{self, Packet, Repr, MASK_DDP_RSVD, MASK_RDMAP_RSVD};
use iwarp_wire::rdmap::{
    looks_like_siw_bitfields, CopiedDdpHeader, ReadRequest, ReadRequestRepr, Segment, TermControl,
    TerminateRepr, MAX_TERMINATE_LEN, READ_REQUEST_LEN,
};

/// DDP view: accessors in bounds after `new_checked`; header repr round trip; the emitted
/// header equals the received one with the reserved bits cleared.
pub(super) fn ddp_packet(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        // The repr parser must refuse what the view refuses.
        assert!(Repr::parse_bytes(data).is_err());
        return;
    };
    let hlen = p.header_len();
    assert!(hlen <= data.len());
    assert_eq!(hlen, ddp::header_len_for(data[0]));
    // Every accessor must be panic-free on a checked view, whatever the model.
    let _ = (p.ddp_ctrl(), p.rdmap_ctrl(), p.is_last(), p.opcode());
    let _ = (
        p.stag(),
        p.to(),
        p.rsvd_ulp(),
        p.inv_stag(),
        p.qn(),
        p.msn(),
        p.mo(),
    );
    assert_eq!(p.ddp_version(), ddp::DDP_VERSION);
    assert_eq!(p.rdmap_version(), ddp::RDMAP_VERSION);
    assert_eq!(p.payload().len(), data.len() - hlen);
    let Ok(repr) = Repr::parse(&p) else {
        return;
    };
    assert_eq!(repr.buffer_len(), hlen);
    assert_eq!(repr.is_tagged(), p.is_tagged());
    let mut buf = [0u8; ddp::MAX_HEADER_LEN];
    let n = repr.emit_bytes(&mut buf);
    assert_eq!(n, hlen);
    assert_eq!(Repr::parse_bytes(&buf[..n]), Ok(repr));
    let mut expect = [0u8; ddp::MAX_HEADER_LEN];
    expect[..n].copy_from_slice(&data[..n]);
    expect[0] &= !MASK_DDP_RSVD;
    expect[1] &= !MASK_RDMAP_RSVD;
    assert_eq!(
        buf[..n],
        expect[..n],
        "emitted header differs from the received one"
    );
    let _ = repr.to_string();
}

/// Whole segment: parse → emit → parse is the identity on the repr, and the emitted length
/// never exceeds the input's (trailing Terminate bytes are dropped).
pub(super) fn rdmap_segment(data: &[u8]) {
    let Ok(seg) = Segment::parse(data) else {
        return;
    };
    let len = seg.buffer_len();
    assert!(len <= data.len());
    let mut buf = vec![0u8; len];
    assert_eq!(seg.emit(&mut buf), len);
    let again = Segment::parse(&buf).expect("an emitted segment parses");
    assert_eq!(again, seg);
    if seg.header.opcode.has_payload() {
        assert_eq!(seg.payload(), &data[seg.header.buffer_len()..]);
    }
    let _ = seg.to_string();
}

/// Read Request view and repr round trip (also through `advanced`).
pub(super) fn read_request(data: &[u8]) {
    let Ok(v) = ReadRequest::new_checked(data) else {
        assert!(data.len() < READ_REQUEST_LEN);
        assert!(ReadRequestRepr::parse_bytes(data).is_err());
        return;
    };
    let _ = (
        v.sink_stag(),
        v.sink_to(),
        v.size(),
        v.src_stag(),
        v.src_to(),
    );
    let repr = ReadRequestRepr::parse(&v).expect("a checked view parses");
    let mut buf = [0u8; READ_REQUEST_LEN];
    repr.emit(&mut ReadRequest::new_unchecked(&mut buf[..]));
    assert_eq!(buf[..], data[..READ_REQUEST_LEN]);
    assert_eq!(ReadRequestRepr::parse_bytes(&buf), Ok(repr));
    let done = u32::from_be_bytes([buf[3], buf[7], buf[11], buf[15]]);
    let adv = repr.advanced(done);
    assert_eq!(adv.size, repr.size.saturating_sub(done));
    assert_eq!(adv.src_to, repr.src_to.wrapping_add(u64::from(done)));
    let _ = repr.to_string();
}

/// Terminate header: the RFC reading round-trips through `emit`; the heuristic reading is
/// one of the two readings; `about_segment` builds a header that round-trips too.
pub(super) fn terminate(data: &[u8]) {
    let rfc = TerminateRepr::parse(data);
    let siw = TerminateRepr::parse_siw(data);
    if let Ok(t) = rfc {
        terminate_round_trip(&t);
    }
    if let Ok(t) = siw {
        terminate_round_trip(&t);
    }
    if let Ok((t, used_siw)) = TerminateRepr::parse_any(data) {
        assert_eq!(used_siw, looks_like_siw_bitfields(data));
        let expect = if used_siw { siw } else { rfc };
        assert_eq!(Ok(t), expect);
    }
    if let Some(b) = data.get(..4) {
        let b = [b[0], b[1], b[2], b[3]];
        let ctl = TermControl::parse(b);
        assert_eq!(TermControl::parse(ctl.to_bytes()), ctl);
        let _ = TermControl::parse_siw(b);
    }
    // A Terminate about the input taken as a segment.
    let code = TermControl::parse([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
        0,
        0,
    ])
    .code;
    let about = TerminateRepr::about_segment(code, data);
    terminate_round_trip(&about);
    if let Ok(h) = CopiedDdpHeader::from_segment(data) {
        assert_eq!(h.as_bytes(), &data[..h.as_bytes().len()]);
        let _ = (h.parse(), h.to_string(), format!("{h:?}"));
    }
}

fn terminate_round_trip(t: &TerminateRepr) {
    let len = t.buffer_len();
    assert!(len <= MAX_TERMINATE_LEN);
    let mut buf = [0u8; MAX_TERMINATE_LEN];
    assert_eq!(t.emit(&mut buf), len);
    let back = TerminateRepr::parse(&buf[..len]).expect("an emitted Terminate parses");
    // D without M emits a zero length that reads back as "not valid": same repr.
    assert_eq!(&back, t);
    let _ = t.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    // Untagged Send L=1, QN 0, MSN 6, MO 0 and 4 payload bytes (03-write-bw frame 26 header).
    const SEND: [u8; 22] = [
        0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 1, 2, 3, 4,
    ];

    #[test]
    fn ddp_send_with_reserved_bits_round_trips_cleared() {
        let mut s = SEND;
        s[0] |= 0x3c;
        s[1] |= 0x30;
        ddp_packet(&s);
        ddp_packet(&SEND);
        rdmap_segment(&SEND);
        terminate(&SEND);
    }

    #[test]
    fn read_request_and_terminate_literals() {
        // The RDMA Read Request of 04-read-bw frame 33 (RDMAP header only).
        let rr: [u8; 28] = [
            0xd4, 0x9b, 0x6e, 0x00, 0x00, 0x00, 0x55, 0xf0, 0x33, 0x37, 0xe0, 0x00, 0x00, 0x01,
            0x00, 0x00, 0xa7, 0xd7, 0xb4, 0x00, 0x00, 0x00, 0x56, 0x23, 0x1c, 0x02, 0x30, 0x00,
        ];
        read_request(&rr);
        // Terminate 0x0101 (base/bounds) with M and D, about the Send above.
        let mut t = vec![0x01, 0x01, 0xc0, 0x00, 0x00, 0x04];
        t.extend_from_slice(&SEND[..18]);
        terminate(&t);
        // siw layout of the same code: layer in the low nibble, flags in 0x03.
        terminate(&[0x10, 0x01, 0x03, 0x00, 0x00, 0x04]);
        terminate(&[0x10, 0x01, 0x03]);
    }
}
