//! One application's side of a connection through the client library (`iwarp-verbs`):
//! a context, a PD, a CQ with its completion channel, an arena with one MR over all of
//! it, a CM event channel; helpers to connect two sides, wait for events and
//! completions, and pattern bytes to verify what landed.

use std::net::SocketAddrV4;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use iwarp_verbs::*;

/// How long anything may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// Bytes of each side's arena.
pub const ARENA_BYTES: usize = 1 << 20;

/// One side.
pub struct Side {
    /// Who this is (messages).
    pub name: &'static str,
    /// The context.
    pub ctx: Context,
    /// A PD.
    pub pd: Pd,
    /// The completion channel of `cq`.
    pub chan: CompChannel,
    /// Send and receive CQ.
    pub cq: Cq,
    /// The arena.
    pub arena: Arena,
    /// An MR over the whole arena (local write, remote read/write, MW bind).
    pub mr: Mr,
    /// CM events.
    pub cm: CmEventChannel,
}

impl Side {
    /// Opens `socket` and creates the side's objects.
    pub fn open(name: &'static str, socket: &Path) -> Side {
        let ctx = Context::open_path(socket).unwrap_or_else(|e| panic!("{name}: open: {e}"));
        let pd = ctx.alloc_pd().expect("alloc_pd");
        let chan = ctx.create_comp_channel().expect("create_comp_channel");
        let cq = ctx.create_cq(256, Some(&chan)).expect("create_cq");
        let arena = ctx.alloc_arena(ARENA_BYTES).expect("alloc_arena");
        let access =
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::MW_BIND;
        let mr = pd.reg_mr(&arena, 0, ARENA_BYTES, access).expect("reg_mr");
        let cm = ctx
            .create_cm_event_channel()
            .expect("create_cm_event_channel");
        Side {
            name,
            ctx,
            pd,
            chan,
            cq,
            arena,
            mr,
            cm,
        }
    }

    /// QP attributes on this side's CQ: every WR signaled, binds allowed.
    pub fn qp_attr(&self) -> QpInitAttr<'_> {
        let mut a = QpInitAttr::new(&self.cq, &self.cq);
        a.sq_sig_all = true;
        a.bind_enabled = true;
        a
    }

    /// The next CM event (panics after [`WAIT`]).
    pub fn cm_event(&self) -> CmEventInfo {
        self.cm
            .get_event_timeout(WAIT)
            .unwrap_or_else(|e| panic!("{}: no CM event: {e}", self.name))
    }

    /// Polls one completion (panics after [`WAIT`]).
    pub fn poll_one(&mut self) -> Cqe {
        poll_one(&mut self.cq, self.name)
    }

    /// Fills `off..off+len` of the arena with the pattern of `seed`.
    pub fn fill(&mut self, off: usize, len: usize, seed: u8) {
        pattern(&mut self.arena.as_mut_slice()[off..off + len], seed);
    }

    /// True if `off..off+len` holds the pattern of `seed`.
    pub fn holds(&self, off: usize, len: usize, seed: u8) -> bool {
        let mut want = vec![0u8; len];
        pattern(&mut want, seed);
        self.arena.as_slice()[off..off + len] == want[..]
    }

    /// Waits until `off..off+len` holds the pattern of `seed` (RDMA Write has no
    /// completion at the target); false after [`WAIT`].
    pub fn wait_holds(&self, off: usize, len: usize, seed: u8) -> bool {
        let end = Instant::now() + WAIT;
        while Instant::now() < end {
            if self.holds(off, len, seed) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    /// Posts a signaled WR and returns its completion (panics on a post error).
    pub fn post_and_complete(&mut self, qp: &mut Qp, wr: SendWr) -> Cqe {
        qp.post_send(&wr)
            .unwrap_or_else(|e| panic!("{}: post_send {:?}: {e}", self.name, wr.op));
        self.poll_one()
    }

    /// Posts a receive of `len` bytes at `off` with `wr_id`.
    pub fn post_recv(&self, qp: &mut Qp, wr_id: u64, off: u64, len: u32) {
        let sge = self.mr.sge(off, len).expect("recv SGE");
        qp.post_recv(&RecvWr {
            wr_id,
            sgl: SgList::single(sge),
        })
        .expect("post_recv");
        // Posting is asynchronous to the peer process: a control call orders after the
        // WRs posted before it, so the receive is on the RQ before this test lets the
        // peer send (else the Send may find the RQ empty: a Terminate, as in RDMA).
        qp.query().expect("query after post_recv");
    }
}

/// Polls one completion of `cq` (panics after [`WAIT`]).
pub fn poll_one(cq: &mut Cq, who: &str) -> Cqe {
    let end = Instant::now() + WAIT;
    let mut wc = [empty_cqe(); 1];
    loop {
        if cq
            .poll(&mut wc)
            .unwrap_or_else(|e| panic!("{who}: poll: {e}"))
            == 1
        {
            return wc[0];
        }
        if Instant::now() > end {
            panic!("{who}: no completion in {WAIT:?}");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A placeholder completion for poll buffers.
pub fn empty_cqe() -> Cqe {
    Cqe::EMPTY
}

/// Deterministic bytes: `seed` and the index mixed.
pub fn pattern(out: &mut [u8], seed: u8) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed;
    }
}

/// A send WR.
pub fn wr(wr_id: u64, op: SendOp, sges: &[Sge]) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl: SgList::from_slice(sges).expect("SGEs"),
        flags: SendFlags::SIGNALED,
    }
}

