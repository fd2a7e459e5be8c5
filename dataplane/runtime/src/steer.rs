//! Steering: which dataplane core owns a frame.
//!
//! IPv4/TCP frames belong to the core their 4-tuple hashes to with a symmetric Toeplitz
//! hash (the RSS hash the NIC computes, key `0x6d5a` repeated, so both directions of a
//! connection hash alike). The owner is the core of queue `(hash & (reta_size - 1)) % n`:
//! RETA entry `i` names queue `i % n`, which is how the DPDK side programs the NIC.
//! ARP goes to every core of the port (each engine keeps its own ARP cache); everything
//! else (ICMP echo, malformed frames) stays on the core that received it.

/// Length of an RSS (Toeplitz) key.
pub const RSS_KEY_LEN: usize = 40;

/// The symmetric RSS key: `0x6d5a` repeated. Swapping source and destination (addresses
/// and ports) leaves the hash unchanged, so both directions of a connection land on the
/// same queue.
pub const SYMMETRIC_RSS_KEY: [u8; RSS_KEY_LEN] = {
    let mut k = [0u8; RSS_KEY_LEN];
    let mut i = 0;
    while i < RSS_KEY_LEN {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// The standard (non-symmetric) Microsoft RSS key used by the published verification
/// vectors.
pub const MICROSOFT_RSS_KEY: [u8; RSS_KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Bytes of the IPv4/TCP hash input: source address, destination address, source port,
/// destination port (network order).
pub const TUPLE_INPUT_LEN: usize = 12;

/// The Toeplitz hash of `input` under `key` (bit by bit; the reference implementation).
/// `input` may be at most `RSS_KEY_LEN - 4` bytes.
pub fn toeplitz_hash(key: &[u8; RSS_KEY_LEN], input: &[u8]) -> u32 {
    let mut result = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (&byte, &k) in input.iter().zip(&key[4..]) {
        for bit in (0..8).rev() {
            if byte & (1 << bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((k >> bit) & 1);
        }
    }
    result
}

/// A table-driven Toeplitz hash over the 12-byte IPv4/TCP input: one lookup per input
/// byte. Built once (12 KiB), used per frame.
#[derive(Clone)]
pub struct Toeplitz {
    table: Box<[[u32; 256]; TUPLE_INPUT_LEN]>,
}

impl core::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Toeplitz")
    }
}

impl Toeplitz {
    /// The table for `key`.
    pub fn new(key: &[u8; RSS_KEY_LEN]) -> Toeplitz {
        let mut table = Box::new([[0u32; 256]; TUPLE_INPUT_LEN]);
        for (pos, row) in table.iter_mut().enumerate() {
            // The 32-bit key window at each bit of this byte.
            let mut windows = [0u32; 8];
            for (b, w) in windows.iter_mut().enumerate() {
                let bit = pos * 8 + b;
                *w = key_window(key, bit);
            }
            for (value, slot) in row.iter_mut().enumerate() {
                let mut h = 0u32;
                for (b, w) in windows.iter().enumerate() {
                    if value & (0x80 >> b) != 0 {
                        h ^= w;
                    }
                }
                *slot = h;
            }
        }
        Toeplitz { table }
    }

    /// The hash of a 12-byte IPv4/TCP input.
    #[inline]
    pub fn hash(&self, input: &[u8; TUPLE_INPUT_LEN]) -> u32 {
        let mut h = 0u32;
        for (row, &b) in self.table.iter().zip(input) {
            h ^= row[usize::from(b)];
        }
        h
    }

    /// The hash of an IPv4/TCP 4-tuple as it appears in a frame from `src` to `dst`.
    #[inline]
    pub fn hash_tuple(
        &self,
        src_ip: [u8; 4],
        dst_ip: [u8; 4],
        src_port: u16,
        dst_port: u16,
    ) -> u32 {
        let mut input = [0u8; TUPLE_INPUT_LEN];
        input[0..4].copy_from_slice(&src_ip);
        input[4..8].copy_from_slice(&dst_ip);
        input[8..10].copy_from_slice(&src_port.to_be_bytes());
        input[10..12].copy_from_slice(&dst_port.to_be_bytes());
        self.hash(&input)
    }
}

/// The 32 key bits starting at bit `bit` of `key` (zeros past its end).
fn key_window(key: &[u8; RSS_KEY_LEN], bit: usize) -> u32 {
    let mut w = 0u32;
    for i in 0..32 {
        let b = bit + i;
        let v = key.get(b / 8).map_or(0, |k| (k >> (7 - b % 8)) & 1);
        w = (w << 1) | u32::from(v);
    }
    w
}

/// What a received frame is, for steering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameClass {
    /// IPv4/TCP (first fragment or unfragmented) with its 4-tuple.
    Tcp {
        /// Source address.
        src_ip: [u8; 4],
        /// Destination address.
        dst_ip: [u8; 4],
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
    },
    /// An ARP reply (or any ARP but a request): every core of the port learns from it
    /// (each engine has its own ARP cache).
    Arp,
    /// Anything else (an ARP request, ICMP, malformed, other protocols): handled where it
    /// was received (the engine answers or drops and counts it). An ARP request is answered
    /// once, by the core that received it; copying it to every core would make every core
    /// answer.
    Local,
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETH_HEADER_LEN: usize = 14;
/// ARP operation "request" (RFC 826), at bytes 20..22 of the frame.
const ARP_OP_REQUEST: [u8; 2] = [0, 1];
const IPPROTO_TCP: u8 = 6;

/// Classifies an Ethernet frame. Never fails: what cannot be parsed is [`FrameClass::Local`].
pub fn classify(frame: &[u8]) -> FrameClass {
    let Some(eth) = frame.get(12..14) else {
        return FrameClass::Local;
    };
    match u16::from_be_bytes([eth[0], eth[1]]) {
        ETHERTYPE_ARP if frame.get(20..22) == Some(&ARP_OP_REQUEST[..]) => FrameClass::Local,
        ETHERTYPE_ARP => FrameClass::Arp,
        ETHERTYPE_IPV4 => classify_ipv4(&frame[ETH_HEADER_LEN..]),
        _ => FrameClass::Local,
    }
}

fn classify_ipv4(ip: &[u8]) -> FrameClass {
    let Some(head) = ip.get(..20) else {
        return FrameClass::Local;
    };
    let ihl = usize::from(head[0] & 0x0f) * 4;
    let frag = u16::from_be_bytes([head[6], head[7]]) & 0x3fff;
    if head[0] >> 4 != 4 || ihl < 20 || head[9] != IPPROTO_TCP || frag & 0x1fff != 0 {
        return FrameClass::Local;
    }
    let Some(ports) = ip.get(ihl..ihl + 4) else {
        return FrameClass::Local;
    };
    FrameClass::Tcp {
        src_ip: [head[12], head[13], head[14], head[15]],
        dst_ip: [head[16], head[17], head[18], head[19]],
        src_port: u16::from_be_bytes([ports[0], ports[1]]),
        dst_port: u16::from_be_bytes([ports[2], ports[3]]),
    }
}

/// A steering configuration is unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteerError(pub &'static str);

impl core::fmt::Display for SteerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "invalid steering: {}", self.0)
    }
}

