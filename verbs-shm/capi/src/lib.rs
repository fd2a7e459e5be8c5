//! The C API of the iwarpd verbs client library: `include/iwarp_verbs.h` over the
//! `iwarp-verbs` crate. Built as `libiwarp_verbs_capi.so` and `.a` (see docs/CAPI.md).
//!
//! Every entry point runs its body under `catch_unwind` (no panic crosses the FFI
//! boundary: it answers `-IWV_EPANIC`), checks every pointer for NULL (`-IWV_EFAULT`),
//! and answers errors as negative codes (or NULL, with the code in
//! `iwv_last_error()` and `errno`).
//!
//! # Safety (every `unsafe extern "C"` function)
//!
//! The contract is the header's: a handle argument is NULL or a live handle returned by
//! this library (not yet destroyed; a destroy function is called once, by one thread);
//! a struct or array argument is NULL or valid for the access the function documents
//! (`num_entries` completions, `num_sge` SGEs, `private_data_len` bytes, a WR list ended
//! by NULL); strings are NUL-terminated.

#![allow(clippy::missing_safety_doc)]

mod cm;
mod context;
mod cq;
mod error;
mod handles;
mod memory;
mod qp;
pub mod types;
mod wr;

pub use cm::*;
pub use context::*;
pub use cq::*;
pub use handles::{
    iwv_arena, iwv_cm_id, iwv_comp_channel, iwv_context, iwv_cq, iwv_event_channel, iwv_mr, iwv_mw,
    iwv_pd, iwv_qp, iwv_srq,
};
pub use memory::*;
pub use qp::*;

/// The error codes of `enum iwv_error` (positive; functions answer them negated).
pub mod codes {
    pub use crate::error::{
        IWV_EACCES, IWV_EADDRINUSE, IWV_EAGAIN, IWV_EBADF, IWV_EBUSY, IWV_EDAEMONFULL,
        IWV_EDAEMONGONE, IWV_EFAULT, IWV_EINVAL, IWV_EIO, IWV_ENETUNREACH, IWV_ENOENT, IWV_ENOMEM,
        IWV_ENOSPC, IWV_ENOTCONN, IWV_EPANIC, IWV_EPERM, IWV_EPROTO, IWV_EPROTONOSUPPORT,
        IWV_EQUEUEFULL, IWV_ESHUTDOWN, IWV_ETIMEDOUT, IWV_EXDEV,
    };
}
