//! Frame parsing for checksum offload: what DPDK needs in an mbuf before a port computes
//! the IPv4 and TCP checksums (l2_len, l3_len, ol_flags, the pseudo-header sum in the TCP
//! checksum field), and a software check for received frames the port did not verify.
//! Pure functions over byte slices.

use iwarp_dpdk_sys as sys;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const IPPROTO_TCP: u8 = 6;

/// The offload request for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOffload {
    /// `RTE_MBUF_F_TX_*` flags.
    pub ol_flags: u64,
    /// Ethernet header length (VLAN tag included).
    pub l2_len: u16,
    /// IPv4 header length.
    pub l3_len: u16,
    /// TCP header length (0 if not TCP).
    pub l4_len: u16,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Where the IPv4 header starts, or None if the frame is not IPv4.
fn ipv4_offset(frame: &[u8]) -> Option<usize> {
    match be16(frame, 12)? {
        ETHERTYPE_IPV4 => Some(14),
        ETHERTYPE_VLAN if be16(frame, 16)? == ETHERTYPE_IPV4 => Some(18),
        _ => None,
    }
}

/// A parsed IPv4 header: (ip offset, header length, total length, protocol, is fragment).
fn ipv4_header(frame: &[u8]) -> Option<(usize, usize, usize, u8, bool)> {
    let ip = ipv4_offset(frame)?;
    let vihl = *frame.get(ip)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return None;
    }
    let total = usize::from(be16(frame, ip + 2)?);
    if total < ihl || ip + total > frame.len() {
        return None;
    }
    let frag = be16(frame, ip + 6)?;
    let is_fragment = frag & 0x3fff != 0;
    Some((ip, ihl, total, frame[ip + 9], is_fragment))
}

