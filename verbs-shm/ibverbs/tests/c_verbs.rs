//! C programs compiled against the system's `<infiniband/verbs.h>` and linked against this
//! library, run against iwarpd: the structures, the ops table behind the header's inline
//! functions, and the errno conventions, as rdma-core's applications see them.

mod common;

use common::*;
use iwarp_apps::{Daemon, SystemLock};

#[test]
fn verbs_objects_through_rdma_cores_header() {
    if !can_run_daemons("verbs_objects_through_rdma_cores_header") {
        return;
    }
    let lib = lib_dir("objects");
    let prog = compile_c("verbs_objects", &lib, &[]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvobj");
    let dir = temp_dir("objects");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &[]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.trim() == "ok",
        "verbs_objects failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}

/// `mw`: memory windows through the header's inline functions and the ops table
/// (`ibv_alloc_mw` answered `EOPNOTSUPP` before).
#[test]
fn memory_windows_through_the_ops_table() {
    if !can_run_daemons("memory_windows_through_the_ops_table") {
        return;
    }
    let lib = lib_dir("mw");
    let prog = compile_c("mw", &lib, &[]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvmw");
    let dir = temp_dir("mw");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &[]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.lines().last() == Some("ok"),
        "mw failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}

/// `rereg`: `ibv_rereg_mr` (access, a new range of application memory, refusals that
/// leave the MR as it was); a stub answering `EOPNOTSUPP` before.
#[test]
fn rereg_mr_changes_access_and_range() {
    if !can_run_daemons("rereg_mr_changes_access_and_range") {
        return;
    }
    let lib = lib_dir("rereg");
    let prog = compile_c("rereg", &lib, &[]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvrereg");
    let dir = temp_dir("rereg");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &[]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.trim() == "ok",
        "rereg failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}

/// `cm_objects`: `rdma_create_qp` without CQs makes them (one channel each), and
/// `rdma_destroy_qp` destroys only those (it answered `EOPNOTSUPP` before).
#[test]
fn rdma_create_qp_makes_the_cqs_it_is_not_given() {
    if !can_run_daemons("rdma_create_qp_makes_the_cqs_it_is_not_given") {
        return;
    }
    let lib = lib_dir("cmobj");
    let prog = compile_c("cm_objects", &lib, &["-lrdmacm"]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("cmobj");
    let dir = temp_dir("cmobj");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &[]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.trim() == "ok",
        "cm_objects failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}

/// Runs `rc_cm server` on daemon A and `rc_cm client` on daemon B with `mode` (empty or
/// "badkey") and returns both outputs; panics with both and the daemons' logs unless
/// both print "ok" and exit 0.
fn run_rc_cm(tag: &str, port: &str, mode: &[&str]) -> (String, String) {
    run_pair("rc_cm", tag, port, mode)
}

/// Runs C program `name` as `server IP PORT MODE...` on daemon A (until it prints
/// "listening") and `client IP PORT MODE...` on daemon B: both outputs, or a panic with
/// both and the daemons' logs unless both print "ok" last and exit 0.
fn run_pair(name: &str, tag: &str, port: &str, mode: &[&str]) -> (String, String) {
    let lib = lib_dir(tag);
    let prog = compile_c(name, &lib, &["-lrdmacm"]);
    let _lock = SystemLock::acquire();
    let pair = iwarp_apps::DaemonPair::start(tag);
    let dir_a = verbs_dir_of(&format!("{tag}-a"), &pair.a);
    let dir_b = verbs_dir_of(&format!("{tag}-b"), &pair.b);
    let ip = format!(
        "{}.{}.{}.{}",
        pair.a.ip[0], pair.a.ip[1], pair.a.ip[2], pair.a.ip[3]
    );
    let run = iwarp_apps::system::workspace_root().join("scripts/iwarp-run");
    let mut server = std::process::Command::new(&run)
        .arg(&prog)
        .args(["server", &ip, port])
        .args(mode)
        .env("IWARP_LIB_DIR", &lib)
        .env("IWARP_VERBS_DIR", &dir_a)
        .env("IWARP_DEBUG", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the server");
    // Wait for "listening" before the client connects.
    let mut so = std::io::BufReader::new(server.stdout.take().expect("server stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut so, &mut line).expect("read the server's first line");
    assert_eq!(line.trim(), "listening", "server did not listen");
    let mut args = vec!["client", ip.as_str(), port];
    args.extend_from_slice(mode);
    let client = iwarp_run(&lib, &dir_b, &prog, &args);
    let (cout, cerr) = text(&client);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < end {
        if let Ok(Some(_)) = server.try_wait() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = server.kill();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut so, &mut rest);
    let sres = server.wait_with_output().expect("server output");
    let serr = String::from_utf8_lossy(&sres.stderr);
    let report = format!(
        "client ({}):\n{cout}\n{cerr}\nserver ({}):\n{rest}\n{serr}\n{}",
        client.status,
        sres.status,
        pair.logs()
    );
    let last = |s: &str| s.lines().last().unwrap_or("").trim().to_string();
    assert!(
        client.status.success() && last(&cout) == "ok",
        "client:\n{report}"
    );
    assert!(
        sres.status.success() && last(&rest) == "ok",
        "server:\n{report}"
    );
    (cout, rest)
}

/// `rc_cm`: SEND/RECV, a 256 KiB RDMA READ and RDMA WRITE, every byte checked on the
/// side that receives it.
#[test]
fn send_write_read_between_two_daemons_through_rdma_cores_headers() {
    if !can_run_daemons("send_write_read_between_two_daemons_through_rdma_cores_headers") {
        return;
    }
    run_rc_cm("rccm", "7300", &[]);
}

/// `rc_cm ... badkey`: an RDMA WRITE with a wrong rkey completes with a remote error;
/// `ibv_get_async_event` names the QP on both sides (the target: access error, the
/// initiator: fatal, from the Terminate it received).
#[test]
fn a_bad_rkey_gives_async_events_naming_the_qps() {
    if !can_run_daemons("a_bad_rkey_gives_async_events_naming_the_qps") {
        return;
    }
    let (client, server) = run_rc_cm("rcbad", "7301", &["badkey"]);
    assert!(
        client.contains("async local work queue catastrophic error"),
        "{client}"
    );
    assert!(
        server.contains("async local access violation work queue error"),
        "{server}"
    );
}

/// `rc_ep`: synchronous endpoints as rdma_server / rdma_client use them (`rdma_create_ep`,
/// `rdma_get_request`, `rdma_accept` / `rdma_connect` / `rdma_disconnect` returning with
/// their event in `id->event`, the `rdma_verbs.h` helpers), SEND, a 128 KiB RDMA READ and
/// WRITE checked byte for byte; `rdma_migrate_id` both ways; the refusals (EINVAL,
/// ECONNREFUSED). Every call answered EOPNOTSUPP or EINVAL before.
#[test]
fn synchronous_endpoints_and_migrate_through_rdma_verbs_h() {
    if !can_run_daemons("synchronous_endpoints_and_migrate_through_rdma_verbs_h") {
        return;
    }
    run_pair("rc_ep", "rcep", "7302", &[]);
}

/// `rc_inline`: inline SENDs and WRITEs (`IBV_SEND_INLINE`) from a stack buffer scribbled
/// over after each post, through an SQ of 16 that fills (`ENOMEM`, then completions
/// polled), every message checked; a type 2 window bound by an `IBV_WR_BIND_MW` WR
/// (`IBV_WC_BIND_MW`) and written through; the refusals (`EINVAL`). Inline WRs and
/// `IBV_WR_BIND_MW` answered `EINVAL` before.
#[test]
fn inline_data_and_bind_mw_work_requests() {
    if !can_run_daemons("inline_data_and_bind_mw_work_requests") {
        return;
    }
    let (client, _) = run_pair("rc_inline", "rcinl", "7303", &[]);
    assert!(client.contains("SQ full"), "{client}");
}

/// `rc_inline ... wr`: the same through `rdma_create_qp_ex` with `send_ops_flags` and the
/// `ibv_wr_*` interface (`ibv_wr_send`, `ibv_wr_rdma_write`, `ibv_wr_rdma_read`,
/// `ibv_wr_bind_mw`, `ibv_wr_set_sge_list`, `ibv_wr_set_inline_data_list`), atomics in
/// `send_ops_flags` refused (`EOPNOTSUPP`).
#[test]
fn inline_data_and_bind_mw_through_the_wr_interface() {
    if !can_run_daemons("inline_data_and_bind_mw_through_the_wr_interface") {
        return;
    }
    let (client, _) = run_pair("rc_inline", "rcwr", "7304", &["wr"]);
    assert!(client.contains("SQ full"), "{client}");
}

/// `edges local`: illegal QP transitions, malformed WRs (`EINVAL`, `bad_wr`, nothing
/// posted), a CQ overrun (`IBV_EVENT_CQ_ERR` naming the CQ), fork after `ibv_fork_init`
/// (the child has no access to registered pages; the parent's bytes intact).
#[test]
fn edges_transitions_bad_wrs_cq_overrun_fork() {
    if !can_run_daemons("edges_transitions_bad_wrs_cq_overrun_fork") {
        return;
    }
    let lib = lib_dir("edges");
    let prog = compile_c("edges", &lib, &[]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvedge");
    let dir = temp_dir("edges");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &["local"]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.lines().last() == Some("ok"),
        "edges local failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}

/// `edges gone`: the daemon is killed under a program holding a context, PD, MR,
/// channel, CQ and QP: `IBV_EVENT_DEVICE_FATAL` once then `EIO`, every verb answers an
/// errno (no hang, no crash), the device list is empty.
#[test]
fn the_daemon_killed_under_a_program_gives_errnos() {
    if !can_run_daemons("the_daemon_killed_under_a_program_gives_errnos") {
        return;
    }
    use std::io::{BufRead, Write};
    let lib = lib_dir("gone");
    let prog = compile_c("edges", &lib, &[]);
    let _lock = SystemLock::acquire();
    let mut d = Daemon::start_alone("ibvgone");
    let dir = temp_dir("gone");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let mut child = iwarp_run_command(&lib, &dir, &prog, &["gone"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start edges gone");
    let mut so = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    so.read_line(&mut line).expect("first line");
    assert_eq!(line.trim(), "ready", "edges gone did not get ready");
    d.kill();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write stdin");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut so, &mut rest);
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(
        status.is_some_and(|s| s.success()) && rest.lines().last() == Some("ok"),
        "edges gone: {status:?} (None: hung 30 s)\n{rest}\n{err}"
    );
}
