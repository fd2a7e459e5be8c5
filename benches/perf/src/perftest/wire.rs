//! perftest's communication channel with `-R` (rdma_cm), as seen on the wire between two siw
//! guests (perftest 4.5+0.17, which calls itself version 6.06):
//!
//! * a strict ping-pong of SENDs, the client first, each answered by a SEND of the same length;
//!   every receive buffer is `sizeof(struct pingpong_dest)` = 56 bytes (perftest posts one
//!   receive before connecting and reposts it after each one it consumes);
//! * 16 bytes: the version string, NUL padded; 4 bytes: the page size (`cycle_buffer`, 4096) and
//!   then the cache line size (64), both big-endian; 2 bytes: the MTU enum as a decimal string
//!   (`"3\0"` = 1024); the larger / smaller value of the two sides wins;
//! * 56 bytes: `struct pingpong_dest` (see [`Dest`]): twice all-zero around the set-up of the
//!   data connection, then the real ones;
//! * 8 bytes: bandwidth report fields (`xchg_bw_reports`, write/read bandwidth tests after the
//!   run): size, iterations, peak, average, message rate, each big-endian.

/// Bytes of `struct pingpong_dest` and of every receive perftest posts on the channel.
pub const DEST_LEN: usize = 56;
/// Bytes of the version message.
pub const VERSION_LEN: usize = 16;
/// The version string perftest 4.5+0.17 sends (`ib_write_bw --version`: 6.06).
pub const VERSION: &[u8] = b"6.06";
/// perftest's default TCP port.
pub const DEFAULT_PORT: u16 = 18515;

/// `struct pingpong_dest`: the QP and buffer one side offers the other. On the wire: `lid`,
/// `out_reads`, `qpn`, `psn`, `rkey` as big-endian u32, 4 bytes of padding, `vaddr` as
/// big-endian u64, the 16-byte GID, `srqn`, `gid_index` (big-endian u32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    /// Local id (0 on iWARP).
    pub lid: u32,
    /// Outstanding RDMA Reads the side allows.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// Initial packet sequence number (unused on iWARP).
    pub psn: u32,
    /// STag of the buffer the peer may access.
    pub rkey: u32,
    /// Address (tagged offset) of that buffer.
    pub vaddr: u64,
    /// GID (siw: its MAC, zero padded).
    pub gid: [u8; 16],
    /// SRQ number.
    pub srqn: u32,
    /// GID index.
    pub gid_index: u32,
}

/// A channel message that is not a [`Dest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotADest(pub usize);

impl core::fmt::Display for NotADest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "perftest message of {} bytes, a pingpong_dest has {DEST_LEN}",
            self.0
        )
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Dest {
    /// perftest's wire layout (padding zero).
    pub fn encode(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        for (i, v) in [self.lid, self.out_reads, self.qpn, self.psn, self.rkey]
            .iter()
            .enumerate()
        {
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        b
    }

    /// Checked parse of exactly one `pingpong_dest` (the padding is ignored: perftest leaves
    /// it uninitialised).
    pub fn decode(b: &[u8]) -> Result<Dest, NotADest> {
        if b.len() != DEST_LEN {
            return Err(NotADest(b.len()));
        }
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        Ok(Dest {
            lid: be32(b, 0),
            out_reads: be32(b, 4),
            qpn: be32(b, 8),
            psn: be32(b, 12),
            rkey: be32(b, 16),
            vaddr: u64::from_be_bytes(v),
            gid,
            srqn: be32(b, 48),
            gid_index: be32(b, 52),
        })
    }

    /// All zero: what perftest sends before its data QP exists.
    pub fn is_zero(&self) -> bool {
        *self == Dest::default()
    }
}

/// What a channel message is, by its length (the only thing that tells them apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// The version string.
    Version,
    /// Page size or cache line size.
    SysInt,
    /// The MTU string.
    Mtu,
    /// A bandwidth report field.
    Report,
    /// A `pingpong_dest`.
    Dest,
}

impl Msg {
    /// Classifies a received message; `None` for a length perftest never sends.
    pub fn of_len(len: usize) -> Option<Msg> {
        match len {
            VERSION_LEN => Some(Msg::Version),
            4 => Some(Msg::SysInt),
            2 => Some(Msg::Mtu),
            8 => Some(Msg::Report),
            DEST_LEN => Some(Msg::Dest),
            _ => None,
        }
    }
}

/// The version message (NUL padded).
pub fn version_msg() -> [u8; VERSION_LEN] {
    let mut b = [0u8; VERSION_LEN];
    b[..VERSION.len()].copy_from_slice(VERSION);
    b
}

/// The answer of the server side to a client message other than a `Dest`: the version for
/// the version; the same value for page size, cache line and MTU (the peer takes the larger
/// or smaller of the two, so equal values change nothing); zero for report fields (this side
/// measured nothing). `None` for a length perftest never sends.
pub fn server_answer(msg: &[u8]) -> Option<Vec<u8>> {
    match Msg::of_len(msg.len())? {
        Msg::Version => Some(version_msg().to_vec()),
        Msg::SysInt | Msg::Mtu => Some(msg.to_vec()),
        Msg::Report => Some(vec![0u8; 8]),
        Msg::Dest => None,
    }
}

