//! One end of a run: a context on a daemon, a PD, one arena with a buffer per QP, and the
//! connections (a CQ, a QP and an MR each) set up through the library's CM with the
//! buffers described in the private data.

use std::net::SocketAddrV4;
use std::time::Duration;

use iwarp_verbs::{
    Access, Arena, CmEvent, CmEventChannel, CmId, ConnParam, Context, Cq, Mr, Pd, Qp, QpCap,
    QpInitAttr, RecvWr, SgList,
};

use crate::args::Test;
use crate::wire::Hello;
use crate::PerfError;

/// How long connection set-up may take.
pub const CM_TIMEOUT: Duration = Duration::from_secs(10);
/// Buffers are page aligned in the arena.
const PAGE_BYTES: usize = 4096;
/// Receives each end of a SEND test keeps posted beyond its depth (credit messages,
/// ping-pong).
pub const RECV_SLACK: u32 = 8;

/// A daemon, a PD, an arena and a CM channel.
pub struct Side {
    /// The context (kept open while the objects live).
    pub ctx: Context,
    /// The PD of every QP and MR.
    pub pd: Pd,
    /// One buffer of `buf_len` bytes per QP.
    pub arena: Arena,
    /// CM events.
    pub cm: CmEventChannel,
    /// Bytes of each QP's buffer.
    pub buf_len: usize,
}

/// A connection being set up (client).
pub struct Pending {
    qp: Qp,
    cq: Cq,
    mr: Mr,
    off: usize,
    id: CmId,
    credits: u32,
}

/// One connection.
pub struct Endpoint {
    /// Its QP.
    pub qp: Qp,
    /// Its CQ (send and receive completions).
    pub cq: Cq,
    /// The MR over its buffer.
    pub mr: Mr,
    /// Offset of its buffer in the arena.
    pub off: usize,
    /// What the peer said (its buffer, and the test).
    pub remote: Hello,
    /// Its CM id.
    pub id: CmId,
    /// The peer closed the connection.
    pub disconnected: bool,
    /// Receives this end posted at set-up (SEND tests).
    pub credits: u32,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// SQ and RQ sizes of a QP for `test` with `depth` WRs in flight.
pub fn qp_cap(test: Test, depth: u32) -> QpCap {
    let recv = match test {
        Test::SendBw | Test::SendLat => 2 * depth + RECV_SLACK,
        _ => 1,
    };
    QpCap {
        max_send_wr: 2 * depth + RECV_SLACK,
        max_recv_wr: recv,
        max_send_sge: 1,
        max_recv_sge: 1,
    }
}

impl Side {
    /// Opens `daemon` and allocates `qps` buffers of `buf_len` bytes.
    pub fn open(daemon: &str, qps: u32, buf_len: u64) -> Result<Side, PerfError> {
        let ctx = Context::open(daemon)
            .map_err(|e| PerfError::verbs(format!("opening iwarpd {daemon}"), e))?;
        let pd = ctx
            .alloc_pd()
            .map_err(|e| PerfError::verbs("alloc_pd", e))?;
        let buf_len = round_up(buf_len as usize, PAGE_BYTES);
        let arena = ctx
            .alloc_arena(buf_len * qps as usize)
            .map_err(|e| PerfError::verbs(format!("alloc_arena of {qps} x {buf_len} bytes"), e))?;
        let cm = ctx
            .create_cm_event_channel()
            .map_err(|e| PerfError::verbs("CM channel", e))?;
        Ok(Side {
            ctx,
            pd,
            arena,
            cm,
            buf_len,
        })
    }

    /// The largest ORD/IRD the daemon allows, or `asked` if smaller and non-zero.
    pub fn rd_atomic(&self, asked: u32, ord: bool) -> u32 {
        let d = self.ctx.device_attr();
        let max = if ord { d.max_ord } else { d.max_ird };
        if asked == 0 {
            max
        } else {
            asked.min(max)
        }
    }

    /// Our hello for the connection `index`.
    pub fn hello(&self, h: &Hello, index: u16, mr: &Mr, credits: u32) -> Hello {
        Hello {
            qp_index: index,
            buf_addr: mr.addr(),
            buf_len: mr.len(),
            rkey: mr.rkey().0,
            credits,
            ..*h
        }
    }

