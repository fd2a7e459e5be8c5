//! Fuzz target `engine_rx`: the body is `iwarp_fuzz_targets::engine_rx`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::engine_rx(data));
