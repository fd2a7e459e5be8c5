//! Connection management (CM ids, listen on every core, connect, accept, reject,
//! disconnect, abort) and the routing of the cores' notices to clients.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use iwarp_engine::{AcceptParams, ConnectFailure, ConnectParams, PrivateData};
use iwarp_shm_service::{AsyncObject, CmNotice, ServiceNotice, ServiceReply, ServiceRequest};
use iwarp_shm_socket::{
    Addr, AsyncEventMsg, AsyncKind, CmEvent, CmIdHandle, ConnParam, ConnectError, CqHandle,
    ErrorCode, Event, EventResourceRef, QpHandle, Request, Response, ServerMsg, SrqHandle,
    MAX_PRIVATE_DATA,
};
use iwarp_types::AsyncEventKind;

use crate::client::{Client, CmId, CmState};
use crate::link::{err, no_such, CoreLink, Error};
use crate::server::{Ctx, Res};
use crate::verbs::unexpected;

pub(crate) fn dispatch<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, req: Request) -> Res {
    match req {
        Request::CreateCmId => {
            let h = c
                .cm_ids
                .insert(CmId {
                    state: CmState::Idle,
                    qp: None,
                    ends: None,
                })
                .ok_or_else(|| err(ErrorCode::LimitReached, "CM ids up to control.max_objects"))?;
            Ok(Response::CmId(CmIdHandle(h)).into())
        }
        Request::DestroyCmId(id) => {
            cm(c, id)?;
            destroy(ctx, c, id.0);
            Ok(Response::Ok.into())
        }
        Request::Listen { id, addr, backlog } => listen(ctx, c, id, addr, backlog),
        Request::Connect {
            id,
            qp,
            remote,
            param,
        } => connect(ctx, c, id, qp, remote, param),
        Request::Accept { id, qp, param } => accept(ctx, c, id, qp, param),
        Request::Reject { id, private_data } => {
            let (core, conn) = match cm(c, id)?.state {
                CmState::Requested { core, conn } => (core, conn),
                _ => {
                    return Err(err(
                        ErrorCode::InvalidCmState,
                        "Reject needs a pending connection request",
                    ))
                }
            };
            let pd = private(&private_data)?;
            ctx.call(
                core,
                ServiceRequest::Reject {
                    client: c.id,
                    conn,
                    private_data: pd,
                },
                "Reject",
            )?;
            set_state(c, id.0, CmState::Closed);
            Ok(Response::Ok.into())
        }
        Request::Disconnect(id) => close(ctx, c, id, false),
        Request::Abort(id) => close(ctx, c, id, true),
        _ => Err(err(
            ErrorCode::Internal,
            "request routed to the wrong handler",
        )),
    }
}

fn cm(c: &Client, id: CmIdHandle) -> Result<&CmId, Error> {
    c.cm_ids.get(id.0).ok_or_else(|| no_such("CM id", id.0))
}

fn set_state(c: &mut Client, id: u32, s: CmState) {
    if let Some(x) = c.cm_ids.get_mut(id) {
        x.state = s;
    }
}

fn private(data: &[u8]) -> Result<PrivateData, Error> {
    if data.len() > MAX_PRIVATE_DATA {
        return Err(err(
            ErrorCode::InvalidArgument,
            format!(
                "{} bytes of private data, at most {MAX_PRIVATE_DATA}",
                data.len()
            ),
        ));
    }
    PrivateData::new(data).ok_or_else(|| err(ErrorCode::InvalidArgument, "private data too long"))
}

/// Stops what a CM id does and forgets it (listen stopped on every core, a request
/// rejected, a connection aborted).
pub(crate) fn destroy<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, id: u32) {
    let Some(x) = c.cm_ids.remove(id) else { return };
    match x.state {
        CmState::Listening { port, ip } => {
            let cores: Vec<usize> = (0..ctx.ncores())
                .filter(|&k| ip == [0; 4] || ctx.ip_of(k) == ip)
                .collect();
            for core in cores {
                let _ = ctx.call(
                    core,
                    ServiceRequest::Unlisten { client: c.id, port },
                    "Unlisten",
                );
            }
        }
        CmState::Requested { core, conn } => {
            let _ = ctx.call(
                core,
                ServiceRequest::Reject {
                    client: c.id,
                    conn,
                    private_data: PrivateData::EMPTY,
                },
                "Reject",
            );
        }
        CmState::Connecting { .. } | CmState::Connected { .. } => {
            if let Some(q) = x.qp.and_then(|q| c.qps.get(q)) {
                let (core, qp) = (q.core, q.id);
                let _ = ctx.call(core, ServiceRequest::Abort { client: c.id, qp }, "Abort");
            }
        }
        CmState::Idle | CmState::Closed => {}
    }
    if let Some(q) = x.qp.and_then(|q| c.qps.get_mut(q)) {
        q.cm = None;
    }
}

