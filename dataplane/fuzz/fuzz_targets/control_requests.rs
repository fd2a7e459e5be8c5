//! Fuzz target `control_requests`: the body is `iwarp_fuzz_targets::control_requests`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::control_requests(data));
