//! An in-memory [`FrameIo`]: two sides of a link, each with one or more queue pairs,
//! joined by bounded lock-free queues of preallocated frame buffers. Used by tests and
//! benchmarks in place of a DPDK port.
//!
//! Each direction has one pool of buffers and one receive ring per queue of the receiving
//! side. A multi-queue side models a NIC with RSS: a frame is delivered to the receive
//! queue the symmetric Toeplitz hash selects (non-TCP frames to queue 0); with `rss` off
//! every frame goes to queue 0 (a port without RSS). A drop knob loses every n-th frame.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use iwarp_types::Instant;

use crate::io::{FrameIo, PortCaps, TxOutcome};
use crate::ring::FrameBuf;
use crate::steer::{Route, Steering, SYMMETRIC_RSS_KEY};

/// How a link is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemLinkConfig {
    /// Queue pairs on each side (a multi-queue port).
    pub queues: usize,
    /// Frames each receive queue holds.
    pub ring_frames: usize,
    /// Buffers of each direction (shared by its queues).
    pub pool_frames: usize,
    /// Largest frame (Ethernet header included): the buffer size.
    pub frame_len_max: usize,
    /// Frames a transmit queue batches before it flushes by itself.
    pub tx_batch: usize,
    /// Lose every n-th frame of each direction (0: lose none).
    pub drop_every: u64,
    /// Receiving sides spread frames over their queues by RSS (else all to queue 0).
    pub rss: bool,
    /// RETA size of the receiving side's RSS (a power of two).
    pub reta_size: usize,
    /// Ethernet address of side A.
    pub mac_a: [u8; 6],
    /// Ethernet address of side B.
    pub mac_b: [u8; 6],
    /// What the ports claim about checksum offload (the link never corrupts frames).
    pub checksum_offload: bool,
}

impl Default for MemLinkConfig {
    fn default() -> MemLinkConfig {
        MemLinkConfig {
            queues: 1,
            ring_frames: 1024,
            pool_frames: 2048,
            frame_len_max: 1514,
            tx_batch: 32,
            drop_every: 0,
            rss: true,
            reta_size: 128,
            mac_a: [0x02, 0, 0, 0, 0, 0x01],
            mac_b: [0x02, 0, 0, 0, 0, 0x02],
            checksum_offload: true,
        }
    }
}

/// A link configuration field is unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemLinkError {
    /// The field.
    pub field: &'static str,
}

impl core::fmt::Display for MemLinkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "invalid memlink config: {} must be positive", self.field)
    }
}

impl std::error::Error for MemLinkError {}

/// One direction of the link.
#[derive(Debug)]
struct Direction {
    pool: ArrayQueue<FrameBuf>,
    rx: Vec<ArrayQueue<FrameBuf>>,
    steer: Steering,
    rss: bool,
    drop_every: u64,
    offered: AtomicU64,
    lost: AtomicU64,
    delivered: AtomicU64,
}

impl Direction {
    fn new(cfg: &MemLinkConfig) -> Result<Direction, MemLinkError> {
        let steer = Steering::new(&SYMMETRIC_RSS_KEY, cfg.reta_size, (0..cfg.queues).collect())
            .map_err(|_| MemLinkError { field: "reta_size" })?;
        let pool = ArrayQueue::new(cfg.pool_frames);
        for _ in 0..cfg.pool_frames {
            let _ = pool.push(FrameBuf {
                data: vec![0u8; cfg.frame_len_max].into_boxed_slice(),
                len: 0,
                orig_len: 0,
                port: 0,
                tag: 0,
                ts: Instant::ZERO,
            });
        }
        Ok(Direction {
            pool,
            rx: (0..cfg.queues)
                .map(|_| ArrayQueue::new(cfg.ring_frames))
                .collect(),
            steer,
            rss: cfg.rss,
            drop_every: cfg.drop_every,
            offered: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        })
    }

    /// The receive queue of a frame.
    fn queue_of(&self, frame: &[u8]) -> usize {
        if !self.rss {
            return 0;
        }
        match self.steer.route(usize::MAX, frame) {
            Route::Core(q) => q,
            Route::Here | Route::AllCores => 0,
        }
    }
}

/// One queue pair of one side of a memory link.
#[derive(Debug)]
pub struct MemPort {
    tx: Arc<Direction>,
    rx: Arc<Direction>,
    queue: usize,
    pending: VecDeque<FrameBuf>,
    spare: Option<FrameBuf>,
    tx_batch: usize,
    caps: PortCaps,
}

/// Builds links.
#[derive(Debug)]
pub struct MemLink;

