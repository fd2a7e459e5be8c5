//! [`Console`]: a test app through which tests and examples run verbs and connection
//! management on a core, inside its loop, the way the daemon's apps do.
//!
//! The core's control vocabulary has no verbs (`Op` is apps, snapshot, shutdown): the
//! daemon's verbs reach an engine through the shared-memory verbs service, an app. Tests
//! of the core need a QP or a connection without that service, so every testbed core
//! hosts a console: the test hands it a closure (a job), the core runs it on its next
//! iteration with the engine, its memory and the time, and the test collects the result.
//! The console takes the events of what its jobs made (QPs, CQs, connections, listening
//! ports) and keeps them for the test; it closes its connections when the core shuts
//! down, like any app.
//!
//! The job queue sits behind a mutex: a test tool, never on a dataplane's packet path.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::any::Any;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use iwarp_engine::{AcceptParams, CmError, ConnectParams, Engine, Event};
use iwarp_types::{ConnId, CqId, EventResource, Instant, Memory, QpId};

use crate::app::App;

/// Jobs run per core iteration at most.
const JOBS_PER_POLL_MAX: usize = 16;
/// Events kept for the test at most; the oldest goes first.
const EVENTS_KEPT_MAX: usize = 4096;
/// Results kept at most (a test that never collects them loses the oldest).
const RESULTS_KEPT_MAX: usize = 4096;

/// A closure run on the core: what it returns goes back to the test.
pub type Job<M> = Box<dyn FnOnce(&mut ConsoleCx<'_, M>) -> Box<dyn Any + Send> + Send>;

/// Which local ports steer back to the console's core: `(remote ip, remote port, local
/// port)`.
pub type PortFilter = Box<dyn Fn(Ipv4Addr, u16, u16) -> bool + Send>;

/// What a job sees: the engine, the core's memory, the time, and the console's record
/// of what is its own.
pub struct ConsoleCx<'a, M> {
    /// The time of this iteration.
    pub now: Instant,
    /// The port's engine.
    pub engine: &'a mut Engine,
    /// The core's memory.
    pub mem: &'a mut M,
    owned: &'a mut Owned,
    filter: &'a Option<PortFilter>,
}

impl<M> ConsoleCx<'_, M> {
    /// The console takes `qp`'s events from now on.
    pub fn own_qp(&mut self, qp: QpId) {
        self.owned.qps.insert(qp);
    }

    /// The console takes `cq`'s notifications from now on.
    pub fn own_cq(&mut self, cq: CqId) {
        self.owned.cqs.insert(cq);
    }

    /// Hands `qp` to another app: the console no longer takes its events nor closes it.
    pub fn release(&mut self, qp: QpId) {
        self.owned.qps.remove(&qp);
        self.owned.live.remove(&qp);
    }

    /// Listens on `port`; the console takes its connect requests.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<(), CmError> {
        self.engine.listen(port, backlog)?;
        self.owned.ports.insert(port);
        Ok(())
    }

    /// Active open of `qp` to `remote` from a local port whose return traffic steers to
    /// this core. Returns the connection and the local port.
    pub fn connect(
        &mut self,
        qp: QpId,
        remote: SocketAddrV4,
        params: ConnectParams,
    ) -> Result<(ConnId, u16), CmError> {
        let (rip, rport) = (*remote.ip(), remote.port());
        let filter = self.filter;
        let local_port = self
            .engine
            .choose_local_port(rip, rport, |p| {
                filter.as_ref().is_none_or(|f| f(rip, rport, p))
            })
            .ok_or(CmError::NoPort)?;
        let conn = self
            .engine
            .connect_from(self.now, qp, local_port, rip, rport, params)?;
        self.owned.qps.insert(qp);
        self.owned.conns.insert(conn);
        Ok((conn, local_port))
    }

    /// Accepts `conn` (reported by a connect request) on `qp`.
    pub fn accept(&mut self, conn: ConnId, qp: QpId, params: AcceptParams) -> Result<(), CmError> {
        self.engine.accept(self.now, conn, qp, params)?;
        self.owned.qps.insert(qp);
        self.owned.conns.insert(conn);
        Ok(())
    }
}

/// What the console owns.
#[derive(Default)]
struct Owned {
    qps: HashSet<QpId>,
    cqs: HashSet<CqId>,
    conns: HashSet<ConnId>,
    ports: HashSet<u16>,
    /// Its established QPs (closed on shutdown).
    live: HashSet<QpId>,
}

impl Owned {
    /// True if `ev` concerns something of the console's; keeps the record current.
    fn take(&mut self, ev: &Event) -> bool {
        match *ev {
            Event::ConnectRequest {
                conn, local_port, ..
            } => {
                let mine = self.ports.contains(&local_port);
                if mine {
                    self.conns.insert(conn);
                }
                mine
            }
            Event::Established { conn, qp, .. } => {
                let mine = self.qps.contains(&qp) || self.conns.contains(&conn);
                if mine {
                    self.qps.insert(qp);
                    self.live.insert(qp);
                }
                mine
            }
            Event::Rejected { conn, .. } | Event::ConnectFailed { conn, .. } => {
                self.conns.remove(&conn)
            }
            Event::PeerClosed { qp, .. } => self.qps.contains(&qp),
            Event::Disconnected { conn, qp } => {
                self.conns.remove(&conn);
                self.live.remove(&qp);
                self.qps.contains(&qp)
            }
            Event::Async(a) => match a.resource {
                EventResource::Qp(qp) => self.qps.contains(&qp),
                EventResource::Cq(cq) => self.cqs.contains(&cq),
                _ => false,
            },
            Event::CqNotify(cq) => self.cqs.contains(&cq),
        }
    }
}

