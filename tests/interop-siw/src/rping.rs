//! rping's application protocol (rdma-core `librdmacm/examples/rping.c`), as facts:
//!
//! * Each SEND carries `struct rping_rdma_info { uint64_t buf; uint32_t rkey; uint32_t size; }`
//!   in network byte order: 16 bytes, the address (tagged offset), STag and length of a buffer.
//! * One ping, client → server: SEND(info of the client's source buffer) → the server RDMA
//!   READs `size` bytes of it → SEND("go", the server's 16-byte send buffer, contents
//!   unspecified) → client SEND(info of its sink buffer) → the server RDMA WRITEs
//!   `strlen + 1` bytes of what it read into the sink → SEND("go").
//! * The client's source holds `"rdma-ping-<n>: "` and then ASCII `A`..`z` (65..=122)
//!   cycling from a start character that advances by one per ping, NUL-terminated at
//!   `size - 1`. With `-V` the client compares source and sink; with `-v` it prints
//!   `ping data: <sink>` (the server prints `server ping data: <what it read>`).
//! * Connection: rdma_cm over TCP port space, no private data, responder resources and
//!   initiator depth 1; the client disconnects after `count` pings.

/// Bytes of an encoded [`RdmaInfo`].
pub const INFO_LEN: usize = 16;
/// rping's default TCP port.
pub const DEFAULT_PORT: u16 = 7174;
/// rping's smallest and largest message size (`RPING_MIN_BUFSIZE`, `RPING_BUFSIZE - 1`).
pub const MIN_SIZE: u32 = 16;
/// See [`MIN_SIZE`].
pub const MAX_SIZE: u32 = 64 * 1024 - 1;
/// iw-rping's own largest size, for runs where both ends are iw-rping (scripts/soak.sh
/// moves up to 1 MiB per READ and WRITE); rping refuses sizes above [`MAX_SIZE`].
pub const MAX_SIZE_IW: u32 = 1 << 20;
/// rping's default message size.
pub const DEFAULT_SIZE: u32 = 64;

/// `struct rping_rdma_info`: a buffer the peer may read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaInfo {
    /// Address (tagged offset) of the buffer.
    pub buf: u64,
    /// Its STag.
    pub rkey: u32,
    /// Its length in bytes.
    pub size: u32,
}

/// Why a received message is not an [`RdmaInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortInfo(pub usize);

impl core::fmt::Display for ShortInfo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "rping info of {} bytes, expected {INFO_LEN}", self.0)
    }
}

impl RdmaInfo {
    /// Network byte order, rping's layout.
    pub fn encode(&self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[0..8].copy_from_slice(&self.buf.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Checked parse of a received SEND (longer input: the first 16 bytes count).
    pub fn decode(b: &[u8]) -> Result<RdmaInfo, ShortInfo> {
        if b.len() < INFO_LEN {
            return Err(ShortInfo(b.len()));
        }
        let mut buf = [0u8; 8];
        buf.copy_from_slice(&b[0..8]);
        Ok(RdmaInfo {
            buf: u64::from_be_bytes(buf),
            rkey: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            size: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        })
    }
}

/// The start character of ping `n` (65 for ping 0, advancing and wrapping after 122).
pub fn start_char(n: u64) -> u8 {
    65 + (n % 58) as u8
}

/// Fills `buf` with the client's source of ping `n` (whole buffer, NUL at the end).
pub fn fill_ping(buf: &mut [u8], n: u64) {
    if buf.is_empty() {
        return;
    }
    let head = format!("rdma-ping-{n}: ");
    let h = head.len().min(buf.len());
    buf[..h].copy_from_slice(&head.as_bytes()[..h]);
    let mut c = start_char(n);
    for b in buf[h..].iter_mut() {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    let last = buf.len() - 1;
    buf[last] = 0;
}

/// `strlen(buf) + 1`, bounded by the buffer (what rping's server WRITEs back).
pub fn c_len_with_nul(buf: &[u8]) -> usize {
    buf.iter()
        .position(|&b| b == 0)
        .map_or(buf.len(), |p| p + 1)
}

/// The printable part of a buffer (up to the first NUL), for `ping data: ...`.
pub fn c_str(buf: &[u8]) -> String {
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_is_rpings_network_order_layout() {
        let i = RdmaInfo {
            buf: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            size: 64,
        };
        let b = i.encode();
        assert_eq!(
            b,
            [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64]
        );
        assert_eq!(RdmaInfo::decode(&b), Ok(i));
        assert_eq!(RdmaInfo::decode(&b[..15]), Err(ShortInfo(15)));
        let mut long = b.to_vec();
        long.extend_from_slice(&[9, 9]);
        assert_eq!(RdmaInfo::decode(&long), Ok(i));
    }

    #[test]
    fn ping_text_matches_rping() {
        // As printed by rping -v on siw (siw-vm): ping 0 starts at 'A', ping 1 at 'B'.
        let mut b = vec![0xffu8; 64];
        fill_ping(&mut b, 0);
        let s = c_str(&b);
        assert!(s.starts_with("rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmno"));
        assert_eq!(s.len(), 63);
        assert_eq!(c_len_with_nul(&b), 64);
        fill_ping(&mut b, 1);
        assert!(c_str(&b).starts_with("rdma-ping-1: BCD"));
    }

    #[test]
    fn ping_text_wraps_after_z() {
        let mut b = vec![0u8; 200];
        fill_ping(&mut b, 57);
        let s = c_str(&b);
        let body = &s["rdma-ping-57: ".len()..];
        assert!(body.starts_with("zAB"), "{body}");
        assert_eq!(start_char(58), b'A');
    }

    #[test]
    fn tiny_buffers_do_not_panic() {
        let mut b = [0u8; 4];
        fill_ping(&mut b, 3);
        assert_eq!(&b, b"rdm\0");
        fill_ping(&mut [], 0);
        assert_eq!(c_len_with_nul(&[]), 0);
    }
}
