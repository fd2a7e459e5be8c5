//! The usual segment of an established connection: a 32-octet header whose one option
//! is the timestamp (NOP, NOP, TS: RFC 7323 appendix A), flags ACK with or without PSH.
//! Almost every segment after the handshake has this layout, on both sides of a bulk
//! transfer (the data and the ACKs), so its fields sit at fixed offsets: a receiver that
//! knows a frame has the layout reads them there instead of walking the header
//! ([`TcpSegment::parse_usual`]), and the octets that differ between two such segments of
//! one connection are named here ([`USUAL_VARYING`]) for a receiver that predicts the
//! next frame from the last one (the engine's header prediction).

use core::ops::Range;

use crate::segment::{field, TcpFlags, TcpOptions, TcpSegment, TS_ONLY_LEN, TS_ONLY_PREFIX};
use crate::seq::SeqNumber;
use crate::{FourTuple, TCP_HEADER_LEN};

/// Length of the usual segment's header.
pub const USUAL_HEADER_LEN: usize = TCP_HEADER_LEN + TS_ONLY_LEN;

/// Offset of the flags octet in a header.
pub const FLAGS_OFFSET: usize = field::OFFSET_FLAGS.start + 1;
/// The PSH bit of the flags octet: the one flag that differs between two usual segments
/// (set on data, clear on a pure ACK).
pub const FLAG_PSH: u8 = 0x08;
/// The ACK bit of the flags octet.
const FLAG_ACK: u8 = 0x10;
/// Data offset octet of the usual header: 8 words, reserved bits clear.
const USUAL_DATA_OFFSET: u8 = ((USUAL_HEADER_LEN / 4) << 4) as u8;

/// The timestamp option's values in the usual header.
const TSVAL: Range<usize> = TCP_HEADER_LEN + 4..TCP_HEADER_LEN + 8;
const TSECR: Range<usize> = TCP_HEADER_LEN + 8..TCP_HEADER_LEN + 12;
/// The checksum (the urgent pointer beside it is compared, not read).
const CHECKSUM: Range<usize> = field::CHECKSUM_URGENT.start..field::CHECKSUM_URGENT.start + 2;

/// The octets of the usual header whose values two usual segments of one connection may
/// differ in, besides the PSH bit: sequence and acknowledgment numbers, window,
/// checksum, TSval and TSecr. Everything else (ports, data offset, the other flags, the
/// urgent pointer, the option kinds and lengths) is the same in all of them.
pub const USUAL_VARYING: [Range<usize>; 6] = [
    field::SEQ,
    field::ACK,
    field::WINDOW,
    CHECKSUM,
    TSVAL,
    TSECR,
];

/// True if `header` starts with a usual header: data offset 8 with reserved bits clear,
/// flags ACK or ACK+PSH (no FIN, SYN, RST, URG, ECE or CWR), options NOP NOP TS.
#[inline]
pub fn is_usual_header(header: &[u8]) -> bool {
    let Some(h) = header.get(..USUAL_HEADER_LEN) else {
        return false;
    };
    h[FLAGS_OFFSET - 1] == USUAL_DATA_OFFSET
        && h[FLAGS_OFFSET] & !FLAG_PSH == FLAG_ACK
        && h[TCP_HEADER_LEN..TCP_HEADER_LEN + 4] == TS_ONLY_PREFIX
}

#[inline(always)]
fn be32(h: &[u8; USUAL_HEADER_LEN], r: Range<usize>) -> u32 {
    u32::from_be_bytes([h[r.start], h[r.start + 1], h[r.start + 2], h[r.start + 3]])
}

