//! The EAL: one per process, initialised from an argv, cleaned up when the last user
//! (the [`Eal`] handle, a mempool or a port) is gone. Also lcore launching.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iwarp_dpdk_sys as sys;

use crate::error::{rte_errno, strerror, DpdkError};

/// Set once `rte_eal_init` has been attempted; DPDK cannot initialise twice.
static EAL_CLAIMED: AtomicBool = AtomicBool::new(false);

/// Keeps the EAL alive; dropped last, it waits for the workers and calls `rte_eal_cleanup`.
pub(crate) struct EalInner {
    /// The argv strings: the EAL may keep pointers into them for the life of the process.
    _args: Vec<CString>,
    _argv: Vec<*mut c_char>,
    /// `/var/run/dpdk/<prefix>` when `--file-prefix` was given: removed after cleanup.
    runtime_dir: Option<std::path::PathBuf>,
}

// SAFETY: EalInner only holds the argv memory, which nothing mutates after init; moving or
// sharing it between threads is harmless.
unsafe impl Send for EalInner {}
// SAFETY: as above, no interior mutation.
unsafe impl Sync for EalInner {}

impl Drop for EalInner {
    fn drop(&mut self) {
        wait_all_workers();
        // Callbacks still queued for the interrupt thread (a memif peer's disconnect, a
        // closed device's pending unregister) run before the heaps go away; then the
        // thread is parked for good: rte_eal_cleanup does not stop it, and it must not
        // walk its interrupt sources while their memory is unmapped.
        interrupt_barrier();
        // SAFETY: EAL initialised; no code of ours runs on the interrupt thread, and
        // nothing after cleanup needs it (every port is closed: they hold this struct).
        if unsafe { sys::shim_intr_park(BARRIER_TURN_MS) } != 0 {
            // Cleanup is skipped rather than risk it under a running interrupt thread;
            // the process is about to exit and the kernel reclaims the memory.
            return;
        }
        // SAFETY: the EAL was initialised; every mempool and port holds an Arc to this
        // struct, so none is left; the workers have returned. Cleanup runs once.
        unsafe { sys::rte_eal_cleanup() };
        if let Some(dir) = &self.runtime_dir {
            // Best effort: DPDK 22.11 leaves its runtime directory behind.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The initialised DPDK environment (EAL). Only one may exist per process, ever.
#[derive(Clone)]
pub struct Eal {
    pub(crate) inner: Arc<EalInner>,
}

extern "C" fn ignore_signal(_signal: c_int) {}

/// Gives every real-time signal a do-nothing handler, so that net_tap finds none free and
/// polls with `readv` instead of waiting for its rx trigger signal (see the DPDK notes).
/// SIGINT and SIGTERM are left alone.
fn claim_realtime_signals() {
    let handler = ignore_signal as extern "C" fn(c_int) as libc::sighandler_t;
    for signal in libc::SIGRTMIN()..=libc::SIGRTMAX() {
        // SAFETY: installing a handler that does nothing is async-signal-safe; signals
        // glibc reserves are outside SIGRTMIN..=SIGRTMAX.
        unsafe { libc::signal(signal, handler) };
    }
}

impl Eal {
    /// Initialises the EAL with `args` (argv, program name first; see
    /// [`crate::EalArgs::build`]). Fails with [`DpdkError::EalAlreadyInitialised`] on any
    /// second call in the process.
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        let mut c_args = Vec::with_capacity(args.len());
        for a in args {
            c_args.push(
                CString::new(a.as_str()).map_err(|_| DpdkError::InvalidArgument {
                    what: "EAL argument",
                    value: a.clone(),
                })?,
            );
        }
        if EAL_CLAIMED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::EalAlreadyInitialised);
        }
        claim_realtime_signals();
        let mut argv: Vec<*mut c_char> = c_args.iter().map(|c| c.as_ptr() as *mut c_char).collect();
        argv.push(std::ptr::null_mut());
        let argc = c_int::try_from(args.len()).map_err(|_| DpdkError::InvalidArgument {
            what: "EAL argument count",
            value: args.len().to_string(),
        })?;
        // SAFETY: argv holds argc valid NUL-terminated strings plus a NULL; the strings
        // stay alive in EalInner for the life of the EAL (the EAL may keep pointers);
        // EAL_CLAIMED guarantees this is the only call in the process.
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            return Err(DpdkError::EalInit {
                reason: strerror(rte_errno()),
            });
        }
        let runtime_dir = file_prefix(args).map(runtime_dir_of);
        Ok(Eal {
            inner: Arc::new(EalInner {
                _args: c_args,
                _argv: argv,
                runtime_dir,
            }),
        })
    }

    /// Id of the main lcore.
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: EAL initialised (we hold it).
        unsafe { sys::rte_get_main_lcore() }
    }

    /// All enabled lcores, the main one included, in id order.
    pub fn lcores(&self) -> Vec<u32> {
        self.lcores_from(false)
    }

    /// The enabled worker lcores (dataplane cores), in id order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        self.lcores_from(true)
    }

    fn lcores_from(&self, skip_main: bool) -> Vec<u32> {
        let mut out = Vec::new();
        let mut id = u32::MAX;
        loop {
            // SAFETY: EAL initialised; rte_get_next_lcore accepts any previous id.
            id = unsafe { sys::rte_get_next_lcore(id, c_int::from(skip_main), 0) };
            if id >= sys::RTE_MAX_LCORE {
                return out;
            }
            out.push(id);
        }
    }

    /// The lcore id of the calling thread (`u32::MAX` on a non-EAL thread).
    pub fn current_lcore() -> u32 {
        // SAFETY: reads a thread-local; valid on any thread.
        unsafe { sys::shim_lcore_id() }
    }

    /// NUMA socket of an lcore.
    pub fn lcore_socket(&self, lcore_id: u32) -> u32 {
        // SAFETY: EAL initialised; out-of-range ids return an invalid socket, no UB.
        unsafe { sys::rte_lcore_to_socket_id(lcore_id) }
    }

    /// Runs `f` on worker lcore `lcore_id`; its return value comes back from
    /// [`Eal::wait`]. A panic inside `f` is caught and reported as `-1`.
    pub fn launch<F>(&self, lcore_id: u32, f: F) -> Result<(), DpdkError>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        if !self.worker_lcores().contains(&lcore_id) {
            return Err(DpdkError::State {
                what: format!("lcore {lcore_id} is not an enabled worker lcore"),
            });
        }
        let job: Box<Job> = Box::new(Box::new(f));
        let arg = Box::into_raw(job).cast::<c_void>();
        // SAFETY: trampoline matches lcore_function_t; arg is a leaked Box<Job> that the
        // trampoline takes back exactly once, or that we take back below if the launch
        // is refused (then the trampoline never runs).
        let ret = unsafe { sys::rte_eal_remote_launch(Some(trampoline), arg, lcore_id) };
        if ret != 0 {
            // SAFETY: the launch failed, so the trampoline will not run: we own arg again.
            drop(unsafe { Box::from_raw(arg.cast::<Job>()) });
            return Err(DpdkError::Busy {
                what: format!("lcore {lcore_id}: {}", strerror(ret)),
            });
        }
        Ok(())
    }

    /// Waits until lcore `lcore_id` has finished its job; returns the job's value (0 if
    /// it ran none).
    pub fn wait(&self, lcore_id: u32) -> i32 {
        // SAFETY: EAL initialised; must be called from the main lcore (the thread that
        // called init), which is where the daemon's control code runs.
        unsafe { sys::rte_eal_wait_lcore(lcore_id) }
    }
}

