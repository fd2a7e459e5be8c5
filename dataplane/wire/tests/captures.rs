//! Walks the real siw captures of `shared/captures/` with this crate's views: pcap reader,
//! Ethernet/IPv4/TCP (checksums verified), TCP stream reassembly per direction, MPA
//! Request/Reply, then every FPDU (ULPDU length, pad, CRC), DDP and RDMAP. The expected
//! numbers are the ones the capture notes (`*.txt`, from tshark) give.
//!
//! If the captures folder is missing the test prints a line and passes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use iwarp_wire::crc::{crc32c, mpa_crc_from_wire, MPA_CRC_LEN, NO_CRC};
use iwarp_wire::ddp::Model;
use iwarp_wire::l2l4::{
    ChecksumCapabilities, IpAddress, IpProtocol, Ipv4Address, Ipv4Frame, TcpPacket,
};
use iwarp_wire::mpa::{Fpdu, Frame, FrameKind, FrameRepr};
use iwarp_wire::pcap::PcapReader;
use iwarp_wire::rdmap::{Body, Opcode, Segment};

const G1: Ipv4Address = Ipv4Address::new(198, 18, 0, 11);
const G2: Ipv4Address = Ipv4Address::new(198, 18, 0, 12);

fn captures_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    dir.is_dir().then_some(dir)
}

type Tuple = (Ipv4Address, u16, Ipv4Address, u16);

/// One direction of a TCP connection, reassembled.
#[derive(Default)]
struct Direction {
    isn: Option<u32>,
    stream: Vec<u8>,
    /// Out-of-order data by stream offset (the captures have none, but be correct).
    pending: BTreeMap<u64, Vec<u8>>,
    /// Stream ranges `[start, end)` of each segment that brought new bytes, with its frame.
    segments: Vec<(u64, u64, usize)>,
    retransmitted_bytes: u64,
    first_frame: usize,
}

impl Direction {
    fn add(&mut self, seq: u32, data: &[u8], frame: usize) {
        let Some(isn) = self.isn else { return };
        let off = u64::from(seq.wrapping_sub(isn.wrapping_add(1)));
        if data.is_empty() {
            return;
        }
        self.pending.insert(off, data.to_vec());
        while let Some((&o, _)) = self.pending.first_key_value() {
            let len = self.stream.len() as u64;
            if o > len {
                break;
            }
            let d = self.pending.pop_first().unwrap().1;
            let skip = (len - o) as usize;
            self.retransmitted_bytes += skip.min(d.len()) as u64;
            if skip < d.len() {
                self.segments.push((len, o + d.len() as u64, frame));
                self.stream.extend_from_slice(&d[skip..]);
            }
        }
    }
}

/// The MPA Request/Reply fields we check, from `iwarp_wire::mpa` views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MpaRr {
    kind: FrameKind,
    markers: bool,
    crc: bool,
    reject: bool,
    /// siw's enhanced set-up flag (0x10).
    enhanced: bool,
    rev: u8,
    ird: u16,
    ord: u16,
    len: usize,
}

fn parse_mpa_rr(stream: &[u8]) -> MpaRr {
    let frame = Frame::new_checked(stream).expect("stream starts with an MPA Request/Reply");
    let repr = FrameRepr::parse(&frame).expect("valid MPA Request/Reply");
    assert_eq!(
        frame.pd_len(),
        4,
        "siw rev 2: 4 bytes of private data (IRD/ORD)"
    );
    let e = repr.enhanced.expect("RFC 6581 enhanced data");
    assert!(repr.private_data.is_empty());
    MpaRr {
        kind: repr.kind,
        markers: repr.markers,
        crc: repr.crc,
        reject: repr.reject,
        enhanced: frame.enhanced(),
        rev: repr.revision,
        ird: e.ird,
        ord: e.ord,
        len: frame.total_len(),
    }
}

/// Everything counted over one file.
#[derive(Default, Debug)]
struct Tally {
    frames: usize,
    syn: usize,
    synack: usize,
    fin: usize,
    rst: usize,
    connections: usize,
    mpa_requests: usize,
    mpa_replies: usize,
    /// (IRD, ORD) of every MPA Request and Reply.
    ird_ord: Vec<(u16, u16)>,
    crc_negotiated: Vec<bool>,
    fpdus: usize,
    crc_good: usize,
    crc_zero: usize,
    max_ulpdu: usize,
    max_untagged_payload: usize,
    max_tagged_payload: usize,
    /// FPDUs whose bytes came in more than one TCP segment, and the most segments one took.
    split_fpdus: usize,
    max_segments_per_fpdu: usize,
    /// TCP segments in which two or more FPDUs end.
    multi_fpdu_segments: usize,
    /// (opcode, sender) → (DDP segments, messages = segments with L).
    by_opcode: BTreeMap<(u8, Ipv4Address), (usize, usize)>,
    retransmitted_bytes: u64,
    /// FPDUs whose pad octets are not all zero.
    nonzero_pads: usize,
}

