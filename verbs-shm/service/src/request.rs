//! What the control thread asks of a core's [`crate::ShmService`], what it answers, and
//! what it reports unasked (notices).
//!
//! Requests name engine objects by their engine ids (the ids this core's engine gave in
//! earlier replies) plus the client's identity (`client`, the control thread's client id):
//! the service checks that every engine id a request names belongs to that client on
//! this core (another client's object is `Invalid`). Client-visible handles (`cq`, `qp`,
//! `srq` as `u32`) are what the service writes into CQEs and notices.

use core::net::SocketAddrV4;

use iwarp_engine::{AcceptParams, CmError, ConnectFailure, ConnectParams, PrivateData};
use iwarp_rdma::mem::{MrAttr, MrInfo, MwBind, MwType};
use iwarp_rdma::srq::{SrqAttr, SrqModify};
use iwarp_rdma::{QpAttr, QpInfo, QpModify};
use iwarp_shm_ring::{CqControl, DoorbellBlock, LayoutError, Region};
use iwarp_types::{AsyncEventKind, ConnId, CqId, PdId, QpId, RegionId, SrqId, Stag, VerbError};

/// The control thread's identity of a client (the same on every core).
pub type ClientId = u32;

/// `flags` bit of a CQE slot (`CqeSlot::flags`, bits 0-1 are defined by the ring crate)
/// that marks the *last* slot of a CQ sub-ring that was replaced by `ResizeCq`: the
/// slot carries no completion; the consumer switches to the new sub-ring (announced in
/// the resize reply) and continues there. Every CQE of the old ring before the marker is
/// older than every CQE of the new ring.
pub const CQE_FLAG_RING_MOVED: u8 = 1 << 7;

/// A ring in the client's ring area: its region (header + slots, already initialised by
/// the control thread) and its number of slots. The service attaches to it with the
/// layout it derives from the ring's role and checks the header once.
#[derive(Clone, Debug)]
pub struct RingSpec {
    /// The ring's memory (a sub-region of the client's ring area).
    pub region: Region,
    /// Number of slots (a power of two).
    pub entries: u32,
}

/// A client-to-core ring (SQ, RQ, SRQ) and its doorbell bit in this core's
/// [`DoorbellBlock`] of the client (`< DOORBELL_BITS`, unique per client and core).
#[derive(Clone, Debug)]
pub struct WorkRing {
    /// The ring.
    pub ring: RingSpec,
    /// Its doorbell bit.
    pub doorbell: u32,
}