/// The `--file-prefix` value of an EAL argv, if any.
fn file_prefix(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--file-prefix=") {
            return Some(v.to_owned());
        }
        if a == "--file-prefix" {
            return it.next().cloned();
        }
    }
    None
}

/// The runtime directory the EAL creates for a file prefix (as root).
pub fn runtime_dir_of(prefix: String) -> std::path::PathBuf {
    std::path::Path::new("/var/run/dpdk").join(prefix)
}

type Job = Box<dyn FnOnce() -> i32 + Send>;

/// The lcore entry point of [`Eal::launch`]: runs the boxed job, turning a panic into -1.
///
/// # Safety
///
/// `arg` must come from `Box::into_raw` of a `Box<Job>` in `launch`, and be passed here
/// exactly once (DPDK calls the function once per successful `rte_eal_remote_launch`).
unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: arg comes from Box::into_raw in `launch` and is taken back exactly once.
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or(-1)
}

fn wait_all_workers() {
    let mut id = u32::MAX;
    loop {
        // SAFETY: EAL still initialised (called before cleanup).
        id = unsafe { sys::rte_get_next_lcore(id, 1, 0) };
        if id >= sys::RTE_MAX_LCORE {
            return;
        }
        // SAFETY: as above; returns at once for an idle lcore.
        unsafe { sys::rte_eal_wait_lcore(id) };
    }
}

/// Turns of the interrupt thread's event loop [`interrupt_barrier`] waits for.
const BARRIER_ROUNDS: u32 = 3;
/// Longest wait for one turn, milliseconds.
const BARRIER_TURN_MS: u32 = 1000;

/// Waits (bounded: [`BARRIER_ROUNDS`] x [`BARRIER_TURN_MS`]) until the EAL interrupt
/// thread has handled every event pending now, and what those set off. memif handles a
/// peer's disconnect there with `rte_free`: after a port close and before
/// `rte_eal_cleanup` this lets it finish while the heaps exist. Returns false if a turn
/// timed out. Must not be called on the interrupt thread (no code of ours runs there).
pub(crate) fn interrupt_barrier() -> bool {
    // SAFETY: the EAL is initialised (callers hold it); the shim waits on its own stack
    // variable and cancels the alarm before returning on a timeout.
    unsafe { sys::shim_intr_barrier(BARRIER_ROUNDS, BARRIER_TURN_MS) == 0 }
}

/// The TSC frequency in Hz (after init).
pub fn tsc_hz() -> u64 {
    // SAFETY: reads a value set by the EAL; 0 before init.
    unsafe { sys::shim_get_tsc_hz() }
}

/// The TSC now.
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { sys::shim_rdtsc() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_prefix_is_found_in_both_spellings() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            file_prefix(&a(&["x", "--file-prefix=hostA"])),
            Some("hostA".into())
        );
        assert_eq!(
            file_prefix(&a(&["x", "--file-prefix", "hostB", "-l", "0"])),
            Some("hostB".into())
        );
        assert_eq!(file_prefix(&a(&["x", "-l", "0"])), None);
        assert_eq!(
            runtime_dir_of("p".into()),
            std::path::Path::new("/var/run/dpdk/p")
        );
    }
}
