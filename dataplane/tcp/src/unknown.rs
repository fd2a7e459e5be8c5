//! Answers to segments that match no connection (RFC 9293 section 3.10.7.1).

use crate::segment::{FourTuple, TcpFlags, TcpHeader, TcpOptions, TcpSegment};
use crate::seq::SeqNumber;

/// A reset to send in reply to a segment for no connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResetReply {
    /// The tuple to send on (ours = the segment's destination).
    pub tuple: FourTuple,
    /// Sequence number of the RST.
    pub seq: SeqNumber,
    /// Acknowledgment number, when the RST carries ACK.
    pub ack: Option<SeqNumber>,
}

impl ResetReply {
    /// Writes the RST (20-byte TCP header) into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8], checksum_offload: bool) -> Option<usize> {
        let hdr = TcpHeader {
            seq: self.seq,
            ack: self.ack.unwrap_or(SeqNumber(0)),
            flags: TcpFlags {
                rst: true,
                ack: self.ack.is_some(),
                ..Default::default()
            },
            window: 0,
            options: TcpOptions::default(),
        };
        hdr.emit(&self.tuple, 0, buf, checksum_offload)
    }
}

/// The RST answering `seg` when no connection (and no listener) matches it: none for a
/// RST; `seq = SEG.ACK` if ACK is set; else `seq = 0, ack = SEG.SEQ + SEG.LEN` with ACK.
pub fn reply_to_unknown(seg: &TcpSegment<'_>) -> Option<ResetReply> {
    if seg.flags.rst {
        return None;
    }
    if seg.flags.ack {
        Some(ResetReply {
            tuple: seg.tuple,
            seq: seg.ack,
            ack: None,
        })
    } else {
        Some(ResetReply {
            tuple: seg.tuple,
            seq: SeqNumber(0),
            ack: Some(seg.seq + seg.seg_len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 4] = [192, 0, 2, 1];
    const B: [u8; 4] = [192, 0, 2, 2];

    fn seg_bytes(flags: TcpFlags, seq: u32, ack: u32, payload: &[u8], buf: &mut [u8]) -> usize {
        let t = FourTuple {
            local_ip: A,
            local_port: 1000,
            remote_ip: B,
            remote_port: 2000,
        };
        let hdr = TcpHeader {
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags,
            window: 100,
            options: TcpOptions::default(),
        };
        buf[20..20 + payload.len()].copy_from_slice(payload);
        hdr.emit(&t, payload.len(), buf, false).unwrap()
    }

    #[test]
    fn syn_gets_rst_ack_covering_it() {
        let mut b = [0u8; 64];
        let n = seg_bytes(
            TcpFlags {
                syn: true,
                ..Default::default()
            },
            500,
            0,
            &[],
            &mut b,
        );
        let seg = TcpSegment::parse(A, B, &b[..n], true).unwrap();
        let r = reply_to_unknown(&seg).unwrap();
        assert_eq!(r.seq, SeqNumber(0));
        assert_eq!(r.ack, Some(SeqNumber(501)));
        let mut out = [0u8; 20];
        let m = r.emit(&mut out, false).unwrap();
        let rst = TcpSegment::parse(B, A, &out[..m], true).unwrap();
        assert!(rst.flags.rst && rst.flags.ack);
        assert_eq!(rst.ack, SeqNumber(501));
        assert_eq!(rst.tuple.local_port, 1000);
        assert_eq!(rst.tuple.remote_port, 2000);
    }

    #[test]
    fn ack_gets_rst_with_its_ack_and_rst_gets_nothing() {
        let mut b = [0u8; 64];
        let n = seg_bytes(
            TcpFlags {
                ack: true,
                fin: true,
                ..Default::default()
            },
            7,
            9_999,
            b"xy",
            &mut b,
        );
        let seg = TcpSegment::parse(A, B, &b[..n], true).unwrap();
        let r = reply_to_unknown(&seg).unwrap();
        assert_eq!((r.seq, r.ack), (SeqNumber(9_999), None));
        let n = seg_bytes(
            TcpFlags {
                rst: true,
                ..Default::default()
            },
            7,
            0,
            &[],
            &mut b,
        );
        let seg = TcpSegment::parse(A, B, &b[..n], true).unwrap();
        assert_eq!(reply_to_unknown(&seg), None);
    }
}
