//! Ethernet, ARP, IPv4, ICMPv4 and TCP: `smoltcp::wire` re-exported, plus the few helpers
//! the engine needs around them (Ethernet + IPv4 header in front of a payload, ARP
//! request/reply, ICMP echo reply, and a checked Ethernet + IPv4 frame parser).
//!
//! Every helper writes into a caller buffer and returns the number of bytes written, or
//! `None`/an error when the buffer is too small or the input is not what it handles: no
//! allocation, no panic on received bytes.

use smoltcp::wire::ArpOperation;

pub use smoltcp::phy::{Checksum, ChecksumCapabilities};
pub use smoltcp::wire::{
    ArpHardware, ArpOperation as ArpOp, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame,
    EthernetProtocol, EthernetRepr, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, IpAddress, IpProtocol,
    Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpOption, TcpPacket, TcpRepr, TcpSeqNumber,
    ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, TCP_HEADER_LEN,
};

use crate::{Result, WireError};

/// Ethernet header + IPv4 header without options.
pub const ETH_IPV4_HEADER_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
/// Shortest Ethernet frame without FCS; shorter frames are zero-padded to it.
pub const ETH_MIN_FRAME_LEN: usize = 60;
/// Length of an Ethernet/IPv4 ARP message.
pub const ARP_LEN: usize = 28;
/// Default IPv4 TTL of what the engine sends.
pub const DEFAULT_TTL: u8 = 64;

/// The addresses and fields of an Ethernet + IPv4 header to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthIpv4Header {
    /// Source MAC.
    pub src_mac: EthernetAddress,
    /// Destination MAC (next hop).
    pub dst_mac: EthernetAddress,
    /// Source IPv4 address.
    pub src_ip: Ipv4Address,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Address,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// Time to live.
    pub ttl: u8,
    /// IPv4 identification (DF is always set, so any value is fine: RFC 6864).
    pub ident: u16,
}

impl EthIpv4Header {
    /// Writes the Ethernet and IPv4 headers into `frame[..34]`, in front of a payload of
    /// `payload_len` bytes (which the caller writes at `frame[34..]`, before or after),
    /// with DF set and the IPv4 checksum filled unless `caps` offloads it. Returns 34.
    /// Fails if `frame` is shorter than the headers or the payload does not fit an IPv4
    /// datagram.
    pub fn emit(
        &self,
        frame: &mut [u8],
        payload_len: usize,
        caps: &ChecksumCapabilities,
    ) -> Result<usize> {
        if payload_len > usize::from(u16::MAX) - IPV4_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        let hdr = frame
            .get_mut(..ETH_IPV4_HEADER_LEN)
            .ok_or(WireError::Truncated)?;
        let (eth, ip) = hdr.split_at_mut(ETHERNET_HEADER_LEN);
        let mut eth_frame = EthernetFrame::new_unchecked(eth);
        EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: EthernetProtocol::Ipv4,
        }
        .emit(&mut eth_frame);
        let repr = Ipv4Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            next_header: self.protocol,
            payload_len,
            hop_limit: self.ttl,
        };
        let mut packet = Ipv4Packet::new_unchecked(ip);
        // smoltcp writes ident 0; set ours before the checksum.
        repr.emit(&mut packet, &ChecksumCapabilities::ignored());
        packet.set_ident(self.ident);
        if caps.ipv4.tx() {
            packet.fill_checksum();
        }
        Ok(ETH_IPV4_HEADER_LEN)
    }
}

/// A received Ethernet frame carrying IPv4, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Frame<'a> {
    /// Ethernet header.
    pub eth: EthernetRepr,
    /// IPv4 header (options skipped).
    pub ip: Ipv4Repr,
    /// IPv4 payload, trimmed to the IPv4 total length (Ethernet padding removed).
    pub payload: &'a [u8],
}

impl<'a> Ipv4Frame<'a> {
    /// Parses an Ethernet frame with an IPv4 datagram (checksum verified unless `caps`
    /// says the NIC did; fragments refused).
    pub fn parse(frame: &'a [u8], caps: &ChecksumCapabilities) -> Result<Ipv4Frame<'a>> {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| WireError::Truncated)?;
        let eth_repr = EthernetRepr::parse(&eth).map_err(|_| WireError::Malformed)?;
        if eth_repr.ethertype != EthernetProtocol::Ipv4 {
            return Err(WireError::Malformed);
        }
        let ip_bytes = frame
            .get(ETHERNET_HEADER_LEN..)
            .ok_or(WireError::Truncated)?;
        let ip = Ipv4Packet::new_checked(ip_bytes).map_err(|_| WireError::Truncated)?;
        let ip_repr = Ipv4Repr::parse(&ip, caps).map_err(|_| WireError::Malformed)?;
        Ok(Ipv4Frame {
            eth: eth_repr,
            ip: ip_repr,
            payload: ip.payload(),
        })
    }
}

