//! The examples of the Rust client crate (`verbs-shm/client/examples`) run as they would
//! for a user: `pingpong` and `write_bw`, the server on daemon A, the client on daemon B,
//! both processes must exit 0 and print their verified summary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iwarp_apps::system::workspace_root;
use iwarp_apps::{skip, Daemon, DaemonPair, SystemLock};

/// Generous: the whole run of one example pair on a loaded 2-core machine.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The built example `name` of `iwarp-verbs` (`target/<profile>/examples/NAME`), built
/// with `cargo build --examples` first when it is not there (`cargo test --workspace`
/// and `cargo build --workspace --all-targets` build it).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = profile_dir.join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace_root())
            .args(["build", "-q", "-p", "iwarp-verbs", "--examples"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        assert!(
            cmd.status().expect("run cargo").success(),
            "cargo build --examples failed"
        );
    }
    assert!(path.exists(), "{} not found", path.display());
    path
}

fn spawn(bin: &Path, daemon: &Daemon, args: &[&str]) -> Child {
    Command::new(bin)
        .arg("--socket")
        .arg(&daemon.socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()))
}

/// Waits (bounded) for the child to exit; kills it past the deadline. Returns its
/// success and output.
fn finish(mut child: Child, what: &str) -> (bool, String) {
    let end = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut out);
    }
    match status {
        Some(st) => (st.success(), format!("{what} ({st}):\n{out}")),
        None => (
            false,
            format!("{what} killed after {RUN_TIMEOUT:?}:\n{out}"),
        ),
    }
}

/// Runs `name` with `args`: server on A (waits for its "listening" line), client on B
/// to A's address. Returns both outputs; panics (with the daemons' logs) unless both
/// succeed.
fn run_pair(pair: &DaemonPair, name: &str, port: u16, args: &[&str]) -> (String, String) {
    let bin = example(name);
    let port = port.to_string();
    let mut sargs = vec!["--server", "--port", &port];
    sargs.extend_from_slice(args);
    let mut server = spawn(&bin, &pair.a, &sargs);
    // The server prints "listening on port N" once its listen is in place.
    let mut first = String::new();
    let mut stdout = BufReader::new(server.stdout.take().expect("stdout"));
    stdout.read_line(&mut first).expect("server stdout");
    if !first.starts_with("listening") {
        let (_, out) = finish(server, "server");
        panic!(
            "{name} server did not listen: {first}{out}\n{}",
            pair.logs()
        );
    }
    server.stdout = None;
    let a_ip = format!(
        "{}.{}.{}.{}",
        pair.a.ip[0], pair.a.ip[1], pair.a.ip[2], pair.a.ip[3]
    );
    let mut cargs = vec!["--connect", &a_ip, "--port", &port];
    cargs.extend_from_slice(args);
    let client = spawn(&bin, &pair.b, &cargs);
    let (cok, cout) = finish(client, "client");
    let (sok, mut sout) = finish(server, "server");
    // The server's stdout was taken for its first line: read the rest.
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
    sout.push_str(&rest);
    assert!(
        cok && sok,
        "{name} failed:\n{cout}\n{sout}\n{}",
        pair.logs()
    );
    eprintln!("{cout}\n{sout}");
    (cout, sout)
}

#[test]
fn pingpong_and_write_bw_examples_run_between_two_daemons() {
    if skip("pingpong_and_write_bw_examples_run_between_two_daemons") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("ex");

    let (c, s) = run_pair(
        &pair,
        "pingpong",
        7174,
        &["--count", "200", "--size", "4096", "--rdma-size", "65536"],
    );
    assert!(
        c.contains("200 round trips of 4096 bytes verified")
            && c.contains("RDMA WRITE+READ of 65536 bytes verified"),
        "pingpong client: {c}"
    );
    assert!(
        s.contains("200 round trips of 4096 bytes verified"),
        "pingpong server: {s}"
    );

    let (c, s) = run_pair(
        &pair,
        "write_bw",
        7175,
        &["--size", "65536", "--iters", "500", "--slots", "7"],
    );
    assert!(
        c.contains("500 WRITEs of 65536 bytes") && c.contains("data verified"),
        "write_bw client: {c}"
    );
    assert!(s.contains("7 slots verified"), "write_bw server: {s}");

    // Everything the examples held is gone from both daemons.
    pair.a.wait_objects_freed(&[], Duration::from_secs(10));
    pair.b.wait_objects_freed(&[], Duration::from_secs(10));
}
