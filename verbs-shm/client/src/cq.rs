//! [`Cq`]: completion queues (`ibv_create_cq`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//! `ibv_resize_cq`). A CQ has one completion sub-ring per dataplane core in the ring
//! area; polling reads them round-robin, without a system call.

use std::collections::VecDeque;
use std::sync::Arc;

use iwarp_shm_ring::{
    decode_cqe, Consumer, CqControl, RingLayout, CQE_SLOT_SIZE, CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET,
};
use iwarp_shm_socket::{CqCreate, CqCreated, CqHandle, Request, Response, RingRef};
use iwarp_types::Cqe;

use crate::channel::{ChannelShared, CompChannel};
use crate::context::{unexpected, CtxInner};
use crate::{Context, Error, Result};

/// `CqeSlot::flags` bit of the last slot of a sub-ring replaced by a resize: no
/// completion; continue in the new sub-ring. The value is the daemon's
/// (`iwarp_shm_service::CQE_FLAG_RING_MOVED`).
pub const CQE_FLAG_RING_MOVED: u8 = 1 << 7;

/// A completion to fill poll buffers with (`[EMPTY_CQE; 16]`): every field zero,
/// status `Success`, opcode `Send`.
pub const EMPTY_CQE: Cqe = Cqe::EMPTY;

/// Byte of `CqeSlot::flags` in a CQE slot.
const CQE_FLAGS_BYTE: usize = 22;

/// What a CQ's users (the CQ, its QPs) share; destroys the CQ when the last goes.
pub(crate) struct CqShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: CqHandle,
    pub(crate) channel: Option<Arc<ChannelShared>>,
}

impl Drop for CqShared {
    fn drop(&mut self) {
        if let Some(ch) = &self.channel {
            ch.detach(self.handle);
        }
        let _ = self.ctx.call(Request::DestroyCq(self.handle));
    }
}

/// Resizes whose moved marker has not been polled yet, at most.
const MAX_PENDING_RESIZES: usize = 4;

/// One core's sub-ring, and those that replace it after resizes (oldest first).
struct SubRing {
    ring: Consumer,
    next: VecDeque<Consumer>,
}

/// A completion queue. Poll it with [`Cq::poll`] (a memory read, no system call); it is
/// destroyed when it and every QP using it are gone.
pub struct Cq {
    shared: Arc<CqShared>,
    control: CqControl,
    rings: Vec<SubRing>,
    /// Sub-ring polled first next time (round robin).
    next: usize,
    depth: u32,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("handle", &self.shared.handle)
            .field("depth", &self.depth)
            .field("sub_rings", &self.rings.len())
            .finish()
    }
}

fn attach_ring(ctx: &CtxInner, r: &RingRef) -> Result<Consumer> {
    let layout = RingLayout::completion_queue(r.entries)
        .map_err(|e| Error::protocol(format!("CQ ring: {e}")))?;
    let region = ctx
        .area
        .ring_region(r.offset, layout)
        .map_err(|e| Error::protocol(format!("CQ ring at {}: {e}", r.offset)))?;
    Consumer::attach(region, layout).map_err(|e| Error::protocol(format!("CQ ring: {e}")))
}

fn attach_rings(ctx: &CtxInner, c: &CqCreated) -> Result<Vec<Consumer>> {
    if c.rings.len() != ctx.area.cores() as usize {
        return Err(Error::protocol(format!(
            "CQ with {} sub-rings for {} cores",
            c.rings.len(),
            ctx.area.cores()
        )));
    }
    c.rings.iter().map(|r| attach_ring(ctx, r)).collect()
}

impl Context {
    /// Creates a CQ of at least `depth` entries (`ibv_create_cq`); with `channel`, armed
    /// notifications ([`Cq::req_notify`]) are delivered there.
    pub fn create_cq(&self, depth: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        let r = self.inner.call(Request::CreateCq(CqCreate {
            depth,
            channel: channel.map(|c| c.shared.handle),
        }))?;
        let created = match r {
            Response::Cq(c) => c,
            r => return Err(unexpected("CreateCq", &r)),
        };
        let shared = Arc::new(CqShared {
            ctx: self.inner.clone(),
            handle: created.cq,
            channel: None,
        });
        // From here dropping `shared` destroys the CQ in the daemon.
        let control = cq_control(&self.inner, created.control)?;
        let rings = attach_rings(&self.inner, &created)?;
        let shared = match channel {
            Some(ch) => {
                ch.shared.attach(created.cq, control.clone());
                let mut s = Arc::into_inner(shared).expect("not shared yet");
                s.channel = Some(ch.shared.clone());
                Arc::new(s)
            }
            None => shared,
        };
        Ok(Cq {
            shared,
            control,
            rings: rings
                .into_iter()
                .map(|ring| SubRing {
                    ring,
                    next: VecDeque::new(),
                })
                .collect(),
            next: 0,
            depth: created.depth,
        })
    }
}

