//! The tables the header's static inline functions call through: `ibv_context::ops`
//! (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, ...) and the
//! `verbs_context` operations. Filled at `ibv_open_device`; an entry left empty makes the
//! header answer `EOPNOTSUPP` (`verbs_get_ctx_op` finds NULL).

use crate::sys;

/// Fills the operations of a new context (those of `context.rs` are set there).
pub(crate) fn fill(_v: &mut sys::verbs_context) {}
