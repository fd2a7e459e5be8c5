//! The control path between the daemon's control thread and one dataplane core: two
//! bounded lock-free rings, [`Command`]s in, [`Reply`]s out.
//!
//! The vocabulary is the daemon's and nothing more: start and stop an app, publish the
//! counters, shut down. Verbs and connections are the apps' business (the shared-memory
//! verbs service answers its clients' requests through its own rings), so they go
//! through the engine's API inside the loop, where its doorbells follow by construction.
//!
//! The control thread holds a [`ControlHandle`] (blocking-with-timeout [`ControlHandle::call`],
//! non-blocking [`ControlHandle::send`]); the core holds the matching [`CoreControl`] and
//! executes a bounded number of commands per loop iteration. A reply is never lost for
//! want of room: the core takes a command only while the reply ring has room for its
//! reply.

use core::fmt;

use crate::app::App;

/// Identifies an app started on a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AppId(pub u32);

/// An app handed to a core (or back): a boxed [`App`] that may cross threads.
pub struct AppBox<M>(pub Box<dyn App<M> + Send>);

impl<M> fmt::Debug for AppBox<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppBox")
    }
}

/// What a command asks of the core. The core knows no verbs: verbs and connections reach
/// an engine only through the apps it hosts (the shared-memory verbs service, the load
/// generator), which call the engine's API from inside the loop.
#[derive(Debug)]
pub enum Op<M> {
    /// Start an app bound to the command's port.
    StartApp(AppBox<M>),
    /// Stop an app (its `shutdown` is not called): the reply hands it back.
    StopApp(AppId),
    /// Publish the counters now (read them from the core's `CoreStats` afterwards).
    Snapshot,
    /// Orderly shutdown: apps told to close their connections, then the core's `run`
    /// returns.
    Shutdown {
        /// After this long, the connections still open are reset.
        grace_ms: u64,
    },
}

/// A command: a request id (echoed in the reply), the port (index in the core's port
/// list) and the operation.
#[derive(Debug)]
pub struct Command<M> {
    /// Request id.
    pub id: u64,
    /// Port index on the core.
    pub port: usize,
    /// What to do.
    pub op: Op<M>,
}

/// What a successful command returns.
#[derive(Debug)]
pub enum Done<M> {
    /// Done, nothing to return.
    Ok,
    /// An app started.
    AppStarted(AppId),
    /// A stopped app, handed back.
    AppStopped(AppBox<M>),
}

/// Why a command failed (nothing changed) or a call gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// No port with that index on the core.
    NoSuchPort,
    /// No app with that id.
    NoSuchApp,
    /// The core's app table is full.
    AppTableFull,
    /// The core is shutting down.
    ShuttingDown,
    /// The command ring stayed full until the timeout.
    RingFull,
    /// No reply before the timeout (the command may still run later).
    Timeout,
    /// The core's end of the rings is gone (its loop ended and the core was dropped).
    CoreGone,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for ControlError {}

/// The answer to one command.
#[derive(Debug)]
pub struct Reply<M> {
    /// The command's id.
    pub id: u64,
    /// The core that ran it.
    pub core: usize,
    /// The outcome.
    pub result: Result<Done<M>, ControlError>,
}

mod handle;

pub use handle::{control_channel, ControlHandle, CoreControl};

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::VecMemory;
    use std::time::Duration as StdDuration;

    #[test]
    fn call_times_out_when_nobody_answers() {
        let (mut h, core) = control_channel::<VecMemory>(0, 2, 4);
        let t = std::time::Instant::now();
        let r = h.call(0, Op::Snapshot, StdDuration::from_millis(20));
        assert_eq!(r.unwrap_err(), ControlError::Timeout);
        assert!(t.elapsed() >= StdDuration::from_millis(20));
        assert!(t.elapsed() < StdDuration::from_secs(2));
        // The command is there; the command ring fills and a call then times out too.
        h.send(0, Op::Snapshot).unwrap();
        assert_eq!(
            h.call(0, Op::Snapshot, StdDuration::from_millis(5))
                .unwrap_err(),
            ControlError::RingFull
        );
        assert!(h.core_alive());
        drop(core);
        assert!(!h.core_alive());
        // With the core gone a call fails at once, not after its timeout.
        let t = std::time::Instant::now();
        let (mut h, core) = control_channel::<VecMemory>(0, 2, 4);
        drop(core);
        let r = h.call(0, Op::Snapshot, StdDuration::from_secs(30));
        assert_eq!(r.unwrap_err(), ControlError::CoreGone);
        assert!(t.elapsed() < StdDuration::from_secs(1));
    }

    #[test]
    fn replies_match_ids_and_late_ones_are_kept() {
        let (mut h, core) = control_channel::<VecMemory>(3, 4, 8);
        let first = h.send(1, Op::Snapshot).unwrap();
        let second = h.send(0, Op::StopApp(AppId(7))).unwrap();
        let c = core.pop_command().unwrap();
        assert_eq!((c.id, c.port), (first, 1));
        let c = core.pop_command().unwrap();
        assert_eq!((c.id, c.port), (second, 0));
        assert!(core.push_reply(Reply {
            id: second,
            core: 3,
            result: Err(ControlError::NoSuchApp)
        }));
        assert!(core.push_reply(Reply {
            id: first,
            core: 3,
            result: Ok(Done::Ok)
        }));
        // Asked for the first, the second's reply (read on the way) waits its turn.
        assert!(matches!(h.take_reply(first), Some(Ok(Done::Ok))));
        let r = h.poll_reply().unwrap();
        assert_eq!((r.id, r.core), (second, 3));
        assert!(matches!(r.result, Err(ControlError::NoSuchApp)));
        assert!(h.poll_reply().is_none());
    }

    #[test]
    fn a_command_waits_while_its_reply_has_no_room() {
        let (mut h, core) = control_channel::<VecMemory>(0, 2, 3);
        for _ in 0..2 {
            h.send(0, Op::Snapshot).unwrap();
        }
        for id in 1..=3 {
            assert!(core.push_reply(Reply {
                id: 100 + id,
                core: 0,
                result: Ok(Done::Ok)
            }));
        }
        assert!(core.pop_command().is_none(), "no room for another reply");
        h.poll_reply().unwrap();
        assert!(core.pop_command().is_some());
    }
}
