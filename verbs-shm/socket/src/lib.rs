//! The control protocol between a verbs client (the `iwarp-verbs` library, the C API,
//! `iwarpctl`) and the control plane of `iwarpd`.
//!
//! One unix `SOCK_SEQPACKET` socket per client (`/run/iwarpd/<name>.verbs` by default).
//! Every datagram is one [`frame`]d message: a 8-byte header (magic, protocol version)
//! then a `postcard` body, at most [`MAX_MESSAGE_BYTES`]. File descriptors (arena and
//! ring-area memfds, completion-channel eventfds) travel beside a message as
//! `SCM_RIGHTS`.
//!
//! - The client speaks first: [`Request::Hello`] with [`PROTOCOL_VERSION`]; the daemon
//!   checks the peer's credentials (`SO_PEERCRED`) against its access policy and answers
//!   [`Response::Welcome`] (with the client's ring-area memfd) or an error, then closes.
//! - A connection the daemon refuses before reading anything (a user its policy does not
//!   admit, a full daemon, a user over its connection limit) gets one
//!   `ServerMsg::Reply { seq: 0, result: Err(..) }` ([`ErrorCode::PermissionDenied`],
//!   [`ErrorCode::DaemonFull`], [`ErrorCode::LimitReached`]) and is closed at once; so is
//!   a connection that says nothing within `control.hello_timeout_ms`
//!   ([`ErrorCode::NotReady`]). Clients say `Hello` with sequence number 0, so that such
//!   an answer reads as the answer to their `Hello`.
//! - Then every [`ClientMsg`] carries a sequence number that the daemon echoes in its
//!   [`ServerMsg::Reply`]; [`ServerMsg::Event`]s (connection management, asynchronous
//!   events, daemon shutdown) arrive unsolicited, in between.
//! - Every handle in a message is scoped to the client that holds it ([`handles`]): a
//!   client can name only its own objects; a handle it does not own is
//!   [`ErrorCode::NoSuchObject`], whatever another client holds.
//!
//! Work requests and completions never travel here: they go through the rings in shared
//! memory (`iwarp-shm-ring`), whose offsets the replies give.
#![forbid(unsafe_code)]

pub mod attr;
pub mod cm;
pub mod error;
pub mod frame;
pub mod handles;
pub mod msg;
pub mod transport;

pub use attr::*;
pub use cm::*;
pub use error::{ErrorCode, ErrorReply};
pub use frame::{decode, encode, FrameError, FRAME_HEADER_BYTES, FRAME_MAGIC};
pub use handles::*;
pub use msg::*;
pub use transport::{Channel, Listener, PeerCred, RecvError, MAX_FDS};

/// Version of this protocol. A daemon answers a `Hello` of another version with
/// [`ErrorCode::VersionMismatch`] naming the version it speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// Largest datagram, header included.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Directory of the daemon's sockets unless configured otherwise.
pub const DEFAULT_SOCKET_DIR: &str = "/run/iwarpd";

/// The verbs socket of daemon `name` in the default directory.
pub fn default_socket_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(DEFAULT_SOCKET_DIR).join(format!("{name}.verbs"))
}
