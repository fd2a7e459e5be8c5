//! Ethernet, IPv4, ARP, ICMP echo (over `smoltcp::wire`) and the pcap reader.

use iwarp_wire::l2l4::{
    arp_reply, icmp_echo_reply, parse_arp, ArpOp, ArpPacket, ArpRepr, ChecksumCapabilities,
    EthIpv4Header, EthernetAddress, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Frame,
    ETHERNET_HEADER_LEN, ETH_IPV4_HEADER_LEN, ETH_MIN_FRAME_LEN,
};
use iwarp_wire::pcap::{PcapReader, PcapWriter, MAX_SNAPLEN, RECORD_HEADER_LEN};

/// Our MAC in the replies these targets ask for.
const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);

/// Checksum capabilities from the low bit of the input's first byte (verify or offloaded).
fn caps_for(data: &[u8]) -> ChecksumCapabilities {
    if data.first().is_some_and(|b| b & 1 != 0) {
        ChecksumCapabilities::ignored()
    } else {
        ChecksumCapabilities::default()
    }
}

/// Ethernet + IPv4: a parsed frame re-emitted with our header helper parses to the same
/// Ethernet and IPv4 reprs and payload.
pub(super) fn ipv4_frame(data: &[u8]) {
    let caps = caps_for(data);
    let Ok(f) = Ipv4Frame::parse(data, &caps) else {
        return;
    };
    assert!(f.payload.len() <= data.len() - ETH_IPV4_HEADER_LEN);
    let mut buf = vec![0u8; ETH_IPV4_HEADER_LEN + f.payload.len()];
    let hdr = EthIpv4Header {
        src_mac: f.eth.src_addr,
        dst_mac: f.eth.dst_addr,
        src_ip: f.ip.src_addr,
        dst_ip: f.ip.dst_addr,
        protocol: f.ip.next_header,
        ttl: f.ip.hop_limit,
        ident: 0x1234,
    };
    let caps_tx = ChecksumCapabilities::default();
    assert_eq!(
        hdr.emit(&mut buf, f.payload.len(), &caps_tx),
        Ok(ETH_IPV4_HEADER_LEN)
    );
    buf[ETH_IPV4_HEADER_LEN..].copy_from_slice(f.payload);
    let back = Ipv4Frame::parse(&buf, &caps_tx).expect("an emitted frame parses");
    assert_eq!(back.eth, f.eth);
    assert_eq!(back.ip, f.ip);
    assert_eq!(back.payload, f.payload);
}

/// ARP: a parsed message re-emitted parses the same; a request for the target address gets
/// a reply that parses as the mirror of the request.
pub(super) fn arp(data: &[u8]) {
    let Ok(repr) = parse_arp(data) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    assert_eq!(
        ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).expect("whole")),
        Ok(repr)
    );
    let ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr,
        source_protocol_addr,
        target_protocol_addr,
        ..
    } = repr
    else {
        return;
    };
    let mut out = [0u8; ETH_MIN_FRAME_LEN];
    let reply = arp_reply(&repr, OUR_MAC, target_protocol_addr, &mut out);
    if operation != ArpOp::Request {
        assert_eq!(reply, None);
        return;
    }
    let n = reply.expect("a request for our address is answered");
    assert_eq!(n, ETH_MIN_FRAME_LEN);
    assert_eq!(out[..6], source_hardware_addr.0);
    assert_eq!(
        parse_arp(&out[..n]),
        Ok(ArpRepr::EthernetIpv4 {
            operation: ArpOp::Reply,
            source_hardware_addr: OUR_MAC,
            source_protocol_addr: target_protocol_addr,
            target_hardware_addr: source_hardware_addr,
            target_protocol_addr: source_protocol_addr,
        })
    );
    // A request for another address gets no reply.
    let other = u32::from(target_protocol_addr).wrapping_add(1);
    assert_eq!(arp_reply(&repr, OUR_MAC, other.into(), &mut out), None);
}

