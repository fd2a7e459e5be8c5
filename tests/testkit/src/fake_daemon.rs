//! A fake iwarpd for the client libraries' tests (Rust and C): it answers the verbs
//! protocol on a socket with a real ring area, records every request, and lets the test
//! play the dataplane core: read SQ/RQ/SRQ slots, push completions into a CQ's per-core
//! rings, fire a CQ's notification, wake a channel, send events, die.
//!
//! Start it on one end of a socketpair ([`FakeDaemon::on_channel`]; the test makes the
//! client from the other) or at a socket path ([`FakeDaemon::listen`]; it serves the
//! first client that connects). Handles are numbered from 1 in request order; STags are
//! `handle << 8`; a QP lives on the last core; listening on port 1 fails with
//! `AddressInUse`; a port other than 0 does not exist.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use iwarp_shm_mem::{Backing, SharedMapping};
use iwarp_shm_ring::{
    decode_recv_wr, decode_send_wr, encode_cqe, AreaView, Consumer, DoorbellSet, Producer,
    RingHeap, RingLayout, CQE_SLOT_SIZE, CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET, RECV_SLOT_SIZE,
    RING_AREA_BYTES, SEND_SLOT_SIZE,
};
use iwarp_shm_socket::*;
use iwarp_types::{Cqe, RecvWr, SendWr};

/// The client id the fake daemon gives.
pub const CLIENT_ID: u32 = 42;

/// The CQE flag byte's offset in a slot, and the flag that tells the client a resized
/// CQ's ring moved (the client library's ABI).
const CQE_FLAGS_OFFSET: usize = 22;
const CQE_FLAG_RING_MOVED: u8 = 0x80;

struct Cq {
    /// Its notification line in the ring area.
    index: u32,
    /// One ring per core.
    rings: Vec<Producer>,
}

struct Qp {
    sq: Consumer,
    rq: Consumer,
    sq_bit: u32,
}

struct State {
    area: AreaView,
    heap: RingHeap,
    cores: u32,
    next: u32,
    cqs: HashMap<u32, Cq>,
    qps: HashMap<u32, Qp>,
    srqs: HashMap<u32, Consumer>,
    arenas: HashMap<u32, SharedMapping>,
    channels: Vec<OwnedFd>,
    requests: Vec<Request>,
    silent: bool,
}

/// The fake daemon. See the module documentation.
pub struct FakeDaemon {
    state: Arc<Mutex<State>>,
    chan: Arc<Mutex<Option<Arc<Channel>>>>,
    /// The socket path ([`FakeDaemon::listen`]); empty for a socketpair.
    pub socket: PathBuf,
}

/// The device the fake daemon describes.
pub fn device() -> DeviceAttr {
    DeviceAttr {
        vendor: "fake vendor".into(),
        daemon: "fake-iwarpd".into(),
        version: "0.0.1".into(),
        ports: 1,
        cores: 1,
        max_qp: 16,
        max_qp_wr: 1024,
        max_sge: 6,
        max_cq: 16,
        max_cqe: 4096,
        max_mr: 16,
        max_mr_size: 1 << 30,
        max_pd: 4,
        max_srq: 4,
        max_srq_wr: 1024,
        max_ird: 16,
        max_ord: 16,
        max_arena_bytes: 1 << 30,
        max_private_data: 512,
        memory_windows: true,
        srq: true,
    }
}

/// Its one port.
pub fn port() -> PortAttr {
    PortAttr {
        index: 0,
        ip: [198, 18, 0, 1],
        prefix_len: 24,
        mac: [2, 0, 0, 0, 0, 1],
        mtu: 1500,
        device: "net_memif0".into(),
        link_up: true,
        speed_mbps: 10_000,
        ..PortAttr::default()
    }
}

