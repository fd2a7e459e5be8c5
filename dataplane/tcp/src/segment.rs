//! TCP segment parsing and emission on top of `smoltcp::wire::TcpPacket` and `TcpOption`.
//!
//! Parsing is checked (untrusted bytes); emission writes into a caller buffer with an
//! unchecked view after the length has been checked once.

use smoltcp::wire::{checksum, IpAddress, IpProtocol, Ipv4Address, TcpOption, TcpPacket};

use crate::seq::SeqNumber;

/// Length of the TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;
/// Largest TCP header (data offset 15 words).
pub const TCP_MAX_HEADER_LEN: usize = 60;
/// Largest number of SACK blocks carried (3 fit next to a timestamp option).
pub const MAX_SACK_BLOCKS: usize = 3;

/// The connection identity, as seen from this host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FourTuple {
    /// Our IPv4 address.
    pub local_ip: [u8; 4],
    /// Our TCP port.
    pub local_port: u16,
    /// The peer's IPv4 address.
    pub remote_ip: [u8; 4],
    /// The peer's TCP port.
    pub remote_port: u16,
}

/// Hashed as its 12 octets in two writes. The derived `Hash` made six (a length prefix
/// for each address, then each field): the engine's demultiplexing map runs a keyed
/// SipHash over the tuple of every received segment, and the six writes were 1.6 % of a
/// core moving 64 KiB WRITEs at MTU 9000. Equal tuples give equal octets, as `Eq` needs.
impl core::hash::Hash for FourTuple {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        let (l, r) = (self.local_ip, self.remote_ip);
        let [lp0, lp1] = self.local_port.to_le_bytes();
        let [rp0, rp1] = self.remote_port.to_le_bytes();
        state.write_u64(u64::from_le_bytes([
            l[0], l[1], l[2], l[3], lp0, lp1, r[0], r[1],
        ]));
        state.write_u32(u32::from_le_bytes([r[2], r[3], rp0, rp1]));
    }
}

/// TCP control bits (RFC 9293 section 3.1, RFC 3168).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// FIN.
    pub fin: bool,
    /// SYN.
    pub syn: bool,
    /// RST.
    pub rst: bool,
    /// PSH.
    pub psh: bool,
    /// ACK.
    pub ack: bool,
    /// URG (never generated; urgent data is not supported and the pointer is ignored).
    pub urg: bool,
}

/// The options this stack understands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (SYN only).
    pub mss: Option<u16>,
    /// Window scale shift (SYN only, RFC 7323).
    pub wscale: Option<u8>,
    /// SACK permitted (SYN only, RFC 2018).
    pub sack_permitted: bool,
    /// SACK blocks, left edge inclusive, right edge exclusive.
    pub sack_blocks: [Option<(SeqNumber, SeqNumber)>; MAX_SACK_BLOCKS],
    /// Timestamps `(TSval, TSecr)` (RFC 7323).
    pub timestamp: Option<(u32, u32)>,
}

/// Offsets of the TCP header's fields (RFC 9293 3.1), for the emitter of the usual
/// segment ([`TcpHeader::emit`]'s timestamp-only path); everything else reads and writes
/// through smoltcp's view, whose offsets are private.
pub(crate) mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high nibble), reserved bits and the flags octet.
    pub const OFFSET_FLAGS: Range<usize> = 12..14;
    pub const WINDOW: Range<usize> = 14..16;
    /// Checksum and urgent pointer.
    pub const CHECKSUM_URGENT: Range<usize> = 16..20;
}

/// True if the TCP header at the start of `segment` has RST set; a segment shorter than
/// the flags octet has not. For counting what this stack sent (the header is ours), not
/// for parsing input.
#[inline]
pub fn has_rst(segment: &[u8]) -> bool {
    segment
        .get(field::OFFSET_FLAGS.end - 1)
        .is_some_and(|f| f & FLAG_RST != 0)
}

/// The RST bit of the flags octet.
const FLAG_RST: u8 = 0x04;

