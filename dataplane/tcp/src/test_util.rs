//! Test helpers shared by the connection tests: a record-based source, a sink, and a
//! scripted peer that builds segments and parses ours.

use iwarp_types::Instant;

use crate::conn::{RxSink, TxSource};
use crate::segment::{FourTuple, TcpFlags, TcpHeader, TcpOptions, TcpSegment};
use crate::seq::SeqNumber;

pub const LOCAL: FourTuple = FourTuple {
    local_ip: [10, 0, 0, 1],
    local_port: 5000,
    remote_ip: [10, 0, 0, 2],
    remote_port: 6000,
};

/// The peer's view of [`LOCAL`].
pub const fn flip(t: FourTuple) -> FourTuple {
    FourTuple {
        local_ip: t.remote_ip,
        local_port: t.remote_port,
        remote_ip: t.local_ip,
        remote_port: t.local_port,
    }
}

/// A stream of records; keeps a log of `fill` calls.
#[derive(Default)]
pub struct RecordSource {
    pub data: Vec<u8>,
    /// Record start offsets (sorted).
    pub starts: Vec<u64>,
    pub fills: Vec<(u64, usize)>,
}

impl RecordSource {
    pub fn push(&mut self, len: usize) {
        let start = self.data.len() as u64;
        self.starts.push(start);
        for i in 0..len {
            let o = start as usize + i;
            self.data
                .push((o as u8) ^ ((o >> 8) as u8).wrapping_mul(31));
        }
    }

    fn record_end(&self, offset: u64) -> u64 {
        let i = self.starts.partition_point(|&s| s <= offset);
        self.starts
            .get(i)
            .copied()
            .unwrap_or(self.data.len() as u64)
    }
}

impl TxSource for RecordSource {
    fn end_offset(&self) -> u64 {
        self.data.len() as u64
    }

    fn seg_len(&self, offset: u64, max: usize) -> usize {
        let end = self.data.len() as u64;
        if offset >= end {
            return 0;
        }
        let mut at = offset;
        loop {
            let next = self.record_end(at);
            if next - offset > max as u64 {
                break;
            }
            at = next;
            if at >= end {
                break;
            }
        }
        if at == offset {
            max.min((end - offset) as usize)
        } else {
            (at - offset) as usize
        }
    }

    fn fill(&mut self, offset: u64, buf: &mut [u8]) {
        self.fills.push((offset, buf.len()));
        let o = offset as usize;
        buf.copy_from_slice(&self.data[o..o + buf.len()]);
    }
}

/// Collects delivered bytes and checks they arrive in order; can refuse after a limit.
#[derive(Default)]
pub struct Collect {
    pub data: Vec<u8>,
    pub limit: Option<usize>,
}

impl RxSink for Collect {
    fn deliver(&mut self, offset: u64, data: &[u8]) -> usize {
        assert_eq!(offset, self.data.len() as u64, "out-of-order delivery");
        let n = match self.limit {
            Some(l) => data.len().min(l.saturating_sub(self.data.len())),
            None => data.len(),
        };
        self.data.extend_from_slice(&data[..n]);
        n
    }
}

/// An owned copy of a parsed segment.
#[derive(Clone, Debug)]
pub struct Seg {
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub flags: TcpFlags,
    pub window: u16,
    pub options: TcpOptions,
    pub payload: Vec<u8>,
}

/// Parses a segment we emitted (as the peer would receive it).
pub fn parse_out(tuple: &FourTuple, bytes: &[u8]) -> Seg {
    let s = TcpSegment::parse(tuple.local_ip, tuple.remote_ip, bytes, true).expect("valid segment");
    Seg {
        seq: s.seq,
        ack: s.ack,
        flags: s.flags,
        window: s.window,
        options: s.options,
        payload: s.payload.to_vec(),
    }
}

/// Builds the bytes of a segment from the peer to us.
pub fn peer_bytes(tuple: &FourTuple, hdr: &TcpHeader, payload: &[u8]) -> Vec<u8> {
    let peer = flip(*tuple);
    let mut buf = vec![0u8; hdr.header_len() + payload.len()];
    let h = hdr.header_len();
    buf[h..].copy_from_slice(payload);
    hdr.emit(&peer, payload.len(), &mut buf, false).unwrap();
    buf
}

/// A time in microseconds.
pub fn us(n: u64) -> Instant {
    Instant(n * 1_000)
}

/// The next number of a xorshift64 sequence (the tests' seeded randomness).
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
