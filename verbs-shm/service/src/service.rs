//! [`ShmService`]: the state, the channel constructor and the [`App`] implementation.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use iwarp_engine::{Engine, Event};
use iwarp_runtime::App;
use iwarp_types::{ConnId, CqId, Instant, Memory, QpId, SrqId};

use crate::handle::{ServiceHandle, Shared, NO_REPLY};
use crate::request::{ClientId, ServiceCounters, ServiceNotice};
use crate::tables::{Client, ConnEntry, CqEntry, QpEntry, RxRing, SrqEntry};

/// Chooses local ports for active opens: `(remote_ip, remote_port, local_port)` → true if
/// the return traffic of that 4-tuple is steered to this core.
pub type PortFilter = Arc<dyn Fn(core::net::Ipv4Addr, u16, u16) -> bool + Send + Sync>;

/// Limits and bursts of one service.
#[derive(Clone)]
pub struct ServiceConfig {
    /// Clients attached at most.
    pub max_clients: usize,
    /// QPs, SRQs and CQs (each) the service tracks at most.
    pub max_objects: usize,
    /// Connections (set up or up) tracked at most.
    pub max_conns: usize,
    /// Slots taken from one ring per visit.
    pub ring_burst: usize,
    /// Rings served per `poll` from the pending list (doorbells are always taken).
    pub rings_per_poll: usize,
    /// Control requests handled per `poll`.
    pub requests_per_poll: usize,
    /// Local ports of active opens: `None` takes any free port (one core).
    pub port_filter: Option<PortFilter>,
}

impl core::fmt::Debug for ServiceConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ServiceConfig")
            .field("max_clients", &self.max_clients)
            .field("max_objects", &self.max_objects)
            .field("ring_burst", &self.ring_burst)
            .field("port_filter", &self.port_filter.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig {
            max_clients: 64,
            max_objects: 16384,
            max_conns: 16384,
            ring_burst: 32,
            rings_per_poll: 256,
            requests_per_poll: 8,
            port_filter: None,
        }
    }
}

/// The per-core shared-memory verbs service: an [`App`] hosted by one dataplane core
/// (bound to one port's engine). See the crate documentation.
pub struct ShmService {
    pub(crate) shared: Arc<Shared>,
    pub(crate) core: usize,
    pub(crate) cfg: ServiceConfig,
    pub(crate) clients: HashMap<ClientId, Client>,
    pub(crate) qps: HashMap<QpId, QpEntry>,
    pub(crate) srqs: HashMap<SrqId, SrqEntry>,
    pub(crate) cqs: HashMap<CqId, CqEntry>,
    pub(crate) conns: HashMap<ConnId, ConnEntry>,
    /// Listening port → (client, CM id).
    pub(crate) listeners: HashMap<u16, (ClientId, u32)>,
    /// QPs whose send queue ring has slots left over (each at most once: the entry's
    /// `sq_pending` flag), served `rings_per_poll` at a time.
    pub(crate) pending_sq: Vec<QpId>,
    /// Receive rings (RQ, SRQ) whose doorbell was taken (each at most once), served to
    /// the end before the next frames are handled (`serve_receive_rings`).
    pub(crate) pending_rx: Vec<RxRing>,
    /// CQs with a wake-up left over (each at most once).
    pub(crate) cq_pending: Vec<CqId>,
    /// Scratch: slots popped from a ring.
    pub(crate) slots: Vec<u8>,
    pub(crate) counters: ServiceCounters,
    pub(crate) shutting_down: bool,
}

/// A channel to the service of core `core` with queues of `capacity` entries and the
/// default [`ServiceConfig`].
pub fn service_channel(core: usize, capacity: usize) -> (ServiceHandle, ShmService) {
    service_channel_with(core, capacity, ServiceConfig::default())
}

