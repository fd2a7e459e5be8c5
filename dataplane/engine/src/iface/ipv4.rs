//! IPv4 (RFC 791) for a host with one address: ingress checks and header emission.
//! No options, no fragments (both dropped and counted), DF set on everything we send.

use core::net::Ipv4Addr;

use smoltcp::wire::{IpProtocol, Ipv4Packet};

use crate::config::IPV4_HEADER_LEN;
use crate::counters::{Counters, DropReason};

/// A checked inbound IPv4 packet addressed to us.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4In<'a> {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address (ours).
    pub dst: Ipv4Addr,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// Payload (trailing Ethernet padding removed).
    pub payload: &'a [u8],
}

/// True if `a` and `b` share the first `prefix_len` bits.
pub fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix_len: u8) -> bool {
    let mask = if prefix_len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix_len.min(32)))
    };
    (u32::from(a) & mask) == (u32::from(b) & mask)
}

/// Checks an inbound packet: version, lengths, checksum (unless offloaded), no options,
/// no fragment, destination ours, sane source. Drops are counted.
pub fn parse<'a>(
    bytes: &'a [u8],
    ours: Ipv4Addr,
    verify_checksum: bool,
    counters: &mut Counters,
) -> Option<Ipv4In<'a>> {
    let Ok(pkt) = Ipv4Packet::new_checked(bytes) else {
        counters.drop(DropReason::Ipv4Malformed);
        return None;
    };
    if pkt.version() != 4 {
        counters.drop(DropReason::Ipv4Malformed);
        return None;
    }
    if verify_checksum && !pkt.verify_checksum() {
        counters.drop(DropReason::Ipv4BadChecksum);
        return None;
    }
    if usize::from(pkt.header_len()) != IPV4_HEADER_LEN {
        counters.drop(DropReason::Ipv4Options);
        return None;
    }
    if pkt.more_frags() || pkt.frag_offset() != 0 {
        counters.drop(DropReason::Ipv4Fragment);
        return None;
    }
    let dst = pkt.dst_addr();
    if dst != ours {
        counters.drop(DropReason::Ipv4NotForUs);
        return None;
    }
    let src = pkt.src_addr();
    if src.is_broadcast() || src.is_multicast() || src.is_unspecified() || src == ours {
        counters.drop(DropReason::Ipv4BadSource);
        return None;
    }
    Some(Ipv4In {
        src,
        dst,
        protocol: pkt.next_header(),
        payload: pkt.payload(),
    })
}

