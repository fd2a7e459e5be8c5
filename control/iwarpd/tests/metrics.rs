//! The metrics endpoint (`daemon.metrics_listen`) of a real daemon: scraped over TCP,
//! values checked, and the body checked by Prometheus's own parser and linter
//! (`promtool check metrics`, Debian package `prometheus`; `scripts/setup.sh` installs it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_iwarpd");

/// Held by each test for its whole run: the test threads would otherwise start their
/// busy-polling daemons side by side on two CPUs (and one test's scrapes could take the
/// port another test's daemon is about to listen on).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed holding it poisons it; the next one still runs.
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// One HTTP exchange: (status line, headers, body).
fn http(addr: SocketAddr, request: &str) -> std::io::Result<(String, String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(request.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Ok((status.to_string(), headers.to_string(), body.to_string()))
}

fn get(addr: SocketAddr, path: &str) -> std::io::Result<(String, String, String)> {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
}

/// The value of the sample line that starts with `series ` (name and labels).
fn value(body: &str, series: &str) -> Option<u64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

struct Daemon(Child);

impl Drop for Daemon {
    /// A test that failed still stops its daemon in order (SIGTERM: its files go), and
    /// kills it only if that does not work.
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let end = Instant::now() + Duration::from_secs(30);
            while Instant::now() < end && matches!(self.0.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Parses OpenMetrics text from stdin strictly; prints each family's name, type and
/// number of samples.
const OPENMETRICS_PARSE: &str = "import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse
for f in parse(sys.stdin.read()):
    print(f.name, f.type, len(f.samples))
";

/// Runs checker `program` with `input` on stdin: its stdout if it succeeds; a failure
/// fails the test. A missing checker fails under CI=true, else it is skipped with a note
/// (`scripts/setup.sh` installs `package`).
fn checker(program: &str, args: &[&str], input: &str, package: &str) -> Option<String> {
    let mut p = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(p) => p,
        Err(e) => {
            assert!(
                !ci(),
                "{program} is missing ({e}) under CI=true: scripts/setup.sh installs it (Debian package {package})"
            );
            eprintln!(
                "{program} missing ({e}): its check skipped; scripts/setup.sh installs {package}"
            );
            return None;
        }
    };
    p.stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .expect("checker stdin");
    let o = p.wait_with_output().expect("checker");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && err.contains("No module named") {
        assert!(
            !ci(),
            "{program}: {err} under CI=true: scripts/setup.sh installs {package}"
        );
        eprintln!("{program}: {err}: its check skipped; scripts/setup.sh installs {package}");
        return None;
    }
    assert!(
        o.status.success(),
        "{program} {args:?}: {out}{err}\ninput:\n{input}"
    );
    Some(out)
}

#[test]
fn a_scrape_of_a_running_daemon_is_valid_openmetrics() {
    let _serial = serial();
    if !is_root() {
        assert!(!ci(), "the metrics test needs root (DPDK) under CI=true");
        eprintln!("not root: the metrics test skipped");
        return;
    }
    let name = format!("t-metrics-{}", std::process::id());
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let listen = format!("daemon.metrics_listen=\"{addr}\"");
    let child = Command::new(BIN)
        .current_dir(&root)
        .args(["--name", &name, "--log-level", "warn", "--core", "0"])
        .args(["--set", "eal.hugepages=\"off\"", "--set", &listen])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iwarpd");
    let mut d = Daemon(child);
    // Up when the endpoint answers (a generous deadline: DPDK starts slowly on a busy
    // machine) and the core has published its counters once.
    let end = Instant::now() + Duration::from_secs(120);
    let first = loop {
        if let Ok(Some(s)) = d.0.try_wait() {
            let mut err = String::new();
            let _ = d.0.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("iwarpd exited early ({s}): {err}");
        }
        if let Ok(r) = get(addr, "/metrics") {
            if value(&r.2, "iwarpd_stats_publications_total{core=\"0\"}").unwrap_or(0) > 0 {
                break r;
            }
        }
        assert!(Instant::now() < end, "the metrics endpoint did not come up");
        std::thread::sleep(Duration::from_millis(100));
    };
    let (status, headers, body) = first;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.lines().any(
            |h| h == "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"
        ),
        "{headers}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    // The core loop runs: its iteration count grows between two scrapes.
    let it = "iwarpd_iterations_total{core=\"0\"}";
    let a = value(&body, it).expect("iterations");
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let b = value(&get(addr, "/metrics").expect("scrape").2, it).expect("iterations");
        if b > a {
            break;
        }
        assert!(Instant::now() < end, "iterations stay at {a}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A memif server without a peer: link down, nothing connected, every port counter
    // labelled with core and port.
    assert_eq!(value(&body, "iwarpd_link_up{port=\"0\"}"), Some(0));
    assert_eq!(
        value(&body, "iwarpd_conns_live{core=\"0\",port=\"0\"}"),
        Some(0)
    );
    assert_eq!(value(&body, "iwarpd_qps{core=\"0\"}"), Some(0));
    assert!(value(&body, "iwarpd_frames_rx_total{core=\"0\",port=\"0\"}").is_some());
    assert!(body.contains("# TYPE iwarpd_frames_rx counter\n"));
    assert!(body.contains("# TYPE iwarpd_conns_live gauge\n"));
    // Anything but /metrics is 404.
    let (status, _, _) = get(addr, "/").expect("GET /");
    assert!(status.starts_with("HTTP/1.1 404 "), "{status}");
    // Prometheus's own checkers agree: the OpenMetrics body through the strict
    // OpenMetrics parser of prometheus_client (Python), and the 0.0.4 text rendition a
    // `text/plain` client gets through `promtool check metrics` (parser and linter of
    // that format: HELP on every family, counter names, units).
    let families = checker(
        "/usr/bin/python3",
        &["-c", OPENMETRICS_PARSE],
        &body,
        "python3-prometheus-client",
    );
    if let Some(out) = families {
        for f in [
            "iwarpd_frames_rx counter",
            "iwarpd_link_up gauge",
            "iwarpd_drops counter",
        ] {
            assert!(
                out.lines().any(|l| l.starts_with(f)),
                "`{f}` not parsed: {out}"
            );
        }
    }
    let (status, headers, text) = http(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n"),
    )
    .expect("text scrape");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{headers}"
    );
    assert!(text.contains("# TYPE iwarpd_frames_rx_total counter\n"));
    checker("promtool", &["check", "metrics"], &text, "prometheus");
    // A second daemon asked for the same address stops at once, naming the key, before
    // it has created any file.
    let other = format!("{name}-b");
    let o = Command::new(BIN)
        .current_dir(&root)
        .args(["--name", &other, "--log-level", "warn", "--core", "0"])
        .args(["--set", "eal.hugepages=\"off\"", "--set", &listen])
        .output()
        .expect("run the second iwarpd");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("daemon.metrics_listen: cannot listen on") && err.contains(&addr.to_string()),
        "{err}"
    );
    for f in ["sock", "verbs"] {
        let p = format!("/run/iwarpd/{other}.{f}");
        assert!(!Path::new(&p).exists(), "{p} left behind");
    }
    // An orderly stop closes the endpoint.
    let _ = Command::new("kill")
        .args(["-TERM", &d.0.id().to_string()])
        .status();
    let end = Instant::now() + Duration::from_secs(60);
    let st = loop {
        if let Ok(Some(s)) = d.0.try_wait() {
            break s;
        }
        assert!(Instant::now() < end, "iwarpd did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(st.code(), Some(0));
    assert!(
        get(addr, "/metrics").is_err(),
        "the endpoint outlived the daemon"
    );
}

/// The counters in DPDK telemetry (`eal.telemetry`, on by default): DPDK's own client,
/// `dpdk-telemetry.py` (Debian package `dpdk-dev`), reads `/iwarp/counters`,
/// `/iwarp/core,N` and `/iwarp/port,N`; an index out of range is an error (null).
#[test]
fn dpdk_telemetry_serves_the_counters() {
    let _serial = serial();
    if !is_root() {
        assert!(!ci(), "the telemetry test needs root (DPDK) under CI=true");
        eprintln!("not root: the telemetry test skipped");
        return;
    }
    let name = format!("t-telemetry-{}", std::process::id());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let child = Command::new(BIN)
        .current_dir(&root)
        .args(["--name", &name, "--log-level", "warn", "--core", "0"])
        .args(["--set", "eal.hugepages=\"off\""])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iwarpd");
    let mut d = Daemon(child);
    let socket = Path::new("/var/run/dpdk")
        .join(&name)
        .join("dpdk_telemetry.v2");
    let commands = "/iwarp/counters\n/iwarp/core,0\n/iwarp/port,0\n/iwarp/core,9\n";
    let end = Instant::now() + Duration::from_secs(120);
    let out = loop {
        if let Ok(Some(s)) = d.0.try_wait() {
            let mut err = String::new();
            let _ = d.0.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("iwarpd exited early ({s}): {err}");
        }
        if socket.exists() {
            let Some(out) = checker("dpdk-telemetry.py", &["-f", &name], commands, "dpdk-dev")
            else {
                return;
            };
            // Registered once the cores run; the core publishes after its first loops.
            if out.contains("\"iterations\": ") && !out.contains("\"iterations\": 0,") {
                break out;
            }
        }
        assert!(
            Instant::now() < end,
            "telemetry did not answer /iwarp/counters"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[0].starts_with("{\"/iwarp/counters\": {\"cores\": 1, \"iterations\": "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("\"frames_rx\": ") && lines[0].contains("\"drop_"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("{\"/iwarp/core\": {\"cores\": 1,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("{\"/iwarp/port\": {\"frames_rx\": "),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "{\"/iwarp/core\": null}", "core 9 does not exist");
}

/// `iwarpd loadgen` with the metrics endpoint and `--interval 1`, against a memif server
/// daemon: while it runs, a scrape shows its messages, bytes and latency histogram
/// (cumulative buckets, `+Inf` = count, accepted by Prometheus's parsers); its standard
/// output has one line per second before the final report (issue 16 items 1 and 5).
#[test]
fn a_load_generator_run_shows_its_progress_and_latency_histogram() {
    let _serial = serial();
    if !is_root() {
        assert!(
            !ci(),
            "the load generator metrics test needs root (DPDK) under CI=true"
        );
        eprintln!("not root: the load generator metrics test skipped");
        return;
    }
    let id = std::process::id();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sock = format!("/run/iwarpd/t-{id}-lgm.memif");
    let server = Command::new(BIN)
        .current_dir(&root)
        .args(["--config", "config/examples/memif-server.toml"])
        .args(["--name", &format!("t-lgm-a-{id}"), "--log-level", "warn"])
        .args(["--core", "1", "--device"])
        .arg(format!("net_memif0,role=server,socket={sock}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server daemon");
    let mut server = Daemon(server);
    // The client's memif connects once: the server must be up first (its stats socket
    // answers once its ports are started; DPDK's memif socket is abstract: no file).
    let server_name = format!("t-lgm-a-{id}");
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let up = Command::new(BIN)
            .current_dir(&root)
            .args(["--name", &server_name, "stats"])
            .output()
            .is_ok_and(|o| o.status.success());
        if up {
            break;
        }
        if let Ok(Some(s)) = server.0.try_wait() {
            panic!("the server daemon exited early ({s})");
        }
        assert!(Instant::now() < end, "the server daemon did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let listen = format!("daemon.metrics_listen=\"{addr}\"");
    let client = Command::new(BIN)
        .current_dir(&root)
        .args(["--config", "config/examples/memif-client.toml"])
        .args(["--name", &format!("t-lgm-b-{id}"), "--log-level", "warn"])
        .args(["--core", "0", "--set", &listen, "--device"])
        .arg(format!("net_memif0,role=client,socket={sock}"))
        .args(["loadgen", "--peer", "198.18.0.1:7000", "--op", "write"])
        .args(["--size", "4K", "--qps", "2", "--depth", "4", "--verify"])
        .args(["--seconds", "6", "--warmup-seconds", "0", "--interval", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the load generator");
    let mut c = Daemon(client);
    // A scrape while it runs, once messages were counted.
    let count = "iwarpd_loadgen_latency_seconds_count";
    let end = Instant::now() + Duration::from_secs(180);
    let body = loop {
        if let Ok(Some(s)) = c.0.try_wait() {
            let mut err = String::new();
            let _ = c.0.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("the load generator ended ({s}) before a scrape showed its figures: {err}");
        }
        if let Ok((_, _, b)) = get(addr, "/metrics") {
            if value(&b, count).unwrap_or(0) > 0 {
                break b;
            }
        }
        assert!(
            Instant::now() < end,
            "no load generator figures on the endpoint"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let n = value(&body, count).unwrap();
    assert!(
        body.contains("# TYPE iwarpd_loadgen_latency_seconds histogram\n"),
        "{body}"
    );
    assert!(value(&body, "iwarpd_loadgen_messages_total").unwrap_or(0) >= n);
    assert!(value(&body, "iwarpd_loadgen_bytes_total").unwrap_or(0) >= 4096 * n);
    let buckets: Vec<u64> = body
        .lines()
        .filter(|l| l.starts_with("iwarpd_loadgen_latency_seconds_bucket{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), 20, "19 bounds and +Inf: {body}");
    assert!(
        buckets.windows(2).all(|w| w[0] <= w[1]),
        "cumulative: {buckets:?}"
    );
    assert_eq!(*buckets.last().unwrap(), n, "+Inf holds every completion");
    assert!(
        buckets[buckets.len() - 2] > 0,
        "some completion within a second"
    );
    if let Some(out) = checker(
        "/usr/bin/python3",
        &["-c", OPENMETRICS_PARSE],
        &body,
        "python3-prometheus-client",
    ) {
        assert!(
            out.lines()
                .any(|l| l.starts_with("iwarpd_loadgen_latency_seconds histogram")),
            "{out}"
        );
    }
    let (_, _, text) = http(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n"),
    )
    .expect("text scrape");
    checker("promtool", &["check", "metrics"], &text, "prometheus");
    // The run ends by itself: one interval line per second, then the verified report.
    let end = Instant::now() + Duration::from_secs(120);
    let st = loop {
        if let Ok(Some(s)) = c.0.try_wait() {
            break s;
        }
        assert!(Instant::now() < end, "the load generator did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    let _ = c.0.stdout.take().map(|mut o| o.read_to_string(&mut out));
    let mut err = String::new();
    let _ = c.0.stderr.take().map(|mut e| e.read_to_string(&mut err));
    assert!(st.success(), "load generator: {st}: {out}{err}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with('[') && l.contains(" Gbit/s ") && l.contains(" p99 "))
        .collect();
    assert!(lines.len() >= 3, "interval lines of a 6 s run: {out}");
    assert!(out.contains("verify mismatches 0"), "{out}");
}
