//! The tables the header's static inline functions call through: `ibv_context::ops`
//! (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, ...) and the
//! `verbs_context` operations. Filled at `ibv_open_device`; an entry left empty makes the
//! header answer `EOPNOTSUPP` (`verbs_get_ctx_op` finds NULL, or the inline checks the
//! op).

use crate::sys;

/// Fills the operations of a new context (`query_port` and `query_device_ex` are set by
/// `context.rs`).
pub(crate) fn fill(v: &mut sys::verbs_context) {
    let ops = &mut v.context.ops;
    ops.poll_cq = Some(crate::cq::poll_cq_op);
    ops.req_notify_cq = Some(crate::cq::req_notify_cq_op);
    ops.post_send = Some(crate::qp::post_send_op);
    ops.post_recv = Some(crate::qp::post_recv_op);
    ops.post_srq_recv = Some(crate::srq::post_srq_recv_op);
    ops.alloc_mw = Some(crate::mw::alloc_mw_op);
    ops.bind_mw = Some(crate::mw::bind_mw_op);
    ops.dealloc_mw = Some(crate::mw::dealloc_mw_op);
    v.create_cq_ex = Some(crate::cq_ex::create_cq_ex_op);
    v.create_qp_ex = Some(crate::qp_ex::create_qp_ex_op);
}
