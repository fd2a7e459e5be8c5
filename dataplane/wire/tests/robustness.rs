//! Hostile bytes never panic the parsers: deterministic pseudo-random inputs, plus every
//! truncation and single-bit flip of valid messages.

use iwarp_types::{Instant, Stag, TermCode};
use iwarp_wire::ddp::{self, Packet};
use iwarp_wire::l2l4::{parse_arp, ChecksumCapabilities, Ipv4Frame};
use iwarp_wire::pcap::{PcapReader, PcapWriter, TsResolution};
use iwarp_wire::rdmap::{
    looks_like_siw_bitfields, Body, Opcode, ReadRequestRepr, Segment, TerminateRepr,
};

/// xorshift64*: enough for reproducible junk.
struct Junk(u64);

impl Junk {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}

fn poke_iwarp(b: &[u8]) {
    if let Ok(p) = Packet::new_checked(b) {
        let _ = (
            p.stag(),
            p.to(),
            p.qn(),
            p.msn(),
            p.mo(),
            p.payload(),
            p.to_string(),
        );
    }
    let _ = ddp::Repr::parse_bytes(b);
    if let Ok(s) = Segment::parse(b) {
        let _ = s.to_string();
        let mut out = vec![0u8; s.buffer_len()];
        assert!(s.buffer_len() <= b.len());
        assert_eq!(s.emit(&mut out), s.buffer_len());
        if let Body::Terminate(t) = s.body {
            // Round trip of what was understood.
            let mut tb = vec![0u8; t.buffer_len()];
            t.emit(&mut tb);
            assert_eq!(TerminateRepr::parse(&tb), Ok(t));
        }
    }
    let _ = TerminateRepr::parse_any(b).map(|(t, _)| t.to_string());
    let _ = TerminateRepr::parse_siw(b);
    let _ = looks_like_siw_bitfields(b);
    let _ = ReadRequestRepr::parse_bytes(b);
}

#[test]
fn random_bytes() {
    let mut j = Junk(0x9e37_79b9_7f4a_7c15);
    let caps = ChecksumCapabilities::default();
    let mut buf = [0u8; 96];
    for i in 0..20_000 {
        let len = (j.next() % 97) as usize;
        j.fill(&mut buf[..len]);
        // Make about half of them look like DDP v1 / RDMAP v1 so deeper code runs.
        if i % 2 == 0 && len >= 2 {
            buf[0] = (buf[0] & 0xfc) | 1;
            buf[1] = (buf[1] & 0x3f) | 0x40;
        }
        poke_iwarp(&buf[..len]);
        let _ = Ipv4Frame::parse(&buf[..len], &caps);
        let _ = parse_arp(&buf[..len]);
        let _ = PcapReader::new(&buf[..len]).map(|r| r.count());
    }
}

#[test]
fn truncations_and_bit_flips() {
    let t = TerminateRepr::about_segment(
        TermCode::RDMAP_INVALID_STAG,
        &Segment {
            header: ddp::Repr {
                last: true,
                opcode: Opcode::ReadRequest,
                model: ddp::Model::Untagged {
                    inv_stag: Stag(0),
                    qn: 1,
                    msn: 9,
                    mo: 0,
                },
            },
            body: Body::ReadRequest(ReadRequestRepr {
                sink_stag: Stag(1),
                sink_to: 2,
                size: 3,
                src_stag: Stag(4),
                src_to: 5,
            }),
        }
        .to_bytes(),
    );
    let seg = Segment {
        header: iwarp_wire::rdmap::terminate_header(1),
        body: Body::Terminate(t),
    };
    let bytes = seg.to_bytes();
    assert_eq!(Segment::parse(&bytes), Ok(seg));
    for n in 0..bytes.len() {
        poke_iwarp(&bytes[..n]);
    }
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        poke_iwarp(&b);
    }

    let mut w = PcapWriter::new(Vec::new(), TsResolution::Nanos).unwrap();
    w.write_frame(Instant(7), &bytes).unwrap();
    let file = w.into_inner();
    for n in 0..file.len() {
        let _ = PcapReader::new(&file[..n]).map(|r| r.count());
    }
    for bit in 0..file.len() * 8 {
        let mut f = file.clone();
        f[bit / 8] ^= 1 << (bit % 8);
        let _ = PcapReader::new(&f).map(|r| r.count());
    }
}

trait ToBytes {
    fn to_bytes(&self) -> Vec<u8>;
}

impl ToBytes for Segment<'_> {
    fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.buffer_len()];
        self.emit(&mut v);
        v
    }
}
