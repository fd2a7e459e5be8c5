//! One perftest session over the verbs library: the buffers, the communication channel
//! (ping-pong of SENDs, [`super::wire`]) and the data connection, shared by the server and
//! client roles.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use iwarp_verbs::{
    Access, Arena, CmEvent, CmEventChannel, CmId, ConnParam, ConnectError, Context, Cq, Cqe, Mr,
    Pd, Qp, QpCap, QpInitAttr, RecvWr, SendFlags, SendOp, SendWr, SgList, WcOpcode, WcStatus,
    EMPTY_CQE,
};

use super::wire::{Dest, DEST_LEN};

/// The six perftest tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// `ib_send_bw`.
    SendBw,
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_read_bw`.
    ReadBw,
    /// `ib_send_lat`.
    SendLat,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_lat`.
    ReadLat,
}

impl Test {
    /// From the tool's name without `ib_` (`send_bw`, ...).
    pub fn parse(s: &str) -> Option<Test> {
        Some(match s {
            "send_bw" => Test::SendBw,
            "write_bw" => Test::WriteBw,
            "read_bw" => Test::ReadBw,
            "send_lat" => Test::SendLat,
            "write_lat" => Test::WriteLat,
            "read_lat" => Test::ReadLat,
            _ => return None,
        })
    }
    /// A latency test.
    pub fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat)
    }
}

/// Arena layout: channel send/receive buffers, the credit words, then the data areas.
pub const CH_SEND: usize = 0;
/// Channel receive buffer (one `pingpong_dest`).
pub const CH_RECV: usize = 64;
/// The credit word this side writes from (`ctrl_buf`).
pub const CTRL: usize = 128;
/// The credit word the peer writes (`credit_buf`).
pub const CREDIT: usize = 132;
/// Start of the data send area.
pub const DATA: usize = 4096;
/// Completions polled at once.
const POLL_BATCH: usize = 32;
/// Largest message size accepted.
pub const MAX_SIZE: u32 = 1 << 20;

/// Bytes of each data area: room for perftest's address cycling within its 4 KiB
/// `cycle_buffer` and for one message, rounded to pages.
pub fn area_len(size: u32) -> usize {
    ((size as usize).max(4096) * 2).div_ceil(4096) * 4096
}

/// A connection: its CM id, QP and CQ.
pub struct Conn {
    /// The CM id.
    pub id: CmId,
    /// The QP.
    pub qp: Qp,
    /// Its CQ (send and receive).
    pub cq: Cq,
    /// Established seen.
    pub up: bool,
}

/// The whole session state.
pub struct Session {
    /// The daemon connection.
    pub ctx: Context,
    /// Protection domain.
    pub pd: Pd,
    /// CM events of all ids.
    pub cm: CmEventChannel,
    /// All buffers.
    pub arena: Arena,
    /// One MR over the arena (local write, remote read and write).
    pub mr: Mr,
    /// Message size.
    pub size: u32,
    /// The channel connection.
    pub chan: Option<Conn>,
    /// The data connection.
    pub data: Option<Conn>,
    /// The channel connection closed.
    pub chan_down: bool,
    /// The data connection closed.
    pub data_down: bool,
    /// Data completions not consumed by a wait (bounded by the CQ).
    pub data_cqes: Vec<Cqe>,
    /// A channel receive (its length) completed while waiting for a send's completion.
    pub chan_pending: Option<usize>,
    /// The channel's receive completed as flushed (the channel is closing).
    pub chan_flushed: bool,
}

/// The error of a connection the peer refused (RST to the SYN: nobody listens yet).
pub const REFUSED: &str = "connect error Refused";

/// `"what: error"`.
pub fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

impl Session {
    /// Opens the daemon, allocates the arena for `size`-byte messages and registers it.
    pub fn open(daemon: &str, size: u32) -> Result<Session, String> {
        let ctx = Context::open(daemon).map_err(|e| err("opening iwarpd", e))?;
        let pd = ctx.alloc_pd().map_err(|e| err("alloc_pd", e))?;
        let cm = ctx
            .create_cm_event_channel()
            .map_err(|e| err("CM channel", e))?;
        let len = DATA + 2 * area_len(size);
        let arena = ctx.alloc_arena(len).map_err(|e| err("alloc_arena", e))?;
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mr = pd
            .reg_mr(&arena, 0, len, access)
            .map_err(|e| err("reg_mr", e))?;
        Ok(Session {
            ctx,
            pd,
            cm,
            arena,
            mr,
            size,
            chan: None,
            data: None,
            chan_down: false,
            data_down: false,
            data_cqes: Vec::with_capacity(POLL_BATCH),
            chan_pending: None,
            chan_flushed: false,
        })
    }

