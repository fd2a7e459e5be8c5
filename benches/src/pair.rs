//! Two engines on one core joined by a zero-loss, zero-delay in-memory link: the frames
//! one engine writes with `poll_transmit` are handed, from preallocated buffers, straight
//! to the other's `handle_frame`. No simulator, no impairment, no allocation per frame.
//!
//! Time is virtual: every shuttle round advances the clock by [`PairConfig::round_ns`];
//! when a round moves no frame the clock jumps to the earliest engine deadline and the
//! timers run (counted in [`LinkStats::timer_jumps`], so a benchmark that waits on a
//! timer shows it).

use core::fmt;

use iwarp_engine::{AcceptParams, ConnectParams, Engine, Event};
use iwarp_rdma::{mem::MrAttr, QpAttr, RnicLimits};
use iwarp_testkit::engine::{bench_config, next_deadline, run_due_timers, Shuttle};
use iwarp_types::{Access, CqId, Duration, Instant, PdId, QpId, RegionId, Stag, VecMemory};

/// A benchmark could not be set up or its traffic failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchError(pub String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "benchmark error: {}", self.0)
    }
}

impl std::error::Error for BenchError {}

fn err(what: impl fmt::Debug, context: &str) -> BenchError {
    BenchError(format!("{context}: {what:?}"))
}

pub use iwarp_testkit::engine::ETH_HEADER_LEN;
/// The listening port of engine B.
pub const PORT: u16 = 4791;

/// How the two engines are configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairConfig {
    /// IP MTU of both engines (1500 or jumbo 9000).
    pub mtu: usize,
    /// The engines leave IPv4/TCP checksums to the "NIC" (as a NIC with offload would);
    /// with `false` they compute and verify them in software.
    pub checksum_offload: bool,
    /// Bytes of each node's arena (one MR covers all of it).
    pub arena_bytes: usize,
    /// Send queue depth of A's QP (WRs in flight at most).
    pub sq_depth: u32,
    /// Entries of each CQ.
    pub cq_depth: u32,
    /// Frames moved in one direction per shuttle round at most (a NIC burst).
    pub burst_frames: usize,
    /// Virtual nanoseconds each shuttle round takes.
    pub round_ns: u64,
    /// Connection table size of each engine (and the largest listen backlog).
    pub max_conns: usize,
    /// Receivers place a whole FPDU's payload in the pass that checks its CRC
    /// (`MpaConfig::place_before_crc`); default off, as the engine's.
    pub place_before_crc: bool,
}

impl Default for PairConfig {
    fn default() -> PairConfig {
        PairConfig {
            mtu: 1500,
            checksum_offload: true,
            arena_bytes: 1 << 20,
            sq_depth: 512,
            cq_depth: 1024,
            burst_frames: 32,
            round_ns: 1_000,
            max_conns: 64,
            place_before_crc: false,
        }
    }
}

/// One engine with its memory and verbs objects (a PD, a CQ, a QP, one MR over the arena).
pub struct Node {
    /// The engine.
    pub eng: Engine,
    /// Its registered memory.
    pub mem: VecMemory,
    /// The arena.
    pub region: RegionId,
    /// Protection domain.
    pub pd: PdId,
    /// Send and receive CQ.
    pub cq: CqId,
    /// The QP.
    pub qp: QpId,
    /// STag of the MR over the whole arena (local and remote rights).
    pub mr: Stag,
}

impl Node {
    fn new(last: u8, cfg: &PairConfig) -> Result<Node, BenchError> {
        let mut ecfg = bench_config(last, cfg.mtu, cfg.checksum_offload);
        ecfg.max_conns = cfg.max_conns;
        ecfg.backlog_max = cfg.max_conns;
        ecfg.mpa.place_before_crc = cfg.place_before_crc;
        ecfg.rnic.limits = RnicLimits {
            max_sq_wr: cfg.sq_depth.max(RnicLimits::default().max_sq_wr),
            max_cqe: cfg.cq_depth.max(RnicLimits::default().max_cqe),
            ..RnicLimits::default()
        };
        let mut eng = Engine::try_new(ecfg).map_err(|e| err(e, "engine config"))?;
        let mut mem = VecMemory::new();
        let region = mem.add_arena(cfg.arena_bytes);
        let r = eng.rnic_mut();
        let pd = r.alloc_pd().map_err(|e| err(e, "alloc_pd"))?;
        let (cq, _) = r.create_cq(cfg.cq_depth).map_err(|e| err(e, "create_cq"))?;
        let attr = QpAttr {
            sq_depth: cfg.sq_depth,
            rq_depth: 16,
            ord: 8,
            ird: 8,
            inbound_read: true,
            inbound_write: true,
            ..QpAttr::new(pd, cq)
        };
        let (qp, _) = r.create_qp(&attr).map_err(|e| err(e, "create_qp"))?;
        let access =
            Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mr_attr = MrAttr {
            pd,
            region,
            region_offset: 0,
            len: cfg.arena_bytes as u64,
            va: 0,
            zero_based: true,
            access,
            key: 0x42,
            remote_access_flag: true,
        };
        let mr = r
            .reg_mr(&mr_attr, Some(cfg.arena_bytes as u64))
            .map_err(|e| err(e, "reg_mr"))?;
        Ok(Node {
            eng,
            mem,
            region,
            pd,
            cq,
            qp,
            mr,
        })
    }
}

