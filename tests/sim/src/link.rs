//! A one-way link on virtual time: loss, reordering (extra delay or a swap with the frame
//! scheduled just before), duplication, corruption (random bit flips), delay and jitter,
//! an MTU, and a bandwidth with a bounded transmit queue (tail drop). Every choice draws
//! from the run's [`SimRng`]; [`LinkCounters`] tell what the link did.

use std::collections::VecDeque;

use iwarp_types::{Duration, Instant};

use crate::rng::SimRng;

/// Ethernet header length (destination, source, EtherType).
pub const ETH_HEADER_LEN: usize = 14;

/// Where corruption may flip bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptRegion {
    /// Anywhere in any frame, Ethernet header included.
    Anywhere,
    /// Anywhere in IPv4 frames only (ARP has no checksum: a flipped ARP reply would
    /// poison a cache, which is not what these tests are about).
    Ipv4Frames,
    /// Only in the TCP payload of IPv4/TCP frames (frames without payload are left
    /// alone): exercises the MPA CRC when the TCP checksum is not verified.
    TcpPayload,
}

/// Parameters of a link. Probabilities are in `[0, 1]`.
#[derive(Clone, Copy, Debug)]
pub struct LinkConfig {
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame gets bit flips.
    pub corrupt: f64,
    /// Bits flipped in a corrupted frame: uniform in `[1, corrupt_bits_max]`.
    pub corrupt_bits_max: u32,
    /// Where the flips land.
    pub corrupt_region: CorruptRegion,
    /// Probability that a frame gets an extra delay in `[0, reorder_delay_max]`.
    pub reorder: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay_max: Duration,
    /// Probability that a frame swaps its arrival time with the frame scheduled before it.
    pub swap: f64,
    /// Propagation delay.
    pub delay: Duration,
    /// Uniform jitter added to the delay, in `[0, jitter]`.
    pub jitter: Duration,
    /// Largest Ethernet payload (IP packet) carried; longer frames are dropped and counted.
    pub mtu: usize,
    /// Bandwidth in bits per second (serialisation delay); 0 = infinite.
    pub bandwidth_bps: u64,
    /// Frames waiting for serialisation at most (tail drop beyond).
    pub queue_frames: usize,
    /// Frames propagating at most (a hard bound of the simulator; beyond: dropped, counted).
    pub in_flight_max: usize,
}

impl Default for LinkConfig {
    /// A perfect 10 Gbit/s link with 5 µs delay and an MTU of 1500.
    fn default() -> LinkConfig {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            corrupt_bits_max: 1,
            corrupt_region: CorruptRegion::Anywhere,
            reorder: 0.0,
            reorder_delay_max: Duration::from_micros(50),
            swap: 0.0,
            delay: Duration::from_micros(5),
            jitter: Duration::ZERO,
            mtu: 1500,
            bandwidth_bps: 10_000_000_000,
            queue_frames: 1024,
            in_flight_max: 65_536,
        }
    }
}

impl LinkConfig {
    /// A perfect link (no impairment).
    pub fn perfect() -> LinkConfig {
        LinkConfig::default()
    }

    /// A lossy link: `loss` loss plus reordering, duplication and jitter.
    pub fn lossy(loss: f64) -> LinkConfig {
        LinkConfig {
            loss,
            reorder: loss,
            swap: loss,
            duplicate: loss / 2.0,
            jitter: Duration::from_micros(3),
            ..LinkConfig::default()
        }
    }
}

/// What a link did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Frames offered by the sender.
    pub offered: u64,
    /// Frames handed to the receiver (duplicates included).
    pub delivered: u64,
    /// Bytes handed to the receiver.
    pub delivered_bytes: u64,
    /// Frames lost on purpose.
    pub lost: u64,
    /// Extra copies created.
    pub duplicated: u64,
    /// Frames delivered with bit flips.
    pub corrupted: u64,
    /// Frames delivered with bit flips only in bytes no receiver checks (source MAC).
    pub corrupted_harmless: u64,
    /// Frames given an extra delay.
    pub reordered: u64,
    /// Frames swapped with the frame before.
    pub swapped: u64,
    /// Frames above the MTU, dropped.
    pub mtu_dropped: u64,
    /// Frames dropped because the transmit queue was full.
    pub queue_dropped: u64,
    /// Frames dropped because too many were propagating.
    pub in_flight_dropped: u64,
}