    /// The credit word the peer writes (SEND bandwidth test, host order as perftest).
    pub fn credit_word(&self) -> u32 {
        let b = &self.arena.as_slice()[CREDIT..CREDIT + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The channel is closing or closed (its receive flushed, or the CM said so).
    pub fn chan_closing(&self) -> bool {
        self.chan_down || self.chan_flushed
    }

    /// Offset of the data receive area (what the peer writes or reads).
    pub fn data_recv(&self) -> usize {
        DATA + area_len(self.size)
    }

    /// This side's `pingpong_dest`: the data receive area, or the credit word for the SEND
    /// bandwidth test (perftest's `ctx_alloc_credit` on iWARP).
    pub fn my_dest(&self, test: Test) -> Dest {
        let off = if test == Test::SendBw {
            CREDIT
        } else {
            self.data_recv()
        };
        Dest {
            lid: 0,
            out_reads: 1,
            qpn: 1,
            psn: 0,
            rkey: self.mr.rkey().0,
            vaddr: self.mr.addr() + off as u64,
            ..Dest::default()
        }
    }

    /// A CQ and QP attributes for a connection (`recv` receive WRs).
    pub fn make_cq(&self, depth: u32) -> Result<Cq, String> {
        self.ctx
            .create_cq(depth, None)
            .map_err(|e| err("create_cq", e))
    }

    /// Connection parameters: IRD/ORD 16 on the data connection, 0 (the QP's) otherwise.
    pub fn conn_param(reads: u32) -> ConnParam {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: reads,
            initiator_depth: reads,
        }
    }

    /// Posts one channel receive (56 bytes, as perftest).
    pub fn post_chan_recv(&mut self) -> Result<(), String> {
        let sge = self
            .mr
            .sge(CH_RECV as u64, DEST_LEN as u32)
            .map_err(|e| err("sge", e))?;
        let c = self.chan.as_mut().ok_or("no channel")?;
        c.qp.post_recv(&RecvWr {
            wr_id: 1,
            sgl: SgList::single(sge),
        })
        .map_err(|e| err("post_recv (channel)", e))
    }

    /// Posts a data receive of `size` bytes into the receive area.
    pub fn post_data_recv(&mut self) -> Result<(), String> {
        let sge = self
            .mr
            .sge(self.data_recv() as u64, self.size)
            .map_err(|e| err("sge", e))?;
        let c = self.data.as_mut().ok_or("no data connection")?;
        c.qp.post_recv(&RecvWr {
            wr_id: 2,
            sgl: SgList::single(sge),
        })
        .map_err(|e| err("post_recv (data)", e))
    }

    /// Posts a signaled data operation of `len` bytes from arena offset `off`.
    pub fn post_data(
        &mut self,
        wr_id: u64,
        op: SendOp,
        off: usize,
        len: u32,
    ) -> Result<(), String> {
        let sge = self.mr.sge(off as u64, len).map_err(|e| err("sge", e))?;
        let c = self.data.as_mut().ok_or("no data connection")?;
        c.qp.post_send(&SendWr {
            wr_id,
            op,
            sgl: SgList::single(sge),
            flags: SendFlags::SIGNALED,
        })
        .map_err(|e| err("post_send (data)", e))
    }

    /// Handles one CM event if there is one: Established and Disconnected of our ids; a
    /// connect request is returned to the caller.
    pub fn cm_poll(&mut self) -> Result<Option<CmId>, String> {
        let Ok(ev) = self.cm.try_get_event() else {
            return Ok(None);
        };
        let is_chan = self.chan.as_ref().is_some_and(|c| c.id.handle() == ev.id);
        let is_data = self.data.as_ref().is_some_and(|c| c.id.handle() == ev.id);
        match ev.event {
            CmEvent::ConnectRequest { .. } => return Ok(ev.request),
            CmEvent::Established { .. } => {
                if is_chan {
                    if let Some(c) = self.chan.as_mut() {
                        c.up = true;
                    }
                } else if is_data {
                    if let Some(c) = self.data.as_mut() {
                        c.up = true;
                    }
                }
            }
            CmEvent::Disconnected => {
                if is_chan {
                    self.chan_down = true;
                } else if is_data {
                    self.data_down = true;
                }
            }
            CmEvent::Rejected { .. } => return Err("connection rejected".into()),
            CmEvent::ConnectError(ConnectError::Refused) => return Err(REFUSED.into()),
            CmEvent::ConnectError(e) => return Err(format!("connect error {e:?}")),
            CmEvent::DeviceRemoval => return Err("the daemon went away".into()),
        }
        Ok(None)
    }

    /// Polls the channel CQ once: the byte length of a completed receive, if any. Errors
    /// on a failed completion.
    pub fn chan_poll(&mut self) -> Result<Option<usize>, String> {
        if let Some(len) = self.chan_pending.take() {
            return Ok(Some(len));
        }
        let Some(c) = self.chan.as_mut() else {
            return Ok(None);
        };
        let mut wc = [EMPTY_CQE; 4];
        let n =
            c.cq.poll(&mut wc)
                .map_err(|e| err("poll_cq (channel)", e))?;
        let mut got = None;
        for w in &wc[..n] {
            // The receive still posted when the tool closes the channel at its end.
            if w.status == WcStatus::Flushed {
                self.chan_flushed = true;
                continue;
            }
            if w.status != WcStatus::Success {
                return Err(format!(
                    "channel completion {:?} ({:?})",
                    w.status, w.opcode
                ));
            }
            if w.opcode == WcOpcode::Recv {
                got = Some(w.byte_len as usize);
            }
        }
        Ok(got)
    }

    /// Polls the data CQ once into `data_cqes`; errors on a failed completion. Flushed
    /// WRs (the receives still posted when the connection closes) are part of the close
    /// and left out.
    pub fn data_poll(&mut self) -> Result<usize, String> {
        let Some(c) = self.data.as_mut() else {
            return Ok(0);
        };
        let mut wc = [EMPTY_CQE; POLL_BATCH];
        let n = c.cq.poll(&mut wc).map_err(|e| err("poll_cq (data)", e))?;
        for w in &wc[..n] {
            if w.status == WcStatus::Flushed {
                continue;
            }
            if w.status != WcStatus::Success {
                return Err(format!(
                    "data completion {:?} ({:?}, wr_id {})",
                    w.status, w.opcode, w.wr_id
                ));
            }
            self.data_cqes.push(*w);
        }
        Ok(n)
    }

    /// Sends `msg` on the channel and waits for its completion.
    pub fn chan_send(&mut self, msg: &[u8], t: Duration) -> Result<(), String> {
        self.arena.as_mut_slice()[CH_SEND..CH_SEND + msg.len()].copy_from_slice(msg);
        let sge = self
            .mr
            .sge(CH_SEND as u64, msg.len() as u32)
            .map_err(|e| err("sge", e))?;
        let c = self.chan.as_mut().ok_or("no channel")?;
        c.qp.post_send(&SendWr {
            wr_id: 3,
            op: SendOp::Send,
            sgl: SgList::single(sge),
            flags: SendFlags::SIGNALED,
        })
        .map_err(|e| err("post_send (channel)", e))?;
        let end = Instant::now() + t;
        let mut wc = [EMPTY_CQE; 1];
        loop {
            let c = self.chan.as_mut().ok_or("no channel")?;
            if c.cq.poll(&mut wc).map_err(|e| err("poll_cq", e))? == 1 {
                let w = wc[0];
                if w.status != WcStatus::Success {
                    return Err(format!("channel send {:?}", w.status));
                }
                match w.opcode {
                    WcOpcode::Send => return Ok(()),
                    // The peer's next message (at most one: one receive is posted).
                    WcOpcode::Recv if self.chan_pending.is_none() => {
                        self.chan_pending = Some(w.byte_len as usize)
                    }
                    op => return Err(format!("unexpected channel completion {op:?}")),
                }
            }
            if Instant::now() > end {
                return Err("timeout sending on the channel".into());
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// The last received channel message.
    pub fn chan_msg(&self, len: usize) -> Vec<u8> {
        self.arena.as_slice()[CH_RECV..CH_RECV + len.min(DEST_LEN)].to_vec()
    }

    /// Creates a connection's QP and CQ for `id` (passive: `id` is a request).
    pub fn make_conn(
        &self,
        id: CmId,
        depth: u32,
        recv: u32,
        passive: bool,
    ) -> Result<Conn, String> {
        let cq = self.make_cq(depth)?;
        let mut a = QpInitAttr::new(&cq, &cq);
        a.cap = QpCap {
            max_send_wr: depth / 2,
            max_recv_wr: recv,
            max_send_sge: 1,
            max_recv_sge: 1,
        };
        a.ird = 16;
        a.ord = 16;
        a.remote_read = true;
        a.remote_write = true;
        let qp = if passive {
            id.create_qp(&self.pd, &a)
                .map_err(|e| err("create_qp", e))?
        } else {
            self.pd.create_qp(&a).map_err(|e| err("create_qp", e))?
        };
        Ok(Conn {
            id,
            qp,
            cq,
            up: false,
        })
    }

    /// Connects `conn` to `to` and waits for Established (`Err` with "refused" for a
    /// connection the peer refused).
    pub fn connect(&mut self, data: bool, to: SocketAddrV4, t: Duration) -> Result<(), String> {
        let c = if data {
            self.data.as_ref()
        } else {
            self.chan.as_ref()
        }
        .ok_or("no conn")?;
        let reads = if data { 16 } else { 0 };
        c.id.connect(&c.qp, to, &Self::conn_param(reads))
            .map_err(|e| err("connect", e))?;
        let end = Instant::now() + t;
        loop {
            if let Some(req) = self.cm_poll()? {
                drop(req);
            }
            let up = if data {
                self.data.as_ref()
            } else {
                self.chan.as_ref()
            }
            .is_some_and(|c| c.up);
            if up {
                return Ok(());
            }
            if Instant::now() > end {
                return Err("timeout connecting".into());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
