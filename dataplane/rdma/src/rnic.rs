//! The [`Rnic`]: every verbs object of one engine (PDs, CQs, SRQs, MRs/MWs, QPs) and the
//! resource-level verbs (verbs 9.2.1-9.2.4, 9.2.6, 9.3.2). QP verbs and the engine-facing
//! QP calls are in `rnic_qp.rs`.

use iwarp_types::{AsyncEvent, CqId, Cqe, PdId, QpId, RecvWr, SrqId, Stag, VerbError, MAX_SGE};

use crate::cq::{CqSink, CqTable, NotifyMode};
use crate::ctx::{BoundedQueue, Ctx};
use crate::mem::{MemConfig, MemTable, MrAttr, MrInfo, MwBind, MwInfo, MwType, SharedMrAttr};
use crate::pd::PdTable;
use crate::qp::Qp;
use crate::slab::Slab;
use crate::srq::{SrqAttr, SrqConfig, SrqModify, SrqTable};

/// Every bound of an [`Rnic`] (verbs Query RNIC attributes); all tables and queues are
/// allocated from these at construction or at create time, never on the data path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnicLimits {
    /// Maximum number of QPs.
    pub max_qps: u32,
    /// Maximum outstanding WRs of one SQ.
    pub max_sq_wr: u32,
    /// Maximum outstanding WRs of one RQ.
    pub max_rq_wr: u32,
    /// Maximum SGEs per WR (at most [`MAX_SGE`]).
    pub max_sge: u32,
    /// Maximum ORD of one QP.
    pub max_ord: u32,
    /// Maximum IRD of one QP.
    pub max_ird: u32,
    /// Maximum number of PDs.
    pub max_pds: u32,
    /// Maximum number of CQs.
    pub max_cqs: u32,
    /// Maximum entries of one CQ.
    pub max_cqe: u32,
    /// Maximum number of SRQs.
    pub max_srqs: u32,
    /// Maximum outstanding WRs of one SRQ.
    pub max_srq_wr: u32,
    /// Maximum number of STags (regions plus windows).
    pub max_stags: u32,
    /// Capacity of the asynchronous event queue (overflow is counted).
    pub max_async_events: u32,
    /// Capacity of the CQ notification queue (overflow is counted).
    pub max_cq_events: u32,
    /// Maximum number of Completion Event Handler identifiers (verbs 9.4.1; at least 1).
    pub max_cehs: u32,
}

impl Default for RnicLimits {
    fn default() -> RnicLimits {
        RnicLimits {
            max_qps: 1024,
            max_sq_wr: 1024,
            max_rq_wr: 1024,
            max_sge: MAX_SGE as u32,
            max_ord: 16,
            max_ird: 16,
            max_pds: 1024,
            max_cqs: 2048,
            max_cqe: 65536,
            max_srqs: 256,
            max_srq_wr: 16384,
            max_stags: 65536,
            max_async_events: 1024,
            max_cq_events: 4096,
            max_cehs: 64,
        }
    }
}

/// Query RNIC (verbs 9.2.1.2): the limits plus the capabilities the verbs ask about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnicAttr {
    /// Vendor-specific information.
    pub vendor: &'static str,
    /// Every numeric maximum (QPs, WRs, SGEs for Send-type, Receive and Write WRs alike,
    /// CQs, CQEs, CEHs, PDs, STags counting regions and windows, SRQs, per-QP IRD/ORD).
    pub limits: RnicLimits,
    /// Inbound Read Requests pooled across QPs: 0, IRD resources are per QP.
    pub ird_pool_total: u32,
    /// Outbound Read Requests pooled across QPs: 0, ORD resources are per QP.
    pub ord_pool_total: u32,
    /// IRD may be modified after creation (Idle; RTS with no inbound Read outstanding).
    pub can_modify_ird: bool,
    /// ORD may be increased after creation.
    pub can_increase_ord: bool,
    /// SQ/RQ depths may be modified after creation.
    pub can_resize_wq: bool,
    /// Physical Buffer Lists: none. Regions name caller arenas by offset and length
    /// (byte granular), so neither Page List nor Block List mode applies.
    pub physical_buffer_lists: bool,
    /// Shared receive queues are supported.
    pub srq: bool,
    /// SRQ WQEs are taken in arrival order (verbs 10.4.3 recommends it).
    pub srq_arrival_order: bool,
    /// CQ overflow is detected and reported.
    pub cq_overflow_detection: bool,
}

/// Construction parameters of an [`Rnic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnicConfig {
    /// Bounds.
    pub limits: RnicLimits,
    /// Secret seed of the STag index permutation.
    pub seed: u64,
}

