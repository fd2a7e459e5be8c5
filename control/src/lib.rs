//! The control daemon inside iwarpd (docs/APPS.md): the verbs socket, clients and their
//! resources, access policy, QP placement, teardown.
//!
//! [`ControlServer`] runs on its own thread of `iwarpd`. It owns the listening
//! `SOCK_SEQPACKET` socket and every client connection (bounded), checks each peer
//! against the [`Policy`], gives each client a ring area, keeps per-client handle tables
//! (every handle is checked to belong to the asking client), and turns each request into
//! [`iwarp_shm_service::ServiceRequest`]s to the dataplane cores' services through a
//! [`CoreLink`]. Notices from the cores become events on the client's socket or writes
//! to its completion-channel eventfds. When a client goes (Bye, close, kill -9) its
//! objects are torn down on every core and its arenas leave the region table only after
//! a fence round trip on every core.
#![forbid(unsafe_code)]

mod admin;
mod admission;
mod client;
mod cm;
mod link;
mod memory;
mod policy;
mod server;
mod tables;
mod teardown;
mod verbs;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

pub use link::{cm_code, service_error, verb_code, CoreLink};
pub use policy::{AccountDb, Admission, Policy};
pub use server::{
    CaptureCommand, CaptureSource, ControlServer, CounterSource, LinkSource, ServerStats,
};
pub use tables::{BitAlloc, Table};

/// How the control server runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    /// The verbs socket (`/run/iwarpd/<name>.verbs` by default).
    pub socket: PathBuf,
    /// Users admitted besides root (names or numeric uids).
    pub allow_users: Vec<String>,
    /// Groups admitted (names or numeric gids).
    pub allow_groups: Vec<String>,
    /// Users allowed administration requests besides root.
    pub admin_users: Vec<String>,
    /// Clients connected at once (welcomed).
    pub max_clients: usize,
    /// How long a connection may stay without saying `Hello` before it is closed.
    pub hello_timeout: Duration,
    /// Connections (welcomed or not yet) one uid may hold; root and `admin_users` are
    /// exempt.
    pub max_conns_per_uid: usize,
    /// Connections that have not said `Hello` yet, all users together.
    pub max_pending: usize,
    /// Arena bytes one client may hold.
    pub max_arena_bytes: u64,
    /// Objects of each kind one client may hold.
    pub max_objects: u32,
    /// QPs one client may hold (also bounded by `max_objects`).
    pub max_qps: u32,
    /// How long a core may take to answer one request.
    pub core_timeout: Duration,
    /// Malformed frames a client may send before it is disconnected.
    pub max_bad_frames: u32,
    /// Active opens ask for MPA peer-to-peer mode (`mpa.p2p`).
    pub p2p: bool,
    /// The daemon's name (status).
    pub name: String,
    /// At an orderly stop, how long the clients' connections may take to close
    /// gracefully (FIN both ways: the peers see a disconnect) before the rest is reset
    /// (`daemon.shutdown_grace_ms`).
    pub shutdown_grace: Duration,
}

impl Default for ControlConfig {
    fn default() -> ControlConfig {
        ControlConfig {
            socket: iwarp_shm_socket::default_socket_path("iwarpd"),
            allow_users: Vec::new(),
            allow_groups: Vec::new(),
            admin_users: Vec::new(),
            max_clients: 64,
            hello_timeout: Duration::from_secs(5),
            max_conns_per_uid: 32,
            max_pending: 64,
            max_arena_bytes: 4096 << 20,
            max_objects: 4096,
            max_qps: 256,
            core_timeout: Duration::from_secs(2),
            max_bad_frames: 8,
            p2p: false,
            name: "iwarpd".into(),
            shutdown_grace: Duration::from_secs(2),
        }
    }
}