/// ICMP echo: a request to the frame's destination gets a reply that parses back as an echo
/// reply with the same identifier, sequence number and data, sent back to the asker.
pub(super) fn icmp_echo(data: &[u8]) {
    let caps = caps_for(data);
    let Ok(f) = Ipv4Frame::parse(data, &caps) else {
        assert_eq!(
            icmp_echo_reply(
                data,
                OUR_MAC,
                [10, 0, 0, 1].into(),
                7,
                &mut [0u8; 64],
                &caps
            ),
            None
        );
        return;
    };
    if let Ok(p) = Icmpv4Packet::new_checked(f.payload) {
        let _ = (p.msg_type(), p.msg_code(), p.checksum());
    }
    let mut out = vec![0u8; data.len().max(ETH_MIN_FRAME_LEN) + ETH_IPV4_HEADER_LEN];
    let Some(n) = icmp_echo_reply(data, OUR_MAC, f.ip.dst_addr, 7, &mut out, &caps) else {
        return;
    };
    assert!(n <= out.len() && n >= ETH_MIN_FRAME_LEN);
    let Ok(Icmpv4Repr::EchoRequest {
        ident,
        seq_no,
        data: req_data,
    }) = Icmpv4Repr::parse(
        &Icmpv4Packet::new_checked(f.payload).expect("replied"),
        &caps,
    )
    else {
        panic!("a reply was made for something that is not an echo request");
    };
    let r = Ipv4Frame::parse(&out[..n], &caps).expect("the reply parses");
    assert_eq!(r.ip.src_addr, f.ip.dst_addr);
    assert_eq!(r.ip.dst_addr, f.ip.src_addr);
    assert_eq!(r.ip.next_header, IpProtocol::Icmp);
    assert_eq!(r.eth.dst_addr, f.eth.src_addr);
    assert_eq!(r.eth.src_addr, OUR_MAC);
    let icmp = Icmpv4Packet::new_checked(r.payload).expect("whole ICMP");
    assert_eq!(
        Icmpv4Repr::parse(&icmp, &caps),
        Ok(Icmpv4Repr::EchoReply {
            ident,
            seq_no,
            data: req_data
        })
    );
    // Too small an output buffer: no reply, no panic.
    let short = n.min(ETHERNET_HEADER_LEN + 20);
    assert_eq!(
        icmp_echo_reply(data, OUR_MAC, f.ip.dst_addr, 7, &mut out[..short], &caps),
        None
    );
}

/// pcap reader: records are in bounds and end the file exactly or fail once; the records
/// written back with `PcapWriter` read back the same.
pub(super) fn pcap(data: &[u8]) {
    let Ok(reader) = PcapReader::new(data) else {
        return;
    };
    let header = reader.header();
    let mut writer =
        PcapWriter::new(Vec::new(), header.resolution).expect("writing to a Vec cannot fail");
    let mut records = Vec::new();
    let mut consumed = 24usize;
    let mut failed = false;
    for r in reader.clone() {
        assert!(!failed, "a record after an error");
        match r {
            Ok(rec) => {
                assert!(rec.data.len() <= MAX_SNAPLEN as usize);
                consumed += RECORD_HEADER_LEN + rec.data.len();
                assert!(consumed <= data.len());
                writer.write_frame(rec.ts, rec.data).expect("Vec");
                records.push((rec.ts, rec.data));
            }
            Err(_) => failed = true,
        }
    }
    assert!(failed || consumed == data.len());
    let out = writer.into_inner();
    let back = PcapReader::new(&out).expect("our own header");
    let mut n = 0;
    for (r, (ts, frame)) in back.zip(records.iter()) {
        let r = r.expect("our own records");
        // Seconds past u32 saturate on write; the rest round-trips at the file's resolution.
        if ts.as_nanos() < u64::from(u32::MAX) * 1_000_000_000 {
            assert_eq!(r.ts, *ts);
        }
        assert_eq!(r.data, *frame);
        assert_eq!(r.orig_len as usize, frame.len());
        n += 1;
    }
    assert_eq!(n, records.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::Instant;

    // ARP request from 52:54:00:5a:00:02 / 198.18.0.12 for 198.18.0.11.
    fn arp_request() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        let n = iwarp_wire::l2l4::arp_request(
            &mut f,
            EthernetAddress([0x52, 0x54, 0x00, 0x5a, 0x00, 0x02]),
            [198, 18, 0, 12].into(),
            [198, 18, 0, 11].into(),
        )
        .unwrap();
        f.truncate(n);
        f
    }

    #[test]
    fn arp_request_is_answered() {
        arp(&arp_request());
        arp(&arp_request()[..30]);
    }

    #[test]
    fn pcap_literals() {
        // Empty little-endian micro file, then one record of 4 bytes.
        let mut w = PcapWriter::new(Vec::new(), iwarp_wire::pcap::TsResolution::Micros).unwrap();
        w.write_frame(Instant(1_000_002_000), &[1, 2, 3, 4])
            .unwrap();
        let f = w.into_inner();
        pcap(&f[..24]);
        pcap(&f);
        pcap(&f[..f.len() - 1]);
    }
}
