//! Verbs set-up and connection helpers over a [`Testbed`] (single-threaded).

use core::net::SocketAddrV4;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_types::{Access, CqId, Cqe, PdId, QpId, SendWr, SgList, Sge, Stag, VecMemory};

use crate::control::{Done, Notice, Op};
use crate::testutil::{Testbed, Which, ARENA, IP_B};

/// The port B listens on.
pub const PORT: u16 = 4791;

/// A PD, a CQ, a QP and an MR over the whole arena of one core.
#[derive(Clone, Copy, Debug)]
pub struct Verbs {
    pub cq: CqId,
    pub qp: QpId,
    pub mr: Stag,
}

pub fn qp_attr(pd: PdId, cq: CqId) -> QpAttr {
    QpAttr {
        sq_depth: 64,
        rq_depth: 64,
        ord: 8,
        ird: 8,
        inbound_read: true,
        inbound_write: true,
        ..QpAttr::new(pd, cq)
    }
}

pub fn mr_attr(pd: PdId, len: u64) -> MrAttr {
    MrAttr {
        pd,
        region: ARENA,
        region_offset: 0,
        len,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ
            | Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE,
        key: 0x42,
        remote_access_flag: true,
    }
}

/// The ops that build [`Verbs`], run through any `call`.
pub fn make_verbs(mut call: impl FnMut(Op<VecMemory>) -> Done<VecMemory>, arena_len: u64) -> Verbs {
    let Done::Pd(pd) = call(Op::AllocPd) else {
        panic!("alloc_pd")
    };
    let Done::Cq(cq, _) = call(Op::CreateCq { depth: 256 }) else {
        panic!("create_cq")
    };
    let Done::Qp(qp, _) = call(Op::CreateQp(qp_attr(pd, cq))) else {
        panic!("create_qp")
    };
    let Done::Stag(mr) = call(Op::RegMr(mr_attr(pd, arena_len))) else {
        panic!("reg_mr")
    };
    Verbs { cq, qp, mr }
}

/// Verbs on a testbed core.
pub fn verbs(tb: &mut Testbed, w: Which, core: usize, arena_len: u64) -> Verbs {
    make_verbs(|op| tb.call(w, core, op).unwrap(), arena_len)
}

/// A notice matching `f` from any core of a side, if one is queued.
pub fn take_notice(
    tb: &mut Testbed,
    w: Which,
    mut f: impl FnMut(&Notice) -> bool,
) -> Option<Notice> {
    tb.side(w)
        .handles
        .iter_mut()
        .find_map(|h| h.wait_notice(StdDuration::ZERO, &mut f))
}

/// Steps until a notice matching `f` arrives on side `w`.
pub fn wait_notice(tb: &mut Testbed, w: Which, mut f: impl FnMut(&Notice) -> bool) -> Notice {
    for _ in 0..20_000 {
        if let Some(n) = take_notice(tb, w, &mut f) {
            return n;
        }
        tb.step();
    }
    panic!("no matching notice on {w:?}");
}

/// One connection made through control commands.
#[derive(Clone, Copy, Debug)]
pub struct Connected {
    pub a_core: usize,
    pub a: Verbs,
    pub local_port: u16,
    pub b_core: usize,
    pub b: Verbs,
}

/// A's `a` (on `a_core`) connects to B:PORT; B accepts on a new QP of the core that got
/// the request (which must already listen).
pub fn connect(tb: &mut Testbed, a_core: usize, a: Verbs, arena_len: u64) -> Connected {
    let op = Op::Connect {
        qp: a.qp,
        remote: SocketAddrV4::new(IP_B, PORT),
        params: ConnectParams::default(),
    };
    let Done::Conn(a_conn, local_port) = tb.call(Which::A, a_core, op).unwrap() else {
        panic!("connect")
    };
    let req = wait_notice(
        tb,
        Which::B,
        |n| matches!(n.event, Event::ConnectRequest { remote, .. } if remote.port() == local_port),
    );
    let Event::ConnectRequest { conn, .. } = req.event else {
        unreachable!()
    };
    let b_core = req.core;
    let b = verbs(tb, Which::B, b_core, arena_len);
    let op = Op::Accept {
        conn,
        qp: b.qp,
        params: AcceptParams::default(),
    };
    tb.call(Which::B, b_core, op).unwrap();
    let qa = a.qp;
    let est = wait_notice(tb, Which::A, |n| {
        matches!(n.event, Event::Established { qp, .. } if qp == qa) && n.core == a_core
    });
    assert!(matches!(est.event, Event::Established { conn, .. } if conn == a_conn));
    let qb = b.qp;
    wait_notice(tb, Which::B, |n| {
        matches!(n.event, Event::Established { qp, .. } if qp == qb) && n.core == b_core
    });
    Connected {
        a_core,
        a,
        local_port,
        b_core,
        b,
    }
}

/// A signalled send-queue WR with one SGE.
pub fn wr(id: u64, op: iwarp_types::SendOp, addr: u64, len: u32, lkey: Stag) -> SendWr {
    SendWr {
        wr_id: id,
        op,
        sgl: SgList::single(Sge {
            addr,
            length: len,
            lkey,
        }),
        flags: iwarp_types::SendFlags::SIGNALED,
    }
}

/// Steps until a completion shows up on `cq` of a core (polled through commands).
pub fn wait_cqe(tb: &mut Testbed, w: Which, core: usize, cq: CqId) -> Cqe {
    for _ in 0..20_000 {
        if let Done::Cqes(b) = tb.call(w, core, Op::PollCq { cq, max: 1 }).unwrap() {
            if let Some(c) = b.iter().next() {
                return *c;
            }
        }
    }
    panic!("no completion on {w:?} core {core}");
}

/// A `Write` into shared memory (capture output).
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A deterministic byte pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
