//! The per-core shared-memory verbs service (docs/APPS.md): [`ShmService`], an
//! `iwarp_runtime::App` started on every dataplane core of iwarpd. It is the only code
//! that touches the engine for shared-memory clients.
//!
//! # Control thread interface
//!
//! [`service_channel`]`(core, capacity)` returns a [`ServiceHandle`] (for the control
//! thread) and the [`ShmService`] (for the core). Three bounded lock-free queues join
//! them: requests, replies (matched by id), notices.
//! - [`ServiceHandle::call`] sends a [`ServiceRequest`] and waits for its
//!   [`ServiceReply`] (or [`ServiceError::Timeout`] / `CoreGone` / `QueueFull`);
//!   [`ServiceHandle::send`] is fire-and-forget; [`ServiceRequest::Fence`] is a
//!   quiescence barrier (every earlier request was handled when it answers).
//! - Requests name engine objects by the ids this core's engine gave (replies of
//!   `AllocPd`, `CreateCq`, ...) plus the client id; the service refuses objects of
//!   another client (`Invalid`). Client handles (`cq`, `qp`, `srq`) given at creation are
//!   what CQEs and notices carry.
//! - [`ServiceHandle::poll_notice`]: CM events ([`CmNotice`]), async events, CQ wake-ups
//!   (write the CQ's channel eventfd), corrupt rings. A full notice queue drops (counted)
//!   except CQ wake-ups, which stay pending on their CQ and are retried each poll.
//!
//! # Data path (`poll`: bounded, no system call; allocation-free in steady state)
//!
//! 1. Up to `requests_per_poll` control requests.
//! 2. Every attached client's [`iwarp_shm_ring::DoorbellBlock`] of this core is taken; each
//!    bit maps (a table of `DOORBELL_BITS` per client) to an SQ, RQ or SRQ, which joins the
//!    pending list once. Unmapped bits are counted (`stray_doorbells`) and ignored.
//! 3. Up to `rings_per_poll` pending rings are served, `ring_burst` slots each: a slot is
//!    decoded, a FastReg's region (the client's arena handle) translated through the
//!    client's arena map, and posted to the engine. An SQ slot is decoded straight into
//!    the engine's WQE (`decode_send_wr_into` inside `Rnic::post_send_with`: no copy of
//!    the WR) and the QP's engine doorbell is rung once per burst; an RQ / SRQ slot goes
//!    through `decode_recv_wr`. A decode error completes with `InvalidWqe` (opcode
//!    `Send` / `Recv`); an unknown arena with `InvalidPd`; an engine refusal with the matching status (these error
//!    completions go into the CQ's sink like the engine's, `Engine::push_completion`).
//!    A ring left non-empty stays pending. Corrupt ring indices: the QP goes to Error,
//!    its rings are never served again, a `RingCorrupt` notice follows.
//! 4. Wake-ups the notice queue had no room for are retried (the CQ pending list).
//!
//! Completions do not wait for `poll`: each client CQ's engine CQ is created with a
//! `RingSink` (`iwarp_rdma::cq::CqSink`, in `cq.rs`) over the client's CQ sub-ring of
//! this core, so the engine encodes every completion once, straight into the slot the
//! client polls, while it handles the frame (or verb) that completed the WR.
//!
//! # CQE convention (for the client library and C)
//!
//! - The `qp` field of a CQE slot carries the client's **QpHandle**, not the engine id
//!   (the engine QP is named so with `Rnic::set_qp_completion_id` at `CreateQp`);
//!   [`NO_QP_HANDLE`] (`u32::MAX`) for an error completion of a malformed SRQ slot (it
//!   goes to the recv CQ of the first QP created on that SRQ).
//! - A sub-ring of `entries` slots holds `entries - 1` completions: one slot stays free
//!   for the [`CQE_FLAG_RING_MOVED`] marker (flags bit 7, no completion) that ends a
//!   sub-ring replaced by `ResizeCq`; the consumer continues in the new sub-ring.
//!   `CreateCq` / `ResizeCq` refuse a sub-ring of fewer than `depth + 1` slots (the
//!   sub-ring is the engine CQ).
//! - A service-made error CQE is ordered after every completion the engine had written
//!   when its slot was served; WRs still in flight may complete after it.
//! - A full sub-ring refuses the completion: the CQ overflows as in the verbs (async
//!   "CQ Overflow Detected" for the CQ, the QP to Terminate with a CQ error); unread
//!   slots are never overwritten; the CQ's `overflows` word counts refused completions.
//!   A sub-ring whose consumer index the client broke refuses everything the same way,
//!   and the control thread hears `RingCorrupt` instead of the overflow.
//! - After writing a CQE the sink calls `CqControl::try_fire(solicited or error)` (the
//!   only arm of a client CQ); the winner makes the engine emit `Event::CqNotify`, on
//!   which the service queues a [`ServiceNotice::CqWake`].
//!
//! # Events
//!
//! `on_event` claims the CM events of connections of its clients (active opens it made,
//! requests to ports a client listens on, accepted connections), async events of its QPs,
//! CQs and SRQs, and `CqNotify` of its CQs (a client's arm fired: `CqWake`). A connection request that cannot be notified
//! (queue or table full) is rejected at once.
//!
//! # Teardown
//!
//! `DetachClient`: pending requests rejected, QPs aborted (RST) and destroyed, then SRQs,
//! CQs, MWs, MRs, PDs, listening ports; the reply says what was freed ([`Freed`]).
#![forbid(unsafe_code)]

mod cq;
mod events;
mod exec;
mod handle;
mod request;
mod rings;
mod service;
mod tables;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

#[cfg(test)]
mod tests;

pub use handle::ServiceHandle;
pub use request::{
    AsyncObject, ClientId, ClientSnapshot, CmNotice, Freed, RingSpec, ServiceCounters,
    ServiceError, ServiceNotice, ServiceReply, ServiceRequest, WorkRing, CQE_FLAG_RING_MOVED,
};
pub use rings::NO_QP_HANDLE;
pub use service::{service_channel, service_channel_with, PortFilter, ServiceConfig, ShmService};
