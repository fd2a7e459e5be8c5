//! One daemon per name: `/run/iwarpd/<name>.lock`, held with `flock` for the life of the
//! process (the kernel releases it when the process dies, even by `kill -9`). Holding it
//! proves that no live daemon of this name owns the files named after it, so the files a
//! killed predecessor left (verbs and stats sockets, memif socket files) can be removed;
//! a socket another process still answers on is never removed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Directory of the lock files.
pub const LOCK_DIR: &str = "/run/iwarpd";

/// The held lock; dropping it removes the file, then releases the lock.
#[derive(Debug)]
pub struct InstanceLock {
    file: File,
    path: PathBuf,
}

/// Takes the lock of daemon `name` in `dir`, or says which process holds it.
pub fn acquire(dir: &Path, name: &str) -> Result<InstanceLock, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.lock"));
    // The file may be removed by the holder that is exiting between our open and our
    // lock: then the lock we got is on a dead inode, and we try again (bounded).
    for _ in 0..8 {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
        // rustix's flock: File::try_lock is newer than the workspace's rust-version.
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                return Err(format!(
                    "daemon.name `{name}` is already in use by a running iwarpd{} ({} is locked); stop it first or choose another --name",
                    if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {holder})")
                    },
                    path.display()
                ));
            }
            Err(e) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
        let same = match (std::fs::metadata(&path), file.metadata()) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        };
        if !same {
            continue;
        }
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return Ok(InstanceLock { file, path });
    }
    Err(format!(
        "cannot lock {}: it keeps being replaced",
        path.display()
    ))
}

impl InstanceLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // Removed while still locked: a newcomer that opened it meanwhile sees another
        // inode at the path after its lock and retries.
        let _ = std::fs::remove_file(&self.path);
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

/// What [`remove_stale_socket`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Stale {
    /// No file there.
    Absent,
    /// A socket file nobody answers on: removed.
    Removed,
}

/// Removes the unix socket file `path` (for `key`, the configuration key that names it)
/// if nothing answers on it; refuses, naming the key, if a process does.
pub fn remove_stale_socket(path: &Path, key: &str) -> Result<Stale, String> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(Stale::Absent);
    };
    use std::os::unix::fs::FileTypeExt;
    if !meta.file_type().is_socket() {
        return Err(format!(
            "{key}: {} exists and is not a socket; remove it or choose another path",
            path.display()
        ));
    }
    if socket_answers(path) {
        return Err(format!(
            "{key}: {} is in use by another running process (another iwarpd with a different daemon.name but the same path?)",
            path.display()
        ));
    }
    std::fs::remove_file(path).map_err(|e| {
        format!(
            "{key}: cannot remove the stale socket {}: {e}",
            path.display()
        )
    })?;
    Ok(Stale::Removed)
}

/// True if a process accepts connections on the unix socket at `path` (stream or
/// seqpacket: the verbs socket is the latter).
fn socket_answers(path: &Path) -> bool {
    match UnixStream::connect(path) {
        Ok(_) => true,
        // A live SOCK_SEQPACKET listener refuses a stream connect with EPROTOTYPE; a
        // dead socket of any type gives ECONNREFUSED.
        Err(e) => e.raw_os_error() == Some(EPROTOTYPE),
    }
}

/// `EPROTOTYPE` on Linux.
const EPROTOTYPE: i32 = 91;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("iwarpd-lock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_daemon_of_the_same_name_is_refused_and_the_lock_goes_with_its_holder() {
        let d = dir("twice");
        let held = acquire(&d, "x").expect("first");
        let e = acquire(&d, "x").unwrap_err();
        assert!(e.contains("daemon.name `x` is already in use"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        // Another name is independent.
        let other = acquire(&d, "y").expect("another name");
        drop(other);
        let path = held.path().to_path_buf();
        drop(held);
        assert!(!path.exists(), "the lock file is removed at exit");
        drop(acquire(&d, "x").expect("free again"));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_stale_socket_is_removed_and_a_live_one_is_refused() {
        let d = dir("stale");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("s.sock");
        assert_eq!(remove_stale_socket(&path, "k").unwrap(), Stale::Absent);
        // A listener that died (dropped without removing its file): stale.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        assert_eq!(remove_stale_socket(&path, "k").unwrap(), Stale::Removed);
        assert!(!path.exists());
        // A live listener: refused, the key named, the file kept.
        let live = UnixListener::bind(&path).unwrap();
        let e = remove_stale_socket(&path, "daemon.stats_socket").unwrap_err();
        assert!(e.starts_with("daemon.stats_socket:"), "{e}");
        assert!(path.exists());
        drop(live);
        // Not a socket: refused.
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, b"x").unwrap();
        assert!(remove_stale_socket(&path, "k")
            .unwrap_err()
            .contains("not a socket"));
        let _ = std::fs::remove_dir_all(d);
    }
}
