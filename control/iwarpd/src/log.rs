//! The daemon's log: `tracing` events on stderr, set up once by [`init`].
//!
//! Every line carries its time (RFC 3339, UTC), its level and the daemon's name (the
//! root span `iwarpd{daemon=<name>}`, entered by `main` and by every thread of the
//! daemon that logs: [`root`]). `daemon.log_level` filters, `daemon.log_format` picks
//! text lines or one JSON object per line. Nothing logs on a dataplane core's fast path:
//! the engine crates have no `tracing` at all, and the cores' state changes reach the log
//! through the control thread (connections, Terminates, QP errors) and this daemon's
//! control loop (links, capture drops).

use std::sync::OnceLock;

use iwarp_config::{LogFormat, LogLevel};
use tracing::level_filters::LevelFilter;
use tracing::Span;

static ROOT: OnceLock<Span> = OnceLock::new();

/// The most verbose level `l` lets through.
pub fn filter(l: LogLevel) -> LevelFilter {
    match l {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// Installs the subscriber (stderr, `level`, `format`) and creates the root span of
/// daemon `name` (at level error, so that every level that passes carries it). Called
/// once, before anything logs.
pub fn init(name: &str, level: LogLevel, format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(filter(level))
        .with_ansi(false)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
    let _ = ROOT.set(tracing::error_span!("iwarpd", daemon = %name));
}

/// The root span (the daemon's name): a thread enters it first (`let _g =
/// log::root().entered();`) so that its events carry the name.
pub fn root() -> Span {
    ROOT.get().cloned().unwrap_or_else(Span::none)
}
