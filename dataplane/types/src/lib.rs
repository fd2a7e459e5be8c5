//! Shared vocabulary of the iWARP engine.
//!
//! Every crate of the dataplane speaks these types: virtual time ([`Instant`],
//! [`Duration`]), resource handles, the verbs work requests and work completions of the
//! RDMA Verbs specification, asynchronous events, the RFC 5040/5041/5044 Terminate codes,
//! and the [`Memory`] interface through which the engine reads and writes registered
//! memory that the caller owns.
//!
//! Nothing here does I/O, reads a clock or allocates.
#![forbid(unsafe_code)]

mod access;
mod budget;
mod cqe;
mod error;
mod event;
mod ids;
mod memory;
mod term;
mod time;
mod wr;

pub use access::Access;
pub use budget::SecondBudget;
pub use cqe::{Cqe, WcOpcode, WcStatus};
pub use error::VerbError;
pub use event::{AsyncEvent, AsyncEventKind, EventResource};
pub use ids::{ConnId, CqId, PdId, QpId, RegionId, SrqId, Stag};
pub use memory::{Memory, MemoryFault, VecMemory};
pub use term::{TermCode, TermLayer};
pub use time::{Duration, Instant};
pub use wr::{QpState, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, MAX_SGE};