/// [`service_channel`] with a configuration.
pub fn service_channel_with(
    core: usize,
    capacity: usize,
    cfg: ServiceConfig,
) -> (ServiceHandle, ShmService) {
    let shared = Arc::new(Shared::new(capacity));
    let burst = cfg.ring_burst.max(1);
    let svc = ShmService {
        shared: shared.clone(),
        core,
        clients: HashMap::with_capacity(cfg.max_clients),
        qps: HashMap::with_capacity(cfg.max_objects.min(1024)),
        srqs: HashMap::new(),
        cqs: HashMap::with_capacity(cfg.max_objects.min(1024)),
        conns: HashMap::with_capacity(cfg.max_conns.min(1024)),
        listeners: HashMap::new(),
        pending_sq: Vec::with_capacity(cfg.max_objects.min(1024)),
        pending_rx: Vec::with_capacity(cfg.max_objects.min(1024)),
        cq_pending: Vec::with_capacity(cfg.max_objects.min(1024)),
        slots: vec![0; burst * iwarp_shm_ring::SEND_SLOT_SIZE],
        counters: ServiceCounters::default(),
        shutting_down: false,
        cfg,
    };
    (ServiceHandle::new(shared, core), svc)
}

impl Drop for ShmService {
    fn drop(&mut self) {
        self.shared.gone.store(true, Ordering::Release);
    }
}

impl ShmService {
    /// The core this service runs on.
    pub fn core(&self) -> usize {
        self.core
    }

    /// Service-wide counters.
    pub fn counters(&self) -> ServiceCounters {
        self.counters
    }

    /// Queues a notice; false (counted) if the queue is full.
    pub(crate) fn notify(&mut self, n: ServiceNotice) -> bool {
        if self.shared.notices.push(n).is_ok() {
            self.counters.notices += 1;
            true
        } else {
            self.counters.notices_dropped += 1;
            false
        }
    }

    /// Handles up to `requests_per_poll` control requests.
    fn serve_requests<M: Memory>(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        for _ in 0..self.cfg.requests_per_poll {
            let Some((id, req)) = self.shared.requests.pop() else {
                break;
            };
            self.counters.requests += 1;
            let r = self.execute(now, engine, mem, req);
            if id != NO_REPLY && self.shared.replies.push((id, r)).is_err() {
                self.counters.replies_dropped += 1;
            }
        }
    }
}

impl<M: Memory> App<M> for ShmService {
    fn on_event(&mut self, now: Instant, engine: &mut Engine, _mem: &mut M, event: &Event) -> bool {
        let taken = self.route_event(now, engine, event);
        if taken {
            self.counters.events += 1;
        }
        taken
    }

    fn poll(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        // Doorbells before control requests: a client that posts WRs and then makes a
        // control call (query, modify, disconnect) has its WRs taken first, so a control
        // reply orders after the WRs posted before the call (docs/APPS.md).
        self.take_doorbells();
        self.serve_receive_rings(engine);
        self.serve_pending(engine);
        self.serve_requests(now, engine, mem);
        self.serve_cq_pending();
    }

    fn before_frames(&mut self, _now: Instant, engine: &mut Engine, _mem: &mut M) {
        // Receives reach the engine through rings served here and in `poll`: a frame
        // handled before a receive's doorbell was taken would find no receive though the
        // client posted one before the message it answers (docs/APPS.md, "Receives
        // before the frames that need them").
        self.take_doorbells();
        self.serve_receive_rings(engine);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn shutdown(&mut self, now: Instant, engine: &mut Engine, _mem: &mut M) {
        self.shutting_down = true;
        let qps: Vec<QpId> = self
            .qps
            .iter()
            .filter(|(_, q)| q.conn.is_some())
            .map(|(id, _)| *id)
            .collect();
        for qp in qps {
            let _ = engine.disconnect(now, qp);
        }
    }

    fn is_idle(&self) -> bool {
        self.qps.values().all(|q| q.conn.is_none())
    }
}
