//! Header prediction on input, after Van Jacobson's for TCP, taken down to the frame.
//!
//! In a bulk transfer a connection's frames differ from one to the next in a few fields
//! only: the IPv4 total length, identification and checksum, and the TCP fields
//! [`iwarp_tcp::USUAL_VARYING`] names (sequence and acknowledgment numbers, window,
//! checksum, timestamps) and the PSH bit. The last frame of a known connection that the
//! full path took and that carried a usual segment (`iwarp_tcp::is_usual_header`) is
//! kept; a frame equal to it in every other octet of its first [`HEAD_LEN`] is that
//! connection's next usual segment. The Ethernet and IPv4 checks the full path made
//! hold for the octets the two share (addresses, version and header length, flags and
//! fragment offset, protocol, ports, TCP layout); what is left is checked here (the
//! total length, and both checksums unless offloaded), the segment's fields are read at
//! fixed offsets ([`TcpSegment::parse_usual`]) and no demultiplexer lookup is made.
//! Whatever does not match takes the full path, which judges it as before.
//!
//! Why a kept frame and not the connection's expected values: the frame says everything
//! the checks needed in one comparison of nine words; the values it would be compared
//! against are spread over the connection's state.

use core::net::Ipv4Addr;
use core::ops::Range;

use iwarp_tcp::{
    is_usual_header, FourTuple, TcpSegment, FLAGS_OFFSET, FLAG_PSH, USUAL_HEADER_LEN, USUAL_VARYING,
};
use iwarp_types::ConnId;
use smoltcp::wire::{IpAddress, Ipv4Address, Ipv4Packet, TcpPacket};

use crate::config::{ETH_HEADER_LEN, IPV4_HEADER_LEN};
use crate::iface::L4_OFFSET;

/// The octets of a frame compared with the kept one: Ethernet, IPv4 and the usual TCP
/// header.
pub(crate) const HEAD_LEN: usize = L4_OFFSET + USUAL_HEADER_LEN;

/// IPv4 fields that differ between a connection's frames (RFC 791 offsets in the header).
const IP_TOTAL_LEN: Range<usize> = 2..4;
const IP_IDENT: Range<usize> = 4..6;
const IP_CHECKSUM: Range<usize> = 10..12;

/// Whole words of the compared octets, and the two left after them.
const WORDS: usize = HEAD_LEN / 8;
const TAIL: usize = WORDS * 8;

/// Per octet of the head: the bits a predicted frame must share with the kept one.
const KEEP: [u8; HEAD_LEN] = keep_mask();

const fn keep_mask() -> [u8; HEAD_LEN] {
    let mut m = [0xff; HEAD_LEN];
    let ip = [IP_TOTAL_LEN, IP_IDENT, IP_CHECKSUM];
    let mut i = 0;
    while i < ip.len() {
        clear(&mut m, ETH_HEADER_LEN, &ip[i]);
        i += 1;
    }
    let mut i = 0;
    while i < USUAL_VARYING.len() {
        clear(&mut m, L4_OFFSET, &USUAL_VARYING[i]);
        i += 1;
    }
    m[L4_OFFSET + FLAGS_OFFSET] = !FLAG_PSH;
    m
}

/// Zeroes `m` over `r` moved by `base`.
const fn clear(m: &mut [u8; HEAD_LEN], base: usize, r: &Range<usize>) {
    let mut o = base + r.start;
    while o < base + r.end {
        m[o] = 0;
        o += 1;
    }
}

/// [`KEEP`] as the words the comparison loads.
const KEEP_WORDS: [u64; WORDS] = keep_words();
const KEEP_TAIL: u16 = u16::from_ne_bytes([KEEP[TAIL], KEEP[TAIL + 1]]);

const fn keep_words() -> [u64; WORDS] {
    let mut w = [0; WORDS];
    let mut i = 0;
    while i < WORDS {
        let mut b = [0; 8];
        let mut k = 0;
        while k < 8 {
            b[k] = KEEP[i * 8 + k];
            k += 1;
        }
        w[i] = u64::from_ne_bytes(b);
        i += 1;
    }
    w
}

/// The head of a frame as words, masked by [`KEEP`].
#[inline(always)]
fn masked(head: &[u8; HEAD_LEN]) -> ([u64; WORDS], u16) {
    let mut w = [0; WORDS];
    for (i, (out, chunk)) in w.iter_mut().zip(head.chunks_exact(8)).enumerate() {
        let mut b = [0; 8];
        b.copy_from_slice(chunk);
        *out = u64::from_ne_bytes(b) & KEEP_WORDS[i];
    }
    let tail = u16::from_ne_bytes([head[TAIL], head[TAIL + 1]]) & KEEP_TAIL;
    (w, tail)
}