/// One per-core operation. See each variant for its reply.
#[derive(Debug)]
pub enum ServiceRequest {
    /// A client appears on this core: `doorbells` is this core's block of its ring area.
    /// Reply [`ServiceReply::Done`].
    AttachClient {
        /// The client.
        client: ClientId,
        /// This core's doorbell block of the client's ring area.
        doorbells: DoorbellBlock,
    },
    /// Tears down everything `client` has on this core: its connections are aborted (the
    /// peer sees an RST or a Terminate), then QPs, SRQs, CQs, MWs / MRs and PDs are
    /// destroyed and its listening ports closed. Reply [`ServiceReply::Detached`].
    DetachClient {
        /// The client.
        client: ClientId,
    },
    /// Allocate a PD. Reply [`ServiceReply::Pd`].
    AllocPd {
        /// The client.
        client: ClientId,
    },
    /// Deallocate a PD. Reply `Done`.
    DeallocPd {
        /// The client.
        client: ClientId,
        /// The engine PD.
        pd: PdId,
    },
    /// Create this core's engine CQ of the client's CQ `cq`, whose completions are
    /// written into its sub-ring `ring` (at least `depth + 1` entries: one is kept for a
    /// resize marker). Reply [`ServiceReply::Cq`].
    CreateCq {
        /// The client.
        client: ClientId,
        /// The client's CQ handle (for wake-up notices).
        cq: u32,
        /// Entries wanted.
        depth: u32,
        /// This core's completion sub-ring.
        ring: RingSpec,
        /// The CQ's control line (arm, events, overflows).
        control: CqControl,
    },
    /// Resize: completions continue in `ring` (at least `depth + 1` entries), the old
    /// sub-ring ends with a [`CQE_FLAG_RING_MOVED`] slot. Reply [`ServiceReply::Cq`].
    ResizeCq {
        /// The client.
        client: ClientId,
        /// The engine CQ.
        cq: CqId,
        /// New depth.
        depth: u32,
        /// The new sub-ring.
        ring: RingSpec,
    },
    /// Destroy the engine CQ. Reply `Done`.
    DestroyCq {
        /// The client.
        client: ClientId,
        /// The engine CQ.
        cq: CqId,
    },
    /// Create a QP (`attr` names this client's engine PD, CQs and SRQ). Reply
    /// [`ServiceReply::Qp`].
    CreateQp {
        /// The client.
        client: ClientId,
        /// The client's QP handle: the `qp` of its CQEs.
        qp: u32,
        /// Engine attributes.
        attr: QpAttr,
        /// Every send WR completes (the SIGNALED flag is forced on).
        sq_sig_all: bool,
        /// Its send queue ring.
        sq: WorkRing,
        /// Its receive queue ring (`None` with an SRQ).
        rq: Option<WorkRing>,
    },
    /// Modify QP. Reply `Done`.
    ModifyQp {
        /// The client.
        client: ClientId,
        /// The engine QP.
        qp: QpId,
        /// The change.
        modify: QpModify,
    },
    /// Query QP. Reply [`ServiceReply::QpInfo`].
    QueryQp {
        /// The client.
        client: ClientId,
        /// The engine QP.
        qp: QpId,
    },
    /// Destroy QP (aborting its connection first if it has one). Reply `Done`.
    DestroyQp {
        /// The client.
        client: ClientId,
        /// The engine QP.
        qp: QpId,
    },
    /// Create an SRQ. Reply [`ServiceReply::Srq`].
    CreateSrq {
        /// The client.
        client: ClientId,
        /// The client's SRQ handle.
        srq: u32,
        /// The engine PD.
        pd: PdId,
        /// Outstanding WRs.
        max_wr: u32,
        /// SGEs per WR.
        max_sge: u32,
        /// Limit event threshold (0: none).
        limit: u32,
        /// Its ring and doorbell bit.
        ring: WorkRing,
    },
    /// Modify SRQ. Reply [`ServiceReply::SrqMaxWr`].
    ModifySrq {
        /// The client.
        client: ClientId,
        /// The engine SRQ.
        srq: SrqId,
        /// The change.
        modify: SrqModify,
    },
    /// Query SRQ. Reply [`ServiceReply::SrqAttr`].
    QuerySrq {
        /// The client.
        client: ClientId,
        /// The engine SRQ.
        srq: SrqId,
    },
    /// Destroy SRQ. Reply `Done`.
    DestroySrq {
        /// The client.
        client: ClientId,
        /// The engine SRQ.
        srq: SrqId,
    },
    /// Register an MR (`attr.region` is the client's own RegionId; `attr.pd` its engine
    /// PD); `at`: the STag another core chose (same STag on every core). Reply
    /// [`ServiceReply::Stag`].
    RegMr {
        /// The client.
        client: ClientId,
        /// Attributes.
        attr: MrAttr,
        /// The STag to use (replication), or `None` to choose one.
        at: Option<Stag>,
    },
    /// Reregister an MR. Reply [`ServiceReply::Stag`].
    ReregMr {
        /// The client.
        client: ClientId,
        /// The MR.
        stag: Stag,
        /// New attributes.
        attr: MrAttr,
    },
    /// Allocate a fast-register MR STag. Reply [`ServiceReply::Stag`].
    AllocMr {
        /// The client.
        client: ClientId,
        /// The engine PD.
        pd: PdId,
        /// Largest length a fast-register may use.
        max_len: u64,
        /// Remote rights may be granted later.
        remote_access_flag: bool,
        /// The STag to use (replication), or `None`.
        at: Option<Stag>,
    },
    /// Query an MR. Reply [`ServiceReply::MrInfo`].
    QueryMr {
        /// The client.
        client: ClientId,
        /// The MR.
        stag: Stag,
    },
    /// Deallocate an STag (MR or MW). Reply `Done`.
    DeallocStag {
        /// The client.
        client: ClientId,
        /// The STag.
        stag: Stag,
    },
    /// Allocate an MW. Reply [`ServiceReply::Stag`].
    AllocMw {
        /// The client.
        client: ClientId,
        /// The engine PD.
        pd: PdId,
        /// Window type.
        kind: MwType,
        /// The STag to use (replication), or `None`.
        at: Option<Stag>,
    },
    /// Bind a type-1 MW by verb. Reply `Done`.
    BindMwType1 {
        /// The client.
        client: ClientId,
        /// The engine PD.
        pd: PdId,
        /// The bind.
        bind: MwBind,
    },
    /// The client's arena handle `arena` is `region` in the engine's memory (used to
    /// translate a Fast-Register WR's region). Reply `Done`.
    AddArena {
        /// The client.
        client: ClientId,
        /// The client's arena handle.
        arena: u32,
        /// The region of the shared memory table.
        region: RegionId,
    },
    /// Forget an arena handle. Reply `Done`.
    RemoveArena {
        /// The client.
        client: ClientId,
        /// The client's arena handle.
        arena: u32,
    },
    /// Listen on `port` on this core's engine (requests arriving there become
    /// [`ServiceNotice::Cm`] `ConnectRequest`s). Reply `Done`.
    Listen {
        /// The client.
        client: ClientId,
        /// The client's CM id of the listener (echoed in notices).
        cm_id: u32,
        /// TCP port.
        port: u16,
        /// Pending requests at most.
        backlog: u32,
    },
    /// Stop listening. Reply `Done`.
    Unlisten {
        /// The client.
        client: ClientId,
        /// TCP port.
        port: u16,
    },
    /// Active open of `qp` (Idle) from a local port steered to this core. Reply
    /// [`ServiceReply::Connecting`].
    Connect {
        /// The client.
        client: ClientId,
        /// The client's CM id (echoed in notices).
        cm_id: u32,
        /// The engine QP.
        qp: QpId,
        /// The peer.
        remote: SocketAddrV4,
        /// MPA parameters.
        params: ConnectParams,
    },
    /// Accept a connection request on `qp`. Reply `Done`.
    Accept {
        /// The client.
        client: ClientId,
        /// The client's CM id of the new connection (echoed in notices).
        cm_id: u32,
        /// The engine connection of the request.
        conn: ConnId,
        /// The engine QP (Idle).
        qp: QpId,
        /// MPA parameters.
        params: AcceptParams,
    },
    /// Reject a connection request. Reply `Done`.
    Reject {
        /// The client.
        client: ClientId,
        /// The engine connection of the request.
        conn: ConnId,
        /// Private data for the reject.
        private_data: PrivateData,
    },
    /// Graceful disconnect of `qp`'s connection. Reply `Done`.
    Disconnect {
        /// The client.
        client: ClientId,
        /// The engine QP.
        qp: QpId,
    },
    /// Abortive close of `qp`'s connection. Reply `Done`.
    Abort {
        /// The client.
        client: ClientId,
        /// The engine QP.
        qp: QpId,
    },
    /// No-op round trip: once answered, every request sent before was handled.
    /// Reply `Done`.
    Fence,
    /// Per-client object counts and counters of this core. Reply
    /// [`ServiceReply::Snapshot`].
    Snapshot,
}