/// Zero-fills `frame[len..60]` so that the frame reaches the Ethernet minimum; returns
/// the padded length (or `len` if the buffer is too short to pad).
pub fn pad_to_min(frame: &mut [u8], len: usize) -> usize {
    if len >= ETH_MIN_FRAME_LEN {
        return len;
    }
    match frame.get_mut(len..ETH_MIN_FRAME_LEN) {
        Some(pad) => {
            pad.fill(0);
            ETH_MIN_FRAME_LEN
        }
        None => len,
    }
}

fn emit_arp(frame: &mut [u8], dst_mac: EthernetAddress, arp: &ArpRepr) -> Option<usize> {
    let (src_mac, len) = match *arp {
        ArpRepr::EthernetIpv4 {
            source_hardware_addr,
            ..
        } => (source_hardware_addr, ETHERNET_HEADER_LEN + arp.buffer_len()),
        _ => return None,
    };
    let bytes = frame.get_mut(..ETH_MIN_FRAME_LEN.max(len))?;
    let mut eth = EthernetFrame::new_unchecked(&mut bytes[..]);
    EthernetRepr {
        src_addr: src_mac,
        dst_addr: dst_mac,
        ethertype: EthernetProtocol::Arp,
    }
    .emit(&mut eth);
    arp.emit(&mut ArpPacket::new_unchecked(
        &mut bytes[ETHERNET_HEADER_LEN..len],
    ));
    Some(pad_to_min(frame, len))
}

/// Writes a broadcast ARP request "who has `target_ip`, tell `src_ip`" (padded to 60
/// bytes). `None` if `frame` is shorter than 60 bytes.
pub fn arp_request(
    frame: &mut [u8],
    src_mac: EthernetAddress,
    src_ip: Ipv4Address,
    target_ip: Ipv4Address,
) -> Option<usize> {
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: src_mac,
        source_protocol_addr: src_ip,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target_ip,
    };
    emit_arp(frame, EthernetAddress::BROADCAST, &arp)
}

/// Parses an ARP message from a whole Ethernet frame.
pub fn parse_arp(frame: &[u8]) -> Result<ArpRepr> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| WireError::Truncated)?;
    if eth.ethertype() != EthernetProtocol::Arp {
        return Err(WireError::Malformed);
    }
    let arp = ArpPacket::new_checked(eth.payload()).map_err(|_| WireError::Truncated)?;
    ArpRepr::parse(&arp).map_err(|_| WireError::Malformed)
}

/// If `request` is an ARP request for `our_ip`, writes the reply into `out` (unicast to the
/// asker, padded to 60 bytes) and returns its length.
pub fn arp_reply(
    request: &ArpRepr,
    our_mac: EthernetAddress,
    our_ip: Ipv4Address,
    out: &mut [u8],
) -> Option<usize> {
    let ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr,
        source_protocol_addr,
        target_protocol_addr,
        ..
    } = *request
    else {
        return None;
    };
    if target_protocol_addr != our_ip {
        return None;
    }
    let reply = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: our_mac,
        source_protocol_addr: our_ip,
        target_hardware_addr: source_hardware_addr,
        target_protocol_addr: source_protocol_addr,
    };
    emit_arp(out, source_hardware_addr, &reply)
}

