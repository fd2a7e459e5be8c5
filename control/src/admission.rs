//! Admission of connections to the verbs socket (docs/APPS.md, "Admission"): who may
//! hold a connection, how many, and for how long without saying `Hello`.
//!
//! - The peer's credentials (`SO_PEERCRED`) are checked against the [`Policy`] when the
//!   connection is accepted: a user the policy does not admit gets `PermissionDenied`
//!   and is closed at once, before it holds anything.
//! - A full daemon (`max_clients` welcomed) answers `DaemonFull` at once.
//! - A uid other than root and `admin_users` holds at most `max_conns_per_uid`
//!   connections, welcomed or not: past it, its oldest connection that has not said
//!   `Hello` yet is closed to make room, or if all of them are welcomed the new one is
//!   refused with `LimitReached`.
//! - At most `max_pending` connections wait for their `Hello`. When the table is full,
//!   a new connection closes the oldest pending connection of its own uid if it has one,
//!   else the oldest of the uid that holds the most pending connections: a flood from
//!   one uid only ever pushes out its own connections, never those of another user.
//! - A connection that says nothing within `hello_timeout` gets `NotReady` and is closed.
//!
//! Refusals are counted by reason ([`crate::ServerStats`], `iwarpctl counters`) and
//! logged (`tracing` events: a warning with the reason, or info for an admission), at
//! most [`LOG_LINES_PER_S`] lines a second of refusals and as many of admissions (the
//! rest are counted and summed up in the next line, field `not_shown`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iwarp_shm_socket::{Channel, ErrorCode, ErrorReply, PeerCred, ServerMsg};

use crate::client::{Client, Phase};
use crate::link::CoreLink;
use crate::policy::Admission;
use crate::server::ControlServer;

/// Messages read (and dropped) from a connection before its refusal is sent.
const DRAIN_MESSAGES: usize = 4;

/// Admission log lines printed per second at most.
pub const LOG_LINES_PER_S: u32 = 20;

/// Why a connection was refused or closed before it was welcomed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The access policy does not admit the user.
    Policy,
    /// `max_clients` clients are welcomed.
    Full,
    /// The uid holds `max_conns_per_uid` welcomed connections.
    UidLimit,
    /// A `Hello` of another version, or a first message that is not `Hello`.
    Protocol,
    /// No credentials could be read.
    NoCred,
    /// Nothing said within `hello_timeout`.
    HelloTimeout,
    /// Closed to make room for a newer connection (per-uid or pending bound).
    Evicted,
}

/// Lines per second, with the count of those dropped.
#[derive(Debug)]
pub(crate) struct LogLimit {
    window: Instant,
    lines: u32,
    dropped: u64,
}

impl LogLimit {
    pub(crate) fn new() -> LogLimit {
        LogLimit {
            window: Instant::now(),
            lines: 0,
            dropped: 0,
        }
    }

    /// May a line be printed now? `Some(n)`: yes, and `n` lines were dropped before it.
    fn allow(&mut self, now: Instant) -> Option<u64> {
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.lines = 0;
        }
        if self.lines >= LOG_LINES_PER_S {
            self.dropped += 1;
            return None;
        }
        self.lines += 1;
        Some(std::mem::take(&mut self.dropped))
    }
}

/// What a line says of the `n` lines of its kind not shown before it.
pub(crate) fn not_shown_text(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} earlier admission lines not shown)")
    }
}

/// Connections of one uid and of everyone, by phase.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    ready: usize,
    pending: usize,
    uid_ready: usize,
    uid_pending: usize,
}

impl<C: CoreLink> ControlServer<C> {
    /// May an admission line be logged now (`refusal`: a refusal's line, else an
    /// admission's)? `Some(n)`: yes, and `n` lines of its kind were not shown before it.
    /// Refusals and admissions are limited separately: a flood of refusals does not hide
    /// the clients admitted meanwhile.
    pub(crate) fn log_allowed(&mut self, refusal: bool) -> Option<u64> {
        self.log_limit[usize::from(!refusal)].allow(Instant::now())
    }

    fn tally(&self, uid: u32) -> Tally {
        let mut t = Tally::default();
        for c in self.clients.values() {
            let mine = c.cred.uid == uid;
            match c.phase {
                Phase::Ready => {
                    t.ready += 1;
                    t.uid_ready += usize::from(mine);
                }
                Phase::AwaitHello => {
                    t.pending += 1;
                    t.uid_pending += usize::from(mine);
                }
            }
        }
        t
    }

    /// Counts a refusal of `reason`.
    pub(crate) fn count_refusal(&mut self, reason: Refusal) {
        let s = &mut self.ctx.stats;
        match reason {
            Refusal::Policy => s.refused_policy += 1,
            Refusal::Full => s.refused_full += 1,
            Refusal::UidLimit => s.refused_uid_limit += 1,
            Refusal::Protocol => s.refused_protocol += 1,
            Refusal::NoCred => {}
            Refusal::HelloTimeout => {
                s.hello_timeouts += 1;
                return;
            }
            Refusal::Evicted => {
                s.pending_evicted += 1;
                return;
            }
        }
        s.refused += 1;
    }