fn cq_control(ctx: &CtxInner, offset: u64) -> Result<CqControl> {
    let rel = offset.checked_sub(CQ_CONTROL_OFFSET as u64);
    let index = match rel {
        Some(r) if r % CQ_CONTROL_BYTES as u64 == 0 => {
            u32::try_from(r / CQ_CONTROL_BYTES as u64).ok()
        }
        _ => None,
    };
    index
        .and_then(|i| ctx.area.cq_control(i))
        .ok_or_else(|| Error::protocol(format!("CQ control line at {offset}")))
}

impl Cq {
    pub(crate) fn shared(&self) -> &Arc<CqShared> {
        &self.shared
    }

    /// The daemon's handle (what [`crate::CompChannel::get_cq_event`] returns).
    pub fn handle(&self) -> CqHandle {
        self.shared.handle
    }

    /// Entries provided (at least the depth asked).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Polls up to `wc.len()` completions into `wc` (`ibv_poll_cq`) and returns how
    /// many. Reads the per-core sub-rings round robin, one completion per sub-ring per
    /// turn; no system call, no allocation, no lock. `Cqe::qp` is the QP's handle value
    /// ([`crate::Qp::qp_num`]). [`Error::DaemonGone`] once the daemon is gone.
    pub fn poll(&mut self, wc: &mut [Cqe]) -> Result<usize> {
        self.shared.ctx.check_alive()?;
        let n = self.rings.len();
        let mut got = 0;
        let mut idle = 0;
        let mut i = self.next;
        let mut moves = 0;
        while got < wc.len() && idle < n {
            let sub = &mut self.rings[i];
            let mut slot = [0u8; CQE_SLOT_SIZE];
            let popped = sub
                .ring
                .pop(&mut slot)
                .map_err(|e| Error::protocol(format!("CQ sub-ring {i}: {e}")))?;
            if !popped {
                idle += 1;
                i = (i + 1) % n;
                continue;
            }
            if slot[CQE_FLAGS_BYTE] & CQE_FLAG_RING_MOVED != 0 {
                let Some(new) = sub.next.pop_front() else {
                    return Err(Error::protocol(format!(
                        "CQ sub-ring {i} moved without a resize"
                    )));
                };
                sub.ring = new;
                // Each sub-ring moves at most once per pending resize.
                moves += 1;
                if moves > n * MAX_PENDING_RESIZES {
                    return Err(Error::protocol("CQ sub-rings keep moving"));
                }
                continue;
            }
            wc[got] = decode_cqe(&slot)
                .map_err(|e| Error::protocol(format!("CQ sub-ring {i}: bad completion: {e}")))?;
            got += 1;
            idle = 0;
            i = (i + 1) % n;
        }
        self.next = i;
        Ok(got)
    }

    /// Requests a notification on the completion channel for the next completion, or
    /// only the next solicited or error one (`ibv_req_notify_cq`). A memory write.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        self.shared.ctx.check_alive()?;
        self.control.arm(solicited_only);
        Ok(())
    }

    /// Notifications fired for this CQ so far (from its control line).
    pub fn events(&self) -> u64 {
        self.control.events()
    }

    /// Completions the daemon could not push because a sub-ring was full.
    pub fn overflows(&self) -> u64 {
        self.control.overflows()
    }

    /// Resizes the CQ to at least `depth` entries (`ibv_resize_cq`). Completions already
    /// in the old sub-rings are still polled first; each core then continues in its new
    /// sub-ring.
    /// At most a few resizes may be pending (their old sub-rings not yet polled to the
    /// end): poll, then resize again.
    pub fn resize(&mut self, depth: u32) -> Result<()> {
        if self
            .rings
            .iter()
            .any(|s| s.next.len() >= MAX_PENDING_RESIZES)
        {
            return Err(Error::invalid(
                "too many resizes pending: poll the CQ first",
            ));
        }
        let r = self.shared.ctx.call(Request::ResizeCq {
            cq: self.shared.handle,
            depth,
        })?;
        let created = match r {
            Response::Cq(c) => c,
            r => return Err(unexpected("ResizeCq", &r)),
        };
        let new = attach_rings(&self.shared.ctx, &created)?;
        for (sub, ring) in self.rings.iter_mut().zip(new) {
            sub.next.push_back(ring);
        }
        self.depth = created.depth;
        Ok(())
    }
}
