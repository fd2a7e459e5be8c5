//! A client that speaks the protocol and the rings directly, without the client library:
//! the malicious-client suite writes raw slots into its own rings with it. It maps the
//! ring area and its arenas with `iwarp-shm-mem` (sealed memfds, checked on mapping).

use std::time::{Duration, Instant};

use iwarp_shm_mem::SharedMapping;
use iwarp_shm_ring::{
    decode_cqe, AreaView, Consumer, CqControl, DoorbellBlock, Producer, RingLayout, CQE_SLOT_SIZE,
};
use iwarp_shm_socket::*;
use iwarp_types::Cqe;

use crate::admin::RawClient;

/// A raw client with its ring area mapped.
pub struct RawVerbs {
    /// The control connection.
    pub c: RawClient,
    /// The ring area.
    pub area: AreaView,
    _ring_map: SharedMapping,
}

/// An arena mapped here.
pub struct RawArena {
    /// Its handle.
    pub handle: ArenaHandle,
    /// The mapping.
    pub map: SharedMapping,
}

/// A CQ: one consumer per core.
pub struct RawCq {
    /// Its handle.
    pub handle: CqHandle,
    /// The per-core rings.
    pub rings: Vec<Consumer>,
    /// Its control line.
    pub control: CqControl,
}

/// A QP with its rings.
pub struct RawQp {
    /// Its handle.
    pub handle: QpHandle,
    /// What the daemon said.
    pub created: QpCreated,
    /// The SQ.
    pub sq: Producer,
    /// The RQ.
    pub rq: Option<Producer>,
    /// Its core's doorbell block.
    pub doorbell: DoorbellBlock,
}

impl RawQp {
    /// Pushes raw SQ slot bytes and rings the doorbell.
    pub fn post_send_raw(&mut self, slot: &[u8]) {
        self.sq.push(slot).expect("SQ push");
        assert!(self.doorbell.ring(self.created.sq.doorbell_bit));
    }

    /// Pushes raw RQ slot bytes and rings the doorbell.
    pub fn post_recv_raw(&mut self, slot: &[u8]) {
        let rq = self.rq.as_mut().expect("the QP has an RQ");
        rq.push(slot).expect("RQ push");
        let bit = self.created.rq.expect("RQ ring").doorbell_bit;
        assert!(self.doorbell.ring(bit));
    }

    /// Rings the SQ doorbell without pushing (after a raw index write).
    pub fn ring_sq(&self) {
        assert!(self.doorbell.ring(self.created.sq.doorbell_bit));
    }
}

fn expect<T>(
    what: &str,
    r: Result<Result<Response, ErrorReply>, String>,
    f: impl FnOnce(Response) -> Option<T>,
) -> T {
    match r {
        Ok(Ok(resp)) => {
            let text = format!("{resp:?}");
            f(resp).unwrap_or_else(|| panic!("{what}: unexpected {text}"))
        }
        other => panic!("{what}: {other:?}"),
    }
}