/// What the link moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames A → B.
    pub frames_ab: u64,
    /// Frames B → A.
    pub frames_ba: u64,
    /// Bytes (Ethernet headers included) A → B.
    pub bytes_ab: u64,
    /// Bytes B → A.
    pub bytes_ba: u64,
    /// Shuttle rounds.
    pub rounds: u64,
    /// Rounds that moved nothing, so the clock jumped to the next timer.
    pub timer_jumps: u64,
}

/// Two engines, A (the active side, which posts the WRITEs) and B, with an established
/// connection between their QPs.
pub struct Pair {
    /// The active side.
    pub a: Node,
    /// The passive side.
    pub b: Node,
    /// Virtual time.
    pub now: Instant,
    /// Link counters.
    pub stats: LinkStats,
    cfg: PairConfig,
    /// Preallocated frame buffers of one burst.
    shuttle: Shuttle,
}

/// Which engine transmits in [`Pair::burst`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    AtoB,
    BtoA,
}

impl Pair {
    /// Two engines and their verbs objects, not yet connected.
    pub fn new(cfg: PairConfig) -> Result<Pair, BenchError> {
        if cfg.burst_frames == 0 || cfg.round_ns == 0 {
            return Err(BenchError(
                "burst_frames and round_ns must be positive".into(),
            ));
        }
        let a = Node::new(1, &cfg)?;
        let b = Node::new(2, &cfg)?;
        let frame_len = cfg.mtu + ETH_HEADER_LEN;
        Ok(Pair {
            a,
            b,
            now: Instant::ZERO,
            stats: LinkStats::default(),
            cfg,
            shuttle: Shuttle::new(frame_len, cfg.burst_frames),
        })
    }

    /// Two engines with A's QP connected to B's (MPA with CRC, both QPs in RTS).
    pub fn connected(cfg: PairConfig) -> Result<Pair, BenchError> {
        let mut p = Pair::new(cfg)?;
        p.connect()?;
        Ok(p)
    }

    /// The configuration.
    pub fn config(&self) -> &PairConfig {
        &self.cfg
    }

    /// B listens, A connects, B accepts; returns once both QPs are established.
    pub fn connect(&mut self) -> Result<(), BenchError> {
        self.b.eng.listen(PORT, 1).map_err(|e| err(e, "listen"))?;
        let b_ip = self.b.eng.config().ipv4;
        let qa = self.a.qp;
        self.a
            .eng
            .connect(self.now, qa, b_ip, PORT, ConnectParams::default())
            .map_err(|e| err(e, "connect"))?;
        let (mut a_up, mut b_up) = (false, false);
        for _ in 0..10_000 {
            self.round();
            while let Some(ev) = self.a.eng.poll_event() {
                match ev {
                    Event::Established { .. } => a_up = true,
                    Event::Async(_) | Event::CqNotify(_) => {}
                    other => return Err(err(other, "A during connect")),
                }
            }
            while let Some(ev) = self.b.eng.poll_event() {
                match ev {
                    Event::ConnectRequest { conn, .. } => {
                        let qb = self.b.qp;
                        self.b
                            .eng
                            .accept(self.now, conn, qb, AcceptParams::default())
                            .map_err(|e| err(e, "accept"))?;
                    }
                    Event::Established { .. } => b_up = true,
                    Event::Async(_) | Event::CqNotify(_) => {}
                    other => return Err(err(other, "B during connect")),
                }
            }
            if a_up && b_up {
                return Ok(());
            }
        }
        Err(BenchError(format!(
            "connection not established (A {a_up}, B {b_up})"
        )))
    }