#[derive(Debug)]
struct InFlight {
    arrival: Instant,
    seq: u64,
    corrupted: bool,
    harmless: bool,
    bytes: Vec<u8>,
}

/// One direction of a wire.
#[derive(Debug)]
pub struct Link {
    cfg: LinkConfig,
    counters: LinkCounters,
    /// Frames propagating, sorted by (arrival, seq).
    in_flight: VecDeque<InFlight>,
    /// Completion times of frames still being serialised (the transmit queue).
    tx_done: VecDeque<Instant>,
    busy_until: Instant,
    next_seq: u64,
    /// Recycled buffers, so a long run does not allocate per frame.
    free: Vec<Vec<u8>>,
}

impl Link {
    /// An idle link.
    pub fn new(cfg: LinkConfig) -> Link {
        Link {
            cfg,
            counters: LinkCounters::default(),
            in_flight: VecDeque::new(),
            tx_done: VecDeque::new(),
            busy_until: Instant::ZERO,
            next_seq: 0,
            free: Vec::new(),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the parameters (frames already propagating keep their fate).
    pub fn set_config(&mut self, cfg: LinkConfig) {
        self.cfg = cfg;
    }

    /// What the link did so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Frames propagating or queued.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Arrival time of the next frame, if any.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.front().map(|f| f.arrival)
    }

    /// The sender puts `frame` on the link at `now`.
    pub fn send(&mut self, now: Instant, frame: &[u8], rng: &mut SimRng) {
        self.forward(now, frame, (false, false), rng);
    }

    /// Like [`Link::send`] for a frame that already crossed a link (a switch forwarding):
    /// `damage` = (corrupted, only harmlessly) from the previous hop, carried along.
    pub fn forward(&mut self, now: Instant, frame: &[u8], damage: (bool, bool), rng: &mut SimRng) {
        self.counters.offered += 1;
        if frame.len().saturating_sub(ETH_HEADER_LEN) > self.cfg.mtu {
            self.counters.mtu_dropped += 1;
            return;
        }
        // Transmit queue: frames whose serialisation is not finished at `now`.
        while self.tx_done.front().is_some_and(|t| *t <= now) {
            self.tx_done.pop_front();
        }
        if self.cfg.bandwidth_bps > 0 && self.tx_done.len() >= self.cfg.queue_frames {
            self.counters.queue_dropped += 1;
            return;
        }
        let start = now.max(self.busy_until);
        let done = start + self.serialisation(frame.len());
        if self.cfg.bandwidth_bps > 0 {
            self.busy_until = done;
            self.tx_done.push_back(done);
        }
        if rng.chance(self.cfg.loss) {
            self.counters.lost += 1;
            return;
        }
        let copies = if rng.chance(self.cfg.duplicate) { 2 } else { 1 };
        for copy in 0..copies {
            if copy > 0 {
                self.counters.duplicated += 1;
            }
            let mut arrival = done + self.cfg.delay + Duration(rng.below(self.cfg.jitter.0 + 1));
            if copy > 0 {
                // The copy trails the original by up to one extra delay.
                arrival += Duration(rng.range_inclusive(1, self.cfg.delay.0.max(1)));
            }
            if rng.chance(self.cfg.reorder) {
                self.counters.reordered += 1;
                arrival += Duration(rng.range_inclusive(1, self.cfg.reorder_delay_max.0.max(1)));
            }
            let mut bytes = self.free.pop().unwrap_or_default();
            bytes.clear();
            bytes.extend_from_slice(frame);
            let (corrupted, harmless) = if rng.chance(self.cfg.corrupt) {
                let (c, h) = corrupt(
                    &mut bytes,
                    self.cfg.corrupt_region,
                    self.cfg.corrupt_bits_max,
                    rng,
                );
                match (c, damage.0) {
                    (false, _) => damage,
                    (true, false) => (true, h),
                    (true, true) => (true, h && damage.1),
                }
            } else {
                damage
            };
            if self.in_flight.len() >= self.cfg.in_flight_max {
                self.counters.in_flight_dropped += 1;
                self.free.push(bytes);
                continue;
            }
            let swap = rng.chance(self.cfg.swap);
            let seq = self.next_seq;
            self.next_seq += 1;
            self.insert(
                InFlight {
                    arrival,
                    seq,
                    corrupted,
                    harmless,
                    bytes,
                },
                swap,
            );
        }
    }

    fn serialisation(&self, len: usize) -> Duration {
        if self.cfg.bandwidth_bps == 0 {
            return Duration::ZERO;
        }
        // Preamble + SFD + FCS + inter-frame gap: 24 bytes on the wire besides the frame.
        let bits = (len as u128 + 24) * 8;
        Duration((bits * 1_000_000_000 / u128::from(self.cfg.bandwidth_bps)) as u64)
    }

    fn insert(&mut self, mut f: InFlight, swap: bool) {
        if swap {
            // Exchange arrival times with the most recently scheduled frame still in flight.
            if let Some(pos) = self
                .in_flight
                .iter()
                .enumerate()
                .max_by_key(|(_, g)| g.seq)
                .map(|(i, _)| i)
            {
                if let Some(mut prev) = self.in_flight.remove(pos) {
                    if prev.arrival < f.arrival {
                        core::mem::swap(&mut prev.arrival, &mut f.arrival);
                        self.counters.swapped += 1;
                    }
                    self.insert_sorted(prev);
                }
            }
        }
        self.insert_sorted(f);
    }

    fn insert_sorted(&mut self, f: InFlight) {
        let key = (f.arrival, f.seq);
        let pos = self
            .in_flight
            .iter()
            .rposition(|g| (g.arrival, g.seq) <= key)
            .map_or(0, |p| p + 1);
        self.in_flight.insert(pos, f);
    }

    /// Hands every frame due at or before `now` to `deliver` (arrival time, bytes, and
    /// the damage: corrupted, and whether only bytes nobody checks were hit).
    pub fn deliver_due(
        &mut self,
        now: Instant,
        mut deliver: impl FnMut(Instant, &[u8], (bool, bool)),
    ) {
        while self.in_flight.front().is_some_and(|f| f.arrival <= now) {
            let Some(f) = self.in_flight.pop_front() else {
                break;
            };
            self.counters.delivered += 1;
            self.counters.delivered_bytes += f.bytes.len() as u64;
            if f.corrupted {
                self.counters.corrupted += 1;
                if f.harmless {
                    self.counters.corrupted_harmless += 1;
                }
            }
            deliver(f.arrival, &f.bytes, (f.corrupted, f.harmless));
            self.free.push(f.bytes);
        }
    }

    /// Drops every frame in flight (a cable pull).
    pub fn clear(&mut self) {
        while let Some(f) = self.in_flight.pop_front() {
            self.counters.lost += 1;
            self.free.push(f.bytes);
        }
    }
}

/// Flips bits of `frame` in `region`; returns (changed, only-harmless-bytes-changed).
fn corrupt(
    frame: &mut [u8],
    region: CorruptRegion,
    bits_max: u32,
    rng: &mut SimRng,
) -> (bool, bool) {
    let (lo, hi) = match region {
        CorruptRegion::Anywhere => (0, frame.len()),
        CorruptRegion::Ipv4Frames => match ipv4_end(frame) {
            Some(_) => (0, frame.len()),
            None => return (false, false),
        },
        CorruptRegion::TcpPayload => match tcp_payload_range(frame) {
            Some(r) => r,
            None => return (false, false),
        },
    };
    if hi <= lo {
        return (false, false);
    }
    // Judge harmlessness against the frame as sent (a flip may hit the length field).
    let end = ipv4_end(frame).unwrap_or(usize::MAX);
    let n = rng.range_inclusive(1, u64::from(bits_max.max(1)));
    let mut flipped: Vec<(usize, u8)> = Vec::new();
    for _ in 0..n {
        let at = lo + rng.below((hi - lo) as u64) as usize;
        let bit = 1u8 << rng.below(8);
        frame[at] ^= bit;
        // Two flips of the same bit cancel: track the net change.
        match flipped.iter().position(|&(a, b)| a == at && b == bit) {
            Some(i) => {
                flipped.swap_remove(i);
            }
            None => flipped.push((at, bit)),
        }
    }
    if flipped.is_empty() {
        return (false, false);
    }
    // The source MAC and the Ethernet padding after the IP packet are checked by nobody.
    let harmless = flipped
        .iter()
        .all(|&(a, _)| (6..12).contains(&a) || a >= end);
    (true, harmless)
}

/// One past the last byte of the IPv4 packet of an Ethernet/IPv4 frame (what follows is
/// Ethernet padding); `None` for other frames.
pub fn ipv4_end(frame: &[u8]) -> Option<usize> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype != 0x0800 {
        return None;
    }
    let ip = ETH_HEADER_LEN;
    let total = usize::from(u16::from_be_bytes([
        *frame.get(ip + 2)?,
        *frame.get(ip + 3)?,
    ]));
    Some(ip + total)
}

