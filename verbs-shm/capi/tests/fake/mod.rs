//! The test kit's fake iwarpd (`iwarp_testkit::fake_daemon`) and the C-side helpers of the
//! tests that drive it through the C API.

#![allow(dead_code)]

pub mod util;

pub use iwarp_testkit::fake_daemon::FakeDaemon;
