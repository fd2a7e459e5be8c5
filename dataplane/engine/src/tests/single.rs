//! One engine fed literal frames.

use core::net::Ipv4Addr;

use iwarp_tcp::{FourTuple, SeqNumber, TcpFlags, TcpHeader, TcpOptions, TcpSegment};
use iwarp_types::{Instant, VecMemory};
use smoltcp::wire::{EthernetFrame, IpProtocol, Ipv4Packet};

use super::harness::config;
use crate::iface::emit_eth;
use crate::{CmError, ConnectFailure, ConnectParams, DropReason, Engine, Event};

const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const PEER_IP: [u8; 4] = [10, 0, 0, 2];
const US_IP: [u8; 4] = [10, 0, 0, 1];

/// An Ethernet/IPv4 frame from the peer carrying a TCP segment with `flags`.
fn tcp_frame(flags: TcpFlags, dst_port: u16, seq: u32) -> Vec<u8> {
    let tuple = FourTuple {
        local_ip: PEER_IP,
        local_port: 40_000,
        remote_ip: US_IP,
        remote_port: dst_port,
    };
    let hdr = TcpHeader {
        seq: SeqNumber(seq),
        ack: SeqNumber(0),
        flags,
        window: 1000,
        options: TcpOptions::default(),
    };
    let mut f = vec![0u8; 14 + 20 + 20];
    let n = hdr.emit(&tuple, 0, &mut f[34..], false).unwrap();
    emit_eth(
        &mut f,
        [0x02, 0, 0, 0, 0, 1],
        PEER_MAC,
        smoltcp::wire::EthernetProtocol::Ipv4,
    );
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_total_len((20 + n) as u16);
    ip.set_hop_limit(64);
    ip.set_next_header(IpProtocol::Tcp);
    ip.set_src_addr(Ipv4Addr::from(PEER_IP));
    ip.set_dst_addr(Ipv4Addr::from(US_IP));
    ip.fill_checksum();
    f
}

fn out(e: &mut Engine, mem: &VecMemory) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut buf = [0u8; 1514];
    while let Some(n) = e.poll_transmit(Instant::ZERO, &mut buf, mem) {
        v.push(buf[..n].to_vec());
    }
    v
}

#[test]
fn syn_to_closed_port_gets_rst_ack() {
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    let syn = tcp_frame(
        TcpFlags {
            syn: true,
            ..Default::default()
        },
        80,
        1000,
    );
    e.handle_frame(Instant::ZERO, &syn, &mut mem);
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
    assert_eq!(eth.dst_addr().0, PEER_MAC, "answered to the sender's MAC");
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.dst_addr(), Ipv4Addr::from(PEER_IP));
    let seg = TcpSegment::parse(US_IP, PEER_IP, ip.payload(), true).unwrap();
    assert!(seg.flags.rst && seg.flags.ack);
    assert_eq!(seg.ack, SeqNumber(1001));
    assert_eq!(seg.tuple.remote_port, 80, "from the closed port");
    let c = e.counters();
    assert_eq!(c.tcp_rsts_sent, 1);
    assert_eq!(c.drops_of(DropReason::TcpNoConnection), 1);
    // An RST for nothing is not answered.
    let rst = tcp_frame(
        TcpFlags {
            rst: true,
            ..Default::default()
        },
        80,
        5,
    );
    e.handle_frame(Instant::ZERO, &rst, &mut mem);
    assert!(out(&mut e, &mem).is_empty());
}

