//! Reading the captures: frames, TCP segments, MPA records, reassembled streams.

use iwarp_wire::l2l4::{ChecksumCapabilities, IpProtocol, Ipv4Frame};
use iwarp_wire::mpa::Fpdu;
use iwarp_wire::pcap::PcapReader;
use iwarp_wire::rdmap::Segment;

/// A TCP segment of a capture: addresses, TCP bytes, and where its payload starts.
#[derive(Clone, Debug)]
pub struct CapturedSegment {
    /// IPv4 source.
    pub src: [u8; 4],
    /// IPv4 destination.
    pub dst: [u8; 4],
    /// TCP header and payload.
    pub tcp: Vec<u8>,
    /// Offset of the payload in `tcp`.
    pub payload_at: usize,
}

impl CapturedSegment {
    /// The TCP payload.
    pub fn payload(&self) -> &[u8] {
        self.tcp.get(self.payload_at..).unwrap_or(&[])
    }
}

/// The Ethernet frames of a pcap file (records after a bad one are dropped).
pub fn frames(pcap: &[u8]) -> Vec<Vec<u8>> {
    let Ok(reader) = PcapReader::new(pcap) else {
        return Vec::new();
    };
    reader
        .map_while(Result::ok)
        .map(|r| r.data.to_vec())
        .collect()
}

/// The TCP segments of a list of frames.
pub fn tcp_segments(frames: &[Vec<u8>]) -> Vec<CapturedSegment> {
    let caps = ChecksumCapabilities::ignored();
    frames
        .iter()
        .filter_map(|f| {
            let ip = Ipv4Frame::parse(f, &caps).ok()?;
            if ip.ip.next_header != IpProtocol::Tcp || ip.payload.len() < 20 {
                return None;
            }
            let hlen = usize::from(ip.payload[12] >> 4) * 4;
            Some(CapturedSegment {
                src: ip.ip.src_addr.octets(),
                dst: ip.ip.dst_addr.octets(),
                tcp: ip.payload.to_vec(),
                payload_at: hlen.min(ip.payload.len()),
            })
        })
        .collect()
}

/// The MPA Request/Reply frames and the whole FPDUs that start TCP payloads (an FPDU may
/// be followed by more in the same payload; all whole ones are returned).
pub fn mpa_records(segments: &[CapturedSegment]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut frames = Vec::new();
    let mut fpdus = Vec::new();
    for s in segments {
        let mut p = s.payload();
        if p.starts_with(b"MPA ID ") {
            frames.push(p.to_vec());
            continue;
        }
        while let Ok(f) = Fpdu::new_checked(p) {
            let n = f.total_len();
            // Only what looks like a DDP segment: a capture's FPDU boundary.
            if Segment::parse(f.ulpdu()).is_err() {
                break;
            }
            fpdus.push(p[..n].to_vec());
            p = &p[n..];
        }
    }
    (frames, fpdus)
}

/// The two byte streams of one TCP connection of a capture: what the initiator (the SYN
/// sender) sent and what the responder sent, each from stream offset 0, cut at `max`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnStreams {
    /// Initiator → responder octets.
    pub initiator: Vec<u8>,
    /// Responder → initiator octets.
    pub responder: Vec<u8>,
}

/// Reassembles the connections of a capture (in order of their SYN), each direction cut at
/// `max` octets. Retransmitted octets are written over themselves.
pub fn conn_streams(segments: &[CapturedSegment], max: usize) -> Vec<ConnStreams> {
    struct Dir {
        src: ([u8; 4], u16),
        dst: ([u8; 4], u16),
        isn: u32,
    }
    let port = |t: &[u8], at: usize| u16::from_be_bytes([t[at], t[at + 1]]);
    let seq = |t: &[u8]| u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
    let mut dirs: Vec<(usize, bool, Dir)> = Vec::new();
    let mut out: Vec<ConnStreams> = Vec::new();
    for s in segments {
        let t = &s.tcp;
        let (src, dst) = ((s.src, port(t, 0)), (s.dst, port(t, 2)));
        let flags = t[13];
        if flags & 0x02 != 0 {
            // SYN (initiator) or SYN-ACK (responder): the direction's ISN.
            let initiator = flags & 0x10 == 0;
            let conn = if initiator {
                out.push(ConnStreams::default());
                out.len() - 1
            } else {
                match dirs.iter().rev().find(|d| d.2.src == dst && d.2.dst == src) {
                    Some(d) => d.0,
                    None => continue,
                }
            };
            dirs.retain(|d| !(d.2.src == src && d.2.dst == dst));
            dirs.push((
                conn,
                initiator,
                Dir {
                    src,
                    dst,
                    isn: seq(t),
                },
            ));
            continue;
        }
        let Some((conn, initiator, d)) = dirs.iter().find(|d| d.2.src == src && d.2.dst == dst)
        else {
            continue;
        };
        let p = s.payload();
        let off = seq(t).wrapping_sub(d.isn).wrapping_sub(1) as usize;
        if p.is_empty() || off >= max {
            continue;
        }
        let stream = if *initiator {
            &mut out[*conn].initiator
        } else {
            &mut out[*conn].responder
        };
        let end = (off + p.len()).min(max);
        if stream.len() < end {
            stream.resize(end, 0);
        }
        stream[off..end].copy_from_slice(&p[..end - off]);
    }
    out
}
