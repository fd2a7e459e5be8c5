//! The malicious-client suite, data half: bad work requests written raw into the SQ and RQ
//! ring slots of a connected QP (impossible opcode, too many SGEs, an SGE with another
//! client's STag, an SGE outside its MR, nonzero reserved fields, zero-length oddities, a
//! Fast-Register naming an arena the client does not own, a receive into another
//! client's memory, corrupted ring indices). Each gets an error completion carrying the
//! slot's `wr_id` (or, for corrupt indices, the QP goes to Error with an async event),
//! and nothing else is touched: a victim client's memory keeps its bytes and the daemon
//! keeps serving (a fresh QP moves data afterwards).

use std::time::Duration;

use iwarp_apps::raw::{RawArena, RawCq, RawQp, RawVerbs};
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_shm_ring::{encode_recv_wr, encode_send_wr, RECV_SLOT_SIZE, SEND_SLOT_SIZE};
use iwarp_shm_socket::*;
use iwarp_types::{
    Access, RecvWr, RegionId, SendFlags, SendOp, SendWr, SgList, Sge, Stag, WcOpcode, WcStatus,
};

const WAIT: Duration = Duration::from_secs(10);
const LISTEN_PORT: u16 = 9300;
const ARENA: u64 = 65536;
const VICTIM_BYTE: u8 = 0x5A;

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge {
        addr,
        length,
        lkey: Stag(lkey),
    }
}

fn send_slot(wr_id: u64, op: SendOp, sges: &[Sge]) -> [u8; SEND_SLOT_SIZE] {
    encode_send_wr(&SendWr {
        wr_id,
        op,
        sgl: SgList::from_slice(sges).unwrap(),
        flags: SendFlags::SIGNALED,
    })
}

fn recv_slot(wr_id: u64, sges: &[Sge]) -> [u8; RECV_SLOT_SIZE] {
    encode_recv_wr(&RecvWr {
        wr_id,
        sgl: SgList::from_slice(sges).unwrap(),
    })
}

struct World {
    peer: RawVerbs,
    ppd: PdHandle,
    pcq: RawCq,
    parena: RawArena,
    pmr: StagValue,
    listen: CmIdHandle,
    att: RawVerbs,
    apd: PdHandle,
    acq: RawCq,
    aarena: RawArena,
    amr: StagValue,
    failures: Vec<String>,
    cases: usize,
}

impl World {
    /// A fresh connection: the attacker's QP (active, on B) and the peer's (on A), with
    /// four receives posted on the peer.
    fn pair(&mut self) -> (RawQp, RawQp) {
        let aid = self.att.create_cm_id();
        let aqp = self.att.create_qp(self.apd, &self.acq, None);
        let addr = Addr {
            ip: [198, 18, 0, 1],
            port: LISTEN_PORT,
        };
        match self.att.c.call(Request::Connect {
            id: aid,
            qp: aqp.handle,
            remote: addr,
            param: ConnParam::default(),
        }) {
            Ok(Ok(_)) => {}
            other => panic!("Connect: {other:?}"),
        }
        let listen = self.listen;
        let req = self.peer.wait_cm(WAIT, |id, e| match e {
            CmEvent::ConnectRequest { id: req, .. } if id == listen => Some(*req),
            _ => None,
        });
        let mut pqp = self.peer.create_qp(self.ppd, &self.pcq, Some(req));
        for i in 0..4u64 {
            pqp.post_recv_raw(&recv_slot(0x9000 + i, &[sge(i * 4096, 4096, self.pmr.0)]));
        }
        match self.peer.c.call(Request::Accept {
            id: req,
            qp: pqp.handle,
            param: ConnParam::default(),
        }) {
            Ok(Ok(_)) => {}
            other => panic!("Accept: {other:?}"),
        }
        let (pq, aq) = (pqp.handle, aqp.handle);
        self.peer.wait_cm(WAIT, |_, e| {
            matches!(e, CmEvent::Established { qp, .. } if *qp == pq).then_some(())
        });
        self.att.wait_cm(WAIT, |_, e| {
            matches!(e, CmEvent::Established { qp, .. } if *qp == aq).then_some(())
        });
        (pqp, aqp)
    }

