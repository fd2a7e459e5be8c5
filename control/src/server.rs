//! [`ControlServer`]: the socket, the poll loop, Hello, dispatch of requests and of the
//! cores' notices.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp_runtime::Placement;
use iwarp_shm_mem::{Backing, RegionTable, SharedMapping};
use iwarp_shm_ring::DoorbellBlock;
use iwarp_shm_ring::{
    AreaView, RingHeap, DOORBELL_BITS, DOORBELL_BLOCK_BYTES, DOORBELL_OFFSET, RING_AREA_BYTES,
};
use iwarp_shm_service::{ServiceError, ServiceReply, ServiceRequest};
use iwarp_shm_socket::{
    Channel, ClientMsg, CounterSet, DeviceAttr, ErrorCode, ErrorReply, Event, Listener, PortAttr,
    RecvError, Request, Response, ServerMsg, Welcome, PROTOCOL_VERSION,
};

use crate::admission::{full_error, not_shown_text, LogLimit, Refusal};
use crate::client::{Area, Client, CmState, Phase};
use crate::link::{err, service_error, CoreLink};
use crate::policy::{AccountDb, Policy};
use crate::ControlConfig;

/// Connections accepted per step (the rest wait in the listen backlog for the next
/// step): a flood of connections cannot starve the clients' requests.
const ACCEPTS_PER_STEP: usize = 16;
/// Messages read from one client per step: one, so that the receive on a socket poll
/// found readable never blocks (client sockets stay blocking for sends, bounded by
/// [`SEND_TIMEOUT`]).
const MESSAGES_PER_STEP: usize = 1;
/// Notices taken from one core per step.
const NOTICES_PER_STEP: usize = 1024;
/// Longest client name kept.
const NAME_BYTES_MAX: usize = 64;
/// How long a send to a client may block before the client is dropped.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_millis(500);

/// Dataplane counters for `Admin(Counters)`: per core, then the sum.
pub type CounterSource = Box<dyn FnMut() -> Vec<CounterSet> + Send>;

/// The live link of port `i` for `QueryPort`, `Welcome` and `Admin(Status)`: (up, speed
/// in Mbit/s, changes to up, changes to down), `None` for no such port. Read once per
/// [`ControlServer::step`].
pub type LinkSource = Box<dyn FnMut(usize) -> Option<(bool, u32, u64, u64)> + Send>;

/// What an operator asks of the daemon's capture (`iwarpctl capture`).
#[derive(Debug)]
pub enum CaptureCommand {
    /// Start writing pcap into `file`: frames of port index `port` (all if `None`) cut to
    /// `snaplen` bytes (whole if `None`).
    Start {
        /// The file, opened for writing by the asker.
        file: OwnedFd,
        /// Port index, or all.
        port: Option<u16>,
        /// Bytes kept of each frame.
        snaplen: Option<u32>,
    },
    /// Stop the running capture.
    Stop,
}

/// The daemon's capture control: what was done, in a sentence, or why not.
pub type CaptureSource = Box<dyn FnMut(CaptureCommand) -> Result<String, String> + Send>;

/// What a handler answers: the response and the descriptors that go with it.
pub(crate) struct Out {
    pub resp: Response,
    pub fds: Vec<OwnedFd>,
}

impl From<Response> for Out {
    fn from(resp: Response) -> Out {
        Out {
            resp,
            fds: Vec::new(),
        }
    }
}

pub(crate) type Res = Result<Out, ErrorReply>;

