//! A forged ARP reply poisons the initiator's entry for its peer in the middle of a
//! connection: the next retransmission timeout re-confirms the entry (as Linux's NUD
//! probe does) and the transfer completes instead of stalling until the entry expires.

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
