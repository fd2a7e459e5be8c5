//! Two stations joined by a lossless wire on virtual time.
//!
//! A round drains both stations (every frame they have to send), then, if any frame is in
//! flight, advances the clock by one step and delivers A's frames to B and B's to A (each
//! through a filter that may change or drop it). When both are quiet the clock may jump
//! to the earlier station timer. Every loop is bounded.

pub use iwarp_types::{Duration, Instant};

/// One end of the wire.
pub trait Station {
    /// Appends every frame the station sends at `now` to `out` (and keeps its events).
    fn drain(&mut self, now: Instant, out: &mut Vec<Vec<u8>>);
    /// Hands it a frame received at `now`.
    fn deliver(&mut self, now: Instant, frame: &[u8]);
    /// Hands it the frames of one round received at `now`, in order (an engine takes
    /// them in one receive pass, as the daemon takes a burst); by default one by one.
    fn deliver_burst(&mut self, now: Instant, frames: &[Vec<u8>]) {
        for f in frames {
            self.deliver(now, f);
        }
    }
    /// Its next timer.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Runs its timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
}

/// Implements [`Station`] for a node type holding an engine (field `$eng`, with the
/// engine's `poll_transmit`/`handle_frame`/`poll_timeout`/`handle_timeout`), its memory
/// (field `$mem`) and a frame list (field `$out`, a `Vec<Vec<u8>>`) that the node's own
/// `drain(&mut self, now)` fills with what it transmits. The wire calls that `drain`,
/// then takes the frames from `$out`. A macro, not a generic impl, so that the engine's
/// own unit tests can use it with the crate's `Engine` (the kit's wire does not depend on
/// the engine).
#[macro_export]
macro_rules! engine_station {
    ($node:ty, $eng:ident, $mem:ident, $out:ident) => {
        impl $crate::wire::Station for $node {
            fn drain(&mut self, now: $crate::wire::Instant, out: &mut Vec<Vec<u8>>) {
                <$node>::drain(self, now);
                out.append(&mut self.$out);
            }

            fn deliver(&mut self, now: $crate::wire::Instant, frame: &[u8]) {
                self.$eng.handle_frame(now, frame, &mut self.$mem);
            }

            fn deliver_burst(&mut self, now: $crate::wire::Instant, frames: &[Vec<u8>]) {
                let mut pass = self.$eng.receiver(now);
                for f in frames {
                    pass.handle_frame(f, &mut self.$mem);
                }
            }

            fn poll_timeout(&self) -> Option<$crate::wire::Instant> {
                self.$eng.poll_timeout()
            }

            fn handle_timeout(&mut self, now: $crate::wire::Instant) {
                self.$eng.handle_timeout(now, &mut self.$mem);
            }
        }
    };
}

/// Which timers [`settle`] jumps to when both stations are quiet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timers {
    /// None: return as soon as both are quiet.
    Never,
    /// Those due by this instant.
    Until(Instant),
    /// Those due within this long of the current time (re-read after every jump).
    Within(Duration),
}

/// How [`settle`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settle {
    /// Rounds at most.
    pub max_rounds: usize,
    /// Virtual time each round that moves frames takes.
    pub step: Duration,
    /// Timers to jump to when quiet.
    pub timers: Timers,
}

/// Moves time to the earlier station timer if it is due by `limit` and runs both
/// stations' timers; false (time unchanged) if no timer is due by then.
pub fn next_timer<A: Station, B: Station>(
    a: &mut A,
    b: &mut B,
    now: &mut Instant,
    limit: Instant,
) -> bool {
    let next = [a.poll_timeout(), b.poll_timeout()]
        .into_iter()
        .flatten()
        .min();
    match next {
        Some(t) if t <= limit => {
            *now = t.max(*now);
            a.handle_timeout(*now);
            b.handle_timeout(*now);
            true
        }
        _ => false,
    }
}

/// Moves frames until both stations are quiet and no timer of `s.timers` is due. Each
/// frame goes through `filter(to_b, frame)` first; `false` drops it. Returns false if
/// `s.max_rounds` rounds did not settle it.
pub fn settle<A: Station, B: Station>(
    a: &mut A,
    b: &mut B,
    now: &mut Instant,
    s: Settle,
    mut filter: impl FnMut(bool, &mut Vec<u8>) -> bool,
) -> bool {
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    let mut passed = Vec::new();
    for _ in 0..s.max_rounds {
        a.drain(*now, &mut fa);
        b.drain(*now, &mut fb);
        if fa.is_empty() && fb.is_empty() {
            let limit = match s.timers {
                Timers::Never => return true,
                Timers::Until(t) => t,
                Timers::Within(d) => *now + d,
            };
            if !next_timer(a, b, now, limit) {
                return true;
            }
            continue;
        }
        *now += s.step;
        // Each direction's frames of the round arrive as one burst.
        passed.clear();
        passed.extend(
            fa.drain(..)
                .filter_map(|mut f| filter(true, &mut f).then_some(f)),
        );
        b.deliver_burst(*now, &passed);
        passed.clear();
        passed.extend(
            fb.drain(..)
                .filter_map(|mut f| filter(false, &mut f).then_some(f)),
        );
        a.deliver_burst(*now, &passed);
    }
    false
}
