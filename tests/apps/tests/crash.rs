//! The crash test: 100 cycles of a client process (`apps-traffic` on daemon B, writing
//! and reading back verified data on a server on daemon A) killed with SIGKILL at a
//! random moment of its traffic. After each kill daemon B holds no QP, MR, CQ, arena or
//! any other object of it (admin totals polled until zero, bounded), the server on A
//! saw the connection's `Disconnected`, and a long-lived bystander client on B kept its
//! verified traffic going without a single error. The seed is printed (and taken from
//! `APPS_CRASH_SEED` if set) so that a failure can be replayed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp_apps::side::Side;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;
use rand::{Rng, SeedableRng};

const PORT: u16 = 9600;
const CYCLES: u32 = 100;
const SLOT: usize = 65536;
const BYSTANDER: u32 = u32::MAX;

/// What the server thread reports: a connection of `tag` came up or went down.
#[derive(Debug)]
enum News {
    Listening,
    Up(u32),
    Down(u32),
    Odd(String),
}

/// The server on daemon A: accepts every connection with a 64 KiB slot of its arena
/// (VA, rkey, length in the private data), reports Established and Disconnected.
fn server(socket: std::path::PathBuf, stop: Arc<AtomicBool>, news: mpsc::Sender<News>) {
    let a = Side::open("server", &socket);
    let listener = a.cm.create_id().expect("create_id");
    listener.listen(PORT, 64).expect("listen");
    let _ = news.send(News::Listening);
    let mut conns: HashMap<CmIdHandle, (CmId, Qp, u32)> = HashMap::new();
    let mut next_slot = 1usize;
    while !stop.load(Ordering::Acquire) {
        let ev = match a.cm.get_event_timeout(Duration::from_millis(50)) {
            Ok(e) => e,
            Err(Error::Timeout) | Err(Error::WouldBlock) => continue,
            Err(e) => panic!("server: {e}"),
        };
        match ev.event {
            CmEvent::ConnectRequest { private_data, .. } => {
                let tag = u32::from_le_bytes(private_data[..4].try_into().expect("tag"));
                let id = ev.request.expect("request id");
                let slot = if tag == BYSTANDER {
                    0
                } else {
                    next_slot = next_slot % 15 + 1;
                    next_slot
                };
                let mut attr = QpInitAttr::new(&a.cq, &a.cq);
                attr.sq_sig_all = true;
                let qp = id.create_qp(&a.pd, &attr).expect("server create_qp");
                let mut pd = a.arena.addr(slot * SLOT).to_le_bytes().to_vec();
                pd.extend_from_slice(&a.mr.rkey().0.to_le_bytes());
                pd.extend_from_slice(&(SLOT as u32).to_le_bytes());
                id.accept(
                    &qp,
                    &ConnParam {
                        private_data: pd,
                        ..ConnParam::default()
                    },
                )
                .expect("accept");
                conns.insert(id.handle(), (id, qp, tag));
            }
            CmEvent::Established { .. } => {
                if let Some((_, _, tag)) = conns.get(&ev.id) {
                    let _ = news.send(News::Up(*tag));
                }
            }
            CmEvent::Disconnected => {
                if let Some((id, qp, tag)) = conns.remove(&ev.id) {
                    drop(qp);
                    drop(id);
                    let _ = news.send(News::Down(tag));
                }
            }
            other => {
                let _ = news.send(News::Odd(format!("{:?}: {other:?}", ev.id)));
            }
        }
    }
}

fn spawn_client(socket: &std::path::Path, tag: u32) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_apps-traffic"))
        .arg(socket)
        .arg(format!("198.18.0.1:{PORT}"))
        .arg(tag.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn apps-traffic");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    (child, out)
}

/// Reads the `ready id=N` line (the client id on daemon B).
fn ready(out: &mut BufReader<ChildStdout>, who: &str) -> u32 {
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    line.trim()
        .strip_prefix("ready id=")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{who}: expected `ready id=N`, got {line:?}"))
}

/// Waits for `want` from the server, keeping the rest.
fn wait_news(
    rx: &mpsc::Receiver<News>,
    want: impl Fn(&News) -> bool,
    within: Duration,
    what: &str,
) {
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(n) if want(&n) => return,
            Ok(News::Odd(s)) => eprintln!("server: {s}"),
            Ok(_) => {}
            Err(_) => panic!("{what}: not seen within {within:?}"),
        }
    }
}

