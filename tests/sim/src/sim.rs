//! The simulator: N nodes joined through [`Link`]s on one virtual clock.
//!
//! Two nodes are joined by one link each way; more are joined through a learning-free
//! switch that forwards by destination MAC (broadcast and unknown destinations flood).
//! The clock jumps to the next event (a frame arrival or a node's `poll_timeout`).
//! After every input a node gets, the simulator follows the engine's call order:
//! `poll_transmit` until `None`, then `poll_event` until `None`, then `poll_timeout`.

use std::collections::VecDeque;
use std::fmt;
use std::io::Write;

use iwarp_types::{Duration, Instant};

use crate::link::{Link, LinkConfig, LinkCounters};
use crate::rng::SimRng;
use iwarp_wire::pcap::{PcapWriter, TsResolution};

/// Largest frame a node may write (jumbo MTU + Ethernet header, rounded up).
pub const FRAME_BUF_LEN: usize = 9216;
/// Frames one node may emit after one input before the simulator calls it a livelock.
pub const TX_BURST_MAX: usize = 100_000;
/// Events kept per node before the oldest are dropped (and counted).
pub const EVENTS_MAX: usize = 65_536;

/// What the simulator needs of a node (implemented for the engine in [`crate::host`]).
pub trait Node {
    /// Events the node reports (`poll_event`).
    type Event: fmt::Debug;
    /// Destination MACs this node accepts (for the switch); the first is its own.
    fn mac(&self) -> [u8; 6];
    /// One inbound frame.
    fn handle_frame(&mut self, now: Instant, frame: &[u8]);
    /// The deadline of `poll_timeout` passed.
    fn handle_timeout(&mut self, now: Instant);
    /// One outbound frame written into `buf`, if any.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    /// Every frame due now (at most `max`), in order, each written into `buf` and handed
    /// to `out`; returns how many. A node with a cheaper way to send several frames than
    /// `poll_transmit` calls (an engine's transmit pass) overrides it.
    fn transmit_burst(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        max: usize,
        out: &mut dyn FnMut(&[u8]),
    ) -> usize {
        send_frames(buf, max, out, |buf| self.poll_transmit(now, buf))
    }
    /// Next event.
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// Next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Called after the events were drained (collect completions, etc.).
    fn housekeeping(&mut self, _now: Instant) {}
}

/// Writes frames with `next` into `buf` (at most `max`, until it returns `None`) and
/// hands each to `out`; returns how many.
pub fn send_frames(
    buf: &mut [u8],
    max: usize,
    out: &mut dyn FnMut(&[u8]),
    mut next: impl FnMut(&mut [u8]) -> Option<usize>,
) -> usize {
    let mut n = 0;
    while n < max {
        let Some(len) = next(buf) else {
            break;
        };
        out(&buf[..len.min(buf.len())]);
        n += 1;
    }
    n
}

/// Where the frames of a link go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    Node(usize),
    Switch { from: usize },
}

/// The run exceeded its virtual-time or step bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hang {
    /// Virtual time when the run gave up.
    pub now: Instant,
    /// Steps taken.
    pub steps: u64,
    /// The run's seed.
    pub seed: u64,
    /// Nothing was left to do (no frame in flight, no timer) while the condition was false.
    pub idle: bool,
}

impl fmt::Display for Hang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation {} at t={} ns after {} steps (IWARP_SEED=0x{:016x})",
            if self.idle { "went idle" } else { "hung" },
            self.now.0,
            self.steps,
            self.seed
        )
    }
}

/// Per-node tallies of what the links delivered to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeRx {
    /// Frames delivered.
    pub frames: u64,
    /// Frames delivered with bit flips in bytes a receiver checks.
    pub corrupted: u64,
    /// Frames delivered with bit flips only in bytes nobody checks.
    pub corrupted_harmless: u64,
}

/// Bounds of a run.
#[derive(Clone, Copy, Debug)]
pub struct SimLimits {
    /// Steps a `run_until` may take.
    pub steps_max: u64,
}

impl Default for SimLimits {
    fn default() -> SimLimits {
        SimLimits {
            steps_max: 20_000_000,
        }
    }
}

