//! iwarp-perf: a perftest-like benchmark over the shared-memory verbs client library
fn main() {}