/// The byte range of the TCP payload of an Ethernet/IPv4/TCP frame.
pub fn tcp_payload_range(frame: &[u8]) -> Option<(usize, usize)> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype != 0x0800 {
        return None;
    }
    let ip = ETH_HEADER_LEN;
    let vihl = *frame.get(ip)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if *frame.get(ip + 9)? != 6 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([
        *frame.get(ip + 2)?,
        *frame.get(ip + 3)?,
    ]));
    let tcp = ip + ihl;
    let doff = usize::from(*frame.get(tcp + 12)? >> 4) * 4;
    let start = tcp + doff;
    let end = (ip + total).min(frame.len());
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(link: &mut Link, now: Instant) -> Vec<(Instant, Vec<u8>, bool)> {
        let mut out = Vec::new();
        link.deliver_due(now, |t, b, c| out.push((t, b.to_vec(), c.0)));
        out
    }

    #[test]
    fn perfect_link_delivers_in_order_after_delay() {
        let cfg = LinkConfig {
            bandwidth_bps: 0,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(1);
        link.send(Instant(0), &[1; 60], &mut rng);
        link.send(Instant(10), &[2; 60], &mut rng);
        assert_eq!(link.next_arrival(), Some(Instant(5_000)));
        assert!(collect(&mut link, Instant(4_999)).is_empty());
        let got = collect(&mut link, Instant(10_000));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1[0], 1);
        assert_eq!(got[1].1[0], 2);
        assert_eq!(got[1].0, Instant(5_010));
        assert_eq!(link.counters().delivered, 2);
    }

    #[test]
    fn serialisation_delay_and_tail_drop() {
        // 8 Mbit/s: a 976-byte frame (+24 on the wire) takes exactly 1 ms.
        let cfg = LinkConfig {
            bandwidth_bps: 8_000_000,
            queue_frames: 2,
            delay: Duration::ZERO,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(1);
        for _ in 0..3 {
            link.send(Instant(0), &[0; 976], &mut rng);
        }
        assert_eq!(link.counters().queue_dropped, 1);
        let got = collect(&mut link, Instant(10_000_000));
        let times: Vec<u64> = got.iter().map(|g| g.0 .0).collect();
        assert_eq!(times, vec![1_000_000, 2_000_000]);
        // The queue drained: sending now is accepted again.
        link.send(Instant(10_000_000), &[0; 976], &mut rng);
        assert_eq!(link.counters().queue_dropped, 1);
    }

    #[test]
    fn mtu_drops_and_counts() {
        let mut link = Link::new(LinkConfig::perfect());
        let mut rng = SimRng::new(1);
        link.send(Instant(0), &[0; 1514], &mut rng);
        link.send(Instant(0), &[0; 1515], &mut rng);
        assert_eq!(link.counters().mtu_dropped, 1);
        assert_eq!(collect(&mut link, Instant(1_000_000)).len(), 1);
    }

    #[test]
    fn full_loss_and_duplication() {
        let mut rng = SimRng::new(9);
        let mut link = Link::new(LinkConfig {
            loss: 1.0,
            ..LinkConfig::perfect()
        });
        link.send(Instant(0), &[0; 64], &mut rng);
        assert_eq!(link.counters().lost, 1);
        assert!(link.next_arrival().is_none());
        let mut link = Link::new(LinkConfig {
            duplicate: 1.0,
            ..LinkConfig::perfect()
        });
        link.send(Instant(0), &[7; 64], &mut rng);
        let got = collect(&mut link, Instant(1_000_000));
        assert_eq!(got.len(), 2);
        assert!(got[0].0 < got[1].0);
        assert_eq!(got[0].1, got[1].1);
        assert_eq!(link.counters().duplicated, 1);
    }

    #[test]
    fn swap_exchanges_neighbours() {
        let cfg = LinkConfig {
            bandwidth_bps: 0,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(3);
        link.send(Instant(0), &[1; 64], &mut rng);
        link.set_config(LinkConfig { swap: 1.0, ..cfg });
        link.send(Instant(100), &[2; 64], &mut rng);
        let got = collect(&mut link, Instant(1_000_000));
        assert_eq!(got[0].1[0], 2);
        assert_eq!(got[1].1[0], 1);
        assert_eq!(link.counters().swapped, 1);
    }

    #[test]
    fn reorder_delays_some_frames() {
        let cfg = LinkConfig {
            bandwidth_bps: 0,
            reorder: 0.5,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(11);
        for i in 0..200u8 {
            link.send(Instant(u64::from(i) * 100), &[i; 64], &mut rng);
        }
        let got = collect(&mut link, Instant(1_000_000_000));
        assert_eq!(got.len(), 200);
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(
            got.windows(2).any(|w| w[0].1[0] > w[1].1[0]),
            "some frame overtaken"
        );
        assert!(link.counters().reordered > 50);
    }

    #[test]
    fn corruption_flips_bits_and_is_reported() {
        let cfg = LinkConfig {
            corrupt: 1.0,
            corrupt_bits_max: 1,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(5);
        let frame = [0u8; 100];
        link.send(Instant(0), &frame, &mut rng);
        let got = collect(&mut link, Instant(1_000_000));
        let diff: u32 = got[0].1.iter().map(|b| b.count_ones()).sum();
        assert_eq!(diff, 1);
        assert!(got[0].2);
        assert_eq!(link.counters().corrupted, 1);
    }

    #[test]
    fn tcp_payload_corruption_stays_in_payload() {
        // Ethernet + IPv4 (20) + TCP (20) + 8 bytes payload.
        let mut frame = vec![0u8; 14 + 20 + 20 + 8];
        frame[12] = 0x08;
        frame[14] = 0x45;
        frame[14 + 3] = 48;
        frame[14 + 9] = 6;
        frame[34 + 12] = 0x50;
        assert_eq!(tcp_payload_range(&frame), Some((54, 62)));
        let cfg = LinkConfig {
            corrupt: 1.0,
            corrupt_bits_max: 4,
            corrupt_region: CorruptRegion::TcpPayload,
            ..LinkConfig::perfect()
        };
        let mut link = Link::new(cfg);
        let mut rng = SimRng::new(5);
        for _ in 0..50 {
            link.send(Instant(0), &frame, &mut rng);
        }
        for (_, bytes, _) in collect(&mut link, Instant(1_000_000)) {
            assert_eq!(bytes[..54], frame[..54]);
        }
        assert_eq!(ipv4_end(&frame), Some(62));
        // ARP frames are spared by the Ipv4Frames region.
        let mut arp = [0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        let cfg = LinkConfig {
            corrupt_region: CorruptRegion::Ipv4Frames,
            ..cfg
        };
        let mut link = Link::new(cfg);
        link.send(Instant(0), &arp, &mut rng);
        let got = collect(&mut link, Instant(1_000_000));
        assert_eq!(got[0].1, arp.to_vec());
        assert!(!got[0].2);
        // Truncated or non-TCP frames have no payload range.
        assert_eq!(tcp_payload_range(&frame[..40]), None);
        assert_eq!(tcp_payload_range(&[0u8; 5]), None);
    }

    #[test]
    fn deterministic_for_a_seed() {
        let run = |seed| {
            let mut link = Link::new(LinkConfig {
                corrupt: 0.2,
                ..LinkConfig::lossy(0.2)
            });
            let mut rng = SimRng::new(seed);
            for i in 0..100u8 {
                link.send(Instant(u64::from(i) * 1000), &[i; 80], &mut rng);
            }
            collect(&mut link, Instant(u64::MAX))
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}
