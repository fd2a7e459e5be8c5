//! DDP (RFC 5041) and RDMAP (RFC 5040) with the semantics of the RDMA Verbs specification:
//! protection domains, completion queues, shared receive queues, queue pairs, memory
//! regions and memory windows of one engine.
#![forbid(unsafe_code)]

pub mod cq;
pub mod mem;
pub mod pd;
pub mod srq;
