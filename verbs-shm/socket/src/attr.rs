//! Attributes of the device, ports and verbs objects as they cross the socket. They mirror
//! the engine's types (`iwarp-rdma`) but are the protocol's own, so that the ABI does not
//! move when the engine does.

use serde::{Deserialize, Serialize};

use crate::{ArenaHandle, ChannelHandle, CqHandle, PdHandle, QpHandle, SrqHandle, StagValue};

/// Query Device (verbs 8.2.1, "Query RNIC").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAttr {
    /// Vendor / implementation name.
    pub vendor: String,
    /// The daemon's name.
    pub daemon: String,
    /// Daemon version (crate version).
    pub version: String,
    /// Number of ports.
    pub ports: u32,
    /// Dataplane cores serving QPs.
    pub cores: u32,
    /// Most QPs this client may hold.
    pub max_qp: u32,
    /// Most WRs per SQ or RQ.
    pub max_qp_wr: u32,
    /// Most SGEs per WR.
    pub max_sge: u32,
    /// Most CQs this client may hold.
    pub max_cq: u32,
    /// Most entries per CQ.
    pub max_cqe: u32,
    /// Most MRs (and MWs) this client may hold.
    pub max_mr: u32,
    /// Largest MR in bytes.
    pub max_mr_size: u64,
    /// Most PDs this client may hold.
    pub max_pd: u32,
    /// Most SRQs this client may hold.
    pub max_srq: u32,
    /// Most WRs per SRQ.
    pub max_srq_wr: u32,
    /// Largest IRD (inbound RDMA Reads outstanding) per QP.
    pub max_ird: u32,
    /// Largest ORD (outbound RDMA Reads outstanding) per QP.
    pub max_ord: u32,
    /// Most bytes of arena this client may hold.
    pub max_arena_bytes: u64,
    /// Private data bytes in a connect / accept / reject.
    pub max_private_data: u32,
    /// Memory windows (type 1 and 2) supported.
    pub memory_windows: bool,
    /// Shared receive queues supported.
    pub srq: bool,
}

/// Query Port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortAttr {
    /// Index (0-based).
    pub index: u32,
    /// IPv4 address.
    pub ip: [u8; 4],
    /// Prefix length.
    pub prefix_len: u8,
    /// MAC address.
    pub mac: [u8; 6],
    /// IP MTU.
    pub mtu: u32,
    /// The DPDK device (PCI address or vdev string).
    pub device: String,
    /// Link up.
    pub link_up: bool,
    /// Link speed in Mbit/s (0 unknown).
    pub speed_mbps: u32,
    /// Link changes to up since start (the first up included).
    pub link_ups: u64,
    /// Link changes to down since start.
    pub link_downs: u64,
    /// The DPDK driver (`net_virtio`, `net_ice`, `net_mlx5`, `net_memif`, ...).
    pub driver: String,
    /// Queue pairs in use (one per dataplane core).
    pub queues: u16,
    /// Receive queues the device offers.
    pub max_rx_queues: u16,
    /// Transmit queues the device offers.
    pub max_tx_queues: u16,
    /// Receive offload capabilities, DPDK's names, space-separated.
    pub rx_offloads: String,
    /// Transmit offload capabilities, DPDK's names, space-separated.
    pub tx_offloads: String,
    /// IPv4+TCP checksum offload in use on receive.
    pub rx_checksum: bool,
    /// IPv4+TCP checksum offload in use on transmit.
    pub tx_checksum: bool,
    /// RSS capability in words (`none`, `ipv4 ipv4-tcp reta 128`).
    pub rss_capa: String,
    /// RSS spreads received flows over the queues.
    pub rss: bool,
}

/// Where a ring lives in the client's ring area.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingRef {
    /// Byte offset of the ring header in the ring area (a multiple of 64).
    pub offset: u64,
    /// Number of slots (a power of two).
    pub entries: u32,
    /// Doorbell bit of the ring in its core's doorbell block (client-to-core rings: SQ, RQ,
    /// SRQ); `u32::MAX` for a CQ ring.
    pub doorbell_bit: u32,
}

/// Access rights (the engine's `Access` bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AccessFlags(pub u32);

impl AccessFlags {
    /// Local read (always implied for an MR).
    pub const LOCAL_READ: AccessFlags = AccessFlags(1 << 0);
    /// Local write.
    pub const LOCAL_WRITE: AccessFlags = AccessFlags(1 << 1);
    /// Remote read.
    pub const REMOTE_READ: AccessFlags = AccessFlags(1 << 2);
    /// Remote write.
    pub const REMOTE_WRITE: AccessFlags = AccessFlags(1 << 3);
    /// Memory windows may be bound to the MR.
    pub const MW_BIND: AccessFlags = AccessFlags(1 << 4);
    /// Every defined bit.
    pub const ALL: AccessFlags = AccessFlags(0x1f);

