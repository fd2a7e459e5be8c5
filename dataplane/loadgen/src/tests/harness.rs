//! Two engines joined by an in-process frame shuttle (like `benches/src/pair.rs`),
//! with apps called through the `App` trait exactly as a dataplane core would: events
//! after every input, `poll` once per round, transmit until the burst is full.
//! Virtual time: each round advances the clock; an idle round jumps to the next
//! engine or app deadline.

use core::net::Ipv4Addr;

use iwarp_engine::{Engine, EngineConfig};
use iwarp_rdma::RnicLimits;
use iwarp_runtime::App;
use iwarp_testkit::engine::{bench_config, bench_ip, run_due_timers, Shuttle, ETH_HEADER_LEN};
use iwarp_types::{Duration, Instant, RegionId, VecMemory};

pub const IP_B: Ipv4Addr = bench_ip(2);

pub struct Host {
    pub eng: Engine,
    pub mem: VecMemory,
    pub region: RegionId,
}

#[derive(Clone, Copy, Debug)]
pub struct NetConfig {
    pub mtu: usize,
    pub max_conns: usize,
    pub max_qps: u32,
    pub arena_bytes: usize,
    pub burst: usize,
    pub round_ns: u64,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            mtu: 9000,
            max_conns: 128,
            max_qps: 256,
            arena_bytes: 8 << 20,
            burst: 64,
            round_ns: 1_000,
        }
    }
}

fn host(last: u8, cfg: &NetConfig) -> Host {
    let mut e = EngineConfig {
        max_conns: cfg.max_conns,
        backlog_max: 256,
        event_queue_len: 4096,
        ..bench_config(last, cfg.mtu, true)
    };
    e.rnic.limits = RnicLimits {
        max_qps: cfg.max_qps,
        ..RnicLimits::default()
    };
    let eng = Engine::try_new(e).expect("engine config");
    let mut mem = VecMemory::new();
    let region = mem.add_arena(cfg.arena_bytes);
    Host { eng, mem, region }
}

pub struct Net {
    pub a: Host,
    pub b: Host,
    pub now: Instant,
    cfg: NetConfig,
    shuttle: Shuttle,
    pub frames_moved: u64,
}

pub type Apps<'a> = [&'a mut dyn App<VecMemory>];

fn drain_events(now: Instant, h: &mut Host, apps: &mut Apps<'_>) {
    while let Some(ev) = h.eng.poll_event() {
        let mut claimed = false;
        for app in apps.iter_mut() {
            if app.on_event(now, &mut h.eng, &mut h.mem, &ev) {
                claimed = true;
                break;
            }
        }
        let _ = claimed;
    }
}

impl Net {
    pub fn new(cfg: NetConfig) -> Net {
        Net {
            a: host(1, &cfg),
            b: host(2, &cfg),
            now: Instant(1_000_000),
            shuttle: Shuttle::new(cfg.mtu + ETH_HEADER_LEN, cfg.burst),
            cfg,
            frames_moved: 0,
        }
    }

    fn burst(&mut self, a_to_b: bool, a_apps: &mut Apps<'_>, b_apps: &mut Apps<'_>) -> usize {
        let now = self.now;
        let (tx, rx) = if a_to_b {
            (&mut self.a, &mut self.b)
        } else {
            (&mut self.b, &mut self.a)
        };
        let (n, _) = self
            .shuttle
            .burst(now, (&mut tx.eng, &tx.mem), (&mut rx.eng, &mut rx.mem));
        if a_to_b {
            drain_events(now, rx, b_apps);
        } else {
            drain_events(now, rx, a_apps);
        }
        self.frames_moved += n as u64;
        n
    }

    fn timers(&mut self, a_apps: &mut Apps<'_>, b_apps: &mut Apps<'_>) {
        let now = self.now;
        for h in [&mut self.a, &mut self.b] {
            run_due_timers(now, &mut h.eng, &mut h.mem);
        }
        drain_events(now, &mut self.a, a_apps);
        drain_events(now, &mut self.b, b_apps);
    }

    /// One round; returns the frames moved.
    pub fn round(&mut self, a_apps: &mut Apps<'_>, b_apps: &mut Apps<'_>) -> usize {
        self.round_hooked(a_apps, b_apps, &mut |_, _| {})
    }

    /// One round; `hook` sees both hosts after the apps polled, before transmission.
    pub fn round_hooked(
        &mut self,
        a_apps: &mut Apps<'_>,
        b_apps: &mut Apps<'_>,
        hook: &mut dyn FnMut(&mut Host, &mut Host),
    ) -> usize {
        self.now += Duration::from_nanos(self.cfg.round_ns);
        self.timers(a_apps, b_apps);
        let now = self.now;
        for app in a_apps.iter_mut() {
            app.poll(now, &mut self.a.eng, &mut self.a.mem);
        }
        for app in b_apps.iter_mut() {
            app.poll(now, &mut self.b.eng, &mut self.b.mem);
        }
        // Verbs and CM calls made during poll may have queued events.
        drain_events(now, &mut self.a, a_apps);
        drain_events(now, &mut self.b, b_apps);
        hook(&mut self.a, &mut self.b);
        let moved = self.burst(true, a_apps, b_apps) + self.burst(false, a_apps, b_apps);
        if moved == 0 {
            let next = [self.a.eng.poll_timeout(), self.b.eng.poll_timeout()]
                .into_iter()
                .chain(a_apps.iter().map(|a| a.poll_timeout()))
                .chain(b_apps.iter().map(|a| a.poll_timeout()))
                .flatten()
                .min();
            if let Some(t) = next {
                if t > self.now {
                    self.now = t;
                }
            }
        }
        moved
    }

    /// Rounds until `done` or `max_rounds`; true if `done`.
    pub fn run_until(
        &mut self,
        a_apps: &mut Apps<'_>,
        b_apps: &mut Apps<'_>,
        max_rounds: u64,
        mut done: impl FnMut(&Net, &Apps<'_>, &Apps<'_>) -> bool,
    ) -> bool {
        for _ in 0..max_rounds {
            if done(self, a_apps, b_apps) {
                return true;
            }
            self.round(a_apps, b_apps);
        }
        done(self, a_apps, b_apps)
    }
}