/// Writes a 20-byte IPv4 header (DF, no options, checksum filled) into `buf[..20]`.
/// `buf` must be at least 20 bytes; `payload_len + 20` must fit in a u16 (the MTU bound).
///
/// The header checksum is summed from the field values (not read back from `buf`, which
/// would wait on the stores just made), then the 20 bytes are written at once.
pub fn emit(
    buf: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    payload_len: usize,
    ttl: u8,
) {
    const VER_IHL_TOS: u16 = 0x4500;
    const FLAGS_DF: u16 = 0x4000;
    let total = u16::try_from(payload_len + IPV4_HEADER_LEN).unwrap_or(u16::MAX);
    let ttl_proto = u16::from_be_bytes([ttl, u8::from(protocol)]);
    let (s, d) = (src.octets(), dst.octets());
    let words = [
        VER_IHL_TOS,
        total,
        FLAGS_DF,
        ttl_proto,
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
    ];
    let mut sum: u32 = words.iter().map(|&w| u32::from(w)).sum();
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    let check = !(sum as u16);
    let mut h = [0u8; IPV4_HEADER_LEN];
    h[0..2].copy_from_slice(&VER_IHL_TOS.to_be_bytes());
    h[2..4].copy_from_slice(&total.to_be_bytes());
    // Identification 0 (DF set: never fragmented).
    h[6..8].copy_from_slice(&FLAGS_DF.to_be_bytes());
    h[8..10].copy_from_slice(&ttl_proto.to_be_bytes());
    h[10..12].copy_from_slice(&check.to_be_bytes());
    h[12..16].copy_from_slice(&s);
    h[16..20].copy_from_slice(&d);
    buf[..IPV4_HEADER_LEN].copy_from_slice(&h);
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    /// 10.0.0.2 -> 10.0.0.1, ICMP, total length 24, DF, TTL 64, 4 bytes of payload.
    static PACKET: [u8; 24] = [
        0x45, 0x00, 0x00, 0x18, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x26, 0xe3, 10, 0, 0, 2, 10, 0,
        0, 1, 0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn emit_matches_literal() {
        let mut buf = [0xa5u8; 20];
        emit(
            &mut buf,
            Ipv4Addr::new(10, 0, 0, 2),
            US,
            IpProtocol::Icmp,
            4,
            64,
        );
        assert_eq!(&buf[..], &PACKET[..20]);
    }

    #[test]
    fn emitted_checksum_verifies_for_any_fields() {
        let cases = [
            (
                [192, 168, 255, 254],
                [10, 255, 0, 1],
                IpProtocol::Tcp,
                1480usize,
                255u8,
            ),
            (
                [255, 255, 255, 255],
                [255, 255, 255, 255],
                IpProtocol::Udp,
                65515,
                1,
            ),
            ([0, 0, 0, 0], [0, 0, 0, 0], IpProtocol::Icmp, 0, 0),
        ];
        for (src, dst, proto, len, ttl) in cases {
            let mut buf = [0x5au8; 20];
            emit(&mut buf, src.into(), dst.into(), proto, len, ttl);
            let p = Ipv4Packet::new_unchecked(&buf[..]);
            assert!(p.verify_checksum(), "{src:?} {dst:?} {len}");
            assert_eq!(p.total_len() as usize, len + 20);
            assert_eq!((p.hop_limit(), p.next_header()), (ttl, proto));
            assert!(p.dont_frag() && !p.more_frags() && p.frag_offset() == 0);
            assert_eq!((p.version(), p.header_len(), p.ident()), (4, 20, 0));
        }
    }

    #[test]
    fn parse_good_packet_with_padding() {
        let mut c = Counters::default();
        let mut padded = [0u8; 30];
        padded[..24].copy_from_slice(&PACKET);
        let p = parse(&padded, US, true, &mut c).unwrap();
        assert_eq!(p.src, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.protocol, IpProtocol::Icmp);
        assert_eq!(p.payload, &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(c.drops_total(), 0);
    }

    fn dropped(bytes: &[u8], verify: bool) -> DropReason {
        let mut c = Counters::default();
        assert!(parse(bytes, US, verify, &mut c).is_none());
        assert_eq!(c.drops_total(), 1);
        (0..DropReason::COUNT)
            .find(|&i| c.drops[i] == 1)
            .map(|i| ALL[i])
            .unwrap()
    }

    const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::EthMalformed,
        DropReason::EthNotForUs,
        DropReason::EthUnknownType,
        DropReason::ArpMalformed,
        DropReason::ArpNotForUs,
        DropReason::Ipv4Malformed,
        DropReason::Ipv4BadChecksum,
        DropReason::Ipv4Options,
        DropReason::Ipv4Fragment,
        DropReason::Ipv4NotForUs,
        DropReason::Ipv4BadSource,
        DropReason::Ipv4UnknownProtocol,
        DropReason::IcmpMalformed,
        DropReason::IcmpIgnored,
        DropReason::TcpMalformed,
        DropReason::TcpBadChecksum,
        DropReason::TcpNoConnection,
        DropReason::TcpBacklogFull,
        DropReason::TxQueueFull,
        DropReason::ArpPendingDropped,
        DropReason::NoRoute,
    ];

    fn with(f: impl FnOnce(&mut [u8])) -> [u8; 24] {
        let mut p = PACKET;
        f(&mut p);
        let mut pkt = Ipv4Packet::new_unchecked(&mut p[..]);
        pkt.fill_checksum();
        p
    }

    #[test]
    fn drops() {
        assert_eq!(dropped(&PACKET[..19], true), DropReason::Ipv4Malformed);
        let mut bad_sum = PACKET;
        bad_sum[11] ^= 1;
        assert_eq!(dropped(&bad_sum, true), DropReason::Ipv4BadChecksum);
        let mut c = Counters::default();
        assert!(
            parse(&bad_sum, US, false, &mut c).is_some(),
            "offloaded: not verified"
        );
        assert_eq!(
            dropped(&with(|p| p[6] = 0x20), true),
            DropReason::Ipv4Fragment
        );
        assert_eq!(
            dropped(&with(|p| p[7] = 0x10), true),
            DropReason::Ipv4Fragment
        );
        assert_eq!(
            dropped(&with(|p| p[19] = 9), true),
            DropReason::Ipv4NotForUs
        );
        assert_eq!(
            dropped(&with(|p| p[12..16].fill(255)), true),
            DropReason::Ipv4BadSource
        );
        assert_eq!(
            dropped(&with(|p| p[0] = 0x46), true),
            DropReason::Ipv4Options
        );
        assert_eq!(
            dropped(&with(|p| p[0] = 0x65), true),
            DropReason::Ipv4Malformed
        );
        assert_eq!(
            dropped(&with(|p| p[3] = 0x30), true),
            DropReason::Ipv4Malformed
        );
    }

    #[test]
    fn subnets() {
        assert!(same_subnet(US, Ipv4Addr::new(10, 0, 0, 200), 24));
        assert!(!same_subnet(US, Ipv4Addr::new(10, 0, 1, 2), 24));
        assert!(same_subnet(US, Ipv4Addr::new(192, 168, 1, 1), 0));
        assert!(!same_subnet(US, Ipv4Addr::new(10, 0, 0, 2), 32));
    }
}