fn listen<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    id: CmIdHandle,
    addr: Addr,
    backlog: u32,
) -> Res {
    if cm(c, id)?.state != CmState::Idle {
        return Err(err(ErrorCode::InvalidCmState, "Listen needs a new CM id"));
    }
    if addr.port == 0 {
        return Err(err(ErrorCode::InvalidArgument, "Listen needs a TCP port"));
    }
    if addr.ip != [0; 4] && !ctx.ports.iter().any(|p| p.ip == addr.ip) {
        return Err(err(
            ErrorCode::NoRoute,
            format!("no port of this daemon has address {:?}", addr.ip),
        ));
    }
    let backlog = backlog.clamp(1, 1024);
    // 0.0.0.0: every core service; an address: the services of the port that has it.
    let cores: Vec<usize> = (0..ctx.ncores())
        .filter(|&k| addr.ip == [0; 4] || ctx.ip_of(k) == addr.ip)
        .collect();
    for (n, &core) in cores.iter().enumerate() {
        let req = ServiceRequest::Listen {
            client: c.id,
            cm_id: id.0,
            port: addr.port,
            backlog,
        };
        if let Err(e) = ctx.call(core, req, "Listen") {
            for &k in &cores[..n] {
                let _ = ctx.call(
                    k,
                    ServiceRequest::Unlisten {
                        client: c.id,
                        port: addr.port,
                    },
                    "Unlisten",
                );
            }
            return Err(e);
        }
    }
    set_state(
        c,
        id.0,
        CmState::Listening {
            port: addr.port,
            ip: addr.ip,
        },
    );
    Ok(Response::Ok.into())
}

fn connect<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    id: CmIdHandle,
    qp: QpHandle,
    remote: Addr,
    p: ConnParam,
) -> Res {
    if cm(c, id)?.state != CmState::Idle {
        return Err(err(ErrorCode::InvalidCmState, "Connect needs a new CM id"));
    }
    let pd = private(&p.private_data)?;
    let q = c.qps.get(qp.0).ok_or_else(|| no_such("QP", qp.0))?;
    if q.cm.is_some() {
        return Err(err(
            ErrorCode::InvalidQp,
            "the QP is given to another CM id",
        ));
    }
    let params = ConnectParams {
        private_data: pd,
        ird: if p.responder_resources == 0 {
            q.ird
        } else {
            p.responder_resources
        },
        ord: if p.initiator_depth == 0 {
            q.ord
        } else {
            p.initiator_depth
        },
        p2p: ctx.cfg.p2p,
    };
    let (core, engine_qp) = (q.core, q.id);
    let req = ServiceRequest::Connect {
        client: c.id,
        cm_id: id.0,
        qp: engine_qp,
        remote: remote.into(),
        params,
    };
    let (conn, local_port) = match ctx.call(core, req, "Connect") {
        Ok(ServiceReply::Connecting { conn, local_port }) => (conn, local_port),
        r => return Err(unexpected(r, "Connect")),
    };
    link(c, id.0, qp.0, CmState::Connecting { core, conn });
    if let Some(x) = c.cm_ids.get_mut(id.0) {
        let local = SocketAddrV4::new(ctx.ip_of(core).into(), local_port);
        x.ends = Some((local, remote.into()));
    }
    Ok(Response::Ok.into())
}

fn link(c: &mut Client, id: u32, qp: u32, state: CmState) {
    if let Some(x) = c.cm_ids.get_mut(id) {
        x.state = state;
        x.qp = Some(qp);
    }
    if let Some(q) = c.qps.get_mut(qp) {
        q.cm = Some(id);
    }
}

