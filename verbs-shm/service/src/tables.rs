//! The service's state: clients and the engine objects each owns on this core.
//!
//! Every table is bounded: clients by `ServiceConfig::max_clients`, doorbell bits by
//! [`DOORBELL_BITS`] per client, engine objects by the engine's own limits (an id the
//! engine gave is unique). The maps are created with their capacity; the fast path only
//! looks up and never inserts.

use std::collections::HashMap;

use iwarp_shm_ring::{Consumer, DoorbellBlock, DoorbellSet, DOORBELL_BITS};
use iwarp_types::{ConnId, CqId, PdId, QpId, RegionId, SrqId, Stag};

use crate::request::{ClientId, ClientSnapshot};

/// What a doorbell bit of a client names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bell {
    /// Nothing (a stray ring is counted and ignored).
    None,
    /// The SQ of an engine QP.
    Sq(QpId),
    /// The RQ of an engine QP.
    Rq(QpId),
    /// An engine SRQ.
    Srq(SrqId),
}

/// A client attached to this core.
pub(crate) struct Client {
    pub(crate) id: ClientId,
    pub(crate) doorbells: DoorbellBlock,
    pub(crate) rung: Box<DoorbellSet>,
    /// Doorbell bit → ring ([`DOORBELL_BITS`] entries).
    pub(crate) bells: Box<[Bell]>,
    pub(crate) pds: Vec<PdId>,
    pub(crate) stags: Vec<Stag>,
    /// Arena handle → region.
    pub(crate) arenas: HashMap<u32, RegionId>,
    /// Listening ports and their CM ids.
    pub(crate) listeners: Vec<(u16, u32)>,
    pub(crate) stats: ClientSnapshot,
}

impl Client {
    pub(crate) fn new(id: ClientId, doorbells: DoorbellBlock) -> Client {
        Client {
            id,
            doorbells,
            rung: Box::default(),
            bells: vec![Bell::None; DOORBELL_BITS as usize].into_boxed_slice(),
            pds: Vec::new(),
            stags: Vec::new(),
            arenas: HashMap::new(),
            listeners: Vec::new(),
            stats: ClientSnapshot {
                client: id,
                ..ClientSnapshot::default()
            },
        }
    }

    /// True if bit `b` is in range and free.
    pub(crate) fn bell_free(&self, b: u32) -> bool {
        self.bells.get(b as usize) == Some(&Bell::None)
    }

    pub(crate) fn set_bell(&mut self, b: u32, bell: Bell) {
        if let Some(slot) = self.bells.get_mut(b as usize) {
            *slot = bell;
        }
    }
}

/// A QP of a client.
pub(crate) struct QpEntry {
    pub(crate) client: ClientId,
    /// The client's QP handle (the `qp` of its CQEs).
    pub(crate) handle: u32,
    pub(crate) sq: Consumer,
    pub(crate) sq_bit: u32,
    pub(crate) rq: Option<(Consumer, u32)>,
    pub(crate) send_cq: CqId,
    pub(crate) recv_cq: CqId,
    pub(crate) sig_all: bool,
    /// In the pending list (a ring left non-empty).
    pub(crate) sq_pending: bool,
    pub(crate) rq_pending: bool,
    /// Its ring broke the protocol: never served again.
    pub(crate) broken: bool,
    /// Its connection and the client's CM id of it.
    pub(crate) conn: Option<(ConnId, u32)>,
    /// When the client first asked to destroy it during its graceful close.
    pub(crate) linger_since: Option<iwarp_types::Instant>,
}

/// An SRQ of a client.
pub(crate) struct SrqEntry {
    pub(crate) client: ClientId,
    pub(crate) handle: u32,
    pub(crate) ring: Consumer,
    pub(crate) bit: u32,
    /// The CQ of the error completions of malformed SRQ slots (the recv CQ of the
    /// first QP that used it; `None`: such slots are counted and dropped).
    pub(crate) err_cq: Option<CqId>,
    pub(crate) pending: bool,
    pub(crate) broken: bool,
}

/// A CQ of a client: this core's engine CQ, whose sink ([`crate::cq::RingSink`], owned
/// by the engine) writes the client's sub-ring.
pub(crate) struct CqEntry {
    pub(crate) client: ClientId,
    pub(crate) handle: u32,
    /// In the CQ pending list (a wake-up to retry).
    pub(crate) pending: bool,
    /// A wake-up could not be queued: retry.
    pub(crate) wake_pending: bool,
}

/// A connection being set up (requested by a peer, or our active open) or up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnEntry {
    pub(crate) client: ClientId,
    pub(crate) cm_id: u32,
    pub(crate) qp: Option<QpId>,
    /// The client was told `Disconnected` when the peer closed (`Event::PeerClosed`);
    /// the engine's `Disconnected` at the end of the close is not told again.
    pub(crate) close_told: bool,
}

/// A receive ring whose doorbell was taken and that is not served yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxRing {
    Rq(QpId),
    Srq(SrqId),
}

/// Arenas a client may name on one core.
pub(crate) const ARENAS_MAX: usize = 4096;
