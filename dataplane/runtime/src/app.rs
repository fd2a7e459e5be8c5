//! Applications that run inside the dataplane loop and drive an engine directly.

use iwarp_engine::{Engine, Event};
use iwarp_types::{Instant, Memory};

/// An application hosted by a dataplane core (the load generator; later the
/// shared-memory verbs clients). It is bound to one engine (one port) of the core and
/// drives it with verbs and CM calls; the core calls it once per loop iteration.
///
/// Nothing here may block; work per call must be bounded.
pub trait App<M: Memory> {
    /// An event the engine reported. Returns true if the event belongs to this app (its
    /// connection or QP, or its listening port); the core then does not route it further.
    fn on_event(&mut self, now: Instant, engine: &mut Engine, mem: &mut M, event: &Event) -> bool;

    /// Called once per loop iteration, after received frames were handled and before
    /// frames are transmitted: poll CQs, post work requests, open connections.
    fn poll(&mut self, now: Instant, engine: &mut Engine, mem: &mut M);

    /// Called once per burst of received frames, after the burst was taken from the
    /// device (or from another core's ring) and before its first frame is handled. An app
    /// whose work requests reach the engine later than they were posted (through rings
    /// served in `poll`) hands the engine here every receive posted so far: a frame of the
    /// burst may answer a message sent after that receive was posted, and must find it (as
    /// an RNIC finds a receive whose doorbell was rung before the answer arrived). Bounded
    /// work; the default does nothing.
    fn before_frames(&mut self, now: Instant, engine: &mut Engine, mem: &mut M) {
        let _ = (now, engine, mem);
    }

    /// When the app next needs `poll` even if nothing happens (a timer), or `None`.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Orderly shutdown was requested: start closing the app's connections.
    fn shutdown(&mut self, now: Instant, engine: &mut Engine, mem: &mut M);

    /// True when the app holds no connection any more (shutdown may complete).
    fn is_idle(&self) -> bool;
}
