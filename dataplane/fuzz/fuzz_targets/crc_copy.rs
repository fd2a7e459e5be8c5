//! Fuzz target `crc_copy`: the body is `iwarp_fuzz_targets::crc_copy`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::crc_copy(data));