#[test]
fn segments_for_no_connection_get_rsts_within_the_budget_of_each_second() {
    let mut cfg = config(1);
    cfg.no_connection_rsts_per_s = 3;
    let mut e = Engine::new(cfg);
    let mut mem = VecMemory::new();
    let syn = |port| {
        tcp_frame(
            TcpFlags {
                syn: true,
                ..Default::default()
            },
            port,
            1000,
        )
    };
    let mut rsts = 0;
    for port in 0..10 {
        e.handle_frame(Instant::ZERO, &syn(100 + port), &mut mem);
        rsts += out(&mut e, &mem).len();
    }
    assert_eq!(rsts, 3, "the budget of the first second");
    let c = e.counters();
    assert_eq!(c.tcp_rsts_sent, 3);
    assert_eq!(c.tcp_rsts_rate_limited, 7);
    assert_eq!(
        c.drops_of(DropReason::TcpNoConnection),
        10,
        "every one dropped"
    );
    // 999 ms later: the same second.
    let t = Instant::ZERO + iwarp_types::Duration::from_millis(999);
    e.handle_frame(t, &syn(80), &mut mem);
    assert!(out(&mut e, &mem).is_empty());
    // A second after the first RST, a peer's retransmitted SYN is refused.
    let t = Instant::ZERO + iwarp_types::Duration::from_secs(1);
    e.handle_frame(t, &syn(80), &mut mem);
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0][14 + 20 + 13] & 0x04, 0x04, "a RST");
    assert_eq!(e.counters().tcp_rsts_rate_limited, 8);
}

/// A SYN to `dst_port` from the peer's port `src_port`.
fn syn_from(src_port: u16, dst_port: u16, seq: u32) -> Vec<u8> {
    let mut f = tcp_frame(
        TcpFlags {
            syn: true,
            ..Default::default()
        },
        dst_port,
        seq,
    );
    f[34..36].copy_from_slice(&src_port.to_be_bytes());
    let mut t = smoltcp::wire::TcpPacket::new_unchecked(&mut f[34..]);
    t.fill_checksum(
        &Ipv4Addr::from(PEER_IP).into(),
        &Ipv4Addr::from(US_IP).into(),
    );
    f
}

#[test]
fn syn_to_listener_gets_syn_ack_and_a_full_backlog_sheds_its_oldest_half_open() {
    let mut cfg = config(1);
    cfg.backlog_max = 1;
    let mut e = Engine::new(cfg);
    let mut mem = VecMemory::new();
    e.listen(80, 8).unwrap();
    e.handle_frame(Instant::ZERO, &syn_from(40_000, 80, 1000), &mut mem);
    // The peer is on-link and unknown: learnt from its SYN, the SYN-ACK goes at once,
    // to the MAC the SYN came from, without an ARP round trip.
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1, "the SYN-ACK");
    assert_eq!(&frames[0][12..14], &[0x08, 0x00]);
    assert_eq!(&frames[0][..6], &PEER_MAC);
    assert_eq!(frames[0][14 + 20 + 13] & 0x12, 0x12, "SYN and ACK");
    assert_eq!(e.counters().arp_gleaned, 1);
    assert_eq!(e.counters().arp_requests_out, 0);
    assert_eq!(e.conn_count(), 1);
    // Another SYN from another port: the backlog (1) is full of a half-open connection
    // that never completed its handshake; it goes, the new SYN is answered.
    e.handle_frame(Instant::ZERO, &syn_from(40_001, 80, 7), &mut mem);
    assert_eq!(e.conn_count(), 1);
    assert_eq!(e.counters().tcp_half_open_evicted, 1);
    assert_eq!(e.counters().drops_of(DropReason::TcpBacklogFull), 0);
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1, "the SYN-ACK to the second SYN");
    assert_eq!(&frames[0][36..38], &40_001u16.to_be_bytes());
}

#[test]
fn a_syn_flood_cannot_lock_a_listener() {
    // Backlog 2, a flood of SYNs from ports that never complete the handshake, then a
    // peer's SYN: it is answered, and the listener never holds more than its backlog.
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    e.listen(80, 2).unwrap();
    for i in 0..100u16 {
        e.handle_frame(
            Instant::ZERO,
            &syn_from(30_000 + i, 80, u32::from(i)),
            &mut mem,
        );
        assert!(e.conn_count() <= 2);
        out(&mut e, &mem);
    }
    e.handle_frame(Instant::ZERO, &syn_from(50_000, 80, 99), &mut mem);
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0][14 + 20 + 13] & 0x12, 0x12, "SYN and ACK");
    assert_eq!(&frames[0][36..38], &50_000u16.to_be_bytes());
    assert_eq!(e.conn_count(), 2);
    assert_eq!(e.counters().tcp_half_open_evicted, 99);
    assert_eq!(e.counters().drops_of(DropReason::TcpBacklogFull), 0);
}