/// The objects `DetachClient` freed on this core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Freed {
    /// Connections aborted (established or being set up).
    pub conns: u32,
    /// QPs destroyed.
    pub qps: u32,
    /// SRQs destroyed.
    pub srqs: u32,
    /// CQs destroyed.
    pub cqs: u32,
    /// MR / MW STags deallocated.
    pub stags: u32,
    /// PDs deallocated.
    pub pds: u32,
    /// Listening ports closed.
    pub listeners: u32,
    /// Objects that refused to go (an engine error; should be 0).
    pub failed: u32,
}

/// One client's objects and counters on one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientSnapshot {
    /// The client.
    pub client: ClientId,
    /// PDs.
    pub pds: u32,
    /// CQs.
    pub cqs: u32,
    /// QPs.
    pub qps: u32,
    /// SRQs.
    pub srqs: u32,
    /// MR / MW STags.
    pub stags: u32,
    /// Listening ports.
    pub listeners: u32,
    /// Connections (being set up or up).
    pub conns: u32,
    /// Arenas known.
    pub arenas: u32,
    /// Work requests posted to the engine from rings.
    pub wrs_posted: u64,
    /// Work requests completed in error by the service (decode or engine error).
    pub wrs_rejected: u64,
    /// CQEs written to the client's CQ rings.
    pub cqes: u64,
    /// Completions refused because a CQ ring was full (CQ overflow: the QP's CQ error).
    pub cq_ring_full: u64,
    /// Doorbell bits rung that name no ring.
    pub stray_doorbells: u64,
}