    fn fail(&mut self, case: &str, why: String) {
        eprintln!("FAIL {case}: {why}");
        self.failures.push(format!("{case}: {why}"));
    }

    /// Posts one raw SQ slot on a fresh QP and expects an error completion with its
    /// `wr_id` (status in `statuses`, or any error if empty).
    fn bad_send(
        &mut self,
        case: &str,
        slot: [u8; SEND_SLOT_SIZE],
        wr_id: u64,
        statuses: &[WcStatus],
    ) {
        self.cases += 1;
        let (pqp, mut aqp) = self.pair();
        aqp.post_send_raw(&slot);
        match self.att.poll(&mut self.acq, WAIT) {
            None => self.fail(case, "no completion".into()),
            Some(c) if c.wr_id != wr_id => self.fail(
                case,
                format!(
                    "completion of wr_id {:#x}, expected {wr_id:#x}: {c:?}",
                    c.wr_id
                ),
            ),
            Some(c) if c.qp.0 != aqp.handle.0 => self.fail(
                case,
                format!("completion names QP {}, expected {}", c.qp.0, aqp.handle.0),
            ),
            Some(c) if c.status == WcStatus::Success => self.fail(case, format!("accepted: {c:?}")),
            Some(c) if !statuses.is_empty() && !statuses.contains(&c.status) => self.fail(
                case,
                format!("status {:?}, expected one of {statuses:?}", c.status),
            ),
            Some(c) => eprintln!("ok   {case}: {:?} {:?}", c.opcode, c.status),
        }
        self.drop_pair(pqp, aqp);
    }

    fn drop_pair(&mut self, pqp: RawQp, aqp: RawQp) {
        let _ = self.att.c.call(Request::DestroyQp(aqp.handle));
        let _ = self.peer.c.call(Request::DestroyQp(pqp.handle));
        // Drain what the peer's receives and the attacker's flushes left in the CQs.
        while self
            .att
            .poll(&mut self.acq, Duration::from_millis(20))
            .is_some()
        {}
        while self
            .peer
            .poll(&mut self.pcq, Duration::from_millis(20))
            .is_some()
        {}
    }
}

