//! Verbs set-up and connection helpers over a [`Testbed`] (single-threaded), run on the
//! cores through their consoles.

use core::net::SocketAddrV4;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use iwarp_engine::{AcceptParams, ConnectParams, Event};
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::QpAttr;
use iwarp_types::{
    Access, CqId, Cqe, Memory, PdId, QpId, RecvWr, SendWr, SgList, Sge, Stag, VecMemory,
};

use crate::testutil::{ConsoleCx, Testbed, Which, ARENA, IP_B};

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

/// Builds [`Verbs`] in a console job (runs on the core).
pub fn make_verbs(cx: &mut ConsoleCx<'_, VecMemory>, arena_len: u64) -> Verbs {
    let rnic = cx.engine.rnic_mut();
    let pd = rnic.alloc_pd().expect("alloc_pd");
    let (cq, _) = rnic.create_cq(256).expect("create_cq");
    let (qp, _) = rnic.create_qp(&qp_attr(pd, cq)).expect("create_qp");
    let len = cx.mem.region_len(ARENA);
    let mr = cx
        .engine
        .rnic_mut()
        .reg_mr(&mr_attr(pd, arena_len), len)
        .expect("reg_mr");
    cx.own_qp(qp);
    cx.own_cq(cq);
    Verbs { cq, qp, mr }
}

/// Verbs on a testbed core.
pub fn verbs(tb: &mut Testbed, w: Which, core: usize, arena_len: u64) -> Verbs {
    tb.exec(w, core, move |cx| make_verbs(cx, arena_len))
}

/// Every core of side `w` listens on [`PORT`] through its console.
pub fn listen_all(tb: &mut Testbed, w: Which) {
    for core in 0..tb.side(w).cores.len() {
        tb.exec(w, core, |cx| cx.listen(PORT, 16)).expect("listen");
    }
}

/// QP `qp` of A's core `a_core` starts an active open to B:[`PORT`]; the connection and
/// the local port chosen, or CM's refusal.
pub fn start_connect(
    tb: &mut Testbed,
    a_core: usize,
    qp: QpId,
) -> Result<(iwarp_types::ConnId, u16), iwarp_engine::CmError> {
    tb.exec(Which::A, a_core, move |cx| {
        cx.connect(qp, SocketAddrV4::new(IP_B, PORT), ConnectParams::default())
    })
}

/// An app that does nothing (its QP and CQ do not exist).
pub fn idle_app() -> crate::testutil::WriteLoop {
    crate::testutil::WriteLoop::new(
        iwarp_types::QpId(1),
        iwarp_types::CqId(1),
        Stag(0),
        Stag(0),
        1,
        1,
        0,
    )
}

/// One connection made through the consoles.
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
    let qa = a.qp;
    let (a_conn, local_port) = start_connect(tb, a_core, qa).expect("connect");
    let (b_core, req) = tb.wait_event(
        Which::B,
        |e| matches!(e, Event::ConnectRequest { remote, .. } if remote.port() == local_port),
    );
    let Event::ConnectRequest { conn, .. } = req else {
        unreachable!()
    };
    let b = verbs(tb, Which::B, b_core, arena_len);
    let qb = b.qp;
    tb.exec(Which::B, b_core, move |cx| {
        cx.accept(conn, qb, AcceptParams::default())
    })
    .expect("accept");
    let (core, est) = tb.wait_event(
        Which::A,
        |e| matches!(e, Event::Established { qp, .. } if *qp == qa),
    );
    assert_eq!(core, a_core);
    assert!(matches!(est, Event::Established { conn, .. } if conn == a_conn));
    let (core, _) = tb.wait_event(
        Which::B,
        |e| matches!(e, Event::Established { qp, .. } if *qp == qb),
    );
    assert_eq!(core, b_core);
    Connected {
        a_core,
        a,
        local_port,
        b_core,
        b,
    }
}

/// Posts `wr` on `qp` of a core; the engine's answer.
pub fn post_send(
    tb: &mut Testbed,
    w: Which,
    core: usize,
    qp: QpId,
    wr: SendWr,
) -> Result<(), iwarp_types::VerbError> {
    tb.exec(w, core, move |cx| cx.engine.post_send(qp, &wr))
}

/// Posts a receive WR on `qp` of a core; the engine's answer.
pub fn post_recv(
    tb: &mut Testbed,
    w: Which,
    core: usize,
    qp: QpId,
    wr: RecvWr,
) -> Result<(), iwarp_types::VerbError> {
    tb.exec(w, core, move |cx| cx.engine.post_recv(qp, &wr))
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

/// Steps until a completion shows up on `cq` of a core (polled through its console).
pub fn wait_cqe(tb: &mut Testbed, w: Which, core: usize, cq: CqId) -> Cqe {
    for _ in 0..20_000 {
        let polled = tb.exec(w, core, move |cx| {
            let mut one = [iwarp_types::Cqe::EMPTY];
            let n = cx.engine.rnic_mut().poll_cq(cq, &mut one).expect("poll_cq");
            (n == 1).then_some(one[0])
        });
        if let Some(c) = polled {
            return c;
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
