//! Fuzz target `tcp_segment`: the body is `iwarp_fuzz_targets::tcp_segment`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::tcp_segment(data));