/// Counters of the control server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Clients welcomed since start.
    pub clients_total: u64,
    /// Connections refused (the sum of the `refused_*` below).
    pub refused: u64,
    /// Refused at once: the access policy does not admit the user.
    pub refused_policy: u64,
    /// Refused with `DaemonFull`: `max_clients` clients were welcomed.
    pub refused_full: u64,
    /// Refused at once: the uid held `max_conns_per_uid` welcomed connections.
    pub refused_uid_limit: u64,
    /// Refused at `Hello`: another protocol version, or a first message not `Hello`.
    pub refused_protocol: u64,
    /// Closed for saying nothing within `hello_timeout`.
    pub hello_timeouts: u64,
    /// Connections closed before `Hello` to make room for a newer one of the same uid
    /// (or of another uid when the pending table is full).
    pub pending_evicted: u64,
    /// Requests served.
    pub requests: u64,
    /// Malformed frames.
    pub bad_frames: u64,
    /// Notices routed to a client.
    pub notices: u64,
    /// Notices for a client that is gone.
    pub notices_orphaned: u64,
    /// Teardowns done.
    pub teardowns: u64,
    /// Arenas whose removal waits for a fence that timed out.
    pub arenas_pending: u64,
}

/// Everything but the clients: what handlers need besides the client they serve.
pub(crate) struct Ctx<C> {
    pub cfg: ControlConfig,
    pub cores: Vec<C>,
    pub regions: Arc<RegionTable>,
    pub device: DeviceAttr,
    pub ports: Vec<PortAttr>,
    /// The port (index into `ports`) whose engine each core service drives.
    pub service_ports: Vec<usize>,
    pub placement: Option<Placement>,
    pub rr: usize,
    pub started: Instant,
    pub stats: ServerStats,
    pub counters: Option<CounterSource>,
    pub capture: Option<CaptureSource>,
    pub links: Option<LinkSource>,
    /// Arenas removed from clients whose last fence timed out: removed from the region
    /// table once a fence on every core succeeds.
    pub pending_regions: Vec<(iwarp_types::RegionId, Arc<SharedMapping>)>,
    pub shutting_down: bool,
}

impl<C: CoreLink> Ctx<C> {
    /// One request to one core, its error named after `what`.
    pub fn call(
        &mut self,
        core: usize,
        req: ServiceRequest,
        what: &str,
    ) -> Result<ServiceReply, ErrorReply> {
        let t = self.cfg.core_timeout;
        let link = self
            .cores
            .get_mut(core)
            .ok_or_else(|| err(ErrorCode::Internal, format!("{what}: no core {core}")))?;
        link.call(req, t).map_err(|e| service_error(what, core, e))
    }

    /// A raw call (teardown wants the `ServiceError`).
    pub fn call_raw(
        &mut self,
        core: usize,
        req: ServiceRequest,
        t: Duration,
    ) -> Result<ServiceReply, ServiceError> {
        match self.cores.get_mut(core) {
            Some(l) => l.call(req, t),
            None => Err(ServiceError::CoreGone),
        }
    }

    /// Number of cores.
    pub fn ncores(&self) -> usize {
        self.cores.len()
    }

    /// The port whose engine core service `core` drives.
    pub fn port_of(&self, core: usize) -> usize {
        self.service_ports.get(core).copied().unwrap_or(0)
    }

    /// The address of the port core service `core` drives (0.0.0.0 if unknown).
    pub fn ip_of(&self, core: usize) -> [u8; 4] {
        self.ports.get(self.port_of(core)).map_or([0; 4], |p| p.ip)
    }

    /// The core of a new active QP: one of the services of the first port (a QP is
    /// created before its destination is known, so active opens leave through port 0).
    /// The policy's pick `i` is the i-th of those services.
    pub fn place(&mut self, key: u64) -> usize {
        let first: Vec<usize> = (0..self.cores.len())
            .filter(|&i| self.port_of(i) == 0)
            .collect();
        let n = first.len().max(1);
        if let Some(i) = self.placement.as_mut().and_then(|p| p.pick(key)) {
            if let Some(&core) = first.get(i) {
                return core;
            }
        }
        let i = self.rr % n;
        self.rr = (i + 1) % n;
        first.get(i).copied().unwrap_or(0)
    }

    /// Fence on every core; true if all answered.
    pub fn fence_all(&mut self) -> bool {
        let t = self.cfg.core_timeout;
        (0..self.cores.len()).all(|i| self.call_raw(i, ServiceRequest::Fence, t).is_ok())
    }
}

