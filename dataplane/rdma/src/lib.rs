//! DDP (RFC 5041) and RDMAP (RFC 5040) with the semantics of the RDMA Verbs specification:
//! protection domains, completion queues, shared receive queues, queue pairs, memory
//! regions and memory windows of one engine.
//!
//! [`Rnic`] owns every object; verbs are its methods. The engine drives each QP with
//! [`Rnic::qp_establish`], [`Rnic::qp_next_ulpdu`] / [`Rnic::fill_ulpdu`] /
//! [`Rnic::qp_ulpdu_acked`] (outbound), [`Rnic::qp_on_ulpdu`] / [`Rnic::qp_on_fpdu`]
//! (inbound; the latter with the FPDU's CRC still pending),
//! [`Rnic::qp_llp_event`], [`Rnic::qp_terminate`] and [`Rnic::qp_poll_llp_request`].
//! Completions go to each CQ's sink ([`cq::CqSink`]): the in-engine queue read with
//! [`Rnic::poll_cq`], or storage of the CQ creator's ([`Rnic::create_cq_with_sink`]).
#![forbid(unsafe_code)]

pub mod cq;
mod ctx;
pub mod mem;
pub mod pd;
pub mod qp;
mod rnic;
mod rnic_qp;
mod slab;
pub mod srq;

#[cfg(test)]
mod tests;

pub use qp::{
    LlpEvent, LlpParams, LlpRequest, LlpRole, QpAttr, QpCounters, QpInfo, QpModify, RtrKind,
    TermRecord, TxUlpdu,
};
pub use rnic::{Rnic, RnicAttr, RnicConfig, RnicLimits};
pub use rnic_qp::PostError;
