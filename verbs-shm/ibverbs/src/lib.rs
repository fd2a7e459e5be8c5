//! `libibverbs.so.1` with rdma-core's ABI over iwarpd's shared-memory verbs (issue 12,
//! docs/DROPIN.md). Unmodified binaries built against rdma-core's `<infiniband/verbs.h>`
//! (Debian's `ibverbs-utils`, `perftest`, `rdmacm-utils`) load it instead of rdma-core's
//! through `scripts/iwarp-run`.
//!
//! - Every symbol of rdma-core 44's library is exported with its version (`symbols.txt`,
//!   build.rs); what is not implemented is a stub that fails with `EOPNOTSUPP` (the
//!   private `IBVERBS_PRIVATE_34` symbols that provider libraries such as `libmlx5` link
//!   resolve, and are never called on our device: providers are never loaded).
//! - Objects are rdma-core's structures (bindgen over the installed header, `sys`) as the
//!   first field of a `#[repr(C)]` wrapper that owns the client library's object
//!   (`iwarp-verbs`): a pointer the application holds is converted back by a cast.
//! - The header's static inline functions call through `ibv_context::ops` and the
//!   `verbs_context` in front of it: both tables are filled at `ibv_open_device`.
//! - Errors follow rdma-core: functions returning an `int` return the errno value (or -1
//!   and `errno` where the man page says so), functions returning a pointer return NULL
//!   and set `errno` (`errno.rs`). `IWARP_DEBUG=1` prints why on stderr.

#![allow(clippy::missing_safety_doc)]

pub mod sys;

mod cm_addr;
mod cm_channel;
mod cm_ep;
mod cm_id;
mod cm_sync;
mod context;
mod cq;
mod cq_ex;
mod debug;
mod device;
mod errno;
mod fdwrap;
mod fork;
mod inline;
mod mw;
mod object;
mod ops;
mod pd;
mod qp;
mod qp_ex;
mod srq;
mod strs;
mod stub;

/// The stubs and the `.symver` aliases generated from `symbols.txt` (build.rs).
mod symver {
    include!(concat!(env!("OUT_DIR"), "/symver.rs"));
}

pub use device::{device_name_for, guid_from_mac, SOCKET_DIR_ENV};
