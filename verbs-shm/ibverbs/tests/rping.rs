//! Debian's unmodified `rping` (rdmacm-utils, linked against rdma-core's librdmacm.so.1
//! and libibverbs.so.1) between two iwarpd joined by memif, through `scripts/iwarp-run`:
//! connection set-up through the CM, SEND/RECV of the buffer advertisements, RDMA READ by
//! the server, RDMA WRITE back, every ping's data validated (`-V`), and the disconnect.
//!
//! Both ends run with `MALLOC_MMAP_THRESHOLD_=0` (every malloc its own mapping): the
//! client library refuses to register a buffer whose pages overlap another registration
//! without lying inside it, and rping registers several small malloc'd buffers whose
//! placement in the heap varies from run to run (docs/DROPIN.md, "Not done yet").

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use iwarp_apps_tests::system::workspace_root;
use iwarp_apps_tests::{DaemonPair, SystemLock};

/// Pings per run.
const COUNT: u32 = 100;

#[test]
fn rping_validates_every_ping_between_two_daemons() {
    if !can_run_daemons("rping_validates_every_ping_between_two_daemons") {
        return;
    }
    let Some(rping) = need_program("rping") else {
        return;
    };
    let lib = lib_dir("rping");
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("rping");
    let dir_a = verbs_dir_of("rping-a", &pair.a);
    let dir_b = verbs_dir_of("rping-b", &pair.b);
    let server_ip = format!(
        "{}.{}.{}.{}",
        pair.a.ip[0], pair.a.ip[1], pair.a.ip[2], pair.a.ip[3]
    );
    let port = "7174";
    let count = COUNT.to_string();
    let run = workspace_root().join("scripts/iwarp-run");
    let mut server = Command::new(&run)
        .arg(&rping)
        .args(["-s", "-a", &server_ip, "-p", port, "-C", &count, "-V"])
        .env("MALLOC_MMAP_THRESHOLD_", "0")
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
            .env("MALLOC_MMAP_THRESHOLD_", "0")
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
