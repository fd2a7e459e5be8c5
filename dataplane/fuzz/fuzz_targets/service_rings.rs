//! Fuzz target `service_rings`: the body is `iwarp_fuzz_targets::service_rings`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::service_rings(data));
