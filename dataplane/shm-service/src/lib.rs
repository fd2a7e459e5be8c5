//! The per-core shared-memory verbs service (see docs/APPS.md).
#![forbid(unsafe_code)]

mod area;
mod handle;
mod request;
mod service;

pub use area::{CqControl, DoorbellBlock, DoorbellSet, DOORBELL_BITS, DOORBELL_WORDS};
pub use handle::ServiceHandle;
pub use request::{
    AsyncObject, ClientId, ClientSnapshot, CmNotice, Freed, RingSpec, ServiceCounters,
    ServiceError, ServiceNotice, ServiceReply, ServiceRequest, WorkRing, CQE_FLAG_RING_MOVED,
};
pub use service::{service_channel, PortFilter, ServiceConfig, ShmService};
