//! The control path between the daemon's control thread and one dataplane core: two
//! bounded lock-free rings, [`Command`]s in, [`Reply`]s and [`Notice`]s out.
//!
//! The control thread holds a [`ControlHandle`] (blocking-with-timeout [`ControlHandle::call`],
//! non-blocking [`ControlHandle::send`] and [`ControlHandle::poll_notice`]); the core holds
//! the matching [`CoreControl`] and executes a bounded number of commands per loop
//! iteration. A reply is never lost for want of room: the core takes a command only while
//! the outbound ring has room for its reply, and notices leave that room free.

use core::fmt;
use core::net::SocketAddrV4;

use iwarp_engine::{AcceptParams, CmError, ConnectParams, Event, PrivateData};
use iwarp_rdma::mem::{MrAttr, MwType};
use iwarp_rdma::srq::SrqModify;
use iwarp_rdma::{QpAttr, QpInfo, QpModify};
use iwarp_types::{ConnId, CqId, Cqe, PdId, QpId, RecvWr, SendWr, SrqId, Stag, VerbError};

use crate::app::App;

/// Most completions one [`Op::PollCq`] returns.
pub const CQE_BATCH_MAX: usize = 16;

/// Identifies an app started on a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AppId(pub u32);

/// An app handed to a core (or back): a boxed [`App`] that may cross threads.
pub struct AppBox<M>(pub Box<dyn App<M> + Send>);

impl<M> fmt::Debug for AppBox<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppBox")
    }
}

/// What a command asks of the core. Verbs objects and connections belong to the engine of
/// the command's port.
#[derive(Debug)]
pub enum Op<M> {
    /// Allocate a protection domain.
    AllocPd,
    /// Deallocate a protection domain.
    DeallocPd(PdId),
    /// Create a CQ of at least `depth` entries.
    CreateCq {
        /// Entries.
        depth: u32,
    },
    /// Resize a CQ (modify CQ).
    ResizeCq {
        /// The CQ.
        cq: CqId,
        /// New depth.
        depth: u32,
    },
    /// Destroy a CQ.
    DestroyCq(CqId),
    /// Create a QP (Idle).
    CreateQp(QpAttr),
    /// Modify a QP (rings its doorbell).
    ModifyQp {
        /// The QP.
        qp: QpId,
        /// What changes.
        modify: QpModify,
    },
    /// Query a QP.
    QueryQp(QpId),
    /// Destroy a QP.
    DestroyQp(QpId),
    /// Create a shared receive queue.
    CreateSrq {
        /// Its PD.
        pd: PdId,
        /// Outstanding WRs.
        max_wr: u32,
        /// SGEs per WR.
        max_sge: u32,
        /// Limit (0: none).
        limit: u32,
    },
    /// Modify a shared receive queue.
    ModifySrq {
        /// The SRQ.
        srq: SrqId,
        /// What changes.
        modify: SrqModify,
    },
    /// Destroy a shared receive queue.
    DestroySrq(SrqId),
    /// Register a memory region over a region (`attr.region`) of the core's memory.
    RegMr(MrAttr),
    /// Deregister a memory region.
    DeregMr(Stag),
    /// Allocate a memory window.
    AllocMw {
        /// Its PD.
        pd: PdId,
        /// Type 1 or 2.
        kind: MwType,
    },
    /// Deallocate a memory window.
    DeallocMw(Stag),
    /// Listen on a TCP port.
    Listen {
        /// The port.
        port: u16,
        /// Connections that may await accept at once.
        backlog: usize,
    },
    /// Stop listening.
    Unlisten(u16),
    /// Active open of `qp` to `remote` from a local port whose return traffic the NIC
    /// steers to this core.
    Connect {
        /// The QP (Idle).
        qp: QpId,
        /// The peer.
        remote: SocketAddrV4,
        /// MPA parameters.
        params: ConnectParams,
    },
    /// Accept a connection reported by a `ConnectRequest` notice.
    Accept {
        /// The connection.
        conn: ConnId,
        /// The QP (Idle).
        qp: QpId,
        /// MPA parameters.
        params: AcceptParams,
    },
    /// Reject a connection reported by a `ConnectRequest` notice.
    Reject {
        /// The connection.
        conn: ConnId,
        /// Private data of the MPA reject.
        private_data: PrivateData,
    },
    /// Graceful close (FIN once the SQ drained).
    Disconnect(QpId),
    /// Abortive close (RST).
    Abort(QpId),
    /// Post a send-queue WR on a control-plane QP.
    PostSend {
        /// The QP.
        qp: QpId,
        /// The WR.
        wr: SendWr,
    },
    /// Post a receive WR on a control-plane QP.
    PostRecv {
        /// The QP.
        qp: QpId,
        /// The WR.
        wr: RecvWr,
    },
    /// Poll up to `max` (at most [`CQE_BATCH_MAX`]) completions.
    PollCq {
        /// The CQ.
        cq: CqId,
        /// Most completions wanted.
        max: usize,
    },
    /// Arm a CQ for a `CqNotify` notice.
    ReqNotifyCq {
        /// The CQ.
        cq: CqId,
        /// Only solicited completions.
        solicited_only: bool,
    },
    /// Publish the counters now (read them from the core's `CoreStats` afterwards).
    Snapshot,
    /// Start an app bound to the command's port.
    StartApp(AppBox<M>),
    /// Stop an app (its `shutdown` is not called): the reply hands it back.
    StopApp(AppId),
    /// Orderly shutdown: close everything, then the core's `run` returns.
    Shutdown {
        /// After this long, the connections still open are reset.
        grace_ms: u64,
    },
}

