//! The per-core shared-memory verbs service (see docs/APPS.md).
#![forbid(unsafe_code)]

mod cq;
mod events;
mod exec;
mod handle;
mod request;
mod rings;
mod service;
mod tables;

#[cfg(test)]
mod tests;

pub use handle::ServiceHandle;
pub use request::{
    AsyncObject, ClientId, ClientSnapshot, CmNotice, Freed, RingSpec, ServiceCounters,
    ServiceError, ServiceNotice, ServiceReply, ServiceRequest, WorkRing, CQE_FLAG_RING_MOVED,
};
pub use rings::NO_QP_HANDLE;
pub use service::{service_channel, service_channel_with, PortFilter, ServiceConfig, ShmService};