/// If `request` is an ICMP echo request to `our_ip` (Ethernet + IPv4 + ICMP, checksums
/// verified per `caps`), writes the echo reply (same identifier, sequence number and
/// data; TTL 64) into `out` and returns its length. `None` for anything else or when `out`
/// is too small.
pub fn icmp_echo_reply(
    request: &[u8],
    our_mac: EthernetAddress,
    our_ip: Ipv4Address,
    ident: u16,
    out: &mut [u8],
    caps: &ChecksumCapabilities,
) -> Option<usize> {
    let f = Ipv4Frame::parse(request, caps).ok()?;
    if f.ip.next_header != IpProtocol::Icmp || f.ip.dst_addr != our_ip {
        return None;
    }
    let icmp = Icmpv4Packet::new_checked(f.payload).ok()?;
    let Icmpv4Repr::EchoRequest {
        ident: echo_ident,
        seq_no,
        data,
    } = Icmpv4Repr::parse(&icmp, caps).ok()?
    else {
        return None;
    };
    let reply = Icmpv4Repr::EchoReply {
        ident: echo_ident,
        seq_no,
        data,
    };
    let icmp_len = reply.buffer_len();
    let total = ETH_IPV4_HEADER_LEN.checked_add(icmp_len)?;
    let bytes = out.get_mut(..total)?;
    let hdr = EthIpv4Header {
        src_mac: our_mac,
        dst_mac: f.eth.src_addr,
        src_ip: our_ip,
        dst_ip: f.ip.src_addr,
        protocol: IpProtocol::Icmp,
        ttl: DEFAULT_TTL,
        ident,
    };
    hdr.emit(bytes, icmp_len, caps).ok()?;
    let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[ETH_IPV4_HEADER_LEN..]);
    reply.emit(&mut packet, caps);
    Some(pad_to_min(out, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const G1_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x5a, 0x00, 0x01]);
    const G2_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x5a, 0x00, 0x02]);
    const G1_IP: Ipv4Address = Ipv4Address::new(198, 18, 0, 11);
    const G2_IP: Ipv4Address = Ipv4Address::new(198, 18, 0, 12);

    // 03-write-bw-mpa2-crc.pcap frame 2 (SYN-ACK g1 → g2), Ethernet + IPv4 header:
    // total length 60, ident 0, DF, TTL 64, TCP, checksum 0xae80.
    static SYNACK_HDR: [u8; 34] = [
        0x52, 0x54, 0x00, 0x5a, 0x00, 0x02, 0x52, 0x54, 0x00, 0x5a, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x3c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0xae, 0x80, 0xc6, 0x12, 0x00, 0x0b,
        0xc6, 0x12, 0x00, 0x0c,
    ];

    fn g1_to_g2(ident: u16) -> EthIpv4Header {
        EthIpv4Header {
            src_mac: G1_MAC,
            dst_mac: G2_MAC,
            src_ip: G1_IP,
            dst_ip: G2_IP,
            protocol: IpProtocol::Tcp,
            ttl: 64,
            ident,
        }
    }

    #[test]
    fn eth_ipv4_header_construct() {
        let mut buf = [0xa5u8; 74];
        let n = g1_to_g2(0)
            .emit(&mut buf, 40, &ChecksumCapabilities::default())
            .unwrap();
        assert_eq!(n, 34);
        assert_eq!(buf[..34], SYNACK_HDR);
        assert!(buf[34..].iter().all(|&b| b == 0xa5)); // payload untouched

        // Another ident: checksum follows.
        let n = g1_to_g2(0x8e74)
            .emit(&mut buf, 40, &ChecksumCapabilities::default())
            .unwrap();
        let ip = Ipv4Packet::new_checked(&buf[14..n + 40]).unwrap();
        assert_eq!(ip.ident(), 0x8e74);
        assert!(ip.verify_checksum());

        // Offloaded checksum: left zero.
        let mut caps = ChecksumCapabilities::default();
        caps.ipv4 = Checksum::None;
        g1_to_g2(0).emit(&mut buf, 40, &caps).unwrap();
        assert_eq!(&buf[24..26], &[0, 0]);
    }

    #[test]
    fn eth_ipv4_header_errors() {
        let caps = ChecksumCapabilities::default();
        assert_eq!(
            g1_to_g2(0).emit(&mut [0u8; 33], 0, &caps),
            Err(WireError::Truncated)
        );
        assert_eq!(
            g1_to_g2(0).emit(&mut [0u8; 34], 65516, &caps),
            Err(WireError::Malformed)
        );
        assert_eq!(g1_to_g2(0).emit(&mut [0u8; 34], 65515, &caps), Ok(34));
    }

    #[test]
    fn ipv4_frame_parse() {
        let mut frame = [0u8; 74];
        frame[..34].copy_from_slice(&SYNACK_HDR);
        frame[34] = 0x77;
        let f = Ipv4Frame::parse(&frame, &ChecksumCapabilities::default()).unwrap();
        assert_eq!(f.eth.src_addr, G1_MAC);
        assert_eq!(f.ip.src_addr, G1_IP);
        assert_eq!(f.ip.dst_addr, G2_IP);
        assert_eq!(f.ip.next_header, IpProtocol::Tcp);
        assert_eq!(f.payload.len(), 40);
        assert_eq!(f.payload[0], 0x77);

        // Ethernet padding is trimmed: a 60-byte frame with a 20-byte TCP payload.
        let mut small = [0u8; 60];
        g1_to_g2(0)
            .emit(&mut small, 20, &ChecksumCapabilities::default())
            .unwrap();
        let f = Ipv4Frame::parse(&small, &ChecksumCapabilities::default()).unwrap();
        assert_eq!(f.payload.len(), 20);

        // Truncated, bad checksum, not IPv4.
        let caps = ChecksumCapabilities::default();
        assert_eq!(
            Ipv4Frame::parse(&frame[..13], &caps),
            Err(WireError::Truncated)
        );
        assert_eq!(
            Ipv4Frame::parse(&frame[..50], &caps),
            Err(WireError::Truncated)
        );
        let mut bad = frame;
        bad[25] ^= 1;
        assert_eq!(Ipv4Frame::parse(&bad, &caps), Err(WireError::Malformed));
        let mut arp = frame;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(Ipv4Frame::parse(&arp, &caps), Err(WireError::Malformed));
    }

    // ARP request g2 asks for g1 (as Linux sends it, padded to 60 bytes).
    static ARP_REQ: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x5a, 0x00, 0x02, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x5a, 0x00, 0x02, 0xc6, 0x12,
        0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc6, 0x12, 0x00, 0x0b, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn arp_request_and_reply() {
        let mut buf = [0xa5u8; 64];
        assert_eq!(arp_request(&mut buf, G2_MAC, G2_IP, G1_IP), Some(60));
        assert_eq!(buf[..60], ARP_REQ);
        assert_eq!(arp_request(&mut [0u8; 59], G2_MAC, G2_IP, G1_IP), None);

        let req = parse_arp(&ARP_REQ).unwrap();
        let mut out = [0xa5u8; 60];
        assert_eq!(arp_reply(&req, G1_MAC, G1_IP, &mut out), Some(60));
        let rep = parse_arp(&out).unwrap();
        assert_eq!(
            rep,
            ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: G1_MAC,
                source_protocol_addr: G1_IP,
                target_hardware_addr: G2_MAC,
                target_protocol_addr: G2_IP,
            }
        );
        assert_eq!(&out[..6], G2_MAC.as_bytes());
        // Not for us, or a reply: no answer.
        assert_eq!(
            arp_reply(&req, G1_MAC, Ipv4Address::new(10, 0, 0, 1), &mut out),
            None
        );
        assert_eq!(arp_reply(&rep, G2_MAC, G2_IP, &mut out), None);
        // Truncated and foreign input.
        assert_eq!(parse_arp(&ARP_REQ[..40]), Err(WireError::Truncated));
        assert_eq!(parse_arp(&SYNACK_HDR), Err(WireError::Malformed));
    }

    #[test]
    fn echo_reply() {
        let caps = ChecksumCapabilities::default();
        // Build an echo request g2 → g1 with 10 bytes of data.
        let data = *b"0123456789";
        let req = Icmpv4Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 7,
            data: &data,
        };
        let mut frame = [0u8; 34 + 18];
        let hdr = EthIpv4Header {
            src_mac: G2_MAC,
            dst_mac: G1_MAC,
            src_ip: G2_IP,
            dst_ip: G1_IP,
            protocol: IpProtocol::Icmp,
            ttl: 64,
            ident: 1,
        };
        hdr.emit(&mut frame, req.buffer_len(), &caps).unwrap();
        req.emit(&mut Icmpv4Packet::new_unchecked(&mut frame[34..]), &caps);

        let mut out = [0xa5u8; 128];
        let n = icmp_echo_reply(&frame, G1_MAC, G1_IP, 9, &mut out, &caps).unwrap();
        assert_eq!(n, 60); // 52 bytes padded to the minimum
        let f = Ipv4Frame::parse(&out[..n], &caps).unwrap();
        assert_eq!(f.eth.dst_addr, G2_MAC);
        assert_eq!((f.ip.src_addr, f.ip.dst_addr), (G1_IP, G2_IP));
        let icmp = Icmpv4Packet::new_checked(f.payload).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&icmp, &caps).unwrap(),
            Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 7,
                data: &data
            }
        );

        // Not for us; too small an output; corrupted checksum; truncated.
        assert_eq!(
            icmp_echo_reply(&frame, G2_MAC, G2_IP, 9, &mut out, &caps),
            None
        );
        assert_eq!(
            icmp_echo_reply(&frame, G1_MAC, G1_IP, 9, &mut out[..51], &caps),
            None
        );
        let mut bad = frame;
        bad[40] ^= 0xff;
        assert_eq!(
            icmp_echo_reply(&bad, G1_MAC, G1_IP, 9, &mut out, &caps),
            None
        );
        assert_eq!(
            icmp_echo_reply(&frame[..40], G1_MAC, G1_IP, 9, &mut out, &caps),
            None
        );
        // An echo reply is not answered.
        let n2 = n;
        let reply = out;
        assert_eq!(
            icmp_echo_reply(&reply[..n2], G2_MAC, G2_IP, 9, &mut out, &caps),
            None
        );
    }

    #[test]
    fn pad() {
        let mut b = [0xa5u8; 64];
        assert_eq!(pad_to_min(&mut b, 42), 60);
        assert!(b[42..60].iter().all(|&x| x == 0));
        assert_eq!(b[60], 0xa5);
        assert_eq!(pad_to_min(&mut b, 61), 61);
        assert_eq!(pad_to_min(&mut b[..50], 42), 42);
    }
}
