//! [`Srq`]: shared receive queues (`ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_post_srq_recv`, `ibv_destroy_srq`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iwarp_shm_ring::RingLayout;
use iwarp_shm_socket::{Request, Response, SrqCreate, SrqHandle, SrqInfo};
use iwarp_types::RecvWr;

use crate::context::{unexpected, CtxInner};
use crate::mr::expect_ok;
use crate::pd::{Pd, PdShared};
use crate::queue::WorkQueue;
use crate::{Error, Result};

/// What an SRQ's users (the SRQ, its QPs) share; destroys the SRQ when the last goes.
pub(crate) struct SrqShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: SrqHandle,
    live: AtomicBool,
    _pd: Arc<PdShared>,
}

impl SrqShared {
    fn destroy(&self) -> Result<()> {
        if !self.live.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        expect_ok(
            self.ctx.call(Request::DestroySrq(self.handle))?,
            "DestroySrq",
        )
    }
}

impl Drop for SrqShared {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

/// Creation attributes of an SRQ (`ibv_srq_init_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqInitAttr {
    /// Outstanding WRs.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit for the SRQ-limit asynchronous event (0: none).
    pub limit: u32,
}

/// A shared receive queue: lives on one dataplane core; QPs that use it are placed
/// there. Posting is a ring write and a doorbell.
pub struct Srq {
    shared: Arc<SrqShared>,
    ring: WorkQueue,
    core: u32,
    max_wr: u32,
    max_sge: u32,
}

impl std::fmt::Debug for Srq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srq")
            .field("handle", &self.shared.handle)
            .field("core", &self.core)
            .field("max_wr", &self.max_wr)
            .finish()
    }
}

impl Pd {
    /// Creates a shared receive queue (`ibv_create_srq`).
    pub fn create_srq(&self, attr: &SrqInitAttr) -> Result<Srq> {
        let ctx = &self.shared.ctx;
        let r = ctx.call(Request::CreateSrq(SrqCreate {
            pd: self.shared.handle,
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            limit: attr.limit,
        }))?;
        let c = match r {
            Response::Srq(c) => c,
            r => return Err(unexpected("CreateSrq", &r)),
        };
        let shared = Arc::new(SrqShared {
            ctx: ctx.clone(),
            handle: c.srq,
            live: AtomicBool::new(true),
            _pd: self.shared.clone(),
        });
        let layout = RingLayout::shared_recv_queue(c.ring.entries)
            .map_err(|e| Error::protocol(format!("SRQ: {e}")))?;
        let ring = WorkQueue::attach(ctx, &c.ring, layout, c.core, c.doorbell_bit)?;
        Ok(Srq {
            shared,
            ring,
            core: c.core,
            max_wr: c.max_wr,
            max_sge: c.max_sge,
        })
    }
}

impl Srq {
    pub(crate) fn shared(&self) -> &Arc<SrqShared> {
        &self.shared
    }

    /// The daemon's handle.
    pub fn handle(&self) -> SrqHandle {
        self.shared.handle
    }

    /// The dataplane core it lives on.
    pub fn core(&self) -> u32 {
        self.core
    }

    /// WRs provided.
    pub fn max_wr(&self) -> u32 {
        self.max_wr
    }

    /// SGEs per WR provided.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Posts a receive WR (`ibv_post_srq_recv`): a ring write and a doorbell, no system
    /// call. [`Error::QueueFull`] if the ring is full.
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<()> {
        self.shared.ctx.check_alive()?;
        self.ring.post_recv(wr)
    }

    /// Modifies the SRQ (`ibv_modify_srq`): a new depth and/or a new limit (which arms
    /// the limit event). Returns the SRQ's attributes after the change.
    pub fn modify(&mut self, max_wr: Option<u32>, limit: Option<u32>) -> Result<SrqInfo> {
        let r = self.shared.ctx.call(Request::ModifySrq {
            srq: self.shared.handle,
            max_wr,
            limit,
        })?;
        match r {
            Response::SrqInfo(i) => {
                self.max_wr = i.max_wr;
                Ok(i)
            }
            Response::Ok => self.query(),
            r => Err(unexpected("ModifySrq", &r)),
        }
    }

    /// Queries the SRQ (`ibv_query_srq`).
    pub fn query(&self) -> Result<SrqInfo> {
        match self
            .shared
            .ctx
            .call(Request::QuerySrq(self.shared.handle))?
        {
            Response::SrqInfo(i) => Ok(i),
            r => Err(unexpected("QuerySrq", &r)),
        }
    }

    /// Destroys the SRQ (`ibv_destroy_srq`) if no QP uses it, reporting the daemon's
    /// answer; otherwise it is destroyed when the last QP using it is gone.
    pub fn destroy(self) -> Result<()> {
        if Arc::strong_count(&self.shared) > 1 {
            return Err(Error::invalid(
                "SRQ still used by a QP: it is destroyed with the last of them",
            ));
        }
        self.shared.destroy()
    }
}