    /// A CQ, a QP (active, or for the request `for_id`) and an MR for connection `index`,
    /// with the receives of a SEND test posted.
    fn make(
        &mut self,
        test: Test,
        depth: u32,
        index: u32,
        ird: u32,
        ord: u32,
        for_id: Option<&CmId>,
    ) -> Result<(Qp, Cq, Mr, usize, u32), PerfError> {
        let cap = qp_cap(test, depth);
        let cq = self
            .ctx
            .create_cq(cap.max_send_wr + cap.max_recv_wr, None)
            .map_err(|e| PerfError::verbs("create_cq", e))?;
        let mut attr = QpInitAttr::new(&cq, &cq);
        attr.cap = cap;
        attr.ird = ird;
        attr.ord = ord;
        let mut qp = match for_id {
            Some(id) => id.create_qp(&self.pd, &attr),
            None => self.pd.create_qp(&attr),
        }
        .map_err(|e| PerfError::verbs("create_qp", e))?;
        let off = index as usize * self.buf_len;
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let mr = self
            .pd
            .reg_mr(&self.arena, off, self.buf_len, access)
            .map_err(|e| PerfError::verbs("reg_mr", e))?;
        // A fresh buffer: write_lat watches its last byte change.
        self.arena.as_mut_slice()[off..off + self.buf_len].fill(0);
        let mut posted = 0;
        if matches!(test, Test::SendBw | Test::SendLat) {
            let sge = mr
                .sge(0, self.buf_len.min(u32::MAX as usize) as u32)
                .map_err(|e| PerfError::verbs("sge", e))?;
            for i in 0..cap.max_recv_wr {
                qp.post_recv(&RecvWr {
                    wr_id: i as u64,
                    sgl: SgList::single(sge),
                })
                .map_err(|e| PerfError::verbs("post_recv", e))?;
                posted += 1;
            }
        }
        Ok((qp, cq, mr, off, posted))
    }

    /// Client: starts `qps` connections to `server` (answer with [`Side::finish_connect`]).
    pub fn start_connect(
        &mut self,
        h: &Hello,
        server: SocketAddrV4,
        ird: u32,
        ord: u32,
    ) -> Result<Vec<Pending>, PerfError> {
        let mut out = Vec::with_capacity(h.qps as usize);
        for i in 0..h.qps {
            let (qp, cq, mr, off, credits) =
                self.make(h.test, h.depth, i as u32, ird, ord, None)?;
            let id = self
                .cm
                .create_id()
                .map_err(|e| PerfError::verbs("create_id", e))?;
            let mine = self.hello(h, i, &mr, credits);
            let param = ConnParam {
                private_data: mine.encode().to_vec(),
                responder_resources: ird,
                initiator_depth: ord,
            };
            id.connect(&qp, server, &param)
                .map_err(|e| PerfError::verbs(format!("connect to {server}"), e))?;
            out.push(Pending {
                qp,
                cq,
                mr,
                off,
                id,
                credits,
            });
        }
        Ok(out)
    }

    /// Client: waits for every connection's `Established` (with the server's hello).
    pub fn finish_connect(
        &self,
        pending: Vec<Pending>,
        mut idle: impl FnMut() -> Result<(), PerfError>,
    ) -> Result<Vec<Endpoint>, PerfError> {
        let mut remote: Vec<Option<Hello>> = vec![None; pending.len()];
        let deadline = std::time::Instant::now() + CM_TIMEOUT;
        while remote.iter().any(Option::is_none) {
            if std::time::Instant::now() > deadline {
                return Err(PerfError::Setup(
                    "connections not established in time".into(),
                ));
            }
            idle()?;
            let ev = match self.cm.get_event_timeout(Duration::from_millis(1)) {
                Ok(ev) => ev,
                Err(iwarp_verbs::Error::Timeout) | Err(iwarp_verbs::Error::WouldBlock) => continue,
                Err(e) => return Err(PerfError::verbs("CM event", e)),
            };
            let Some(i) = pending.iter().position(|p| p.id.handle() == ev.id) else {
                continue;
            };
            match ev.event {
                CmEvent::Established { private_data, .. } => {
                    remote[i] = Some(
                        Hello::decode(&private_data)
                            .map_err(|e| PerfError::Setup(format!("server's accept: {e}")))?,
                    );
                }
                CmEvent::Rejected { private_data } => {
                    return Err(PerfError::Setup(format!(
                        "the server rejected the connection: {}",
                        String::from_utf8_lossy(&private_data)
                    )))
                }
                CmEvent::ConnectError(e) => {
                    return Err(PerfError::Setup(format!("connect failed: {e:?}")))
                }
                other => return Err(PerfError::Setup(format!("unexpected CM event {other:?}"))),
            }
        }
        pending
            .into_iter()
            .zip(remote)
            .map(|(p, r)| {
                let remote = r.ok_or_else(|| {
                    PerfError::Setup("a connection without the server's hello".into())
                })?;
                Ok(Endpoint {
                    qp: p.qp,
                    cq: p.cq,
                    mr: p.mr,
                    off: p.off,
                    remote,
                    id: p.id,
                    disconnected: false,
                    credits: p.credits,
                })
            })
            .collect()
    }

