//! Interop tools for iwarpd against Linux soft-iWARP (siw): the application protocols of
//! the Linux tools, so that rping (and later perftest) on siw can be the other end.
#![forbid(unsafe_code)]

pub mod rping;