#[test]
fn killed_clients_leave_nothing_and_disturb_no_one() {
    if skip("killed_clients_leave_nothing_and_disturb_no_one") {
        return;
    }
    let _lock = SystemLock::acquire();
    let seed: u64 = std::env::var("APPS_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
        });
    eprintln!("crash test seed {seed} (replay with APPS_CRASH_SEED={seed})");
    let result = std::panic::catch_unwind(|| crash_cycles(seed));
    if let Err(e) = result {
        eprintln!("crash test FAILED with seed {seed} (replay with APPS_CRASH_SEED={seed})");
        std::panic::resume_unwind(e);
    }
}

fn crash_cycles(seed: u64) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut pair = DaemonPair::start("crash");
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let srv = {
        let socket = pair.a.socket.clone();
        let stop = stop.clone();
        std::thread::spawn(move || server(socket, stop, tx))
    };
    wait_news(
        &rx,
        |n| matches!(n, News::Listening),
        Duration::from_secs(10),
        "server listening",
    );
    let (mut bystander, mut bout) = spawn_client(&pair.b.socket, BYSTANDER);
    let bystander_id = ready(&mut bout, "bystander");
    // Its progress lines are read as they come (a full pipe would stop it).
    let bout = std::thread::spawn(move || {
        let mut all = String::new();
        for line in bout.lines().map_while(std::io::Result::ok) {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    wait_news(
        &rx,
        |n| matches!(n, News::Up(BYSTANDER)),
        Duration::from_secs(10),
        "bystander Established",
    );
    let mut slowest = Duration::ZERO;
    for cycle in 0..CYCLES {
        let (mut victim, mut vout) = spawn_client(&pair.b.socket, cycle);
        let vid = ready(&mut vout, "victim");
        wait_news(
            &rx,
            |n| matches!(n, News::Up(t) if *t == cycle),
            Duration::from_secs(10),
            "victim Established",
        );
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..30_000)));
        victim.kill().expect("SIGKILL");
        let st = victim.wait().expect("wait");
        if st.code().is_some() {
            let rest: Vec<String> = vout.lines().map_while(std::io::Result::ok).collect();
            panic!("cycle {cycle}: the victim exited by itself ({st}) before the kill: {rest:?}");
        }
        let took = pair
            .b
            .wait_objects_freed(&[bystander_id], Duration::from_secs(10));
        slowest = slowest.max(took);
        let mut admin = pair.b.admin();
        assert!(
            admin.client_totals(vid).unwrap().is_none(),
            "cycle {cycle}: the killed client {vid} is still listed"
        );
        wait_news(
            &rx,
            |n| matches!(n, News::Down(t) if *t == cycle),
            Duration::from_secs(10),
            "peer Disconnected",
        );
        assert!(
            bystander.try_wait().expect("try_wait").is_none(),
            "cycle {cycle}: the bystander exited:\n{}",
            pair.logs()
        );
        assert!(
            pair.a.is_running() && pair.b.is_running(),
            "cycle {cycle}: a daemon died:\n{}",
            pair.logs()
        );
    }
    // The bystander stops cleanly, having seen no error in all that time.
    drop(bystander.stdin.take());
    let st = bystander.wait().expect("wait bystander");
    let rest = bout.join().expect("the bystander's output");
    assert!(st.success(), "the bystander failed ({st}):\n{rest}");
    let done: u64 = rest
        .lines()
        .find_map(|l| l.strip_prefix("done ").and_then(|n| n.parse().ok()))
        .unwrap_or_else(|| panic!("bystander output: {rest}"));
    assert!(done > 0, "the bystander moved no data");
    stop.store(true, Ordering::Release);
    srv.join().expect("server thread");
    pair.b.wait_objects_freed(&[], Duration::from_secs(10));
    pair.a.wait_objects_freed(&[], Duration::from_secs(10));
    iwarpctl_shows_zero(&pair.b.socket);
    eprintln!(
        "{CYCLES} kills in {:?}; slowest teardown {slowest:?}; bystander verified {done} write+read pairs",
        started.elapsed()
    );
}

/// `iwarpctl status --json` of the daemon: every object total is 0.
fn iwarpctl_shows_zero(socket: &std::path::Path) {
    let bin = iwarp_apps::system::workspace_bin("iwarpctl", "iwarpctl");
    let out = Command::new(bin)
        .arg("--socket")
        .arg(socket)
        .args(["--json", "status"])
        .output()
        .expect("run iwarpctl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "iwarpctl status failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let totals = compact
        .split("\"totals\":{")
        .nth(1)
        .and_then(|t| t.split('}').next())
        .unwrap_or_else(|| panic!("no totals in iwarpctl's output: {text}"));
    for field in totals.split(',') {
        assert!(
            field.ends_with(":0"),
            "iwarpctl shows {field} after every client is gone: {text}"
        );
    }
}