    /// Server: takes connection requests until `want` (the first request's `qps`) are
    /// accepted and established. `idle` runs between waits (loopback: the client end).
    pub fn accept(
        &mut self,
        ird: u32,
        ord: u32,
        mut idle: impl FnMut() -> Result<(), PerfError>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Endpoint>, PerfError> {
        let mut eps: Vec<Endpoint> = Vec::new();
        let mut established = 0usize;
        let mut want = usize::MAX;
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        while established < want {
            if deadline.is_some_and(|d| std::time::Instant::now() > d) {
                return Err(PerfError::Setup("no client connected in time".into()));
            }
            idle()?;
            let ev = match self.cm.get_event_timeout(Duration::from_millis(1)) {
                Ok(ev) => ev,
                Err(iwarp_verbs::Error::Timeout) | Err(iwarp_verbs::Error::WouldBlock) => continue,
                Err(e) => return Err(PerfError::verbs("CM event", e)),
            };
            match (ev.event, ev.request) {
                (CmEvent::ConnectRequest { private_data, .. }, Some(req)) => {
                    let h = match Hello::decode(&private_data) {
                        Ok(h)
                            if h.size as usize <= self.buf_len
                                && h.qps as usize <= self.arena.len() / self.buf_len =>
                        {
                            h
                        }
                        Ok(h) => {
                            let _ = req.reject(
                                format!(
                                    "size {} x {} QPs exceeds the server's buffers",
                                    h.size, h.qps
                                )
                                .as_bytes(),
                            );
                            continue;
                        }
                        Err(e) => {
                            let _ = req.reject(e.to_string().as_bytes());
                            continue;
                        }
                    };
                    want = h.qps as usize;
                    let (qp, cq, mr, off, credits) =
                        self.make(h.test, h.depth, h.qp_index as u32, ird, ord, Some(&req))?;
                    let mine = self.hello(&h, h.qp_index, &mr, credits);
                    let param = ConnParam {
                        private_data: mine.encode().to_vec(),
                        responder_resources: ird,
                        initiator_depth: ord,
                    };
                    req.accept(&qp, &param)
                        .map_err(|e| PerfError::verbs("accept", e))?;
                    eps.push(Endpoint {
                        qp,
                        cq,
                        mr,
                        off,
                        remote: h,
                        id: req,
                        disconnected: false,
                        credits,
                    });
                }
                (CmEvent::Established { .. }, _) if eps.iter().any(|e| e.id.handle() == ev.id) => {
                    established += 1;
                }
                (CmEvent::Disconnected, _) => {
                    if let Some(e) = eps.iter_mut().find(|e| e.id.handle() == ev.id) {
                        e.disconnected = true;
                    }
                }
                _ => {}
            }
        }
        eps.sort_by_key(|e| e.remote.qp_index);
        Ok(eps)
    }

    /// Marks endpoints whose peer disconnected; true when all have.
    pub fn poll_disconnects(&self, eps: &mut [Endpoint]) -> Result<bool, PerfError> {
        loop {
            match self.cm.try_get_event() {
                Ok(ev) => {
                    if matches!(ev.event, CmEvent::Disconnected) {
                        if let Some(e) = eps.iter_mut().find(|e| e.id.handle() == ev.id) {
                            e.disconnected = true;
                        }
                    }
                }
                Err(iwarp_verbs::Error::WouldBlock) => break,
                Err(e) => return Err(PerfError::verbs("CM event", e)),
            }
        }
        Ok(eps.iter().all(|e| e.disconnected))
    }
}
