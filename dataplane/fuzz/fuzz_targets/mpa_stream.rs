//! Fuzz target `mpa_stream`: the body is `iwarp_fuzz_targets::mpa_stream`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::mpa_stream(data));