/// N nodes, their links, a virtual clock and the run's random stream.
pub struct Sim<N: Node> {
    now: Instant,
    rng: SimRng,
    nodes: Vec<N>,
    events: Vec<VecDeque<N::Event>>,
    events_dropped: Vec<u64>,
    rx: Vec<NodeRx>,
    /// `links[i]`: frames from node `i` (uplink); with a switch, `links[n + i]` goes to
    /// node `i` (downlink).
    links: Vec<Link>,
    dests: Vec<Dest>,
    capture: Option<PcapWriter<Box<dyn Write>>>,
    tx_buf: Vec<u8>,
    steps: u64,
    limits: SimLimits,
    /// The seed that replays this run (printed in failures); the simulator's own seed
    /// unless a harness derived it from another.
    replay_seed: u64,
    /// Print every frame delivered, every frame a link lost and every node timeout
    /// (`IWARP_SIM_TRACE=1`).
    trace: bool,
}

impl<N: Node> fmt::Debug for Sim<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("seed", &self.rng.seed())
            .field("nodes", &self.nodes.len())
            .field("steps", &self.steps)
            .finish()
    }
}

impl<N: Node> Sim<N> {
    /// Nodes joined pairwise (two nodes: a link each way, each with `link`) or through a
    /// switch (more nodes: an uplink and a downlink per node, each with `link`).
    pub fn new(nodes: Vec<N>, link: LinkConfig, seed: u64) -> Sim<N> {
        let n = nodes.len();
        assert!(n >= 1, "a simulation needs a node");
        let (links, dests) = if n <= 2 {
            let links = (0..n).map(|_| Link::new(link)).collect();
            let dests = (0..n).map(|i| Dest::Node((i + 1) % n)).collect();
            (links, dests)
        } else {
            let links = (0..2 * n).map(|_| Link::new(link)).collect();
            let dests = (0..n)
                .map(|i| Dest::Switch { from: i })
                .chain((0..n).map(Dest::Node))
                .collect();
            (links, dests)
        };
        Sim {
            now: Instant::ZERO,
            rng: SimRng::new(seed),
            events: (0..n).map(|_| VecDeque::new()).collect(),
            events_dropped: vec![0; n],
            rx: vec![NodeRx::default(); n],
            nodes,
            links,
            dests,
            capture: None,
            tx_buf: vec![0; FRAME_BUF_LEN],
            steps: 0,
            limits: SimLimits::default(),
            replay_seed: seed,
            trace: std::env::var("IWARP_SIM_TRACE").is_ok_and(|v| v == "1"),
        }
    }

    /// Changes the bounds of `run_until`.
    pub fn set_limits(&mut self, limits: SimLimits) {
        self.limits = limits;
    }

    /// Captures every frame delivered to a node into `out` (pcap).
    pub fn capture_to(&mut self, out: Box<dyn Write>) -> std::io::Result<()> {
        self.capture = Some(PcapWriter::new(out, TsResolution::Nanos)?);
        Ok(())
    }

    /// Stops capturing and flushes; returns the number of frames written.
    pub fn finish_capture(&mut self) -> std::io::Result<u64> {
        match self.capture.take() {
            Some(sink) => {
                let n = sink.frames();
                sink.finish()?;
                Ok(n)
            }
            None => Ok(0),
        }
    }

    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The seed that replays the run (`IWARP_SEED`).
    pub fn seed(&self) -> u64 {
        self.replay_seed
    }

    /// Sets the seed printed in failures, when the simulator's seed was derived from it.
    pub fn set_replay_seed(&mut self, seed: u64) {
        self.replay_seed = seed;
    }

