//! The messages.

use serde::{Deserialize, Serialize};

use crate::*;

/// From the client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientMsg {
    /// Echoed in the reply.
    pub seq: u64,
    /// What is asked.
    pub request: Request,
}

/// From the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerMsg {
    /// The answer to the request with this sequence number.
    Reply {
        /// The request's `seq`.
        seq: u64,
        /// The outcome.
        result: Result<Response, ErrorReply>,
    },
    /// Something happened.
    Event(Event),
}

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first message: the protocol version and a name for listings.
    Hello {
        /// [`crate::PROTOCOL_VERSION`].
        version: u16,
        /// The program's name (at most 64 bytes kept).
        name: String,
    },
    /// Device attributes.
    QueryDevice,
    /// Port attributes.
    QueryPort(u32),
    /// A new arena of `len` bytes of shared memory (hugepages if the daemon has them);
    /// the reply carries its memfd.
    AllocArena {
        /// Bytes (rounded up to the page size).
        len: u64,
        /// Insist on hugepages (fail rather than fall back to 4 KiB pages).
        hugepages_required: bool,
    },
    /// Import memory the client already has (a buffer it remapped in place onto a sealed
    /// memfd, see docs/APPS.md): the memfd travels with the message and becomes an arena.
    ImportArena {
        /// Bytes of the memfd to use (a multiple of the page size).
        len: u64,
    },
    /// Release an arena (no MR may use it).
    FreeArena(ArenaHandle),
    /// Allocate a PD.
    AllocPd,
    /// Deallocate a PD.
    DeallocPd(PdHandle),
    /// A completion channel: the eventfd travels with the message.
    CreateChannel,
    /// Destroy a completion channel (no CQ may use it).
    DestroyChannel(ChannelHandle),
    /// Create a CQ.
    CreateCq(CqCreate),
    /// Resize a CQ: the reply gives new rings; each core writes a `MOVED` entry as the last
    /// of its old ring and continues in the new one.
    ResizeCq {
        /// The CQ.
        cq: CqHandle,
        /// New depth.
        depth: u32,
    },
    /// Destroy a CQ (no QP may use it).
    DestroyCq(CqHandle),
    /// Create a QP (Idle).
    CreateQp(QpCreate),
    /// Modify a QP.
    ModifyQp {
        /// The QP.
        qp: QpHandle,
        /// What changes.
        modify: QpModifyReq,
    },
    /// Query a QP.
    QueryQp(QpHandle),
    /// Destroy a QP (its connection is reset if still up).
    DestroyQp(QpHandle),
    /// Create an SRQ.
    CreateSrq(SrqCreate),
    /// Modify an SRQ (`max_wr`, `limit` and arm).
    ModifySrq {
        /// The SRQ.
        srq: SrqHandle,
        /// New WRs.
        max_wr: Option<u32>,
        /// New limit (arms the limit event).
        limit: Option<u32>,
    },
    /// Query an SRQ.
    QuerySrq(SrqHandle),
    /// Destroy an SRQ (no QP may use it).
    DestroySrq(SrqHandle),
    /// Register an MR.
    RegMr(MrReg),
    /// Reregister an MR (new range, PD or access; same STag index, new key).
    ReregMr {
        /// The MR.
        stag: StagValue,
        /// The new registration.
        reg: MrReg,
    },
    /// Deregister an MR (or deallocate a fast-register MR).
    DeregMr(StagValue),
    /// Allocate a fast-register MR of at most `max_len` bytes (invalid until a
    /// Fast-Register WR).
    AllocMr {
        /// Its PD.
        pd: PdHandle,
        /// Largest registration.
        max_len: u64,
    },
    /// Query an MR.
    QueryMr(StagValue),
    /// Allocate a memory window.
    AllocMw {
        /// Its PD.
        pd: PdHandle,
        /// Type 1 or 2.
        kind: MwKind,
    },
    /// Bind a type 1 window (the Bind verb).
    BindMw(MwBindReq),
    /// Deallocate a memory window.
    DeallocMw(StagValue),
    /// A CM id.
    CreateCmId,
    /// Destroy a CM id (its connection is reset if up; its listen stops).
    DestroyCmId(CmIdHandle),
    /// Listen (`rdma_bind_addr` + `rdma_listen`). IP 0.0.0.0 means every port.
    Listen {
        /// The CM id.
        id: CmIdHandle,
        /// The local address.
        addr: Addr,
        /// Requests that may wait for accept.
        backlog: u32,
    },
    /// Active open (`rdma_resolve_addr/route` + `rdma_connect`).
    Connect {
        /// The CM id.
        id: CmIdHandle,
        /// Its QP (Idle, created without `for_cm_id`).
        qp: QpHandle,
        /// The peer.
        remote: Addr,
        /// MPA parameters.
        param: ConnParam,
    },
    /// Accept a connection request (`rdma_accept`).
    Accept {
        /// The request's CM id.
        id: CmIdHandle,
        /// The QP, created with `for_cm_id = Some(id)`.
        qp: QpHandle,
        /// MPA parameters.
        param: ConnParam,
    },
    /// Reject a connection request with private data (`rdma_reject`).
    Reject {
        /// The request's CM id.
        id: CmIdHandle,
        /// Private data of the MPA reject.
        private_data: Vec<u8>,
    },
    /// Graceful disconnect (FIN once the SQ drained) (`rdma_disconnect`).
    Disconnect(CmIdHandle),
    /// Abortive close (RST).
    Abort(CmIdHandle),
    /// Administration (iwarpctl): needs the admin policy for other clients' objects.
    Admin(AdminRequest),
    /// Orderly goodbye: the daemon frees everything of this client, then closes.
    Bye,
}