    /// Answers `code` (sequence number 0, without blocking) and closes `chan`. What the
    /// peer sent already (its `Hello`) is read first: a unix socket closed with unread
    /// data makes the peer's next receive fail with `ECONNRESET` before it can read the
    /// answer.
    fn refuse(&mut self, chan: Channel, cred: &PeerCred, reason: Refusal, e: ErrorReply) {
        self.count_refusal(reason);
        let _ = chan.set_nonblocking(true);
        for _ in 0..DRAIN_MESSAGES {
            if chan.recv_raw().is_err() {
                break;
            }
        }
        let _ = chan.send(
            &ServerMsg::Reply {
                seq: 0,
                result: Err(e.clone()),
            },
            &[],
        );
        drop(chan);
        let what = match reason {
            Refusal::HelloTimeout | Refusal::Evicted => "closed before Hello",
            _ => "refused",
        };
        if let Some(not_shown) = self.log_allowed(true) {
            tracing::warn!(
                uid = cred.uid,
                pid = cred.pid,
                reason = ?reason,
                not_shown,
                "verbs connection of uid {} pid {} {what}: {e}{}",
                cred.uid,
                cred.pid,
                not_shown_text(not_shown)
            );
        }
    }

    /// A new connection from `cred`: refused at once, or kept as pending (its id).
    pub(crate) fn admit_connection(&mut self, chan: Channel, cred: PeerCred) -> Option<u32> {
        let admission = self.policy.admit(&cred, &self.db);
        if admission == Admission::Denied {
            let e = ErrorReply::new(
                ErrorCode::PermissionDenied,
                format!(
                    "uid {} is not admitted by [control] allow_users / allow_groups",
                    cred.uid
                ),
            );
            self.refuse(chan, &cred, Refusal::Policy, e);
            return None;
        }
        let max = self.ctx.cfg.max_clients;
        let t = self.tally(cred.uid);
        if t.ready >= max {
            let e = full_error(max);
            self.refuse(chan, &cred, Refusal::Full, e);
            return None;
        }
        let per_uid = self.ctx.cfg.max_conns_per_uid;
        if admission == Admission::User && t.uid_ready + t.uid_pending >= per_uid {
            if t.uid_pending == 0 {
                let e = ErrorReply::new(
                    ErrorCode::LimitReached,
                    format!(
                        "control.max_conns_per_uid ({per_uid}): uid {} holds {} connections",
                        cred.uid, t.uid_ready
                    ),
                );
                self.refuse(chan, &cred, Refusal::UidLimit, e);
                return None;
            }
            self.evict_pending(Some(cred.uid));
        }
        if self.tally(cred.uid).pending >= self.ctx.cfg.max_pending {
            let own = self
                .clients
                .values()
                .any(|c| c.phase == Phase::AwaitHello && c.cred.uid == cred.uid);
            self.evict_pending(own.then_some(cred.uid));
        }
        let _ = chan.set_send_timeout(Some(crate::server::SEND_TIMEOUT));
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut c = Client::new(id, chan, cred, self.ctx.ncores(), &self.ctx.cfg);
        c.admin = admission == Admission::Admin;
        let expiry = c.connected_at + self.ctx.cfg.hello_timeout;
        self.clients.insert(id, c);
        self.next_expiry = Some(self.next_expiry.map_or(expiry, |e| e.min(expiry)));
        Some(id)
    }

    /// Closes the oldest pending connection of `uid`, or (`None`) of the uid holding the
    /// most pending connections.
    fn evict_pending(&mut self, uid: Option<u32>) {
        let uid = match uid {
            Some(u) => u,
            None => {
                let mut per: BTreeMap<u32, usize> = BTreeMap::new();
                for c in self.clients.values() {
                    if c.phase == Phase::AwaitHello {
                        *per.entry(c.cred.uid).or_default() += 1;
                    }
                }
                let Some((&u, _)) = per.iter().max_by_key(|(_, n)| **n) else {
                    return;
                };
                u
            }
        };
        let oldest = self
            .clients
            .values()
            .filter(|c| c.phase == Phase::AwaitHello && c.cred.uid == uid)
            .min_by_key(|c| (c.connected_at, c.id))
            .map(|c| c.id);
        if let Some(id) = oldest {
            self.close_pending(
                id,
                Refusal::Evicted,
                ErrorReply::new(
                    ErrorCode::LimitReached,
                    "closed before Hello to make room for a newer connection \
                     (control.max_pending / control.max_conns_per_uid)",
                ),
            );
        }
    }

    /// Closes pending connection `id` with `e`.
    fn close_pending(&mut self, id: u32, reason: Refusal, e: ErrorReply) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        let cred = c.cred;
        self.refuse(c.chan, &cred, reason, e);
    }

    /// Closes the connections that have said nothing for `hello_timeout`. Cheap when no
    /// deadline is due (one comparison).
    pub(crate) fn expire_pending(&mut self, now: Instant) -> bool {
        match self.next_expiry {
            Some(t) if now >= t => {}
            _ => return false,
        }
        let timeout = self.ctx.cfg.hello_timeout;
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for c in self.clients.values() {
            if c.phase != Phase::AwaitHello {
                continue;
            }
            let at = c.connected_at + timeout;
            if now >= at {
                due.push(c.id);
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        self.next_expiry = next;
        let ms = timeout.as_millis();
        for id in &due {
            let e = ErrorReply::new(
                ErrorCode::NotReady,
                format!("no Hello within control.hello_timeout_ms ({ms} ms)"),
            );
            self.close_pending(*id, Refusal::HelloTimeout, e);
        }
        !due.is_empty()
    }

    /// Connections that have not said `Hello` yet.
    pub fn pending(&self) -> usize {
        self.clients
            .values()
            .filter(|c| c.phase == Phase::AwaitHello)
            .count()
    }
}

/// The answer of a full daemon.
pub(crate) fn full_error(max: usize) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::DaemonFull,
        format!("iwarpd serves control.max_clients ({max}) clients already; try again later"),
    )
}