/// The TCP pseudo-header's sum (RFC 9293 3.1) for one pair of addresses with a length
/// of zero, as smoltcp's `pseudo_header_v4` sums it. A connection's segments differ in
/// the length only, which one-complement addition adds to it afterwards
/// ([`PseudoSum::with_len`]): the connection sums its addresses once, not per segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PseudoSum(u16);

impl PseudoSum {
    /// The sum for segments from `tuple.local_ip` to `tuple.remote_ip`.
    pub(crate) fn of(tuple: &FourTuple) -> PseudoSum {
        let src = Ipv4Address::from(tuple.local_ip);
        let dst = Ipv4Address::from(tuple.remote_ip);
        PseudoSum(checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, 0))
    }

    /// The sum for a segment of `len` octets: `pseudo_header_v4` with that length.
    #[inline]
    fn with_len(self, len: usize) -> u16 {
        checksum::combine(&[self.0, len as u16])
    }
}

/// Fills the checksum of the TCP segment `seg` (header written, payload in place) sent
/// over `tuple`, whose pseudo-header sum is `pseudo`: the full one, or with `offload`
/// only the pseudo-header sum a NIC completes it from.
#[inline]
fn fill_checksum(seg: &mut [u8], tuple: &FourTuple, pseudo: PseudoSum, offload: bool) {
    let mut packet = TcpPacket::new_unchecked(seg);
    if offload {
        let len = packet.as_ref().len();
        packet.set_checksum(pseudo.with_len(len));
    } else {
        let src = Ipv4Address::from(tuple.local_ip);
        let dst = Ipv4Address::from(tuple.remote_ip);
        packet.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
    }
}

/// Length of the timestamps-only option block: NOP, NOP, kind 8, length 10, TSval, TSecr.
pub(crate) const TS_ONLY_LEN: usize = 12;
/// Its first four octets.
pub(crate) const TS_ONLY_PREFIX: [u8; 4] = [1, 1, 8, 10];

/// `(TSval, TSecr)` if `opts` is exactly the timestamps-only block (RFC 7323 appendix A
/// layout), the option layout of almost every segment after the handshake.
fn timestamp_only(opts: &[u8]) -> Option<(u32, u32)> {
    let b: &[u8; TS_ONLY_LEN] = opts.try_into().ok()?;
    if b[..4] != TS_ONLY_PREFIX {
        return None;
    }
    let tsval = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let tsecr = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    Some((tsval, tsecr))
}

impl TcpOptions {
    /// The options in `rest` (a header's option bytes), one by one. Malformed options
    /// end the walk (the rest is ignored); SACK blocks past [`MAX_SACK_BLOCKS`] are
    /// dropped.
    fn parse(mut rest: &[u8]) -> TcpOptions {
        let mut options = TcpOptions::default();
        let mut sack_n = 0;
        while !rest.is_empty() {
            let Ok((next, opt)) = TcpOption::parse(rest) else {
                break;
            };
            match opt {
                TcpOption::EndOfList => break,
                TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
                TcpOption::MaxSegmentSize(m) => options.mss = Some(m),
                TcpOption::WindowScale(w) => options.wscale = Some(w),
                TcpOption::SackPermitted => options.sack_permitted = true,
                TcpOption::SackRange(ranges) => {
                    for (l, r) in ranges.iter().flatten() {
                        if sack_n < MAX_SACK_BLOCKS {
                            options.sack_blocks[sack_n] = Some((SeqNumber(*l), SeqNumber(*r)));
                            sack_n += 1;
                        }
                    }
                }
                TcpOption::TimeStamp { tsval, tsecr } => options.timestamp = Some((tsval, tsecr)),
            }
            rest = next;
        }
        options
    }

    /// Only a timestamp option is set.
    fn is_timestamp_only(&self) -> bool {
        self.mss.is_none()
            && self.wscale.is_none()
            && !self.sack_permitted
            && self.sack_blocks.iter().all(Option::is_none)
    }