fn accept<C: CoreLink>(
    ctx: &mut Ctx<C>,
    c: &mut Client,
    id: CmIdHandle,
    qp: QpHandle,
    p: ConnParam,
) -> Res {
    let (core, conn) = match cm(c, id)?.state {
        CmState::Requested { core, conn } => (core, conn),
        _ => {
            return Err(err(
                ErrorCode::InvalidCmState,
                "Accept needs a pending connection request",
            ))
        }
    };
    let q = c.qps.get(qp.0).ok_or_else(|| no_such("QP", qp.0))?;
    if q.core != core {
        return Err(err(
            ErrorCode::WrongCore,
            format!(
                "the QP is on core {}, the request on core {core}: create it with for_cm_id",
                q.core
            ),
        ));
    }
    if q.cm.is_some() {
        return Err(err(
            ErrorCode::InvalidQp,
            "the QP is given to another CM id",
        ));
    }
    let params = AcceptParams {
        private_data: private(&p.private_data)?,
        ird: if p.responder_resources == 0 {
            q.ird
        } else {
            p.responder_resources
        },
        ord: if p.initiator_depth == 0 {
            q.ord
        } else {
            p.initiator_depth
        },
    };
    let req = ServiceRequest::Accept {
        client: c.id,
        cm_id: id.0,
        conn,
        qp: q.id,
        params,
    };
    ctx.call(core, req, "Accept")?;
    link(c, id.0, qp.0, CmState::Connecting { core, conn });
    Ok(Response::Ok.into())
}

fn close<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, id: CmIdHandle, abort: bool) -> Res {
    let x = cm(c, id)?;
    let q = match (x.state, x.qp) {
        (CmState::Connecting { .. } | CmState::Connected { .. }, Some(q)) => q,
        // The connection ended already (the peer closed first, or it failed): nothing to
        // do, as rdma_disconnect answers 0 then (the kernel's iw_cm_disconnect in
        // CLOSING or IDLE). An id that never had one is still refused below.
        (CmState::Closed, Some(_)) => return Ok(Response::Ok.into()),
        _ => {
            return Err(err(
                ErrorCode::InvalidCmState,
                "the CM id has no connection",
            ))
        }
    };
    let q = c
        .qps
        .get(q)
        .ok_or_else(|| err(ErrorCode::InvalidCmState, "the connection's QP is gone"))?;
    let (core, qp) = (q.core, q.id);
    let req = if abort {
        ServiceRequest::Abort { client: c.id, qp }
    } else {
        ServiceRequest::Disconnect { client: c.id, qp }
    };
    ctx.call(core, req, if abort { "Abort" } else { "Disconnect" })?;
    Ok(Response::Ok.into())
}

pub(crate) fn send_event(c: &mut Client, e: Event) {
    if c.chan.send(&ServerMsg::Event(e), &[]).is_err() {
        c.events_dropped += 1;
    }
}

fn connect_error(r: ConnectFailure) -> ConnectError {
    match r {
        ConnectFailure::Refused => ConnectError::Refused,
        ConnectFailure::Reset => ConnectError::Reset,
        ConnectFailure::Timeout => ConnectError::Timeout,
        ConnectFailure::Unreachable => ConnectError::Unreachable,
        ConnectFailure::Mpa(t) => ConnectError::Mpa(t.as_u16()),
        ConnectFailure::Aborted => ConnectError::Aborted,
    }
}

fn async_kind(k: AsyncEventKind) -> AsyncKind {
    use AsyncEventKind as K;
    match k {
        K::LlpCloseComplete => AsyncKind::LlpCloseComplete,
        K::TerminateReceived(t) => AsyncKind::TerminateReceived(t.as_u16()),
        K::LlpConnectionReset => AsyncKind::LlpConnectionReset,
        K::LlpConnectionLost => AsyncKind::LlpConnectionLost,
        K::LlpIntegrityError(t) => AsyncKind::LlpIntegrityError(t.as_u16()),
        K::RemoteOperationError(t) => AsyncKind::RemoteOperationError(t.as_u16()),
        K::ProtectionError(t) => AsyncKind::ProtectionError(t.as_u16()),
        K::BadClose => AsyncKind::BadClose,
        K::BadLlpClose => AsyncKind::BadLlpClose,
        K::CqError => AsyncKind::CqError,
        K::SrqError => AsyncKind::SrqError,
        K::LocalQpCatastrophic => AsyncKind::LocalQpCatastrophic,
        K::CqOverflow => AsyncKind::CqOverflow,
        K::SrqLimitReached => AsyncKind::SrqLimitReached,
        K::QpRqLimitReached => AsyncKind::QpRqLimitReached,
        K::QpErrorStateEntered => AsyncKind::QpErrorStateEntered,
    }
}