/// Service-wide counters of one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceCounters {
    /// Requests handled.
    pub requests: u64,
    /// Notices queued.
    pub notices: u64,
    /// Notices dropped (queue full; CQ wake-ups are retried, not dropped).
    pub notices_dropped: u64,
    /// Replies dropped (reply queue full).
    pub replies_dropped: u64,
    /// Rings found corrupt.
    pub rings_corrupt: u64,
    /// Engine events claimed.
    pub events: u64,
    /// QPs destroyed during their graceful close and left to TCP to finish it.
    pub closes_released: u64,
    /// QPs destroyed during their graceful close whose close did not get far enough in
    /// time: the connection was reset.
    pub close_lingers_expired: u64,
}

/// The answer to a [`ServiceRequest`] (see each request for which).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceReply {
    /// Done, nothing to report.
    Done,
    /// `DetachClient`: what was freed.
    Detached(Freed),
    /// `AllocPd`.
    Pd(PdId),
    /// `CreateCq`, `ResizeCq`: the engine CQ and the depth provided.
    Cq {
        /// The engine CQ.
        cq: CqId,
        /// The depth provided.
        depth: u32,
    },
    /// `CreateQp`: the engine QP and the attributes provided.
    Qp {
        /// The engine QP.
        qp: QpId,
        /// Attributes provided.
        attr: QpAttr,
    },
    /// `QueryQp`.
    QpInfo(QpInfo),
    /// `CreateSrq`: the engine SRQ, WRs and SGEs provided.
    Srq {
        /// The engine SRQ.
        srq: SrqId,
        /// WRs provided.
        max_wr: u32,
        /// SGEs provided.
        max_sge: u32,
    },
    /// `ModifySrq`: the WRs provided.
    SrqMaxWr(u32),
    /// `QuerySrq`.
    SrqAttr(SrqAttr),
    /// `RegMr`, `ReregMr`, `AllocMr`, `AllocMw`.
    Stag(Stag),
    /// `QueryMr`.
    MrInfo(MrInfo),
    /// `Connect`: the engine connection and the local port chosen.
    Connecting {
        /// The engine connection.
        conn: ConnId,
        /// The local port (steered to this core).
        local_port: u16,
    },
    /// `Snapshot`.
    Snapshot {
        /// Service-wide counters.
        counters: ServiceCounters,
        /// Per attached client (at most the client table's size).
        clients: Vec<ClientSnapshot>,
    },
}

/// Why a request failed (nothing changed, except for `DetachClient`, which frees what it
/// can), or why the control thread got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceError {
    /// No reply within the timeout (the reply, if it comes, is discarded).
    Timeout,
    /// The service is gone (its core stopped).
    CoreGone,
    /// The request queue is full.
    QueueFull,
    /// The engine refused a verb.
    Verb(VerbError),
    /// The engine refused a CM call.
    Cm(CmError),
    /// A ring does not attach (bad header, too small, misaligned).
    Ring(LayoutError),
    /// The client is not attached on this core (or already is, for `AttachClient`).
    UnknownClient,
    /// A table of the service is full (clients, CQs, QPs, SRQs, doorbell bits, ...).
    TableFull,
    /// The request is not valid: names an object of another client, a doorbell bit out
    /// of range or already used, ... (the text says what).
    Invalid(&'static str),
    /// `DestroyQp` during the QP's graceful close, before its FIN is out and acknowledged
    /// data: ask again (the service resets the connection after its linger time).
    CloseUnderway,
}

