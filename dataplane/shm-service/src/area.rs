//! TEMPORARY stand-ins for `iwarp_shm_ring::{DoorbellBlock, DoorbellSet, CqControl}`
//! (helper A's `verbs-shm/ring/src/area.rs`), with the names and semantics of
//! docs/APPS.md, until that lands; then this file becomes a re-export.

use iwarp_shm_ring::{LayoutError, Region};

/// Doorbell bits per client and core.
pub const DOORBELL_BITS: usize = 4096;
/// Bit words of a doorbell block.
pub const DOORBELL_WORDS: usize = DOORBELL_BITS / 64;

/// One core's doorbell block of a client's ring area: a summary word, then
/// [`DOORBELL_WORDS`] bit words.
#[derive(Clone, Debug)]
pub struct DoorbellBlock {
    region: Region,
}

/// The doorbells taken from a block (preallocated by the consumer).
#[derive(Clone, Debug)]
pub struct DoorbellSet {
    words: [u64; DOORBELL_WORDS],
    summary: u64,
}

impl Default for DoorbellSet {
    fn default() -> DoorbellSet {
        DoorbellSet {
            words: [0; DOORBELL_WORDS],
            summary: 0,
        }
    }
}

impl DoorbellSet {
    /// Calls `f` with every bit set (ascending), then clears the set.
    pub fn drain(&mut self, mut f: impl FnMut(u32)) {
        let mut s = core::mem::take(&mut self.summary);
        while s != 0 {
            let w = s.trailing_zeros() as usize;
            s &= s - 1;
            let mut m = core::mem::take(&mut self.words[w]);
            while m != 0 {
                let b = m.trailing_zeros();
                m &= m - 1;
                f(w as u32 * 64 + b);
            }
        }
    }
}

impl DoorbellBlock {
    /// The block in `region` (at least `8 * (1 + DOORBELL_WORDS)` bytes).
    pub fn new(region: Region) -> Result<DoorbellBlock, LayoutError> {
        let need = 8 * (1 + DOORBELL_WORDS);
        if region.len() < need {
            return Err(LayoutError::TooSmall {
                need,
                have: region.len(),
            });
        }
        Ok(DoorbellBlock { region })
    }

    /// Client side: rings bit `bit` (ignored if out of range).
    pub fn ring(&self, bit: u32) {
        let bit = bit as usize;
        if bit >= DOORBELL_BITS {
            return;
        }
        let w = bit / 64;
        self.region.fetch_or_u64(8 + w * 8, 1 << (bit % 64));
        self.region.fetch_or_u64(0, 1 << w);
    }

    /// Service side: moves every rung bit into `set`.
    pub fn take(&self, set: &mut DoorbellSet) {
        let s = self.region.swap_u64(0, 0).unwrap_or(0);
        set.summary |= s;
        let mut t = s;
        while t != 0 {
            let w = t.trailing_zeros() as usize;
            t &= t - 1;
            set.words[w] |= self.region.swap_u64(8 + w * 8, 0).unwrap_or(0);
        }
    }
}

/// A CQ's control line: `arm` (0 off, 1 next, 2 solicited), `events`, `overflows`.
#[derive(Clone, Debug)]
pub struct CqControl {
    region: Region,
}

const ARM: usize = 0;
const EVENTS: usize = 8;
const OVERFLOWS: usize = 16;

impl CqControl {
    /// Off.
    pub const ARM_OFF: u64 = 0;
    /// Next completion.
    pub const ARM_NEXT: u64 = 1;
    /// Next solicited or error completion.
    pub const ARM_SOLICITED: u64 = 2;

    /// The control line in `region` (at least 64 bytes).
    pub fn new(region: Region) -> Result<CqControl, LayoutError> {
        if region.len() < 64 {
            return Err(LayoutError::TooSmall {
                need: 64,
                have: region.len(),
            });
        }
        Ok(CqControl { region })
    }

    /// Client side: arm.
    pub fn arm(&self, solicited_only: bool) {
        let v = if solicited_only {
            Self::ARM_SOLICITED
        } else {
            Self::ARM_NEXT
        };
        self.region.store_u64(ARM, v);
    }

    /// Service side, after pushing CQEs: disarms and returns true if the arm fired.
    pub fn try_fire(&self, solicited_or_error: bool) -> bool {
        let arm = self.region.load_u64(ARM).unwrap_or(0);
        let fires = arm == Self::ARM_NEXT || (arm == Self::ARM_SOLICITED && solicited_or_error);
        if fires && self.region.compare_exchange_u64(ARM, arm, 0).is_some_and(|r| r.is_ok()) {
            self.region.fetch_add_u64(EVENTS, 1);
            return true;
        }
        false
    }

    /// Service side: counts a full ring.
    pub fn add_overflow(&self) {
        self.region.fetch_add_u64(OVERFLOWS, 1);
    }

    /// Events fired.
    pub fn events(&self) -> u64 {
        self.region.load_u64(EVENTS).unwrap_or(0)
    }

    /// Overflows counted.
    pub fn overflows(&self) -> u64 {
        self.region.load_u64(OVERFLOWS).unwrap_or(0)
    }
}
