//! The engine's CRC32c (`iwarp_wire::mpa::crc32c`), the `crc32c` crate (SSE 4.2, 3-way
//! over 768-octet blocks) and the `crc-fast` crate's CRC-32/ISCSI (PCLMULQDQ folding fused
//! with the CRC instruction, VPCLMULQDQ on AVX-512 CPUs)
//! at the sizes the engine checksums: short pieces (2 octets: an FPDU's ULPDU_Length; 18:
//! an untagged DDP/RDMAP header; 30), a 64-byte WRITE's FPDU (80), 128 (the longest the
//! inline `crc32` path takes), a full FPDU at MTU 1500 (1448 octets) and at MTU 9000
//! (8948 octets), and a 64 KiB buffer (the limit's).
//!
//! Run: `CARGO_TARGET_DIR=target-P cargo bench -p iwarp-benches --bench crc --
//! --warm-up-time 1 --measurement-time 2`. The engine keeps whichever is faster at 1448
//! and 8948 octets (see docs/BENCHMARKS.md).

use criterion::{BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

/// Sizes benchmarked, in octets.
const SIZES: [usize; 8] = [2, 18, 30, 80, 128, 1448, 8948, 65536];

fn crc(c: &mut Criterion) {
    let buf: Vec<u8> = (0..65536u32)
        .map(|i| (i.wrapping_mul(7) + 3) as u8)
        .collect();
    let mut g = c.benchmark_group("crc32c");
    for n in SIZES {
        let b = &buf[..n];
        assert_eq!(
            iwarp_wire::mpa::crc32c(b),
            crc_fast::crc32_iscsi(b),
            "same CRC"
        );
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(BenchmarkId::new("engine_crc32c_crate", n), b, |bch, b| {
            bch.iter(|| iwarp_wire::mpa::crc32c(black_box(b)))
        });
        g.bench_with_input(BenchmarkId::new("crc32c_crate", n), b, |bch, b| {
            bch.iter(|| crc32c::crc32c(black_box(b)))
        });
        g.bench_with_input(BenchmarkId::new("crc_fast", n), b, |bch, b| {
            bch.iter(|| crc_fast::crc32_iscsi(black_box(b)))
        });
        g.bench_with_input(BenchmarkId::new("crc_copy_crc_only", n), b, |bch, b| {
            bch.iter(|| iwarp_crc_copy::crc32c_append(0, black_box(b)))
        });
        let mut dst = vec![0u8; n + 64];
        g.bench_with_input(BenchmarkId::new("crc_copy_copy_and_crc", n), b, |bch, b| {
            // The frame's payload sits 14 bytes off the source's alignment.
            bch.iter(|| iwarp_crc_copy::copy_crc32c(&mut dst[14..14 + b.len()], black_box(b), 0))
        });
        g.bench_with_input(BenchmarkId::new("crc_copy_copy_only", n), b, |bch, b| {
            bch.iter(|| iwarp_crc_copy::copy(&mut dst[14..14 + b.len()], black_box(b)))
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    crc(&mut c);
    c.final_summary();
}
