#![allow(dead_code)]

//! What the examples share: opening the daemon, one side's objects, connecting over the
//! CM with the peer's buffer in the private data, waiting for completions through the
//! completion channel, pattern bytes.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use iwarp_verbs::*;

/// Where the daemon is and how long to wait (options of every example).
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Listen for one connection (the server side).
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    pub server: bool,
    /// Connect to the server at this IPv4 address (the client side).
    #[arg(long, value_name = "IP")]
    pub connect: Option<Ipv4Addr>,
    /// TCP port the server listens on.
    #[arg(long, default_value_t = 7174)]
    pub port: u16,
    /// Name of the local iwarpd (`/run/iwarpd/NAME.verbs`).
    #[arg(long, default_value = "iwarpd")]
    pub daemon: String,
    /// Path of the verbs socket (instead of --daemon).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Seconds any one step may wait (connection, completion) before giving up.
    #[arg(long, default_value_t = 30)]
    pub timeout_s: u64,
}

pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The buffer a side offers for RDMA, sent in the CM private data.
#[derive(Clone, Copy, Debug)]
pub struct RemoteBuf {
    pub addr: u64,
    pub rkey: Stag,
    pub len: u32,
}

impl RemoteBuf {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&self.addr.to_le_bytes());
        v.extend_from_slice(&self.rkey.0.to_le_bytes());
        v.extend_from_slice(&self.len.to_le_bytes());
        v
    }

    fn decode(p: &[u8]) -> Res<RemoteBuf> {
        if p.len() < 16 {
            return Err(format!("private data of {} bytes, expected 16", p.len()).into());
        }
        Ok(RemoteBuf {
            addr: u64::from_le_bytes(p[0..8].try_into()?),
            rkey: Stag(u32::from_le_bytes(p[8..12].try_into()?)),
            len: u32::from_le_bytes(p[12..16].try_into()?),
        })
    }
}

/// One side: context, PD, a send and a receive CQ on one completion channel, an arena
/// with one MR over it, a CM event channel.
pub struct Side {
    pub ctx: Context,
    pub pd: Pd,
    pub chan: CompChannel,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub arena: Arena,
    pub mr: Mr,
    pub cm: CmEventChannel,
    pub timeout: Duration,
}

impl Side {
    pub fn open(c: &Common, arena_bytes: usize) -> Res<Side> {
        let ctx = match &c.socket {
            Some(p) => Context::open_path(p)?,
            None => Context::open(&c.daemon)?,
        };
        let pd = ctx.alloc_pd()?;
        let chan = ctx.create_comp_channel()?;
        let send_cq = ctx.create_cq(256, Some(&chan))?;
        let recv_cq = ctx.create_cq(256, Some(&chan))?;
        let arena = ctx.alloc_arena(arena_bytes)?;
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mr = pd.reg_mr(&arena, 0, arena_bytes, access)?;
        let cm = ctx.create_cm_event_channel()?;
        Ok(Side {
            ctx,
            pd,
            chan,
            send_cq,
            recv_cq,
            arena,
            mr,
            cm,
            timeout: Duration::from_secs(c.timeout_s.max(1)),
        })
    }

    pub fn qp_attr(&self) -> QpInitAttr<'_> {
        let mut a = QpInitAttr::new(&self.send_cq, &self.recv_cq);
        a.sq_sig_all = true;
        a
    }

    /// `off..off+len` of the arena as an RDMA target for the peer.
    pub fn remote_buf(&self, off: u64, len: u32) -> RemoteBuf {
        RemoteBuf {
            addr: self.mr.addr() + off,
            rkey: self.mr.rkey(),
            len,
        }
    }

    fn cm_event(&self) -> Res<CmEventInfo> {
        Ok(self.cm.get_event_timeout(self.timeout)?)
    }

    /// Server: waits for one request on `port`, creates its QP, lets `before_accept`
    /// post receives, accepts with `offer`. Returns the QP, its CM id and the client's
    /// buffer.
    pub fn accept_one(
        &mut self,
        port: u16,
        offer: RemoteBuf,
        before_accept: impl FnOnce(&Side, &mut Qp) -> Res<()>,
    ) -> Res<(Qp, CmId, RemoteBuf)> {
        let listener = self.cm.create_id()?;
        listener.listen(port, 1)?;
        println!("listening on port {port}");
        let ev = self.cm_event()?;
        let (id, peer) = match (ev.event, ev.request) {
            (CmEvent::ConnectRequest { private_data, .. }, Some(id)) => {
                (id, RemoteBuf::decode(&private_data)?)
            }
            (other, _) => {
                return Err(format!("expected a connection request, got {other:?}").into())
            }
        };
        let mut qp = id.create_qp(&self.pd, &self.qp_attr())?;
        before_accept(self, &mut qp)?;
        let param = ConnParam {
            private_data: offer.encode(),
            ..ConnParam::default()
        };
        id.accept(&qp, &param)?;
        match self.cm_event()?.event {
            CmEvent::Established { .. } => Ok((qp, id, peer)),
            other => Err(format!("expected Established, got {other:?}").into()),
        }
    }

    /// Client: connects to `ip:port` offering `offer`, after `before_connect` posted
    /// receives. Returns the QP, its CM id and the server's buffer.
    pub fn connect(
        &mut self,
        ip: Ipv4Addr,
        port: u16,
        offer: RemoteBuf,
        before_connect: impl FnOnce(&Side, &mut Qp) -> Res<()>,
    ) -> Res<(Qp, CmId, RemoteBuf)> {
        let mut qp = self.pd.create_qp(&self.qp_attr())?;
        before_connect(self, &mut qp)?;
        let id = self.cm.create_id()?;
        let param = ConnParam {
            private_data: offer.encode(),
            ..ConnParam::default()
        };
        id.connect(&qp, SocketAddrV4::new(ip, port), &param)?;
        match self.cm_event()?.event {
            CmEvent::Established { private_data, .. } => {
                let peer = RemoteBuf::decode(&private_data)?;
                Ok((qp, id, peer))
            }
            other => Err(format!("connection to {ip}:{port}: {other:?}").into()),
        }
    }

    /// Posts a receive of `len` bytes at `off`.
    pub fn post_recv(&self, qp: &mut Qp, wr_id: u64, off: u64, len: u32) -> Res<()> {
        qp.post_recv(&RecvWr {
            wr_id,
            sgl: SgList::single(self.mr.sge(off, len)?),
        })?;
        Ok(())
    }

    /// Disconnects and waits (a bounded time) for `Disconnected`.
    pub fn disconnect(&self, id: &CmId) {
        let _ = id.disconnect();
        let _ = self.cm.get_event_timeout(self.timeout);
    }
}