/// What a successful request returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Done; nothing to return.
    Ok,
    /// The answer to `Hello`: the ring-area memfd travels with it.
    Welcome(Welcome),
    /// Device attributes.
    Device(DeviceAttr),
    /// Port attributes.
    Port(PortAttr),
    /// A new arena: its memfd travels with it.
    Arena {
        /// The arena.
        arena: ArenaHandle,
        /// Its length in bytes.
        len: u64,
        /// Backed by hugepages.
        hugepages: bool,
    },
    /// A new PD.
    Pd(PdHandle),
    /// A new completion channel.
    Channel(ChannelHandle),
    /// A new or resized CQ.
    Cq(CqCreated),
    /// A new QP.
    Qp(QpCreated),
    /// Query QP.
    QpInfo(QpInfoReply),
    /// A new SRQ.
    Srq(SrqCreated),
    /// Query / modify SRQ.
    SrqInfo(SrqInfo),
    /// A new MR, fast-register MR or MW: its STag.
    Stag(StagValue),
    /// Query MR.
    MrInfo(MrInfoReply),
    /// A new CM id.
    CmId(CmIdHandle),
    /// Administration.
    Admin(AdminResponse),
}

/// What the daemon tells a new client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The daemon's protocol version.
    pub version: u16,
    /// The client's id (listings, logs).
    pub client_id: u32,
    /// Bytes of the ring area (its memfd travels with this message).
    pub ring_area_len: u64,
    /// Per dataplane core, the offset of its doorbell bitmap in the ring area
    /// (`iwarp_shm_ring::Doorbell`).
    pub doorbells: Vec<u64>,
    /// Bits of each doorbell bitmap (QP and SRQ handles' slots are below this).
    pub doorbell_bits: u32,
    /// Device attributes.
    pub device: DeviceAttr,
    /// Port attributes.
    pub ports: Vec<PortAttr>,
}

/// Unsolicited news.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// For a CM id.
    Cm {
        /// The CM id (for a `ConnectRequest`, the listener's).
        id: CmIdHandle,
        /// What happened.
        event: CmEvent,
    },
    /// An asynchronous event.
    Async(AsyncEventMsg),
    /// The daemon is shutting down; every object will be gone.
    Shutdown,
}

/// Administration requests (iwarpctl).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminRequest {
    /// The daemon's status.
    Status,
    /// The connected clients.
    Clients,
    /// Objects of one client, or of all (`None`).
    Objects(Option<u32>),
    /// Dataplane counters (per core and summed), as `name = value` lines.
    Counters,
    /// Ends a client's session: its socket closes, every call of it answers that the
    /// daemon is gone, its objects are freed (connections reset). Not the asker itself.
    DisconnectClient(u32),
    /// Moves a client's QP to Error: its connection (if any) is reset, its WRs flushed,
    /// its owner gets a QP-fatal asynchronous event.
    ResetQp {
        /// The client (as `Clients` lists it).
        client: u32,
        /// The QP's handle in that client (as `Objects` lists it).
        qp: u32,
    },
    /// Starts capturing into the file whose descriptor comes with the request (opened
    /// for writing by the asker, so the file is the asker's own): pcap, every frame of
    /// `port` (index; `None`: all ports) cut to `snaplen` bytes (`None`: whole frames).
    CaptureStart {
        /// Port index, or all.
        port: Option<u16>,
        /// Bytes kept of each frame.
        snaplen: Option<u32>,
    },
    /// Stops the running capture: the rest is written and the file closed.
    CaptureStop,
}

/// Administration answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminResponse {
    /// Status.
    Status(DaemonStatus),
    /// Clients.
    Clients(Vec<ClientInfo>),
    /// Objects.
    Objects(Vec<ObjectInfo>),
    /// Counters: per core, then the sum (core `None`).
    Counters(Vec<CounterSet>),
    /// An action was done: what, in a sentence.
    Done(String),
}

/// The daemon in one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Process id.
    pub pid: u32,
    /// Seconds since start.
    pub uptime_s: u64,
    /// Dataplane cores.
    pub cores: u32,
    /// Ports.
    pub ports: Vec<PortAttr>,
    /// Clients connected.
    pub clients: u32,
    /// Clients connected since start.
    pub clients_total: u64,
    /// Clients whose teardown is not finished.
    pub clients_tearing_down: u32,
    /// Objects held, by kind.
    pub totals: ObjectTotals,
}

/// Object counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectTotals {
    /// PDs.
    pub pds: u32,
    /// CQs.
    pub cqs: u32,
    /// QPs.
    pub qps: u32,
    /// SRQs.
    pub srqs: u32,
    /// MRs (incl. fast-register MRs).
    pub mrs: u32,
    /// MWs.
    pub mws: u32,
    /// CM ids.
    pub cm_ids: u32,
    /// Arenas.
    pub arenas: u32,
    /// Arena bytes.
    pub arena_bytes: u64,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// Id.
    pub id: u32,
    /// Name it gave.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Seconds connected.
    pub connected_s: u64,
    /// Objects held.
    pub totals: ObjectTotals,
}

/// One verbs object of a client, with its state and counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectInfo {
    /// The client.
    pub client: u32,
    /// `pd`, `cq`, `qp`, `srq`, `mr`, `mw`, `cm_id`, `arena`, `channel`.
    pub kind: String,
    /// Its handle (or STag) value.
    pub handle: u32,
    /// Its dataplane core, if it has one.
    pub core: Option<u32>,
    /// State (QP state, MR valid/invalid, CM state, ...).
    pub state: String,
    /// Details and counters as `key=value` pairs.
    pub detail: Vec<(String, String)>,
}

/// Counters of one core, or their sum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSet {
    /// The core, or `None` for the sum.
    pub core: Option<u32>,
    /// Name and value.
    pub values: Vec<(String, u64)>,
}