impl MemLink {
    /// A link with `cfg.queues` queue pairs on each side: (side A's queues, side B's).
    pub fn multi_queue(cfg: &MemLinkConfig) -> Result<(Vec<MemPort>, Vec<MemPort>), MemLinkError> {
        let positive = [
            (cfg.queues, "queues"),
            (cfg.ring_frames, "ring_frames"),
            (cfg.pool_frames, "pool_frames"),
            (cfg.frame_len_max, "frame_len_max"),
            (cfg.tx_batch, "tx_batch"),
        ];
        if let Some((_, field)) = positive.iter().find(|(v, _)| *v == 0) {
            return Err(MemLinkError { field });
        }
        let ab = Arc::new(Direction::new(cfg)?);
        let ba = Arc::new(Direction::new(cfg)?);
        let side = |tx: &Arc<Direction>, rx: &Arc<Direction>, mac| {
            (0..cfg.queues)
                .map(|queue| MemPort {
                    tx: Arc::clone(tx),
                    rx: Arc::clone(rx),
                    queue,
                    pending: VecDeque::with_capacity(cfg.tx_batch),
                    spare: None,
                    tx_batch: cfg.tx_batch,
                    caps: PortCaps {
                        mac,
                        frame_len_max: cfg.frame_len_max,
                        tx_checksum_offload: cfg.checksum_offload,
                        rx_checksum_offload: cfg.checksum_offload,
                    },
                })
                .collect()
        };
        Ok((side(&ab, &ba, cfg.mac_a), side(&ba, &ab, cfg.mac_b)))
    }

    /// A single-queue link: (side A, side B).
    pub fn pair(cfg: &MemLinkConfig) -> Result<(MemPort, MemPort), MemLinkError> {
        let cfg = MemLinkConfig { queues: 1, ..*cfg };
        let (mut a, mut b) = MemLink::multi_queue(&cfg)?;
        match (a.pop(), b.pop()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(MemLinkError { field: "queues" }),
        }
    }
}

impl MemPort {
    /// This port's queue index on its side.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// Frames of this side's transmit direction lost by the drop knob (all queues).
    pub fn lost(&self) -> u64 {
        self.tx.lost.load(Ordering::Relaxed)
    }

    /// Frames of this side's transmit direction delivered to a receive queue (all queues).
    pub fn delivered(&self) -> u64 {
        self.tx.delivered.load(Ordering::Relaxed)
    }

    /// Frames waiting in this queue's receive ring.
    pub fn rx_pending(&self) -> usize {
        self.rx.rx.get(self.queue).map_or(0, ArrayQueue::len)
    }

    /// A handle that puts raw frames on this queue's receive ring as if the peer had
    /// sent them (tests: crafted frames), usable while the port is inside a core.
    pub fn injector(&self) -> RxInjector {
        RxInjector {
            dir: Arc::clone(&self.rx),
            queue: self.queue,
        }
    }
}

/// Puts crafted frames on one receive queue of a memory link.
#[derive(Debug, Clone)]
pub struct RxInjector {
    dir: Arc<Direction>,
    queue: usize,
}

impl RxInjector {
    /// Queues `frame` for the port's next receive burst. False if no buffer or room.
    pub fn inject(&self, frame: &[u8]) -> bool {
        let Some(mut b) = self.dir.pool.pop() else {
            return false;
        };
        let n = frame.len().min(b.data.len());
        b.data[..n].copy_from_slice(&frame[..n]);
        b.len = n;
        match self.dir.rx.get(self.queue).map(|q| q.push(b)) {
            Some(Ok(())) => true,
            Some(Err(b)) => {
                let _ = self.dir.pool.push(b);
                false
            }
            None => false,
        }
    }
}

impl FrameIo for MemPort {
    fn rx_burst(&mut self, max: usize, on_frame: &mut dyn FnMut(&[u8])) -> usize {
        let Some(q) = self.rx.rx.get(self.queue) else {
            return 0;
        };
        // The frames queued now and no later one, as a device's burst (FrameIo::rx_burst).
        let queued = q.len().min(max);
        let mut n = 0;
        while n < queued {
            let Some(b) = q.pop() else {
                break;
            };
            on_frame(b.bytes());
            let _ = self.rx.pool.push(b);
            n += 1;
        }
        n
    }

