//! Admission to the verbs socket (issue 17, item 2): local users flooding the socket with
//! connections that never say `Hello` lock no application out, and a client refused by
//! a full daemon hears "daemon full", not "gone".
//!
//! The flood: 1,000 silent connections from `nobody` (whom daemon B admits, so its
//! connections are held until the per-user, pending and Hello bounds close them) and
//! 1,000 from uid 65533 (whom no policy admits), each reopened as the daemon closes it,
//! while a client opened before keeps its verified traffic going and a new client opens
//! and moves verified traffic too.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iwarp_apps::side::*;
use iwarp_apps::{skip, Daemon, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];
const PORT: u16 = 9620;
const CHUNK: usize = 16384;
const FLOOD: usize = 1000;
/// Uids of the flooders: `nobody` (admitted by daemon B) and one no policy names.
const NOBODY: u32 = 65534;
const STRANGER: u32 = 65533;
/// How long a flood may take to be in place (1,000 connects on a busy 2-CPU machine).
const FLOOD_START: Duration = Duration::from_secs(120);

/// A copy of `apps-flood` that any user may run (the target directory may not be
/// reachable for other users).
fn flood_binary() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("apps-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("apps-flood");
    std::fs::copy(env!("CARGO_BIN_EXE_apps-flood"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, bin)
}

struct Flood {
    child: Child,
    lines: mpsc::Receiver<String>,
    who: u32,
}

impl Flood {
    fn start(bin: &Path, socket: &Path, uid: u32) -> Flood {
        let mut child = Command::new(bin)
            .uid(uid)
            .gid(uid)
            .arg(socket)
            .arg(FLOOD.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn apps-flood");
        let out: ChildStdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Flood {
            child,
            lines,
            who: uid,
        }
    }

    fn expect(&self, prefix: &str, within: Duration) -> String {
        match self.lines.recv_timeout(within) {
            Ok(l) if l.starts_with(prefix) => l,
            other => panic!(
                "flood of uid {}: expected `{prefix}...`, got {other:?}",
                self.who
            ),
        }
    }

    /// Closes its stdin: it stops, prints what it did and exits.
    fn stop(mut self) -> String {
        drop(self.child.stdin.take());
        let done = self.expect("done", Duration::from_secs(30));
        let st = self.child.wait().expect("wait apps-flood");
        assert!(st.success(), "flood of uid {}: {st}", self.who);
        done
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// WRITE `CHUNK` bytes of pattern `seed` from `b` into `a`'s arena at `off`, READ them
/// back into `b`'s arena at `off + CHUNK`; both verified.
fn verified_round(a: &Side, b: &mut Side, bqp: &mut Qp, off: usize, seed: u8, wr_id: u64) {
    b.fill(off, CHUNK, seed);
    let sge = b.mr.sge(off as u64, CHUNK as u32).unwrap();
    let op = SendOp::Write {
        remote_to: a.arena.addr(off),
        rkey: a.mr.rkey(),
    };
    let c = b.post_and_complete(bqp, wr(wr_id, op, &[sge]));
    check_cqe(&c, wr_id, WcOpcode::Write, WcStatus::Success);
    assert!(a.wait_holds(off, CHUNK, seed), "{}: Write {wr_id}", b.name);
    let back = off + CHUNK;
    let sge = b.mr.sge(back as u64, CHUNK as u32).unwrap();
    let op = SendOp::Read {
        remote_to: a.arena.addr(off),
        rkey: a.mr.rkey(),
        invalidate_local: false,
    };
    let c = b.post_and_complete(bqp, wr(wr_id + 1, op, &[sge]));
    check_cqe(&c, wr_id + 1, WcOpcode::Read, WcStatus::Success);
    assert!(b.holds(back, CHUNK, seed), "{}: Read {}", b.name, wr_id + 1);
}

#[test]
fn silent_connection_floods_lock_no_one_out() {
    if skip("silent_connection_floods_lock_no_one_out") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start_with("adm", "1", "0", &["control.allow_users=[\"65534\"]"]);
    let mut a = Side::open("server", &pair.a.socket);
    let mut old = Side::open("old client", &pair.b.socket);
    let (_aqp, _aid, mut old_qp, _old_id) = connect(&mut a, A_IP, &mut old, PORT, b"o", b"k");
    verified_round(&a, &mut old, &mut old_qp, 0, 1, 10);

    let (dir, bin) = flood_binary();
    let floods: Vec<Flood> = [NOBODY, STRANGER]
        .iter()
        .map(|&uid| Flood::start(&bin, &pair.b.socket, uid))
        .collect();
    for f in &floods {
        f.expect("flooding", FLOOD_START);
    }
    eprintln!("2 x {FLOOD} silent connections made to {}", pair.b.name);

    // The client opened before the flood keeps working.
    for i in 0..10u8 {
        verified_round(&a, &mut old, &mut old_qp, 0, 20 + i, 100 + 2 * u64::from(i));
    }
    // A new client opens during the flood and moves verified traffic.
    let opened = Instant::now();
    let mut new = match Context::open_path(&pair.b.socket) {
        Ok(ctx) => {
            drop(ctx);
            Side::open("new client", &pair.b.socket)
        }
        Err(e) => panic!(
            "a new client cannot open daemon B during the flood: {e}\n{}",
            pair.logs()
        ),
    };
    eprintln!(
        "a new client opened in {:?} during the flood",
        opened.elapsed()
    );
    let (_aqp2, _aid2, mut new_qp, _new_id) = connect(&mut a, A_IP, &mut new, PORT + 1, b"n", b"k");
    for i in 0..10u8 {
        verified_round(
            &a,
            &mut new,
            &mut new_qp,
            4 * CHUNK,
            60 + i,
            300 + 2 * u64::from(i),
        );
        verified_round(&a, &mut old, &mut old_qp, 0, 80 + i, 500 + 2 * u64::from(i));
    }

    // The daemon refused the stranger at once and held a bounded number of nobody's.
    let mut admin = pair.b.admin();
    let policy = admin.control_counter("control_refused_policy").unwrap();
    let evicted = admin.control_counter("control_pending_evicted").unwrap();
    let timeouts = admin.control_counter("control_hello_timeouts").unwrap();
    let pending = admin.control_counter("control_pending").unwrap();
    eprintln!(
        "during the flood: refused by policy {policy}, pending {pending}, evicted {evicted}, \
         Hello timeouts {timeouts}"
    );
    assert!(
        policy >= FLOOD as u64,
        "uid {STRANGER} refused at once: {policy}"
    );
    assert!(
        pending <= 32,
        "nobody holds at most max_conns_per_uid (32): {pending}"
    );
    assert!(
        evicted + timeouts >= (FLOOD - 32) as u64,
        "nobody's surplus was closed: evicted {evicted}, timeouts {timeouts}"
    );
    let status = admin.status().unwrap();
    assert_eq!(status.clients, 3, "old, new and the admin connection");

    for f in floods {
        eprintln!("flood stopped: {}", f.stop());
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Every flood connection goes with its process.
    let end = Instant::now() + Duration::from_secs(30);
    while admin.control_counter("control_pending").unwrap() != 0 {
        assert!(
            Instant::now() < end,
            "pending connections left after the flood"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    verified_round(&a, &mut old, &mut old_qp, 0, 99, 900);
    drop((old_qp, new_qp, _aqp, _aqp2, _aid, _aid2, _old_id, _new_id));
    drop((old, new, a));
    pair.b.wait_objects_freed(&[], Duration::from_secs(10));
    pair.a.wait_objects_freed(&[], Duration::from_secs(10));
}

/// Opens a client, waiting while the daemon is full of connections that are going
/// (the harness's probes and admin connections close without waiting for the daemon).
fn open_when_room(socket: &Path, what: &str) -> Context {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match Context::open_path(socket) {
            Ok(c) => return c,
            Err(Error::DaemonFull(_)) if Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[test]
fn a_full_daemon_says_full_not_gone() {
    if skip("a_full_daemon_says_full_not_gone") {
        return;
    }
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone_with("full", &["control.max_clients=2"]);
    let one = open_when_room(&d.socket, "first client");
    let two = open_when_room(&d.socket, "second client");
    // Exactly these two are welcomed now (the daemon serves 2): a third is refused.
    match Context::open_path(&d.socket) {
        Err(Error::DaemonFull(m)) => {
            assert!(m.contains("max_clients"), "{m}");
            let text = Error::DaemonFull(m).to_string();
            assert!(text.starts_with("iwarpd is full"), "{text}");
        }
        Err(e) => panic!("a third client of a daemon of 2 got `{e}` ({e:?}), not DaemonFull"),
        Ok(_) => panic!("a third client of a daemon of 2 was welcomed"),
    }
    assert!(!one.is_daemon_gone() && !two.is_daemon_gone());
    one.query_device().expect("the first client still works");
    // One leaves (Bye answered): a new one gets its place.
    drop(one);
    // The drop waits for Bye's answer for a bounded time only: on a starved machine the
    // daemon may still count `one` for a moment, so the admin connection may wait too.
    let end = Instant::now() + Duration::from_secs(10);
    let mut admin = loop {
        match iwarp_apps::admin::RawClient::connect(&d.socket, "apps-tests-admin") {
            Ok(a) => break a,
            Err(e) if Instant::now() < end && e.to_lowercase().contains("full") => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("admin connection after one left: {e}"),
        }
    };
    assert!(admin.control_counter("control_refused_full").unwrap() >= 1);
    drop(admin);
    let three = open_when_room(&d.socket, "a client after one left");
    three.query_device().unwrap();
    drop((two, three));
    d.wait_objects_freed(&[], Duration::from_secs(10));
    let _ = std::io::stderr().flush();
}
