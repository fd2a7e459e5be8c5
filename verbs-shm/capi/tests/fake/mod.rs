//! A fake iwarpd for the C API's tests: answers the protocol on a unix socket with a real
//! ring area (one core), records every request, and lets the test play the dataplane core
//! (read SQ/RQ slots, push completions, fire notifications, send events).

#![allow(dead_code)]

pub mod util;

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use iwarp_shm_mem::{Backing, SharedMapping};
use iwarp_shm_ring::{
    decode_recv_wr, decode_send_wr, encode_cqe, AreaView, Consumer, Producer, RingHeap, RingLayout,
    CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET, RECV_SLOT_SIZE, RING_AREA_BYTES, SEND_SLOT_SIZE,
};
use iwarp_shm_socket::*;
use iwarp_types::{Cqe, RecvWr, SendWr};

struct Qp {
    sq: Consumer,
    rq: Consumer,
}

struct State {
    area: AreaView,
    heap: RingHeap,
    next: u32,
    cqs: HashMap<u32, (u32, Producer)>,
    qps: HashMap<u32, Qp>,
    srqs: HashMap<u32, Consumer>,
    arenas: HashMap<u32, SharedMapping>,
    channels: Vec<OwnedFd>,
    requests: Vec<Request>,
}

pub struct FakeDaemon {
    state: Arc<Mutex<State>>,
    chan: Arc<Mutex<Option<Arc<Channel>>>>,
    pub socket: PathBuf,
}