    fn tx_frame(&mut self, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> TxOutcome {
        if self.pending.len() >= self.tx_batch && self.tx_flush() >= self.tx_batch {
            return TxOutcome::NoBuffer;
        }
        let Some(mut b) = self.spare.take().or_else(|| self.tx.pool.pop()) else {
            return TxOutcome::NoBuffer;
        };
        let n = fill(&mut b.data).min(b.data.len());
        if n == 0 {
            self.spare = Some(b);
            return TxOutcome::Empty;
        }
        b.len = n;
        let k = self.tx.offered.fetch_add(1, Ordering::Relaxed) + 1;
        if self.tx.drop_every > 0 && k.is_multiple_of(self.tx.drop_every) {
            self.tx.lost.fetch_add(1, Ordering::Relaxed);
            let _ = self.tx.pool.push(b);
        } else {
            self.pending.push_back(b);
        }
        TxOutcome::Queued(n)
    }

    fn tx_flush(&mut self) -> usize {
        while let Some(b) = self.pending.pop_front() {
            let q = self.tx.queue_of(b.bytes());
            let Some(ring) = self.tx.rx.get(q) else {
                let _ = self.tx.pool.push(b);
                continue;
            };
            match ring.push(b) {
                Ok(()) => {
                    self.tx.delivered.fetch_add(1, Ordering::Relaxed);
                }
                Err(b) => {
                    // The receiver is behind: keep the frame (and those after it).
                    self.pending.push_front(b);
                    break;
                }
            }
        }
        self.pending.len()
    }

    fn caps(&self) -> PortCaps {
        self.caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(p: &mut MemPort, bytes: &[u8]) -> TxOutcome {
        p.tx_frame(&mut |buf: &mut [u8]| {
            buf[..bytes.len()].copy_from_slice(bytes);
            bytes.len()
        })
    }

    fn recv(p: &mut MemPort) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        p.rx_burst(64, &mut |f: &[u8]| out.push(f.to_vec()));
        out
    }

    #[test]
    fn frames_cross_in_order_after_flush() {
        let (mut a, mut b) = MemLink::pair(&MemLinkConfig::default()).unwrap();
        assert_eq!(send(&mut a, b"one"), TxOutcome::Queued(3));
        assert_eq!(send(&mut a, b"two"), TxOutcome::Queued(3));
        assert!(recv(&mut b).is_empty(), "nothing before the flush");
        assert_eq!(a.tx_flush(), 0);
        assert_eq!(recv(&mut b), vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(a.tx_frame(&mut |_: &mut [u8]| 0), TxOutcome::Empty);
        assert_eq!(b.caps().mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(a.delivered(), 2);
    }

    #[test]
    fn back_pressure_and_drop_knob() {
        let cfg = MemLinkConfig {
            ring_frames: 2,
            pool_frames: 3,
            tx_batch: 8,
            ..MemLinkConfig::default()
        };
        let (mut a, mut b) = MemLink::pair(&cfg).unwrap();
        for _ in 0..3 {
            assert!(matches!(send(&mut a, b"x"), TxOutcome::Queued(1)));
        }
        assert_eq!(send(&mut a, b"x"), TxOutcome::NoBuffer, "pool empty");
        assert_eq!(a.tx_flush(), 1, "ring holds two; one stays queued");
        assert_eq!(recv(&mut b).len(), 2);
        assert_eq!(a.tx_flush(), 0);
        assert_eq!(recv(&mut b).len(), 1);

        let cfg = MemLinkConfig {
            drop_every: 3,
            ..MemLinkConfig::default()
        };
        let (mut a, mut b) = MemLink::pair(&cfg).unwrap();
        for i in 0..9u8 {
            send(&mut a, &[i]);
        }
        a.tx_flush();
        let got: Vec<u8> = recv(&mut b).into_iter().map(|f| f[0]).collect();
        assert_eq!(got, vec![0, 1, 3, 4, 6, 7]);
        assert_eq!(a.lost(), 3);
        assert!(MemLink::multi_queue(&MemLinkConfig {
            queues: 0,
            ..MemLinkConfig::default()
        })
        .is_err());
    }

    #[test]
    fn multi_queue_side_spreads_by_rss_or_not() {
        let tcp = |sport: u16| {
            let mut f = vec![0u8; 54];
            f[12] = 0x08;
            f[14] = 0x45;
            f[23] = 6;
            f[26..30].copy_from_slice(&[198, 18, 0, 1]);
            f[30..34].copy_from_slice(&[198, 18, 0, 2]);
            f[34..36].copy_from_slice(&sport.to_be_bytes());
            f[36..38].copy_from_slice(&4791u16.to_be_bytes());
            f
        };
        for rss in [true, false] {
            let cfg = MemLinkConfig {
                queues: 2,
                rss,
                ..MemLinkConfig::default()
            };
            let (mut a, mut b) = MemLink::multi_queue(&cfg).unwrap();
            for p in 0..32 {
                send(&mut a[0], &tcp(50_000 + p));
            }
            a[0].tx_flush();
            let (q0, q1) = (recv(&mut b[0]).len(), recv(&mut b[1]).len());
            assert_eq!(q0 + q1, 32);
            if rss {
                assert!(q0 > 4 && q1 > 4, "{q0} {q1}");
            } else {
                assert_eq!(q1, 0);
            }
        }
    }
}