/// Ones-complement sum of `data` added to `sum` (not folded).
fn sum16(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The TCP pseudo-header sum (folded, not complemented), as `rte_ipv4_phdr_cksum` makes it.
fn pseudo_header_sum(frame: &[u8], ip: usize, l4_len: usize) -> u16 {
    let mut sum = sum16(0, &frame[ip + 12..ip + 20]);
    sum += u32::from(IPPROTO_TCP);
    sum += l4_len as u32;
    fold(sum)
}

/// Prepares an outgoing frame for TCP checksum offload: writes the pseudo-header sum
/// into the TCP checksum field and returns the mbuf offload request. The IPv4 header
/// checksum is left to the device (`ipv4_by_device`: zeroed, `RTE_MBUF_F_TX_IP_CKSUM`)
/// or computed here (20 bytes: devices like virtio-net offer TCP checksums only). Frames
/// that are not IPv4 get None (sent as they are); IPv4 that is not TCP (or is a
/// fragment) gets only its header checksum.
pub fn prepare_tx(frame: &mut [u8], ipv4_by_device: bool) -> Option<TxOffload> {
    let (ip, ihl, total, proto, is_fragment) = ipv4_header(frame)?;
    frame[ip + 10] = 0;
    frame[ip + 11] = 0;
    let mut off = TxOffload {
        ol_flags: sys::RTE_MBUF_F_TX_IPV4,
        l2_len: ip as u16,
        l3_len: ihl as u16,
        l4_len: 0,
    };
    if ipv4_by_device {
        off.ol_flags |= sys::RTE_MBUF_F_TX_IP_CKSUM;
    } else {
        let c = !fold(sum16(0, &frame[ip..ip + ihl]));
        frame[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }
    let tcp = ip + ihl;
    let l4_len = total - ihl;
    if proto == IPPROTO_TCP && !is_fragment && l4_len >= 20 {
        let doff = usize::from(frame[tcp + 12] >> 4) * 4;
        if doff >= 20 && doff <= l4_len {
            let phdr = pseudo_header_sum(frame, ip, l4_len);
            frame[tcp + 16..tcp + 18].copy_from_slice(&phdr.to_be_bytes());
            off.ol_flags |= sys::RTE_MBUF_F_TX_TCP_CKSUM;
            off.l4_len = doff as u16;
        }
    }
    Some(off)
}

/// Checks in software the IPv4 header checksum only (the device verified the TCP
/// checksum). Frames that are not IPv4 pass; malformed IPv4 fails.
pub fn ipv4_header_ok(frame: &[u8]) -> bool {
    if ipv4_offset(frame).is_none() {
        return true;
    }
    let Some((ip, ihl, ..)) = ipv4_header(frame) else {
        return false;
    };
    fold(sum16(0, &frame[ip..ip + ihl])) == 0xffff
}

/// Checks in software the IPv4 header checksum and, for unfragmented TCP, the TCP
/// checksum. Frames that are not IPv4 pass (the engine parses them itself); malformed
/// IPv4 fails.
pub fn checksums_ok(frame: &[u8]) -> bool {
    if ipv4_offset(frame).is_none() {
        return true;
    }
    let Some((ip, ihl, total, proto, is_fragment)) = ipv4_header(frame) else {
        return false;
    };
    if fold(sum16(0, &frame[ip..ip + ihl])) != 0xffff {
        return false;
    }
    if proto != IPPROTO_TCP || is_fragment {
        return true;
    }
    let l4_len = total - ihl;
    let sum = u32::from(pseudo_header_sum(frame, ip, l4_len));
    fold(sum16(sum, &frame[ip + ihl..ip + total])) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame with valid checksums: Ethernet, IPv4 (ihl 5), TCP (doff 5 or 8), payload.
    fn frame(vlan: bool, tcp_options: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let ip = f.len();
        let tcp_len = if tcp_options { 32 } else { 20 };
        let total = 20 + tcp_len + payload.len();
        f.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0x40,
            0,
            64,
            6,
            0,
            0,
        ]);
        f.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        let tcp = f.len();
        f.extend_from_slice(&[0x12, 0x34, 0x0d, 0x3d, 0, 0, 0, 1, 0, 0, 0, 0]);
        f.push(((tcp_len / 4) as u8) << 4);
        f.extend_from_slice(&[0x18, 0xff, 0xff, 0, 0, 0, 0]);
        if tcp_options {
            f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        }
        f.extend_from_slice(payload);
        let ipc = !fold(sum16(0, &f[ip..ip + 20]));
        f[ip + 10..ip + 12].copy_from_slice(&ipc.to_be_bytes());
        let ph = u32::from(pseudo_header_sum(&f, ip, total - 20));
        let tc = !fold(sum16(ph, &f[tcp..]));
        f[tcp + 16..tcp + 18].copy_from_slice(&tc.to_be_bytes());
        f
    }

    #[test]
    fn valid_frames_pass_the_software_check_and_corrupt_ones_fail() {
        for (vlan, opts, payload) in [
            (false, false, &b"abc"[..]),
            (true, true, &b"hello world"[..]),
        ] {
            let f = frame(vlan, opts, payload);
            assert!(checksums_ok(&f));
            let mut bad = f.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0x40;
            assert!(!checksums_ok(&bad), "payload corruption is caught");
            let mut bad_ip = f.clone();
            bad_ip[if vlan { 18 + 8 } else { 14 + 8 }] ^= 1;
            assert!(!checksums_ok(&bad_ip), "ttl corruption is caught");
        }
        assert!(checksums_ok(&[0xff; 60][..]), "non-IPv4 passes");
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(checksums_ok(&arp));
    }

    #[test]
    fn prepare_sets_lengths_flags_and_the_pseudo_header_that_hardware_completes() {
        for (vlan, opts) in [(false, false), (true, false), (false, true)] {
            let good = frame(vlan, opts, b"odd length payload!");
            let mut f = good.clone();
            let off = prepare_tx(&mut f, true).expect("IPv4");
            let l2 = if vlan { 18 } else { 14 };
            assert_eq!(off.l2_len, l2);
            assert_eq!(off.l3_len, 20);
            assert_eq!(off.l4_len, if opts { 32 } else { 20 });
            assert_eq!(
                off.ol_flags,
                sys::RTE_MBUF_F_TX_IPV4
                    | sys::RTE_MBUF_F_TX_IP_CKSUM
                    | sys::RTE_MBUF_F_TX_TCP_CKSUM
            );
            let ip = usize::from(l2);
            assert_eq!(
                &f[ip + 10..ip + 12],
                &[0, 0],
                "IPv4 checksum left for the port"
            );
            // What the port does: sum the TCP segment (checksum field = pseudo sum) and
            // store the complement. That must equal the true checksum.
            let tcp = ip + 20;
            let hw = !fold(sum16(0, &f[tcp..]));
            assert_eq!(hw.to_be_bytes(), [good[tcp + 16], good[tcp + 17]]);
            // And the IPv4 header checksum the port computes equals the true one.
            let hw_ip = !fold(sum16(0, &f[ip..ip + 20]));
            assert_eq!(hw_ip.to_be_bytes(), [good[ip + 10], good[ip + 11]]);
        }
    }

    #[test]
    fn non_tcp_and_non_ipv4_frames_get_the_right_request() {
        let mut f = frame(false, false, b"x");
        f[14 + 9] = 1; // ICMP
        let off = prepare_tx(&mut f, true).expect("IPv4");
        assert_eq!(
            off.ol_flags,
            sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_IP_CKSUM
        );
        assert_eq!(off.l4_len, 0);
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(prepare_tx(&mut arp, true), None);
        let mut short = frame(false, false, b"x");
        short.truncate(30);
        assert_eq!(
            prepare_tx(&mut short, true),
            None,
            "truncated IPv4 is left alone"
        );
        let mut frag = frame(false, false, b"abc");
        frag[14 + 6] = 0x20; // more fragments
        let off = prepare_tx(&mut frag, true).expect("IPv4");
        assert_eq!(off.ol_flags & sys::RTE_MBUF_F_TX_TCP_CKSUM, 0);
    }

    #[test]
    fn a_device_without_ipv4_checksums_gets_the_header_summed_here() {
        let good = frame(true, true, b"virtio");
        let mut f = good.clone();
        let off = prepare_tx(&mut f, false).expect("IPv4");
        assert_eq!(
            off.ol_flags,
            sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_TCP_CKSUM,
            "no IP_CKSUM request"
        );
        let ip = 18;
        assert_eq!(
            &f[ip..ip + 20],
            &good[ip..ip + 20],
            "the true header checksum"
        );
        assert!(ipv4_header_ok(&f));
        let tcp = ip + 20;
        let hw = !fold(sum16(0, &f[tcp..]));
        assert_eq!(hw.to_be_bytes(), [good[tcp + 16], good[tcp + 17]]);
        // What the receiving queue checks when the device verified only TCP.
        let mut bad = good.clone();
        bad[ip + 8] ^= 1;
        assert!(!ipv4_header_ok(&bad));
        let mut bad_tcp = good.clone();
        let last = bad_tcp.len() - 1;
        bad_tcp[last] ^= 1;
        assert!(ipv4_header_ok(&bad_tcp), "TCP is the device's to check");
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(ipv4_header_ok(&arp));
    }
}
