//! Administration requests (iwarpctl): status, clients, objects with their states,
//! counters. Object totals come from the handle tables, so they are exact.

use std::os::fd::OwnedFd;

use iwarp_shm_service::{ServiceReply, ServiceRequest};
use iwarp_shm_socket::{
    AdminRequest, AdminResponse, ClientInfo, CounterSet, DaemonStatus, ErrorCode, ErrorReply,
    ObjectInfo, ObjectTotals, QpHandle, Response,
};

use crate::client::{Client, CmState, Phase, StagKind};
use crate::link::{err, CoreLink};
use crate::server::{CaptureCommand, ControlServer, Ctx};

fn add(t: &mut ObjectTotals, o: ObjectTotals) {
    t.pds += o.pds;
    t.cqs += o.cqs;
    t.qps += o.qps;
    t.srqs += o.srqs;
    t.mrs += o.mrs;
    t.mws += o.mws;
    t.cm_ids += o.cm_ids;
    t.arenas += o.arenas;
    t.arena_bytes += o.arena_bytes;
}

impl<C: CoreLink> ControlServer<C> {
    pub(crate) fn admin(
        &mut self,
        id: u32,
        a: AdminRequest,
        mut fds: Vec<OwnedFd>,
    ) -> Result<Response, ErrorReply> {
        let is_admin = self.clients.get(&id).is_some_and(|c| c.admin);
        // A client may look at its own objects; acting on any needs the admin policy.
        let own = matches!(a, AdminRequest::Objects(Some(x)) if x == id);
        if !is_admin && !own {
            return Err(err(
                ErrorCode::NotAdmin,
                "administration needs root or a user in [control] admin_users",
            ));
        }
        let r = match a {
            AdminRequest::Status => AdminResponse::Status(self.status()),
            AdminRequest::Clients => AdminResponse::Clients(
                self.clients
                    .values()
                    .filter(|c| c.phase == Phase::Ready)
                    .map(|c| ClientInfo {
                        id: c.id,
                        name: c.name.clone(),
                        pid: c.cred.pid,
                        uid: c.cred.uid,
                        gid: c.cred.gid,
                        connected_s: c.connected_at.elapsed().as_secs(),
                        totals: c.totals(),
                    })
                    .collect(),
            ),
            AdminRequest::Objects(which) => {
                let mut out = Vec::new();
                let ids: Vec<u32> = self
                    .clients
                    .keys()
                    .copied()
                    .filter(|k| which.is_none_or(|w| w == *k))
                    .collect();
                for k in ids {
                    if let Some(c) = self.clients.get(&k) {
                        objects(&mut self.ctx, c, &mut out);
                    }
                }
                AdminResponse::Objects(out)
            }
            AdminRequest::Counters => AdminResponse::Counters(self.counters()),
            AdminRequest::DisconnectClient(target) => {
                AdminResponse::Done(self.disconnect_client(id, target)?)
            }
            AdminRequest::ResetQp { client, qp } => AdminResponse::Done(self.reset_qp(client, qp)?),
            AdminRequest::CaptureStart { port, snaplen } => {
                if fds.len() != 1 {
                    return Err(err(
                        ErrorCode::BadFd,
                        "CaptureStart carries exactly one descriptor: the file to write",
                    ));
                }
                let file = fds.remove(0);
                self.capture(CaptureCommand::Start {
                    file,
                    port,
                    snaplen,
                })?
            }
            AdminRequest::CaptureStop => self.capture(CaptureCommand::Stop)?,
        };
        Ok(Response::Admin(r))
    }

    /// `DisconnectClient`: what the daemon does for a client that went away, done on
    /// purpose (its area says the daemon is gone, its socket closes, teardown).
    fn disconnect_client(&mut self, asker: u32, target: u32) -> Result<String, ErrorReply> {
        if target == asker {
            return Err(err(
                ErrorCode::InvalidArgument,
                "a client cannot disconnect itself this way (it says Bye)",
            ));
        }
        let Some(c) = self.clients.get(&target) else {
            return Err(err(ErrorCode::NoSuchObject, format!("no client {target}")));
        };
        let (name, pid) = (c.name.clone(), c.cred.pid);
        c.end_session();
        self.drop_client(target);
        Ok(format!(
            "client {target} ({name:?}, pid {pid}) disconnected; its objects are freed"
        ))
    }