fn device() -> DeviceAttr {
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

fn port() -> PortAttr {
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
    /// Listens at a fresh socket path; serves the first client that connects.
    pub fn start(tag: &str) -> FakeDaemon {
        let socket =
            std::env::temp_dir().join(format!("iwv-fake-{}-{tag}.verbs", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let listener = Listener::bind(&socket, 4).unwrap();
        let area_map = SharedMapping::create("fake-area", RING_AREA_BYTES, Backing::Pages).unwrap();
        let area = AreaView::init(area_map.region(), 7, 1).unwrap();
        let state = Arc::new(Mutex::new(State {
            heap: RingHeap::new(area.area_len() as u64),
            area,
            next: 1,
            cqs: HashMap::new(),
            qps: HashMap::new(),
            srqs: HashMap::new(),
            arenas: HashMap::new(),
            channels: Vec::new(),
            requests: Vec::new(),
        }));
        let chan = Arc::new(Mutex::new(None));
        let (s, c) = (state.clone(), chan.clone());
        std::thread::spawn(move || {
            let ch = Arc::new(listener.accept().unwrap().unwrap());
            *c.lock().unwrap() = Some(ch.clone());
            serve(&ch, &s, area_map);
        });
        FakeDaemon {
            state,
            chan,
            socket,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    pub fn send_event(&self, ev: Event) {
        let ch = self.chan.lock().unwrap().clone().unwrap();
        ch.send(&ServerMsg::Event(ev), &[]).unwrap();
    }

    /// The daemon dies: its socket closes.
    pub fn kill(&self) {
        if let Some(ch) = self.chan.lock().unwrap().as_ref() {
            ch.shutdown();
        }
    }

    pub fn pop_sq(&self, qp: u32) -> Option<SendWr> {
        let mut s = self.lock();
        let mut b = [0u8; SEND_SLOT_SIZE];
        let q = s.qps.get_mut(&qp).unwrap();
        q.sq.pop(&mut b)
            .unwrap()
            .then(|| decode_send_wr(&b).unwrap())
    }

    pub fn pop_rq(&self, qp: u32) -> Option<RecvWr> {
        let mut s = self.lock();
        let mut b = [0u8; RECV_SLOT_SIZE];
        let q = s.qps.get_mut(&qp).unwrap();
        q.rq.pop(&mut b)
            .unwrap()
            .then(|| decode_recv_wr(&b).unwrap())
    }

    pub fn pop_srq(&self, srq: u32) -> Option<RecvWr> {
        let mut s = self.lock();
        let mut b = [0u8; RECV_SLOT_SIZE];
        let q = s.srqs.get_mut(&srq).unwrap();
        q.pop(&mut b).unwrap().then(|| decode_recv_wr(&b).unwrap())
    }

    pub fn push_cqe(&self, cq: u32, c: &Cqe) {
        let mut s = self.lock();
        s.cqs.get_mut(&cq).unwrap().1.push(&encode_cqe(c)).unwrap();
    }

    /// What the service does after pushing a CQE: fire the armed notification and wake
    /// the CQ's channel (the only channel of the test).
    pub fn fire(&self, cq: u32) -> bool {
        let s = self.lock();
        let fired = s.area.cq_control(s.cqs[&cq].0).unwrap().try_fire(false);
        if fired {
            rustix::io::write(&s.channels[0], &1u64.to_ne_bytes()).unwrap();
        }
        fired
    }

    pub fn arena_bytes(&self, arena: u32, off: usize, len: usize) -> Vec<u8> {
        let s = self.lock();
        let m = &s.arenas[&arena];
        assert!(off + len <= m.len());
        // SAFETY: inside the mapping, which lives while the state holds it.
        unsafe { std::slice::from_raw_parts(m.as_ptr().add(off), len).to_vec() }
    }
}

fn ring(s: &mut State, layout: RingLayout, bit: u32) -> (RingRef, iwarp_shm_ring::Region) {
    let off = s.heap.alloc(layout.total_bytes() as u64).unwrap();
    let region = s.area.ring_region(off, layout).unwrap();
    let r = RingRef {
        offset: off,
        entries: layout.entries(),
        doorbell_bit: bit,
    };
    (r, region)
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
            let layout = RingLayout::completion_queue(c.depth.max(1).next_power_of_two()).unwrap();
            let (r, region) = ring(s, layout, u32::MAX);
            let index = s.cqs.len() as u32;
            s.cqs
                .insert(h, (index, Producer::init(region, layout).unwrap()));
            Response::Cq(CqCreated {
                cq: CqHandle(h),
                depth: r.entries,
                rings: vec![r],
                control: (CQ_CONTROL_OFFSET + index as usize * CQ_CONTROL_BYTES) as u64,
            })
        }
        Request::CreateQp(q) => {
            let sl = RingLayout::send_queue(q.cap.max_send_wr.next_power_of_two()).unwrap();
            let (sq, sq_region) = ring(s, sl, 2 * h);
            let rl = RingLayout::recv_queue(q.cap.max_recv_wr.next_power_of_two()).unwrap();
            let (rq, rq_region) = ring(s, rl, 2 * h + 1);
            let qp = Qp {
                sq: Consumer::init(sq_region, sl).unwrap(),
                rq: Consumer::init(rq_region, rl).unwrap(),
            };
            s.qps.insert(h, qp);
            Response::Qp(QpCreated {
                qp: QpHandle(h),
                core: 0,
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
            let m = SharedMapping::create("fake-arena", len, Backing::Pages).unwrap();
            out.push(m.dup_fd().unwrap());
            s.arenas.insert(h, m);
            Response::Arena {
                arena: ArenaHandle(h),
                len: len as u64,
                hugepages: false,
            }
        }
        Request::ImportArena { len } => {
            let fd = fds.into_iter().next().unwrap();
            let m = SharedMapping::from_fd(fd, *len as usize).unwrap();
            s.arenas.insert(h, m);
            Response::Arena {
                arena: ArenaHandle(h),
                len: *len,
                hugepages: false,
            }
        }
        Request::CreateSrq(c) => {
            let layout = RingLayout::shared_recv_queue(c.max_wr.next_power_of_two()).unwrap();
            let (ring_ref, region) = ring(s, layout, 2 * h);
            s.srqs.insert(h, Consumer::init(region, layout).unwrap());
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

fn serve(chan: &Channel, state: &Mutex<State>, area: SharedMapping) {
    let (hello, _): (ClientMsg, _) = chan.recv().unwrap();
    let welcome = Welcome {
        version: PROTOCOL_VERSION,
        client_id: 7,
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
    let fd = area.dup_fd().unwrap();
    chan.send(&reply, &[fd.as_fd()]).unwrap();
    while let Ok((msg, fds)) = chan.recv::<ClientMsg>() {
        let mut s = state.lock().unwrap();
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
