//! ICMP (RFC 792): we answer echo requests, take "fragmentation needed" (RFC 1191) for
//! our own TCP segments, and ignore everything else.

use smoltcp::wire::{Icmpv4Message, Icmpv4Packet};

use crate::counters::{Counters, DropReason};

/// Checks an inbound ICMP message; if it is a well-formed echo request, writes the echo
/// reply (same identifier, sequence number and data) into `out` and returns its length.
/// Anything else is dropped and counted.
pub fn echo_reply(req: &[u8], out: &mut [u8], counters: &mut Counters) -> Option<usize> {
    let Ok(pkt) = Icmpv4Packet::new_checked(req) else {
        counters.drop(DropReason::IcmpMalformed);
        return None;
    };
    if !pkt.verify_checksum() {
        counters.drop(DropReason::IcmpMalformed);
        return None;
    }
    if pkt.msg_type() != Icmpv4Message::EchoRequest || pkt.msg_code() != 0 {
        counters.drop(DropReason::IcmpIgnored);
        return None;
    }
    let Some(dst) = out.get_mut(..req.len()) else {
        counters.drop(DropReason::IcmpIgnored);
        return None;
    };
    dst.copy_from_slice(req);
    let mut reply = Icmpv4Packet::new_unchecked(dst);
    reply.set_msg_type(Icmpv4Message::EchoReply);
    reply.fill_checksum();
    Some(req.len())
}

/// An ICMP "destination unreachable, fragmentation needed" about a TCP segment we sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragNeeded {
    /// The next-hop MTU the router reported (RFC 1191).
    pub mtu: u16,
    /// The peer the segment went to.
    pub remote_ip: [u8; 4],
    /// Our port.
    pub local_port: u16,
    /// The peer's port.
    pub remote_port: u16,
    /// The sequence number of the segment (for the RFC 5927 check).
    pub seq: u32,
}

/// Offsets inside the ICMP message (type, code, checksum, unused, next-hop MTU).
const NEXT_HOP_MTU: core::ops::Range<usize> = 6..8;
const ICMP_HEADER_LEN: usize = 8;
/// The quoted TCP header must hold ports and sequence number.
const QUOTED_TCP_LEN: usize = 8;

/// If `msg` is a well-formed "fragmentation needed" quoting a TCP segment from `us`,
/// returns what it says; `None` otherwise (the caller counts it as ignored).
pub fn frag_needed(msg: &[u8], us: [u8; 4]) -> Option<FragNeeded> {
    let pkt = Icmpv4Packet::new_checked(msg).ok()?;
    if !pkt.verify_checksum() {
        return None;
    }
    if u8::from(pkt.msg_type()) != 3 || pkt.msg_code() != 4 {
        return None;
    }
    let mtu = u16::from_be_bytes([
        *msg.get(NEXT_HOP_MTU.start)?,
        *msg.get(NEXT_HOP_MTU.start + 1)?,
    ]);
    let quoted = msg.get(ICMP_HEADER_LEN..)?;
    let ver_ihl = *quoted.first()?;
    let ihl = usize::from(ver_ihl & 0x0f) * 4;
    if ver_ihl >> 4 != 4 || ihl < 20 || *quoted.get(9)? != 6 {
        return None;
    }
    if quoted.get(12..16)? != us {
        return None;
    }
    let remote_ip: [u8; 4] = quoted.get(16..20)?.try_into().ok()?;
    let tcp = quoted.get(ihl..ihl + QUOTED_TCP_LEN)?;
    Some(FragNeeded {
        mtu,
        remote_ip,
        local_port: u16::from_be_bytes([tcp[0], tcp[1]]),
        remote_port: u16::from_be_bytes([tcp[2], tcp[3]]),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echo request, id 0x1234, seq 1, data "hi".
    static REQUEST: [u8; 10] = [0x08, 0x00, 0x7d, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i'];
    /// The matching echo reply.
    static REPLY: [u8; 10] = [0x00, 0x00, 0x85, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i'];

    /// Fragmentation needed, next-hop MTU 1280, quoting 10.0.0.1:5000 -> 10.0.0.2:7174
    /// seq 0x01020304.
    fn frag_needed_bytes() -> Vec<u8> {
        let mut m = vec![3, 4, 0, 0, 0, 0, 0x05, 0x00];
        m.extend_from_slice(&[
            0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        m.extend_from_slice(&[0x13, 0x88, 0x1c, 0x06, 1, 2, 3, 4]);
        let mut p = Icmpv4Packet::new_unchecked(&mut m[..]);
        p.fill_checksum();
        m
    }

    #[test]
    fn parses_fragmentation_needed() {
        let m = frag_needed_bytes();
        assert_eq!(
            frag_needed(&m, [10, 0, 0, 1]),
            Some(FragNeeded {
                mtu: 1280,
                remote_ip: [10, 0, 0, 2],
                local_port: 5000,
                remote_port: 7174,
                seq: 0x0102_0304,
            })
        );
        assert_eq!(
            frag_needed(&m, [10, 0, 0, 9]),
            None,
            "not about our segment"
        );
        let mut bad = m.clone();
        bad[6] ^= 1;
        assert_eq!(frag_needed(&bad, [10, 0, 0, 1]), None, "checksum");
        for n in 0..m.len() {
            let mut t = m[..n].to_vec();
            if t.len() >= 4 {
                t[2] = 0;
                t[3] = 0;
                let mut p = Icmpv4Packet::new_unchecked(&mut t[..]);
                p.fill_checksum();
            }
            assert_eq!(frag_needed(&t, [10, 0, 0, 1]), None, "truncated at {n}");
        }
        assert_eq!(
            frag_needed(&REQUEST, [10, 0, 0, 1]),
            None,
            "an echo request"
        );
    }

    #[test]
    fn answers_echo_request() {
        let mut c = Counters::default();
        let mut out = [0u8; 64];
        assert_eq!(echo_reply(&REQUEST, &mut out, &mut c), Some(10));
        assert_eq!(&out[..10], &REPLY);
    }

    #[test]
    fn drops_bad_and_ignored() {
        let mut c = Counters::default();
        let mut out = [0u8; 64];
        let mut bad = REQUEST;
        bad[9] = b'o';
        assert_eq!(echo_reply(&bad, &mut out, &mut c), None);
        assert_eq!(c.drops_of(DropReason::IcmpMalformed), 1);
        assert_eq!(
            echo_reply(&REPLY, &mut out, &mut c),
            None,
            "replies are not answered"
        );
        assert_eq!(c.drops_of(DropReason::IcmpIgnored), 1);
        assert_eq!(echo_reply(&REQUEST[..3], &mut out, &mut c), None);
        assert_eq!(c.drops_of(DropReason::IcmpMalformed), 2);
    }
}