    /// Up to one burst of frames from one engine into the other. Returns the frames moved.
    fn burst(&mut self, dir: Dir) -> usize {
        let now = self.now;
        let (tx, rx) = match dir {
            Dir::AtoB => (&mut self.a, &mut self.b),
            Dir::BtoA => (&mut self.b, &mut self.a),
        };
        let (n, bytes) =
            self.shuttle
                .burst(now, (&mut tx.eng, &tx.mem), (&mut rx.eng, &mut rx.mem));
        match dir {
            Dir::AtoB => {
                self.stats.frames_ab += n as u64;
                self.stats.bytes_ab += bytes;
            }
            Dir::BtoA => {
                self.stats.frames_ba += n as u64;
                self.stats.bytes_ba += bytes;
            }
        }
        n
    }

    /// One shuttle round: advance the clock, run due timers, one burst each way. When
    /// nothing moved, the clock jumps to the earliest deadline and the timers run.
    /// Returns the frames moved.
    pub fn round(&mut self) -> usize {
        self.stats.rounds += 1;
        self.now += Duration::from_nanos(self.cfg.round_ns);
        self.run_due_timers();
        let moved = self.burst(Dir::AtoB) + self.burst(Dir::BtoA);
        if moved == 0 {
            if let Some(t) = self.next_deadline() {
                self.stats.timer_jumps += 1;
                self.now = self.now.max(t);
                self.run_due_timers();
            }
        }
        moved
    }

    fn next_deadline(&self) -> Option<Instant> {
        next_deadline(&self.a.eng, &self.b.eng)
    }

    fn run_due_timers(&mut self) {
        run_due_timers(self.now, &mut self.a.eng, &mut self.a.mem);
        run_due_timers(self.now, &mut self.b.eng, &mut self.b.mem);
    }

    /// Drains both engines' events; an event other than a CQ notification is an error
    /// (the connection must stay up during a benchmark).
    pub fn check_events(&mut self) -> Result<(), BenchError> {
        for (name, node) in [("A", &mut self.a), ("B", &mut self.b)] {
            while let Some(ev) = node.eng.poll_event() {
                if !matches!(ev, Event::CqNotify(_)) {
                    return Err(BenchError(format!("{name}: unexpected event {ev:?}")));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::QpState;

    #[test]
    fn connects_with_crc_and_both_qps_in_rts() {
        let p = Pair::connected(PairConfig::default()).unwrap();
        assert_eq!(p.a.eng.rnic().query_qp(p.a.qp).unwrap().state, QpState::Rts);
        assert_eq!(p.b.eng.rnic().query_qp(p.b.qp).unwrap().state, QpState::Rts);
        assert!(
            p.stats.frames_ab >= 3,
            "SYN, ACK, MPA Request at least: {:?}",
            p.stats
        );
        assert!(
            p.stats.frames_ba >= 2,
            "SYN-ACK, MPA Reply at least: {:?}",
            p.stats
        );
    }

    #[test]
    fn jumbo_mtu_and_software_checksums_connect_too() {
        let cfg = PairConfig {
            mtu: 9000,
            checksum_offload: false,
            ..PairConfig::default()
        };
        let p = Pair::connected(cfg).unwrap();
        assert_eq!(p.a.eng.config().mtu, 9000);
        assert!(!p.a.eng.config().checksum_offload);
    }

    #[test]
    fn idle_link_jumps_to_timers_instead_of_spinning() {
        let mut p = Pair::connected(PairConfig::default()).unwrap();
        let seg_a = p.a.eng.counters().tcp_segments_out;
        let seg_b = p.b.eng.counters().tcp_segments_out;
        for _ in 0..10 {
            p.round();
        }
        // Nothing to send: the clock jumped to the timers (delayed ACK, ARP refresh every
        // 60 s) instead of spinning; at most a delayed ACK went out on TCP.
        assert!(p.stats.timer_jumps >= 2, "{:?}", p.stats);
        assert!(
            p.now >= Instant::ZERO + Duration::from_secs(60),
            "{:?}",
            p.now
        );
        assert!(p.a.eng.counters().tcp_segments_out <= seg_a + 1);
        assert!(p.b.eng.counters().tcp_segments_out <= seg_b + 1);
        assert_eq!(p.a.eng.counters().tcp_retransmissions, 0);
        p.check_events().unwrap();
    }

    #[test]
    fn bad_config_is_an_error_not_a_panic() {
        let cfg = PairConfig {
            burst_frames: 0,
            ..PairConfig::default()
        };
        assert!(Pair::new(cfg).is_err());
        let cfg = PairConfig {
            mtu: 100,
            ..PairConfig::default()
        };
        assert!(Pair::new(cfg).is_err());
    }
}