/// A command: a request id (echoed in the reply), the port (index in the core's port
/// list) and the operation.
#[derive(Debug)]
pub struct Command<M> {
    /// Request id.
    pub id: u64,
    /// Port index on the core.
    pub port: usize,
    /// What to do.
    pub op: Op<M>,
}

/// Completions returned by [`Op::PollCq`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqeBatch {
    len: usize,
    cqes: [Option<Cqe>; CQE_BATCH_MAX],
}

impl CqeBatch {
    /// The completions.
    pub fn iter(&self) -> impl Iterator<Item = &Cqe> {
        self.cqes[..self.len].iter().flatten()
    }

    /// Number of completions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn from_slice(cqes: &[Cqe]) -> CqeBatch {
        let mut b = CqeBatch::default();
        for (slot, c) in b.cqes.iter_mut().zip(cqes) {
            *slot = Some(*c);
            b.len += 1;
        }
        b
    }
}

/// What a successful command returns.
// Replies travel by value through a preallocated ring: boxing the larger variants would
// make the core allocate per reply.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Done<M> {
    /// Done, nothing to return.
    Ok,
    /// A new PD.
    Pd(PdId),
    /// A new CQ and its depth.
    Cq(CqId, u32),
    /// A CQ's new depth.
    CqDepth(u32),
    /// A new QP and its attributes as allocated.
    Qp(QpId, QpAttr),
    /// Query QP.
    QpInfo(QpInfo),
    /// A new SRQ (id, WRs, SGEs) or an SRQ's new size.
    Srq(SrqId, u32, u32),
    /// The SRQ's new size.
    SrqSize(u32),
    /// A new STag (MR or MW).
    Stag(Stag),
    /// A connection started (`Connect`: with the local port chosen).
    Conn(ConnId, u16),
    /// Polled completions.
    Cqes(CqeBatch),
    /// An app started.
    AppStarted(AppId),
    /// A stopped app, handed back.
    AppStopped(AppBox<M>),
}

/// Why a command failed (nothing changed) or a call gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The verbs layer refused.
    Verb(VerbError),
    /// Connection management refused.
    Cm(CmError),
    /// No port with that index on the core.
    NoSuchPort,
    /// No app with that id.
    NoSuchApp,
    /// The core's app table is full.
    AppTableFull,
    /// The core's table of control-plane QPs is full.
    TableFull,
    /// The memory region named by an MR does not exist in the core's memory.
    NoSuchRegion,
    /// No local port steers back to this core.
    NoSteeredPort,
    /// `PollCq` asked for more than [`CQE_BATCH_MAX`] or zero completions.
    BadBatch,
    /// The core is shutting down.
    ShuttingDown,
    /// The command ring stayed full until the timeout.
    RingFull,
    /// No reply before the timeout (the command may still run later).
    Timeout,
    /// The core's end of the rings is gone (its loop ended and the core was dropped).
    CoreGone,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for ControlError {}