#[test]
fn bad_work_requests_get_error_completions_and_touch_nothing() {
    if skip("bad_work_requests_get_error_completions_and_touch_nothing") {
        return;
    }
    let _lock = SystemLock::acquire();
    let mut pair = DaemonPair::start("mwr");
    // The victim: a client of daemon B whose memory the attacker aims at.
    let mut victim = RawVerbs::connect(&pair.b.socket, "victim");
    let vpd = victim.alloc_pd();
    let varena = victim.alloc_arena(ARENA);
    varena
        .map
        .write(0, &vec![VICTIM_BYTE; ARENA as usize])
        .unwrap();
    let vmr = victim.reg_mr(
        vpd,
        &varena,
        0,
        ARENA,
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    );
    // The peer on daemon A, listening.
    let mut peer = RawVerbs::connect(&pair.a.socket, "peer");
    let ppd = peer.alloc_pd();
    let pcq = peer.create_cq(256);
    let parena = peer.alloc_arena(ARENA);
    let pmr = peer.reg_mr(
        ppd,
        &parena,
        0,
        ARENA,
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    );
    let listen = peer.create_cm_id();
    match peer.c.call(Request::Listen {
        id: listen,
        addr: Addr {
            ip: [198, 18, 0, 1],
            port: LISTEN_PORT,
        },
        backlog: 8,
    }) {
        Ok(Ok(_)) => {}
        other => panic!("Listen: {other:?}"),
    }
    let mut att = RawVerbs::connect(&pair.b.socket, "attacker");
    let apd = att.alloc_pd();
    let acq = att.create_cq(256);
    let aarena = att.alloc_arena(ARENA);
    let amr = att.reg_mr(
        apd,
        &aarena,
        0,
        ARENA,
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    );
    let mut w = World {
        peer,
        ppd,
        pcq,
        parena,
        pmr,
        listen,
        att,
        apd,
        acq,
        aarena,
        amr,
        failures: Vec::new(),
        cases: 0,
    };
    let lkey = w.amr.0;

    // A good Send first: the set-up works.
    {
        let (pqp, mut aqp) = w.pair();
        w.aarena.map.write(0, b"hello, peer").unwrap();
        aqp.post_send_raw(&send_slot(1, SendOp::Send, &[sge(0, 11, lkey)]));
        let c = w.att.poll(&mut w.acq, WAIT).expect("good Send completes");
        assert_eq!(
            (c.wr_id, c.status, c.opcode),
            (1, WcStatus::Success, WcOpcode::Send),
            "{c:?}"
        );
        let r = w.peer.poll(&mut w.pcq, WAIT).expect("peer receives");
        assert_eq!(
            (r.status, r.opcode, r.byte_len),
            (WcStatus::Success, WcOpcode::Recv, 11),
            "{r:?}"
        );
        let mut got = [0u8; 11];
        w.parena
            .map
            .read((r.wr_id - 0x9000) * 4096, &mut got)
            .unwrap();
        assert_eq!(&got, b"hello, peer");
        w.drop_pair(pqp, aqp);
    }

    // Slots that do not decode.
    let mut s = send_slot(0xA1, SendOp::Send, &[sge(0, 8, lkey)]);
    s[8] = 200;
    w.bad_send(
        "impossible opcode 200",
        s,
        0xA1,
        &[WcStatus::InvalidWqe, WcStatus::LocalQpCatastrophic],
    );
    let mut s = send_slot(0xA2, SendOp::Send, &[sge(0, 8, lkey)]);
    s[9] = 7;
    w.bad_send(
        "7 SGEs (more than MAX_SGE)",
        s,
        0xA2,
        &[WcStatus::InvalidWqe, WcStatus::LocalQpCatastrophic],
    );
    let mut s = send_slot(0xA3, SendOp::Send, &[sge(0, 8, lkey)]);
    s[9] = 255;
    w.bad_send(
        "255 SGEs",
        s,
        0xA3,
        &[WcStatus::InvalidWqe, WcStatus::LocalQpCatastrophic],
    );
    let mut s = send_slot(0xA4, SendOp::Send, &[sge(0, 8, lkey)]);
    s[160] = 1;
    w.bad_send(
        "nonzero reserved field",
        s,
        0xA4,
        &[WcStatus::InvalidWqe, WcStatus::LocalQpCatastrophic],
    );
    let mut s = send_slot(0xA5, SendOp::Send, &[sge(0, 8, lkey)]);
    s[12] = 0x80;
    w.bad_send(
        "undefined send flag",
        s,
        0xA5,
        &[WcStatus::InvalidWqe, WcStatus::LocalQpCatastrophic],
    );
    // Decodes, but more SGEs than the QP was created with (2).
    let three = [sge(0, 8, lkey), sge(8, 8, lkey), sge(16, 8, lkey)];
    w.bad_send(
        "3 SGEs on a 2-SGE QP",
        send_slot(0xA6, SendOp::Send, &three),
        0xA6,
        &[],
    );
    // SGEs the engine must refuse.
    let prot = [
        WcStatus::InvalidStag,
        WcStatus::InvalidPd,
        WcStatus::AccessViolation,
        WcStatus::BaseBounds,
    ];
    w.bad_send(
        "Send from the victim's STag",
        send_slot(0xB1, SendOp::Send, &[sge(0, 64, vmr.0)]),
        0xB1,
        &prot,
    );
    w.bad_send(
        "Write from the victim's STag",
        send_slot(
            0xB2,
            SendOp::Write {
                remote_to: 0,
                rkey: Stag(w.pmr.0),
            },
            &[sge(0, 64, vmr.0)],
        ),
        0xB2,
        &prot,
    );
    // The engine checks a Read's sink when the response arrives: the connection ends and
    // the Read completes Flushed (an error all the same; the victim's bytes are checked
    // at the end).
    let mut read_prot = prot.to_vec();
    read_prot.push(WcStatus::Flushed);
    w.bad_send(
        "Read into the victim's STag",
        send_slot(
            0xB3,
            SendOp::Read {
                remote_to: 0,
                rkey: Stag(w.pmr.0),
                invalidate_local: false,
            },
            &[sge(0, 64, vmr.0)],
        ),
        0xB3,
        &read_prot,
    );
    w.bad_send(
        "SGE past its MR",
        send_slot(0xB4, SendOp::Send, &[sge(ARENA - 10, 100, lkey)]),
        0xB4,
        &prot,
    );
    w.bad_send(
        "SGE whose addr + len wraps",
        send_slot(0xB5, SendOp::Send, &[sge(u64::MAX - 3, 64, lkey)]),
        0xB5,
        &[
            WcStatus::BaseBounds,
            WcStatus::WrapError,
            WcStatus::InvalidStag,
        ],
    );
    w.bad_send(
        "SGE with an unknown STag",
        send_slot(0xB6, SendOp::Send, &[sge(0, 64, 0x00ab_cd00)]),
        0xB6,
        &prot,
    );
    w.bad_send(
        "SGE of 4 GiB - 1",
        send_slot(0xB7, SendOp::Send, &[sge(0, u32::MAX, lkey)]),
        0xB7,
        &[],
    );
    // Local operations naming what the attacker does not own.
    w.bad_send(
        "LocalInv of the victim's MR",
        send_slot(0xC1, SendOp::LocalInv { stag: Stag(vmr.0) }, &[]),
        0xC1,
        &[],
    );
    let frmr = match w.att.c.call(Request::AllocMr {
        pd: w.apd,
        max_len: ARENA,
    }) {
        Ok(Ok(Response::Stag(s))) => s,
        other => panic!("AllocMr: {other:?}"),
    };
    let fastreg = |wr_id: u64, region: u32| {
        send_slot(
            wr_id,
            SendOp::FastReg {
                stag: Stag(frmr.0),
                region: RegionId(region),
                region_offset: 0,
                len: 4096,
                va: 0,
                access: Access(
                    Access::LOCAL_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0,
                ),
                zero_based: true,
            },
            &[],
        )
    };
    // Every arena value the attacker does not hold: the victim's and the daemon's
    // internal region slots.
    let own = w.aarena.handle.0;
    let foreign: Vec<u32> = std::iter::once(varena.handle.0)
        .chain(0..8)
        .chain([u32::MAX, 0x0001_0001, 0x0002_0001])
        .filter(|&v| v != own)
        .collect();
    for (i, region) in foreign.iter().enumerate() {
        w.bad_send(
            &format!("FastReg naming arena {region:#x} (not the client's)"),
            fastreg(0xD0 + i as u64, *region),
            0xD0 + i as u64,
            &[],
        );
    }
    // Receive into the victim's memory: the peer sends 64 bytes of 0xEE.
    {
        w.cases += 1;
        let case = "receive into the victim's STag";
        let (pqp, mut aqp) = w.pair();
        aqp.post_recv_raw(&recv_slot(0xE1, &[sge(0, 4096, vmr.0)]));
        w.parena.map.write(8192, &[0xEE; 64]).unwrap();
        let mut pqp = pqp;
        pqp.post_send_raw(&send_slot(0xE2, SendOp::Send, &[sge(8192, 64, w.pmr.0)]));
        match w.att.poll(&mut w.acq, WAIT) {
            Some(c) if c.wr_id == 0xE1 && c.status != WcStatus::Success => {
                eprintln!("ok   {case}: {:?}", c.status)
            }
            other => w.fail(
                case,
                format!("expected an error completion of 0xE1: {other:?}"),
            ),
        }
        w.drop_pair(pqp, aqp);
    }
    {
        w.cases += 1;
        let case = "receive of 7 SGEs";
        let (pqp, mut aqp) = w.pair();
        let mut r = recv_slot(0xE3, &[sge(0, 64, lkey)]);
        r[8] = 7;
        aqp.post_recv_raw(&r);
        match w.att.poll(&mut w.acq, WAIT) {
            Some(c) if c.wr_id == 0xE3 && c.status != WcStatus::Success => {
                eprintln!("ok   {case}: {:?}", c.status)
            }
            other => w.fail(
                case,
                format!("expected an error completion of 0xE3: {other:?}"),
            ),
        }
        w.drop_pair(pqp, aqp);
    }
    // Zero-length oddities: defined answers (a completion), the daemon unharmed.
    for (i, (name, slot)) in [
        (
            "zero-length Send with a garbage STag",
            send_slot(0xF1, SendOp::Send, &[sge(u64::MAX, 0, 0xffff_ffff)]),
        ),
        ("Send of no SGE", send_slot(0xF2, SendOp::Send, &[])),
        (
            "zero-length Read",
            send_slot(
                0xF3,
                SendOp::Read {
                    remote_to: 0,
                    rkey: Stag(w.pmr.0),
                    invalidate_local: false,
                },
                &[sge(0, 0, lkey)],
            ),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        w.cases += 1;
        let (pqp, mut aqp) = w.pair();
        aqp.post_send_raw(&slot);
        match w.att.poll(&mut w.acq, WAIT) {
            Some(c) if c.wr_id == 0xF1 + i as u64 => eprintln!("ok   {name}: {:?}", c.status),
            other => w.fail(name, format!("expected a completion: {other:?}")),
        }
        w.drop_pair(pqp, aqp);
    }
    // Corrupt ring indices: the QP goes to Error with an async event; nothing else.
    {
        w.cases += 1;
        let case = "corrupt SQ producer index";
        let (pqp, aqp) = w.pair();
        let sq_off = aqp.created.sq.offset as usize;
        assert!(w.att.area.region().store_u64(sq_off + 64, 1_000_000_007));
        aqp.ring_sq();
        let target = aqp.handle;
        let mut seen = None;
        let end = std::time::Instant::now() + WAIT;
        while seen.is_none() && std::time::Instant::now() < end {
            match w.att.next_event(Duration::from_millis(200)) {
                Some(Event::Async(a)) if a.resource == EventResourceRef::Qp(target) => {
                    seen = Some(a.kind)
                }
                _ => {}
            }
        }
        let state = w.att.query_qp(target).state;
        if seen.is_none() || state != QpStateValue::Error {
            w.fail(
                case,
                format!("async event {seen:?}, QP state {state:?} (expected an event and Error)"),
            );
        } else {
            eprintln!("ok   {case}: {seen:?}, QP in {state:?}");
        }
        w.drop_pair(pqp, aqp);
    }

    // Nothing else touched: the victim's bytes, and a fresh QP moves data.
    let mut vbytes = vec![0u8; ARENA as usize];
    varena.map.read(0, &mut vbytes).unwrap();
    if let Some(i) = vbytes.iter().position(|&b| b != VICTIM_BYTE) {
        w.fail(
            "victim memory intact",
            format!("byte {i} is {:#x}", vbytes[i]),
        );
    }
    match victim.c.call(Request::QueryMr(vmr)) {
        Ok(Ok(Response::MrInfo(i))) if i.valid => {}
        other => w.fail("victim MR still valid", format!("{other:?}")),
    }
    {
        let (pqp, mut aqp) = w.pair();
        w.aarena.map.write(0, b"still alive").unwrap();
        aqp.post_send_raw(&send_slot(2, SendOp::Send, &[sge(0, 11, lkey)]));
        let c = w.att.poll(&mut w.acq, WAIT);
        let r = w.peer.poll(&mut w.pcq, WAIT);
        match (c, r) {
            (Some(c), Some(r)) if c.status == WcStatus::Success && r.byte_len == 11 => {}
            other => w.fail("daemon still serves", format!("{other:?}")),
        }
        w.drop_pair(pqp, aqp);
    }
    assert!(
        pair.a.is_running() && pair.b.is_running(),
        "a daemon died:\n{}",
        pair.logs()
    );
    eprintln!("{} cases, {} failed", w.cases, w.failures.len());
    assert!(
        w.failures.is_empty(),
        "{} of {} cases failed:\n{}",
        w.failures.len(),
        w.cases,
        w.failures.join("\n")
    );
}
