//! The iteration as one batch of memory accesses: `run_once` opens a batch before its
//! first access to registered memory and closes it before it returns (shared memory
//! announces the core as its reader once per batch instead of around every copy).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use iwarp_engine::{Engine, Event};
use iwarp_types::{Instant, Memory, MemoryFault, RegionId, VecMemory};

use crate::control::control_channel;
use crate::core::{Core, CoreConfig, CoreLinks, PortSetup};
use crate::forward::ForwardMesh;
use crate::memlink::{MemLink, MemLinkConfig};
use crate::steer::{Steering, SYMMETRIC_RSS_KEY};
use crate::testutil::{engine_config, TestbedConfig};
use crate::App;

/// What the probe saw.
#[derive(Debug, Default)]
struct Seen {
    begun: AtomicU64,
    ended: AtomicU64,
    inside: AtomicU64,
    outside: AtomicU64,
}

/// A memory that records whether each access came inside a batch.
struct BatchProbe {
    mem: VecMemory,
    open: bool,
    seen: Arc<Seen>,
}

impl BatchProbe {
    fn access(&self) {
        let c = if self.open {
            &self.seen.inside
        } else {
            &self.seen.outside
        };
        c.fetch_add(1, Relaxed);
    }
}

impl Memory for BatchProbe {
    fn region_len(&self, region: RegionId) -> Option<u64> {
        self.access();
        self.mem.region_len(region)
    }
    fn read(&self, region: RegionId, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault> {
        self.access();
        self.mem.read(region, offset, out)
    }
    fn write(&mut self, region: RegionId, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.access();
        self.mem.write(region, offset, data)
    }
    fn begin_batch(&mut self) {
        assert!(!self.open, "a batch begun inside a batch");
        self.open = true;
        self.seen.begun.fetch_add(1, Relaxed);
    }
    fn end_batch(&mut self) {
        assert!(self.open, "a batch ended that was not begun");
        self.open = false;
        self.seen.ended.fetch_add(1, Relaxed);
    }
}

/// An app that copies 8 bytes of the arena on every poll.
struct Toucher;

impl<M: Memory> App<M> for Toucher {
    fn on_event(&mut self, _: Instant, _: &mut Engine, _: &mut M, _: &Event) -> bool {
        false
    }
    fn poll(&mut self, _: Instant, _: &mut Engine, mem: &mut M) {
        let mut b = [0u8; 8];
        mem.read(RegionId(0), 0, &mut b).unwrap();
        mem.write(RegionId(0), 8, &b).unwrap();
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn shutdown(&mut self, _: Instant, _: &mut Engine, _: &mut M) {}
    fn is_idle(&self) -> bool {
        true
    }
}

#[test]
fn each_iteration_is_one_batch_of_memory_accesses() {
    let seen = Arc::new(Seen::default());
    let mut mem = VecMemory::new();
    mem.add_arena(4096);
    let probe = BatchProbe {
        mem,
        open: false,
        seen: seen.clone(),
    };
    let tb = TestbedConfig::default();
    let (io, _peer) = MemLink::pair(&MemLinkConfig::default()).unwrap();
    let steering = Steering::new(&SYMMETRIC_RSS_KEY, 128, vec![0]).unwrap();
    let port = PortSetup {
        port_id: 0,
        engine: engine_config([198, 18, 0, 1].into(), [2, 0, 0, 0, 0, 1], 0, &tb),
        io: Box::new(io),
        steering,
    };
    let (_handle, control) = control_channel(0, 4, 64);
    let links = CoreLinks {
        control,
        forward: ForwardMesh::new(1, 4, 2048).ends(0),
        capture: None,
        stats: None,
    };
    let mut core = Core::new(CoreConfig::default(), probe, vec![port], links).unwrap();
    let started = core.start_app(0, Box::new(Toucher));
    assert!(started.is_ok());
    let mut now = Instant::ZERO;
    for _ in 0..10 {
        now += iwarp_types::Duration::from_micros(10);
        core.run_once(now);
        assert!(!core.mem().open, "a batch left open after run_once");
    }
    assert_eq!(seen.begun.load(Relaxed), 10);
    assert_eq!(seen.ended.load(Relaxed), 10);
    assert_eq!(seen.inside.load(Relaxed), 20, "every access inside a batch");
    assert_eq!(seen.outside.load(Relaxed), 0);
}