/// The control server.
pub struct ControlServer<C: CoreLink> {
    pub(crate) ctx: Ctx<C>,
    pub(crate) clients: BTreeMap<u32, Client>,
    listener: Option<Listener>,
    pub(crate) policy: Policy,
    pub(crate) db: AccountDb,
    pub(crate) next_id: u32,
    busy: bool,
    /// The earliest `Hello` deadline of a pending connection.
    pub(crate) next_expiry: Option<Instant>,
    /// Line budgets: refusals (warn), admissions (info).
    pub(crate) log_limit: [LogLimit; 2],
}

impl<C: CoreLink> ControlServer<C> {
    /// A server over `cores` (core `i` is `cores[i]`) that puts arenas in `regions`,
    /// describes itself with `device` and `ports` and places active QPs by `placement`
    /// (round robin if `None` or if it has no cores). Resolves the policy; binds nothing
    /// yet (see [`ControlServer::bind`]).
    pub fn new(
        cfg: ControlConfig,
        cores: Vec<C>,
        regions: Arc<RegionTable>,
        device: DeviceAttr,
        ports: Vec<PortAttr>,
        placement: Option<Placement>,
    ) -> Result<ControlServer<C>, String> {
        let db = AccountDb::system();
        let policy = Policy::resolve(&db, &cfg.allow_users, &cfg.allow_groups, &cfg.admin_users)?;
        if cores.is_empty() || cores.len() > iwarp_shm_ring::MAX_CORES as usize {
            return Err(format!(
                "control: {} dataplane cores (1..={} served)",
                cores.len(),
                iwarp_shm_ring::MAX_CORES
            ));
        }
        Ok(ControlServer {
            ctx: Ctx {
                cfg,
                service_ports: vec![0; cores.len()],
                cores,
                regions,
                device,
                ports,
                placement,
                rr: 0,
                started: Instant::now(),
                stats: ServerStats::default(),
                counters: None,
                capture: None,
                links: None,
                pending_regions: Vec::new(),
                shutting_down: false,
            },
            clients: BTreeMap::new(),
            listener: None,
            policy,
            db,
            next_id: 1,
            busy: false,
            next_expiry: None,
            log_limit: [LogLimit::new(), LogLimit::new()],
        })
    }

    /// Replaces the policy (tests use their own account database).
    pub fn set_policy(&mut self, policy: Policy, db: AccountDb) {
        self.policy = policy;
        self.db = db;
    }

    /// Says which port each core service drives (`ports[i]` for `cores[i]`; every
    /// service drives port 0 unless told). A daemon with several ports runs one service
    /// per (core, port): active QPs go to services of port 0, a listen on an address to
    /// the services of the port that has it, a listen on 0.0.0.0 to all.
    pub fn set_service_ports(&mut self, ports: Vec<usize>) -> Result<(), String> {
        if ports.len() != self.ctx.cores.len() {
            return Err(format!(
                "control: {} service ports for {} core services",
                ports.len(),
                self.ctx.cores.len()
            ));
        }
        if let Some(p) = ports.iter().find(|&&p| p >= self.ctx.ports.len().max(1)) {
            return Err(format!(
                "control: a service of port {p}, the daemon has {}",
                self.ctx.ports.len()
            ));
        }
        if !ports.contains(&0) {
            return Err("control: no service drives port 0 (active QPs go there)".into());
        }
        self.ctx.service_ports = ports;
        Ok(())
    }

    /// Where `Admin(Counters)` gets the dataplane counters.
    pub fn set_counters(&mut self, source: CounterSource) {
        self.ctx.counters = Some(source);
    }

    /// What runs `Admin(CaptureStart / CaptureStop)` (iwarpd: its capture rings and
    /// writer); without one they are refused.
    pub fn set_capture(&mut self, source: CaptureSource) {
        self.ctx.capture = Some(source);
    }

    /// Where the ports' live link state comes from (without one, the state given at
    /// construction is answered).
    pub fn set_links(&mut self, source: LinkSource) {
        self.ctx.links = Some(source);
    }