impl FakeDaemon {
    fn new(cores: u32, socket: PathBuf) -> (FakeDaemon, SharedMapping) {
        let area_map = SharedMapping::create("fake-area", RING_AREA_BYTES, Backing::Pages)
            .expect("ring area memfd");
        let area = AreaView::init(area_map.region(), CLIENT_ID, cores).expect("ring area");
        let state = State {
            heap: RingHeap::new(area.area_len() as u64),
            area,
            cores,
            next: 1,
            cqs: HashMap::new(),
            qps: HashMap::new(),
            srqs: HashMap::new(),
            arenas: HashMap::new(),
            channels: Vec::new(),
            requests: Vec::new(),
            silent: false,
        };
        let fake = FakeDaemon {
            state: Arc::new(Mutex::new(state)),
            chan: Arc::new(Mutex::new(None)),
            socket,
        };
        (fake, area_map)
    }

    /// Serves the daemon's end `server` of a socketpair, with `cores` cores.
    pub fn on_channel(server: Channel, cores: u32) -> FakeDaemon {
        let (fake, area) = FakeDaemon::new(cores, PathBuf::new());
        let ch = Arc::new(server);
        *fake.chan.lock().expect("lock") = Some(Arc::clone(&ch));
        let s = Arc::clone(&fake.state);
        std::thread::spawn(move || serve(&ch, &s, &area));
        fake
    }