fn walk(file: &std::path::Path) -> Tally {
    let bytes = std::fs::read(file).unwrap();
    let caps = ChecksumCapabilities::default();
    let mut t = Tally::default();
    let mut dirs: HashMap<Tuple, Direction> = HashMap::new();
    let mut order: Vec<Tuple> = Vec::new();
    for (i, rec) in PcapReader::new(&bytes).unwrap().enumerate() {
        let rec = rec.unwrap();
        t.frames += 1;
        let f = Ipv4Frame::parse(rec.data, &caps).expect("Ethernet/IPv4 with a good checksum");
        assert_eq!(f.ip.next_header, IpProtocol::Tcp);
        let tcp = TcpPacket::new_checked(f.payload).unwrap();
        let (src, dst) = (
            IpAddress::Ipv4(f.ip.src_addr),
            IpAddress::Ipv4(f.ip.dst_addr),
        );
        assert!(
            tcp.verify_checksum(&src, &dst),
            "TCP checksum, frame {}",
            i + 1
        );
        let tuple = (f.ip.src_addr, tcp.src_port(), f.ip.dst_addr, tcp.dst_port());
        let dir = dirs.entry(tuple).or_insert_with(|| {
            order.push(tuple);
            Direction {
                first_frame: i + 1,
                ..Direction::default()
            }
        });
        let seq = tcp.seq_number().0 as u32;
        if tcp.syn() {
            if tcp.ack() {
                t.synack += 1;
            } else {
                t.syn += 1;
            }
            dir.isn = Some(seq);
        }
        t.fin += usize::from(tcp.fin());
        t.rst += usize::from(tcp.rst());
        dir.add(seq, tcp.payload(), i + 1);
    }

    // Pair the directions into connections: the initiator is the SYN sender (g2).
    for tuple in &order {
        let (sa, sp, da, dp) = *tuple;
        if sa != G2 {
            continue;
        }
        let rev = (da, dp, sa, sp);
        let (Some(req_dir), Some(rep_dir)) = (dirs.get(tuple), dirs.get(&rev)) else {
            panic!("one-way connection {tuple:?}");
        };
        t.connections += 1;
        let req = parse_mpa_rr(&req_dir.stream);
        let rep = parse_mpa_rr(&rep_dir.stream);
        assert_eq!((req.kind, rep.kind), (FrameKind::Request, FrameKind::Reply));
        assert!(!req.reject && !rep.reject && !req.markers && !rep.markers);
        assert_eq!((req.rev, rep.rev), (2, 2));
        assert!(req.enhanced && rep.enhanced, "siw's enhanced set-up flag");
        t.mpa_requests += 1;
        t.mpa_replies += 1;
        t.ird_ord.push((req.ird, req.ord));
        t.ird_ord.push((rep.ird, rep.ord));
        // CRC is used when the Reply says so (it answers the Request's wish).
        let crc = rep.crc;
        assert_eq!(req.crc, rep.crc);
        t.crc_negotiated.push(crc);
        for (dir, rr, sender) in [(req_dir, req, sa), (rep_dir, rep, da)] {
            walk_fpdus(&mut t, dir, rr.len as u64, crc, sender);
        }
    }
    t.retransmitted_bytes = dirs.values().map(|d| d.retransmitted_bytes).sum();
    // Every direction seen had its SYN.
    assert!(dirs.values().all(|d| d.isn.is_some() && d.first_frame > 0));
    t
}