    /// Bytes these options take on the wire, padded to a multiple of 4.
    #[inline]
    pub fn wire_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.wscale.is_some() {
            n += 4; // NOP + 3
        }
        if self.sack_permitted {
            n += 4; // NOP NOP + 2 (or padded next to a timestamp)
        }
        if self.timestamp.is_some() {
            n += 12; // NOP NOP + 10
        }
        let blocks = self.sack_blocks.iter().flatten().count();
        if blocks > 0 {
            n += 4 + 8 * blocks; // NOP NOP + 2 + 8n
        }
        n
    }

    fn emit(&self, mut buf: &mut [u8]) {
        if let (Some((tsval, tsecr)), true) = (self.timestamp, self.is_timestamp_only()) {
            // The usual data/ACK segment: NOP NOP TS written at once.
            if let Some(b) = buf.get_mut(..TS_ONLY_LEN) {
                b[..4].copy_from_slice(&TS_ONLY_PREFIX);
                b[4..8].copy_from_slice(&tsval.to_be_bytes());
                b[8..].copy_from_slice(&tsecr.to_be_bytes());
                buf = &mut buf[TS_ONLY_LEN..];
                if !buf.is_empty() {
                    TcpOption::EndOfList.emit(buf);
                }
                return;
            }
        }
        if let Some(mss) = self.mss {
            buf = TcpOption::MaxSegmentSize(mss).emit(buf);
        }
        if let Some(ws) = self.wscale {
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::WindowScale(ws).emit(buf);
        }
        if self.sack_permitted {
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::SackPermitted.emit(buf);
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::TimeStamp { tsval, tsecr }.emit(buf);
        }
        if self.sack_blocks.iter().any(Option::is_some) {
            let mut ranges = [None; 3];
            for (dst, src) in ranges.iter_mut().zip(self.sack_blocks.iter().flatten()) {
                *dst = Some((src.0 .0, src.1 .0));
            }
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::NoOperation.emit(buf);
            buf = TcpOption::SackRange(ranges).emit(buf);
        }
        if !buf.is_empty() {
            TcpOption::EndOfList.emit(buf);
        }
    }
}

/// Why a segment was not accepted by [`TcpSegment::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpParseError {
    /// Shorter than the header, or the data offset points past the end or below 20.
    Truncated,
    /// The checksum does not verify.
    Checksum,
}

/// A parsed TCP segment borrowing its payload from the received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    /// The connection the segment belongs to, from the receiver's point of view
    /// (`local` = destination of the segment).
    pub tuple: FourTuple,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (meaningful when `flags.ack`).
    pub ack: SeqNumber,
    /// Control bits.
    pub flags: TcpFlags,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Parsed options. Malformed options end option parsing (the rest is ignored).
    pub options: TcpOptions,
    /// Payload bytes.
    pub payload: &'a [u8],
}

impl<'a> TcpSegment<'a> {
    /// Parses `bytes` (TCP header and payload) received from `src_ip` for `dst_ip`.
    /// With `verify_checksum`, the checksum over the IPv4 pseudo-header is checked.
    pub fn parse(
        src_ip: [u8; 4],
        dst_ip: [u8; 4],
        bytes: &'a [u8],
        verify_checksum: bool,
    ) -> Result<TcpSegment<'a>, TcpParseError> {
        let packet = TcpPacket::new_checked(bytes).map_err(|_| TcpParseError::Truncated)?;
        if verify_checksum {
            let src = IpAddress::Ipv4(Ipv4Address::from(src_ip));
            let dst = IpAddress::Ipv4(Ipv4Address::from(dst_ip));
            if !packet.verify_checksum(&src, &dst) {
                return Err(TcpParseError::Checksum);
            }
        }
        let opts = packet.options();
        if let Some(ts) = timestamp_only(opts) {
            // The usual data/ACK segment: NOP NOP TS and nothing else (same result as
            // `TcpOptions::parse`, without walking option by option). Its own return:
            // the options are stored straight into the result, not built in a local
            // and copied (the copy's wide loads waited on the local's narrow stores).
            let options = TcpOptions {
                timestamp: Some(ts),
                ..TcpOptions::default()
            };
            return Ok(TcpSegment::of(&packet, src_ip, dst_ip, options));
        }
        Ok(TcpSegment::of(
            &packet,
            src_ip,
            dst_ip,
            TcpOptions::parse(opts),
        ))
    }

    /// The segment of a checked `packet` with its parsed `options`.
    #[inline(always)]
    fn of(
        packet: &TcpPacket<&'a [u8]>,
        src_ip: [u8; 4],
        dst_ip: [u8; 4],
        options: TcpOptions,
    ) -> TcpSegment<'a> {
        TcpSegment {
            tuple: FourTuple {
                local_ip: dst_ip,
                local_port: packet.dst_port(),
                remote_ip: src_ip,
                remote_port: packet.src_port(),
            },
            seq: SeqNumber(packet.seq_number().0 as u32),
            ack: SeqNumber(packet.ack_number().0 as u32),
            flags: TcpFlags {
                fin: packet.fin(),
                syn: packet.syn(),
                rst: packet.rst(),
                psh: packet.psh(),
                ack: packet.ack(),
                urg: packet.urg(),
            },
            window: packet.window_len(),
            options,
            payload: packet.payload(),
        }
    }

    /// Sequence space the segment occupies: payload plus one for SYN and one for FIN.
    pub fn seg_len(&self) -> u32 {
        // A frame payload never approaches 4 GiB; saturate rather than wrap regardless.
        let n = u32::try_from(self.payload.len()).unwrap_or(u32::MAX - 2);
        n + u32::from(self.flags.syn) + u32::from(self.flags.fin)
    }
}

