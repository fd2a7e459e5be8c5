//! Connection management in the manner of librdmacm: CM ids, listen, connect, accept,
//! reject, disconnect, and the events they produce.

use serde::{Deserialize, Serialize};

use crate::{CmIdHandle, QpHandle};

/// An IPv4 address and TCP port (`[a, b, c, d]`, port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Addr {
    /// IPv4 address.
    pub ip: [u8; 4],
    /// TCP port.
    pub port: u16,
}

impl From<std::net::SocketAddrV4> for Addr {
    fn from(a: std::net::SocketAddrV4) -> Addr {
        Addr {
            ip: a.ip().octets(),
            port: a.port(),
        }
    }
}

impl From<Addr> for std::net::SocketAddrV4 {
    fn from(a: Addr) -> std::net::SocketAddrV4 {
        std::net::SocketAddrV4::new(a.ip.into(), a.port)
    }
}

/// Most private data bytes in a connect, accept or reject (MPA allows 512).
pub const MAX_PRIVATE_DATA: usize = 512;

/// MPA/RDMA connection parameters of a connect or accept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnParam {
    /// Private data (at most [`MAX_PRIVATE_DATA`] bytes).
    pub private_data: Vec<u8>,
    /// Inbound RDMA Reads the QP accepts (IRD; 0: the QP's).
    pub responder_resources: u32,
    /// Outbound RDMA Reads (ORD; 0: the QP's).
    pub initiator_depth: u32,
}

/// Why an active open failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConnectError {
    /// RST to the SYN (nobody listens).
    Refused,
    /// Reset during set-up.
    Reset,
    /// No answer in time (SYN or MPA).
    Timeout,
    /// No ARP answer / no route.
    Unreachable,
    /// MPA failed (the Terminate code or handshake error).
    Mpa(u16),
    /// Aborted locally.
    Aborted,
}

/// A connection-manager event for a CM id (`rdma_cm_event`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmEvent {
    /// A connection request on a listener: `id` is a new CM id for it; create a QP with
    /// `QpCreate::for_cm_id = Some(id)`, then accept or reject.
    ConnectRequest {
        /// The new CM id of the request.
        id: CmIdHandle,
        /// The peer.
        remote: Addr,
        /// The local address it came to.
        local: Addr,
        /// Private data of the MPA request.
        private_data: Vec<u8>,
        /// The peer's IRD (RFC 6581), if it sent one.
        ird: u32,
        /// The peer's ORD (RFC 6581), if it sent one.
        ord: u32,
    },
    /// The connection is up (both sides): the QP is in RTS.
    Established {
        /// Private data of the MPA reply (active side), empty on the passive side.
        private_data: Vec<u8>,
        /// The QP.
        qp: QpHandle,
    },
    /// The peer rejected the connection (MPA reject), with its private data.
    Rejected {
        /// Private data of the MPA reject.
        private_data: Vec<u8>,
    },
    /// An active open failed.
    ConnectError(ConnectError),
    /// The connection closed (graceful, reset, Terminate, or its client went away).
    Disconnected,
    /// The daemon went away: every object of this client is gone.
    DeviceRemoval,
}