    /// `ResetQp`: Modify QP to Error (verbs 6.2.2: flush, an established connection is
    /// reset), and a QP-fatal event to the owner, who did not ask for it.
    fn reset_qp(&mut self, client: u32, qp: u32) -> Result<String, ErrorReply> {
        let Some(c) = self.clients.get_mut(&client) else {
            return Err(err(ErrorCode::NoSuchObject, format!("no client {client}")));
        };
        let Some(q) = c.qps.get(qp) else {
            return Err(err(
                ErrorCode::NoSuchObject,
                format!("client {client} has no QP {qp}"),
            ));
        };
        let (core, id) = (q.core, q.id);
        let modify = iwarp_rdma::QpModify {
            state: Some(iwarp_types::QpState::Error),
            ..iwarp_rdma::QpModify::default()
        };
        self.ctx.call(
            core,
            ServiceRequest::ModifyQp {
                client,
                qp: id,
                modify,
            },
            "ModifyQp",
        )?;
        crate::cm::send_event(
            c,
            iwarp_shm_socket::Event::Async(iwarp_shm_socket::AsyncEventMsg {
                resource: iwarp_shm_socket::EventResourceRef::Qp(QpHandle(qp)),
                kind: iwarp_shm_socket::AsyncKind::LocalQpCatastrophic,
            }),
        );
        Ok(format!(
            "QP {qp} of client {client} moved to Error (flushed; its connection, if any, reset)"
        ))
    }

    /// Hands a capture command to the daemon's capture control.
    fn capture(&mut self, cmd: CaptureCommand) -> Result<AdminResponse, ErrorReply> {
        let Some(source) = self.ctx.capture.as_mut() else {
            return Err(err(
                ErrorCode::InvalidArgument,
                "this daemon has no capture control",
            ));
        };
        source(cmd)
            .map(AdminResponse::Done)
            .map_err(|e| err(ErrorCode::InvalidArgument, e))
    }

    fn status(&self) -> DaemonStatus {
        let mut totals = ObjectTotals::default();
        for c in self.clients.values() {
            add(&mut totals, c.totals());
        }
        DaemonStatus {
            name: self.ctx.cfg.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_s: self.ctx.started.elapsed().as_secs(),
            cores: self.ctx.ncores() as u32,
            ports: self.ctx.ports.clone(),
            clients: self
                .clients
                .values()
                .filter(|c| c.phase == Phase::Ready)
                .count() as u32,
            clients_total: self.ctx.stats.clients_total,
            clients_tearing_down: 0,
            totals,
        }
    }

    fn counters(&mut self) -> Vec<CounterSet> {
        let mut out = match self.ctx.counters.as_mut() {
            Some(f) => f(),
            None => Vec::new(),
        };
        let s = self.ctx.stats;
        let pending = self.pending() as u64;
        out.push(CounterSet {
            core: None,
            values: vec![
                ("control_clients_total".into(), s.clients_total),
                ("control_refused".into(), s.refused),
                ("control_refused_policy".into(), s.refused_policy),
                ("control_refused_full".into(), s.refused_full),
                ("control_refused_uid_limit".into(), s.refused_uid_limit),
                ("control_refused_protocol".into(), s.refused_protocol),
                ("control_hello_timeouts".into(), s.hello_timeouts),
                ("control_pending_evicted".into(), s.pending_evicted),
                ("control_pending".into(), pending),
                ("control_requests".into(), s.requests),
                ("control_bad_frames".into(), s.bad_frames),
                ("control_notices".into(), s.notices),
                ("control_notices_orphaned".into(), s.notices_orphaned),
                ("control_teardowns".into(), s.teardowns),
                ("control_arenas_pending".into(), s.arenas_pending),
            ],
        });
        let t = self.ctx.cfg.core_timeout;
        for core in 0..self.ctx.ncores() {
            if let Ok(ServiceReply::Snapshot { counters, .. }) =
                self.ctx.call_raw(core, ServiceRequest::Snapshot, t)
            {
                out.push(CounterSet {
                    core: Some(core as u32),
                    values: vec![
                        ("shm_requests".into(), counters.requests),
                        ("shm_notices".into(), counters.notices),
                        ("shm_notices_dropped".into(), counters.notices_dropped),
                        ("shm_replies_dropped".into(), counters.replies_dropped),
                        ("shm_rings_corrupt".into(), counters.rings_corrupt),
                        ("shm_events".into(), counters.events),
                        ("shm_closes_released".into(), counters.closes_released),
                        (
                            "shm_close_lingers_expired".into(),
                            counters.close_lingers_expired,
                        ),
                    ],
                });
            }
        }
        merge_by_core(out)
    }
}

/// One set per core (ascending), then one for the sum: the dataplane's, the control
/// server's and the services' counters of a core side by side (`iwarpctl counters` shows
/// a column per set).
fn merge_by_core(sets: Vec<CounterSet>) -> Vec<CounterSet> {
    let mut out: Vec<CounterSet> = Vec::new();
    for s in sets {
        match out.iter_mut().find(|o| o.core == s.core) {
            Some(o) => o.values.extend(s.values),
            None => out.push(s),
        }
    }
    // None (the sum) sorts first in Option's order: put it last.
    out.sort_by_key(|s| s.core.map_or(u64::MAX, u64::from));
    // A counter only the cores gave (the services' `shm_*`) gets its sum too.
    if let Some(pos) = out.iter().position(|s| s.core.is_none()) {
        let mut sums: Vec<(String, u64)> = Vec::new();
        for s in out.iter().filter(|s| s.core.is_some()) {
            for (name, v) in &s.values {
                if out[pos].values.iter().any(|(n, _)| n == name) {
                    continue;
                }
                match sums.iter_mut().find(|(n, _)| n == name) {
                    Some((_, t)) => *t += v,
                    None => sums.push((name.clone(), *v)),
                }
            }
        }
        out[pos].values.extend(sums);
    }
    out
}

