//! The verbs client library of iwarpd: the control socket to the daemon, and posts and
//! polls through shared-memory rings (docs/APPS.md). Names follow libibverbs and
//! librdmacm.
//!
//! ```no_run
//! use iwarp_verbs::*;
//! # fn main() -> Result<()> {
//! let ctx = Context::open("iwarpd")?;
//! let pd = ctx.alloc_pd()?;
//! let mut arena = ctx.alloc_arena(1 << 20)?;
//! let mr = pd.reg_mr(&arena, 0, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let mut cq = ctx.create_cq(256, None)?;
//! let mut qp = pd.create_qp(&QpInitAttr::new(&cq, &cq))?;
//! let cm = ctx.create_cm_event_channel()?;
//! let id = cm.create_id()?;
//! id.connect(&qp, "10.0.0.2:4791".parse().unwrap(), &ConnParam::default())?;
//! let ev = cm.get_event()?; // Established, Rejected or ConnectError
//! arena.as_mut_slice()[..5].copy_from_slice(b"hello");
//! qp.post_send(&SendWr {
//!     wr_id: 1,
//!     op: SendOp::Send,
//!     sgl: SgList::single(mr.sge(0, 5)?),
//!     flags: SendFlags::SIGNALED,
//! })?;
//! let mut wc = [EMPTY_CQE; 16];
//! let n = cq.poll(&mut wc)?;
//! # let _ = (ev, n); Ok(()) }
//! ```
//!
//! Objects hold a reference to what they use (a QP its PD, CQs and SRQ; an MR its PD
//! and arena; everything the context), so any drop order is safe: a resource is
//! destroyed in the daemon when it and everything using it are gone.
//!
//! When the daemon goes away, every call, post and poll returns [`Error::DaemonGone`]
//! (never a hang), waiting calls wake up, and every event fd becomes readable.
//!
//! Feature `tokio` (off by default) adds async waits on a tokio runtime: `Cq::next` and
//! `Cq::next_batch` for completions, `CmEventChannel::into_stream` and
//! `Context::async_event_stream` for events as a `futures_core::Stream`. The examples
//! `pingpong` and `write_bw` show the blocking API end to end.

mod arena;
mod channel;
mod cm;
mod conn;
mod context;
mod cq;
mod error;
mod mapping;
mod mr;
mod notify;
mod pd;
mod qp;
mod queue;
mod remap;
mod srq;
#[cfg(feature = "tokio")]
mod tokio_io;

#[cfg(test)]
mod tests;

pub use arena::Arena;
pub use channel::CompChannel;
pub use cm::{CmEventChannel, CmEventInfo, CmId, ListenAddr};
pub use context::{Context, DEFAULT_TIMEOUT, SOCKET_ENV};
pub use cq::{Cq, CQE_FLAG_RING_MOVED, EMPTY_CQE};
pub use error::{Error, Result};
pub use mr::{FastRegMr, Mr, Mw};
pub use pd::Pd;
pub use qp::{Qp, QpInitAttr};
pub use srq::{Srq, SrqInitAttr};
#[cfg(feature = "tokio")]
pub use tokio_io::{AsyncEventStream, CmEventStream};

/// The control protocol crate (all message and attribute types).
pub use iwarp_shm_socket as proto;
pub use iwarp_shm_socket::{
    Addr, ArenaHandle, AsyncEventMsg, AsyncKind, ChannelHandle, CmEvent, CmIdHandle, ConnParam,
    ConnectError, CqHandle, DeviceAttr, ErrorCode, ErrorReply, EventResourceRef, MrInfoReply,
    MwKind, PdHandle, PortAttr, QpCap, QpHandle, QpInfoReply, QpModifyReq, QpStateValue, SrqHandle,
    SrqInfo, TermInfo,
};
pub use iwarp_types::{
    Access, Cqe, QpId, RecvWr, RegionId, SendFlags, SendOp, SendWr, SgList, Sge, Stag, WcOpcode,
    WcStatus, MAX_SGE,
};