    /// True if every bit of `other` is set.
    pub const fn contains(self, other: AccessFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for AccessFlags {
    type Output = AccessFlags;
    fn bitor(self, rhs: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | rhs.0)
    }
}

/// Create CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqCreate {
    /// Entries wanted (at least this many are provided).
    pub depth: u32,
    /// Completion channel to signal on notification.
    pub channel: Option<ChannelHandle>,
}

/// A CQ as created: per dataplane core one completion ring (core `i` produces into
/// `rings[i]`; the client consumes them all), and a control block (one cache line:
/// `iwarp_shm_ring::CqControl`) for arming notifications.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqCreated {
    /// The CQ.
    pub cq: CqHandle,
    /// Entries provided.
    pub depth: u32,
    /// One completion ring per core.
    pub rings: Vec<RingRef>,
    /// Offset of the CQ's control block in the ring area.
    pub control: u64,
}

/// The QP capabilities (verbs 8.2.2 "Create QP" input modifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCap {
    /// Outstanding send WRs.
    pub max_send_wr: u32,
    /// Outstanding receive WRs (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
}

/// Create QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCreate {
    /// Its PD.
    pub pd: PdHandle,
    /// CQ of send completions.
    pub send_cq: CqHandle,
    /// CQ of receive completions.
    pub recv_cq: CqHandle,
    /// Shared receive queue instead of an RQ.
    pub srq: Option<SrqHandle>,
    /// Capabilities.
    pub cap: QpCap,
    /// Every send WR completes (otherwise only those with the signaled flag).
    pub sq_sig_all: bool,
    /// Outbound RDMA Reads outstanding (ORD).
    pub ord: u32,
    /// Inbound RDMA Reads outstanding (IRD).
    pub ird: u32,
    /// Inbound RDMA Read allowed.
    pub remote_read: bool,
    /// Inbound RDMA Write allowed.
    pub remote_write: bool,
    /// Memory window binds allowed on this QP.
    pub bind_enabled: bool,
    /// A connection request this QP will accept (passive side): the QP is placed on the
    /// core that owns the connection.
    pub for_cm_id: Option<crate::CmIdHandle>,
}

impl QpCreate {
    /// A QP of `pd` with `cq` for both queues: 8 WRs of 1 SGE each way, every send WR
    /// signaled, ORD = IRD = 1, remote read and write allowed, no binds, no SRQ, not for
    /// a connection request. The fields are public: change what differs with
    /// `QpCreate { ord: 4, ..QpCreate::new(pd, cq) }`.
    pub fn new(pd: PdHandle, cq: CqHandle) -> QpCreate {
        QpCreate {
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 1,
            },
            sq_sig_all: true,
            ord: 1,
            ird: 1,
            remote_read: true,
            remote_write: true,
            bind_enabled: false,
            for_cm_id: None,
        }
    }
}

/// A QP as created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCreated {
    /// The QP (also its number in completions and its doorbell bit).
    pub qp: QpHandle,
    /// The dataplane core serving it (index of its doorbell bitmap).
    pub core: u32,
    /// Its send queue ring.
    pub sq: RingRef,
    /// Its receive queue ring (`None` with an SRQ).
    pub rq: Option<RingRef>,
    /// Capabilities as provided (at least those asked).
    pub cap: QpCap,
}

/// QP states (verbs 6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QpStateValue {
    /// Idle.
    Idle,
    /// Ready to send.
    Rts,
    /// Closing.
    Closing,
    /// Terminate.
    Terminate,
    /// Error.
    Error,
}

/// Modify QP: each `Some` changes that attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpModifyReq {
    /// New state (only the transitions verbs allow; `Error` flushes).
    pub state: Option<QpStateValue>,
    /// New ORD.
    pub ord: Option<u32>,
    /// New IRD.
    pub ird: Option<u32>,
    /// New SQ depth (WRs).
    pub max_send_wr: Option<u32>,
    /// New RQ depth (WRs).
    pub max_recv_wr: Option<u32>,
    /// RQ limit (an async event when fewer receives remain), armed.
    pub rq_limit: Option<u32>,
}

/// A Terminate message sent or received (its layer/type/code word and the frame's
/// first bytes as recorded by the engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermInfo {
    /// Layer (4 bits), error type (4 bits) and code (8 bits), as RFC 5040 packs them.
    pub code: u16,
}

