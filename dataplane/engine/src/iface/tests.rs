//! Interface tests on whole Ethernet frames.

use super::*;

const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// The byte literals below are frames of 10.0.0.0/24: the interface is 10.0.0.1 there.
fn cfg() -> EngineConfig {
    EngineConfig {
        ipv4: Ipv4Addr::new(10, 0, 0, 1),
        ..EngineConfig::default()
    }
}

fn iface() -> Iface {
    Iface::new(&cfg())
}

/// ARP request from 10.0.0.2 (02:..:02) for 10.0.0.1.
static ARP_REQUEST: [u8; 42] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x06, // eth
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // htype, ptype, hlen, plen, op=1
    0x02, 0, 0, 0, 0, 0x02, 10, 0, 0, 2, // sha, spa
    0, 0, 0, 0, 0, 0, 10, 0, 0, 1, // tha, tpa
];

/// The reply we must send to it.
static ARP_REPLY: [u8; 42] = [
    0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06, // eth
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, // op=2
    0x02, 0, 0, 0, 0, 0x01, 10, 0, 0, 1, // sha, spa (us)
    0x02, 0, 0, 0, 0, 0x02, 10, 0, 0, 2, // tha, tpa
];

/// Echo request 10.0.0.2 -> 10.0.0.1, id 0x1234 seq 1, "hi".
static PING: [u8; 44] = [
    0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00, // eth
    0x45, 0x00, 0x00, 0x1e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x26, 0xdd, 10, 0, 0, 2, 10, 0, 0,
    1, // ipv4, total 30
    0x08, 0x00, 0x7d, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i', // icmp
];

/// The echo reply we must send.
static PONG: [u8; 44] = [
    0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // eth
    0x45, 0x00, 0x00, 0x1e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x26, 0xdd, 10, 0, 0, 1, 10, 0, 0,
    2, // ipv4
    0x00, 0x00, 0x85, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i', // icmp
];

fn tx(i: &mut Iface, c: &mut Counters) -> Option<Vec<u8>> {
    let mut buf = [0u8; 1514];
    i.poll_transmit(&mut buf, c).map(|n| buf[..n].to_vec())
}

#[test]
fn arp_request_is_answered_and_sender_learnt() {
    let mut i = iface();
    let mut c = Counters::default();
    assert!(matches!(
        i.handle_frame(Instant::ZERO, &ARP_REQUEST, &mut c),
        Ingress::Done
    ));
    assert_eq!(tx(&mut i, &mut c).unwrap(), ARP_REPLY);
    assert_eq!(tx(&mut i, &mut c), None);
    assert_eq!(c.arp_requests_in, 1);
    let mut hint = 0;
    assert_eq!(
        i.resolve(Instant::ZERO, PEER_IP, &mut hint, &mut c),
        Some(PEER_MAC)
    );
    assert_eq!(tx(&mut i, &mut c), None, "known: no request");
}

#[test]
fn arp_request_for_someone_else_is_dropped() {
    let mut i = iface();
    let mut c = Counters::default();
    let mut other = ARP_REQUEST;
    other[41] = 7;
    i.handle_frame(Instant::ZERO, &other, &mut c);
    assert_eq!(tx(&mut i, &mut c), None);
    assert_eq!(c.drops_of(DropReason::ArpNotForUs), 1);
    let mut hint = 0;
    assert_eq!(
        i.resolve(Instant::ZERO, PEER_IP, &mut hint, &mut c),
        None,
        "not learnt"
    );
}

#[test]
fn resolution_releases_a_held_frame() {
    let mut i = iface();
    let mut c = Counters::default();
    let mut hint = 0;
    assert_eq!(i.resolve(Instant::ZERO, PEER_IP, &mut hint, &mut c), None);
    // The broadcast request for 10.0.0.2.
    let req = tx(&mut i, &mut c).unwrap();
    assert_eq!(&req[..6], &BROADCAST_MAC);
    assert_eq!(&req[12..14], &[0x08, 0x06]);
    assert_eq!(&req[20..22], &[0, 1]);
    assert_eq!(&req[38..42], &[10, 0, 0, 2]);
    assert_eq!(c.arp_requests_out, 1);
    // A frame waits for the answer.
    let mut frame = [0u8; 60];
    frame[59] = 0x77;
    assert!(i.arp.hold(PEER_IP, &frame));
    assert_eq!(tx(&mut i, &mut c), None);
    // The peer answers: the held frame leaves with the peer's MAC.
    let mut reply = ARP_REPLY;
    reply[..6].copy_from_slice(&OUR_MAC);
    reply[6..12].copy_from_slice(&PEER_MAC);
    reply[22..32].copy_from_slice(&ARP_REQUEST[22..32]);
    reply[32..42].copy_from_slice(&ARP_REPLY[22..32]);
    i.handle_frame(Instant(5), &reply, &mut c);
    assert_eq!(c.arp_replies_in, 1);
    let out = tx(&mut i, &mut c).unwrap();
    assert_eq!(out.len(), 60);
    assert_eq!(&out[..6], &PEER_MAC);
    assert_eq!(out[59], 0x77);
    assert_eq!(tx(&mut i, &mut c), None);
}