/// The kept frame of one connection (one per engine: the connection whose frames came
/// last).
#[derive(Debug)]
pub(crate) struct RxPrediction {
    /// The connection; `None` until a usual frame is kept.
    id: Option<ConnId>,
    /// The kept frame's head, masked.
    words: [u64; WORDS],
    tail: u16,
    /// The connection's tuple (receiver's view) and the sender's MAC: what the full
    /// path's parse would say of a predicted frame.
    tuple: FourTuple,
    src_mac: [u8; 6],
    /// Tests compare the engine with and without prediction.
    #[cfg(test)]
    pub(crate) off: bool,
}

impl RxPrediction {
    pub(crate) fn new() -> RxPrediction {
        RxPrediction {
            id: None,
            words: [0; WORDS],
            tail: 0,
            tuple: FourTuple {
                local_ip: [0; 4],
                local_port: 0,
                remote_ip: [0; 4],
                remote_port: 0,
            },
            src_mac: [0; 6],
            #[cfg(test)]
            off: false,
        }
    }

    /// Keeps `frame`, which the full path found to carry a segment of connection `id`
    /// (`tuple` as its parse read it), if that segment is a usual one.
    #[inline]
    pub(crate) fn learn(&mut self, frame: &[u8], id: ConnId, tuple: &FourTuple) {
        #[cfg(test)]
        if self.off {
            return;
        }
        let Some(head) = frame.first_chunk::<HEAD_LEN>() else {
            return;
        };
        if !is_usual_header(&head[L4_OFFSET..]) {
            return;
        }
        (self.words, self.tail) = masked(head);
        self.id = Some(id);
        self.tuple = *tuple;
        self.src_mac = [head[6], head[7], head[8], head[9], head[10], head[11]];
    }

    /// Forgets the kept frame (its connection is gone).
    pub(crate) fn forget(&mut self) {
        self.id = None;
    }

