//! The control server's test kit: fake cores that log what they are asked and answer
//! like a service, a server over them, and a peer that speaks the protocol over a socket
//! pair. The server's tests and the `control_requests` fuzz target use it (feature
//! `testkit`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use iwarp_rdma::QpInfo;
use iwarp_shm_mem::RegionTable;
use iwarp_shm_service::{ServiceError, ServiceNotice, ServiceReply, ServiceRequest};
use iwarp_shm_socket::*;
use iwarp_types::{CqId, PdId, QpId, QpState, SrqId, Stag};

use crate::{AccountDb, ControlConfig, ControlServer, CoreLink, Policy};

/// What a fake core saw.
#[derive(Default)]
pub struct Log {
    pub requests: Vec<String>,
    pub detached: Vec<u32>,
    pub live: i64,
}

/// A core that logs each request and answers it as a service would.
pub struct FakeCore {
    pub core: usize,
    pub next: u32,
    pub log: Arc<Mutex<Log>>,
    pub fail_stag_at: bool,
}

impl CoreLink for FakeCore {
    fn call(&mut self, req: ServiceRequest, _t: Duration) -> Result<ServiceReply, ServiceError> {
        self.next += 1;
        let n = self.next;
        let mut log = self.log.lock().unwrap();
        let name = format!("{req:?}");
        log.requests.push(format!(
            "{}:{}",
            self.core,
            name.split([' ', '{']).next().unwrap_or("")
        ));
        let r = match req {
            ServiceRequest::AllocPd { .. } => {
                log.live += 1;
                ServiceReply::Pd(PdId(n))
            }
            ServiceRequest::CreateCq { depth, .. } => {
                log.live += 1;
                ServiceReply::Cq { cq: CqId(n), depth }
            }
            ServiceRequest::CreateQp { attr, .. } => {
                log.live += 1;
                ServiceReply::Qp { qp: QpId(n), attr }
            }
            ServiceRequest::CreateSrq {
                max_wr, max_sge, ..
            } => ServiceReply::Srq {
                srq: SrqId(n),
                max_wr,
                max_sge,
            },
            ServiceRequest::RegMr { at, .. }
            | ServiceRequest::AllocMr { at, .. }
            | ServiceRequest::AllocMw { at, .. } => {
                if at.is_some() && self.fail_stag_at {
                    return Err(ServiceError::Verb(
                        iwarp_types::VerbError::InsufficientResources,
                    ));
                }
                log.live += 1;
                ServiceReply::Stag(at.unwrap_or(Stag(0x0012_3400 | n << 8)))
            }
            ServiceRequest::DeallocPd { .. }
            | ServiceRequest::DestroyCq { .. }
            | ServiceRequest::DestroyQp { .. }
            | ServiceRequest::DeallocStag { .. } => {
                log.live -= 1;
                ServiceReply::Done
            }
            ServiceRequest::DetachClient { client } => {
                log.detached.push(client);
                log.live = 0;
                ServiceReply::Detached(Default::default())
            }
            ServiceRequest::QueryQp { qp, .. } => ServiceReply::QpInfo(QpInfo {
                id: qp,
                state: QpState::Idle,
                attr: iwarp_rdma::QpAttr {
                    sq_depth: 8,
                    rq_depth: 8,
                    inbound_read: true,
                    inbound_write: true,
                    ..iwarp_rdma::QpAttr::new(PdId(0), CqId(0))
                },
                conn: None,
                terminate: None,
                terminate_received: None,
                rq_limit: 0,
                rq_limit_armed: false,
            }),
            _ => ServiceReply::Done,
        };
        Ok(r)
    }

    fn poll_notice(&mut self) -> Option<ServiceNotice> {
        None
    }
}

pub fn device() -> DeviceAttr {
    DeviceAttr {
        vendor: "t".into(),
        daemon: "t".into(),
        version: "0".into(),
        ports: 1,
        cores: 2,
        max_qp: 64,
        max_qp_wr: 1024,
        max_sge: 4,
        max_cq: 64,
        max_cqe: 4096,
        max_mr: 64,
        max_mr_size: 1 << 30,
        max_pd: 64,
        max_srq: 64,
        max_srq_wr: 1024,
        max_ird: 16,
        max_ord: 16,
        max_arena_bytes: 1 << 30,
        max_private_data: 512,
        memory_windows: true,
        srq: true,
    }
}

/// `n` fake cores writing to one log.
pub fn fake_cores(n: usize, log: &Arc<Mutex<Log>>, fail_stag_at: bool) -> Vec<FakeCore> {
    (0..n)
        .map(|core| FakeCore {
            core,
            next: 0,
            log: log.clone(),
            fail_stag_at,
        })
        .collect()
}

/// A policy that admits this test process's own uid.
pub fn admit_self(s: &mut ControlServer<FakeCore>) {
    let uid = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    let db = AccountDb::from_text("", "");
    s.set_policy(
        Policy::resolve(&db, &[uid.to_string()], &[], &[]).unwrap(),
        db,
    );
}

pub fn server(fail_stag_at: bool) -> (ControlServer<FakeCore>, Arc<Mutex<Log>>, Arc<RegionTable>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let cores = fake_cores(2, &log, fail_stag_at);
    let regions = Arc::new(RegionTable::new(64));
    let cfg = ControlConfig {
        max_objects: 8,
        max_arena_bytes: 1 << 20,
        ..ControlConfig::default()
    };
    let mut s =
        ControlServer::new(cfg, cores, regions.clone(), device(), Vec::new(), None).unwrap();
    admit_self(&mut s);
    (s, log, regions)
}

/// A client over a socket pair: sends a request, steps the server until the reply.
pub struct Peer {
    pub chan: Channel,
    pub seq: u64,
}

impl Peer {
    pub fn call(
        &mut self,
        s: &mut ControlServer<FakeCore>,
        request: Request,
    ) -> (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>) {
        self.seq += 1;
        self.chan
            .send(
                &ClientMsg {
                    seq: self.seq,
                    request,
                },
                &[],
            )
            .unwrap();
        self.reply(s)
    }

    pub fn reply(
        &mut self,
        s: &mut ControlServer<FakeCore>,
    ) -> (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>) {
        for _ in 0..200 {
            s.step(Duration::from_millis(1));
            match self.chan.recv::<ServerMsg>() {
                Ok((ServerMsg::Reply { result, .. }, fds)) => return (result, fds),
                Ok(_) | Err(RecvError::WouldBlock) => {}
                Err(e) => panic!("{e}"),
            }
        }
        panic!("no reply");
    }
}

pub fn connect(s: &mut ControlServer<FakeCore>) -> (Peer, Welcome) {
    let (a, b) = Channel::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    s.adopt(b).unwrap();
    let mut p = Peer { chan: a, seq: 0 };
    let (r, fds) = p.call(
        s,
        Request::Hello {
            version: PROTOCOL_VERSION,
            name: "t".into(),
        },
    );
    match r {
        Ok(Response::Welcome(w)) => {
            assert_eq!(fds.len(), 1, "the ring area travels with Welcome");
            (p, w)
        }
        other => panic!("{other:?}"),
    }
}

pub fn ok<T>(
    r: (Result<Response, ErrorReply>, Vec<std::os::fd::OwnedFd>),
    f: impl Fn(Response) -> Option<T>,
) -> T {
    f(r.0.expect("ok")).expect("kind")
}