fn resource(o: AsyncObject) -> EventResourceRef {
    match o {
        AsyncObject::Qp(h) => EventResourceRef::Qp(QpHandle(h)),
        AsyncObject::Cq(h) => EventResourceRef::Cq(CqHandle(h)),
        AsyncObject::Srq(h) => EventResourceRef::Srq(SrqHandle(h)),
    }
}

/// The local and remote address of CM id `cm_id` of `c`, as text (`?` if unknown).
fn ends(c: &Client, cm_id: Option<u32>) -> (String, String) {
    match cm_id.and_then(|id| c.cm_ids.get(id)).and_then(|x| x.ends) {
        Some((l, r)) => (l.to_string(), r.to_string()),
        None => ("?".into(), "?".into()),
    }
}

/// Logs the asynchronous events an operator wants to see: a Terminate received (with
/// its code), a reset connection, a QP entering Error; the others at debug.
fn log_async(c: &Client, core: usize, object: AsyncObject, kind: AsyncEventKind) {
    let AsyncObject::Qp(qp) = object else {
        tracing::debug!(
            client = c.id,
            core,
            ?object,
            ?kind,
            "asynchronous event {kind:?}"
        );
        return;
    };
    let cm_id = c.qps.get(qp).and_then(|q| q.cm);
    let (local, remote) = ends(c, cm_id);
    let cm = cm_id.map_or_else(|| "-".to_string(), |id| id.to_string());
    match kind {
        AsyncEventKind::TerminateReceived(t) => {
            let code = format!("{:#06x}", t.as_u16());
            tracing::warn!(
                client = c.id,
                qp,
                cm_id = %cm,
                core,
                %local,
                %remote,
                code = %code,
                "Terminate received: code {code} {t:?} on {local} <-> {remote} (client {}, QP {qp}, cm id {cm})",
                c.id
            );
        }
        AsyncEventKind::LlpConnectionReset => tracing::warn!(
            client = c.id,
            qp,
            cm_id = %cm,
            core,
            %local,
            %remote,
            "connection reset: {local} <-> {remote} (client {}, QP {qp}, cm id {cm})",
            c.id
        ),
        AsyncEventKind::QpErrorStateEntered => tracing::warn!(
            client = c.id,
            qp,
            cm_id = %cm,
            core,
            %local,
            %remote,
            "QP to Error: {local} <-> {remote} (client {}, QP {qp}, cm id {cm})",
            c.id
        ),
        _ => tracing::debug!(
            client = c.id,
            qp,
            cm_id = %cm,
            core,
            ?kind,
            "asynchronous event {kind:?} (client {}, QP {qp}, cm id {cm})",
            c.id
        ),
    }
}

/// Delivers one notice of `core` to its client.
pub(crate) fn route<C: CoreLink>(
    ctx: &mut Ctx<C>,
    clients: &mut BTreeMap<u32, Client>,
    core: usize,
    n: ServiceNotice,
) {
    let client = match n {
        ServiceNotice::Cm { client, .. }
        | ServiceNotice::Async { client, .. }
        | ServiceNotice::CqWake { client, .. }
        | ServiceNotice::RingCorrupt { client, .. } => client,
    };
    let Some(c) = clients.get_mut(&client) else {
        ctx.stats.notices_orphaned += 1;
        return;
    };
    ctx.stats.notices += 1;
    match n {
        ServiceNotice::CqWake { cq, .. } => {
            let fd = c
                .cqs
                .get(cq)
                .and_then(|q| q.channel)
                .and_then(|ch| c.channels.get(ch));
            if let Some(ch) = fd {
                // A full counter (EAGAIN) still wakes the reader: nothing is lost.
                let _ = rustix::io::write(&ch.fd, &1u64.to_ne_bytes());
            }
        }
        ServiceNotice::Async { object, kind, .. } => {
            log_async(c, core, object, kind);
            send_event(
                c,
                Event::Async(AsyncEventMsg {
                    resource: resource(object),
                    kind: async_kind(kind),
                }),
            );
        }
        ServiceNotice::RingCorrupt { object, .. } => {
            let kind = match object {
                AsyncObject::Srq(_) => AsyncKind::SrqError,
                AsyncObject::Cq(_) => AsyncKind::CqError,
                AsyncObject::Qp(_) => AsyncKind::LocalQpCatastrophic,
            };
            send_event(
                c,
                Event::Async(AsyncEventMsg {
                    resource: resource(object),
                    kind,
                }),
            );
        }
        ServiceNotice::Cm { event, .. } => cm_notice(ctx, c, core, event),
    }
}

