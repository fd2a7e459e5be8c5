//! Criterion benchmarks of the iWARP engine
#![forbid(unsafe_code)]
