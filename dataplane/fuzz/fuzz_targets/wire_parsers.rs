//! Fuzz target `wire_parsers`: the body is `iwarp_fuzz_targets::wire_parsers`.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iwarp_fuzz_targets::wire_parsers(data));