impl std::error::Error for SteerError {}

/// How one port spreads frames over the cores that serve it.
#[derive(Clone, Debug)]
pub struct Steering {
    hash: Toeplitz,
    reta_mask: u32,
    /// Global core index of each queue of the port (queue `q` is served by
    /// `queue_core[q]`).
    queue_core: Vec<usize>,
}

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Handled here.
    Here,
    /// Owned by another core (global index).
    Core(usize),
    /// ARP: handled here and copied to every other core of the port.
    AllCores,
}

impl Steering {
    /// Steering for a port with one queue per entry of `queue_core` (the global index of
    /// the core serving it), a RETA of `reta_size` entries (a power of two) and `key`.
    pub fn new(
        key: &[u8; RSS_KEY_LEN],
        reta_size: usize,
        queue_core: Vec<usize>,
    ) -> Result<Steering, SteerError> {
        if reta_size == 0 || !reta_size.is_power_of_two() || reta_size > 1 << 16 {
            return Err(SteerError("reta_size must be a power of two in 1..=65536"));
        }
        if queue_core.is_empty() {
            return Err(SteerError("a port needs at least one queue"));
        }
        Ok(Steering {
            hash: Toeplitz::new(key),
            reta_mask: (reta_size - 1) as u32,
            queue_core,
        })
    }

    /// A port served by one core only (everything is handled there).
    pub fn single(core: usize) -> Steering {
        Steering {
            hash: Toeplitz::new(&SYMMETRIC_RSS_KEY),
            reta_mask: 0,
            queue_core: vec![core],
        }
    }

    /// Number of queues (cores) of the port.
    pub fn queues(&self) -> usize {
        self.queue_core.len()
    }

    /// Global indices of the cores serving the port, by queue.
    pub fn cores(&self) -> &[usize] {
        &self.queue_core
    }

    /// The queue a hash selects: `(hash & (reta_size - 1)) % queues`.
    #[inline]
    pub fn queue_of_hash(&self, hash: u32) -> usize {
        (hash & self.reta_mask) as usize % self.queue_core.len()
    }

    /// The core owning a 4-tuple (either direction: the key is symmetric).
    #[inline]
    pub fn owner(&self, src_ip: [u8; 4], dst_ip: [u8; 4], src_port: u16, dst_port: u16) -> usize {
        let h = self.hash.hash_tuple(src_ip, dst_ip, src_port, dst_port);
        self.queue_core[self.queue_of_hash(h)]
    }

