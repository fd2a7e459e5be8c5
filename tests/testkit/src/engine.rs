//! Engine pieces: the configuration of a host of the benchmark network, the burst
//! shuttle that moves frames between two engines from preallocated buffers, and the
//! timer helpers of a round-based loop.

use core::net::Ipv4Addr;

use iwarp_engine::{Engine, EngineConfig};
use iwarp_mpa::CrcPolicy;
use iwarp_types::{Instant, VecMemory};

/// Ethernet header bytes in front of the IP MTU.
pub const ETH_HEADER_LEN: usize = 14;

/// The address of host `last` of the benchmark network (RFC 2544 range 198.18.0.0/24).
pub const fn bench_ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, last)
}

/// Host `last` of the benchmark network: MAC 02:00:00:00:00:`last`, IPv4
/// [`bench_ip`]`(last)`, ISN secret and STag seed from `last`, this IP MTU, the largest
/// MSS the MTU allows and MPA CRCs requested. The rest is the engine's default.
pub fn bench_config(last: u8, mtu: usize, checksum_offload: bool) -> EngineConfig {
    let mut cfg = EngineConfig {
        mac: [0x02, 0, 0, 0, 0, last],
        ipv4: bench_ip(last),
        isn_secret: [last; 16],
        stag_seed: u64::from(last),
        mtu,
        checksum_offload,
        ..EngineConfig::default()
    };
    // The engine clamps the MSS to the MTU; ask for the most the MTU allows.
    cfg.tcp.mss_bytes = u16::MAX;
    cfg.mpa.crc = CrcPolicy::Request;
    cfg
}

/// Moves up to one burst of frames from one engine into another, from buffers allocated
/// once: what `poll_transmit` writes is handed straight to `handle_frame`.
#[derive(Clone, Debug)]
pub struct Shuttle {
    frames: Vec<Vec<u8>>,
    lens: Vec<usize>,
}

impl Shuttle {
    /// `burst` buffers of `frame_len` bytes each.
    pub fn new(frame_len: usize, burst: usize) -> Shuttle {
        Shuttle {
            frames: vec![vec![0; frame_len]; burst],
            lens: vec![0; burst],
        }
    }

    /// Up to one burst of frames from `tx` into `rx` at `now`: first every frame `tx`
    /// writes (a burst at most), then each handed to `rx`. Returns the frames and bytes
    /// (Ethernet headers included) moved.
    pub fn burst(
        &mut self,
        now: Instant,
        tx: (&mut Engine, &VecMemory),
        rx: (&mut Engine, &mut VecMemory),
    ) -> (usize, u64) {
        let mut n = 0;
        let mut pass = tx.0.transmitter(now, tx.1);
        while n < self.frames.len() {
            let Some(len) = pass.next(&mut self.frames[n]) else {
                break;
            };
            self.lens[n] = len;
            n += 1;
        }
        drop(pass);
        let mut bytes = 0u64;
        let mut pass = rx.0.receiver(now);
        for (frame, &len) in self.frames.iter().zip(&self.lens).take(n) {
            pass.handle_frame(&frame[..len], rx.1);
            bytes += len as u64;
        }
        drop(pass);
        (n, bytes)
    }
}

/// Runs the engine's timers if one is due at `now`.
pub fn run_due_timers(now: Instant, eng: &mut Engine, mem: &mut VecMemory) {
    if eng.poll_timeout().is_some_and(|t| t <= now) {
        eng.handle_timeout(now, mem);
    }
}

/// The earlier deadline of two engines.
pub fn next_deadline(a: &Engine, b: &Engine) -> Option<Instant> {
    [a.poll_timeout(), b.poll_timeout()]
        .into_iter()
        .flatten()
        .min()
}
