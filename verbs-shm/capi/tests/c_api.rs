//! The C side of the C API: the header compiles alone (C99, C11, C++), its structures
//! and constants are those of the library (compared with the C compiler's own numbers),
//! the example builds through install.sh + pkg-config + make, and — with root and DPDK —
//! the example's client and server ping-pong over two iwarpd joined by memif.

use std::io::{BufRead, BufReader};
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::types::*;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn root() -> PathBuf {
    crate_dir().join("../..")
}

/// A fresh scratch directory for this test process.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iwv-capi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
fn header_compiles_alone() {
    let dir = scratch("header");
    let src = dir.join("only_header.c");
    std::fs::write(&src, "#include \"iwarp_verbs.h\"\n").unwrap();
    let inc = crate_dir().join("include");
    for (cc, std) in [
        ("cc", "-std=c99"),
        ("cc", "-std=c11"),
        ("c++", "-std=c++11"),
    ] {
        let mut cmd = Command::new(cc);
        cmd.args([
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
        ]);
        if cc == "c++" {
            cmd.args(["-x", "c++"]);
        }
        run(cmd.arg("-I").arg(&inc).arg(&src));
    }
}

/// `(C expression, the library's value)`: sizes, offsets and constants.
fn abi_table() -> Vec<(String, u64)> {
    let mut t: Vec<(String, u64)> = Vec::new();
    macro_rules! size {
        ($($ty:ident),*) => {$(
            t.push((format!("sizeof(struct {})", stringify!($ty)), size_of::<$ty>() as u64));
        )*};
    }
    macro_rules! off {
        ($ty:ident: $($f:ident),*) => {$(
            t.push((
                format!("offsetof(struct {}, {})", stringify!($ty), stringify!($f)),
                offset_of!($ty, $f) as u64,
            ));
        )*};
    }
    size!(
        iwv_device_attr,
        iwv_port_attr,
        iwv_async_event,
        iwv_wc,
        iwv_sge,
        iwv_send_wr,
        iwv_recv_wr,
        iwv_qp_cap,
        iwv_qp_init_attr,
        iwv_qp_attr,
        iwv_srq_attr,
        iwv_addr,
        iwv_conn_param,
        iwv_cm_event
    );
    off!(iwv_device_attr: vendor, daemon, version, ports, cores, max_qp, max_qp_wr, max_sge,
        max_cq, max_cqe, max_mr, max_mr_size, max_pd, max_srq, max_srq_wr, max_ird, max_ord,
        max_private_data, max_arena_bytes, memory_windows, srq);
    off!(iwv_port_attr: index, ip, prefix_len, mac, link_up, mtu, speed_mbps, device);
    off!(iwv_async_event: event_type, resource_type, handle, code);
    off!(iwv_wc: wr_id, status, opcode, byte_len, qp_num, wc_flags, invalidated_stag);
    off!(iwv_sge: addr, length, lkey);
    off!(iwv_send_wr: wr_id, next, sg_list, num_sge, opcode, send_flags, invalidate_stag,
        rdma, fast_reg, bind);
    let inner = [
        (
            "rdma.remote_addr",
            offset_of!(iwv_send_wr, rdma) + offset_of!(iwv_rdma, remote_addr),
        ),
        (
            "rdma.rkey",
            offset_of!(iwv_send_wr, rdma) + offset_of!(iwv_rdma, rkey),
        ),
        (
            "fast_reg.arena",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, arena),
        ),
        (
            "fast_reg.offset",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, offset),
        ),
        (
            "fast_reg.length",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, length),
        ),
        (
            "fast_reg.stag",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, stag),
        ),
        (
            "fast_reg.access",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, access),
        ),
        (
            "fast_reg.zero_based",
            offset_of!(iwv_send_wr, fast_reg) + offset_of!(iwv_fast_reg, zero_based),
        ),
        (
            "bind.mw_stag",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, mw_stag),
        ),
        (
            "bind.mr_lkey",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, mr_lkey),
        ),
        (
            "bind.addr",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, addr),
        ),
        (
            "bind.length",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, length),
        ),
        (
            "bind.access",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, access),
        ),
        (
            "bind.zero_based",
            offset_of!(iwv_send_wr, bind) + offset_of!(iwv_bind, zero_based),
        ),
    ];
    for (f, o) in inner {
        t.push((format!("offsetof(struct iwv_send_wr, {f})"), o as u64));
    }
    off!(iwv_recv_wr: wr_id, next, sg_list, num_sge);
    off!(iwv_qp_cap: max_send_wr, max_recv_wr, max_send_sge, max_recv_sge);
    off!(iwv_qp_init_attr: send_cq, recv_cq, srq, cap, sq_sig_all, ord, ird, remote_read,
        remote_write, bind_enabled, qp_context);
    off!(iwv_qp_attr: qp_state, ord, ird, cap, rq_limit, qp_num, core, connected,
        terminate_sent, terminate_received);
    off!(iwv_srq_attr: max_wr, max_sge, srq_limit, armed);
    off!(iwv_addr: ip, port);
    off!(iwv_conn_param: private_data, private_data_len, responder_resources, initiator_depth);
    off!(iwv_cm_event: id, listen_id, event, status, private_data, private_data_len, qp_num,
        remote, local, ird, ord, mpa_code);
    let codes = [
        ("IWV_EPERM", IWV_EPERM),
        ("IWV_ENOENT", IWV_ENOENT),
        ("IWV_EIO", IWV_EIO),
        ("IWV_EBADF", IWV_EBADF),
        ("IWV_EAGAIN", IWV_EAGAIN),
        ("IWV_ENOMEM", IWV_ENOMEM),
        ("IWV_EACCES", IWV_EACCES),
        ("IWV_EFAULT", IWV_EFAULT),
        ("IWV_EBUSY", IWV_EBUSY),
        ("IWV_EXDEV", IWV_EXDEV),
        ("IWV_EINVAL", IWV_EINVAL),
        ("IWV_ENOSPC", IWV_ENOSPC),
        ("IWV_EPROTO", IWV_EPROTO),
        ("IWV_EPROTONOSUPPORT", IWV_EPROTONOSUPPORT),
        ("IWV_EADDRINUSE", IWV_EADDRINUSE),
        ("IWV_ENETUNREACH", IWV_ENETUNREACH),
        ("IWV_ENOTCONN", IWV_ENOTCONN),
        ("IWV_ESHUTDOWN", IWV_ESHUTDOWN),
        ("IWV_ETIMEDOUT", IWV_ETIMEDOUT),
        ("IWV_EDAEMONGONE", IWV_EDAEMONGONE),
        ("IWV_EQUEUEFULL", IWV_EQUEUEFULL),
        ("IWV_EPANIC", IWV_EPANIC),
        ("IWV_EDAEMONFULL", IWV_EDAEMONFULL),
    ];
    for (n, v) in codes {
        t.push((n.into(), v as u64));
    }
    // The Linux errno values the codes claim to be.
    for (n, v) in [
        ("EINVAL", IWV_EINVAL),
        ("EAGAIN", IWV_EAGAIN),
        ("ETIMEDOUT", IWV_ETIMEDOUT),
    ] {
        t.push((n.into(), v as u64));
    }
    use iwarp_types::{WcOpcode, WcStatus};
    for (n, s) in [
        ("IWV_WC_SUCCESS", WcStatus::Success),
        ("IWV_WC_FLUSHED", WcStatus::Flushed),
        ("IWV_WC_INVALID_STAG", WcStatus::InvalidStag),
        ("IWV_WC_INVALID_VA", WcStatus::InvalidVa),
        ("IWV_WC_REMOTE_ACCESS_ERROR", WcStatus::RemoteAccessError),
        (
            "IWV_WC_REMOTE_OPERATION_ERROR",
            WcStatus::RemoteOperationError,
        ),
    ] {
        t.push((n.into(), s as u64));
    }
    for (n, o) in [
        ("IWV_WC_SEND", WcOpcode::Send),
        ("IWV_WC_SEND_SE_INV", WcOpcode::SendSeInv),
        ("IWV_WC_RDMA_WRITE", WcOpcode::Write),
        ("IWV_WC_RDMA_READ_INV", WcOpcode::ReadInv),
        ("IWV_WC_LOCAL_INV", WcOpcode::LocalInv),
        ("IWV_WC_RECV", WcOpcode::Recv),
    ] {
        t.push((n.into(), o as u64));
    }
    let a = iwarp_types::Access::LOCAL_WRITE
        .union(iwarp_types::Access::MW_BIND)
        .0;
    t.push((
        "IWV_ACCESS_LOCAL_WRITE | IWV_ACCESS_MW_BIND".into(),
        a as u64,
    ));
    t.push((
        "IWV_SEND_SIGNALED".into(),
        iwarp_types::SendFlags::SIGNALED.0 as u64,
    ));
    t.push((
        "IWV_SEND_LOCAL_FENCE".into(),
        iwarp_types::SendFlags::LOCAL_FENCE.0 as u64,
    ));
    t.push(("IWV_MAX_SGE".into(), iwarp_types::MAX_SGE as u64));
    t.push((
        "IWV_MAX_PRIVATE_DATA".into(),
        iwarp_verbs::proto::MAX_PRIVATE_DATA as u64,
    ));
    t
}

