//! Seed inputs for the corpora, built from real traffic (the siw captures, read with
//! [`iwarp_wire::pcap::PcapReader`]) and from byte literals. `examples/write_seeds.rs`
//! writes them under `dataplane/fuzz/corpus/<target>/`.

mod capture;
mod stateful;
mod wire;

pub use capture::{conn_streams, frames, mpa_records, tcp_segments, CapturedSegment, ConnStreams};
pub use stateful::{
    engine_rx_literals, engine_rx_seeds, mpa_pair_literals, mpa_stream_seeds, rdma_rx_seeds,
};
pub use wire::{tcp_segment_seeds, wire_parser_literals, wire_parser_seeds};

/// One seed: a file name (stable across runs) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// File name inside the target's corpus directory.
    pub name: String,
    /// The input.
    pub bytes: Vec<u8>,
}

/// Most seeds of one kind taken from one capture.
pub const MAX_PER_KIND: usize = 12;

/// A short stable name for `bytes` (FNV-1a 64).
pub fn content_name(prefix: &str, bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{prefix}-{h:016x}")
}

/// Adds seeds, at most [`MAX_PER_KIND`] distinct ones of this kind, picked evenly.
pub(crate) fn push_kind(
    out: &mut Vec<Seed>,
    prefix: &str,
    inputs: impl IntoIterator<Item = Vec<u8>>,
) {
    let mut all: Vec<Vec<u8>> = Vec::new();
    for i in inputs {
        if !all.contains(&i) {
            all.push(i);
        }
    }
    let step = all.len().div_ceil(MAX_PER_KIND).max(1);
    for bytes in all.into_iter().step_by(step) {
        let name = content_name(prefix, &bytes);
        if !out.iter().any(|s| s.name == name) {
            out.push(Seed { name, bytes });
        }
    }
}

pub(crate) fn with_selector(s: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.push(s);
    v.extend_from_slice(bytes);
    v
}

/// Seeds of every target from the frames of one capture, by target name.
pub fn seeds_from_capture(frames: &[Vec<u8>]) -> Vec<(&'static str, Vec<Seed>)> {
    vec![
        ("wire_parsers", wire_parser_seeds(frames)),
        ("tcp_segment", tcp_segment_seeds(frames)),
        ("mpa_stream", mpa_stream_seeds(frames)),
        ("rdma_rx", rdma_rx_seeds(frames)),
        ("engine_rx", engine_rx_seeds(frames)),
    ]
}

/// Seeds of every target that need no capture, by target name.
pub fn literal_seeds() -> Vec<(&'static str, Vec<Seed>)> {
    vec![
        ("wire_parsers", wire_parser_literals()),
        ("mpa_stream", mpa_pair_literals()),
        ("engine_rx", engine_rx_literals()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_kinds_bounded() {
        assert_eq!(content_name("x", b""), "x-cbf29ce484222325");
        let mut out = Vec::new();
        push_kind(&mut out, "k", (0..100u8).map(|i| vec![i]));
        assert!(out.len() <= MAX_PER_KIND);
        push_kind(&mut out, "k", [vec![0u8]]);
        assert!(out.len() <= MAX_PER_KIND);
        assert!(!wire_parser_literals().is_empty());
        assert!(frames(b"not a pcap").is_empty());
    }
}
