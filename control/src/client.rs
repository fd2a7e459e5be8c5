//! One connected client: its socket, identity, ring area and handle tables.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use iwarp_shm_mem::SharedMapping;
use iwarp_shm_ring::{AreaView, RingHeap, DOORBELL_BITS};
use iwarp_shm_socket::{AccessFlags, Channel, MwKind, ObjectTotals, PeerCred, QpCap, RingRef};
use iwarp_types::{ConnId, CqId, PdId, QpId, RegionId, SrqId};

use crate::tables::{BitAlloc, Table};
use crate::ControlConfig;

/// Where a client is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Connected; `Hello` not seen yet.
    AwaitHello,
    /// Welcomed.
    Ready,
}

/// The client's ring area, daemon side.
pub struct Area {
    /// The memfd mapping (its fd went to the client with `Welcome`).
    pub mapping: Arc<SharedMapping>,
    /// The checked view.
    pub view: AreaView,
    /// Where rings go.
    pub heap: RingHeap,
}

/// A PD: one engine PD per core.
pub struct Pd {
    pub per_core: Vec<PdId>,
    /// QPs, SRQs, MRs and MWs that use it.
    pub users: u32,
}

/// A CQ: one engine CQ and one sub-ring per core.
pub struct Cq {
    pub per_core: Vec<CqId>,
    pub rings: Vec<RingRef>,
    pub depth: u32,
    pub channel: Option<u32>,
    /// Sub-rings replaced by `ResizeCq` (the client may still drain them); freed with
    /// the CQ.
    pub retired: Vec<u64>,
    /// Its CQ control line index.
    pub control: u32,
    /// QPs that use it.
    pub users: u32,
}

/// A QP on one core.
pub struct Qp {
    pub core: usize,
    pub id: QpId,
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub srq: Option<u32>,
    pub sq: RingRef,
    pub rq: Option<RingRef>,
    pub cap: QpCap,
    pub ord: u32,
    pub ird: u32,
    /// The CM id it is given to (connect or accept).
    pub cm: Option<u32>,
}

/// An SRQ on one core.
pub struct Srq {
    pub core: usize,
    pub id: SrqId,
    pub pd: u32,
    pub ring: RingRef,
    pub max_wr: u32,
    pub max_sge: u32,
    /// QPs that use it.
    pub users: u32,
}

/// A completion channel (the client's eventfd).
pub struct CompChannel {
    pub fd: OwnedFd,
    /// CQs that signal it.
    pub users: u32,
}

/// An arena: a shared mapping in the region table.
pub struct Arena {
    pub mapping: Arc<SharedMapping>,
    pub region: RegionId,
    pub len: u64,
    pub hugepages: bool,
    /// MRs over it.
    pub users: u32,
}

/// What an STag the client owns is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagKind {
    /// A registered MR.
    Mr,
    /// A fast-register MR.
    FastReg,
    /// A memory window.
    Mw(MwKind),
}

/// An MR, fast-register MR or MW, replicated on every core under one STag.
#[derive(Clone, Copy, Debug)]
pub struct StagObj {
    pub kind: StagKind,
    pub pd: u32,
    pub arena: Option<u32>,
    pub offset: u64,
    pub len: u64,
    pub va: u64,
    pub access: AccessFlags,
    /// Windows bound to it (type 1, by the Bind verb).
    pub windows: u32,
    /// For a bound type 1 window: the MR's STag.
    pub bound_to: Option<u32>,
}

/// Where a CM id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmState {
    /// Created.
    Idle,
    /// Listening on a TCP port on every core service whose port has address `ip`
    /// (0.0.0.0: all).
    Listening { port: u16, ip: [u8; 4] },
    /// A connection request waiting for accept or reject.
    Requested { core: usize, conn: ConnId },
    /// Active open in progress, or accepted and not yet established.
    Connecting { core: usize, conn: ConnId },
    /// Up.
    Connected { core: usize, conn: ConnId },
    /// Ended (disconnected, rejected, failed).
    Closed,
}

/// A CM id.
pub struct CmId {
    pub state: CmState,
    /// Its QP (connect / accept).
    pub qp: Option<u32>,
    /// The connection's ends (local, remote), known from `Connect` or the connection
    /// request; for the log.
    pub ends: Option<(SocketAddrV4, SocketAddrV4)>,
}

/// One client.
pub struct Client {
    pub id: u32,
    pub chan: Channel,
    pub cred: PeerCred,
    pub name: String,
    pub admin: bool,
    pub phase: Phase,
    pub connected_at: Instant,
    pub bad_frames: u32,
    pub area: Option<Area>,
    /// Cores on which `AttachClient` succeeded.
    pub attached: Vec<bool>,
    pub pds: Table<Pd>,
    pub cqs: Table<Cq>,
    pub qps: Table<Qp>,
    pub srqs: Table<Srq>,
    pub channels: Table<CompChannel>,
    pub arenas: Table<Arena>,
    pub cm_ids: Table<CmId>,
    pub stags: BTreeMap<u32, StagObj>,
    pub arena_bytes: u64,
    /// Per core: the doorbell bits in use.
    pub doorbells: Vec<BitAlloc>,
    /// Async events and CM events not delivered (socket full).
    pub events_dropped: u64,
}

impl Client {
    /// Ends the session from the daemon's side: the ring area says the daemon is gone
    /// (every post and poll answers DaemonGone) and the socket closes. Teardown follows.
    pub fn end_session(&self) {
        if let Some(a) = &self.area {
            a.view.set_daemon_state(iwarp_shm_ring::DAEMON_GONE);
        }
        self.chan.shutdown();
    }

    /// A fresh client on `chan`.
    pub fn new(
        id: u32,
        chan: Channel,
        cred: PeerCred,
        cores: usize,
        cfg: &ControlConfig,
    ) -> Client {
        let n = cfg.max_objects as usize;
        Client {
            id,
            chan,
            cred,
            name: String::new(),
            admin: false,
            phase: Phase::AwaitHello,
            connected_at: Instant::now(),
            bad_frames: 0,
            area: None,
            attached: vec![false; cores],
            pds: Table::new(n),
            cqs: Table::new(n.min(iwarp_shm_ring::MAX_CQS_PER_CLIENT as usize)),
            qps: Table::new(n),
            srqs: Table::new(n),
            channels: Table::new(n),
            arenas: Table::new(n),
            cm_ids: Table::new(n),
            stags: BTreeMap::new(),
            arena_bytes: 0,
            doorbells: (0..cores).map(|_| BitAlloc::new(DOORBELL_BITS)).collect(),
            events_dropped: 0,
        }
    }

    /// Object counts (exact: from the tables).
    pub fn totals(&self) -> ObjectTotals {
        let count =
            |k: fn(&StagKind) -> bool| self.stags.values().filter(|s| k(&s.kind)).count() as u32;
        ObjectTotals {
            pds: self.pds.len() as u32,
            cqs: self.cqs.len() as u32,
            qps: self.qps.len() as u32,
            srqs: self.srqs.len() as u32,
            mrs: count(|k| matches!(k, StagKind::Mr | StagKind::FastReg)),
            mws: count(|k| matches!(k, StagKind::Mw(_))),
            cm_ids: self.cm_ids.len() as u32,
            arenas: self.arenas.len() as u32,
            arena_bytes: self.arena_bytes,
        }
    }
}