/// A segment header to emit (no payload: the payload is written by the caller or by a
/// `TxSource` right after the header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpHeader {
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (sent as zero unless `flags.ack`).
    pub ack: SeqNumber,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field (already scaled down).
    pub window: u16,
    /// Options.
    pub options: TcpOptions,
}

impl TcpHeader {
    /// Header length including options.
    #[inline]
    pub fn header_len(&self) -> usize {
        TCP_HEADER_LEN + self.options.wire_len()
    }

    /// Writes this header into `buf[..header_len()]`, the payload being
    /// `buf[header_len()..header_len() + payload_len]` (already written), then fills the
    /// checksum: the full one, or only the pseudo-header sum when `checksum_offload` (the
    /// NIC completes it). Returns the segment length, or `None` if `buf` is too short.
    pub fn emit(
        &self,
        tuple: &FourTuple,
        payload_len: usize,
        buf: &mut [u8],
        checksum_offload: bool,
    ) -> Option<usize> {
        if let (Some(ts), true) = (self.options.timestamp, self.options.is_timestamp_only()) {
            let h = TsOnlyHeader {
                seq: self.seq,
                ack: self.ack,
                flags: self.flags,
                window: self.window,
                ts,
            };
            return h.emit(
                tuple,
                PseudoSum::of(tuple),
                payload_len,
                buf,
                checksum_offload,
            );
        }
        self.emit_general(tuple, payload_len, buf, checksum_offload)
    }

    /// [`TcpHeader::emit`] for any header, through smoltcp's view.
    fn emit_general(
        &self,
        tuple: &FourTuple,
        payload_len: usize,
        buf: &mut [u8],
        checksum_offload: bool,
    ) -> Option<usize> {
        let hlen = self.header_len();
        let total = hlen.checked_add(payload_len)?;
        if hlen > TCP_MAX_HEADER_LEN || buf.len() < total {
            return None;
        }
        let mut packet = TcpPacket::new_unchecked(&mut buf[..total]);
        packet.set_src_port(tuple.local_port);
        packet.set_dst_port(tuple.remote_port);
        packet.set_seq_number(smoltcp::wire::TcpSeqNumber(self.seq.0 as i32));
        let ack = if self.flags.ack { self.ack.0 } else { 0 };
        packet.set_ack_number(smoltcp::wire::TcpSeqNumber(ack as i32));
        packet.clear_flags();
        packet.set_header_len(hlen as u8);
        packet.set_fin(self.flags.fin);
        packet.set_syn(self.flags.syn);
        packet.set_rst(self.flags.rst);
        packet.set_psh(self.flags.psh);
        packet.set_ack(self.flags.ack);
        packet.set_window_len(self.window);
        packet.set_urgent_at(0);
        self.options.emit(packet.options_mut());
        fill_checksum(
            &mut buf[..total],
            tuple,
            PseudoSum::of(tuple),
            checksum_offload,
        );
        Some(total)
    }
}

