//! Tests of the MPA wire formats, on octets taken from the captures.
use super::*;

/// MPA Request of `03-write-bw-mpa2-crc.pcap` frame 4 (TCP payload).
const REQ_03: [u8; 24] = [
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
    0x50, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
];
/// MPA Reply of the same connection.
const REP_03: [u8; 24] = [
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
    0x50, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
];
/// MPA Request of `01-rping-mpa2-nocrc.pcap` frame 4: no CRC, IRD=ORD=1.
const REQ_01: [u8; 24] = [
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
    0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
];
/// MPA Request of `04-read-bw-mpa2-crc.pcap` frame 21: IRD=ORD=128.
const REQ_04: [u8; 24] = [
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
    0x50, 0x02, 0x00, 0x04, 0x00, 0x80, 0x00, 0x80,
];

/// FPDU of `03-write-bw-mpa2-crc.pcap` frame 8 (a Send, ULPDU 22 octets, CRC on).
const FPDU_03_SEND: [u8; 28] = [
    0x00, 0x16, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x2f, 0xd8, 0x88, 0x6e,
];

#[test]
fn capture_requests_and_replies_decode() {
    let f = Frame::new_checked(&REQ_03[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(r.kind, FrameKind::Request);
    assert!(r.crc && !r.markers && !r.reject);
    assert_eq!(r.revision, 2);
    assert_eq!(
        r.enhanced,
        Some(EnhancedData {
            ird: 0,
            ord: 0,
            p2p: false,
            rtr: RtrSet::NONE
        })
    );
    assert!(r.private_data.is_empty());

    let f = Frame::new_checked(&REP_03[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(r.kind, FrameKind::Reply);
    assert!(r.crc);

    let f = Frame::new_checked(&REQ_01[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert!(!r.crc);
    assert_eq!(r.enhanced.unwrap().ird, 1);
    assert_eq!(r.enhanced.unwrap().ord, 1);

    let f = Frame::new_checked(&REQ_04[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(r.enhanced.unwrap().ird, 128);
    assert_eq!(r.enhanced.unwrap().ord, 128);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Every distinct MPA Request/Reply of the five captures (TCP payloads, tshark).
#[test]
fn every_capture_frame_decodes() {
    // (capture, frame, payload, kind, crc, ird/ord)
    let table: [(&str, u32, &str, FrameKind, bool, u16); 10] = [
        (
            "01",
            4,
            "4d504120494420526571204672616d651002000400010001",
            FrameKind::Request,
            false,
            1,
        ),
        (
            "01",
            6,
            "4d504120494420526570204672616d651002000400010001",
            FrameKind::Reply,
            false,
            1,
        ),
        (
            "02",
            4,
            "4d504120494420526571204672616d655002000400000000",
            FrameKind::Request,
            true,
            0,
        ),
        (
            "02",
            6,
            "4d504120494420526570204672616d655002000400000000",
            FrameKind::Reply,
            true,
            0,
        ),
        (
            "03",
            4,
            "4d504120494420526571204672616d655002000400000000",
            FrameKind::Request,
            true,
            0,
        ),
        (
            "03",
            6,
            "4d504120494420526570204672616d655002000400000000",
            FrameKind::Reply,
            true,
            0,
        ),
        (
            "04",
            21,
            "4d504120494420526571204672616d655002000400800080",
            FrameKind::Request,
            true,
            128,
        ),
        (
            "04",
            23,
            "4d504120494420526570204672616d655002000400800080",
            FrameKind::Reply,
            true,
            128,
        ),
        (
            "05",
            4,
            "4d504120494420526571204672616d651002000400000000",
            FrameKind::Request,
            false,
            0,
        ),
        (
            "05",
            6,
            "4d504120494420526570204672616d651002000400000000",
            FrameKind::Reply,
            false,
            0,
        ),
    ];
    for (cap, frame, payload, kind, crc, irdord) in table {
        let b = hex(payload);
        let f = Frame::new_checked(&b[..]).unwrap();
        let r = FrameRepr::parse(&f).unwrap();
        assert_eq!(r.kind, kind, "{cap} frame {frame}");
        assert_eq!(r.crc, crc, "{cap} frame {frame}");
        assert!(!r.markers && !r.reject && f.enhanced());
        assert_eq!(f.flags() & FLAG_GSO, 0);
        assert_eq!(r.revision, REVISION_2);
        let e = r.enhanced.unwrap();
        assert_eq!(
            (e.ird, e.ord, e.p2p, e.rtr),
            (irdord, irdord, false, RtrSet::NONE)
        );
        // Emitting the parsed frame gives the same octets.
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Frame::new_unchecked(&mut out[..]));
        assert_eq!(out, b, "{cap} frame {frame}");
    }
}

#[test]
fn emit_matches_capture() {
    let repr = FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        enhanced: Some(EnhancedData {
            ird: 128,
            ord: 128,
            p2p: false,
            rtr: RtrSet::NONE,
        }),
        private_data: &[],
    };
    let mut buf = [0u8; 24];
    assert_eq!(repr.buffer_len(), 24);
    repr.emit(&mut Frame::new_unchecked(&mut buf[..]));
    assert_eq!(buf, REQ_04);
}

#[test]
fn enhanced_bits() {
    let e = EnhancedData {
        ird: 0x3fff,
        ord: 5,
        p2p: true,
        rtr: RtrSet::WRITE | RtrSet::READ,
    };
    assert_eq!(e.to_bytes(), [0xbf, 0xff, 0xc0, 0x05]);
    assert_eq!(EnhancedData::parse(&e.to_bytes()).unwrap(), e);
    let s = EnhancedData {
        ird: 1,
        ord: 2,
        p2p: true,
        rtr: RtrSet::SEND,
    };
    assert_eq!(s.to_bytes(), [0xc0, 0x01, 0x00, 0x02]);
    assert_eq!(EnhancedData::parse(&s.to_bytes()).unwrap(), s);
    // Values above 14 bits are masked.
    let big = EnhancedData {
        ird: 0xffff,
        ord: 0,
        p2p: false,
        rtr: RtrSet::NONE,
    };
    assert_eq!(big.to_bytes(), [0x3f, 0xff, 0, 0]);
    assert_eq!(EnhancedData::parse(&[0, 1, 0]), Err(WireError::Truncated));
}

#[test]
fn malformed_frames() {
    assert_eq!(
        Frame::new_checked(&REQ_03[..19]).unwrap_err(),
        WireError::Truncated
    );
    // PD_Length says 4, only 3 present.
    assert_eq!(
        Frame::new_checked(&REQ_03[..23]).unwrap_err(),
        WireError::Truncated
    );
    // PD_Length 513.
    let mut big = [0u8; 20 + 513];
    big[..20].copy_from_slice(&REQ_03[..20]);
    big[18] = 0x02;
    big[19] = 0x01;
    assert_eq!(
        Frame::new_checked(&big[..]).unwrap_err(),
        WireError::Malformed
    );
    // Bad key.
    let mut bad = REQ_03;
    bad[3] = b'_';
    let f = Frame::new_checked(&bad[..]).unwrap();
    assert_eq!(FrameRepr::parse(&f).unwrap_err(), WireError::Malformed);
    // Enhanced revision 2 without room for the IRD/ORD data.
    let mut short = [0u8; 22];
    short[..18].copy_from_slice(&REQ_03[..18]);
    short[19] = 2;
    let f = Frame::new_checked(&short[..]).unwrap();
    assert_eq!(FrameRepr::parse(&f).unwrap_err(), WireError::Malformed);
    // Revision 1 with the same bytes: plain private data.
    short[17] = 1;
    let f = Frame::new_checked(&short[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(r.enhanced, None);
    assert_eq!(r.private_data.len(), 2);
}

#[test]
fn fpdu_lengths() {
    assert_eq!(pad_len(0), 2);
    assert_eq!(pad_len(1), 1);
    assert_eq!(pad_len(2), 0);
    assert_eq!(pad_len(22), 0);
    assert_eq!(fpdu_len(22), 28);
    assert_eq!(fpdu_len(1442), 1448);
    assert_eq!(fpdu_len(1441), 1448);
    assert_eq!(fpdu_len(0xffff), 2 + 0xffff + 3 + 4);
}

#[test]
fn capture_fpdu_crc_verifies() {
    let f = Fpdu::new_checked(&FPDU_03_SEND[..]).unwrap();
    assert_eq!(f.ulpdu_len(), 22);
    assert_eq!(f.crc_field(), 0x6e88_d82f);
    assert!(f.verify_crc());
    for i in 0..FPDU_03_SEND.len() {
        let mut c = FPDU_03_SEND;
        c[i] ^= 0x01;
        match Fpdu::new_checked(&c[..]) {
            Ok(f) => assert!(!f.verify_crc(), "flip at {i} not caught"),
            Err(e) => assert_eq!(e, WireError::Truncated),
        }
    }
}

#[test]
fn fpdu_emit_round_trip() {
    let mut buf = [0xaau8; 28];
    let mut f = Fpdu::new_unchecked(&mut buf[..]);
    f.set_ulpdu_len(22);
    f.ulpdu_mut().copy_from_slice(&FPDU_03_SEND[2..24]);
    f.finish(true);
    assert_eq!(buf, FPDU_03_SEND);
    let mut f = Fpdu::new_unchecked(&mut buf[..]);
    f.finish(false);
    assert_eq!(&buf[24..], &[0, 0, 0, 0]);
    // Pad is zeroed.
    let mut odd = [0xffu8; 12];
    let mut f = Fpdu::new_unchecked(&mut odd[..]);
    f.set_ulpdu_len(5);
    f.finish(false);
    assert_eq!(&odd[7..8], &[0]);
    assert_eq!(
        Fpdu::new_checked(&odd[..11]).unwrap_err(),
        WireError::Truncated
    );
}

#[test]
fn zero_pad_zeroes_exactly_the_pad() {
    for len in 0..=6 {
        let mut b = [0xffu8; 8];
        zero_pad(&mut b[1..1 + len]);
        assert_eq!(b[0], 0xff);
        assert!(b[1..1 + len].iter().all(|&x| x == 0), "len {len}");
        assert!(b[1 + len..].iter().all(|&x| x == 0xff), "len {len}");
    }
}