#[test]
fn abi_matches_the_library() {
    let dir = scratch("abi");
    let table = abi_table();
    let mut src = String::from(
        "#include <errno.h>\n#include <stdio.h>\n#include \"iwarp_verbs.h\"\nint main(void) {\n",
    );
    for (expr, _) in &table {
        src.push_str(&format!(
            "    printf(\"%llu\\n\", (unsigned long long)({expr}));\n"
        ));
    }
    src.push_str("    return 0;\n}\n");
    let c = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&c, src).unwrap();
    run(Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&c)
        .arg("-o")
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    let values: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), table.len());
    let wrong: Vec<_> = table
        .iter()
        .zip(&values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((e, rust), c)| format!("{e}: C {c}, Rust {rust}"))
        .collect();
    assert!(wrong.is_empty(), "ABI mismatch:\n{}", wrong.join("\n"));
}

/// install.sh into a scratch prefix, then `make` the examples against it (once per test
/// process): the directory holding `pingpong` and `pingpong-static`.
fn build_examples() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        let dir = scratch("examples");
        let prefix = dir.join("prefix");
        let mut install = Command::new(crate_dir().join("install.sh"));
        install.arg(&prefix);
        if let Ok(cargo) = std::env::var("CARGO") {
            install.env("CARGO", cargo);
        }
        run(&mut install);
        let pc = std::fs::read_to_string(prefix.join("lib/pkgconfig/iwarp-verbs.pc")).unwrap();
        assert!(pc.contains("Libs: -L${libdir} -liwarp_verbs_capi"), "{pc}");
        assert!(pc.contains("Cflags: -I${includedir}"), "{pc}");
        run(Command::new("make")
            .arg("-C")
            .arg(root().join("examples"))
            .arg(format!("PREFIX={}", prefix.display()))
            .arg(format!("OUT={}", dir.display())));
        dir
    })
}