/// Query QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpInfoReply {
    /// The QP.
    pub qp: QpHandle,
    /// Its state.
    pub state: QpStateValue,
    /// Its core.
    pub core: u32,
    /// Capabilities.
    pub cap: QpCap,
    /// ORD.
    pub ord: u32,
    /// IRD.
    pub ird: u32,
    /// Connected.
    pub connected: bool,
    /// The Terminate it sent, if any.
    pub terminate_sent: Option<TermInfo>,
    /// The Terminate it received, if any.
    pub terminate_received: Option<TermInfo>,
}

/// Create SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqCreate {
    /// Its PD.
    pub pd: PdHandle,
    /// Outstanding WRs.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit for the SRQ-limit event (0: none).
    pub limit: u32,
}

/// An SRQ as created. An SRQ lives on one dataplane core; QPs that use it are placed
/// there (a connection on another core cannot use it: [`crate::ErrorCode::WrongCore`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqCreated {
    /// The SRQ.
    pub srq: SrqHandle,
    /// Its core (index of the doorbell bitmap it rings).
    pub core: u32,
    /// Doorbell bit of the SRQ in its core's bitmap.
    pub doorbell_bit: u32,
    /// Its ring.
    pub ring: RingRef,
    /// WRs provided.
    pub max_wr: u32,
    /// SGEs provided.
    pub max_sge: u32,
}

/// Query / modify SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqInfo {
    /// WRs.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit.
    pub limit: u32,
    /// Limit armed.
    pub armed: bool,
}

/// Register MR over `[offset, offset + len)` of one of the client's arenas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MrReg {
    /// Its PD.
    pub pd: PdHandle,
    /// The arena.
    pub arena: ArenaHandle,
    /// Offset in the arena.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Virtual address of the first byte (the client's pointer, or 0 for zero-based).
    pub va: u64,
    /// Zero-based addressing (tagged offsets from 0).
    pub zero_based: bool,
    /// Access rights.
    pub access: AccessFlags,
}

/// An MR (or fast-register MR) as registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MrRegistered {
    /// Its STag: the lkey, and the rkey if remote access was granted.
    pub stag: StagValue,
}

/// Query MR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MrInfoReply {
    /// The STag.
    pub stag: StagValue,
    /// PD.
    pub pd: PdHandle,
    /// Valid (registered or fast-registered, not invalidated).
    pub valid: bool,
    /// Access rights.
    pub access: AccessFlags,
    /// The arena (`None` for an unregistered fast-register MR).
    pub arena: Option<ArenaHandle>,
    /// Offset in the arena.
    pub offset: u64,
    /// Length.
    pub len: u64,
    /// Base tagged offset.
    pub va: u64,
    /// Windows bound to it.
    pub windows_bound: u32,
}

/// Memory window types (verbs 7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MwKind {
    /// Type 1: bound by the Bind verb, PD scope.
    Type1,
    /// Type 2: bound by a Bind WR, QP scope.
    Type2,
}

/// Bind a type 1 memory window (the Bind verb).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwBindReq {
    /// The window.
    pub mw: StagValue,
    /// The MR it exposes.
    pub mr: StagValue,
    /// First tagged offset (VA) in the MR.
    pub va: u64,
    /// Length.
    pub len: u64,
    /// Remote rights.
    pub access: AccessFlags,
    /// Zero-based window.
    pub zero_based: bool,
}

/// What an asynchronous event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventResourceRef {
    /// A QP.
    Qp(QpHandle),
    /// A CQ.
    Cq(CqHandle),
    /// An SRQ.
    Srq(SrqHandle),
    /// The device.
    Device,
}

/// Asynchronous event kinds (verbs 8.3.3, mirrored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AsyncKind {
    /// LLP close completed.
    LlpCloseComplete,
    /// Terminate received (its code).
    TerminateReceived(u16),
    /// LLP connection reset.
    LlpConnectionReset,
    /// LLP connection lost.
    LlpConnectionLost,
    /// LLP integrity error (CRC, markers).
    LlpIntegrityError(u16),
    /// Remote operation error.
    RemoteOperationError(u16),
    /// Protection error.
    ProtectionError(u16),
    /// Bad close.
    BadClose,
    /// Bad LLP close.
    BadLlpClose,
    /// CQ error.
    CqError,
    /// SRQ error.
    SrqError,
    /// Local QP catastrophic error.
    LocalQpCatastrophic,
    /// CQ overflow.
    CqOverflow,
    /// SRQ limit reached.
    SrqLimitReached,
    /// QP RQ limit reached.
    QpRqLimitReached,
    /// QP entered the Error state.
    QpErrorStateEntered,
}

/// An asynchronous event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncEventMsg {
    /// What it is about.
    pub resource: EventResourceRef,
    /// What happened.
    pub kind: AsyncKind,
}