fn walk_fpdus(t: &mut Tally, dir: &Direction, start: u64, crc: bool, sender: Ipv4Address) {
    let s = &dir.stream;
    let mut off = start as usize;
    let mut ends_per_segment: HashMap<usize, usize> = HashMap::new();
    while off < s.len() {
        let fpdu = Fpdu::new_checked(&s[off..]).expect("whole FPDU before the stream end");
        let ulpdu_len = usize::from(fpdu.ulpdu_len());
        let end = off + fpdu.total_len();
        // Our CRC helpers and M's view agree on every FPDU.
        let covered = &s[off..end - MPA_CRC_LEN];
        if crc {
            assert!(fpdu.verify_crc(), "CRC at {off}");
            assert_eq!(
                mpa_crc_from_wire(&s[end - MPA_CRC_LEN..end]),
                Some(crc32c(covered))
            );
            t.crc_good += 1;
        } else {
            assert_eq!(
                s[end - MPA_CRC_LEN..end],
                NO_CRC,
                "siw sends zero when CRC is off"
            );
            assert_eq!(fpdu.crc_field(), 0);
            t.crc_zero += 1;
        }
        // RFC 5044: pad is zero on transmit and ignored on receive (CRC aside). siw does not
        // always clear it: count, do not judge.
        if fpdu.pad().iter().any(|&b| b != 0) {
            t.nonzero_pads += 1;
        }
        t.fpdus += 1;
        t.max_ulpdu = t.max_ulpdu.max(ulpdu_len);

        let ulpdu = fpdu.ulpdu();
        let seg = Segment::parse(ulpdu).unwrap_or_else(|e| panic!("DDP at {off}: {e}"));
        let e = t
            .by_opcode
            .entry((seg.header.opcode as u8, sender))
            .or_default();
        e.0 += 1;
        e.1 += usize::from(seg.header.last);
        match (seg.header.model, seg.body) {
            (Model::Tagged { .. }, Body::Payload(p)) => {
                t.max_tagged_payload = t.max_tagged_payload.max(p.len())
            }
            (Model::Untagged { qn, .. }, body) => {
                assert_eq!(Some(qn), seg.header.opcode.qn());
                if let Body::Payload(p) = body {
                    t.max_untagged_payload = t.max_untagged_payload.max(p.len());
                }
                if let Body::ReadRequest(r) = body {
                    assert!(r.size > 0);
                    assert!(seg.header.last);
                }
            }
            other => panic!("unexpected {other:?}"),
        }
        // Round trip: emitting the decoded segment gives back the same bytes.
        let mut out = vec![0xa5u8; seg.buffer_len()];
        assert_eq!(seg.emit(&mut out), ulpdu.len());
        assert_eq!(out, ulpdu);

        // Which TCP segments carried this FPDU.
        let (fs, fe) = (off as u64, end as u64);
        let carried: Vec<_> = dir
            .segments
            .iter()
            .filter(|&&(a, b, _)| a < fe && b > fs)
            .collect();
        assert!(!carried.is_empty());
        if carried.len() > 1 {
            t.split_fpdus += 1;
        }
        t.max_segments_per_fpdu = t.max_segments_per_fpdu.max(carried.len());
        *ends_per_segment
            .entry(carried.last().unwrap().2)
            .or_default() += 1;
        off = end;
    }
    assert_eq!(off, s.len(), "the stream ends on an FPDU boundary");
    t.multi_fpdu_segments += ends_per_segment.values().filter(|&&n| n >= 2).count();
}

fn ops(t: &Tally) -> Vec<(u8, Ipv4Address, usize, usize)> {
    t.by_opcode
        .iter()
        .map(|(&(op, ip), &(segs, msgs))| (op, ip, segs, msgs))
        .collect()
}

const WRITE: u8 = Opcode::Write as u8;
const READ_REQ: u8 = Opcode::ReadRequest as u8;
const READ_RESP: u8 = Opcode::ReadResponse as u8;
const SEND: u8 = Opcode::Send as u8;

