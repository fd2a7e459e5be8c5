//! Fuzz target `rdma_rx`: the body is `iwarp_fuzz_targets::rdma_rx`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::rdma_rx(data));
