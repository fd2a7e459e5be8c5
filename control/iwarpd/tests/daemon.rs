//! The daemon as operators meet it: bad configuration, a missing port, a busy memif socket,
//! no hugepages, signals, a memif peer that goes away first, and the two-daemon memif demo.
//! Each case runs the real `iwarpd` binary (DPDK, root) and checks its exit status and its
//! one clear message. The cases run one after another (`serial`), because every daemon
//! takes a CPU of this small machine.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_iwarpd");

/// Held by each test for its whole run: the test threads would otherwise start their
/// busy-polling daemons side by side on two CPUs and starve each other's start-up.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed holding it poisons it; the next one still runs.
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn root() -> &'static Path {
    Box::leak(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .into_boxed_path(),
    )
}

fn iwarpd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(root()).args(args);
    c
}

fn run(args: &[&str]) -> Output {
    iwarpd(args).output().expect("run iwarpd")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn expect_fail(args: &[&str], code: i32, needle: &str) {
    let o = run(args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(code), "iwarpd {args:?}: {t}");
    assert!(
        t.contains(needle),
        "iwarpd {args:?}: expected `{needle}` in: {t}"
    );
    assert!(!t.contains("panicked"), "iwarpd {args:?} panicked: {t}");
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status();
}

/// Starts a daemon in `run` mode and waits until its stats socket answers.
fn start(name: &str, extra: &[&str]) -> Child {
    let mut args = vec!["--name", name, "--log-level", "warn"];
    args.extend_from_slice(extra);
    let mut child = iwarpd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iwarpd");
    // DPDK's start on a loaded machine can take tens of seconds.
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        if run(&["--name", name, "stats"]).status.success() {
            return child;
        }
        if let Ok(Some(s)) = child.try_wait() {
            let o = child.wait_with_output().expect("output");
            panic!("daemon {name} exited early ({s}): {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&child, "-KILL");
    let o = child.wait_with_output().expect("output");
    panic!("daemon {name} did not come up in 120 s: {}", text(&o));
}

/// Every thread of `child` but its dataplane lcores (`rte-worker-*`) may not run on
/// `cpu`, when the machine has another online CPU.
fn assert_threads_off_cpu(child: &Child, cpu: u32) {
    let online = iwarp_config::online_cpus();
    if online.len() < 2 {
        return;
    }
    let tasks = format!("/proc/{}/task", child.id());
    let mut seen = 0;
    for t in std::fs::read_dir(&tasks).expect("task list") {
        let dir = t.expect("task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        else {
            continue;
        };
        let cpus = iwarp_config::parse_cpu_list(list).expect("cpu list");
        if comm.trim().starts_with("rte-worker") {
            assert_eq!(cpus, vec![cpu], "dataplane lcore {comm}");
            continue;
        }
        seen += 1;
        assert!(
            !cpus.contains(&cpu),
            "thread {} may run on dataplane CPU {cpu}: {list}",
            comm.trim()
        );
    }
    assert!(seen >= 2, "no threads found in {tasks}");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn operator_facing_behaviour() {
    let _serial = serial();
    let id = std::process::id();
    // Configuration errors: exit 2, the offending field named, nothing started.
    expect_fail(
        &["--set", "port.0.mtu=70000", "check-config"],
        2,
        "port[0].mtu",
    );
    expect_fail(
        &["--set", "tcp.rto_min_ms=5", "check-config"],
        2,
        "did you mean",
    );
    expect_fail(
        &["--set", "port.0.ipv4=\"300.1.1.1\"", "check-config"],
        2,
        "port[0].ipv4",
    );
    expect_fail(
        &["--config", "/nonexistent.toml", "check-config"],
        2,
        "/nonexistent.toml",
    );
    // check-config runs every check that needs no device (issue 17 item 7): an offline
    // dataplane CPU, an unknown account, two memif servers on one socket; and syntax
    // errors name their key.
    expect_fail(
        &["--set", "cores.dataplane=[1000]", "check-config"],
        2,
        "cores.dataplane: CPU 1000 is not online",
    );
    expect_fail(
        &[
            "--set",
            "control.allow_users=[\"no-such-user-iwarp\"]",
            "check-config",
        ],
        2,
        "control.allow_users[0]",
    );
    expect_fail(
        &[
            "--config",
            "config/examples/perf-loopback.toml",
            "--set",
            "port.1.device=\"net_memif1,role=server,socket=/run/iwarpd/perf-loop.memif,bsize=10240\"",
            "check-config",
        ],
        2,
        "port[1].device: memif server socket",
    );
    let dir = std::env::temp_dir().join(format!("iwarpd-cfg-{id}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let big = dir.join("big.toml");
    std::fs::write(
        &big,
        "[[port]]\ndevice = \"net_ring0\"\nmtu = 99999999999999999999999\n",
    )
    .expect("write");
    expect_fail(
        &["--config", big.to_str().expect("utf-8"), "check-config"],
        2,
        "port[0].mtu: TOML syntax",
    );
    let dup = dir.join("dup.toml");
    std::fs::write(&dup, "[daemon]\nname = \"a\"\n\n[daemon]\nname = \"b\"\n").expect("write");
    expect_fail(
        &["--config", dup.to_str().expect("utf-8"), "check-config"],
        2,
        "config error: daemon: TOML syntax",
    );
    let _ = std::fs::remove_dir_all(&dir);
    let ok = run(&["check-config"]);
    assert!(
        ok.status.success(),
        "the defaults must validate: {}",
        text(&ok)
    );
    assert!(run(&["--help"]).status.success());
    assert!(text(&run(&["--help-config"])).contains("delayed_ack_us"));
    if !need_root("the DPDK cases of operator_facing_behaviour") {
        return;
    }
    // A port that does not exist: one message, exit 1.
    expect_fail(
        &[
            "--name",
            &format!("t-nodev-{id}"),
            "--device",
            "0000:99:1f.7",
            "--core",
            "0",
        ],
        1,
        "0000:99:1f.7",
    );
    expect_fail(
        &[
            "--name",
            &format!("t-noif-{id}"),
            "--device",
            "net_af_packet0,iface=nosuchif0",
            "--core",
            "0",
            "--set",
            "port.0.checksum=\"software\"",
        ],
        1,
        "port[0].device",
    );
    // More hugepages than reserved with eal.hugepages = "required": a clear refusal.
    expect_fail(
        &[
            "--name",
            &format!("t-huge-{id}"),
            "--core",
            "0",
            "--set",
            "eal.hugepages=\"required\"",
            "--set",
            "port.0.mbufs=2000000",
        ],
        1,
        "hugepages",
    );
    // Without hugepages (eal.hugepages = "off"): runs, and stops on SIGTERM with exit 0.
    let sock_a = format!("/run/iwarpd/t-{id}-a.memif");
    let dev_a = format!("net_memif0,role=server,socket={sock_a}");
    let name_a = format!("t-a-{id}");
    let mut a = start(
        &name_a,
        &[
            "--core",
            "1",
            "--device",
            &dev_a,
            "--set",
            "eal.hugepages=\"off\"",
        ],
    );
    // A second server on the same memif socket: busy, one message, exit 1.
    expect_fail(
        &[
            "--name",
            &format!("t-busy-{id}"),
            "--core",
            "0",
            "--device",
            &dev_a,
        ],
        1,
        "in use",
    );
    // A memif client joins, then dies with SIGKILL while both poll: the server survives.
    let dev_b = format!("net_memif0,role=client,socket={sock_a}");
    let mut b = start(
        &format!("t-b-{id}"),
        &["--core", "0", "--device", &dev_b, "--ip", "198.18.0.2/24"],
    );
    // The control thread and the daemon's other threads keep off the dataplane CPU
    // (cores.control left empty), where a busy-polling core would share its time.
    assert_threads_off_cpu(&a, 1);
    assert_threads_off_cpu(&b, 0);
    // The link comes up (issue 17 item 5: link state in stats, QueryPort, the log).
    let stats_a = || text(&run(&["--name", &name_a, "stats"]));
    let link_is = |want: &str| {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let s = stats_a();
            if s.contains(want) {
                return s;
            }
            assert!(Instant::now() < end, "no `{want}` in the stats: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    link_is("port 0: up");
    signal(&b, "-KILL");
    let _ = b.wait();
    // The survivor sees the link go down, counts it, and logs it (warn, with the time).
    link_is("link_ups 1 link_downs 1");
    link_is("port 0: down");
    assert!(
        a.try_wait().expect("try_wait").is_none(),
        "the server died with its memif peer"
    );
    // The peer comes back: up again.
    let mut b = start(
        &format!("t-b-{id}"),
        &["--core", "0", "--device", &dev_b, "--ip", "198.18.0.2/24"],
    );
    let s = link_is("port 0: up");
    assert!(s.contains("link_ups 2 link_downs 1"), "{s}");
    let json = text(&run(&["--name", &name_a, "stats", "--json"]));
    assert!(
        json.contains("\"links\":[{\"port\":0,\"link_up\":true"),
        "{json}"
    );
    signal(&b, "-TERM");
    let _ = wait_exit(&mut b, Duration::from_secs(30)).expect("the client did not stop");
    link_is("port 0: down");
    signal(&a, "-TERM");
    let st = wait_exit(&mut a, Duration::from_secs(20)).expect("SIGTERM: the daemon did not stop");
    let o = a.wait_with_output().expect("output");
    assert!(st.success(), "exit after SIGTERM: {st}: {}", text(&o));
    assert!(
        text(&o).contains("iterations"),
        "final counters printed at exit: {}",
        text(&o)
    );
    // The log line's time: RFC 3339 in UTC (`2026-11-28T01:18:42.189412Z  WARN ...`).
    assert!(
        text(&o).lines().any(|l| l.contains("port 0: link down")
            && l.starts_with("20")
            && l.split_whitespace()
                .next()
                .is_some_and(|t| t.len() >= 20 && t.as_bytes()[10] == b'T' && t.ends_with('Z'))),
        "link down logged with its time: {}",
        text(&o)
    );
}

#[test]
fn memif_demo_moves_verified_data() {
    let _serial = serial();
    if !need_root("memif_demo_moves_verified_data") {
        return;
    }
    let o = Command::new("bash")
        .arg(root().join("scripts/demo-memif.sh"))
        .env("IWARPD", BIN)
        .output()
        .expect("demo");
    let t = text(&o);
    assert!(o.status.success(), "demo-memif.sh failed:\n{t}");
    assert!(t.contains("demo-memif: 8 passed, 0 failed"), "{t}");
}

#[test]
fn two_cores_per_daemon_share_the_qps_without_forwarding() {
    let _serial = serial();
    if !need_root("two_cores_per_daemon_share_the_qps_without_forwarding") {
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "two dataplane cores need 2 CPUs and CI=true"
        );
        eprintln!("a single CPU: two_cores_per_daemon_share_the_qps_without_forwarding skipped");
        return;
    }
    let id = std::process::id();
    let sock = format!("/run/iwarpd/t-{id}-mc.memif");
    let name_a = format!("t-mc-a-{id}");
    let dev_a = format!("net_memif0,role=server,socket={sock}");
    let mut a = start(
        &name_a,
        &[
            "--config",
            "config/examples/memif-server.toml",
            "--core",
            "0,1",
            "--device",
            &dev_a,
        ],
    );
    let dev_b = format!("net_memif0,role=client,socket={sock}");
    let o = run(&[
        "--config",
        "config/examples/memif-client.toml",
        "--name",
        &format!("t-mc-b-{id}"),
        "--core",
        "0,1",
        "--device",
        &dev_b,
        "--log-level",
        "warn",
        "loadgen",
        "--peer",
        "198.18.0.1:7000",
        "--op",
        "write",
        "--size",
        "4K",
        "--qps",
        "8",
        "--depth",
        "4",
        "--seconds",
        "1",
        "--warmup-seconds",
        "0",
        "--verify",
    ]);
    let t = text(&o);
    let stats = text(&run(&["--name", &name_a, "stats", "--json"]));
    signal(&a, "-INT");
    let st = wait_exit(&mut a, Duration::from_secs(20)).expect("the server did not stop");
    assert!(o.status.success(), "loadgen over two cores: {t}");
    assert!(t.contains("verify mismatches 0"), "{t}");
    assert!(st.success());
    // Both server cores hold connections (each client core opened its QPs with local ports
    // that hash to itself; the symmetric hash gives the same owner on the server), and no
    // frame had to be forwarded between cores.
    let established = json_values(&stats, "conns_established");
    assert!(established.len() >= 3, "per-core counters missing: {stats}");
    assert!(
        established[1..].iter().all(|&n| n > 0),
        "a core got no connection: {established:?} in {stats}"
    );
    let forwarded = json_values(&stats, "forwarded_out");
    assert!(
        forwarded.iter().all(|&n| n == 0),
        "frames were forwarded: {forwarded:?}"
    );
}

/// Every value of `"key":N` in a JSON text, in order.
fn json_values(json: &str, key: &str) -> Vec<u64> {
    json.split(&format!("\"{key}\":"))
        .skip(1)
        .filter_map(|s| s.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

/// Root, or (outside CI) skip: under `CI=true` a test that cannot run fails.
fn need_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} needs root (DPDK) and CI=true"
    );
    eprintln!("not root: {what} skipped");
    false
}

/// The files a daemon of `name` with memif server socket `memif` creates.
fn files_of(name: &str, memif: &str) -> Vec<String> {
    vec![
        format!("/run/iwarpd/{name}.sock"),
        format!("/run/iwarpd/{name}.verbs"),
        format!("/run/iwarpd/{name}.lock"),
        memif.to_string(),
    ]
}

#[test]
fn every_stop_signal_ends_in_order_and_a_killed_daemon_is_replaced() {
    let _serial = serial();
    if !need_root("the signal cases") {
        return;
    }
    let id = std::process::id();
    // SIGINT, SIGTERM, SIGHUP, SIGQUIT: exit 0, final counters printed, every file gone
    // (a memif socket with a file, socket-abstract=no, included).
    for sig in ["INT", "TERM", "HUP", "QUIT"] {
        let name = format!("t-sig{}-{id}", sig.to_lowercase());
        let memif = format!("/run/iwarpd/{name}.memif");
        let dev = format!("net_memif0,role=server,socket={memif},socket-abstract=no");
        let mut d = start(
            &name,
            &[
                "--core",
                "0",
                "--device",
                &dev,
                "--set",
                "eal.hugepages=\"off\"",
                "--set",
                "control.enabled=true",
            ],
        );
        for f in files_of(&name, &memif) {
            assert!(
                Path::new(&f).exists(),
                "SIG{sig}: {f} missing while running"
            );
        }
        signal(&d, &format!("-{sig}"));
        let st = wait_exit(&mut d, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("SIG{sig}: the daemon did not stop"));
        let o = d.wait_with_output().expect("output");
        let t = text(&o);
        assert_eq!(st.code(), Some(0), "SIG{sig}: exit {st}: {t}");
        assert!(t.contains("iterations"), "SIG{sig}: no final counters: {t}");
        for f in files_of(&name, &memif) {
            assert!(!Path::new(&f).exists(), "SIG{sig}: {f} left behind: {t}");
        }
    }
    // kill -9 leaves its files; the next daemon of that name removes them and runs; a
    // third one is refused while the second runs, and leaves the second's files alone.
    let name = format!("t-kill-{id}");
    let memif = format!("/run/iwarpd/{name}.memif");
    let dev = format!("net_memif0,role=server,socket={memif},socket-abstract=no");
    let args = [
        "--core",
        "0",
        "--device",
        &dev,
        "--set",
        "eal.hugepages=\"off\"",
        "--set",
        "control.enabled=true",
        "--set",
        "daemon.log_level=\"info\"",
    ];
    let mut first = start(&name, &args);
    signal(&first, "-KILL");
    let _ = first.wait();
    for f in files_of(&name, &memif) {
        assert!(Path::new(&f).exists(), "kill -9 removed {f}?");
    }
    let mut second = start(&name, &args);
    let third = run(&[&["--name", name.as_str()][..], &args[..]].concat());
    let t3 = text(&third);
    assert_eq!(
        third.status.code(),
        Some(1),
        "a second daemon of one name: {t3}"
    );
    assert!(t3.contains("already in use by a running iwarpd"), "{t3}");
    for f in files_of(&name, &memif) {
        assert!(Path::new(&f).exists(), "the refused daemon removed {f}");
    }
    assert!(run(&["--name", &name, "stats"]).status.success());
    signal(&second, "-TERM");
    let st = wait_exit(&mut second, Duration::from_secs(30)).expect("no stop");
    let o = second.wait_with_output().expect("output");
    let t = text(&o);
    assert!(st.success(), "{st}: {t}");
    assert!(t.contains("removed the stale socket"), "{t}");
    for f in files_of(&name, &memif) {
        assert!(!Path::new(&f).exists(), "{f} left behind: {t}");
    }
}

/// `"key":N` of the `"total"` object of a stats JSON (the first occurrence).
fn total_value(json: &str, key: &str) -> Option<u64> {
    json_values(json, key).first().copied()
}

#[test]
fn a_dead_peers_connections_end_within_the_configured_tcp_bound() {
    let _serial = serial();
    if !need_root("the dead-peer case") {
        return;
    }
    let id = std::process::id();
    let sock = format!("/run/iwarpd/t-{id}-dp.memif");
    let name_a = format!("t-dp-a-{id}");
    let dev_a = format!("net_memif0,role=server,socket={sock}");
    // Timers short enough for a test: keepalive 2 s + 2 x 1 s, retransmissions 4 x at
    // most 500 ms. The bound is about 4 s; the deadline below is generous.
    let tcp = [
        "--set",
        "tcp.keepalive_idle_ms=2000",
        "--set",
        "tcp.keepalive_interval_ms=1000",
        "--set",
        "tcp.keepalive_count=2",
        "--set",
        "tcp.rto_ms_initial=200",
        "--set",
        "tcp.rto_ms_max=500",
        "--set",
        "tcp.max_retries=4",
    ];
    let mut args = vec![
        "--config",
        "config/examples/memif-server.toml",
        "--core",
        "1",
        "--device",
        &dev_a,
    ];
    args.extend_from_slice(&tcp);
    let mut a = start(&name_a, &args);
    let dev_b = format!("net_memif0,role=client,socket={sock}");
    let name_b = format!("t-dp-b-{id}");
    let mut b = iwarpd(&[
        "--config",
        "config/examples/memif-client.toml",
        "--name",
        &name_b,
        "--core",
        "0",
        "--device",
        &dev_b,
        "--log-level",
        "warn",
        "loadgen",
        "--peer",
        "198.18.0.1:7000",
        "--op",
        "write",
        "--size",
        "4K",
        "--qps",
        "2",
        "--depth",
        "4",
        "--seconds",
        "120",
        "--warmup-seconds",
        "0",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn the load generator");
    let stats = || text(&run(&["--name", &name_a, "stats", "--json"]));
    let wait_for = |what: &str, f: &dyn Fn(&str) -> bool, within: Duration| {
        let end = Instant::now() + within;
        loop {
            let s = stats();
            if f(&s) {
                return s;
            }
            assert!(Instant::now() < end, "{what}: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(
        "the load generator's connections never came up",
        &|s| total_value(s, "conns_live").unwrap_or(0) >= 2,
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_millis(500));
    signal(&b, "-KILL");
    let _ = b.wait();
    let killed = Instant::now();
    // What the killed daemon left (a restart of that name would remove it too).
    for f in files_of(&name_b, "") {
        let _ = std::fs::remove_file(f);
    }
    // Without keepalive (the old default) the receiving side's connections stayed live.
    let s = wait_for(
        "the dead peer's connections are still live",
        &|s| total_value(s, "conns_live") == Some(0),
        Duration::from_secs(60),
    );
    let took = killed.elapsed();
    assert!(
        total_value(&s, "tcp_timeouts").unwrap_or(0) >= 2,
        "ended by the TCP timers: {s}"
    );
    assert!(s.contains("\"link_up\":false"), "{s}");
    eprintln!("dead peer's connections ended {took:?} after kill -9");
    signal(&a, "-TERM");
    let st = wait_exit(&mut a, Duration::from_secs(30)).expect("the server did not stop");
    assert!(st.success(), "{st}");
}
