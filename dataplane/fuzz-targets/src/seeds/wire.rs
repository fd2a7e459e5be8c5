//! Seeds of the parser targets: `wire_parsers` and `tcp_segment`.

use iwarp_types::TermCode;
use iwarp_wire::l2l4::{
    arp_request, ChecksumCapabilities, EthIpv4Header, EthernetAddress, EthernetFrame,
    EthernetProtocol, Icmpv4Packet, Icmpv4Repr, IpProtocol, ETH_IPV4_HEADER_LEN,
};
use iwarp_wire::mpa::Fpdu;
use iwarp_wire::pcap::{PcapWriter, TsResolution};
use iwarp_wire::rdmap::{Opcode, Segment, TerminateRepr, MAX_TERMINATE_LEN};

use super::{mpa_records, push_kind, tcp_segments, with_selector, CapturedSegment, Seed};
use crate::tcp_segment::{CTRL_FIX_CHECKSUM, CTRL_VERIFY};
use crate::wire_selector as sel;

/// Seeds of `wire_parsers` from the frames of one capture.
pub fn wire_parser_seeds(frames: &[Vec<u8>]) -> Vec<Seed> {
    let mut out = Vec::new();
    let segs = tcp_segments(frames);
    let (mpa_frames, fpdus) = mpa_records(&segs);
    let ulpdus: Vec<Vec<u8>> = fpdus
        .iter()
        .filter_map(|f| Fpdu::new_checked(&f[..]).ok().map(|f| f.ulpdu().to_vec()))
        .collect();
    // Frames of every kind: IPv4 (the small ones), ARP, and the same frames as ICMP inputs.
    let small: Vec<&Vec<u8>> = frames.iter().filter(|f| f.len() <= 200).collect();
    push_kind(
        &mut out,
        "ipv4",
        small.iter().map(|f| with_selector(sel::IPV4, f)),
    );
    push_kind(
        &mut out,
        "arp",
        frames
            .iter()
            .filter(|f| {
                EthernetFrame::new_checked(&f[..])
                    .is_ok_and(|e| e.ethertype() == EthernetProtocol::Arp)
            })
            .map(|f| with_selector(sel::ARP, f)),
    );
    push_kind(
        &mut out,
        "mpa-frame",
        mpa_frames.iter().map(|f| with_selector(sel::MPA_FRAME, f)),
    );
    push_kind(
        &mut out,
        "fpdu",
        fpdus
            .iter()
            .filter(|f| f.len() <= 256)
            .map(|f| with_selector(sel::FPDU, f)),
    );
    // One seed per opcode seen, short payloads only, for the DDP and segment parsers.
    for op in Opcode::ALL {
        let of_op = ulpdus
            .iter()
            .filter(|u| u.get(1).is_some_and(|c| c & 0x0f == op as u8));
        let short: Vec<Vec<u8>> = of_op
            .map(|u| u[..u.len().min(64)].to_vec())
            .take(4)
            .collect();
        push_kind(
            &mut out,
            "ddp",
            short.iter().map(|u| with_selector(sel::DDP, u)),
        );
        push_kind(
            &mut out,
            "segment",
            short.iter().map(|u| with_selector(sel::SEGMENT, u)),
        );
    }
    let mut rreqs = Vec::new();
    let mut terms = Vec::new();
    for u in &ulpdus {
        if let Ok(seg) = Segment::parse(u) {
            if seg.header.opcode == Opcode::ReadRequest {
                rreqs.push(with_selector(sel::READ_REQUEST, &u[18..]));
                // A Terminate about the Read Request (M, D and R set).
                let t = TerminateRepr::about_segment(TermCode::RDMAP_INVALID_STAG, u);
                let mut b = [0u8; MAX_TERMINATE_LEN];
                let n = t.emit(&mut b);
                terms.push(with_selector(sel::TERMINATE, &b[..n]));
            }
        }
    }
    push_kind(&mut out, "rreq", rreqs);
    push_kind(&mut out, "term", terms);
    // Markers: a layout and a record taken from an FPDU.
    if let Some(f) = fpdus.iter().find(|f| f.len() <= 128) {
        let mut m = vec![sel::MARKERS, 0, 0, 0, 0, 0, 126, 0, (f.len() / 4) as u8];
        m.extend_from_slice(f);
        push_kind(&mut out, "markers", [m]);
    }
    // A pcap file of the first frames (what `PcapReader` reads), kept small.
    let mut w = PcapWriter::new(Vec::new(), TsResolution::Micros).expect("Vec");
    for (i, f) in frames.iter().filter(|f| f.len() <= 200).take(6).enumerate() {
        w.write_frame(
            iwarp_types::Instant(1_700_000_000_000_000_000 + i as u64 * 1_000),
            f,
        )
        .expect("Vec");
    }
    push_kind(
        &mut out,
        "pcap",
        [with_selector(sel::PCAP, &w.into_inner())],
    );
    out
}

