//! ICMP (RFC 792): we answer echo requests and ignore everything else.

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Echo request, id 0x1234, seq 1, data "hi".
    static REQUEST: [u8; 10] = [0x08, 0x00, 0x7d, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i'];
    /// The matching echo reply.
    static REPLY: [u8; 10] = [0x00, 0x00, 0x85, 0x61, 0x12, 0x34, 0x00, 0x01, b'h', b'i'];

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
