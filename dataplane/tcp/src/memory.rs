//! Memory of a connection: loss-recovery storage (out-of-order buffer, SACK scoreboard,
//! in-flight segment map) is allocated only when used and released when idle.
//!
//! A connection without loss and without data in flight holds no heap at all (the rest
//! is `size_of::<TcpConn>()`, under 1 KiB), so 10 000 idle connections per core cost
//! nothing beyond their slots. The out-of-order buffer is allocated by the first
//! out-of-order segment, i.e. on loss, off the common path, at most
//! `min(ooo_max_bytes, receive window)`; the scoreboard by the first SACK; the segment map
//! grows with the segments actually in flight. `buffer_release_ms` after it was armed, the
//! release timer gives back whatever is empty and re-arms for the rest.

use iwarp_types::{Duration, Instant};

use crate::conn::{TcpConn, TcpState};
use crate::timer::Timer;

impl TcpConn {
    /// Bytes of heap the connection holds: the sum of the capacities of its vectors
    /// (out-of-order buffer and its ranges, SACK scoreboard, in-flight segment map). Zero
    /// for an idle connection (nothing in flight, nothing out of order) once
    /// `buffer_release_ms` passed; the rest of the connection is `size_of::<TcpConn>()`.
    pub fn heap_bytes(&self) -> usize {
        self.ooo.heap_bytes() + self.scoreboard.heap_bytes() + self.segmap.heap_bytes()
    }

    /// Arms the release timer if loss-recovery storage is held and it is not armed.
    pub(crate) fn schedule_release(&mut self, now: Instant) {
        if !self.timers.is_set(Timer::Release)
            && self.state != TcpState::Closed
            && self.heap_bytes() > 0
        {
            let after = Duration::from_millis(self.cfg.buffer_release_ms);
            self.timers.set(Timer::Release, now + after);
        }
    }

    /// Gives back every empty loss-recovery structure; re-arms the timer for the rest.
    pub(crate) fn release_storage(&mut self, now: Instant) {
        self.ooo.release();
        self.scoreboard.release();
        self.segmap.release_storage();
        self.schedule_release(now);
    }

    /// Drops and releases everything (TIME_WAIT, CLOSED: nothing more to hold).
    pub(crate) fn release_all(&mut self) {
        self.ooo.clear();
        self.ooo.release();
        self.scoreboard.clear();
        self.scoreboard.release();
        self.segmap.release(0, 0);
        self.segmap.release_storage();
    }
}
