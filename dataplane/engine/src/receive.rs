//! The input side's pass: a [`Receiver`] hands the engine a burst of inbound frames. The
//! connection whose segments arrive one after another is serviced (TCP and MPA events,
//! the QP's LLP requests) and re-armed once, when the pass moves to another connection,
//! to a frame of another kind, or ends, not after each segment; only the FPDUs each
//! segment acknowledged are released at once (their completions keep their place among
//! the receive completions). Nothing can run between two frames of the pass (it borrows
//! the engine), and the work deferred is done before anything that could see it: the
//! same outputs as `Engine::handle_frame` per frame, in the same order (docs/ENGINE.md,
//! seam 4, names the one thing a later segment of the burst meets differently: a reset
//! its QP asked for after an earlier one).

use iwarp_types::{Instant, Memory};

use crate::engine::Engine;

/// One receive pass over the engine ([`Engine::receiver`]): call
/// [`Receiver::handle_frame`] for each inbound frame of a burst, then drop it (dropping it
/// services the connection handled last).
pub struct Receiver<'e> {
    eng: &'e mut Engine,
    now: Instant,
}

impl Engine {
    /// A receive pass at `now` (see [`Receiver`]).
    pub fn receiver(&mut self, now: Instant) -> Receiver<'_> {
        Receiver { eng: self, now }
    }
}

impl Receiver<'_> {
    /// Handles one inbound Ethernet frame, as [`Engine::handle_frame`] does.
    pub fn handle_frame(&mut self, frame: &[u8], mem: &mut dyn Memory) {
        self.eng.handle_frame_deferred(self.now, frame, mem);
    }

    /// The engine, for a call between two frames of the pass (a verb, say): what the
    /// pass deferred is done first, so the call sees the engine as after
    /// [`Engine::handle_frame`].
    pub fn engine(&mut self) -> &mut Engine {
        self.eng.flush_rx_deferred(self.now);
        self.eng
    }
}

impl Drop for Receiver<'_> {
    fn drop(&mut self) {
        self.eng.flush_rx_deferred(self.now);
    }
}
