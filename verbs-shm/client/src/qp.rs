//! [`Qp`]: queue pairs (`ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_post_send`, `ibv_post_recv`, `ibv_destroy_qp`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iwarp_shm_ring::RingLayout;
use iwarp_shm_socket::{
    CmIdHandle, ErrorCode, QpCap, QpCreate, QpCreated, QpHandle, QpInfoReply, QpModifyReq, Request,
    Response,
};
use iwarp_types::{RecvWr, SendWr};

use crate::context::{unexpected, CtxInner};
use crate::cq::{Cq, CqShared};
use crate::mr::expect_ok;
use crate::pd::{Pd, PdShared};
use crate::queue::WorkQueue;
use crate::srq::{Srq, SrqShared};
use crate::{Error, Result};

/// Creation attributes of a QP (`ibv_qp_init_attr`). [`QpInitAttr::new`] gives common
/// defaults.
#[derive(Clone, Copy)]
pub struct QpInitAttr<'a> {
    /// CQ of send completions.
    pub send_cq: &'a Cq,
    /// CQ of receive completions.
    pub recv_cq: &'a Cq,
    /// Shared receive queue instead of an RQ (the QP is placed on the SRQ's core).
    pub srq: Option<&'a Srq>,
    /// Queue depths and SGEs.
    pub cap: QpCap,
    /// Every send WR completes (otherwise only those with `SendFlags::SIGNALED`).
    pub sq_sig_all: bool,
    /// Outbound RDMA Reads outstanding (ORD).
    pub ord: u32,
    /// Inbound RDMA Reads outstanding (IRD).
    pub ird: u32,
    /// Inbound RDMA Read allowed.
    pub remote_read: bool,
    /// Inbound RDMA Write allowed.
    pub remote_write: bool,
    /// Memory window binds allowed.
    pub bind_enabled: bool,
}

impl<'a> QpInitAttr<'a> {
    /// 128 send and 128 receive WRs of 2 SGEs, ORD = IRD = 8, remote read and write
    /// allowed, binds not, only signaled WRs complete.
    pub fn new(send_cq: &'a Cq, recv_cq: &'a Cq) -> QpInitAttr<'a> {
        QpInitAttr {
            send_cq,
            recv_cq,
            srq: None,
            cap: QpCap {
                max_send_wr: 128,
                max_recv_wr: 128,
                max_send_sge: 2,
                max_recv_sge: 2,
            },
            sq_sig_all: false,
            ord: 8,
            ird: 8,
            remote_read: true,
            remote_write: true,
            bind_enabled: false,
        }
    }
}

/// Pause between two `DestroyQp` asked during the QP's graceful close.
const DESTROY_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_micros(200);
/// Longest the library asks again (the daemon gives up long before: 1 s).
const DESTROY_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// What a QP holds: its handle and the objects it uses (kept alive while it exists).
pub(crate) struct QpShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: QpHandle,
    live: AtomicBool,
    _pd: Arc<PdShared>,
    _send_cq: Arc<CqShared>,
    _recv_cq: Arc<CqShared>,
    _srq: Option<Arc<SrqShared>>,
}

impl QpShared {
    fn destroy(&self) -> Result<()> {
        if !self.live.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        // The daemon answers `CloseInProgress` while the graceful close this QP asked is
        // not yet past its FIN (it resets the connection itself after a second); asking
        // again lets the close finish cleanly, as `ibv_destroy_qp` waits on Linux.
        let start = std::time::Instant::now();
        loop {
            match self.ctx.call(Request::DestroyQp(self.handle)) {
                Err(e)
                    if e.code() == Some(ErrorCode::CloseInProgress)
                        && start.elapsed() < DESTROY_RETRY_MAX =>
                {
                    std::thread::sleep(DESTROY_RETRY_PAUSE);
                }
                r => return expect_ok(r?, "DestroyQp"),
            }
        }
    }
}

impl Drop for QpShared {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

/// A queue pair. Posting is a ring write and a doorbell (no system call); the QP is
/// destroyed on [`Qp::destroy`] or drop (its connection is reset if still up).
pub struct Qp {
    shared: Arc<QpShared>,
    sq: WorkQueue,
    rq: Option<WorkQueue>,
    core: u32,
    cap: QpCap,
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("handle", &self.shared.handle)
            .field("core", &self.core)
            .field("cap", &self.cap)
            .finish()
    }
}

impl Pd {
    /// Creates a QP in state Idle (`ibv_create_qp`); connect it with a
    /// [`crate::CmId`] (active side), or create it with [`crate::CmId::create_qp`] for
    /// a connection request (passive side).
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<Qp> {
        create_qp(self, attr, None)
    }
}

