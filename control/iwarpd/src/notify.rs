//! The systemd service protocol (sd_notify(3)): READY=1 once the ports are started and the
//! verbs socket listens, STOPPING=1 when the shutdown begins, and WATCHDOG=1 from a thread
//! that checks the dataplane cores still publish their counters.
//!
//! Written by hand over a unix datagram socket rather than with a crate: the protocol is
//! one `sendto` of `KEY=VALUE` lines to the path (or abstract name) in `NOTIFY_SOCKET`, it
//! needs no `unsafe` with std's `UnixDatagram`, and the crates add a dependency for 30 lines.
//! Without `NOTIFY_SOCKET` (not started by systemd) every call here does nothing.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iwarp_runtime::CoreStats;

/// Longest sleep of the watchdog thread between two looks at its stop flag.
const WATCHDOG_POLL_MS_MAX: u64 = 100;

/// A connection to the service manager's notification socket.
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// The socket named by `NOTIFY_SOCKET`, if set and usable (a path, or `@name` for an
    /// abstract socket).
    pub fn from_env() -> Option<Notifier> {
        let name = std::env::var_os("NOTIFY_SOCKET")?;
        let name = name.to_str()?;
        let addr = match name.strip_prefix('@') {
            Some(abstract_name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(abstract_name.as_bytes()).ok()?
            }
            None if name.starts_with('/') => SocketAddr::from_pathname(name).ok()?,
            None => return None,
        };
        let sock = UnixDatagram::unbound().ok()?;
        Some(Notifier { sock, addr })
    }

    /// Sends one notification (`KEY=VALUE` lines). Failures are logged, never fatal: the
    /// daemon serves whether or not the manager hears it.
    pub fn send(&self, state: &str) {
        if let Err(e) = self.sock.send_to_addr(state.as_bytes(), &self.addr) {
            tracing::warn!("sd_notify: cannot send to NOTIFY_SOCKET: {e}");
        }
    }
}

/// The watchdog interval the manager asks for: `WATCHDOG_USEC`, when `WATCHDOG_PID` is
/// unset or names this process.
fn watchdog_interval() -> Option<Duration> {
    if let Some(pid) = std::env::var_os("WATCHDOG_PID") {
        if pid.to_str()?.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// The daemon's side of the service protocol, from READY=1 to STOPPING=1.
pub struct Service {
    notifier: Option<Arc<Notifier>>,
    stop: Arc<AtomicBool>,
    watchdog: Option<JoinHandle<()>>,
}

impl Service {
    /// Tells the manager the daemon is ready (with `MAINPID` and `STATUS`) and, if it asks
    /// for a watchdog, starts the thread that pings it while every core is alive.
    pub fn ready(status: &str, cores: Vec<Arc<CoreStats>>) -> Service {
        let notifier = Notifier::from_env().map(Arc::new);
        let stop = Arc::new(AtomicBool::new(false));
        let mut watchdog = None;
        if let Some(n) = &notifier {
            n.send(&format!(
                "READY=1\nMAINPID={}\nSTATUS={status}",
                std::process::id()
            ));
            if let Some(interval) = watchdog_interval() {
                let (n, stop) = (Arc::clone(n), Arc::clone(&stop));
                watchdog = std::thread::Builder::new()
                    .name("iwarpd-watchdog".into())
                    .spawn(move || {
                        let _root = crate::log::root().entered();
                        watch(&n, interval / 2, &cores, &stop)
                    })
                    .map_err(|e| tracing::warn!("sd_notify: no watchdog thread: {e}"))
                    .ok();
            }
        }
        Service {
            notifier,
            stop,
            watchdog,
        }
    }

    /// Tells the manager the shutdown began and ends the watchdog thread.
    pub fn stopping(mut self) {
        if let Some(n) = &self.notifier {
            n.send("STOPPING=1\nSTATUS=stopping");
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.watchdog.take() {
            let _ = t.join();
        }
    }
}

/// Every `period`, sends WATCHDOG=1 if every core published its counters since the last
/// look (a core publishes every millisecond while its loop turns); a stuck core stops the
/// pings, and the manager restarts the service at its watchdog timeout.
fn watch(n: &Notifier, period: Duration, cores: &[Arc<CoreStats>], stop: &AtomicBool) {
    let published = |c: &Arc<CoreStats>| c.publications.load(Ordering::Acquire);
    let mut last: Vec<u64> = cores.iter().map(published).collect();
    let mut stuck_reported = false;
    n.send("WATCHDOG=1");
    let mut next = Instant::now() + period;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            let nap = (next - now).min(Duration::from_millis(WATCHDOG_POLL_MS_MAX));
            std::thread::sleep(nap);
            continue;
        }
        next = now + period;
        let mut stuck = None;
        for (i, (c, l)) in cores.iter().zip(last.iter_mut()).enumerate() {
            let p = published(c);
            if p == *l && stuck.is_none() {
                stuck = Some(i);
            }
            *l = p;
        }
        match stuck {
            None => {
                n.send("WATCHDOG=1");
                stuck_reported = false;
            }
            Some(core) if !stuck_reported => {
                tracing::error!("watchdog: dataplane core {core} stopped publishing its counters");
                n.send(&format!("STATUS=dataplane core {core} is not running"));
                stuck_reported = true;
            }
            Some(_) => {}
        }
    }
}
