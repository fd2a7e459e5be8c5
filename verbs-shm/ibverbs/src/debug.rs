//! `IWARP_DEBUG=1`: why a call failed, on stderr (rdma-core's `IBV_SHOW_WARNINGS` idea).

use std::sync::OnceLock;

/// True when `IWARP_DEBUG` is set to something other than `0` or empty.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("IWARP_DEBUG").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Prints `libibverbs (iwarp): MSG` on stderr when debugging is on.
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::debug::enabled() {
            eprintln!("libibverbs (iwarp): {}", format_args!($($arg)*));
        }
    };
}
pub(crate) use debug;