fn cm_notice<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client, core: usize, n: CmNotice) {
    match n {
        CmNotice::ConnectRequest {
            listen_cm_id,
            conn,
            remote,
            local_port,
            private_data,
            ird,
            ord,
        } => {
            let ip = ctx.ip_of(core);
            let listening = c
                .cm_ids
                .get(listen_cm_id)
                .is_some_and(|x| matches!(x.state, CmState::Listening { .. }));
            let new = listening
                .then(|| {
                    c.cm_ids.insert(CmId {
                        state: CmState::Requested { core, conn },
                        qp: None,
                        ends: Some((SocketAddrV4::new(ip.into(), local_port), remote)),
                    })
                })
                .flatten();
            let Some(new) = new else {
                let _ = ctx.call(
                    core,
                    ServiceRequest::Reject {
                        client: c.id,
                        conn,
                        private_data: PrivateData::EMPTY,
                    },
                    "Reject",
                );
                return;
            };
            send_event(
                c,
                Event::Cm {
                    id: CmIdHandle(listen_cm_id),
                    event: CmEvent::ConnectRequest {
                        id: CmIdHandle(new),
                        remote: remote.into(),
                        local: Addr {
                            ip,
                            port: local_port,
                        },
                        private_data: private_data.as_slice().to_vec(),
                        ird,
                        ord,
                    },
                },
            );
        }
        CmNotice::Established {
            cm_id,
            conn,
            private_data,
            ..
        } => {
            let qp = c.cm_ids.get(cm_id).and_then(|x| x.qp);
            set_state(c, cm_id, CmState::Connected { core, conn });
            let (local, remote) = ends(c, Some(cm_id));
            tracing::info!(
                client = c.id,
                cm_id,
                core,
                %local,
                %remote,
                "connection established: {local} <-> {remote} (client {}, cm id {cm_id})",
                c.id
            );
            if let Some(qp) = qp {
                send_event(
                    c,
                    Event::Cm {
                        id: CmIdHandle(cm_id),
                        event: CmEvent::Established {
                            private_data: private_data.as_slice().to_vec(),
                            qp: QpHandle(qp),
                        },
                    },
                );
            }
        }
        CmNotice::Rejected {
            cm_id,
            private_data,
            ..
        } => {
            set_state(c, cm_id, CmState::Closed);
            send_event(
                c,
                Event::Cm {
                    id: CmIdHandle(cm_id),
                    event: CmEvent::Rejected {
                        private_data: private_data.as_slice().to_vec(),
                    },
                },
            );
        }
        CmNotice::ConnectFailed { cm_id, reason, .. } => {
            set_state(c, cm_id, CmState::Closed);
            let (local, remote) = ends(c, Some(cm_id));
            tracing::info!(
                client = c.id,
                cm_id,
                core,
                %local,
                %remote,
                ?reason,
                "connection failed: {local} -> {remote}: {reason:?} (client {}, cm id {cm_id})",
                c.id
            );
            send_event(
                c,
                Event::Cm {
                    id: CmIdHandle(cm_id),
                    event: CmEvent::ConnectError(connect_error(reason)),
                },
            );
        }
        CmNotice::Disconnected { cm_id, .. } => {
            set_state(c, cm_id, CmState::Closed);
            let (local, remote) = ends(c, Some(cm_id));
            tracing::info!(
                client = c.id,
                cm_id,
                core,
                %local,
                %remote,
                "connection closed: {local} <-> {remote} (client {}, cm id {cm_id})",
                c.id
            );
            send_event(
                c,
                Event::Cm {
                    id: CmIdHandle(cm_id),
                    event: CmEvent::Disconnected,
                },
            );
        }
    }
}
