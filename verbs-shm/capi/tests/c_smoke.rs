//! A C program (tests/c/smoke.c) linked against the installed library, driving the fake
//! daemon of this process: the real C calling convention end to end, WR lists as ring
//! slots, a completion polled from C, error codes and their words.

mod fake;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use fake::FakeDaemon;
use iwarp_shm_socket::Request;
use iwarp_types::{Cqe, QpId, SendOp, Stag, WcOpcode, WcStatus};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// Installs the library into a scratch prefix and builds smoke.c against it.
fn build_smoke() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iwv-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("prefix");
    let mut install = Command::new(crate_dir().join("install.sh"));
    install.arg(&prefix);
    if let Ok(cargo) = std::env::var("CARGO") {
        install.env("CARGO", cargo);
    }
    check(&mut install);
    let pc = |arg: &str| {
        let out = Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .args([arg, "iwarp-verbs"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pkg-config {arg}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let exe = dir.join("smoke");
    let libdir = pc("--variable=libdir");
    check(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"])
            .args(pc("--cflags").split_whitespace())
            .arg(crate_dir().join("tests/c/smoke.c"))
            .arg("-o")
            .arg(&exe)
            .args(pc("--libs").split_whitespace())
            .arg(format!("-Wl,-rpath,{libdir}")),
    );
    exe
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn a_c_program_drives_the_library() {
    let exe = build_smoke();
    let fake = FakeDaemon::listen("smoke");
    let mut child = Command::new(&exe)
        .arg(&fake.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut next = |line: &mut String| {
        line.clear();
        out.read_line(line).unwrap();
        line.clone()
    };
    let first = next(&mut line);
    assert_eq!(
        first.trim(),
        "vendor fake vendor max_qp 16 port9 \"no such object\"",
        "{:?}",
        child.stderr.take().map(std::io::read_to_string)
    );
    let posted = words(&next(&mut line));
    assert_eq!(posted[0], "posted", "{posted:?}");
    let num = |i: usize| posted[i].parse::<u64>().unwrap();
    let (qp, cq, lkey, addr) = (num(2) as u32, num(4) as u32, num(6) as u32, num(8));

    // The list arrived in the SQ ring as C wrote it.
    let send = fake.pop_sq(qp).unwrap();
    assert_eq!((send.wr_id, send.op, send.flags.0), (7, SendOp::Send, 1));
    let sge = send.sgl.as_slice()[0];
    assert_eq!((sge.addr, sge.length, sge.lkey), (addr, 5, Stag(lkey)));
    let write = fake.pop_sq(qp).unwrap();
    assert_eq!(write.wr_id, 8);
    assert_eq!(
        write.op,
        SendOp::Write {
            remote_to: 0x1000,
            rkey: Stag(0x99)
        }
    );
    assert!(fake.pop_sq(qp).is_none());
    let arena = fake
        .requests()
        .iter()
        .find_map(|r| match r {
            Request::RegMr(m) => Some(m.arena.0),
            _ => None,
        })
        .unwrap();
    assert_eq!(fake.arena_bytes(arena, 0, 5), b"smoke");

    fake.push_cqe(
        cq,
        0,
        &Cqe {
            wr_id: 7,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 5,
            qp: QpId(qp),
            invalidated: None,
            solicited: false,
        },
    );
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let wc = next(&mut line);
    assert_eq!(
        wc.trim(),
        format!("wc wr_id 7 status 0 opcode 0 byte_len 5 qp {qp}")
    );
    assert_eq!(next(&mut line).trim(), "done");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let kinds: Vec<_> = fake.requests().iter().map(|r| format!("{r:?}")).collect();
    for k in [
        "DestroyQp",
        "DestroyCq",
        "DeregMr",
        "FreeArena",
        "DeallocPd",
        "Bye",
    ] {
        assert!(
            kinds.iter().any(|r| r.starts_with(k)),
            "no {k} in {kinds:?}"
        );
    }
}