impl core::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ServiceError::Timeout => write!(f, "core service did not answer in time"),
            ServiceError::CoreGone => write!(f, "core service is gone"),
            ServiceError::QueueFull => write!(f, "core service request queue is full"),
            ServiceError::Verb(e) => write!(f, "verb failed: {e:?}"),
            ServiceError::Cm(e) => write!(f, "connection management failed: {e}"),
            ServiceError::Ring(e) => write!(f, "ring does not attach: {e}"),
            ServiceError::UnknownClient => write!(f, "client not attached on this core"),
            ServiceError::TableFull => write!(f, "core service table full"),
            ServiceError::Invalid(why) => write!(f, "invalid request: {why}"),
            ServiceError::CloseUnderway => {
                write!(f, "the QP's graceful close is under way: ask again")
            }
        }
    }
}

impl std::error::Error for ServiceError {}

impl From<VerbError> for ServiceError {
    fn from(e: VerbError) -> ServiceError {
        ServiceError::Verb(e)
    }
}

impl From<CmError> for ServiceError {
    fn from(e: CmError) -> ServiceError {
        ServiceError::Cm(e)
    }
}

impl From<LayoutError> for ServiceError {
    fn from(e: LayoutError) -> ServiceError {
        ServiceError::Ring(e)
    }
}

/// A connection-management event of a client's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmNotice {
    /// A peer asked to connect to a port the client listens on: answer with `Accept`
    /// (with a QP created on this core) or `Reject`.
    ConnectRequest {
        /// The listener's CM id.
        listen_cm_id: u32,
        /// The engine connection.
        conn: ConnId,
        /// The peer.
        remote: SocketAddrV4,
        /// Our address (the listening port; the IP is the port's).
        local_port: u16,
        /// Initiator's private data.
        private_data: PrivateData,
        /// Initiator's IRD.
        ird: u32,
        /// Initiator's ORD.
        ord: u32,
    },
    /// The connection is up, its QP in RTS.
    Established {
        /// The client's CM id.
        cm_id: u32,
        /// The engine connection.
        conn: ConnId,
        /// The engine QP.
        qp: QpId,
        /// The peer's private data (empty for a responder).
        private_data: PrivateData,
    },
    /// The peer rejected our request.
    Rejected {
        /// The client's CM id.
        cm_id: u32,
        /// The engine connection.
        conn: ConnId,
        /// The peer's private data.
        private_data: PrivateData,
    },
    /// The connection failed before it was established.
    ConnectFailed {
        /// The client's CM id.
        cm_id: u32,
        /// The engine connection.
        conn: ConnId,
        /// Why.
        reason: ConnectFailure,
    },
    /// The established connection ended; the QP is Idle or Error.
    Disconnected {
        /// The client's CM id.
        cm_id: u32,
        /// The engine connection.
        conn: ConnId,
        /// The engine QP.
        qp: QpId,
    },
}

/// The object an asynchronous event concerns, as the client's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncObject {
    /// A QP (the client's QP handle).
    Qp(u32),
    /// A CQ (the client's CQ handle).
    Cq(u32),
    /// An SRQ (the client's SRQ handle).
    Srq(u32),
}

/// Something the service tells the control thread unasked.
// CM notices carry private data inline (512 bytes): boxing would allocate on the core.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceNotice {
    /// A CM event of a client's connection or listener.
    Cm {
        /// The client.
        client: ClientId,
        /// The event.
        event: CmNotice,
    },
    /// An asynchronous event of a client's QP, CQ or SRQ.
    Async {
        /// The client.
        client: ClientId,
        /// The object.
        object: AsyncObject,
        /// What happened.
        kind: AsyncEventKind,
    },
    /// A client CQ's arm fired on this core: write its completion channel's eventfd.
    CqWake {
        /// The client.
        client: ClientId,
        /// The client's CQ handle.
        cq: u32,
    },
    /// A ring of the client broke the index protocol: its QP (or SRQ) was moved to
    /// Error (a `QpFatal`-class async event follows for a QP); for a CQ sub-ring, the
    /// QPs completing into it go to Error with a CQ error as their completions are
    /// refused.
    RingCorrupt {
        /// The client.
        client: ClientId,
        /// The object whose ring it was.
        object: AsyncObject,
    },
}