/// Asserts a completion's fields.
#[track_caller]
pub fn check_cqe(c: &Cqe, wr_id: u64, opcode: WcOpcode, status: WcStatus) {
    assert_eq!(
        (c.wr_id, c.opcode, c.status),
        (wr_id, opcode, status),
        "completion {c:?}"
    );
}

/// Waits (epoll) until `fd` is readable; false after `within`.
pub fn epoll_readable(fd: impl AsFd, within: Duration) -> bool {
    use rustix::event::epoll;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).expect("epoll_create");
    epoll::add(&ep, fd, epoll::EventData::new_u64(1), epoll::EventFlags::IN).expect("epoll_ctl");
    let mut events = Vec::with_capacity(4);
    let ts = rustix::event::Timespec {
        tv_sec: within.as_secs() as i64,
        tv_nsec: within.subsec_nanos() as i64,
    };
    match epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)) {
        Ok(n) => n > 0,
        Err(e) => panic!("epoll_wait: {e}"),
    }
}

/// A connection: `passive` listens on `port`, `active` connects with `req_data`; the
/// passive side accepts with `acc_data`. Checks that each side saw the other's private
/// data. Returns (passive QP, its CM id, active QP, its CM id).
pub fn connect(
    passive: &mut Side,
    passive_ip: [u8; 4],
    active: &mut Side,
    port: u16,
    req_data: &[u8],
    acc_data: &[u8],
) -> (Qp, CmId, Qp, CmId) {
    let listener = passive.cm.create_id().expect("create_id");
    listener.listen(port, 8).expect("listen");
    let r = connect_via(
        passive, &listener, passive_ip, active, port, req_data, acc_data,
    );
    drop(listener);
    r
}

/// Like [`connect`] with an existing listener on `port`.
pub fn connect_via(
    passive: &mut Side,
    listener: &CmId,
    passive_ip: [u8; 4],
    active: &mut Side,
    port: u16,
    req_data: &[u8],
    acc_data: &[u8],
) -> (Qp, CmId, Qp, CmId) {
    let aqp = active
        .pd
        .create_qp(&active.qp_attr())
        .expect("active create_qp");
    let aid = active.cm.create_id().expect("active create_id");
    let remote = SocketAddrV4::new(passive_ip.into(), port);
    let param = ConnParam {
        private_data: req_data.to_vec(),
        ..ConnParam::default()
    };
    aid.connect(&aqp, remote, &param).expect("connect");
    let ev = passive.cm_event();
    assert_eq!(ev.id, listener.handle(), "request on the listener: {ev:?}");
    match &ev.event {
        CmEvent::ConnectRequest { private_data, .. } => {
            assert_eq!(private_data, req_data, "private data of the request")
        }
        other => panic!("expected ConnectRequest, got {other:?}"),
    }
    let pid = ev.request.expect("the request's CM id");
    let pqp = pid
        .create_qp(&passive.pd, &passive.qp_attr())
        .expect("passive create_qp");
    let param = ConnParam {
        private_data: acc_data.to_vec(),
        ..ConnParam::default()
    };
    pid.accept(&pqp, &param).expect("accept");
    match active.cm_event().event {
        CmEvent::Established { private_data, qp } => {
            assert_eq!(private_data, acc_data, "private data of the reply");
            assert_eq!(qp, aqp.handle());
        }
        other => panic!("active side: expected Established, got {other:?}"),
    }
    match passive.cm_event().event {
        CmEvent::Established { qp, .. } => assert_eq!(qp, pqp.handle()),
        other => panic!("passive side: expected Established, got {other:?}"),
    }
    (pqp, pid, aqp, aid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_deterministic_and_differ_by_seed() {
        let (mut a, mut b, mut c) = ([0u8; 256], [0u8; 256], [0u8; 256]);
        pattern(&mut a, 1);
        pattern(&mut b, 1);
        pattern(&mut c, 2);
        assert_eq!(a, b);
        assert!(a.iter().zip(c.iter()).all(|(x, y)| x != y));
        assert!(a.iter().any(|&x| x != a[0]), "not a constant fill");
    }
}