impl From<VerbError> for ControlError {
    fn from(e: VerbError) -> ControlError {
        ControlError::Verb(e)
    }
}

impl From<CmError> for ControlError {
    fn from(e: CmError) -> ControlError {
        ControlError::Cm(e)
    }
}

/// The answer to one command.
#[derive(Debug)]
pub struct Reply<M> {
    /// The command's id.
    pub id: u64,
    /// The core that ran it.
    pub core: usize,
    /// The outcome.
    pub result: Result<Done<M>, ControlError>,
}

/// An engine event no app took, for the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The core.
    pub core: usize,
    /// The port index on the core.
    pub port: usize,
    /// The event.
    pub event: Event,
}

/// What travels from a core to the control thread.
#[derive(Debug)]
pub enum Outbound<M> {
    /// The answer to a command.
    Reply(Reply<M>),
    /// An event.
    Notice(Notice),
}

mod handle;

pub use handle::{control_channel, ControlHandle, CoreControl};

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::VecMemory;
    use std::time::Duration as StdDuration;

    #[test]
    fn call_times_out_when_nobody_answers() {
        let (mut h, core) = control_channel::<VecMemory>(0, 2, 4);
        let t = std::time::Instant::now();
        let r = h.call(0, Op::AllocPd, StdDuration::from_millis(20));
        assert_eq!(r.unwrap_err(), ControlError::Timeout);
        assert!(t.elapsed() >= StdDuration::from_millis(20));
        assert!(t.elapsed() < StdDuration::from_secs(2));
        // The command is there; the command ring fills and a call then times out too.
        h.send(0, Op::AllocPd).unwrap();
        assert_eq!(
            h.call(0, Op::AllocPd, StdDuration::from_millis(5))
                .unwrap_err(),
            ControlError::RingFull
        );
        assert!(h.core_alive());
        drop(core);
        assert!(!h.core_alive());
        // With the core gone a call fails at once, not after its timeout.
        let t = std::time::Instant::now();
        let (mut h, core) = control_channel::<VecMemory>(0, 2, 4);
        drop(core);
        let r = h.call(0, Op::AllocPd, StdDuration::from_secs(30));
        assert_eq!(r.unwrap_err(), ControlError::CoreGone);
        assert!(t.elapsed() < StdDuration::from_secs(1));
    }

    #[test]
    fn replies_match_ids_and_notices_are_kept() {
        let (mut h, core) = control_channel::<VecMemory>(3, 4, 8);
        let id = h.send(1, Op::AllocPd).unwrap();
        let c = core.pop_command().unwrap();
        assert_eq!((c.id, c.port), (id, 1));
        let ev = Event::CqNotify(CqId(9));
        assert!(core.push_notice(Notice {
            core: 3,
            port: 1,
            event: ev
        }));
        assert!(core.push_reply(Reply {
            id,
            core: 3,
            result: Ok(Done::Pd(PdId(5)))
        }));
        let r = h.poll_reply().unwrap();
        assert!(matches!(r.result, Ok(Done::Pd(PdId(5)))));
        assert_eq!(h.poll_notice().unwrap().event, ev);
        assert!(h.poll_notice().is_none());
    }

    #[test]
    fn notices_leave_room_for_replies() {
        let (_h, core) = control_channel::<VecMemory>(0, 2, 3);
        let n = Notice {
            core: 0,
            port: 0,
            event: Event::CqNotify(CqId(1)),
        };
        assert!(core.push_notice(n));
        assert!(!core.push_notice(n), "two slots are kept for replies");
        assert!(core.push_reply(Reply {
            id: 1,
            core: 0,
            result: Ok(Done::Ok)
        }));
        assert!(core.push_reply(Reply {
            id: 2,
            core: 0,
            result: Ok(Done::Ok)
        }));
        assert!(core.pop_command().is_none(), "no room for another reply");
    }

    #[test]
    fn cqe_batch_is_bounded() {
        let b = CqeBatch::from_slice(&[]);
        assert!(b.is_empty());
    }
}