/// The verbs objects of one engine.
pub struct Rnic {
    pub(crate) limits: RnicLimits,
    pub(crate) pds: PdTable,
    pub(crate) cqs: CqTable,
    pub(crate) srqs: SrqTable,
    pub(crate) mem: MemTable,
    pub(crate) qps: Slab<Qp>,
    pub(crate) events: BoundedQueue<AsyncEvent>,
    pub(crate) cq_events: BoundedQueue<CqId>,
    /// Registered Completion Event Handler identifiers.
    pub(crate) cehs: Slab<()>,
    /// Remote invalidation of regions whose PD holds several QPs is allowed (relaxes
    /// RFC 5040 8.1.1 #7 to verbs 7.8).
    pub(crate) remote_inv_shared_pd: bool,
}

impl Rnic {
    /// Open RNIC: every table allocated from `cfg.limits`.
    pub fn new(cfg: RnicConfig) -> Rnic {
        let mut limits = cfg.limits;
        limits.max_sge = limits.max_sge.min(MAX_SGE as u32);
        Rnic {
            limits,
            pds: PdTable::new(limits.max_pds as usize),
            cqs: CqTable::new(limits.max_cqs as usize, limits.max_cqe as usize),
            srqs: SrqTable::new(SrqConfig {
                max_srqs: limits.max_srqs as usize,
                max_wr: limits.max_srq_wr as usize,
                max_sge: limits.max_sge as usize,
            }),
            mem: MemTable::new(MemConfig {
                max_entries: limits.max_stags as usize,
                seed: cfg.seed,
            }),
            qps: Slab::new(limits.max_qps as usize),
            events: BoundedQueue::new(limits.max_async_events as usize),
            cq_events: BoundedQueue::new(limits.max_cq_events as usize),
            cehs: Slab::new(limits.max_cehs.max(1) as usize),
            remote_inv_shared_pd: false,
        }
    }

    /// RFC 5040 8.1.1 #7 (the default, `false`): a Send with Invalidate may not
    /// invalidate a region whose PD holds more than one QP, since such a region is shared
    /// on multiple streams (Terminate 0x0109 "STag cannot be invalidated"); windows bound
    /// to the QP are unaffected. `true` applies only the looser verbs 7.8 rule (same PD),
    /// for consumers that share a PD across connections and rely on remote invalidation.
    pub fn allow_remote_invalidate_in_shared_pd(&mut self, allow: bool) {
        self.remote_inv_shared_pd = allow;
    }

    /// Query RNIC: every attribute of verbs 9.2.1.2.
    pub fn query_rnic(&self) -> RnicAttr {
        RnicAttr {
            vendor: concat!("iwarp-rdma ", env!("CARGO_PKG_VERSION")),
            limits: self.limits,
            ird_pool_total: 0,
            ord_pool_total: 0,
            can_modify_ird: true,
            can_increase_ord: true,
            can_resize_wq: true,
            physical_buffer_lists: false,
            srq: self.limits.max_srqs > 0,
            srq_arrival_order: true,
            cq_overflow_detection: true,
        }
    }

    /// Query RNIC: the limits in force.
    pub fn limits(&self) -> RnicLimits {
        self.limits
    }

    /// The next asynchronous event (verbs 8.3.3), oldest first.
    pub fn poll_async_event(&mut self) -> Option<AsyncEvent> {
        self.events.pop()
    }

    /// The next CQ whose armed notification fired (verbs 8.2.5), oldest first.
    pub fn poll_cq_event(&mut self) -> Option<CqId> {
        let cq = self.cq_events.pop()?;
        if let Some(c) = self.cqs.get_mut(cq) {
            c.notification_taken();
        }
        Some(cq)
    }

    /// Asynchronous events and CQ notifications dropped because their queue was full.
    pub fn events_dropped(&self) -> (u64, u64) {
        (self.events.dropped, self.cq_events.dropped)
    }

    /// Runs `f` on QP `qp` with the tables it needs; a completion that could not be queued
    /// moves the QP to Terminate with "CQ error" (verbs 4.5, 0x0207).
    #[inline]
    pub(crate) fn with_qp<R>(
        &mut self,
        qp: QpId,
        arenas: Option<&dyn iwarp_types::Memory>,
        f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R,
    ) -> Result<R, VerbError> {
        let (q, mut ctx) = self.split_qp(qp, arenas).ok_or(VerbError::InvalidQp)?;
        let r = f(q, &mut ctx);
        if ctx.cq_error {
            q.on_cq_error(&mut ctx);
        }
        Ok(r)
    }