#[test]
fn pingpong_builds_against_the_library() {
    let dir = build_examples();
    for exe in ["pingpong", "pingpong-static"] {
        // Without arguments it prints its usage and exits 2: it links and loads.
        let out = Command::new(dir.join(exe)).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{exe}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pingpong"));
    }
    // With no daemon, it fails with the library's words, not a crash.
    let out = Command::new(dir.join("pingpong"))
        .args(["client", "198.18.0.1", "-n", "1"])
        .env("IWARP_VERBS_SOCKET", "/nonexistent/iwarpd.verbs")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("iwv_open"),
        "{out:?}"
    );
}

/// Waits at most `within` for `child` to exit (killed after): whether it exited 0, and
/// its output.
fn finish(child: Child, within: Duration, what: &str) -> (bool, String) {
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let end = Instant::now() + within;
    let mut late = false;
    while !waiter.is_finished() {
        if Instant::now() > end {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            late = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = waiter.join().unwrap().unwrap();
    let text = format!(
        "{what} ({}{}):\n{}{}",
        out.status,
        if late { ", killed: too slow" } else { "" },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && !late, text)
}

/// One server and one client of `exe` with `args`; the client's output.
fn pingpong_once(pair: &iwarp_apps::DaemonPair, exe: &Path, port: u16, args: &[&str]) -> String {
    let port_s = port.to_string();
    let mut server = Command::new(exe)
        .args(["server", "-p", &port_s])
        .args(args.iter().filter(|a| ["-e", "-u"].contains(*a)))
        .env("IWARP_VERBS_SOCKET", &pair.a.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.contains("listening") {
        let out = server.wait_with_output().unwrap();
        panic!("server did not listen: {line}{out:?}\n{}", pair.logs());
    }
    let client = Command::new(exe)
        .args(["client", "198.18.0.1", "-p", &port_s])
        .args(args)
        .env("IWARP_VERBS_SOCKET", &pair.b.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (client_ok, client_out) = finish(client, Duration::from_secs(60), "pingpong client");
    let (server_ok, server_out) = finish(server, Duration::from_secs(20), "pingpong server");
    assert!(
        client_ok && server_ok && server_out.contains("all intact"),
        "{client_out}\n{server_out}\n{}",
        pair.logs()
    );
    client_out
}

#[test]
fn pingpong_between_two_daemons() {
    if iwarp_apps::skip("pingpong_between_two_daemons") {
        return;
    }
    let dir = build_examples();
    let _lock = iwarp_apps::SystemLock::acquire();
    let mut pair = iwarp_apps::DaemonPair::start("capi");
    let runs: [(&str, &[&str]); 4] = [
        // Busy polling with two daemons polling on a 2-CPU machine: few iterations.
        ("pingpong", &["-n", "300", "-s", "64"]),
        ("pingpong", &["-n", "1000", "-s", "64", "-e"]),
        ("pingpong-static", &["-n", "100", "-s", "65536", "-e"]),
        // malloc'd memory registered in place on both ends.
        ("pingpong", &["-n", "200", "-s", "4000", "-e", "-u"]),
    ];
    for (i, (exe, args)) in runs.iter().enumerate() {
        let out = pingpong_once(&pair, &dir.join(exe), 18515 + i as u16, args);
        eprintln!("{exe} {args:?}: {}", out.trim());
        assert!(out.contains("all intact: average"), "{out}");
        assert!(out.contains("RDMA Write and Read of"), "{out}");
    }
    // Everything the programs made is gone from both daemons.
    pair.a.wait_objects_freed(&[], Duration::from_secs(10));
    pair.b.wait_objects_freed(&[], Duration::from_secs(10));
    pair.a.stop();
    pair.b.stop();
}