    /// The connection and segment of `frame` if it is predicted (checksums verified
    /// unless `checksums_offloaded`); `None` sends it down the full path. The
    /// connection may have been removed since: the caller checks.
    #[inline]
    pub(crate) fn predict<'a>(
        &self,
        frame: &'a [u8],
        checksums_offloaded: bool,
    ) -> Option<(ConnId, TcpSegment<'a>)> {
        let id = self.id?;
        let head = frame.first_chunk::<HEAD_LEN>()?;
        let (words, tail) = masked(head);
        let mut diff = u64::from(tail ^ self.tail);
        for (a, b) in words.iter().zip(&self.words) {
            diff |= a ^ b;
        }
        if diff != 0 {
            return None;
        }
        let ip = ETH_HEADER_LEN;
        let total = usize::from(u16::from_be_bytes([
            head[ip + IP_TOTAL_LEN.start],
            head[ip + IP_TOTAL_LEN.start + 1],
        ]));
        let end = ETH_HEADER_LEN + total;
        if total < IPV4_HEADER_LEN + USUAL_HEADER_LEN || end > frame.len() {
            return None;
        }
        let segment = &frame[L4_OFFSET..end];
        if !checksums_offloaded && !self.checksums_hold(&frame[ip..end], segment) {
            return None;
        }
        Some((id, TcpSegment::parse_usual(self.tuple, segment)?))
    }

    /// The IPv4 header's checksum and the TCP segment's (with its pseudo-header).
    fn checksums_hold(&self, packet: &[u8], segment: &[u8]) -> bool {
        let src = IpAddress::Ipv4(Ipv4Address::from(self.tuple.remote_ip));
        let dst = IpAddress::Ipv4(Ipv4Address::from(self.tuple.local_ip));
        Ipv4Packet::new_checked(packet).is_ok_and(|p| p.verify_checksum())
            && TcpPacket::new_checked(segment).is_ok_and(|s| s.verify_checksum(&src, &dst))
    }

    /// The sender of a predicted frame: IPv4 address and MAC.
    #[inline]
    pub(crate) fn source(&self) -> (Ipv4Addr, [u8; 6]) {
        (Ipv4Addr::from(self.tuple.remote_ip), self.src_mac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineConfig;
    use crate::counters::Counters;
    use crate::iface::{Iface, Ingress};
    use iwarp_tcp::{SeqNumber, TcpFlags, TcpHeader, TcpOptions};
    use iwarp_types::Instant;
    use smoltcp::wire::IpProtocol;

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// The peer's interface: 198.18.0.2.
    fn peer() -> Iface {
        Iface::new(&EngineConfig {
            mac: [0x02, 0, 0, 0, 0, 0x02],
            ipv4: Ipv4Addr::new(198, 18, 0, 2),
            ..EngineConfig::default()
        })
    }

    /// A usual segment from the peer (port 4791) to `iface` (port 5000) in a frame:
    /// random numbers, window, timestamps, PSH, identification and payload length;
    /// checksums complete.
    fn frame_from_peer(iface: &Iface, x: &mut u64) -> Vec<u8> {
        let r = xorshift(x);
        let peer = peer();
        let sender = FourTuple {
            local_ip: peer.ip.octets(),
            local_port: 4791,
            remote_ip: iface.ip.octets(),
            remote_port: 5000,
        };
        let payload_len = if r & 1 == 0 {
            0
        } else {
            (r >> 8) as usize % 1448
        };
        let hdr = TcpHeader {
            seq: SeqNumber(xorshift(x) as u32),
            ack: SeqNumber(xorshift(x) as u32),
            flags: TcpFlags {
                ack: true,
                psh: payload_len > 0,
                ..TcpFlags::default()
            },
            window: (r >> 24) as u16,
            options: TcpOptions {
                timestamp: Some((xorshift(x) as u32, xorshift(x) as u32)),
                ..TcpOptions::default()
            },
        };
        let mut f = vec![0u8; HEAD_LEN + payload_len];
        for b in &mut f[HEAD_LEN..] {
            *b = xorshift(x) as u8;
        }
        let n = hdr
            .emit(&sender, payload_len, &mut f[L4_OFFSET..], false)
            .unwrap();
        peer.emit_headers(&mut f, iface.mac, iface.ip, IpProtocol::Tcp, n);
        // The identification varies with some senders (Linux with DF set).
        f[ETH_HEADER_LEN + IP_IDENT.start] = r as u8;
        Ipv4Packet::new_unchecked(&mut f[ETH_HEADER_LEN..]).fill_checksum();
        f
    }

    /// What the full path says of `frame`: the segment's parse and its sender.
    fn full_path<'a>(
        iface: &mut Iface,
        frame: &'a [u8],
        verify: bool,
    ) -> Option<(TcpSegment<'a>, Ipv4Addr, [u8; 6])> {
        let mut c = Counters::default();
        match iface.handle_frame(Instant::ZERO, frame, &mut c) {
            Ingress::Tcp(t) => {
                let seg =
                    TcpSegment::parse(t.src_ip.octets(), t.dst_ip.octets(), t.segment, verify)
                        .ok()?;
                Some((seg, t.src_ip, t.src_mac))
            }
            _ => None,
        }
    }

    /// Frames that differ from the kept one in the varying fields only are predicted,
    /// with the segment the full path parses; frames with any other octet of the head
    /// changed, a bad length or (when verified) a bad checksum are left to the full
    /// path; wherever the prediction answers, the full path answers the same, in both
    /// checksum modes.
    #[test]
    fn prediction_is_the_full_path() {
        for offloaded in [false, true] {
            let cfg = EngineConfig {
                checksum_offload: offloaded,
                ..EngineConfig::default()
            };
            let mut iface = Iface::new(&cfg);
            let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(offloaded);
            let first = frame_from_peer(&iface, &mut x);
            let (seg, _, _) = full_path(&mut iface, &first, !offloaded).unwrap();
            let mut p = RxPrediction::new();
            let id = ConnId(7);
            p.learn(&first, id, &seg.tuple);
            let (mut predicted, mut refused) = (0, 0);
            for i in 0..20_000 {
                let mut f = frame_from_peer(&iface, &mut x);
                let pristine = i % 3 == 0;
                if !pristine {
                    match xorshift(&mut x) % 4 {
                        // A bit of the head flipped.
                        0 | 1 => {
                            let at = xorshift(&mut x) as usize % HEAD_LEN;
                            f[at] ^= 1 << (xorshift(&mut x) % 8);
                        }
                        // The frame cut short, or padded.
                        2 => {
                            let n = xorshift(&mut x) as usize % (f.len() + 1);
                            f.truncate(n);
                        }
                        _ => f.extend_from_slice(&[0; 7]),
                    }
                }
                let full = full_path(&mut iface, &f, !offloaded);
                match p.predict(&f, offloaded) {
                    Some((got_id, got)) => {
                        predicted += 1;
                        assert_eq!(got_id, id);
                        let (seg, src_ip, src_mac) = full.unwrap_or_else(|| {
                            panic!("frame {i}: predicted, the full path refused")
                        });
                        assert_eq!(got, seg, "frame {i}");
                        assert_eq!(p.source(), (src_ip, src_mac), "frame {i}");
                    }
                    None => {
                        refused += 1;
                        assert!(!pristine, "frame {i}: a usual frame not predicted");
                    }
                }
            }
            assert!(
                predicted > 7_000 && refused > 3_000,
                "{predicted} {refused}"
            );
        }
    }

    #[test]
    fn nothing_is_predicted_before_a_usual_frame_is_kept_or_after_forget() {
        let cfg = EngineConfig::default();
        let mut iface = Iface::new(&cfg);
        let mut x = 99;
        let f = frame_from_peer(&iface, &mut x);
        let mut p = RxPrediction::new();
        assert!(p.predict(&f, false).is_none());
        let (seg, _, _) = full_path(&mut iface, &f, true).unwrap();
        // A SYN-ACK-like header (other options) is not kept.
        let mut other = f.clone();
        other[L4_OFFSET + FLAGS_OFFSET] |= 0x02;
        p.learn(&other, ConnId(1), &seg.tuple);
        assert!(p.predict(&f, false).is_none());
        p.learn(&f, ConnId(1), &seg.tuple);
        assert!(p.predict(&f, false).is_some());
        p.forget();
        assert!(p.predict(&f, false).is_none());
    }
}