fn info(
    client: u32,
    kind: &str,
    handle: u32,
    core: Option<usize>,
    state: &str,
    detail: Vec<(String, String)>,
) -> ObjectInfo {
    ObjectInfo {
        client,
        kind: kind.into(),
        handle,
        core: core.map(|c| c as u32),
        state: state.into(),
        detail,
    }
}

fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// Every object of `c`, with its state (QP states asked of their cores).
fn objects<C: CoreLink>(ctx: &mut Ctx<C>, c: &Client, out: &mut Vec<ObjectInfo>) {
    let id = c.id;
    for (h, p) in c.pds.iter() {
        out.push(info(id, "pd", h, None, "valid", vec![kv("users", p.users)]));
    }
    for (h, q) in c.cqs.iter() {
        out.push(info(
            id,
            "cq",
            h,
            None,
            "valid",
            vec![kv("depth", q.depth), kv("qps", q.users)],
        ));
    }
    for (h, q) in c.qps.iter() {
        let state = match crate::verbs::query_qp(ctx, c, QpHandle(h)) {
            Ok(i) => format!("{:?}", i.state).to_lowercase(),
            Err(_) => "unknown".into(),
        };
        out.push(info(
            id,
            "qp",
            h,
            Some(q.core),
            &state,
            vec![
                kv("sq_wr", q.cap.max_send_wr),
                kv("rq_wr", q.cap.max_recv_wr),
                kv("cm_id", q.cm.map_or("-".to_string(), |x| x.to_string())),
            ],
        ));
    }
    for (h, s) in c.srqs.iter() {
        out.push(info(
            id,
            "srq",
            h,
            Some(s.core),
            "valid",
            vec![
                kv("max_wr", s.max_wr),
                kv("max_sge", s.max_sge),
                kv("qps", s.users),
            ],
        ));
    }
    for (stag, s) in &c.stags {
        let kind = match s.kind {
            StagKind::Mr | StagKind::FastReg => "mr",
            StagKind::Mw(_) => "mw",
        };
        out.push(info(
            id,
            kind,
            *stag,
            None,
            if s.kind == StagKind::FastReg {
                "fast-register"
            } else {
                "valid"
            },
            vec![
                kv("offset", s.offset),
                kv("len", s.len),
                kv("access", format!("{:#x}", s.access.0)),
            ],
        ));
    }
    for (h, a) in c.arenas.iter() {
        out.push(info(
            id,
            "arena",
            h,
            None,
            if a.hugepages { "hugepages" } else { "pages" },
            vec![kv("len", a.len), kv("mrs", a.users)],
        ));
    }
    for (h, x) in c.cm_ids.iter() {
        let (state, core) = match x.state {
            CmState::Idle => ("idle".to_string(), None),
            CmState::Listening { port, .. } => (format!("listening:{port}"), None),
            CmState::Requested { core, .. } => ("requested".into(), Some(core)),
            CmState::Connecting { core, .. } => ("connecting".into(), Some(core)),
            CmState::Connected { core, .. } => ("connected".into(), Some(core)),
            CmState::Closed => ("closed".into(), None),
        };
        out.push(info(id, "cm_id", h, core, &state, Vec::new()));
    }
    for (h, ch) in c.channels.iter() {
        out.push(info(
            id,
            "channel",
            h,
            None,
            "valid",
            vec![kv("cqs", ch.users)],
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_sets_of_one_core_are_one_column_and_the_sum_comes_last() {
        let set = |core, name: &str, v| CounterSet {
            core,
            values: vec![(name.to_string(), v)],
        };
        let merged = merge_by_core(vec![
            set(Some(1), "tcp_retransmissions", 2),
            set(Some(0), "tcp_retransmissions", 1),
            set(None, "tcp_retransmissions", 3),
            set(None, "control_requests", 9),
            set(Some(0), "shm_requests", 5),
        ]);
        let cores: Vec<_> = merged.iter().map(|s| s.core).collect();
        assert_eq!(cores, [Some(0), Some(1), None]);
        assert_eq!(merged[0].values.len(), 2);
        // The sum: its own two, and shm_requests summed over the cores.
        assert_eq!(merged[2].values.len(), 3);
        assert_eq!(merged[2].values[2], ("shm_requests".to_string(), 5));
    }
}