/// A header whose one option is the timestamp (any flags): the usual data or ACK
/// segment's. [`TcpHeader::emit`] writes a header with these options through it, and a
/// connection builds one directly for the segments it sends most (no options block to
/// fill in and test field by field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TsOnlyHeader {
    pub(crate) seq: SeqNumber,
    /// Sent as zero unless `flags.ack`.
    pub(crate) ack: SeqNumber,
    pub(crate) flags: TcpFlags,
    /// Window field (already scaled down).
    pub(crate) window: u16,
    /// `(TSval, TSecr)`.
    pub(crate) ts: (u32, u32),
}

impl TsOnlyHeader {
    /// Header length: fixed header and the timestamp block.
    pub(crate) const LEN: usize = TCP_HEADER_LEN + TS_ONLY_LEN;

    /// [`TcpHeader::emit`] for this header: its 32 octets stored field by field in
    /// place. The general path sets the data offset and each flag through a
    /// read-modify-write of smoltcp's view and walks the options: most of the header's
    /// instructions for a header that is the same every segment but for five fields.
    /// Byte-identical to [`TcpHeader::emit_general`] (tested). `pseudo` is
    /// `PseudoSum::of(tuple)`, kept by the caller.
    #[inline]
    pub(crate) fn emit(
        &self,
        tuple: &FourTuple,
        pseudo: PseudoSum,
        payload_len: usize,
        buf: &mut [u8],
        checksum_offload: bool,
    ) -> Option<usize> {
        const HLEN: usize = TsOnlyHeader::LEN;
        let total = HLEN.checked_add(payload_len)?;
        let seg = buf.get_mut(..total)?;
        let f = &self.flags;
        let flags = u8::from(f.fin)
            | u8::from(f.syn) << 1
            | if f.rst { FLAG_RST } else { 0 }
            | u8::from(f.psh) << 3
            | u8::from(f.ack) << 4;
        let ack = if f.ack { self.ack.0 } else { 0 };
        let (tsval, tsecr) = self.ts;
        seg[field::SRC_PORT].copy_from_slice(&tuple.local_port.to_be_bytes());
        seg[field::DST_PORT].copy_from_slice(&tuple.remote_port.to_be_bytes());
        seg[field::SEQ].copy_from_slice(&self.seq.0.to_be_bytes());
        seg[field::ACK].copy_from_slice(&ack.to_be_bytes());
        seg[field::OFFSET_FLAGS].copy_from_slice(&[((HLEN / 4) as u8) << 4, flags]);
        seg[field::WINDOW].copy_from_slice(&self.window.to_be_bytes());
        seg[field::CHECKSUM_URGENT].copy_from_slice(&[0; 4]);
        let opts = &mut seg[TCP_HEADER_LEN..HLEN];
        opts[..4].copy_from_slice(&TS_ONLY_PREFIX);
        opts[4..8].copy_from_slice(&tsval.to_be_bytes());
        opts[8..].copy_from_slice(&tsecr.to_be_bytes());
        fill_checksum(seg, tuple, pseudo, checksum_offload);
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: [u8; 4] = [10, 0, 0, 1];
    const DST: [u8; 4] = [10, 0, 0, 2];

    // SYN from 10.0.0.1:4000 to 10.0.0.2:80, seq 0x01020304, MSS 1460, NOP WS 7,
    // NOP NOP SACK-permitted, NOP NOP TS(0x11223344, 0), window 0xffff.
    static SYN_BYTES: [u8; 44] = [
        0x0f, 0xa0, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x02, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x03, 0x03, 0x07, 0x01, 0x01,
        0x04, 0x02, 0x01, 0x01, 0x08, 0x0a, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00,
    ];

    fn syn_header() -> TcpHeader {
        TcpHeader {
            seq: SeqNumber(0x0102_0304),
            ack: SeqNumber(0),
            flags: TcpFlags {
                syn: true,
                ..Default::default()
            },
            window: 0xffff,
            options: TcpOptions {
                mss: Some(1460),
                wscale: Some(7),
                sack_permitted: true,
                timestamp: Some((0x1122_3344, 0)),
                ..Default::default()
            },
        }
    }

    fn tuple() -> FourTuple {
        FourTuple {
            local_ip: SRC,
            local_port: 4000,
            remote_ip: DST,
            remote_port: 80,
        }
    }

    #[test]
    fn timestamps_only_fast_path_matches_the_general_path() {
        // ACK 10.0.0.1:4000 -> 10.0.0.2:80 with NOP NOP TS(0x01020304, 0xa0b0c0d0).
        let mut bytes = [0u8; 32 + 3];
        let h = TcpHeader {
            seq: SeqNumber(7),
            ack: SeqNumber(9),
            flags: TcpFlags {
                ack: true,
                ..Default::default()
            },
            window: 1000,
            options: TcpOptions {
                timestamp: Some((0x0102_0304, 0xa0b0_c0d0)),
                ..Default::default()
            },
        };
        assert_eq!(h.emit(&tuple(), 3, &mut bytes, false), Some(35));
        assert_eq!(
            &bytes[20..32],
            &[1, 1, 8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0]
        );
        assert_eq!(bytes[12] >> 4, 8, "data offset 32 bytes");
        let seg = TcpSegment::parse(SRC, DST, &bytes, true).unwrap();
        assert_eq!(seg.options, h.options);
        assert_eq!(seg.payload.len(), 3);
        // Same 12 octets in another order, or a TS option of another length: not the
        // fast path, and still parsed the general way (or not at all).
        assert_eq!(
            timestamp_only(&bytes[20..32]),
            Some((0x0102_0304, 0xa0b0_c0d0))
        );
        assert_eq!(timestamp_only(&[8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1]), None);
        assert_eq!(timestamp_only(&[1, 1, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8]), None);
        assert_eq!(timestamp_only(&[1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7]), None);
        let mut other = bytes;
        other[20..32].copy_from_slice(&[8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0, 1, 1]);
        let mut tcp = TcpPacket::new_unchecked(&mut other[..]);
        tcp.fill_checksum(
            &IpAddress::Ipv4(Ipv4Address::from(SRC)),
            &IpAddress::Ipv4(Ipv4Address::from(DST)),
        );
        let seg = TcpSegment::parse(SRC, DST, &other, true).unwrap();
        assert_eq!(seg.options.timestamp, Some((0x0102_0304, 0xa0b0_c0d0)));
        // With SACK blocks too: the general path, both ways.
        let sack = TcpHeader {
            options: TcpOptions {
                timestamp: Some((5, 6)),
                sack_blocks: [Some((SeqNumber(10), SeqNumber(20))), None, None],
                ..Default::default()
            },
            ..h
        };
        let mut b2 = [0u8; 44];
        assert_eq!(sack.emit(&tuple(), 0, &mut b2, false), Some(44));
        let seg = TcpSegment::parse(SRC, DST, &b2, true).unwrap();
        assert_eq!(seg.options, sack.options);
    }

    /// A connection's kept pseudo-header sum plus a segment's length is smoltcp's sum
    /// for that length: random addresses, every length class (zero, small, MTU-sized,
    /// the 16-bit edge), and addresses whose sum folds to 0xffff.
    #[test]
    fn kept_pseudo_sum_with_a_length_is_the_pseudo_header_sum() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || crate::test_util::xorshift(&mut x);
        let mut tuples: Vec<[[u8; 4]; 2]> = vec![
            [[0, 0, 0, 0], [0, 0, 0, 0]],
            [[0xff, 0xff, 0xff, 0xff], [0xff, 0xff, 0xff, 0xf9]],
            [[0xff, 0xff, 0, 0], [0, 0, 0xff, 0xf9]],
        ];
        for _ in 0..2_000 {
            tuples.push([(next() as u32).to_be_bytes(), (next() as u32).to_be_bytes()]);
        }
        for [a, b] in tuples {
            let t = FourTuple {
                local_ip: a,
                local_port: 1,
                remote_ip: b,
                remote_port: 2,
            };
            let kept = PseudoSum::of(&t);
            let r = next() as usize;
            for len in [0, 1, 6, 20, 32, r % 65_536, 1_480, 8_980, 65_535] {
                let want = checksum::pseudo_header_v4(
                    &Ipv4Address::from(a),
                    &Ipv4Address::from(b),
                    IpProtocol::Tcp,
                    len as u32,
                );
                assert_eq!(kept.with_len(len), want, "{a:?} {b:?} {len}");
            }
        }
    }

