//! What the machine offers: root, DPDK, the daemon's binaries, a lock that serializes the
//! whole-system tests (each pair of daemons takes every CPU of the 2-core CI machine).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn dpdk_installed() -> bool {
    Command::new("pkg-config")
        .args(["--exists", "libdpdk"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why the whole-system tests cannot run here (`None`: they can). Only two reasons are
/// accepted: not root, or no DPDK. Everything else that is missing is a failure.
pub fn skip_reason() -> Option<String> {
    if !is_root() {
        return Some("not root (iwarpd needs DPDK, which needs root)".into());
    }
    if !dpdk_installed() {
        return Some("DPDK is not installed (pkg-config libdpdk failed)".into());
    }
    None
}

/// Prints why a test is skipped and returns true, or returns false if it may run.
/// Under `CI=true` a test that cannot run fails instead: CI must not pass a check it
/// did not make.
pub fn skip(test: &str) -> bool {
    match skip_reason() {
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test} cannot run under CI=true: {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED {test}: {why}");
            true
        }
        None => false,
    }
}

/// The directory of the workspace's binaries (`target/<profile>`): the test executable
/// lives in `target/<profile>/deps`.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// Path of a binary of another workspace package (`iwarpd`, `iwarpctl`). `$IWARPD` /
/// `$IWARPCTL` override; otherwise `cargo build -p <package>` once (a no-op when
/// `cargo test --workspace` already built it) and the binary beside the test's.
pub fn workspace_bin(name: &str, package: &str) -> PathBuf {
    let var = name.to_uppercase();
    if let Ok(p) = std::env::var(&var) {
        return PathBuf::from(p);
    }
    let path = bin_dir().join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .current_dir(workspace_root())
            .args(["build", "-q", "-p", package, "--bin", name])
            .status()
            .expect("run cargo build");
        assert!(st.success(), "cargo build -p {package} failed");
    }
    assert!(path.exists(), "{} not found (set ${var})", path.display());
    path
}

/// An exclusive lock held while a test runs its daemons: tests of this crate (and of
/// several test binaries) run one after another instead of fighting for 2 CPUs.
pub struct SystemLock {
    _file: File,
}

impl SystemLock {
    /// Blocks until the lock is ours.
    pub fn acquire() -> SystemLock {
        let dir = Path::new("/run/iwarpd");
        let _ = std::fs::create_dir_all(dir);
        let file = File::create(dir.join("apps-tests.lock")).expect("create the lock file");
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).expect("flock");
        SystemLock { _file: file }
    }
}
