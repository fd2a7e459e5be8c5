//! Debian's unmodified `rping` (rdmacm-utils, linked against rdma-core's librdmacm.so.1
//! and libibverbs.so.1) between two iwarpd joined by memif, through `scripts/iwarp-run`:
//! connection set-up through the CM, SEND/RECV of the buffer advertisements, RDMA READ by
//! the server, RDMA WRITE back, every ping's data validated (`-V`), and the disconnect.
//!
//! rping registers several malloc'd buffers that share heap pages (its control block's
//! SEND and RECV buffers, the ping buffers right after it): `-S 4096` makes them overlap
//! partially, which the client library once refused.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use iwarp_apps::system::workspace_root;
use iwarp_apps::{DaemonPair, SystemLock};

/// Pings per run.
const COUNT: u32 = 100;

#[test]
fn rping_validates_every_ping_between_two_daemons() {
    rping(
        "rping_validates_every_ping_between_two_daemons",
        &[],
        "7174",
    );
}

/// 4 KiB pings: malloc'd buffers that may share a page with an earlier registration
/// (the client library refused those once; whether they do depends on the heap, so the
/// deterministic check is in the client's `remap` unit tests).
#[test]
fn rping_4k_buffers_overlapping_in_the_heap() {
    rping(
        "rping_4k_buffers_overlapping_in_the_heap",
        &["-S", "4096"],
        "7175",
    );
}

fn rping(name: &str, extra: &[&str], port: &str) {
    if !can_run_daemons(name) {
        return;
    }
    let Some(rping) = need_program("rping") else {
        return;
    };
    let lib = lib_dir(name);
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("rping");
    let dir_a = verbs_dir_of(&format!("{name}-a"), &pair.a);
    let dir_b = verbs_dir_of(&format!("{name}-b"), &pair.b);
    let server_ip = format!(
        "{}.{}.{}.{}",
        pair.a.ip[0], pair.a.ip[1], pair.a.ip[2], pair.a.ip[3]
    );
    let count = COUNT.to_string();
    let run = workspace_root().join("scripts/iwarp-run");
    let mut server = Command::new(&run)
        .arg(&rping)
        .args(["-s", "-a", &server_ip, "-p", port, "-C", &count, "-V"])
        .args(extra)
        .env("IWARP_LIB_DIR", &lib)
        .env("IWARP_VERBS_DIR", &dir_a)
        .env("IWARP_DEBUG", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the rping server");
    // The client retries while the server is not listening yet (a refused connect).
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        let o = Command::new(&run)
            .arg(&rping)
            .args(["-c", "-a", &server_ip, "-p", port, "-C", &count, "-V", "-v"])
            .args(extra)
            .env("IWARP_LIB_DIR", &lib)
            .env("IWARP_VERBS_DIR", &dir_b)
            .env("IWARP_DEBUG", "1")
            .output()
            .expect("run the rping client");
        let (out, _) = text(&o);
        if o.status.success() || out.contains("ping data") || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let (cout, cerr) = text(&client);
    // The server ends after COUNT pings and the client's disconnect.
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if let Ok(Some(_)) = server.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.kill();
    let so = server.wait_with_output().expect("server output");
    let (sout, serr) = text(&so);
    let report = format!(
        "client ({}):\n{cout}\n{cerr}\nserver ({}):\n{sout}\n{serr}\n{}",
        client.status,
        so.status,
        pair.logs()
    );
    assert!(client.status.success(), "rping client failed:\n{report}");
    assert!(so.status.success(), "rping server failed:\n{report}");
    let pings = cout
        .lines()
        .filter(|l| l.starts_with("ping data: rdma-ping-"))
        .count();
    assert_eq!(
        pings, COUNT as usize,
        "pings validated by the client:\n{report}"
    );
    let last = format!("ping data: rdma-ping-{}: ", COUNT - 1);
    assert!(cout.contains(&last), "{report}");
    assert!(
        !cerr.contains("data mismatch") && !serr.contains("mismatch"),
        "{report}"
    );
}