#[test]
fn bad_tcp_checksum_is_counted() {
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    let mut syn = tcp_frame(
        TcpFlags {
            syn: true,
            ..Default::default()
        },
        80,
        1000,
    );
    syn[40] ^= 0xff;
    e.handle_frame(Instant::ZERO, &syn, &mut mem);
    assert!(out(&mut e, &mem).is_empty());
    assert_eq!(e.counters().tcp_checksum_errors, 1);
}

#[test]
fn engine_answers_arp_and_ping() {
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&PEER_IP);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&US_IP);
    e.handle_frame(Instant::ZERO, &arp, &mut mem);
    let frames = out(&mut e, &mem);
    assert_eq!(frames.len(), 1);
    assert_eq!(&frames[0][..6], &PEER_MAC);
    assert_eq!(&frames[0][20..22], &[0, 2], "ARP reply");
    let c = e.counters().clone();
    assert_eq!(c.frames_in, 1);
    assert_eq!(c.frames_out, 1);
    assert_eq!(c.bytes_out, 42);
}

#[test]
fn ipv4_drops_through_the_engine() {
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    let base = tcp_frame(
        TcpFlags {
            syn: true,
            ..Default::default()
        },
        80,
        1,
    );
    let mut frag = base.clone();
    frag[20] = 0x20; // MF
    Ipv4Packet::new_unchecked(&mut frag[14..]).fill_checksum();
    e.handle_frame(Instant::ZERO, &frag, &mut mem);
    let mut other = base.clone();
    other[33] = 99; // not our address
    Ipv4Packet::new_unchecked(&mut other[14..]).fill_checksum();
    e.handle_frame(Instant::ZERO, &other, &mut mem);
    let mut bad = base.clone();
    bad[24] ^= 1; // IPv4 checksum
    e.handle_frame(Instant::ZERO, &bad, &mut mem);
    assert!(out(&mut e, &mem).is_empty());
    let c = e.counters();
    assert_eq!(c.drops_of(DropReason::Ipv4Fragment), 1);
    assert_eq!(c.drops_of(DropReason::Ipv4NotForUs), 1);
    assert_eq!(c.drops_of(DropReason::Ipv4BadChecksum), 1);
}

/// A QP of `e` ready to connect.
fn connectable_qp(e: &mut Engine) -> iwarp_types::QpId {
    let r = e.rnic_mut();
    let pd = r.alloc_pd().unwrap();
    let (cq, _) = r.create_cq(16).unwrap();
    let attr = iwarp_rdma::QpAttr {
        sq_depth: 4,
        rq_depth: 4,
        inbound_read: true,
        inbound_write: true,
        ..iwarp_rdma::QpAttr::new(pd, cq)
    };
    e.rnic_mut().create_qp(&attr).unwrap().0
}

#[test]
fn connect_to_silent_neighbour_fails_unreachable() {
    let mut e = Engine::new(config(1));
    let mut mem = VecMemory::new();
    let qp = connectable_qp(&mut e);
    let silent = Ipv4Addr::new(10, 0, 0, 3);
    let conn = e
        .connect(Instant::ZERO, qp, silent, 80, ConnectParams::default())
        .unwrap();
    // Off-link without a gateway: refused at once.
    let far = Ipv4Addr::new(192, 168, 0, 1);
    assert_eq!(
        e.connect(Instant::ZERO, qp, far, 80, ConnectParams::default()),
        Err(CmError::InvalidQp),
        "the QP is already given to a connection"
    );
    let mut now = Instant::ZERO;
    let mut arp_requests = 0;
    let mut events = Vec::new();
    for _ in 0..1_000 {
        let mut buf = [0u8; 1514];
        while let Some(n) = e.poll_transmit(now, &mut buf, &mem) {
            assert_eq!(
                &buf[12..14],
                &[0x08, 0x06],
                "only ARP leaves: the SYNs are held"
            );
            assert!(n >= 42);
            arp_requests += 1;
        }
        while let Some(ev) = e.poll_event() {
            events.push(ev);
        }
        if !events.is_empty() {
            break;
        }
        let Some(t) = e.poll_timeout() else { break };
        now = t;
        e.handle_timeout(now, &mut mem);
    }
    assert_eq!(
        events,
        vec![Event::ConnectFailed {
            conn,
            reason: ConnectFailure::Unreachable
        }]
    );
    assert!(arp_requests >= 3);
    assert_eq!(e.conn_count(), 0);
    assert!(e.counters().drops_of(DropReason::ArpPendingDropped) > 0);
    // The QP is free again; an off-link destination has no route.
    assert_eq!(
        e.connect(now, qp, far, 80, ConnectParams::default()),
        Err(CmError::NoRoute)
    );
}

