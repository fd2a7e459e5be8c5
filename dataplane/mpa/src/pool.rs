//! [`MpaPool`]: per-engine storage lent to connections only while they use it, so that an
//! idle established connection holds no MPA buffer at all.
//!
//! - FPDU rings (`MpaConfig::tx_queue_len` entries each): a connection takes one when it
//!   queues its first FPDU and gives it back when every FPDU it queued is acknowledged.
//! - Receive staging buffers (one FPDU of `MpaConfig::rx_ulpdu_max_bytes`): taken when an
//!   FPDU straddles `deliver` calls (or carries markers), given back once it is complete.
//! - One transmit scratch buffer for the whole engine: an FPDU TCP wants only part of is
//!   rendered there and the part copied out within the same call, so it is never held.
//!
//! Rings and staging buffers are allocated the first time the pool lends more of them
//! than it ever did (an amortised cost: the pool only grows to its high-water mark), and
//! never beyond the configured bounds. A borrower that finds the pool exhausted waits: a
//! connection without a ring queues nothing (its WRs stay on its QP), one without a
//! staging buffer leaves the straddling FPDU unconsumed (TCP does not acknowledge it; the
//! peer sends it again). Nothing fails for lack of pool storage.
//! The engine serves connections waiting for a ring first come first served and, while
//! any wait, lets a holder queue only a turn's worth of FPDUs before its ring drains
//! back (`iwarp_engine`'s `conn_service::pump`).

use std::collections::VecDeque;

use iwarp_wire::mpa::{fpdu_len, ULPDU_MAX_LEN};

use crate::config::MpaConfig;
use crate::tx::{wire_bound, Entry};

/// Bounds of an [`MpaPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLimits {
    /// FPDU rings lent at once at most: connections with FPDUs queued or unacknowledged.
    pub rings_max: usize,
    /// Receive staging buffers lent at once at most: connections in the middle of an
    /// FPDU that straddles TCP segments (or carries markers).
    pub staging_max: usize,
}

/// What the pool lent and refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// Rings lent.
    pub ring_takes: u64,
    /// Ring requests refused (pool exhausted: the connection waited).
    pub ring_waits: u64,
    /// Staging buffers lent.
    pub staging_takes: u64,
    /// Staging requests refused (the straddling FPDU was left for the peer to resend).
    pub staging_waits: u64,
    /// Rings allocated so far (the high-water mark of rings lent at once).
    pub rings_allocated: u64,
    /// Staging buffers allocated so far (the high-water mark lent at once).
    pub staging_allocated: u64,
}

/// Per-engine MPA storage, generic over the FPDU descriptor `D` (see the module docs).
pub struct MpaPool<D> {
    rings: Vec<VecDeque<Entry<D>>>,
    ring_cap: usize,
    rings_out: usize,
    staging: Vec<Vec<u8>>,
    staging_len: usize,
    staging_out: usize,
    scratch: Vec<u8>,
    limits: PoolLimits,
    counters: PoolCounters,
}

impl<D> MpaPool<D> {
    /// A pool for connections configured with `cfg`, lending at most `limits`. Only the
    /// transmit scratch buffer (one FPDU of `tx_ulpdu_max_bytes`, markers included) and
    /// the free lists are allocated here.
    pub fn new(cfg: &MpaConfig, limits: PoolLimits) -> MpaPool<D> {
        let tx_fpdu = wire_bound(fpdu_len(cfg.tx_ulpdu_max()), true);
        MpaPool {
            rings: Vec::with_capacity(limits.rings_max),
            ring_cap: cfg.tx_queue_len,
            rings_out: 0,
            staging: Vec::with_capacity(limits.staging_max),
            staging_len: fpdu_len(cfg.rx_ulpdu_max().min(ULPDU_MAX_LEN)),
            staging_out: 0,
            scratch: vec![0; tx_fpdu],
            limits,
            counters: PoolCounters::default(),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> PoolLimits {
        self.limits
    }

    /// Counters.
    pub fn counters(&self) -> PoolCounters {
        self.counters
    }

    /// Rings that can be lent now (free or not yet allocated).
    pub fn rings_available(&self) -> usize {
        self.limits.rings_max.saturating_sub(self.rings_out)
    }

    /// Rings lent now.
    pub fn rings_out(&self) -> usize {
        self.rings_out
    }

    /// Staging buffers lent now.
    pub fn staging_out(&self) -> usize {
        self.staging_out
    }

    /// Heap bytes the pool holds itself (free rings and buffers, the scratch buffer, the
    /// free lists); what is lent is counted by the borrowing connections.
    pub fn heap_bytes(&self) -> usize {
        let ring_bytes: usize = self
            .rings
            .iter()
            .map(|r| r.capacity() * core::mem::size_of::<Entry<D>>())
            .sum();
        let staging_bytes: usize = self.staging.iter().map(Vec::capacity).sum();
        ring_bytes
            + staging_bytes
            + self.scratch.capacity()
            + self.rings.capacity() * core::mem::size_of::<VecDeque<Entry<D>>>()
            + self.staging.capacity() * core::mem::size_of::<Vec<u8>>()
    }

    /// An empty ring of `tx_queue_len` entries, or `None` if `rings_max` are lent.
    pub(crate) fn take_ring(&mut self) -> Option<VecDeque<Entry<D>>> {
        if self.rings_out >= self.limits.rings_max {
            self.counters.ring_waits += 1;
            return None;
        }
        self.rings_out += 1;
        self.counters.ring_takes += 1;
        Some(self.rings.pop().unwrap_or_else(|| {
            self.counters.rings_allocated += 1;
            VecDeque::with_capacity(self.ring_cap)
        }))
    }

    /// Counts a wait for a ring that was not asked of the pool (the caller queued the
    /// connection behind earlier waiters).
    pub fn count_ring_wait(&mut self) {
        self.counters.ring_waits += 1;
    }

    /// Takes a ring back (emptied by the caller).
    pub(crate) fn put_ring(&mut self, mut ring: VecDeque<Entry<D>>) {
        ring.clear();
        self.rings_out = self.rings_out.saturating_sub(1);
        if self.rings.len() < self.limits.rings_max {
            self.rings.push(ring);
        }
    }

    /// A staging buffer of one largest FPDU, or `None` if `staging_max` are lent.
    pub(crate) fn take_staging(&mut self) -> Option<Vec<u8>> {
        if self.staging_out >= self.limits.staging_max {
            self.counters.staging_waits += 1;
            return None;
        }
        self.staging_out += 1;
        self.counters.staging_takes += 1;
        Some(self.staging.pop().unwrap_or_else(|| {
            self.counters.staging_allocated += 1;
            vec![0; self.staging_len]
        }))
    }

    /// Takes a staging buffer back.
    pub(crate) fn put_staging(&mut self, buf: Vec<u8>) {
        self.staging_out = self.staging_out.saturating_sub(1);
        if self.staging.len() < self.limits.staging_max {
            self.staging.push(buf);
        }
    }

    /// The engine's transmit scratch buffer.
    pub(crate) fn scratch(&mut self) -> &mut Vec<u8> {
        &mut self.scratch
    }
}