/// Waits for at least one completion of `cq` and polls up to `wc.len()` of them, the
/// blocking way: poll; if empty, arm, poll again (a completion that came before the arm
/// is not missed), wait on the channel's fd, take and acknowledge its event, repeat.
/// Each completion's status is checked.
pub fn wait_cq(cq: &mut Cq, chan: &CompChannel, wc: &mut [Cqe], timeout: Duration) -> Res<usize> {
    let end = Instant::now() + timeout;
    loop {
        let mut n = cq.poll(wc)?;
        if n == 0 {
            cq.req_notify(false)?;
            n = cq.poll(wc)?;
        }
        if n > 0 {
            for c in &wc[..n] {
                if c.status != WcStatus::Success {
                    return Err(format!("completion failed: {c:?}").into());
                }
            }
            return Ok(n);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no completion in {timeout:?}").into());
        }
        let ts = rustix::event::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: left.subsec_nanos() as i64,
        };
        let mut fds = [rustix::event::PollFd::new(
            chan,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        // Events of the other CQ on this channel are taken too: every wait re-arms first.
        loop {
            match chan.try_get_cq_event() {
                Ok(_) => chan.ack_cq_events(1),
                Err(Error::WouldBlock) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Waits for one completion of `cq` and checks its `wr_id` and opcode.
pub fn wait_one(side: &mut Side, recv: bool, wr_id: u64, opcode: WcOpcode) -> Res<Cqe> {
    let mut wc = [EMPTY_CQE; 1];
    let cq = if recv {
        &mut side.recv_cq
    } else {
        &mut side.send_cq
    };
    wait_cq(cq, &side.chan, &mut wc, side.timeout)?;
    let c = wc[0];
    if c.wr_id != wr_id || c.opcode != opcode {
        return Err(format!("expected {opcode:?} of WR {wr_id}, got {c:?}").into());
    }
    Ok(c)
}

/// Deterministic bytes: `seed` and the index mixed.
pub fn pattern(out: &mut [u8], seed: u64) {
    let s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, b) in out.iter_mut().enumerate() {
        *b = ((i as u64).wrapping_mul(2_654_435_761) ^ s).to_le_bytes()[1] ^ (s >> 56) as u8;
    }
}

/// True if `buf` holds the pattern of `seed`.
pub fn holds(buf: &[u8], seed: u64) -> bool {
    let mut want = vec![0u8; buf.len()];
    pattern(&mut want, seed);
    buf == want
}

/// A one-word control message in a SEND (8 bytes, little endian).
pub fn put_word(side: &mut Side, off: usize, w: u64) {
    side.arena.as_mut_slice()[off..off + 8].copy_from_slice(&w.to_le_bytes());
}

pub fn get_word(side: &Side, off: usize) -> u64 {
    u64::from_le_bytes(side.arena.as_slice()[off..off + 8].try_into().unwrap())
}

/// The client's address, or `None` for the server.
pub fn role(c: &Common) -> Option<Ipv4Addr> {
    if c.server {
        None
    } else {
        c.connect
    }
}

#[allow(dead_code)]
pub fn send_wr(side: &Side, wr_id: u64, op: SendOp, off: u64, len: u32) -> Res<SendWr> {
    Ok(SendWr {
        wr_id,
        op,
        sgl: SgList::single(side.mr.sge(off, len)?),
        flags: SendFlags::SIGNALED,
    })
}