struct Shared<M> {
    next_id: u64,
    jobs: VecDeque<(u64, Job<M>)>,
    results: VecDeque<(u64, Box<dyn Any + Send>)>,
    /// The console's events.
    events: VecDeque<Event>,
}

fn lock<M>(s: &Mutex<Shared<M>>) -> MutexGuard<'_, Shared<M>> {
    // A job that panicked poisoned the lock; the test fails on that panic, not here.
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The app. Start it on a core ([`crate::Core::start_app`]); drive it through its
/// [`ConsoleHandle`].
pub struct Console<M> {
    shared: Arc<Mutex<Shared<M>>>,
    owned: Owned,
    filter: Option<PortFilter>,
}

/// The test's end of a [`Console`]: `Send` and cloneable.
pub struct ConsoleHandle<M> {
    shared: Arc<Mutex<Shared<M>>>,
}

impl<M> Clone for ConsoleHandle<M> {
    fn clone(&self) -> Self {
        ConsoleHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<M> Console<M> {
    /// A console and its handle; `filter` picks the local ports of active opens (none:
    /// any port).
    pub fn new(filter: Option<PortFilter>) -> (Console<M>, ConsoleHandle<M>) {
        let shared = Arc::new(Mutex::new(Shared {
            next_id: 1,
            jobs: VecDeque::new(),
            results: VecDeque::new(),
            events: VecDeque::new(),
        }));
        (
            Console {
                shared: Arc::clone(&shared),
                owned: Owned::default(),
                filter,
            },
            ConsoleHandle { shared },
        )
    }
}

impl<M> ConsoleHandle<M> {
    /// Queues a job; returns its id.
    pub fn submit<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut ConsoleCx<'_, M>) -> R + Send + 'static,
    ) -> u64 {
        let mut s = lock(&self.shared);
        let id = s.next_id;
        s.next_id += 1;
        s.jobs.push_back((
            id,
            Box::new(move |cx| Box::new(job(cx)) as Box<dyn Any + Send>),
        ));
        id
    }

    /// The result of job `id` if it ran. Panics if `R` is not what the job returned (a
    /// bug in the test).
    pub fn take_result<R: 'static>(&self, id: u64) -> Option<R> {
        let mut s = lock(&self.shared);
        let i = s.results.iter().position(|(j, _)| *j == id)?;
        let (_, r) = s.results.remove(i)?;
        Some(*r.downcast::<R>().expect("the job's result type"))
    }

    /// The oldest kept event matching `f`, removed.
    pub fn take_event(&self, mut f: impl FnMut(&Event) -> bool) -> Option<Event> {
        let mut s = lock(&self.shared);
        let i = s.events.iter().position(&mut f)?;
        s.events.remove(i)
    }

    /// Runs `job` on a core that runs on another thread, waiting at most `timeout`.
    pub fn run<R: Send + 'static>(
        &self,
        timeout: std::time::Duration,
        job: impl FnOnce(&mut ConsoleCx<'_, M>) -> R + Send + 'static,
    ) -> Option<R> {
        let id = self.submit(job);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(r) = self.take_result(id) {
                return Some(r);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Waits at most `timeout` for an event matching `f` (core on another thread).
    pub fn wait_event(
        &self,
        timeout: std::time::Duration,
        mut f: impl FnMut(&Event) -> bool,
    ) -> Option<Event> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.take_event(&mut f) {
                return Some(e);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

impl<M: Memory> App<M> for Console<M> {
    fn on_event(&mut self, _now: Instant, _engine: &mut Engine, _mem: &mut M, ev: &Event) -> bool {
        if !self.owned.take(ev) {
            return false;
        }
        let mut s = lock(&self.shared);
        if s.events.len() >= EVENTS_KEPT_MAX {
            s.events.pop_front();
        }
        s.events.push_back(*ev);
        true
    }

    fn poll(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        for _ in 0..JOBS_PER_POLL_MAX {
            let Some((id, job)) = lock(&self.shared).jobs.pop_front() else {
                break;
            };
            let mut cx = ConsoleCx {
                now,
                engine: &mut *engine,
                mem: &mut *mem,
                owned: &mut self.owned,
                filter: &self.filter,
            };
            let r = job(&mut cx);
            let mut s = lock(&self.shared);
            if s.results.len() >= RESULTS_KEPT_MAX {
                s.results.pop_front();
            }
            s.results.push_back((id, r));
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn shutdown(&mut self, now: Instant, engine: &mut Engine, _mem: &mut M) {
        for &port in &self.owned.ports {
            engine.unlisten(port);
        }
        self.owned.ports.clear();
        for &qp in &self.owned.live {
            // A QP already closing refuses; nothing to do then.
            let _ = engine.disconnect(now, qp);
        }
    }

    fn is_idle(&self) -> bool {
        self.owned.live.is_empty()
    }
}
