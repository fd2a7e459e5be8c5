//! Seeded network simulator and whole-system scenario tests of the iWARP engine
#![forbid(unsafe_code)]