#[test]
fn local_port_choice_honours_the_filter() {
    let mut e = Engine::new(config(1));
    let peer = Ipv4Addr::from(PEER_IP);
    let p1 = e.choose_local_port(peer, 80, |p| p % 4 == 3).unwrap();
    assert_eq!(p1 % 4, 3);
    assert!(p1 >= e.config().ephemeral_port_min);
    let p2 = e.choose_local_port(peer, 80, |p| p % 4 == 3).unwrap();
    assert_ne!(p1, p2, "round robin over the range");
    assert_eq!(e.choose_local_port(peer, 80, |_| false), None);
    // A listening port is never chosen.
    e.listen(p2 + 4, 1).unwrap();
    let p3 = e.choose_local_port(peer, 80, |p| p % 4 == 3).unwrap();
    assert_ne!(p3, p2 + 4);
}

#[test]
fn connect_retries_the_syn_as_configured_before_timing_out() {
    // Issue 17 (sim seed 0xef6cf539b285e1da): MPA's handshake deadline (10 s) ran from
    // connect(), so four lost SYNs ended the connect at 10 s although TCP was to send
    // 1 + syn_retries SYNs (the last at 63 s, giving up at 127 s, as Linux does).
    let cfg = config(1);
    let syn_retries = cfg.tcp.syn_retries;
    let mut e = Engine::new(cfg);
    let mut mem = VecMemory::new();
    let qp = connectable_qp(&mut e);
    let peer = Ipv4Addr::from(PEER_IP);
    let conn = e
        .connect(Instant::ZERO, qp, peer, 80, ConnectParams::default())
        .unwrap();
    // The peer answers every ARP request, never a SYN.
    let mut arp = Vec::with_capacity(42);
    arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02]);
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&PEER_IP);
    arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    arp.extend_from_slice(&US_IP);
    let mut now = Instant::ZERO;
    let mut syns = Vec::new();
    let mut events = Vec::new();
    let mut arps = Vec::new();
    for _ in 0..1_000 {
        let mut buf = [0u8; 1514];
        while let Some(n) = e.poll_transmit(now, &mut buf, &mem) {
            if buf[12..14] == [0x08, 0x06] {
                arps.push(now);
                e.handle_frame(now, &arp, &mut mem);
            } else {
                assert!(n >= 54 && buf[47] & 0x02 != 0, "only SYNs leave");
                syns.push(now);
            }
        }
        while let Some(ev) = e.poll_event() {
            events.push(ev);
        }
        if !events.is_empty() {
            break;
        }
        let Some(t) = e.poll_timeout() else { break };
        now = t;
        e.handle_timeout(now, &mut mem);
    }
    assert_eq!(
        events,
        vec![Event::ConnectFailed {
            conn,
            reason: ConnectFailure::Timeout
        }]
    );
    assert!(!arps.is_empty(), "the SYN waited for ARP");
    assert_eq!(syns.len() as u32, 1 + syn_retries, "SYNs at {syns:?}");
    assert!(
        now.saturating_since(syns[0]).as_millis() >= 60_000,
        "TCP gave up, not the MPA deadline: at {now:?}"
    );
}