    /// QP `qp` and the tables it works with, borrowed apart (what [`Rnic::with_qp`]
    /// runs its closure with). The caller handles `cq_error` as `with_qp` does. Used
    /// directly where a result passes through on the data path, so it is not wrapped
    /// and copied once more.
    #[inline]
    pub(crate) fn split_qp<'a>(
        &'a mut self,
        qp: QpId,
        arenas: Option<&'a dyn iwarp_types::Memory>,
    ) -> Option<(&'a mut Qp, Ctx<'a>)> {
        let Rnic {
            qps,
            mem,
            cqs,
            srqs,
            events,
            cq_events,
            pds,
            remote_inv_shared_pd,
            ..
        } = self;
        let q = qps.get_mut(qp.0)?;
        let ctx = Ctx {
            pds,
            remote_inv_shared_pd: *remote_inv_shared_pd,
            mem,
            cqs,
            srqs,
            events,
            cq_events,
            arenas,
            cq_error: false,
        };
        Some((q, ctx))
    }

    // --- Protection domains (verbs 9.2.2) ---

    /// Allocate PD.
    pub fn alloc_pd(&mut self) -> Result<PdId, VerbError> {
        self.pds.alloc()
    }

    /// Deallocate PD (`PdInUse` while any object refers to it).
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbError> {
        self.pds.dealloc(pd)
    }

    // --- Completion queues (verbs 9.2.3, 9.3.2) ---

    /// Create CQ with at least `depth` entries, an in-engine queue read with
    /// [`Rnic::poll_cq`]; returns it and the allocated depth.
    pub fn create_cq(&mut self, depth: u32) -> Result<(CqId, u32), VerbError> {
        self.cqs.create(depth as usize).map(|(c, d)| (c, d as u32))
    }

    /// Create CQ whose completions go to `sink` (the caller's storage, see
    /// [`crate::cq`]): every completion of a QP reporting to it is written there, with
    /// the CQ's rules (a full sink: "CQ Overflow Detected" and the QP's CQ error; the
    /// sink's notification: a CQ event). `depth` is checked against the engine's limit;
    /// returns the CQ and the sink's depth. `InsufficientResources` if the sink holds
    /// fewer than `depth` completions. [`Rnic::poll_cq`] and [`Rnic::resize_cq`] do not
    /// apply (the owner reads and resizes its sink, [`Rnic::cq_sink_mut`]);
    /// [`Rnic::req_notify_cq`] arms the sink.
    pub fn create_cq_with_sink(
        &mut self,
        depth: u32,
        sink: Box<dyn CqSink>,
    ) -> Result<(CqId, u32), VerbError> {
        self.cqs
            .create_with_sink(depth as usize, sink)
            .map(|(c, d)| (c, d.min(u32::MAX as usize) as u32))
    }

    /// The sink of CQ `cq` if it was created with one of type `T`.
    pub fn cq_sink<T: CqSink>(&self, cq: CqId) -> Option<&T> {
        self.cqs.get(cq).and_then(|c| c.sink::<T>())
    }

    /// The sink of CQ `cq` if it was created with one of type `T`, mutably (e.g. to give
    /// it new storage). Completions keep going through the CQ; do not write into the
    /// sink's storage around it.
    pub fn cq_sink_mut<T: CqSink>(&mut self, cq: CqId) -> Option<&mut T> {
        self.cqs.get_mut(cq).and_then(|c| c.sink_mut::<T>())
    }

    /// Writes a completion made outside the engine (a WR its owner refused before posting
    /// it) into `cq`, after every completion written so far, with the CQ's rules: if the
    /// CQ has no room it raises "CQ Overflow Detected" and, when the completion belongs
    /// to `qp`, moves `qp` to Terminate with a CQ error (then ring the engine's doorbell
    /// of `qp`). `InvalidCq`, `InvalidQp` for unknown objects; `Ok(false)` if the CQ
    /// overflowed.
    pub fn push_completion(
        &mut self,
        cq: CqId,
        cqe: Cqe,
        qp: Option<QpId>,
    ) -> Result<bool, VerbError> {
        if self.cqs.get(cq).is_none() {
            return Err(VerbError::InvalidCq);
        }
        match qp {
            Some(qp) => self.with_qp(qp, None, |_, ctx| {
                ctx.complete(cq, cqe);
                !ctx.cq_error
            }),
            None => Ok(crate::ctx::complete_into(
                &mut self.cqs,
                &mut self.events,
                &mut self.cq_events,
                cq,
                cqe,
            )),
        }
    }

    /// Set Completion Event Handler, register case (verbs 9.4.1): a new non-zero
    /// identifier to name at Create CQ. The handler itself is the caller's: CQ events
    /// come out of [`Rnic::poll_cq_event`] and [`Rnic::query_cq_handler`] names the
    /// handler of each CQ. `InsufficientResources` beyond `max_cehs`.
    pub fn register_cq_event_handler(&mut self) -> Result<u32, VerbError> {
        self.cehs.insert(()).ok_or(VerbError::InsufficientResources)
    }

    /// Set Completion Event Handler, clear case: the identifier is released. CQs created
    /// with it keep reporting it (verbs 9.4.1: the RI need not disassociate them).
    /// `InvalidModifier` for an unknown identifier.
    pub fn clear_cq_event_handler(&mut self, ceh: u32) -> Result<(), VerbError> {
        self.cehs
            .remove(ceh)
            .map(|_| ())
            .ok_or(VerbError::InvalidModifier)
    }

    /// Create CQ bound to Completion Event Handler `ceh` (0: none; verbs 9.2.3.1).
    /// `InvalidModifier` ("Invalid CEH Identifier") if `ceh` is not registered.
    pub fn create_cq_with_handler(
        &mut self,
        depth: u32,
        ceh: u32,
    ) -> Result<(CqId, u32), VerbError> {
        if ceh != 0 && self.cehs.get(ceh).is_none() {
            return Err(VerbError::InvalidModifier);
        }
        let (cq, d) = self.create_cq(depth)?;
        if let Some(c) = self.cqs.get_mut(cq) {
            c.set_handler(ceh);
        }
        Ok((cq, d))
    }

    /// Query CQ, second output: the Completion Event Handler identifier (0: none).
    pub fn query_cq_handler(&self, cq: CqId) -> Result<u32, VerbError> {
        self.cqs
            .get(cq)
            .map(|c| c.handler())
            .ok_or(VerbError::InvalidCq)
    }

    /// Query CQ: the allocated depth.
    pub fn query_cq(&self, cq: CqId) -> Result<u32, VerbError> {
        self.cqs.query(cq).map(|d| d as u32)
    }

    /// Modify CQ (resize), keeping every queued CQE. `InvalidCq` for a CQ created with a
    /// sink (its owner resizes the sink's storage).
    pub fn resize_cq(&mut self, cq: CqId, depth: u32) -> Result<u32, VerbError> {
        self.cqs.resize(cq, depth as usize).map(|d| d as u32)
    }

    /// Destroy CQ (`CqInUse` while a work queue reports to it).
    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbError> {
        self.cqs.destroy(cq)
    }

    /// Poll for Completion: up to `out.len()` CQEs, oldest first; returns how many.
    /// `InvalidCq` also for a CQ created with a sink (its completions are read where the
    /// sink writes them).
    pub fn poll_cq(&mut self, cq: CqId, out: &mut [Cqe]) -> Result<usize, VerbError> {
        let c = self.cqs.get_mut(cq).ok_or(VerbError::InvalidCq)?;
        if c.has_sink() {
            return Err(VerbError::InvalidCq);
        }
        Ok(c.poll(out))
    }

    /// Request Completion Notification (one shot): the next completion, or with
    /// `solicited_only` the next solicited receive or completion in error. A CQ created
    /// with a sink is armed through the sink ([`CqSink::arm`]).
    pub fn req_notify_cq(&mut self, cq: CqId, solicited_only: bool) -> Result<(), VerbError> {
        let mode = if solicited_only {
            NotifyMode::Solicited
        } else {
            NotifyMode::NextCompletion
        };
        self.cqs.get_mut(cq).ok_or(VerbError::InvalidCq)?.arm(mode);
        Ok(())
    }

    // --- Shared receive queues (verbs 9.2.4) ---

    /// Create S-RQ; returns it, the allocated WRs and SGEs per WR.
    pub fn create_srq(
        &mut self,
        pd: PdId,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
    ) -> Result<(SrqId, u32, u32), VerbError> {
        self.srqs
            .create(
                &mut self.pds,
                pd,
                max_wr as usize,
                max_sge as usize,
                limit as usize,
            )
            .map(|(s, w, g)| (s, w as u32, g as u32))
    }

    /// Query S-RQ.
    pub fn query_srq(&self, srq: SrqId) -> Result<SrqAttr, VerbError> {
        self.srqs.query(srq)
    }

    /// Modify S-RQ (size, limit, re-arm).
    pub fn modify_srq(&mut self, srq: SrqId, m: SrqModify) -> Result<u32, VerbError> {
        self.srqs.modify(srq, m).map(|w| w as u32)
    }

    /// Destroy S-RQ (`SrqInUse` while QPs use it).
    pub fn destroy_srq(&mut self, srq: SrqId) -> Result<(), VerbError> {
        self.srqs.destroy(&mut self.pds, srq)
    }

    /// PostRQ on an S-RQ.
    pub fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr) -> Result<(), VerbError> {
        self.srqs
            .get_mut(srq)
            .ok_or(VerbError::InvalidSrq)?
            .post(*wr)
    }

    // --- Memory regions and windows (verbs 9.2.6) ---

    /// Register Non-Shared MR; `region_len` is the length of the caller arena
    /// (`Memory::region_len`).
    pub fn reg_mr(&mut self, attr: &MrAttr, region_len: Option<u64>) -> Result<Stag, VerbError> {
        self.mem.reg_mr(&mut self.pds, attr, region_len)
    }

    /// Reregister Non-Shared MR.
    pub fn rereg_mr(
        &mut self,
        stag: Stag,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        self.mem.rereg_mr(&mut self.pds, stag, attr, region_len)
    }

    /// Register Shared MR.
    pub fn reg_shared_mr(&mut self, stag: Stag, attr: &SharedMrAttr) -> Result<Stag, VerbError> {
        self.mem.reg_shared_mr(&mut self.pds, stag, attr)
    }

    /// Allocate Non-Shared MR STag (Invalid; for Fast-Register).
    pub fn alloc_mr_stag(
        &mut self,
        pd: PdId,
        max_len: u64,
        remote_access_flag: bool,
    ) -> Result<Stag, VerbError> {
        self.mem
            .alloc_mr_stag(&mut self.pds, pd, max_len, remote_access_flag)
    }

    /// Query MR.
    pub fn query_mr(&self, stag: Stag) -> Result<MrInfo, VerbError> {
        self.mem.query_mr(stag)
    }

    /// Deallocate STag (region or window).
    pub fn dealloc_stag(&mut self, stag: Stag) -> Result<(), VerbError> {
        self.mem.dealloc_stag(&mut self.pds, stag)
    }

    /// Allocate MW.
    pub fn alloc_mw(&mut self, pd: PdId, kind: MwType) -> Result<Stag, VerbError> {
        self.mem.alloc_mw(&mut self.pds, pd, kind)
    }

    /// Query MW.
    pub fn query_mw(&self, stag: Stag) -> Result<MwInfo, VerbError> {
        self.mem.query_mw(stag)
    }

    /// Bind a type-1 window by verb (valid on every QP of `pd`).
    pub fn bind_mw_type1(&mut self, pd: PdId, b: &MwBind) -> Result<(), VerbError> {
        self.mem.bind_mw_type1(pd, b)
    }

    // --- Replicas under a given STag (one engine per core, see `mem::at`) ---

    /// Register Non-Shared MR under exactly `stag` (chosen by another engine's
    /// [`Rnic::reg_mr`]; its key must be `attr.key`). The errors of `reg_mr`, then
    /// `InvalidStag` (index 0 or key mismatch) and `InsufficientResources` (index taken).
    /// Reregister needs no such form: [`Rnic::rereg_mr`] gives the same STag everywhere.
    pub fn reg_mr_at(
        &mut self,
        stag: Stag,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        self.mem.reg_mr_at(&mut self.pds, stag, attr, region_len)
    }

    /// Allocate Non-Shared MR STag under exactly `stag` (from another engine's
    /// [`Rnic::alloc_mr_stag`]). Errors as [`Rnic::reg_mr_at`].
    pub fn alloc_mr_stag_at(
        &mut self,
        stag: Stag,
        pd: PdId,
        max_len: u64,
        remote_access_flag: bool,
    ) -> Result<Stag, VerbError> {
        self.mem
            .alloc_mr_stag_at(&mut self.pds, stag, pd, max_len, remote_access_flag)
    }

    /// Allocate MW under exactly `stag` (from another engine's [`Rnic::alloc_mw`]).
    /// Errors as [`Rnic::reg_mr_at`].
    pub fn alloc_mw_at(&mut self, stag: Stag, pd: PdId, kind: MwType) -> Result<Stag, VerbError> {
        self.mem.alloc_mw_at(&mut self.pds, stag, pd, kind)
    }

    /// True if the 24-bit STag index names a region or window here (any state or key).
    pub fn stag_in_use(&self, stag_index: u32) -> bool {
        self.mem.stag_in_use(stag_index)
    }
}
