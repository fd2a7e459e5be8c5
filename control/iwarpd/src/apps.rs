//! The load generator apps as the daemon starts them: built on the core that runs them
//! (their constructors create verbs objects on that core's engine), with their results
//! published to the control thread.

use std::sync::{Arc, Mutex};

use iwarp_engine::{Engine, Event};
use iwarp_loadgen::{
    Arena, ClientSpec, LoadgenClient, LoadgenServer, Report, ServerConfig, ServerReport,
};
use iwarp_runtime::App;
use iwarp_types::{Duration, Instant, Memory};

/// What the control thread sees of an app running on a core.
#[derive(Debug, Default)]
pub struct AppResult {
    /// Set-up failed: why.
    pub error: Option<String>,
    /// A client's final report (set once, when it finished).
    pub report: Option<Report>,
    /// A server's report, refreshed every [`SERVER_PUBLISH_INTERVAL`].
    pub server: Option<ServerReport>,
    /// A running client's report so far, refreshed every [`CLIENT_PROGRESS_INTERVAL`]
    /// (the interval lines of `iwarpd loadgen`).
    pub progress: Option<Progress>,
}

/// A client's report so far, when it was taken, and its core's TCP retransmissions then.
#[derive(Clone, Debug)]
pub struct Progress {
    /// The core's time of the copy.
    pub at: Instant,
    /// The report so far.
    pub report: Report,
    /// TCP data segments the core retransmitted so far (all its connections).
    pub retransmissions: u64,
}

/// Shared between an app and the control thread. Locked by the core only when a client
/// finishes or every [`SERVER_PUBLISH_INTERVAL`] for a server: never per frame.
pub type Shared = Arc<Mutex<AppResult>>;

/// How often a server publishes its report.
pub const SERVER_PUBLISH_INTERVAL: Duration = Duration::from_millis(200);

/// How often a running client publishes its progress (a copy of its report: an
/// allocation every interval, never per message).
pub const CLIENT_PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Which app to build.
pub enum Kind {
    /// A load generator server listening on its port.
    Server(ServerConfig),
    /// A load generator client; `steer` says whether a local port's return traffic lands
    /// on this core (RSS / software steering).
    Client(ClientSpec, Box<dyn Fn(u16) -> bool + Send>),
}

enum Built {
    Server(Box<LoadgenServer>),
    Client(Box<LoadgenClient>),
}

/// An app built at its first `poll`, on its core.
pub struct Deferred {
    kind: Option<Kind>,
    arena: Arena,
    built: Option<Built>,
    shared: Shared,
    published_at: Option<Instant>,
    last_conns: (u64, u64, u64, u32),
    done: bool,
}

impl Deferred {
    /// An app of `kind` over `arena` of the core's memory, publishing into `shared`.
    pub fn new(kind: Kind, arena: Arena, shared: Shared) -> Deferred {
        Deferred {
            kind: Some(kind),
            arena,
            built: None,
            shared,
            published_at: None,
            last_conns: (0, 0, 0, 0),
            done: false,
        }
    }

    fn build<M: Memory>(&mut self, engine: &mut Engine, mem: &M) {
        let Some(kind) = self.kind.take() else {
            return;
        };
        let built = match kind {
            Kind::Server(cfg) => {
                LoadgenServer::new(cfg, self.arena, engine, mem).map(|s| Built::Server(Box::new(s)))
            }
            Kind::Client(spec, steer) => {
                LoadgenClient::new(spec, self.arena, engine, mem).map(|mut c| {
                    c.set_local_port_filter(steer);
                    Built::Client(Box::new(c))
                })
            }
        };
        match built {
            Ok(b) => self.built = Some(b),
            Err(e) => {
                self.done = true;
                if let Ok(mut r) = self.shared.lock() {
                    r.error = Some(e.to_string());
                }
            }
        }
    }

    fn publish(&mut self, now: Instant, engine: &Engine, force: bool) {
        match &self.built {
            Some(Built::Client(c)) if c.finished() && !self.done => {
                self.done = true;
                if let Ok(mut r) = self.shared.lock() {
                    r.report = Some(c.report());
                }
            }
            Some(Built::Client(c)) if !self.done => {
                let due = self
                    .published_at
                    .is_none_or(|t| now.saturating_since(t) >= CLIENT_PROGRESS_INTERVAL);
                if due || force {
                    self.published_at = Some(now);
                    let p = Progress {
                        at: now,
                        report: c.report(),
                        retransmissions: engine.counters_fast().tcp_retransmissions,
                    };
                    if let Ok(mut r) = self.shared.lock() {
                        r.progress = Some(p);
                    }
                }
            }
            Some(Built::Server(s)) => {
                // Publish when a connection came or went (cheap to compare), and at least
                // every SERVER_PUBLISH_INTERVAL for the byte counts.
                let r = s.report();
                let changed = (r.accepted, r.served, r.failed, r.active) != self.last_conns;
                let due = self
                    .published_at
                    .is_none_or(|t| now.saturating_since(t) >= SERVER_PUBLISH_INTERVAL);
                if changed || due || force {
                    self.published_at = Some(now);
                    self.last_conns = (r.accepted, r.served, r.failed, r.active);
                    if let Ok(mut shared) = self.shared.lock() {
                        shared.server = Some(*r);
                    }
                }
            }
            _ => {}
        }
    }
}

impl<M: Memory> App<M> for Deferred {
    fn on_event(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, event: &Event) -> bool {
        match &mut self.built {
            Some(Built::Server(s)) => s.as_mut().on_event(now, engine, mem, event),
            Some(Built::Client(c)) => c.as_mut().on_event(now, engine, mem, event),
            None => false,
        }
    }

    fn poll(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        if self.kind.is_some() {
            self.build(engine, mem);
        }
        match &mut self.built {
            Some(Built::Server(s)) => App::<M>::poll(s.as_mut(), now, engine, mem),
            Some(Built::Client(c)) => App::<M>::poll(c.as_mut(), now, engine, mem),
            None => {}
        }
        self.publish(now, engine, false);
    }

    fn before_frames(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        match &mut self.built {
            Some(Built::Server(s)) => App::<M>::before_frames(s.as_mut(), now, engine, mem),
            Some(Built::Client(c)) => App::<M>::before_frames(c.as_mut(), now, engine, mem),
            None => {}
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.built {
            Some(Built::Server(s)) => App::<M>::poll_timeout(s.as_ref()),
            Some(Built::Client(c)) => App::<M>::poll_timeout(c.as_ref()),
            None => None,
        }
    }

    fn shutdown(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        self.kind = None;
        self.publish(now, engine, true);
        match &mut self.built {
            Some(Built::Server(s)) => App::<M>::shutdown(s.as_mut(), now, engine, mem),
            Some(Built::Client(c)) => App::<M>::shutdown(c.as_mut(), now, engine, mem),
            None => {}
        }
    }

    fn is_idle(&self) -> bool {
        match &self.built {
            Some(Built::Server(s)) => App::<M>::is_idle(s.as_ref()),
            Some(Built::Client(c)) => App::<M>::is_idle(c.as_ref()),
            None => true,
        }
    }
}
