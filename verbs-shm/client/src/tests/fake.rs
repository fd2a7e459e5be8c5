//! A fake iwarpd: answers the protocol on a socketpair with a real ring area, plays the
//! dataplane core for the tests.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use iwarp_shm_ring::{
    encode_cqe, AreaView, Consumer, DoorbellSet, Producer, RingHeap, RingLayout, CQE_SLOT_SIZE,
    CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET, RING_AREA_BYTES,
};
use iwarp_shm_socket::*;
use iwarp_types::Cqe;

use crate::Context;
use iwarp_shm_mem::{Backing, SharedMapping};

pub(crate) const CLIENT_ID: u32 = 42;

struct Cq {
    index: u32,
    rings: Vec<Producer>,
}

struct Qp {
    sq: Consumer,
    bit: u32,
}

struct State {
    area: AreaView,
    heap: RingHeap,
    next: u32,
    cqs: HashMap<u32, Cq>,
    qps: HashMap<u32, Qp>,
    arenas: HashMap<u32, SharedMapping>,
    freed_arenas: HashSet<u32>,
    channels: Vec<OwnedFd>,
    mr_regs: Vec<MrReg>,
    destroyed_cm_ids: HashSet<u32>,
    silent: bool,
    bye: bool,
}

pub(crate) struct FakeDaemon {
    state: Arc<Mutex<State>>,
    chan: Arc<Channel>,
}

fn memfd(len: usize) -> (OwnedFd, SharedMapping) {
    let m = SharedMapping::create("fake", len, Backing::Pages).unwrap();
    (m.dup_fd().unwrap(), m)
}