    /// The run's random stream (test choices draw from it too, to stay reproducible).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if there is no node (never: construction asserts one).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &N {
        &self.nodes[i]
    }

    /// Node `i`, mutable. After a verb call, the next `step`/`run_until` polls it.
    pub fn node_mut(&mut self, i: usize) -> &mut N {
        &mut self.nodes[i]
    }

    /// Two distinct nodes, mutable.
    pub fn node_pair_mut(&mut self, a: usize, b: usize) -> (&mut N, &mut N) {
        assert_ne!(a, b);
        if a < b {
            let (l, r) = self.nodes.split_at_mut(b);
            (&mut l[a], &mut r[0])
        } else {
            let (l, r) = self.nodes.split_at_mut(a);
            (&mut r[0], &mut l[b])
        }
    }

    /// Events node `i` reported and nobody took yet.
    pub fn events(&self, i: usize) -> &VecDeque<N::Event> {
        &self.events[i]
    }

    /// Events node `i` reported and nobody took yet, mutable (to take them).
    pub fn events_mut(&mut self, i: usize) -> &mut VecDeque<N::Event> {
        &mut self.events[i]
    }

    /// Events of node `i` dropped because nobody took them.
    pub fn events_dropped(&self, i: usize) -> u64 {
        self.events_dropped[i]
    }

    /// Removes and returns the first event of node `i` matching `f`.
    pub fn take_event(
        &mut self,
        i: usize,
        mut f: impl FnMut(&N::Event) -> bool,
    ) -> Option<N::Event> {
        let pos = self.events[i].iter().position(&mut f)?;
        self.events[i].remove(pos)
    }

    /// What the links delivered to node `i`.
    pub fn node_rx(&self, i: usize) -> NodeRx {
        self.rx[i]
    }

    /// The link carrying frames out of node `i` (to the peer or to the switch).
    pub fn uplink(&mut self, i: usize) -> &mut Link {
        &mut self.links[i]
    }

    /// The link carrying frames into node `i`.
    pub fn downlink(&mut self, i: usize) -> &mut Link {
        let n = self.nodes.len();
        if n <= 2 {
            &mut self.links[(i + 1) % n]
        } else {
            &mut self.links[n + i]
        }
    }

    /// Sets the configuration of every link.
    pub fn set_all_links(&mut self, cfg: LinkConfig) {
        for l in &mut self.links {
            l.set_config(cfg);
        }
    }

    /// Sum of every link's counters.
    pub fn link_totals(&self) -> LinkCounters {
        let mut t = LinkCounters::default();
        for l in &self.links {
            let c = l.counters();
            t.offered += c.offered;
            t.delivered += c.delivered;
            t.delivered_bytes += c.delivered_bytes;
            t.lost += c.lost;
            t.duplicated += c.duplicated;
            t.corrupted += c.corrupted;
            t.corrupted_harmless += c.corrupted_harmless;
            t.reordered += c.reordered;
            t.swapped += c.swapped;
            t.mtu_dropped += c.mtu_dropped;
            t.queue_dropped += c.queue_dropped;
            t.in_flight_dropped += c.in_flight_dropped;
        }
        t
    }

    /// Polls every node (transmit, events, housekeeping), as after a verb call.
    pub fn flush(&mut self) {
        for i in 0..self.nodes.len() {
            self.flush_node(i);
        }
    }

    fn flush_node(&mut self, i: usize) {
        let now = self.now;
        let seed = self.seed();
        let (link, rng, trace) = (&mut self.links[i], &mut self.rng, self.trace);
        let sent = self.nodes[i].transmit_burst(
            now,
            &mut self.tx_buf,
            TX_BURST_MAX + 1,
            &mut |frame: &[u8]| {
                let lost_before = link.counters().lost;
                link.send(now, frame, rng);
                if trace && link.counters().lost != lost_before {
                    eprintln!(
                        "{:>14} {i} ->: {} LOST",
                        now.0,
                        crate::trace::describe_frame(frame)
                    );
                }
            },
        );
        assert!(
            sent <= TX_BURST_MAX,
            "node {i} transmits without end at t={} (seed 0x{seed:016x})",
            now.0,
        );
        while let Some(ev) = self.nodes[i].poll_event() {
            if self.events[i].len() >= EVENTS_MAX {
                self.events[i].pop_front();
                self.events_dropped[i] += 1;
            }
            self.events[i].push_back(ev);
        }
        self.nodes[i].housekeeping(now);
    }

    /// The next instant something happens (frame arrival or node deadline).
    pub fn next_event_time(&self) -> Option<Instant> {
        let links = self.links.iter().filter_map(Link::next_arrival);
        let timers = self.nodes.iter().filter_map(Node::poll_timeout);
        links.chain(timers).min()
    }

    /// Advances the clock to the next event and processes everything due then.
    /// Returns false when nothing is left to do (no frame in flight, no deadline).
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(t) = self.next_event_time() else {
            return false;
        };
        self.advance_to(t.max(self.now));
        true
    }

    fn advance_to(&mut self, t: Instant) {
        self.steps += 1;
        self.now = t;
        self.deliver_due();
        let now = self.now;
        for i in 0..self.nodes.len() {
            if self.nodes[i].poll_timeout().is_some_and(|d| d <= now) {
                if self.trace {
                    eprintln!("{:>14} {i}: timeout", now.0);
                }
                self.nodes[i].handle_timeout(now);
                self.flush_node(i);
            }
        }
    }

    fn deliver_due(&mut self) {
        let now = self.now;
        // Forwarding by a switch may put frames on zero-delay links that are due now:
        // repeat until no link has anything due (bounded by the frames in flight).
        let mut rounds = 0;
        while self
            .links
            .iter()
            .any(|l| l.next_arrival().is_some_and(|t| t <= now))
        {
            rounds += 1;
            assert!(rounds <= 1_000, "switch forwarding loop");
            for li in 0..self.links.len() {
                let mut due: Vec<(Instant, Vec<u8>, (bool, bool))> = Vec::new();
                self.links[li].deliver_due(now, |t, b, d| due.push((t, b.to_vec(), d)));
                for (at, frame, damage) in due {
                    match self.dests[li] {
                        Dest::Node(j) => self.deliver_to(j, at, &frame, damage),
                        Dest::Switch { from } => self.switch(from, &frame, damage),
                    }
                }
            }
        }
    }

    fn deliver_to(&mut self, j: usize, at: Instant, frame: &[u8], damage: (bool, bool)) {
        let rx = &mut self.rx[j];
        rx.frames += 1;
        if damage.0 {
            if damage.1 {
                rx.corrupted_harmless += 1;
            } else {
                rx.corrupted += 1;
            }
        }
        if self.trace {
            let mark = if damage.0 { " CORRUPTED" } else { "" };
            eprintln!(
                "{:>14} -> {j}: {}{mark}",
                self.now.0,
                crate::trace::describe_frame(frame)
            );
        }
        if let Some(cap) = self.capture.as_mut() {
            if let Err(e) = cap.write_frame(at, frame) {
                panic!("pcap write failed: {e}");
            }
        }
        self.nodes[j].handle_frame(self.now, frame);
        self.flush_node(j);
    }

    fn switch(&mut self, from: usize, frame: &[u8], damage: (bool, bool)) {
        let n = self.nodes.len();
        let Some(dst) = frame.get(0..6) else { return };
        let target = (0..n).find(|&j| self.nodes[j].mac() == dst);
        let now = self.now;
        match target {
            Some(j) if j != from => self.links[n + j].forward(now, frame, damage, &mut self.rng),
            Some(_) => {}
            None => {
                for j in (0..n).filter(|&j| j != from) {
                    self.links[n + j].forward(now, frame, damage, &mut self.rng);
                }
            }
        }
    }

    /// Steps until `cond` holds; fails if virtual time passes `now + max` or the step
    /// bound is exceeded (a hang), or nothing is left to do while `cond` is false.
    pub fn try_run_until(
        &mut self,
        max: Duration,
        mut cond: impl FnMut(&mut Self) -> bool,
    ) -> Result<(), Hang> {
        let deadline = self.now + max;
        let start_steps = self.steps;
        loop {
            self.flush();
            if cond(self) {
                return Ok(());
            }
            let hang = |s: &Self, idle| Hang {
                now: s.now,
                steps: s.steps,
                seed: s.seed(),
                idle,
            };
            if self.steps - start_steps >= self.limits.steps_max {
                return Err(hang(self, false));
            }
            match self.next_event_time() {
                None => return Err(hang(self, true)),
                Some(t) if t > deadline => {
                    self.now = deadline;
                    return Err(hang(self, false));
                }
                Some(t) => self.advance_to(t.max(self.now)),
            }
        }
    }

    /// [`Sim::try_run_until`], panicking (with the seed) on a hang.
    pub fn run_until(&mut self, max: Duration, cond: impl FnMut(&mut Self) -> bool) {
        if let Err(h) = self.try_run_until(max, cond) {
            panic!("{h}");
        }
    }

    /// Runs every event due within `d` of now, then sets the clock to `now + d`.
    pub fn run_for(&mut self, d: Duration) {
        let deadline = self.now + d;
        let start_steps = self.steps;
        loop {
            self.flush();
            assert!(
                self.steps - start_steps < self.limits.steps_max,
                "step bound exceeded (seed 0x{:016x})",
                self.seed()
            );
            match self.next_event_time() {
                Some(t) if t <= deadline => self.advance_to(t.max(self.now)),
                _ => break,
            }
        }
        self.now = self.now.max(deadline);
        self.flush();
    }

    /// Runs until nothing is in flight and no deadline is before `now + quiet`, bounded
    /// by `max` of virtual time.
    pub fn run_until_quiet(&mut self, quiet: Duration, max: Duration) -> Result<(), Hang> {
        let limit = self.now + max;
        self.try_run_until(max, |s| {
            let in_flight = s.links.iter().any(|l| l.in_flight() > 0);
            let soon = s
                .next_event_time()
                .is_some_and(|t| t <= s.now + quiet && t <= limit);
            !in_flight && !soon
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy node: answers every frame whose first payload byte is below 10 with the
    /// same frame, byte incremented, to the other MAC; sends one frame on a timer.
    struct Echo {
        mac: [u8; 6],
        peer: [u8; 6],
        out: VecDeque<Vec<u8>>,
        timer: Option<Instant>,
        seen: Vec<(Instant, u8)>,
        events: VecDeque<u8>,
    }

    impl Echo {
        fn new(id: u8, peer: u8) -> Echo {
            Echo {
                mac: [2, 0, 0, 0, 0, id],
                peer: [2, 0, 0, 0, 0, peer],
                out: VecDeque::new(),
                timer: None,
                seen: Vec::new(),
                events: VecDeque::new(),
            }
        }
        fn frame(&self, dst: [u8; 6], v: u8) -> Vec<u8> {
            let mut f = vec![0u8; 60];
            f[0..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&self.mac);
            f[14] = v;
            f
        }
    }

    impl Node for Echo {
        type Event = u8;
        fn mac(&self) -> [u8; 6] {
            self.mac
        }
        fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
            if frame[0..6] != self.mac && frame[0] & 1 == 0 {
                return;
            }
            let v = frame[14];
            self.seen.push((now, v));
            self.events.push_back(v);
            if v < 10 {
                let f = self.frame(self.peer, v + 1);
                self.out.push_back(f);
            }
        }
        fn handle_timeout(&mut self, _now: Instant) {
            self.timer = None;
            let f = self.frame(self.peer, 0);
            self.out.push_back(f);
        }
        fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
            let f = self.out.pop_front()?;
            buf[..f.len()].copy_from_slice(&f);
            Some(f.len())
        }
        fn poll_event(&mut self) -> Option<u8> {
            self.events.pop_front()
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.timer
        }
    }

    fn perfect() -> LinkConfig {
        LinkConfig {
            bandwidth_bps: 0,
            ..LinkConfig::perfect()
        }
    }

    #[test]
    fn ping_pong_on_virtual_time() {
        let mut a = Echo::new(1, 2);
        a.timer = Some(Instant(1_000));
        let mut sim = Sim::new(vec![a, Echo::new(2, 1)], perfect(), 1);
        sim.run_until(Duration::from_millis(1), |s| {
            s.node(1).seen.iter().any(|x| x.1 == 10)
        });
        // 0 goes out at 1 µs; each hop takes 5 µs; value 10 arrives at node 1 after 11 hops.
        assert_eq!(sim.node(0).seen.len(), 5);
        assert_eq!(sim.now(), Instant(1_000 + 11 * 5_000));
        assert_eq!(sim.node(1).seen.len(), 6);
        assert_eq!(sim.events(1).len(), 6);
        assert_eq!(sim.take_event(1, |v| *v == 4), Some(4));
        assert!(!sim.step(), "nothing left to do");
    }

    #[test]
    fn hang_reported_with_seed() {
        let mut a = Echo::new(1, 2);
        a.timer = Some(Instant(0));
        let mut sim = Sim::new(vec![a, Echo::new(2, 1)], perfect(), 0xabc);
        let err = sim
            .try_run_until(Duration::from_millis(1), |_| false)
            .unwrap_err();
        assert!(err.idle);
        assert_eq!(err.seed, 0xabc);
        assert!(err.to_string().contains("IWARP_SEED=0x0000000000000abc"));
        let mut a = Echo::new(1, 2);
        a.timer = Some(Instant(5_000_000));
        let mut sim = Sim::new(vec![a, Echo::new(2, 1)], perfect(), 1);
        let err = sim
            .try_run_until(Duration::from_millis(1), |_| false)
            .unwrap_err();
        assert!(!err.idle);
        assert_eq!(sim.now(), Instant(1_000_000));
    }

    #[test]
    fn switch_forwards_by_mac_and_floods_broadcast() {
        let mut a = Echo::new(1, 3);
        a.timer = Some(Instant(0));
        let mut sim = Sim::new(vec![a, Echo::new(2, 1), Echo::new(3, 1)], perfect(), 2);
        sim.run_until(Duration::from_millis(1), |s| {
            s.node(2).seen.iter().any(|x| x.1 == 10)
        });
        assert!(
            sim.node(1).seen.is_empty(),
            "unicast to node 2 never reaches node 1"
        );
        assert_eq!(sim.node(2).seen.len(), 6);
        // Two hops per delivery through the switch.
        assert_eq!(sim.now(), Instant(11 * 10_000));
        // A broadcast reaches everyone else.
        let mut b = Echo::new(1, 0xff);
        b.peer = [0xff; 6];
        b.timer = Some(Instant(0));
        let mut sim = Sim::new(vec![b, Echo::new(2, 9), Echo::new(3, 9)], perfect(), 2);
        sim.run_until(Duration::from_millis(1), |s| {
            !s.node(1).seen.is_empty() && !s.node(2).seen.is_empty()
        });
    }

    #[test]
    fn capture_and_corruption_tallies() {
        let mut a = Echo::new(1, 2);
        a.timer = Some(Instant(0));
        let cfg = LinkConfig {
            corrupt: 1.0,
            corrupt_bits_max: 1,
            ..perfect()
        };
        let mut sim = Sim::new(vec![a, Echo::new(2, 1)], cfg, 3);
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        sim.capture_to(Box::new(Shared(buf.clone()))).unwrap();
        sim.run_for(Duration::from_millis(1));
        let rx = sim.node_rx(1);
        assert!(rx.frames >= 1);
        assert_eq!(
            rx.corrupted + rx.corrupted_harmless,
            rx.frames,
            "every frame was corrupted"
        );
        let frames = sim.finish_capture().unwrap();
        let total: u64 = (0..2).map(|i| sim.node_rx(i).frames).sum();
        assert_eq!(frames, total);
        assert_eq!(buf.lock().unwrap().len() as u64, 24 + frames * (16 + 60));
    }

    #[test]
    fn same_seed_same_run() {
        let run = |seed| {
            let mut a = Echo::new(1, 2);
            a.timer = Some(Instant(0));
            let mut sim = Sim::new(vec![a, Echo::new(2, 1)], LinkConfig::lossy(0.3), seed);
            sim.run_for(Duration::from_millis(10));
            (
                sim.node(0).seen.clone(),
                sim.node(1).seen.clone(),
                sim.link_totals(),
            )
        };
        assert_eq!(run(5), run(5));
    }
}