pub(crate) fn create_qp(
    pd: &Pd,
    attr: &QpInitAttr<'_>,
    for_cm_id: Option<CmIdHandle>,
) -> Result<Qp> {
    let ctx = &pd.shared.ctx;
    for (what, c) in [("send", attr.send_cq), ("recv", attr.recv_cq)] {
        if !Arc::ptr_eq(&c.shared().ctx, ctx) {
            return Err(Error::invalid(format!("{what} CQ of another context")));
        }
    }
    let req = QpCreate {
        pd: pd.shared.handle,
        send_cq: attr.send_cq.handle(),
        recv_cq: attr.recv_cq.handle(),
        srq: attr.srq.map(|s| s.handle()),
        cap: attr.cap,
        sq_sig_all: attr.sq_sig_all,
        ord: attr.ord,
        ird: attr.ird,
        remote_read: attr.remote_read,
        remote_write: attr.remote_write,
        bind_enabled: attr.bind_enabled,
        for_cm_id,
    };
    let created: QpCreated = match ctx.call(Request::CreateQp(req))? {
        Response::Qp(q) => q,
        r => return Err(unexpected("CreateQp", &r)),
    };
    let shared = Arc::new(QpShared {
        ctx: ctx.clone(),
        handle: created.qp,
        live: AtomicBool::new(true),
        _pd: pd.shared.clone(),
        _send_cq: attr.send_cq.shared().clone(),
        _recv_cq: attr.recv_cq.shared().clone(),
        _srq: attr.srq.map(|s| s.shared().clone()),
    });
    // From here dropping `shared` destroys the QP in the daemon.
    let sq_layout = RingLayout::send_queue(created.sq.entries)
        .map_err(|e| Error::protocol(format!("SQ: {e}")))?;
    let sq = WorkQueue::attach(
        ctx,
        &created.sq,
        sq_layout,
        created.core,
        created.sq.doorbell_bit,
    )?;
    let rq = match (&created.rq, attr.srq) {
        (Some(r), None) => {
            let layout = RingLayout::recv_queue(r.entries)
                .map_err(|e| Error::protocol(format!("RQ: {e}")))?;
            Some(WorkQueue::attach(
                ctx,
                r,
                layout,
                created.core,
                r.doorbell_bit,
            )?)
        }
        (None, Some(_)) => None,
        (Some(_), Some(_)) => return Err(Error::protocol("QP with an SRQ got an RQ")),
        (None, None) => return Err(Error::protocol("QP without an RQ")),
    };
    Ok(Qp {
        shared,
        sq,
        rq,
        core: created.core,
        cap: created.cap,
    })
}

impl Qp {
    /// The daemon's handle.
    pub fn handle(&self) -> QpHandle {
        self.shared.handle
    }

    /// The QP number: the handle's value, what completions carry in `Cqe::qp`.
    pub fn qp_num(&self) -> u32 {
        self.shared.handle.0
    }

    /// The dataplane core serving it.
    pub fn core(&self) -> u32 {
        self.core
    }

    /// Capabilities provided (at least those asked).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// Posts a send WR (`ibv_post_send`): encodes it into the SQ ring and rings the
    /// doorbell; a memory write, no system call. [`Error::QueueFull`] if the SQ has no
    /// free slot (poll the send CQ first), [`Error::DaemonGone`] once the daemon is gone.
    /// The daemon validates the WR; a malformed one completes with an error.
    pub fn post_send(&mut self, wr: &SendWr) -> Result<()> {
        self.shared.ctx.check_alive()?;
        self.sq.post_send(wr)
    }

    /// Posts send WRs in order with one doorbell; returns how many fit (at least one, or
    /// [`Error::QueueFull`]).
    pub fn post_send_batch(&mut self, wrs: &[SendWr]) -> Result<usize> {
        self.shared.ctx.check_alive()?;
        self.sq.post_send_batch(wrs)
    }

    /// Posts a receive WR (`ibv_post_recv`) into the RQ ring; like
    /// [`Qp::post_send`]. A QP with an SRQ has no RQ: post to the [`Srq`].
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<()> {
        self.shared.ctx.check_alive()?;
        match &mut self.rq {
            Some(rq) => rq.post_recv(wr),
            None => Err(Error::invalid(
                "the QP uses an SRQ: post receives to the Srq",
            )),
        }
    }

    /// Free SQ slots now.
    pub fn send_queue_free(&mut self) -> Result<u32> {
        self.sq.free()
    }

    /// Modifies the QP (`ibv_modify_qp`): each `Some` of `modify` changes.
    pub fn modify(&self, modify: QpModifyReq) -> Result<()> {
        let r = self.shared.ctx.call(Request::ModifyQp {
            qp: self.shared.handle,
            modify,
        })?;
        expect_ok(r, "ModifyQp")
    }

    /// Queries the QP (`ibv_query_qp`).
    pub fn query(&self) -> Result<QpInfoReply> {
        match self.shared.ctx.call(Request::QueryQp(self.shared.handle))? {
            Response::QpInfo(i) => Ok(i),
            r => Err(unexpected("QueryQp", &r)),
        }
    }

    /// Destroys the QP (`ibv_destroy_qp`), reporting the daemon's answer (drop does the
    /// same and ignores it).
    pub fn destroy(self) -> Result<()> {
        self.shared.destroy()
    }
}
