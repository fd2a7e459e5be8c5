//! Target `tcp_segment`: `iwarp_tcp::TcpSegment::parse` with checksum verification on and
//! off, `TcpSegment::parse_usual` against it, and the header emitter as its inverse.
//!
//! Input: one control byte (bit 0: verify the checksum; bit 1: fix the checksum first so
//! that the verified path gets past it), the source and destination IPv4 addresses (8
//! bytes), then the TCP header and payload.

use iwarp_tcp::{FourTuple, TcpHeader, TcpParseError, TcpSegment, TCP_HEADER_LEN};
use iwarp_wire::l2l4::{IpAddress, Ipv4Address, TcpPacket};

use crate::cursor::Cursor;

/// Control bit: parse with checksum verification.
pub const CTRL_VERIFY: u8 = 1;
/// Control bit: fill in a correct checksum before parsing.
pub const CTRL_FIX_CHECKSUM: u8 = 2;

/// The body of the `tcp_segment` fuzz target.
pub fn tcp_segment(data: &[u8]) {
    let mut c = Cursor::new(data);
    let ctrl = c.u8();
    let src = c.u32().to_be_bytes();
    let dst = c.u32().to_be_bytes();
    let mut bytes = c.rest().to_vec();
    if ctrl & CTRL_FIX_CHECKSUM != 0 {
        if let Ok(mut p) = TcpPacket::new_checked(&mut bytes[..]) {
            p.fill_checksum(
                &IpAddress::Ipv4(Ipv4Address::from(src)),
                &IpAddress::Ipv4(Ipv4Address::from(dst)),
            );
        }
    }
    let verify = ctrl & CTRL_VERIFY != 0;
    let plain = TcpSegment::parse(src, dst, &bytes, false);
    // The usual segment read at fixed offsets is what the parse reads, wherever it
    // answers (the tuple comes from the caller).
    if let Ok(p) = &plain {
        if let Some(u) = TcpSegment::parse_usual(p.tuple, &bytes) {
            assert_eq!(&u, p);
        }
    } else {
        assert!(TcpSegment::parse_usual(dummy_tuple(src, dst), &bytes).is_none());
    }
    let checked = TcpSegment::parse(src, dst, &bytes, true);
    match (&plain, &checked) {
        (Ok(p), Ok(c)) => assert_eq!(p, c),
        (Ok(_), Err(e)) => assert_eq!(*e, TcpParseError::Checksum),
        (Err(e), Err(f)) => {
            assert_eq!(*e, TcpParseError::Truncated);
            assert_eq!(*f, TcpParseError::Truncated);
        }
        (Err(_), Ok(_)) => panic!("verification accepted what the plain parse refused"),
    }
    let Ok(seg) = (if verify { checked } else { plain }) else {
        return;
    };
    check_segment(&seg, src, dst, &bytes);
    round_trip(&seg, src, dst, false);
    round_trip(&seg, src, dst, true);
}

/// A tuple for a segment the parse refused (its ports unread).
fn dummy_tuple(src: [u8; 4], dst: [u8; 4]) -> FourTuple {
    FourTuple {
        local_ip: dst,
        local_port: 0,
        remote_ip: src,
        remote_port: 0,
    }
}

fn check_segment(seg: &TcpSegment<'_>, src: [u8; 4], dst: [u8; 4], bytes: &[u8]) {
    assert!(bytes.len() >= TCP_HEADER_LEN);
    assert!(seg.payload.len() <= bytes.len() - TCP_HEADER_LEN);
    assert!(bytes.ends_with(seg.payload));
    assert_eq!(seg.tuple.local_ip, dst);
    assert_eq!(seg.tuple.remote_ip, src);
    assert_eq!(
        seg.tuple.remote_port,
        u16::from_be_bytes([bytes[0], bytes[1]])
    );
    assert_eq!(
        seg.tuple.local_port,
        u16::from_be_bytes([bytes[2], bytes[3]])
    );
    assert_eq!(
        seg.seg_len() as usize,
        seg.payload.len() + usize::from(seg.flags.syn) + usize::from(seg.flags.fin)
    );
    assert!(seg.options.sack_blocks.iter().flatten().count() <= iwarp_tcp::MAX_SACK_BLOCKS);
}

/// Emits the parsed header with the same payload as the peer would and parses it back.
fn round_trip(seg: &TcpSegment<'_>, src: [u8; 4], dst: [u8; 4], offload: bool) {
    let hdr = TcpHeader {
        seq: seg.seq,
        ack: seg.ack,
        flags: seg.flags,
        window: seg.window,
        options: seg.options,
    };
    // The sender's view: its local side is the segment's remote side.
    let tuple = FourTuple {
        local_ip: seg.tuple.remote_ip,
        local_port: seg.tuple.remote_port,
        remote_ip: seg.tuple.local_ip,
        remote_port: seg.tuple.local_port,
    };
    let hlen = hdr.header_len();
    let mut buf = vec![0u8; hlen + seg.payload.len()];
    if let Some(p) = buf.get_mut(hlen..) {
        p.copy_from_slice(seg.payload);
    }
    let Some(n) = hdr.emit(&tuple, seg.payload.len(), &mut buf, offload) else {
        // Only options that do not fit 40 bytes are refused.
        assert!(hlen > iwarp_tcp::TCP_MAX_HEADER_LEN);
        return;
    };
    assert_eq!(n, buf.len());
    let back = TcpSegment::parse(src, dst, &buf, !offload).expect("an emitted segment parses");
    let mut expect = *seg;
    expect.flags.urg = false; // never emitted
    if !seg.flags.ack {
        expect.ack = iwarp_tcp::SeqNumber(0); // sent as zero without ACK
    }
    assert_eq!(back, expect);
    // A short buffer is refused, never overrun.
    if n > 0 {
        assert_eq!(
            hdr.emit(&tuple, seg.payload.len(), &mut buf[..n - 1], offload),
            None
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SYN from 198.18.0.12:41236 to 198.18.0.11:18515 (03-write-bw frame 1 layout): MSS 1460,
    // SACK permitted, timestamps, window scale 7.
    const SYN: [u8; 40] = [
        0xa1, 0x14, 0x48, 0x53, 0x6d, 0x3b, 0x21, 0x0c, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x8e, 0x3e,
        0x4c, 0x65, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    fn input(ctrl: u8, seg: &[u8]) -> Vec<u8> {
        let mut v = vec![ctrl, 198, 18, 0, 12, 198, 18, 0, 11];
        v.extend_from_slice(seg);
        v
    }

    #[test]
    fn syn_round_trips_with_and_without_verification() {
        tcp_segment(&input(CTRL_VERIFY | CTRL_FIX_CHECKSUM, &SYN));
        tcp_segment(&input(0, &SYN));
        // Wrong checksum with verification: refused, no panic.
        tcp_segment(&input(CTRL_VERIFY, &SYN));
        let mut ok = input(CTRL_FIX_CHECKSUM, &SYN);
        tcp_segment(&ok);
        ok.truncate(9 + 19);
        tcp_segment(&ok);
    }

    #[test]
    fn urg_and_ack_less_fields_are_normalised() {
        let mut s = SYN;
        s[13] = 0x20 | 0x08; // URG | PSH, no ACK
        s[8..12].copy_from_slice(&[1, 2, 3, 4]); // ack field without ACK
        tcp_segment(&input(CTRL_VERIFY | CTRL_FIX_CHECKSUM, &s));
    }
}
