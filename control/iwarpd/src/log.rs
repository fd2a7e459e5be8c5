//! Start-up, shutdown and error messages on stderr, tagged with the daemon's name and
//! filtered by `daemon.log_level`. Never used on a dataplane core's fast path.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

static LEVEL: AtomicU8 = AtomicU8::new(2);
static NAME: OnceLock<String> = OnceLock::new();

/// Message levels, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed.
    Error = 0,
    /// Something works, but not as configured (a fallback).
    Warn = 1,
    /// Start-up and shutdown steps.
    Info = 2,
    /// Details.
    Debug = 3,
}

/// Sets the daemon name and the most verbose level printed.
pub fn init(name: &str, level: Level) {
    let _ = NAME.set(name.to_string());
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// True if messages of `level` are printed.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Prints one message.
pub fn emit(level: Level, msg: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let name = NAME.get().map(String::as_str).unwrap_or("iwarpd");
    let tag = match level {
        Level::Error => "error: ",
        Level::Warn => "warning: ",
        Level::Info | Level::Debug => "",
    };
    eprintln!("iwarpd[{name}]: {tag}{msg}");
}

/// `info!("...")`.
#[macro_export]
macro_rules! info { ($($t:tt)*) => { $crate::log::emit($crate::log::Level::Info, format_args!($($t)*)) } }
/// `warn!("...")`.
#[macro_export]
macro_rules! warn { ($($t:tt)*) => { $crate::log::emit($crate::log::Level::Warn, format_args!($($t)*)) } }
/// `error!("...")`.
#[macro_export]
macro_rules! error { ($($t:tt)*) => { $crate::log::emit($crate::log::Level::Error, format_args!($($t)*)) } }
/// `debug!("...")`.
#[macro_export]
macro_rules! debug { ($($t:tt)*) => { $crate::log::emit($crate::log::Level::Debug, format_args!($($t)*)) } }
