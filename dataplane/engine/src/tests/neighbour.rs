//! The path to the peer changes under a live connection: a forged ARP reply poisons the
//! neighbour entry (the next retransmission timeout re-confirms it, as Linux's NUD probe
//! does, instead of stalling until the entry expires), ARP stops getting through while
//! TCP still does (the peer's own segments confirm the entry), and an ICMP
//! "fragmentation needed" shrinks the path MTU (FPDUs follow the new MSS).

use iwarp_types::{SendFlags, SendOp, SendWr, WcOpcode, WcStatus};

use super::b2b::{establish, pattern, sge};
use super::harness::Pair;

/// An ARP reply from `sender_mac` claiming `sender_ip`, addressed to node `to_mac`/`to_ip`.
fn arp_reply(to_mac: [u8; 6], to_ip: [u8; 4], sender_mac: [u8; 6], sender_ip: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&[0x08, 0x06]); // ARP
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02]); // Ethernet/IPv4 reply
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&sender_ip);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&to_ip);
    f
}

#[test]
fn forged_arp_reply_heals_at_the_next_retransmission_timeout() {
    let mut p = Pair::new();
    establish(&mut p);
    let (a_mac, a_ip) = (p.a.eng.config().mac, p.a.eng.config().ipv4.octets());
    let b_ip = p.b.eng.config().ipv4.octets();
    let forged = arp_reply(a_mac, a_ip, [0x02, 0, 0, 0, 0, 0x99], b_ip);
    let now = p.now;
    p.a.eng.handle_frame(now, &forged, &mut p.a.mem);
    assert_eq!(
        p.a.eng.counters().arp_replies_in,
        2,
        "the forged reply was taken"
    );

    let data = pattern(20_000, 5);
    p.a.fill(0, &data);
    let write = SendWr {
        wr_id: 7,
        op: SendOp::Write {
            remote_to: 65_536,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 0, 20_000),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(p.a.qp, &write).unwrap();
    let start = p.now;
    let mut done = Vec::new();
    p.run_until(|p| {
        done.extend(p.a.completions());
        !done.is_empty()
    });
    assert_eq!(
        (done[0].wr_id, done[0].status, done[0].opcode),
        (7, WcStatus::Success, WcOpcode::Write)
    );
    assert_eq!(p.b.bytes(65_536, 20_000), &data[..]);
    assert!(
        p.b.eng.counters().drops_of(crate::DropReason::EthNotForUs) > 0,
        "B first saw frames addressed elsewhere"
    );
    let took = p.now.saturating_since(start);
    assert!(
        took.as_millis() < 10_000,
        "healed at the first RTOs, not at ARP expiry: {took:?}"
    );
    assert!(p.a.eng.counters().arp_requests_out >= 2, "A asked again");
}

/// After a retransmission timeout A re-confirms B's entry by ARP, but no ARP frame gets
/// through any more (as with QEMU's multi-queue RSS, which lost about half of them while
/// TCP passed): B's own segments must confirm the entry. Before they did, the entry was
/// freed after the ARP retries, A held its segments for a resolution that never came, B
/// had nothing to answer, and the connection stalled.
#[test]
fn segments_of_the_peer_confirm_its_entry_when_arp_is_lost() {
    use std::cell::Cell;
    use std::rc::Rc;

    let mut p = Pair::new();
    establish(&mut p);
    let is_arp = |f: &Vec<u8>| f.get(12..14) == Some(&[0x08, 0x06][..]);
    // Every ARP frame lost from now on, both ways; the next frame A sends (the first
    // WRITE's only FPDU) lost too, so that it needs a retransmission timeout.
    let lose_a = Rc::new(Cell::new(1u32));
    let lose = Rc::clone(&lose_a);
    p.a_to_b = Box::new(move |f| {
        if is_arp(f) {
            return false;
        }
        let n = lose.get();
        lose.set(n.saturating_sub(1));
        n == 0
    });
    p.b_to_a = Box::new(move |f| !is_arp(f));
    let gleaned = p.a.eng.counters().arp_gleaned;
    let requests = p.a.eng.counters().arp_requests_out;

    // A WRITE every 500 ms of virtual time for 10 s: well past the ARP retries (3 x 1 s).
    for i in 0..20u64 {
        let len = if i == 0 { 1_024 } else { 16_384u32 };
        let data = pattern(len as usize, i as u8);
        p.a.fill(0, &data);
        let write = SendWr {
            wr_id: i,
            op: SendOp::Write {
                remote_to: 65_536,
                rkey: p.b.mr,
            },
            sgl: sge(&p.a, 0, len),
            flags: SendFlags::SIGNALED,
        };
        p.a.eng.post_send(p.a.qp, &write).unwrap();
        let mut done = Vec::new();
        p.run_until(|p| {
            done.extend(p.a.completions());
            !done.is_empty()
        });
        assert_eq!(
            (done[0].wr_id, done[0].status),
            (i, WcStatus::Success),
            "WRITE {i}"
        );
        assert_eq!(p.b.bytes(65_536, len as usize), &data[..], "WRITE {i}");
        let until = p.now + iwarp_types::Duration::from_millis(500);
        while p.next_timer(until) {
            p.run(false);
        }
        p.now = until;
        p.run(false);
    }
    let c = p.a.eng.counters();
    assert!(
        c.arp_requests_out > requests,
        "A re-confirmed B after the RTO"
    );
    assert!(c.arp_gleaned > gleaned, "B's segments confirmed it");
    assert_eq!(c.drops_of(crate::DropReason::ArpPendingDropped), 0);
}

/// An ICMP "fragmentation needed" (RFC 1191) from a router at `router_ip`, quoting the
/// IPv4 header and the first 8 TCP bytes of a segment `src:sport -> dst:dport` with `seq`.
fn frag_needed(
    to_mac: [u8; 6],
    router_ip: [u8; 4],
    (src, sport): ([u8; 4], u16),
    (dst, dport): ([u8; 4], u16),
    seq: u32,
    mtu: u16,
) -> Vec<u8> {
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend_from_slice(&mtu.to_be_bytes());
    icmp.extend_from_slice(&[0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    icmp.extend_from_slice(&src);
    icmp.extend_from_slice(&dst);
    icmp.extend_from_slice(&sport.to_be_bytes());
    icmp.extend_from_slice(&dport.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    let mut p = smoltcp::wire::Icmpv4Packet::new_unchecked(&mut icmp[..]);
    p.fill_checksum();
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&router_ip);
    ip.extend_from_slice(&src);
    let mut h = smoltcp::wire::Ipv4Packet::new_unchecked(&mut ip[..]);
    h.fill_checksum();
    let mut f = Vec::new();
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x77]);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn fragmentation_needed_shrinks_the_fpdus() {
    use std::cell::Cell;
    use std::rc::Rc;

    let mut p = Pair::new();
    establish(&mut p);
    let conn = p.a.eng.qp_conn(p.a.qp).unwrap();
    let (tuple, una) = {
        let c = p.a.eng.conn(conn).unwrap();
        (
            c.tuple,
            c.tcp
                .iss()
                .0
                .wrapping_add(1)
                .wrapping_add(c.tcp.acked_offset() as u32),
        )
    };
    let a_mac = p.a.eng.config().mac;
    let local = (tuple.local_ip, tuple.local_port);
    let remote = (tuple.remote_ip, tuple.remote_port);

    // Not about anything in flight (RFC 5927): ignored.
    let stale = frag_needed(
        a_mac,
        [10, 0, 0, 254],
        local,
        remote,
        una.wrapping_add(1 << 31),
        600,
    );
    let now = p.now;
    p.a.eng.handle_frame(now, &stale, &mut p.a.mem);
    assert_eq!(p.a.eng.counters().icmp_frag_needed, 0);

    let ok = frag_needed(a_mac, [10, 0, 0, 254], local, remote, una, 1000);
    p.a.eng.handle_frame(now, &ok, &mut p.a.mem);
    assert_eq!(p.a.eng.counters().icmp_frag_needed, 1);
    assert!(p.a.eng.conn(conn).unwrap().tcp.eff_mss() <= 960);

    let largest = Rc::new(Cell::new(0usize));
    let seen = largest.clone();
    p.a_to_b = Box::new(move |f| {
        seen.set(seen.get().max(f.len()));
        true
    });
    let data = pattern(30_000, 9);
    p.a.fill(0, &data);
    let write = SendWr {
        wr_id: 8,
        op: SendOp::Write {
            remote_to: 65_536,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, 0, 30_000),
        flags: SendFlags::SIGNALED,
    };
    p.a.eng.post_send(p.a.qp, &write).unwrap();
    let mut done = Vec::new();
    p.run_until(|p| {
        done.extend(p.a.completions());
        !done.is_empty()
    });
    assert_eq!((done[0].wr_id, done[0].status), (8, WcStatus::Success));
    assert_eq!(p.b.bytes(65_536, 30_000), &data[..]);
    assert!(
        largest.get() <= 14 + 1000,
        "every frame fits the path MTU: {}",
        largest.get()
    );
    assert!(
        largest.get() > 14 + 900,
        "FPDUs follow the new MSS, not a tiny one"
    );
}