/// The five bandwidth report fields of `xchg_bw_reports`, as perftest sends them: size and
/// iterations as big-endian 64-bit integers, peak and average bandwidth (MB/s) and message
/// rate (Mpps) as big-endian IEEE doubles.
pub fn report_fields(size: u64, iters: u64, peak: f64, avg: f64, rate: f64) -> [[u8; 8]; 5] {
    [
        size.to_be_bytes(),
        iters.to_be_bytes(),
        peak.to_bits().to_be_bytes(),
        avg.to_bits().to_be_bytes(),
        rate.to_bits().to_be_bytes(),
    ]
}

/// perftest's receive depth of a SEND test: `-r` (default 512), at most the iterations.
pub fn send_rx_depth(rx_depth: u32, iters: u64) -> u32 {
    if u64::from(rx_depth) > iters {
        iters as u32
    } else {
        rx_depth
    }
}

/// iWARP SEND credits (`ctx_alloc_credit`): the receiver RDMA-WRITEs its count of receives
/// (a host-order u32, little-endian on x86) into the sender's credit word after each
/// `rx_depth / 3`-th receive of a round of `rx_depth`. True when receive number `rcnt`
/// (1-based) is such a point.
pub fn credit_due(rcnt: u64, rx_depth: u32) -> bool {
    let every = u64::from(rx_depth / 3).max(1);
    let r = rcnt % u64::from(rx_depth.max(1));
    r % every == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dest_is_perftests_56_byte_big_endian_layout() {
        let d = Dest {
            lid: 0,
            out_reads: 1,
            qpn: 2,
            psn: 0x00ab_cdef,
            rkey: 0x1122_3344,
            vaddr: 0x0000_7f00_1234_5678,
            gid: [0x52, 0x54, 0, 0x5a, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            srqn: 0,
            gid_index: 0,
        };
        let b = d.encode();
        assert_eq!(&b[0..8], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&b[12..16], &[0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[16..20], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(&b[20..24], &[0, 0, 0, 0], "padding");
        assert_eq!(&b[24..32], &[0, 0, 0x7f, 0, 0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&b[32..38], &[0x52, 0x54, 0, 0x5a, 0, 1]);
        assert_eq!(Dest::decode(&b), Ok(d));
        let mut garbage = b;
        garbage[20..24].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(Dest::decode(&garbage), Ok(d), "padding is ignored");
        assert_eq!(Dest::decode(&b[..55]), Err(NotADest(55)));
        assert!(Dest::decode(&[0u8; 56]).unwrap().is_zero());
    }

    #[test]
    fn messages_are_told_apart_by_length() {
        assert_eq!(Msg::of_len(16), Some(Msg::Version));
        assert_eq!(Msg::of_len(4), Some(Msg::SysInt));
        assert_eq!(Msg::of_len(2), Some(Msg::Mtu));
        assert_eq!(Msg::of_len(8), Some(Msg::Report));
        assert_eq!(Msg::of_len(56), Some(Msg::Dest));
        assert_eq!(Msg::of_len(3), None);
    }

    #[test]
    fn server_answers_like_perftest() {
        let v = server_answer(&version_msg()).unwrap();
        assert_eq!(&v[..5], b"6.06\0");
        assert_eq!(v.len(), 16);
        assert_eq!(
            server_answer(&4096u32.to_be_bytes()).unwrap(),
            vec![0, 0, 0x10, 0]
        );
        assert_eq!(server_answer(b"3\0").unwrap(), b"3\0".to_vec());
        assert_eq!(
            server_answer(&1.5f64.to_bits().to_be_bytes()).unwrap(),
            vec![0; 8]
        );
        assert_eq!(server_answer(&[0u8; 56]), None);
        assert_eq!(server_answer(&[0u8; 5]), None);
    }

    #[test]
    fn report_fields_are_big_endian() {
        let f = report_fields(65536, 100, 2.0, 1.5, 0.25);
        assert_eq!(f[0], [0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(f[1], [0, 0, 0, 0, 0, 0, 0, 100]);
        assert_eq!(f[2], [0x40, 0, 0, 0, 0, 0, 0, 0], "2.0");
        assert_eq!(f[3], [0x3f, 0xf8, 0, 0, 0, 0, 0, 0], "1.5");
        assert_eq!(f[4], [0x3f, 0xd0, 0, 0, 0, 0, 0, 0], "0.25");
    }

    #[test]
    fn credits_follow_perftests_schedule() {
        assert_eq!(send_rx_depth(512, 100), 100);
        assert_eq!(send_rx_depth(512, 1000), 512);
        // rx_depth 100: credit every 33 receives and at the end of each round of 100.
        let due: Vec<u64> = (1..=200).filter(|&r| credit_due(r, 100)).collect();
        assert_eq!(due, vec![33, 66, 99, 100, 133, 166, 199, 200]);
        // Tiny depths never divide by zero.
        assert!(credit_due(1, 1));
        assert!(credit_due(1, 2));
    }
}
