//! Two engines and their memories, connected by a lossless zero-delay wire.

use core::net::Ipv4Addr;

use iwarp_rdma::{mem::MrAttr, QpAttr};
use iwarp_types::{Access, CqId, Cqe, Duration, Instant, QpId, RegionId, Stag, VecMemory};

use iwarp_testkit::wire::{self, Settle, Timers};

use crate::{Engine, EngineConfig, Event};

/// Arena size of each node.
pub const ARENA_LEN: usize = 1 << 20;

/// One engine with a PD, a CQ, a QP and one MR over its whole arena.
pub struct Node {
    pub eng: Engine,
    pub mem: VecMemory,
    pub region: RegionId,
    pub cq: CqId,
    pub qp: QpId,
    pub mr: Stag,
    pub events: Vec<Event>,
    pub frames_out: Vec<Vec<u8>>,
}

pub fn config(last: u8) -> EngineConfig {
    EngineConfig {
        mac: [0x02, 0, 0, 0, 0, last],
        ipv4: Ipv4Addr::new(10, 0, 0, last),
        isn_secret: [last; 16],
        stag_seed: u64::from(last),
        ..EngineConfig::default()
    }
}

/// [`config`] with a congestion window that lets a 64 KiB Write go at once.
pub fn wide(last: u8) -> EngineConfig {
    let mut c = config(last);
    c.tcp.initial_cwnd_segments = 128;
    c
}

impl Node {
    pub fn with_config(cfg: EngineConfig) -> Node {
        let mut eng = Engine::new(cfg);
        let mut mem = VecMemory::new();
        let region = mem.add_arena(ARENA_LEN);
        let r = eng.rnic_mut();
        let pd = r.alloc_pd().unwrap();
        let (cq, _) = r.create_cq(256).unwrap();
        let (qp, _) = r
            .create_qp(&QpAttr {
                sq_depth: 64,
                rq_depth: 64,
                max_send_sge: 4,
                max_recv_sge: 4,
                ord: 8,
                ird: 8,
                inbound_read: true,
                inbound_write: true,
                ..QpAttr::new(pd, cq)
            })
            .unwrap();
        let access =
            Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mr = r
            .reg_mr(
                &MrAttr {
                    pd,
                    region,
                    region_offset: 0,
                    len: ARENA_LEN as u64,
                    va: 0,
                    zero_based: true,
                    access,
                    key: 0x11,
                    remote_access_flag: true,
                },
                Some(ARENA_LEN as u64),
            )
            .unwrap();
        Node {
            eng,
            mem,
            region,
            cq,
            qp,
            mr,
            events: Vec::new(),
            frames_out: Vec::new(),
        }
    }

    /// Drains transmit (into `frames_out`, in one transmit pass, as the daemon sends)
    /// and events.
    pub fn drain(&mut self, now: Instant) {
        let mut buf = [0u8; 1514];
        let mut guard = 0;
        let mut pass = self.eng.transmitter(now, &self.mem);
        while let Some(n) = pass.next(&mut buf) {
            self.frames_out.push(buf[..n].to_vec());
            guard += 1;
            assert!(guard < 100_000, "the transmit pass never ends");
        }
        drop(pass);
        while let Some(ev) = self.eng.poll_event() {
            self.events.push(ev);
        }
    }

    pub fn completions(&mut self) -> Vec<Cqe> {
        let mut out = [Cqe::EMPTY; 64];
        let n = self.eng.rnic_mut().poll_cq(self.cq, &mut out).unwrap();
        out[..n].to_vec()
    }

    pub fn fill(&mut self, offset: usize, data: &[u8]) {
        self.mem.arena_mut(self.region)[offset..offset + data.len()].copy_from_slice(data);
    }

    pub fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        &self.mem.arena(self.region)[offset..offset + len]
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        core::mem::take(&mut self.events)
    }
}

/// A wire impairment: sees (and may change) each frame; `false` drops it.
pub type Filter = Box<dyn FnMut(&mut Vec<u8>) -> bool>;

/// Two nodes and virtual time.
pub struct Pair {
    pub a: Node,
    pub b: Node,
    pub now: Instant,
    /// Impairment of frames from A to B.
    pub a_to_b: Filter,
    /// Impairment of frames from B to A.
    pub b_to_a: Filter,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with_configs(config(1), config(2))
    }

    /// Two nodes with these configurations (from [`config`], adjusted).
    pub fn with_configs(a: EngineConfig, b: EngineConfig) -> Pair {
        Pair {
            a: Node::with_config(a),
            b: Node::with_config(b),
            now: Instant::ZERO,
            a_to_b: Box::new(|_| true),
            b_to_a: Box::new(|_| true),
        }
    }

    /// Moves time to the earlier engine timer if it is due by `limit` and runs both
    /// engines' timers; false (time unchanged) if no timer is due by then.
    pub fn next_timer(&mut self, limit: Instant) -> bool {
        wire::next_timer(&mut self.a, &mut self.b, &mut self.now, limit)
    }

    /// Runs (advancing time when quiet) until `done` holds. Panics if it never does.
    pub fn run_until(&mut self, mut done: impl FnMut(&mut Pair) -> bool) {
        for _ in 0..1_000 {
            self.run(false);
            if done(self) {
                return;
            }
            if !self.next_timer(Instant(u64::MAX)) {
                break;
            }
        }
        self.run(false);
        assert!(done(self), "condition never reached");
    }

    /// Moves frames until both sides are quiet; advances time to timers only if
    /// `advance` and nothing is in flight. Bounded.
    pub fn run(&mut self, advance: bool) {
        let timers = if advance {
            Timers::Within(Duration::from_secs(600))
        } else {
            Timers::Never
        };
        let settle = Settle {
            max_rounds: 10_000,
            step: Duration::from_micros(10),
            timers,
        };
        let (a_to_b, b_to_a) = (&mut self.a_to_b, &mut self.b_to_a);
        let settled = wire::settle(
            &mut self.a,
            &mut self.b,
            &mut self.now,
            settle,
            |to_b, f| if to_b { a_to_b(f) } else { b_to_a(f) },
        );
        assert!(settled, "pair did not settle");
    }
}

// The wire sees a node as its engine and memory; transmitted frames pass through
// `frames_out` (see `Node::drain`).
iwarp_testkit::engine_station!(Node, eng, mem, frames_out);