impl<'a> TcpSegment<'a> {
    /// `bytes` (TCP header and payload, checksum already verified or offloaded) as
    /// [`TcpSegment::parse`] reads it, if its header is a usual one
    /// ([`is_usual_header`]), read at fixed offsets; `None` otherwise. `tuple` is the
    /// connection's, from the receiver's point of view: the caller knows it (the ports
    /// are not read).
    #[inline]
    pub fn parse_usual(tuple: FourTuple, bytes: &'a [u8]) -> Option<TcpSegment<'a>> {
        if !is_usual_header(bytes) {
            return None;
        }
        let (h, payload) = bytes.split_first_chunk::<USUAL_HEADER_LEN>()?;
        Some(TcpSegment {
            tuple,
            seq: SeqNumber(be32(h, field::SEQ)),
            ack: SeqNumber(be32(h, field::ACK)),
            flags: TcpFlags {
                ack: true,
                psh: h[FLAGS_OFFSET] & FLAG_PSH != 0,
                ..TcpFlags::default()
            },
            window: u16::from_be_bytes([h[field::WINDOW.start], h[field::WINDOW.start + 1]]),
            options: TcpOptions {
                timestamp: Some((be32(h, TSVAL), be32(h, TSECR))),
                ..TcpOptions::default()
            },
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::TcpHeader;
    use crate::test_util::xorshift;

    fn tuple(r: u64) -> FourTuple {
        FourTuple {
            local_ip: (r as u32).to_be_bytes(),
            local_port: (r >> 32) as u16,
            remote_ip: ((r >> 16) as u32).to_be_bytes(),
            remote_port: (r >> 48) as u16,
        }
    }

    /// Usual headers emitted by this stack, then mutated octet by octet: wherever
    /// `parse_usual` answers, `parse` answers the same; it answers for every unmutated
    /// usual header and for none whose layout octets changed.
    #[test]
    fn parse_usual_reads_what_parse_reads() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut answered = 0;
        for i in 0..20_000 {
            let r = xorshift(&mut x);
            let t = tuple(xorshift(&mut x));
            // The sender's view: local is the sender.
            let sender = FourTuple {
                local_ip: t.remote_ip,
                local_port: t.remote_port,
                remote_ip: t.local_ip,
                remote_port: t.local_port,
            };
            let hdr = TcpHeader {
                seq: SeqNumber(r as u32),
                ack: SeqNumber((r >> 32) as u32),
                flags: TcpFlags {
                    ack: true,
                    psh: r & 1 != 0,
                    ..TcpFlags::default()
                },
                window: (r >> 8) as u16,
                options: TcpOptions {
                    timestamp: Some((xorshift(&mut x) as u32, (r >> 24) as u32)),
                    ..TcpOptions::default()
                },
            };
            let payload_len = (r >> 40) as usize % 64;
            let mut buf = [0u8; 128];
            for (k, b) in buf[USUAL_HEADER_LEN..].iter_mut().enumerate() {
                *b = k as u8 ^ r as u8;
            }
            let n = hdr
                .emit(&sender, payload_len, &mut buf, r >> 7 & 1 != 0)
                .unwrap();
            let mut seg = buf[..n].to_vec();
            let pristine = i % 4 == 0;
            if !pristine {
                // One to three octets of the header changed at random.
                for _ in 0..1 + xorshift(&mut x) % 3 {
                    let at = xorshift(&mut x) as usize % USUAL_HEADER_LEN;
                    seg[at] ^= 1 << (xorshift(&mut x) % 8);
                }
            }
            let full = TcpSegment::parse(t.remote_ip, t.local_ip, &seg, false);
            match TcpSegment::parse_usual(t, &seg) {
                Some(u) => {
                    answered += 1;
                    let mut f = full.expect("parse_usual answered where parse refused");
                    // The tuple comes from the caller; the ports are not read.
                    f.tuple = t;
                    assert_eq!(u, f, "segment {i}");
                }
                None => {
                    assert!(!pristine, "a usual header refused (segment {i})");
                    assert!(!is_usual_header(&seg));
                }
            }
        }
        assert!(answered > 5_000, "{answered}");
    }

    #[test]
    fn parse_usual_refuses_short_segments_and_other_layouts() {
        let t = tuple(7);
        let mut h = [0u8; USUAL_HEADER_LEN];
        h[FLAGS_OFFSET - 1] = 0x80;
        h[FLAGS_OFFSET] = 0x10;
        h[TCP_HEADER_LEN..TCP_HEADER_LEN + 4].copy_from_slice(&TS_ONLY_PREFIX);
        assert!(TcpSegment::parse_usual(t, &h).is_some());
        assert!(TcpSegment::parse_usual(t, &h[..USUAL_HEADER_LEN - 1]).is_none());
        for (at, v) in [
            (FLAGS_OFFSET - 1, 0x81), // reserved bit (NS)
            (FLAGS_OFFSET - 1, 0x70), // data offset 7
            (FLAGS_OFFSET, 0x11),     // FIN
            (FLAGS_OFFSET, 0x12),     // SYN
            (FLAGS_OFFSET, 0x14),     // RST
            (FLAGS_OFFSET, 0x30),     // URG
            (FLAGS_OFFSET, 0x50),     // ECE
            (FLAGS_OFFSET, 0x08),     // PSH without ACK
            (TCP_HEADER_LEN + 2, 5),  // SACK option kind
        ] {
            let mut o = h;
            o[at] = v;
            assert!(
                TcpSegment::parse_usual(t, &o).is_none(),
                "octet {at} = {v:#x}"
            );
        }
    }
}
