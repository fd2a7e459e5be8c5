//! What the engine tells its caller: connection management events, asynchronous events
//! and completion notifications. Events are plain values (no allocation): private data
//! travels in a fixed 512-byte array.

use core::net::SocketAddrV4;

use iwarp_types::{AsyncEvent, ConnId, CqId, QpId, TermCode};

pub use iwarp_mpa::PrivateData;
pub use iwarp_wire::mpa::PRIVATE_DATA_MAX;

/// Why an active open (or an accepted connection before it was established) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectFailure {
    /// The peer answered the SYN with an RST (nobody listening).
    Refused,
    /// The connection was reset during MPA negotiation.
    Reset,
    /// SYN or MPA retransmissions ran out, or the MPA reply did not come in time.
    Timeout,
    /// No route, or the next hop did not answer ARP.
    Unreachable,
    /// The MPA exchange failed (bad request/reply, incompatible parameters).
    Mpa(TermCode),
    /// The local consumer aborted it.
    Aborted,
}

/// An engine event, drained with `Engine::poll_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer sent an MPA Request to a listener: answer with `accept` or `reject`.
    ConnectRequest {
        /// The new connection.
        conn: ConnId,
        /// The listening port it arrived on.
        local_port: u16,
        /// The peer.
        remote: SocketAddrV4,
        /// The initiator's private data (RFC 6581 IRD/ORD already removed).
        private_data: PrivateData,
        /// The initiator's IRD (RFC 6581; our ORD should not exceed it).
        ird: u32,
        /// The initiator's ORD (our IRD should be at least this).
        ord: u32,
        /// The initiator asked for peer-to-peer mode (RTR).
        p2p: bool,
    },
    /// The connection is in RDMA mode and `qp` is in RTS.
    Established {
        /// The connection.
        conn: ConnId,
        /// Its QP.
        qp: QpId,
        /// The peer's private data (the reply's for an initiator, empty for a responder).
        private_data: PrivateData,
    },
    /// The responder rejected our MPA Request.
    Rejected {
        /// The connection (being closed).
        conn: ConnId,
        /// The responder's private data.
        private_data: PrivateData,
    },
    /// A connection the caller knows (its own active open, or one reported by
    /// `ConnectRequest`, accepted or not) ended before RDMA mode.
    ConnectFailed {
        /// The connection (removed from the table).
        conn: ConnId,
        /// Why.
        reason: ConnectFailure,
    },
    /// The peer closed its half of an established connection (its FIN arrived in RDMA
    /// mode): the QP heard the LLP close and is Closing (nothing outstanding) or Error
    /// (a Bad LLP Close, Terminate sent); our FIN follows once the QP ran dry.
    /// `Disconnected` follows when the close completes. Linux siw reports a peer's close
    /// to the CM at this point (`IW_CM_EVENT_CLOSE` on `TCP_CLOSE_WAIT`, which rdma_cm
    /// turns into `RDMA_CM_EVENT_DISCONNECTED`), without waiting for our FIN to be
    /// acknowledged: a peer that vanished after its FIN cannot delay the news.
    PeerClosed {
        /// The connection.
        conn: ConnId,
        /// Its QP.
        qp: QpId,
    },
    /// The QP of an established connection left it: the LLP close completed from the
    /// RDMA point of view (our FIN acknowledged and the peer's FIN received), or the
    /// connection was reset or lost. The QP is in Idle or Error and can be destroyed or
    /// reused at once; the TCP connection may linger in TIME_WAIT without it.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Its QP.
        qp: QpId,
    },
    /// A verbs asynchronous event.
    Async(AsyncEvent),
    /// A completion was added to an armed CQ (for a CQ created with a sink: the sink's
    /// arm fired; at most one such event of a CQ is pending at a time).
    CqNotify(CqId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_bounds() {
        let p = PrivateData::new(b"hello").unwrap();
        assert_eq!(p.as_slice(), b"hello");
        assert!(PrivateData::new(&[0; PRIVATE_DATA_MAX + 1]).is_none());
        let ev = Event::Rejected {
            conn: ConnId(1),
            private_data: p,
        };
        assert_eq!(
            ev,
            Event::Rejected {
                conn: ConnId(1),
                private_data: p
            }
        );
    }
}
