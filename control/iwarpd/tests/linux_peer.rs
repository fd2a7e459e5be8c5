//! iwarpd against the Linux kernel's own TCP: runs `scripts/linux-peer.sh` with this build's
//! `iwarpd` (af_packet and af_xdp ports on a veth in a network namespace; ping, 20 MPA
//! handshakes, bad hellos rejected, then the same with loss, delay and reordering; stats;
//! SIGINT) and checks that every step passed. Needs root (namespaces, AF_PACKET, XDP); as
//! the other DPDK cases, it is skipped with a message otherwise.

use std::path::Path;
use std::process::Command;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn linux_peer_ping_tcp_mpa_clean_and_impaired() {
    if !is_root() {
        // Under CI=true a test that cannot do its real check fails (issue 16 item 6).
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the Linux peer test needs root (network namespaces, DPDK) and CI=true"
        );
        eprintln!(
            "not root: the Linux peer test (network namespaces, af_packet, af_xdp) is skipped"
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/linux-peer.sh"))
        .args(["--iwarpd", env!("CARGO_BIN_EXE_iwarpd")])
        // Own namespace and link names: a manual run of the script may be going on.
        .env(
            "LINUX_PEER_PREFIX",
            format!("iwt{}", std::process::id() % 100_000),
        )
        .current_dir(&root)
        .output()
        .expect("run scripts/linux-peer.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "linux-peer.sh failed:\n{text}");
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_default();
    assert!(
        summary.contains(" 0 failed"),
        "no clean summary line:\n{text}"
    );
    // Both PMDs ran every step: 1 topology step + 12 steps each.
    let passed = text
        .lines()
        .filter(|l| l.starts_with("linux-peer: PASS "))
        .count();
    assert_eq!(passed, 25, "steps passed:\n{text}");
    for needle in [
        "[af_packet] 20 MPA handshakes, impaired",
        "[af_xdp] 20 MPA handshakes, impaired",
        "[af_xdp] SIGINT, exit 0 within grace",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("linux-peer: PASS ") && l.contains(needle)),
            "step `{needle}` did not pass:\n{text}"
        );
    }
    assert!(!text.contains("panicked"), "a process panicked:\n{text}");
}