fn device() -> DeviceAttr {
    DeviceAttr {
        vendor: "fake".into(),
        daemon: "fake".into(),
        version: "0".into(),
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

impl FakeDaemon {
    /// A fake daemon with `cores` cores and a context connected to it.
    pub(crate) fn start(cores: u32) -> (FakeDaemon, Context) {
        let (client, server) = Channel::pair().unwrap();
        let (area_fd, area_map) = memfd(RING_AREA_BYTES);
        let area = AreaView::init(area_map.region(), CLIENT_ID, cores).unwrap();
        let state = Arc::new(Mutex::new(State {
            heap: RingHeap::new(area.area_len() as u64),
            area,
            next: 1,
            cqs: HashMap::new(),
            qps: HashMap::new(),
            arenas: HashMap::new(),
            freed_arenas: HashSet::new(),
            channels: Vec::new(),
            mr_regs: Vec::new(),
            destroyed_cm_ids: HashSet::new(),
            silent: false,
            bye: false,
        }));
        let chan = Arc::new(server);
        let (s, c) = (state.clone(), chan.clone());
        std::thread::spawn(move || serve(&c, &s, area_fd, cores));
        let ctx = Context::from_channel(client).unwrap();
        (FakeDaemon { state, chan }, ctx)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Closes the daemon's end: the daemon was killed.
    pub(crate) fn kill(&self) {
        self.chan.shutdown();
    }

    pub(crate) fn set_silent(&self, on: bool) {
        self.lock().silent = on;
    }

    pub(crate) fn send_event(&self, ev: Event) {
        self.chan.send(&ServerMsg::Event(ev), &[]).unwrap();
    }

    pub(crate) fn saw_bye(&self) -> bool {
        self.lock().bye
    }

    pub(crate) fn daemon_state(&self) -> u64 {
        self.lock().area.daemon_state()
    }

    pub(crate) fn set_daemon_state(&self, s: u64) {
        self.lock().area.set_daemon_state(s)
    }

    pub(crate) fn take_doorbells(&self, core: u32, set: &mut DoorbellSet) -> bool {
        self.lock().area.doorbell(core).unwrap().take(set)
    }

    pub(crate) fn sq_bit(&self, qp: u32) -> u32 {
        self.lock().qps[&qp].bit
    }

    pub(crate) fn pop_sq(&self, qp: u32) -> Option<Vec<u8>> {
        let mut s = self.lock();
        let q = s.qps.get_mut(&qp).unwrap();
        let mut b = vec![0u8; q.sq.layout().slot_size()];
        q.sq.pop(&mut b).unwrap().then_some(b)
    }

    pub(crate) fn push_cqe(&self, cq: CqHandle, core: usize, c: &Cqe) {
        let mut s = self.lock();
        s.cqs.get_mut(&cq.0).unwrap().rings[core]
            .push(&encode_cqe(c))
            .unwrap();
    }

    pub(crate) fn arm_state(&self, cq: CqHandle) -> u64 {
        let s = self.lock();
        s.area.cq_control(s.cqs[&cq.0].index).unwrap().arm_state()
    }

    pub(crate) fn fire(&self, cq: CqHandle, solicited: bool) -> bool {
        let s = self.lock();
        s.area
            .cq_control(s.cqs[&cq.0].index)
            .unwrap()
            .try_fire(solicited)
    }

    pub(crate) fn wake_channel(&self, i: usize) {
        let s = self.lock();
        rustix::io::write(&s.channels[i], &1u64.to_ne_bytes()).unwrap();
    }

    pub(crate) fn arena_byte(&self, a: ArenaHandle, off: usize) -> u8 {
        let s = self.lock();
        let m = &s.arenas[&a.0];
        assert!(off < m.len());
        // SAFETY: inside the mapping.
        unsafe { m.as_ptr().add(off).read_volatile() }
    }

    pub(crate) fn arena_freed(&self, a: ArenaHandle) -> bool {
        self.lock().freed_arenas.contains(&a.0)
    }

    pub(crate) fn last_mr_reg(&self) -> Option<MrReg> {
        self.lock().mr_regs.last().copied()
    }

    pub(crate) fn saw_destroy_cm_id(&self, id: CmIdHandle) -> bool {
        self.lock().destroyed_cm_ids.contains(&id.0)
    }
}

fn ring(s: &mut State, layout: RingLayout) -> (RingRef, iwarp_shm_ring::Region) {
    let off = s.heap.alloc(layout.total_bytes() as u64).unwrap();
    let region = s.area.ring_region(off, layout).unwrap();
    (
        RingRef {
            offset: off,
            entries: layout.entries(),
            doorbell_bit: u32::MAX,
        },
        region,
    )
}

fn cq_rings(s: &mut State, cores: u32, depth: u32) -> (Vec<RingRef>, Vec<Producer>) {
    let entries = depth.max(1).next_power_of_two();
    (0..cores)
        .map(|_| {
            let layout = RingLayout::completion_queue(entries).unwrap();
            let (r, region) = ring(s, layout);
            (r, Producer::init(region, layout).unwrap())
        })
        .unzip()
}

fn serve(chan: &Channel, state: &Mutex<State>, area_fd: OwnedFd, cores: u32) {
    let (hello, _): (ClientMsg, _) = chan.recv().unwrap();
    assert!(matches!(
        hello.request,
        Request::Hello {
            version: PROTOCOL_VERSION,
            ..
        }
    ));
    let welcome = Welcome {
        version: PROTOCOL_VERSION,
        client_id: CLIENT_ID,
        ring_area_len: RING_AREA_BYTES as u64,
        doorbells: vec![],
        doorbell_bits: iwarp_shm_ring::DOORBELL_BITS,
        device: device(),
        ports: vec![],
    };
    let reply = ServerMsg::Reply {
        seq: hello.seq,
        result: Ok(Response::Welcome(welcome)),
    };
    chan.send(&reply, &[area_fd.as_fd()]).unwrap();
    drop(area_fd);
    while let Ok((msg, fds)) = chan.recv::<ClientMsg>() {
        let mut s = state.lock().unwrap();
        if s.silent {
            continue;
        }
        let mut out_fds: Vec<OwnedFd> = Vec::new();
        let h = s.next;
        s.next += 1;
        let result = match msg.request {
            Request::QueryDevice => Ok(Response::Device(device())),
            Request::AllocPd => Ok(Response::Pd(PdHandle(h))),
            Request::CreateChannel => {
                s.channels.extend(fds);
                Ok(Response::Channel(ChannelHandle(h)))
            }
            Request::CreateCq(c) => {
                let index = h;
                let (rings, producers) = cq_rings(&mut s, cores, c.depth);
                s.cqs.insert(
                    h,
                    Cq {
                        index,
                        rings: producers,
                    },
                );
                Ok(Response::Cq(CqCreated {
                    cq: CqHandle(h),
                    depth: rings[0].entries,
                    rings,
                    control: (CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES) as u64,
                }))
            }
            Request::ResizeCq { cq, depth } => {
                let (rings, producers) = cq_rings(&mut s, cores, depth);
                let old = s.cqs.get_mut(&cq.0).unwrap();
                let mut moved = [0u8; CQE_SLOT_SIZE];
                moved[22] = crate::CQE_FLAG_RING_MOVED;
                for (p, new) in old.rings.iter_mut().zip(producers) {
                    p.push(&moved).unwrap();
                    *p = new;
                }
                Ok(Response::Cq(CqCreated {
                    cq,
                    depth: rings[0].entries,
                    rings,
                    control: (CQ_CONTROL_OFFSET + old.index as usize * CQ_CONTROL_BYTES) as u64,
                }))
            }
            Request::CreateQp(q) => {
                let core = cores - 1;
                let bit = 2 * h;
                let sl = RingLayout::send_queue(q.cap.max_send_wr.next_power_of_two()).unwrap();
                let (mut sq, sq_region) = ring(&mut s, sl);
                sq.doorbell_bit = bit;
                let sq_consumer = Consumer::init(sq_region, sl).unwrap();
                let rl = RingLayout::recv_queue(q.cap.max_recv_wr.next_power_of_two()).unwrap();
                let (mut rq, rq_region) = ring(&mut s, rl);
                rq.doorbell_bit = bit + 1;
                Consumer::init(rq_region, rl).unwrap();
                s.qps.insert(
                    h,
                    Qp {
                        sq: sq_consumer,
                        bit,
                    },
                );
                Ok(Response::Qp(QpCreated {
                    qp: QpHandle(h),
                    core,
                    sq,
                    rq: q.srq.is_none().then_some(rq),
                    cap: q.cap,
                }))
            }
            Request::AllocArena { len, .. } => {
                let len = (len as usize).next_multiple_of(4096);
                let (fd, m) = memfd(len);
                s.arenas.insert(h, m);
                out_fds.push(fd);
                Ok(Response::Arena {
                    arena: ArenaHandle(h),
                    len: len as u64,
                    hugepages: false,
                })
            }
            Request::ImportArena { len } => {
                let fd = fds.into_iter().next().unwrap();
                s.arenas
                    .insert(h, SharedMapping::from_fd(fd, len as usize).unwrap());
                Ok(Response::Arena {
                    arena: ArenaHandle(h),
                    len,
                    hugepages: false,
                })
            }
            Request::FreeArena(a) => {
                s.freed_arenas.insert(a.0);
                Ok(Response::Ok)
            }
            Request::RegMr(r) => {
                s.mr_regs.push(r);
                Ok(Response::Stag(StagValue(h << 8)))
            }
            Request::AllocMr { .. } | Request::AllocMw { .. } => {
                Ok(Response::Stag(StagValue(h << 8)))
            }
            Request::CreateCmId => Ok(Response::CmId(CmIdHandle(h))),
            Request::DestroyCmId(id) => {
                s.destroyed_cm_ids.insert(id.0);
                Ok(Response::Ok)
            }
            Request::Bye => {
                s.bye = true;
                Ok(Response::Ok)
            }
            _ => Ok(Response::Ok),
        };
        drop(s);
        let fds: Vec<_> = out_fds.iter().map(|f| f.as_fd()).collect();
        let _ = chan.send(
            &ServerMsg::Reply {
                seq: msg.seq,
                result,
            },
            &fds,
        );
    }
}