/// Seeds of `wire_parsers` that need no capture: Terminates in both layouts, a marker
/// record, odd frames.
pub fn wire_parser_literals() -> Vec<Seed> {
    let mut out = Vec::new();
    let literals: [&[u8]; 8] = [
        // Terminate 0x0100 (invalid STag), M+D, about a tagged Write header.
        &[
            sel::TERMINATE,
            0x01,
            0x00,
            0xc0,
            0x00,
            0x00,
            0x10,
            0xc1,
            0x40,
            0,
            0,
            0x12,
            0x34,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
        // The same code as siw writes it (layer low nibble, flags 0x03).
        &[
            sel::TERMINATE,
            0x10,
            0x00,
            0x03,
            0x00,
            0x00,
            0x10,
            0xc1,
            0x40,
            0,
            0,
            0x12,
            0x34,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
        // R set without an RDMA header (siw on Send with Invalidate errors).
        &[sel::TERMINATE, 0x01, 0x02, 0x20, 0x00],
        // DDP with bad versions.
        &[
            sel::DDP,
            0x42,
            0x43,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
        ],
        &[
            sel::DDP,
            0x41,
            0x03,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
        ],
        // Tagged opcode with T clear, reserved opcode.
        &[
            sel::SEGMENT,
            0x41,
            0x40,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
        ],
        &[sel::SEGMENT, 0xc1, 0x4f, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        // FPDU with pad and a good CRC field left for the fuzzer to break.
        &[sel::FPDU, 0x00, 0x01, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00],
    ];
    push_kind(&mut out, "lit", literals.iter().map(|l| l.to_vec()));
    // ARP request for 198.18.0.11 from g2, and an ICMP echo request g2 -> g1.
    let mut arp = vec![0u8; 60];
    let g2_mac = EthernetAddress([0x52, 0x54, 0x00, 0x5a, 0x00, 0x02]);
    let g1_mac = EthernetAddress([0x52, 0x54, 0x00, 0x5a, 0x00, 0x01]);
    if let Some(n) = arp_request(
        &mut arp,
        g2_mac,
        [198, 18, 0, 12].into(),
        [198, 18, 0, 11].into(),
    ) {
        arp.truncate(n);
        push_kind(&mut out, "arp", [with_selector(sel::ARP, &arp)]);
    }
    let echo = Icmpv4Repr::EchoRequest {
        ident: 0x77,
        seq_no: 3,
        data: b"iwarp-ping",
    };
    let mut f = vec![0u8; ETH_IPV4_HEADER_LEN + echo.buffer_len()];
    let hdr = EthIpv4Header {
        src_mac: g2_mac,
        dst_mac: g1_mac,
        src_ip: [198, 18, 0, 12].into(),
        dst_ip: [198, 18, 0, 11].into(),
        protocol: IpProtocol::Icmp,
        ttl: 64,
        ident: 9,
    };
    let caps = ChecksumCapabilities::default();
    if hdr.emit(&mut f, echo.buffer_len(), &caps).is_ok() {
        echo.emit(
            &mut Icmpv4Packet::new_unchecked(&mut f[ETH_IPV4_HEADER_LEN..]),
            &caps,
        );
        push_kind(
            &mut out,
            "icmp",
            [with_selector(sel::ICMP, &f), with_selector(sel::IPV4, &f)],
        );
    }
    out
}

/// Seeds of `tcp_segment` from the frames of one capture: handshake segments with options,
/// pure ACKs, data, FIN; half with the checksum verified.
pub fn tcp_segment_seeds(frames: &[Vec<u8>]) -> Vec<Seed> {
    let segs = tcp_segments(frames);
    let mut out = Vec::new();
    let mk = |s: &CapturedSegment, ctrl: u8| {
        let mut v = vec![ctrl];
        v.extend_from_slice(&s.src);
        v.extend_from_slice(&s.dst);
        v.extend_from_slice(&s.tcp[..s.tcp.len().min(s.payload_at + 48)]);
        v
    };
    let flag = |s: &CapturedSegment| s.tcp.get(13).copied().unwrap_or(0);
    push_kind(
        &mut out,
        "syn",
        segs.iter()
            .filter(|s| flag(s) & 0x02 != 0)
            .map(|s| mk(s, CTRL_VERIFY)),
    );
    push_kind(
        &mut out,
        "fin",
        segs.iter()
            .filter(|s| flag(s) & 0x01 != 0)
            .map(|s| mk(s, CTRL_VERIFY)),
    );
    push_kind(
        &mut out,
        "ack",
        segs.iter()
            .filter(|s| s.payload().is_empty() && flag(s) == 0x10)
            .map(|s| mk(s, CTRL_VERIFY)),
    );
    // Cut payloads: the checksum no longer matches, so let the target fix it.
    push_kind(
        &mut out,
        "data",
        segs.iter()
            .filter(|s| !s.payload().is_empty())
            .map(|s| mk(s, CTRL_VERIFY | CTRL_FIX_CHECKSUM)),
    );
    push_kind(
        &mut out,
        "nover",
        segs.iter().filter(|s| s.payload_at > 20).map(|s| mk(s, 0)),
    );
    out
}