    /// The timestamp-only emitter writes what the general one writes, for any fields,
    /// flags, lengths, addresses and either checksum mode.
    #[test]
    fn timestamp_only_emit_is_the_general_emit() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || crate::test_util::xorshift(&mut x);
        for i in 0..4_000 {
            let r = next();
            let tuple = FourTuple {
                local_ip: (next() as u32).to_be_bytes(),
                local_port: r as u16,
                remote_ip: (next() as u32).to_be_bytes(),
                remote_port: (r >> 16) as u16,
            };
            let flags = TcpFlags {
                fin: r >> 32 & 1 != 0,
                syn: r >> 33 & 1 != 0,
                rst: r >> 34 & 1 != 0,
                psh: r >> 35 & 1 != 0,
                ack: r >> 36 & 1 != 0,
                // Never sent (both emitters leave URG clear).
                urg: r >> 37 & 1 != 0,
            };
            let h = TcpHeader {
                seq: SeqNumber(next() as u32),
                ack: SeqNumber(next() as u32),
                flags,
                window: (r >> 40) as u16,
                options: TcpOptions {
                    timestamp: Some((next() as u32, next() as u32)),
                    ..Default::default()
                },
            };
            let payload_len = (next() % 1500) as usize;
            let offload = i % 2 == 0;
            let mut fast = vec![0x5au8; 32 + payload_len + 7];
            let mut general = fast.clone();
            for (k, b) in fast[32..32 + payload_len].iter_mut().enumerate() {
                *b = (k as u8).wrapping_mul(31);
            }
            general.copy_from_slice(&fast);
            let a = h.emit(&tuple, payload_len, &mut fast, offload);
            let b = h.emit_general(&tuple, payload_len, &mut general, offload);
            assert_eq!(a, b);
            assert_eq!(fast, general, "case {i}");
            // Too short a buffer: refused by both.
            let mut short = vec![0u8; 31 + payload_len];
            assert_eq!(h.emit(&tuple, payload_len, &mut short, offload), None);
        }
    }

    #[test]
    fn has_rst_reads_the_flag_of_an_emitted_header() {
        for rst in [false, true] {
            for ts in [None, Some((1, 2))] {
                let h = TcpHeader {
                    flags: TcpFlags {
                        rst,
                        ack: true,
                        ..Default::default()
                    },
                    options: TcpOptions {
                        timestamp: ts,
                        ..Default::default()
                    },
                    ..syn_header()
                };
                let mut buf = [0u8; 64];
                let n = h.emit(&tuple(), 0, &mut buf, true).unwrap();
                assert_eq!(has_rst(&buf[..n]), rst);
                assert_eq!(
                    TcpSegment::parse(SRC, DST, &buf[..n], false)
                        .unwrap()
                        .flags
                        .rst,
                    rst
                );
            }
        }
        assert!(!has_rst(&[0xff; 13]), "shorter than the flags octet");
        assert!(has_rst(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x04]));
    }

    #[test]
    fn emit_matches_bytes_and_parse_round_trips() {
        let mut buf = [0xa5u8; 64];
        let n = syn_header().emit(&tuple(), 0, &mut buf, false).unwrap();
        assert_eq!(n, 44);
        let mut expect = SYN_BYTES;
        // Checksum bytes are computed; compare everything else then verify by parsing.
        expect[16] = buf[16];
        expect[17] = buf[17];
        assert_eq!(&buf[..44], &expect[..]);
        let seg = TcpSegment::parse(SRC, DST, &buf[..n], true).unwrap();
        assert!(seg.flags.syn && !seg.flags.ack);
        assert_eq!(seg.seq, SeqNumber(0x0102_0304));
        assert_eq!(seg.options.mss, Some(1460));
        assert_eq!(seg.options.wscale, Some(7));
        assert!(seg.options.sack_permitted);
        assert_eq!(seg.options.timestamp, Some((0x1122_3344, 0)));
        assert_eq!(seg.seg_len(), 1);
        assert_eq!(seg.tuple.local_port, 80);
        assert_eq!(seg.tuple.remote_port, 4000);
        assert_eq!(seg.tuple.remote_ip, SRC);
    }

    #[test]
    fn checksum_failure_and_truncation_are_errors() {
        let mut buf = [0u8; 64];
        let n = syn_header().emit(&tuple(), 0, &mut buf, false).unwrap();
        buf[5] ^= 1;
        assert_eq!(
            TcpSegment::parse(SRC, DST, &buf[..n], true),
            Err(TcpParseError::Checksum)
        );
        assert!(TcpSegment::parse(SRC, DST, &buf[..n], false).is_ok());
        assert_eq!(
            TcpSegment::parse(SRC, DST, &SYN_BYTES[..19], false),
            Err(TcpParseError::Truncated)
        );
        // Data offset 11 words but only 44 bytes.
        let mut bad = SYN_BYTES;
        bad[12] = 0xb0 + 0x10;
        assert_eq!(
            TcpSegment::parse(SRC, DST, &bad, false),
            Err(TcpParseError::Truncated)
        );
        // Data offset 4 words (< 20 bytes).
        bad[12] = 0x40;
        assert_eq!(
            TcpSegment::parse(SRC, DST, &bad, false),
            Err(TcpParseError::Truncated)
        );
    }

    #[test]
    fn malformed_options_stop_parsing_without_error() {
        // ACK segment with options: MSS with length 0 (malformed), then a timestamp.
        let mut b = [0u8; 36];
        b[12] = 0x90; // 36 bytes header
        b[13] = 0x10;
        b[20..24].copy_from_slice(&[0x02, 0x00, 0x05, 0xb4]);
        b[24..36].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        let seg = TcpSegment::parse(SRC, DST, &b, false).unwrap();
        assert_eq!(seg.options.mss, None);
        assert_eq!(seg.options.timestamp, None);
        assert!(seg.payload.is_empty());
    }

    #[test]
    fn sack_blocks_and_payload_round_trip() {
        let mut hdr = syn_header();
        hdr.flags = TcpFlags {
            ack: true,
            psh: true,
            ..Default::default()
        };
        hdr.options = TcpOptions {
            timestamp: Some((5, 6)),
            sack_blocks: [
                Some((SeqNumber(100), SeqNumber(200))),
                Some((SeqNumber(300), SeqNumber(400))),
                None,
            ],
            ..Default::default()
        };
        hdr.ack = SeqNumber(77);
        let mut buf = [0u8; 128];
        let hlen = hdr.header_len();
        assert_eq!(hlen, 20 + 12 + 20);
        buf[hlen..hlen + 3].copy_from_slice(b"abc");
        let n = hdr.emit(&tuple(), 3, &mut buf, false).unwrap();
        let seg = TcpSegment::parse(SRC, DST, &buf[..n], true).unwrap();
        assert_eq!(seg.payload, b"abc");
        assert_eq!(seg.ack, SeqNumber(77));
        assert_eq!(seg.options.sack_blocks, hdr.options.sack_blocks);
        assert_eq!(seg.options.timestamp, Some((5, 6)));
        assert_eq!(seg.seg_len(), 3);
    }

    #[test]
    fn offload_writes_pseudo_header_sum_and_short_buffer_is_refused() {
        let mut buf = [0u8; 64];
        let n = syn_header().emit(&tuple(), 0, &mut buf, true).unwrap();
        let src = Ipv4Address::from(SRC);
        let dst = Ipv4Address::from(DST);
        let sum = checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, n as u32);
        assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), sum);
        let mut small = [0u8; 40];
        assert_eq!(syn_header().emit(&tuple(), 0, &mut small, false), None);
    }
}