    /// Listens at a fresh socket path (named after `tag`) and serves the first client
    /// that connects, with one core.
    pub fn listen(tag: &str) -> FakeDaemon {
        let socket =
            std::env::temp_dir().join(format!("iwv-fake-{}-{tag}.verbs", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let listener = Listener::bind(&socket, 4).expect("bind the fake daemon's socket");
        let (fake, area) = FakeDaemon::new(1, socket);
        let (s, c) = (Arc::clone(&fake.state), Arc::clone(&fake.chan));
        std::thread::spawn(move || {
            let Ok(Some(ch)) = listener.accept() else {
                return;
            };
            let ch = Arc::new(ch);
            *c.lock().expect("lock") = Some(Arc::clone(&ch));
            serve(&ch, &s, &area);
        });
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("the fake daemon's state")
    }

    fn channel(&self) -> Arc<Channel> {
        let ch = self.chan.lock().expect("lock").clone();
        ch.expect("no client connected yet")
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// The daemon dies: its end of the socket closes.
    pub fn kill(&self) {
        if let Some(ch) = self.chan.lock().expect("lock").as_ref() {
            ch.shutdown();
        }
    }

    /// While on, requests are read and never answered (a hung daemon).
    pub fn set_silent(&self, on: bool) {
        self.lock().silent = on;
    }

    /// Sends an event to the client.
    pub fn send_event(&self, ev: Event) {
        self.channel()
            .send(&ServerMsg::Event(ev), &[])
            .expect("send an event");
    }

    /// The ring area's daemon state word.
    pub fn daemon_state(&self) -> u64 {
        self.lock().area.daemon_state()
    }

    /// Sets the ring area's daemon state word.
    pub fn set_daemon_state(&self, s: u64) {
        self.lock().area.set_daemon_state(s)
    }

    /// Takes the doorbells rung on `core` into `set`; true if any was.
    pub fn take_doorbells(&self, core: u32, set: &mut DoorbellSet) -> bool {
        self.lock().area.doorbell(core).expect("core").take(set)
    }

    /// The doorbell bit of QP `qp`'s SQ (its RQ's is the next one).
    pub fn sq_bit(&self, qp: u32) -> u32 {
        self.lock().qps[&qp].sq_bit
    }

    /// The next SQ slot of `qp`, raw.
    pub fn pop_sq_slot(&self, qp: u32) -> Option<Vec<u8>> {
        let mut s = self.lock();
        let q = s.qps.get_mut(&qp).expect("qp");
        let mut b = vec![0u8; q.sq.layout().slot_size()];
        q.sq.pop(&mut b).expect("SQ ring").then_some(b)
    }

    /// The next SQ WR of `qp`, decoded.
    pub fn pop_sq(&self, qp: u32) -> Option<SendWr> {
        let b = self.pop_sq_slot(qp)?;
        let mut slot = [0u8; SEND_SLOT_SIZE];
        slot.copy_from_slice(&b[..SEND_SLOT_SIZE]);
        Some(decode_send_wr(&slot).expect("a valid send slot"))
    }

    /// The next RQ WR of `qp`.
    pub fn pop_rq(&self, qp: u32) -> Option<RecvWr> {
        let mut s = self.lock();
        let mut b = [0u8; RECV_SLOT_SIZE];
        let q = s.qps.get_mut(&qp).expect("qp");
        q.rq.pop(&mut b)
            .expect("RQ ring")
            .then(|| decode_recv_wr(&b).expect("a valid receive slot"))
    }

    /// The next WR of SRQ `srq`.
    pub fn pop_srq(&self, srq: u32) -> Option<RecvWr> {
        let mut s = self.lock();
        let mut b = [0u8; RECV_SLOT_SIZE];
        let q = s.srqs.get_mut(&srq).expect("srq");
        q.pop(&mut b)
            .expect("SRQ ring")
            .then(|| decode_recv_wr(&b).expect("a valid receive slot"))
    }

    /// Pushes a completion into CQ `cq`'s ring of `core`.
    pub fn push_cqe(&self, cq: u32, core: usize, c: &Cqe) {
        let mut s = self.lock();
        s.cqs.get_mut(&cq).expect("cq").rings[core]
            .push(&encode_cqe(c))
            .expect("CQ ring has room");
    }

    /// The arm state of CQ `cq`'s notification line.
    pub fn arm_state(&self, cq: u32) -> u64 {
        let s = self.lock();
        s.area
            .cq_control(s.cqs[&cq].index)
            .expect("cq control")
            .arm_state()
    }

    /// Fires CQ `cq`'s notification if armed (for a solicited completion or not); true
    /// if it fired.
    pub fn fire(&self, cq: u32, solicited: bool) -> bool {
        let s = self.lock();
        s.area
            .cq_control(s.cqs[&cq].index)
            .expect("cq control")
            .try_fire(solicited)
    }

    /// Wakes completion channel `i` (in creation order).
    pub fn wake_channel(&self, i: usize) {
        let s = self.lock();
        rustix::io::write(&s.channels[i], &1u64.to_ne_bytes()).expect("eventfd write");
    }

    /// What the service does after a completion: fires CQ `cq`'s notification and, if it
    /// fired, wakes channel `channel`.
    pub fn fire_and_wake(&self, cq: u32, channel: usize) -> bool {
        let fired = self.fire(cq, false);
        if fired {
            self.wake_channel(channel);
        }
        fired
    }

    /// `len` bytes of arena `arena` at `off`.
    pub fn arena_bytes(&self, arena: u32, off: usize, len: usize) -> Vec<u8> {
        let s = self.lock();
        let mut out = vec![0u8; len];
        s.arenas[&arena]
            .read(off as u64, &mut out)
            .expect("inside the arena");
        out
    }

    /// True once the client freed arena `arena`.
    pub fn arena_freed(&self, arena: u32) -> bool {
        self.requests()
            .iter()
            .any(|r| matches!(r, Request::FreeArena(a) if a.0 == arena))
    }

    /// The last memory registration asked for.
    pub fn last_mr_reg(&self) -> Option<MrReg> {
        self.requests().iter().rev().find_map(|r| match r {
            Request::RegMr(m) => Some(*m),
            _ => None,
        })
    }

    /// True once the client destroyed CM id `id`.
    pub fn saw_destroy_cm_id(&self, id: u32) -> bool {
        self.requests()
            .iter()
            .any(|r| matches!(r, Request::DestroyCmId(c) if c.0 == id))
    }

    /// True once the client said goodbye.
    pub fn saw_bye(&self) -> bool {
        self.requests().iter().any(|r| matches!(r, Request::Bye))
    }
}

fn ring(s: &mut State, layout: RingLayout, bit: u32) -> (RingRef, iwarp_shm_ring::Region) {
    let off = s
        .heap
        .alloc(layout.total_bytes() as u64)
        .expect("room in the ring area");
    let region = s.area.ring_region(off, layout).expect("ring region");
    let r = RingRef {
        offset: off,
        entries: layout.entries(),
        doorbell_bit: bit,
    };
    (r, region)
}

/// One completion ring per core.
fn cq_rings(s: &mut State, depth: u32) -> (Vec<RingRef>, Vec<Producer>) {
    let layout = RingLayout::completion_queue(depth.max(1).next_power_of_two()).expect("CQ layout");
    (0..s.cores)
        .map(|_| {
            let (r, region) = ring(s, layout, u32::MAX);
            (r, Producer::init(region, layout).expect("CQ ring"))
        })
        .unzip()
}

fn cq_control(index: u32) -> u64 {
    (CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES) as u64
}

fn answer(
    s: &mut State,
    h: u32,
    request: &Request,
    fds: Vec<OwnedFd>,
    out: &mut Vec<OwnedFd>,
) -> Result<Response, ErrorReply> {
    Ok(match request {
        Request::QueryDevice => Response::Device(device()),
        Request::QueryPort(0) => Response::Port(port()),
        Request::QueryPort(_) => {
            return Err(ErrorReply::new(ErrorCode::NoSuchObject, "no such port"))
        }
        Request::AllocPd => Response::Pd(PdHandle(h)),
        Request::CreateChannel => {
            s.channels.extend(fds);
            Response::Channel(ChannelHandle(h))
        }
        Request::CreateCq(c) => {
            let index = s.cqs.len() as u32;
            let (rings, producers) = cq_rings(s, c.depth);
            s.cqs.insert(
                h,
                Cq {
                    index,
                    rings: producers,
                },
            );
            Response::Cq(CqCreated {
                cq: CqHandle(h),
                depth: rings[0].entries,
                rings,
                control: cq_control(index),
            })
        }
        Request::ResizeCq { cq, depth } => {
            let (rings, producers) = cq_rings(s, *depth);
            let Some(old) = s.cqs.get_mut(&cq.0) else {
                return Err(ErrorReply::new(ErrorCode::NoSuchObject, "no such CQ"));
            };
            let mut moved = [0u8; CQE_SLOT_SIZE];
            moved[CQE_FLAGS_OFFSET] = CQE_FLAG_RING_MOVED;
            for (p, new) in old.rings.iter_mut().zip(producers) {
                p.push(&moved).expect("room for the move marker");
                *p = new;
            }
            Response::Cq(CqCreated {
                cq: *cq,
                depth: rings[0].entries,
                rings,
                control: cq_control(old.index),
            })
        }
        Request::CreateQp(q) => {
            let sl = RingLayout::send_queue(q.cap.max_send_wr.next_power_of_two()).expect("SQ");
            let (sq, sq_region) = ring(s, sl, 2 * h);
            let rl = RingLayout::recv_queue(q.cap.max_recv_wr.next_power_of_two()).expect("RQ");
            let (rq, rq_region) = ring(s, rl, 2 * h + 1);
            let qp = Qp {
                sq: Consumer::init(sq_region, sl).expect("SQ ring"),
                rq: Consumer::init(rq_region, rl).expect("RQ ring"),
                sq_bit: 2 * h,
            };
            s.qps.insert(h, qp);
            Response::Qp(QpCreated {
                qp: QpHandle(h),
                core: s.cores - 1,
                sq,
                rq: q.srq.is_none().then_some(rq),
                cap: q.cap,
            })
        }
        Request::QueryQp(qp) => Response::QpInfo(QpInfoReply {
            qp: *qp,
            state: QpStateValue::Rts,
            core: 0,
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 2,
                max_recv_sge: 2,
            },
            ord: 4,
            ird: 5,
            connected: true,
            terminate_sent: None,
            terminate_received: Some(TermInfo { code: 0x0102 }),
        }),
        Request::AllocArena { len, .. } => {
            let len = (*len as usize).next_multiple_of(4096);
            let m = SharedMapping::create("fake-arena", len, Backing::Pages).expect("arena");
            out.push(m.dup_fd().expect("dup"));
            s.arenas.insert(h, m);
            Response::Arena {
                arena: ArenaHandle(h),
                len: len as u64,
                hugepages: false,
            }
        }
        Request::ImportArena { len } => {
            let Some(fd) = fds.into_iter().next() else {
                return Err(ErrorReply::new(ErrorCode::InvalidArgument, "no fd"));
            };
            let m = SharedMapping::from_fd(fd, *len as usize)
                .map_err(|e| ErrorReply::new(ErrorCode::InvalidArgument, e.to_string()))?;
            s.arenas.insert(h, m);
            Response::Arena {
                arena: ArenaHandle(h),
                len: *len,
                hugepages: false,
            }
        }
        Request::CreateSrq(c) => {
            let layout = RingLayout::shared_recv_queue(c.max_wr.next_power_of_two()).expect("SRQ");
            let (ring_ref, region) = ring(s, layout, 2 * h);
            s.srqs
                .insert(h, Consumer::init(region, layout).expect("SRQ ring"));
            Response::Srq(SrqCreated {
                srq: SrqHandle(h),
                core: 0,
                doorbell_bit: 2 * h,
                ring: ring_ref,
                max_wr: ring_ref.entries,
                max_sge: c.max_sge,
            })
        }
        Request::QuerySrq(_) | Request::ModifySrq { .. } => Response::SrqInfo(SrqInfo {
            max_wr: 16,
            max_sge: 2,
            limit: 3,
            armed: true,
        }),
        Request::RegMr(_) | Request::AllocMr { .. } | Request::AllocMw { .. } => {
            Response::Stag(StagValue(h << 8))
        }
        Request::ReregMr { stag, .. } => Response::Stag(StagValue(stag.0 + 1)),
        Request::CreateCmId => Response::CmId(CmIdHandle(h)),
        Request::Listen { addr, .. } if addr.port == 1 => {
            return Err(ErrorReply::new(ErrorCode::AddressInUse, "port 1 is taken"))
        }
        _ => Response::Ok,
    })
}

fn serve(chan: &Channel, state: &Mutex<State>, area: &SharedMapping) {
    let Ok((hello, _)) = chan.recv::<ClientMsg>() else {
        return;
    };
    assert!(
        matches!(
            hello.request,
            Request::Hello {
                version: PROTOCOL_VERSION,
                ..
            }
        ),
        "the client opens with Hello at our version"
    );
    let welcome = Welcome {
        version: PROTOCOL_VERSION,
        client_id: CLIENT_ID,
        ring_area_len: RING_AREA_BYTES as u64,
        doorbells: vec![],
        doorbell_bits: iwarp_shm_ring::DOORBELL_BITS,
        device: device(),
        ports: vec![port()],
    };
    let reply = ServerMsg::Reply {
        seq: hello.seq,
        result: Ok(Response::Welcome(welcome)),
    };
    let fd = area.dup_fd().expect("dup the ring area");
    if chan.send(&reply, &[fd.as_fd()]).is_err() {
        return;
    }
    while let Ok((msg, fds)) = chan.recv::<ClientMsg>() {
        let mut s = state.lock().expect("the fake daemon's state");
        if s.silent {
            continue;
        }
        let h = s.next;
        s.next += 1;
        let mut out = Vec::new();
        let result = answer(&mut s, h, &msg.request, fds, &mut out);
        s.requests.push(msg.request);
        drop(s);
        let fds: Vec<_> = out.iter().map(|f| f.as_fd()).collect();
        let _ = chan.send(
            &ServerMsg::Reply {
                seq: msg.seq,
                result,
            },
            &fds,
        );
    }
}