    /// Where a frame received by core `me` goes.
    #[inline]
    pub fn route(&self, me: usize, frame: &[u8]) -> Route {
        if self.queue_core.len() == 1 {
            return Route::Here;
        }
        match classify(frame) {
            FrameClass::Tcp {
                src_ip,
                dst_ip,
                src_port,
                dst_port,
            } => {
                let owner = self.owner(src_ip, dst_ip, src_port, dst_port);
                if owner == me {
                    Route::Here
                } else {
                    Route::Core(owner)
                }
            }
            FrameClass::Arp => Route::AllCores,
            FrameClass::Local => Route::Here,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> [u8; 12] {
        let mut i = [0u8; 12];
        i[0..4].copy_from_slice(&src);
        i[4..8].copy_from_slice(&dst);
        i[8..10].copy_from_slice(&sp.to_be_bytes());
        i[10..12].copy_from_slice(&dp.to_be_bytes());
        i
    }

    /// dst, dport, src, sport, IPv4-only hash, IPv4+TCP hash.
    type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);

    /// Microsoft's RSS verification suite (IPv4 with and without TCP ports).
    const VECTORS: [Vector; 5] = [
        // dst, dport, src, sport, ipv4-only hash, ipv4+tcp hash
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    #[test]
    fn microsoft_verification_vectors() {
        let t = Toeplitz::new(&MICROSOFT_RSS_KEY);
        for (dst, dp, src, sp, ip_only, with_tcp) in VECTORS {
            let i = input(src, dst, sp, dp);
            assert_eq!(toeplitz_hash(&MICROSOFT_RSS_KEY, &i[..8]), ip_only);
            assert_eq!(toeplitz_hash(&MICROSOFT_RSS_KEY, &i), with_tcp);
            assert_eq!(t.hash(&i), with_tcp, "table-driven hash agrees");
            assert_eq!(t.hash_tuple(src, dst, sp, dp), with_tcp);
        }
    }

    #[test]
    fn symmetric_key_hashes_both_directions_alike() {
        let t = Toeplitz::new(&SYMMETRIC_RSS_KEY);
        let mut differ = 0;
        for (dst, dp, src, sp, _, _) in VECTORS {
            let fwd = t.hash_tuple(src, dst, sp, dp);
            assert_eq!(fwd, t.hash_tuple(dst, src, dp, sp));
            assert_eq!(
                fwd,
                toeplitz_hash(&SYMMETRIC_RSS_KEY, &input(src, dst, sp, dp))
            );
            if fwd != t.hash_tuple(src, dst, sp.wrapping_add(1), dp) {
                differ += 1;
            }
        }
        assert!(differ >= 4, "the hash still depends on the ports");
        // The standard key is not symmetric.
        let m = Toeplitz::new(&MICROSOFT_RSS_KEY);
        let (dst, dp, src, sp, _, _) = VECTORS[0];
        assert_ne!(
            m.hash_tuple(src, dst, sp, dp),
            m.hash_tuple(dst, src, dp, sp)
        );
    }

    fn tcp_frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    #[test]
    fn classify_frames() {
        let f = tcp_frame([1, 2, 3, 4], [5, 6, 7, 8], 10, 20);
        assert_eq!(
            classify(&f),
            FrameClass::Tcp {
                src_ip: [1, 2, 3, 4],
                dst_ip: [5, 6, 7, 8],
                src_port: 10,
                dst_port: 20
            }
        );
        let mut frag = f.clone();
        frag[14 + 7] = 8; // fragment offset 8
        assert_eq!(classify(&frag), FrameClass::Local);
        let mut icmp = f.clone();
        icmp[14 + 9] = 1;
        assert_eq!(classify(&icmp), FrameClass::Local);
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        arp[21] = 2; // reply
        assert_eq!(classify(&arp), FrameClass::Arp);
        arp[21] = 1; // request: answered once, where it arrived
        assert_eq!(classify(&arp), FrameClass::Local);
        assert_eq!(classify(&f[..36]), FrameClass::Local, "ports cut off");
        assert_eq!(classify(&[]), FrameClass::Local);
        let mut opts = tcp_frame([1, 2, 3, 4], [5, 6, 7, 8], 10, 20);
        opts[14] = 0x4f; // 60-byte header: ports beyond the frame
        assert_eq!(classify(&opts), FrameClass::Local);
    }

    #[test]
    fn routes_by_owner_and_spreads() {
        let s = Steering::new(&SYMMETRIC_RSS_KEY, 128, vec![0, 1]).unwrap();
        let mut on = [0usize; 2];
        for port in 49152..49152 + 64u16 {
            let f = tcp_frame([198, 18, 0, 2], [198, 18, 0, 1], port, 4791);
            let owner = s.owner([198, 18, 0, 1], [198, 18, 0, 2], 4791, port);
            on[owner] += 1;
            let expect = |me| {
                if owner == me {
                    Route::Here
                } else {
                    Route::Core(owner)
                }
            };
            assert_eq!(s.route(0, &f), expect(0));
            assert_eq!(s.route(1, &f), expect(1));
        }
        assert!(on[0] > 10 && on[1] > 10, "spread: {on:?}");
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        arp[21] = 2; // reply: every core learns
        assert_eq!(s.route(1, &arp), Route::AllCores);
        arp[21] = 1; // request: only the receiving core answers
        assert_eq!(s.route(1, &arp), Route::Here);
        assert_eq!(Steering::single(3).route(3, &arp), Route::Here);
        assert!(Steering::new(&SYMMETRIC_RSS_KEY, 100, vec![0]).is_err());
        assert!(Steering::new(&SYMMETRIC_RSS_KEY, 128, vec![]).is_err());
    }
}