impl RawVerbs {
    /// Connects, says `Hello` and maps the ring area.
    pub fn connect(socket: &std::path::Path, name: &str) -> RawVerbs {
        let mut c = RawClient::connect(socket, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let fd = c
            .ring_area
            .take()
            .expect("Welcome carries the ring-area memfd");
        let map = SharedMapping::from_fd(fd, c.welcome.ring_area_len as usize)
            .expect("map the ring area");
        let area = AreaView::attach(map.region()).expect("ring area attaches");
        RawVerbs {
            c,
            area,
            _ring_map: map,
        }
    }

    /// A PD.
    pub fn alloc_pd(&mut self) -> PdHandle {
        expect("AllocPd", self.c.call(Request::AllocPd), |r| match r {
            Response::Pd(p) => Some(p),
            _ => None,
        })
    }

    /// An arena of `len` bytes, mapped.
    pub fn alloc_arena(&mut self, len: u64) -> RawArena {
        let (r, mut fds) = self
            .c
            .call_with_fds(
                Request::AllocArena {
                    len,
                    hugepages_required: false,
                },
                &[],
            )
            .expect("AllocArena");
        let (handle, got_len) = expect("AllocArena", Ok(r), |r| match r {
            Response::Arena { arena, len, .. } => Some((arena, len)),
            _ => None,
        });
        let fd = fds.pop().expect("AllocArena carries a memfd");
        let map = SharedMapping::from_fd(fd, got_len as usize).expect("map the arena");
        RawArena { handle, map }
    }

    /// A zero-based MR over `offset..offset+len` of `arena`.
    pub fn reg_mr(
        &mut self,
        pd: PdHandle,
        arena: &RawArena,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> StagValue {
        let reg = MrReg {
            pd,
            arena: arena.handle,
            offset,
            len,
            va: 0,
            zero_based: true,
            access,
        };
        expect("RegMr", self.c.call(Request::RegMr(reg)), |r| match r {
            Response::Stag(s) => Some(s),
            _ => None,
        })
    }

    /// A CQ of `depth` entries without a channel.
    pub fn create_cq(&mut self, depth: u32) -> RawCq {
        let created = expect(
            "CreateCq",
            self.c.call(Request::CreateCq(CqCreate {
                depth,
                channel: None,
            })),
            |r| match r {
                Response::Cq(c) => Some(c),
                _ => None,
            },
        );
        let rings = created
            .rings
            .iter()
            .map(|r| {
                let layout = RingLayout::completion_queue(r.entries).expect("CQ layout");
                let region = self
                    .area
                    .ring_region(r.offset, layout)
                    .expect("CQ ring region");
                Consumer::attach(region, layout).expect("CQ ring attaches")
            })
            .collect();
        let region = self
            .area
            .region()
            .sub(created.control as usize, 64)
            .expect("CQ control line");
        RawCq {
            handle: created.cq,
            rings,
            control: CqControl::new(region).expect("CQ control"),
        }
    }

    /// A QP (RQ of 16, SQ of 16, 2 SGEs each, bind enabled, ORD/IRD 4).
    pub fn create_qp(&mut self, pd: PdHandle, cq: &RawCq, for_cm_id: Option<CmIdHandle>) -> RawQp {
        let req = QpCreate {
            cap: QpCap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 2,
                max_recv_sge: 2,
            },
            ord: 4,
            ird: 4,
            bind_enabled: true,
            for_cm_id,
            ..QpCreate::new(pd, cq.handle)
        };
        let created = expect(
            "CreateQp",
            self.c.call(Request::CreateQp(req)),
            |r| match r {
                Response::Qp(q) => Some(q),
                _ => None,
            },
        );
        let sq_layout = RingLayout::send_queue(created.sq.entries).expect("SQ layout");
        let sq = Producer::attach(
            self.area
                .ring_region(created.sq.offset, sq_layout)
                .expect("SQ region"),
            sq_layout,
        )
        .expect("SQ attaches");
        let rq = created.rq.map(|r| {
            let l = RingLayout::recv_queue(r.entries).expect("RQ layout");
            Producer::attach(self.area.ring_region(r.offset, l).expect("RQ region"), l)
                .expect("RQ attaches")
        });
        let doorbell = self
            .area
            .doorbell(created.core)
            .expect("doorbell of the QP's core");
        RawQp {
            handle: created.qp,
            created,
            sq,
            rq,
            doorbell,
        }
    }

    /// Waits for one completion on `cq` (any core's ring).
    pub fn poll(&self, cq: &mut RawCq, within: Duration) -> Option<Cqe> {
        let end = Instant::now() + within;
        let mut slot = [0u8; CQE_SLOT_SIZE];
        loop {
            for ring in cq.rings.iter_mut() {
                if ring.pop(&mut slot).expect("CQ ring intact") {
                    return Some(decode_cqe(&slot).expect("the daemon writes valid CQEs"));
                }
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits for the next event (events already received first).
    pub fn next_event(&mut self, within: Duration) -> Option<Event> {
        if let Some(e) = self.c.events.pop_front() {
            return Some(e);
        }
        let _ = self.c.chan.set_recv_timeout(Some(within));
        let got = match self.c.chan.recv::<ServerMsg>() {
            Ok((ServerMsg::Event(e), _)) => Some(e),
            Ok((other, _)) => panic!("unsolicited {other:?}"),
            Err(_) => None,
        };
        let _ = self
            .c
            .chan
            .set_recv_timeout(Some(crate::admin::REPLY_TIMEOUT));
        got
    }

    /// Waits for a CM event matching `f`, keeping the others aside; panics after `within`.
    pub fn wait_cm<T>(
        &mut self,
        within: Duration,
        mut f: impl FnMut(CmIdHandle, &CmEvent) -> Option<T>,
    ) -> T {
        let end = Instant::now() + within;
        let mut kept = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.next_event(left.max(Duration::from_millis(1))) {
                Some(Event::Cm { id, event }) => {
                    if let Some(t) = f(id, &event) {
                        self.c.events.extend(kept);
                        return t;
                    }
                    kept.push(Event::Cm { id, event });
                }
                Some(other) => kept.push(other),
                None if Instant::now() >= end => {
                    panic!("no matching CM event in {within:?}; got {kept:?}")
                }
                None => {}
            }
        }
    }

    /// Query QP.
    pub fn query_qp(&mut self, qp: QpHandle) -> QpInfoReply {
        expect("QueryQp", self.c.call(Request::QueryQp(qp)), |r| match r {
            Response::QpInfo(i) => Some(i),
            _ => None,
        })
    }

    /// A new CM id.
    pub fn create_cm_id(&mut self) -> CmIdHandle {
        expect(
            "CreateCmId",
            self.c.call(Request::CreateCmId),
            |r| match r {
                Response::CmId(h) => Some(h),
                _ => None,
            },
        )
    }
}

/// Connects `active` (on one daemon) to `passive` (listening on the other at `addr`).
/// Both sides get a fresh PD-less QP on the given PDs and CQs. Returns (passive QP,
/// active QP).
pub fn connect_pair(
    passive: &mut RawVerbs,
    ppd: PdHandle,
    pcq: &RawCq,
    active: &mut RawVerbs,
    apd: PdHandle,
    acq: &RawCq,
    addr: Addr,
) -> (RawQp, RawQp) {
    let within = Duration::from_secs(10);
    let listen = passive.create_cm_id();
    match passive.c.call(Request::Listen {
        id: listen,
        addr,
        backlog: 4,
    }) {
        Ok(Ok(_)) => {}
        other => panic!("Listen: {other:?}"),
    }
    let aid = active.create_cm_id();
    let aqp = active.create_qp(apd, acq, None);
    match active.c.call(Request::Connect {
        id: aid,
        qp: aqp.handle,
        remote: addr,
        param: ConnParam::default(),
    }) {
        Ok(Ok(_)) => {}
        other => panic!("Connect: {other:?}"),
    }
    let req = passive.wait_cm(within, |_, e| match e {
        CmEvent::ConnectRequest { id, .. } => Some(*id),
        _ => None,
    });
    let pqp = passive.create_qp(ppd, pcq, Some(req));
    match passive.c.call(Request::Accept {
        id: req,
        qp: pqp.handle,
        param: ConnParam::default(),
    }) {
        Ok(Ok(_)) => {}
        other => panic!("Accept: {other:?}"),
    }
    passive.wait_cm(within, |_, e| {
        matches!(e, CmEvent::Established { .. }).then_some(())
    });
    active.wait_cm(within, |_, e| {
        matches!(e, CmEvent::Established { .. }).then_some(())
    });
    (pqp, aqp)
}
