//! iwarpd's configuration: one TOML file describes a daemon.
//!
//! ```text
//!  file (TOML) ──parse──▶ toml::Table ──--set / flags──▶ toml::Table ──serde──▶ Config
//!                                                                    validate() │
//!  Seeds::from_config ─┐                                                          ▼
//!  NicInfo (port) ─────┴──────────────▶ Config::engine_config(port, core) ─▶ EngineConfig
//! ```
//!
//! - [`Config`] holds the sections `[daemon]`, `[eal]`, `[cores]`, `[[port]]`, `[limits]`,
//!   `[ip]`, `[mpa]`, `[tcp]`, `[capture]`, `[loadgen]`, `[control]`. `Config::default()` runs on a
//!   machine without a NIC (one memif server port, one core on the last CPU).
//! - [`Config::build`] reads a file, applies [`Override`]s and validates; errors are
//!   [`ConfigError`]s naming the key (`config error: port[0].ipv4: ...`), with the line
//!   when the value came from the file. Unknown keys are named with a suggestion.
//! - [`Config::engine_config`] maps the file onto `iwarp_engine::EngineConfig` for one
//!   port on one dataplane core and runs the engine's own validation.
//! - [`Cli`] is the command line of `iwarpd` (clap); [`keys::render`] lists every key
//!   with its default (`iwarpd config-keys`), from the one table [`keys::KEYS`].
#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod device;
pub mod engine;
pub mod error;
pub mod extras;
pub mod keys;
pub mod limits;
pub mod mpa;
pub mod overrides;
pub mod port;
pub mod seeds;
pub mod tcp;
mod validate;

#[cfg(test)]
mod tests_examples;

pub use cli::{ByteSize, Cli, Command, CpuList, IfAddr, LoadgenArgs, LoadgenOp, StatsArgs};
pub use config::Config;
pub use control::ControlSection;
pub use daemon::{
    format_cpu_list, online_cpus, parse_cpu_list, CoresSection, DaemonSection, EalSection,
    HugepageMode, LogFormat, LogLevel, QpPlacement,
};
pub use device::{Device, PciAddr, Vdev, VdevDriver};
pub use engine::NicInfo;
pub use error::ConfigError;
pub use extras::{CaptureSection, LoadgenSection};
pub use limits::{IpSection, LimitsSection};
pub use mpa::{CrcMode, MarkerMode, MpaSection, RtrKind};
pub use overrides::Override;
pub use port::{ChecksumMode, MacAddr, PortSection, Steering};
pub use seeds::{Hex128, Hex64, Seeds};
pub use tcp::{CongestionControl, TcpSection};
