//! Bodies of the fuzz targets of the iWARP dataplane, and the seeds of their corpora.
//!
//! Every target is a plain function over the fuzzer's bytes: the cargo-fuzz binaries in
//! `dataplane/fuzz` only call them, and `tests/corpus_replay.rs` replays every file of the
//! checked-in corpora (`dataplane/fuzz/corpus/<target>/`) through the same functions, so
//! `cargo test` keeps every input the fuzzer ever found interesting (and every crash, once
//! fixed) as a regression test.
//!
//! Each target asserts invariants beyond "no panic" where it can: parse → emit → parse gives
//! the same repr, a view that said "ok" has in-bounds accessors, a connection fed garbage
//! keeps its bounds and answers with a defined error, the one-pass copy + CRC equals a copy
//! and the reference CRC.
#![forbid(unsafe_code)]

pub mod arena;
mod control_requests;
mod crc_copy;
pub mod cursor;
mod engine_rx;
mod mpa_stream;
mod rdma_rx;
pub mod seeds;
mod service_rings;
mod tcp_segment;
mod wire_parsers;

pub use control_requests::control_requests;
pub use crc_copy::crc_copy;
pub use engine_rx::engine_rx;
pub use mpa_stream::mpa_stream;
pub use rdma_rx::rdma_rx;
pub use service_rings::service_rings;
pub use tcp_segment::tcp_segment;
pub use wire_parsers::{selector as wire_selector, wire_parsers, PARSER_COUNT};

/// A fuzz target: its name (the cargo-fuzz binary and corpus directory) and its body.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Name of the binary and of `dataplane/fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// The body.
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz.sh` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "wire_parsers",
        run: wire_parsers,
    },
    Target {
        name: "tcp_segment",
        run: tcp_segment,
    },
    Target {
        name: "mpa_stream",
        run: mpa_stream,
    },
    Target {
        name: "rdma_rx",
        run: rdma_rx,
    },
    Target {
        name: "engine_rx",
        run: engine_rx,
    },
    Target {
        name: "service_rings",
        run: service_rings,
    },
    Target {
        name: "control_requests",
        run: control_requests,
    },
    Target {
        name: "crc_copy",
        run: crc_copy,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}
