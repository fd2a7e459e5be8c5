//! The systemd service protocol as the manager sees it: a unix datagram socket in
//! `NOTIFY_SOCKET` receives READY=1 (with MAINPID and STATUS) once the port is started and
//! the verbs socket listens, WATCHDOG=1 pings while the dataplane core runs, and
//! STOPPING=1 after SIGTERM; the daemon then exits 0.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_iwarpd");

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The next notification, or None after `within` (generous: a liveness bound only).
fn recv(sock: &UnixDatagram, within: Duration) -> Option<String> {
    sock.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Reads notifications until one contains `key` (within 120 s: DPDK's start on a loaded
/// machine may be silent for a long time before READY=1); returns it.
fn until(sock: &UnixDatagram, key: &str, seen: &mut Vec<String>) -> Option<String> {
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        let Some(m) = recv(sock, Duration::from_secs(1)) else {
            continue;
        };
        seen.push(m.clone());
        if m.lines().any(|l| l == key) {
            return Some(m);
        }
    }
    None
}

#[test]
fn notifies_ready_watchdog_and_stopping() {
    if !is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: this test needs root (DPDK)"
        );
        eprintln!("not root: skipped");
        return;
    }
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("iwarpd-notify-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let notify_path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&notify_path).expect("bind NOTIFY_SOCKET");
    let name = format!("t-notify-{id}");
    let verbs = dir.join("verbs.sock");
    let memif = dir.join("port.memif");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut child = Command::new(BIN)
        .current_dir(&root)
        .args([
            "--name",
            &name,
            "--log-level",
            "warn",
            "--core",
            "0",
            "--device",
            &format!("net_memif0,role=server,socket={}", memif.display()),
            "--set",
            "eal.hugepages=\"off\"",
            "--set",
            "control.enabled=true",
            "--set",
            &format!("control.socket=\"{}\"", verbs.display()),
        ])
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "1000000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iwarpd");
    let pid = child.id();
    let mut seen = Vec::new();
    let ready = until(&sock, "READY=1", &mut seen);
    let verbs_listening = verbs.exists();
    let watchdog = ready
        .as_ref()
        .and_then(|_| until(&sock, "WATCHDOG=1", &mut seen));
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let stopping = until(&sock, "STOPPING=1", &mut seen);
    let end = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if Instant::now() > end {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    let log = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    let ready = ready.unwrap_or_else(|| panic!("no READY=1; got {seen:?}; log: {log}"));
    assert!(
        ready.lines().any(|l| l == format!("MAINPID={pid}")),
        "READY=1 without MAINPID={pid}: {ready:?}"
    );
    assert!(
        ready.lines().any(|l| l.starts_with("STATUS=running")),
        "READY=1 without STATUS: {ready:?}"
    );
    assert!(verbs_listening, "READY=1 before the verbs socket existed");
    assert!(
        watchdog.is_some(),
        "no WATCHDOG=1; got {seen:?}; log: {log}"
    );
    assert!(
        stopping.is_some(),
        "no STOPPING=1 after SIGTERM; got {seen:?}; log: {log}"
    );
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "exit after SIGTERM; log: {log}"
    );
}