#[test]
fn siw_captures() {
    let Some(dir) = captures_dir() else {
        // Under CI=true a test that cannot do its real check fails (issue 16 item 6).
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "../shared/captures not found next to the workspace and CI=true"
        );
        println!("shared/captures not found next to the workspace: capture test skipped");
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let t = walk(file);
        println!("{name}: {t:?}");
        // Facts every capture shares (README): whole connections, no loss, no RST,
        // FPDUs at most one MSS: 1424 untagged / 1428 tagged payload bytes.
        assert_eq!(t.syn, t.connections, "{name}");
        assert_eq!(t.synack, t.connections, "{name}");
        assert_eq!(t.fin, 2 * t.connections, "{name}");
        assert_eq!(t.rst, 0, "{name}");
        assert_eq!(t.retransmitted_bytes, 0, "{name}");
        assert!(
            t.max_untagged_payload <= 1424 && t.max_tagged_payload <= 1428,
            "{name}"
        );
        match name.as_str() {
            "01-rping-mpa2-nocrc.pcap" => {
                assert_eq!(t.nonzero_pads, 0); // siw leaves pad octets uncleared
                assert_eq!((t.frames, t.connections), (90, 1));
                assert_eq!((t.mpa_requests, t.mpa_replies), (1, 1));
                assert_eq!(t.ird_ord, [(1, 1), (1, 1)]);
                assert_eq!(t.crc_negotiated, [false]);
                assert_eq!((t.fpdus, t.crc_zero, t.crc_good), (70, 70, 0));
                assert_eq!(t.max_ulpdu, 78);
                assert_eq!((t.split_fpdus, t.multi_fpdu_segments), (0, 0));
                assert_eq!(
                    ops(&t),
                    [
                        (WRITE, G1, 10, 10),
                        (READ_REQ, G1, 10, 10),
                        (READ_RESP, G2, 10, 10),
                        (SEND, G1, 20, 20),
                        (SEND, G2, 20, 20),
                    ]
                );
            }
            "02-send-bw-mpa2-crc.pcap" => {
                assert_eq!(t.nonzero_pads, 10); // siw leaves pad octets uncleared
                assert_eq!((t.frames, t.connections), (1862, 10));
                assert_eq!((t.mpa_requests, t.mpa_replies), (10, 10));
                assert!(t.ird_ord.iter().all(|&x| x == (0, 0)));
                assert_eq!(t.crc_negotiated, [true; 10]);
                assert_eq!((t.fpdus, t.crc_good, t.crc_zero), (1210, 1210, 0));
                assert_eq!(t.max_ulpdu, 1442);
                assert_eq!(t.max_untagged_payload, 1424);
                assert_eq!((t.split_fpdus, t.max_segments_per_fpdu), (10, 3));
                assert_eq!(t.multi_fpdu_segments, 3);
                assert_eq!(
                    ops(&t),
                    [
                        (WRITE, G1, 20, 20),
                        (SEND, G1, 55, 55),
                        (SEND, G2, 1135, 155)
                    ]
                );
            }
            "03-write-bw-mpa2-crc.pcap" => {
                assert_eq!(t.nonzero_pads, 2); // siw leaves pad octets uncleared
                assert_eq!((t.frames, t.connections), (1435, 2));
                assert_eq!(t.ird_ord, [(0, 0); 4]);
                assert_eq!(t.crc_negotiated, [true, true]);
                assert_eq!((t.fpdus, t.crc_good), (952, 952));
                assert_eq!(t.max_ulpdu, 1442);
                assert_eq!(t.max_tagged_payload, 1428);
                assert_eq!((t.split_fpdus, t.multi_fpdu_segments), (0, 0));
                assert_eq!(
                    ops(&t),
                    [(WRITE, G2, 920, 20), (SEND, G1, 16, 16), (SEND, G2, 16, 16)]
                );
            }
            "04-read-bw-mpa2-crc.pcap" => {
                assert_eq!(t.nonzero_pads, 2); // siw leaves pad octets uncleared
                assert_eq!((t.frames, t.connections), (1465, 2));
                assert_eq!(t.ird_ord, [(0, 0), (0, 0), (128, 128), (128, 128)]);
                assert_eq!((t.fpdus, t.crc_good), (972, 972));
                assert_eq!(t.max_ulpdu, 1442);
                assert_eq!(t.max_tagged_payload, 1428);
                assert_eq!((t.split_fpdus, t.max_segments_per_fpdu), (10, 2));
                assert_eq!(t.multi_fpdu_segments, 1);
                assert_eq!(
                    ops(&t),
                    [
                        (READ_REQ, G2, 20, 20),
                        (READ_RESP, G1, 920, 20),
                        (SEND, G1, 16, 16),
                        (SEND, G2, 16, 16),
                    ]
                );
            }
            "05-write-lat-mpa2-nocrc.pcap" => {
                assert_eq!(t.nonzero_pads, 2); // siw leaves pad octets uncleared
                assert_eq!((t.frames, t.connections), (84, 2));
                assert_eq!(t.crc_negotiated, [false, false]);
                assert_eq!((t.fpdus, t.crc_zero), (60, 60));
                assert_eq!(t.max_ulpdu, 74);
                assert_eq!((t.split_fpdus, t.multi_fpdu_segments), (0, 0));
                assert_eq!(
                    ops(&t),
                    [
                        (WRITE, G1, 20, 20),
                        (WRITE, G2, 20, 20),
                        (SEND, G1, 10, 10),
                        (SEND, G2, 10, 10)
                    ]
                );
            }
            other => println!("{other}: no notes to compare with; walked without error"),
        }
    }
}

#[test]
fn reassembly_handles_retransmission_and_reordering() {
    let mut d = Direction {
        isn: Some(u32::MAX),
        ..Direction::default()
    };
    // ISN + 1 wraps to 0: offsets 0.., sequence numbers 0.. (wrapped).
    d.add(4, b"efgh", 2); // out of order: held
    assert!(d.stream.is_empty());
    d.add(0, b"abcd", 1); // fills the hole, drains the held segment
    assert_eq!(d.stream, b"abcdefgh");
    d.add(2, b"cdefghij", 3); // retransmission overlapping 6 bytes, 2 new
    assert_eq!(d.stream, b"abcdefghij");
    assert_eq!(d.retransmitted_bytes, 6);
    d.add(0, b"ab", 4); // pure retransmission: no new segment
    assert_eq!(d.retransmitted_bytes, 8);
    assert_eq!(d.segments, [(0, 4, 1), (4, 8, 1), (8, 10, 3)]);
}