#[test]
fn unanswered_resolution_retries_then_drops_held_frames() {
    let mut i = iface();
    let mut c = Counters::default();
    let mut hint = 0;
    i.resolve(Instant::ZERO, PEER_IP, &mut hint, &mut c);
    assert!(i.arp.hold(PEER_IP, &[0u8; 60]));
    let mut requests = 0;
    while let Some(t) = i.poll_timeout() {
        i.handle_timeout(t, &mut c);
        while tx(&mut i, &mut c).is_some() {
            requests += 1;
        }
    }
    assert_eq!(requests, 3, "the first request and two retries");
    assert_eq!(c.arp_requests_out, 3);
    assert_eq!(c.drops_of(DropReason::ArpPendingDropped), 1);
}

#[test]
fn icmp_echo_is_answered() {
    let mut i = iface();
    let mut c = Counters::default();
    i.handle_frame(Instant::ZERO, &PING, &mut c);
    assert_eq!(tx(&mut i, &mut c).unwrap(), PONG);
    assert_eq!(c.icmp_echo_replies, 1);
}

#[test]
fn ethernet_drops() {
    let mut i = iface();
    let mut c = Counters::default();
    let mut other_mac = PING;
    other_mac[5] = 0x09;
    i.handle_frame(Instant::ZERO, &other_mac, &mut c);
    assert_eq!(c.drops_of(DropReason::EthNotForUs), 1);
    let mut ipv6 = PING;
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    i.handle_frame(Instant::ZERO, &ipv6, &mut c);
    assert_eq!(c.drops_of(DropReason::EthUnknownType), 1);
    i.handle_frame(Instant::ZERO, &PING[..10], &mut c);
    assert_eq!(c.drops_of(DropReason::EthMalformed), 1);
    let mut udp = PING;
    udp[23] = 17;
    i.handle_frame(Instant::ZERO, &udp, &mut c);
    assert_eq!(
        c.drops_of(DropReason::Ipv4BadChecksum),
        1,
        "protocol changed: checksum off"
    );
    assert_eq!(tx(&mut i, &mut c), None);
}

#[test]
fn tcp_is_handed_up() {
    let mut i = iface();
    let mut c = Counters::default();
    let mut f = PING;
    f[23] = 6;
    let mut ip = smoltcp::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.fill_checksum();
    match i.handle_frame(Instant::ZERO, &f, &mut c) {
        Ingress::Tcp(t) => {
            assert_eq!(t.src_ip, PEER_IP);
            assert_eq!(t.src_mac, PEER_MAC);
            assert_eq!(t.segment.len(), 10);
        }
        Ingress::Done | Ingress::FragNeeded(_) => panic!("TCP not handed up"),
    }
}

#[test]
fn routing() {
    let cfg = EngineConfig {
        gateway: Some(Ipv4Addr::new(10, 0, 0, 254)),
        ..cfg()
    };
    let i = Iface::new(&cfg);
    assert_eq!(i.next_hop(PEER_IP), Some(PEER_IP));
    assert_eq!(i.next_hop(Ipv4Addr::new(8, 8, 8, 8)), cfg.gateway);
    let j = iface();
    assert_eq!(j.next_hop(Ipv4Addr::new(8, 8, 8, 8)), None);
}

#[test]
fn ctrl_queue_full_is_counted() {
    let cfg = EngineConfig {
        ctrl_tx_frames: 1,
        ..cfg()
    };
    let mut i = Iface::new(&cfg);
    let mut c = Counters::default();
    i.handle_frame(Instant::ZERO, &PING, &mut c);
    i.handle_frame(Instant::ZERO, &PING, &mut c);
    assert_eq!(c.drops_of(DropReason::TxQueueFull), 1);
    assert_eq!(c.icmp_echo_replies, 1);
}

#[test]
fn rst_flag_is_read_from_emitted_frames() {
    // Ethernet / IPv4 (20 bytes, proto 6) / TCP (20 bytes, flags RST|ACK = 0x14).
    let mut f: Vec<u8> = vec![
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // eth
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // ipv4
        0x13, 0x88, 0xc0, 0x00, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x14, 0, 0, 0, 0, 0, 0, // tcp
    ];
    assert!(is_tcp_rst(&f));
    f[47] = 0x10; // ACK only
    assert!(!is_tcp_rst(&f));
    f[47] = 0x04;
    f[23] = 1; // ICMP, not TCP
    assert!(!is_tcp_rst(&f));
    assert!(!is_tcp_rst(&f[..30]), "truncated");
    assert!(!is_tcp_rst(&ARP_REPLY));
}