    /// The ports as `QueryPort` answers them now.
    pub fn ports(&self) -> &[PortAttr] {
        &self.ctx.ports
    }

    /// Creates the socket (its directory if missing; a stale socket file is replaced),
    /// mode 0666: access is checked per connection.
    pub fn bind(&mut self) -> Result<(), String> {
        let path = self.ctx.cfg.socket.clone();
        let shown = path.display();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("control.socket: cannot create {}: {e}", dir.display()))?;
        }
        if path.exists() {
            if Channel::connect(&path).is_ok() {
                return Err(format!(
                    "control.socket: {shown} is in use by a running daemon"
                ));
            }
            let _ = std::fs::remove_file(&path);
        }
        let l = Listener::bind(&path, 64)
            .map_err(|e| format!("control.socket: cannot bind {shown}: {e}"))?;
        l.set_nonblocking(true)
            .map_err(|e| format!("control.socket: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| format!("control.socket: chmod {shown}: {e}"))?;
        self.listener = Some(l);
        Ok(())
    }

    /// Serves a connection made elsewhere (tests, an in-process client), admitted as a
    /// connection to the socket is: `None` if it was refused (and answered).
    pub fn adopt(&mut self, chan: Channel) -> Option<u32> {
        self.add_client(chan)
    }

    /// [`ControlServer::adopt`] as if the peer were `cred` (tests of the admission rules
    /// for other users).
    #[cfg(test)]
    pub(crate) fn adopt_as(
        &mut self,
        chan: Channel,
        cred: iwarp_shm_socket::PeerCred,
    ) -> Option<u32> {
        self.admit_connection(chan, cred)
    }

    /// Counters.
    pub fn stats(&self) -> ServerStats {
        self.ctx.stats
    }

    /// Connections (welcomed clients and those that have not said `Hello` yet).
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Runs until `stop`, then shuts down (clients told, torn down, socket removed).
    pub fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.step(Duration::from_millis(2));
        }
        self.shutdown();
    }

    /// One turn: waits at most `max_wait` (less right after work) for the sockets, then
    /// accepts, serves requests, routes the cores' notices. Returns true if it did work.
    pub fn step(&mut self, max_wait: Duration) -> bool {
        if let Some(links) = &mut self.ctx.links {
            for (i, p) in self.ctx.ports.iter_mut().enumerate() {
                if let Some((up, speed, ups, downs)) = links(i) {
                    p.link_up = up;
                    p.speed_mbps = speed;
                    p.link_ups = ups;
                    p.link_downs = downs;
                }
            }
        }
        let wait = if self.busy {
            Duration::from_micros(100)
        } else {
            max_wait
        };
        let (accept, ready) = self.wait(wait);
        let mut work = false;
        if accept {
            work |= self.accept();
        }
        for (id, hup) in ready {
            work = true;
            self.serve(id, hup);
        }
        work |= self.expire_pending(Instant::now());
        work |= self.route_notices();
        if !self.ctx.pending_regions.is_empty() {
            self.retry_pending_regions();
        }
        self.busy = work;
        work
    }

    fn wait(&mut self, timeout: Duration) -> (bool, Vec<(u32, bool)>) {
        use rustix::event::{poll, PollFd, PollFlags};
        let ids: Vec<u32> = self.clients.keys().copied().collect();
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(ids.len() + 1);
        if let Some(l) = &self.listener {
            fds.push(PollFd::new(l, PollFlags::IN));
        }
        for c in self.clients.values() {
            fds.push(PollFd::new(&c.chan, PollFlags::IN));
        }
        let ts = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        if poll(&mut fds, Some(&ts)).is_err() {
            return (false, Vec::new());
        }
        let off = usize::from(self.listener.is_some());
        let accept = off == 1 && fds[0].revents().contains(PollFlags::IN);
        let ready = ids
            .iter()
            .enumerate()
            .filter_map(|(i, id)| {
                let r = fds[i + off].revents();
                (!r.is_empty()).then(|| {
                    (
                        *id,
                        r.intersects(PollFlags::HUP | PollFlags::ERR) && !r.contains(PollFlags::IN),
                    )
                })
            })
            .collect();
        (accept, ready)
    }

    fn accept(&mut self) -> bool {
        let mut any = false;
        for _ in 0..ACCEPTS_PER_STEP {
            let Some(l) = &self.listener else { break };
            match l.accept() {
                Ok(Some(chan)) => {
                    any = true;
                    self.add_client(chan);
                }
                _ => break,
            }
        }
        any
    }

    fn add_client(&mut self, chan: Channel) -> Option<u32> {
        match chan.peer_cred() {
            Ok(cred) => self.admit_connection(chan, cred),
            Err(_) => {
                self.count_refusal(Refusal::NoCred);
                None
            }
        }
    }

    fn serve(&mut self, id: u32, hup: bool) {
        if hup {
            self.drop_client(id);
            return;
        }
        for _ in 0..MESSAGES_PER_STEP {
            let Some(c) = self.clients.get_mut(&id) else {
                return;
            };
            match c.chan.recv::<ClientMsg>() {
                Ok((msg, fds)) => {
                    if !self.handle(id, msg, fds) {
                        self.drop_client(id);
                        return;
                    }
                }
                Err(RecvError::WouldBlock) => return,
                Err(RecvError::Frame(e)) => {
                    self.ctx.stats.bad_frames += 1;
                    c.bad_frames += 1;
                    let r =
                        ErrorReply::new(ErrorCode::BadMessage, format!("malformed message: {e}"));
                    let too_many = c.bad_frames >= self.ctx.cfg.max_bad_frames;
                    if !send_reply(c, 0, Err(r), Vec::new()) || too_many {
                        self.drop_client(id);
                        return;
                    }
                }
                Err(RecvError::Truncated) => {
                    self.ctx.stats.bad_frames += 1;
                    c.bad_frames += 1;
                    let r =
                        ErrorReply::new(ErrorCode::BadMessage, "message or descriptors truncated");
                    let too_many = c.bad_frames >= self.ctx.cfg.max_bad_frames;
                    if !send_reply(c, 0, Err(r), Vec::new()) || too_many {
                        self.drop_client(id);
                        return;
                    }
                }
                Err(RecvError::Closed) | Err(RecvError::Io(_)) => {
                    self.drop_client(id);
                    return;
                }
            }
        }
    }

    /// Serves one message; false if the client must go.
    fn handle(&mut self, id: u32, msg: ClientMsg, fds: Vec<OwnedFd>) -> bool {
        self.ctx.stats.requests += 1;
        let Some(c) = self.clients.get_mut(&id) else {
            return false;
        };
        let seq = msg.seq;
        if c.phase == Phase::AwaitHello {
            let (result, fds_out, keep) = self.hello(id, msg.request, fds);
            let Some(c) = self.clients.get_mut(&id) else {
                return false;
            };
            return send_reply(c, seq, result.map(|o| o.resp), fds_out) && keep;
        }
        match msg.request {
            Request::Hello { .. } => send_reply(
                c,
                seq,
                Err(err(ErrorCode::NotReady, "Hello came twice")),
                Vec::new(),
            ),
            Request::Bye => {
                let _ = send_reply(c, seq, Ok(Response::Ok), Vec::new());
                false
            }
            Request::Admin(a) => {
                let r = self.admin(id, a, fds);
                let Some(c) = self.clients.get_mut(&id) else {
                    return false;
                };
                send_reply(c, seq, r, Vec::new())
            }
            req => {
                let r = if self.ctx.shutting_down {
                    Err(err(ErrorCode::ShuttingDown, "the daemon is shutting down"))
                } else {
                    crate::verbs::dispatch(&mut self.ctx, c, req, fds)
                };
                let Some(c) = self.clients.get_mut(&id) else {
                    return false;
                };
                match r {
                    Ok(out) => send_reply(c, seq, Ok(out.resp), out.fds),
                    Err(e) => send_reply(c, seq, Err(e), Vec::new()),
                }
            }
        }
    }

    /// The first message: version, policy, limit, then the ring area and `AttachClient`
    /// on every core. Returns the answer and whether the client stays.
    fn hello(&mut self, id: u32, req: Request, fds: Vec<OwnedFd>) -> (Res, Vec<OwnedFd>, bool) {
        drop(fds);
        let refuse = |code, msg: String| (Err(err(code, msg)), Vec::new(), false);
        let Request::Hello { version, name } = req else {
            self.count_refusal(Refusal::Protocol);
            return refuse(
                ErrorCode::NotReady,
                "the first message must be Hello".into(),
            );
        };
        if version != PROTOCOL_VERSION {
            self.count_refusal(Refusal::Protocol);
            return refuse(
                ErrorCode::VersionMismatch,
                format!(
                    "the client speaks protocol version {version}, this daemon {PROTOCOL_VERSION}"
                ),
            );
        }
        let welcomed = self
            .clients
            .values()
            .filter(|c| c.phase == Phase::Ready)
            .count();
        if welcomed >= self.ctx.cfg.max_clients {
            // Admitted at accept (the policy was checked there); full since.
            self.count_refusal(Refusal::Full);
            let e = full_error(self.ctx.cfg.max_clients);
            return (Err(e), Vec::new(), false);
        }
        let Some(c) = self.clients.get_mut(&id) else {
            return refuse(ErrorCode::Internal, "client vanished".into());
        };
        c.name = truncate(&name, NAME_BYTES_MAX);
        match welcome(&mut self.ctx, c) {
            Ok((w, fd)) => {
                c.phase = Phase::Ready;
                self.ctx.stats.clients_total += 1;
                let (cid, cred, admin) = (c.id, c.cred, c.admin);
                let name = c.name.clone();
                if let Some(not_shown) = self.log_allowed(false) {
                    tracing::info!(
                        client = cid,
                        uid = cred.uid,
                        pid = cred.pid,
                        name = %name,
                        admin,
                        not_shown,
                        "verbs client {cid} admitted: uid {} pid {} {name:?}{}{}",
                        cred.uid,
                        cred.pid,
                        if admin { " (admin)" } else { "" },
                        not_shown_text(not_shown)
                    );
                }
                (Ok(Response::Welcome(w).into()), vec![fd], true)
            }
            Err(e) => (Err(e), Vec::new(), false),
        }
    }

    pub(crate) fn drop_client(&mut self, id: u32) {
        if let Some(c) = self.clients.remove(&id) {
            crate::teardown::teardown(&mut self.ctx, c);
        }
    }

    fn route_notices(&mut self) -> bool {
        let mut any = false;
        for core in 0..self.ctx.cores.len() {
            for _ in 0..NOTICES_PER_STEP {
                let Some(n) = self.ctx.cores[core].poll_notice() else {
                    break;
                };
                any = true;
                crate::cm::route(&mut self.ctx, &mut self.clients, core, n);
            }
        }
        any
    }

    fn retry_pending_regions(&mut self) {
        if self.ctx.fence_all() {
            for (r, _m) in std::mem::take(&mut self.ctx.pending_regions) {
                self.ctx.regions.remove(r);
            }
            self.ctx.stats.arenas_pending = 0;
        }
    }

    /// Orderly end: every client's area says `DAEMON_GONE`, gets `Event::Shutdown` and
    /// its socket closes; then the clients' connections close gracefully (FIN both
    /// ways, so each peer sees a disconnect and our FIN is known to have arrived) for at
    /// most `shutdown_grace`; then every client is torn down (what is still connected is
    /// reset); the socket file is removed.
    pub fn shutdown(&mut self) {
        self.ctx.shutting_down = true;
        self.listener = None;
        let _ = std::fs::remove_file(&self.ctx.cfg.socket);
        for c in self.clients.values() {
            let _ = c.chan.send(&ServerMsg::Event(Event::Shutdown), &[]);
            c.end_session();
        }
        self.close_connections(Instant::now() + self.ctx.cfg.shutdown_grace);
        let ids: Vec<u32> = self.clients.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.clients.remove(&id) {
                crate::teardown::teardown(&mut self.ctx, c);
            }
        }
        self.retry_pending_regions();
    }

    /// Disconnects every client connection that is up and waits until all connections
    /// (those being opened too) closed, or `deadline`. The cores' notices move the CM
    /// ids to `Closed`; the events they would give go nowhere (the sockets are closed).
    fn close_connections(&mut self, deadline: Instant) {
        for c in self.clients.values_mut() {
            for h in c.cm_ids.handles() {
                let Some(x) = c.cm_ids.get(h) else { continue };
                let (CmState::Connected { core, .. }, Some(q)) = (x.state, x.qp) else {
                    continue;
                };
                let Some(qp) = c.qps.get(q).map(|q| q.id) else {
                    continue;
                };
                let _ = self.ctx.call(
                    core,
                    ServiceRequest::Disconnect { client: c.id, qp },
                    "Disconnect",
                );
            }
        }
        let open = |clients: &BTreeMap<u32, Client>| {
            clients.values().any(|c| {
                c.cm_ids.iter().any(|(_, x)| {
                    matches!(
                        x.state,
                        CmState::Connected { .. } | CmState::Connecting { .. }
                    )
                })
            })
        };
        // Bounded by the deadline; each turn routes at most NOTICES_PER_STEP per core.
        while open(&self.clients) && Instant::now() < deadline {
            if !self.route_notices() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Builds the client's ring area and attaches it on every core.
fn welcome<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
) -> Result<(Welcome, OwnedFd), ErrorReply> {
    let n = ctx.ncores();
    let mapping = SharedMapping::create(
        &format!("iwarpd-client-{}", c.id),
        RING_AREA_BYTES,
        Backing::Pages,
    )
    .map_err(|e| err(ErrorCode::OutOfMemory, format!("ring area: {e}")))?;
    let mapping = Arc::new(mapping);
    let view = AreaView::init(mapping.region(), c.id, n as u32)
        .map_err(|e| err(ErrorCode::Internal, format!("ring area: {e}")))?;
    let fd = mapping
        .dup_fd()
        .map_err(|e| err(ErrorCode::OutOfMemory, format!("ring area fd: {e}")))?;
    let heap = RingHeap::new(view.area_len() as u64);
    let mut doorbells = Vec::with_capacity(n);
    for core in 0..n {
        let off = DOORBELL_OFFSET + core * DOORBELL_BLOCK_BYTES;
        doorbells.push(off as u64);
        let block = mapping
            .region()
            .sub(off, DOORBELL_BLOCK_BYTES)
            .and_then(DoorbellBlock::new)
            .map_err(|e| err(ErrorCode::Internal, format!("doorbell block: {e}")))?;
        match ctx.call(
            core,
            ServiceRequest::AttachClient {
                client: c.id,
                doorbells: block,
            },
            "AttachClient",
        ) {
            Ok(_) => c.attached[core] = true,
            Err(e) => {
                crate::teardown::detach_all(ctx, c);
                return Err(e);
            }
        }
    }
    c.area = Some(Area {
        mapping,
        view,
        heap,
    });
    let mut device = ctx.device.clone();
    device.cores = n as u32;
    let w = Welcome {
        version: PROTOCOL_VERSION,
        client_id: c.id,
        ring_area_len: RING_AREA_BYTES as u64,
        doorbells,
        doorbell_bits: DOORBELL_BITS,
        device,
        ports: ctx.ports.clone(),
    };
    Ok((w, fd))
}

/// Sends a reply; false if the client cannot be written to.
pub(crate) fn send_reply(
    c: &Client,
    seq: u64,
    result: Result<Response, ErrorReply>,
    fds: Vec<OwnedFd>,
) -> bool {
    let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
    c.chan
        .send(&ServerMsg::Reply { seq, result }, &borrowed)
        .is_ok()
}

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
