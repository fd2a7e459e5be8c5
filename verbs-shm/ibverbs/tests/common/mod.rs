//! What the tests of the drop-in library share: where the built library is, a directory
//! holding it under its soname, running a program through `scripts/iwarp-run`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use iwarp_apps::system::{skip_reason, workspace_root};

/// `target/<profile>`: the test executable lives in `target/<profile>/deps`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("profile dir")
        .to_path_buf()
}

/// A fresh directory (under the system temp dir) named for this test and process.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iwarp-ibverbs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// This build's `librdmacm.so` (crate iwarp-rdmacm, built here if missing: a test cannot
/// depend on a cdylib-only crate).
pub fn rdmacm_so() -> PathBuf {
    let so = profile_dir().join("librdmacm.so");
    if !so.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .current_dir(workspace_root())
            .args(["build", "-q", "-p", "iwarp-rdmacm"])
            .status()
            .expect("run cargo build");
        assert!(st.success(), "cargo build -p iwarp-rdmacm failed");
    }
    assert!(so.exists(), "{} not built", so.display());
    so
}

/// A directory holding `libibverbs.so.1` and `librdmacm.so.1` -> this build's libraries.
pub fn lib_dir(tag: &str) -> PathBuf {
    let so = profile_dir().join("libibverbs.so");
    assert!(so.exists(), "{} not built", so.display());
    let d = temp_dir(&format!("lib-{tag}"));
    std::os::unix::fs::symlink(&so, d.join("libibverbs.so.1")).expect("symlink");
    std::os::unix::fs::symlink(rdmacm_so(), d.join("librdmacm.so.1")).expect("symlink");
    d
}

/// A directory listing only the daemon `d` (other daemons of the machine stay out).
pub fn verbs_dir_of(tag: &str, d: &iwarp_apps::Daemon) -> PathBuf {
    let dir = temp_dir(&format!("verbs-{tag}"));
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).expect("symlink");
    dir
}

/// The path of a system program (Debian's ibverbs-utils, perftest, rdmacm-utils), or None.
pub fn system_program(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// The program, or: under `CI=true` a failure, else None (the caller returns, the test
/// prints why).
pub fn need_program(name: &str) -> Option<PathBuf> {
    match system_program(name) {
        Some(p) => Some(p),
        None => {
            let why = format!("{name} is not installed (scripts/setup.sh installs it)");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// True if daemons can run here; under `CI=true` a machine where they cannot fails.
pub fn can_run_daemons(test: &str) -> bool {
    match skip_reason() {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            false
        }
    }
}

/// Runs `program args` through `scripts/iwarp-run` with the library of `lib` and the
/// daemons of `verbs_dir`, `IWARP_DEBUG=1`: its output.
pub fn iwarp_run(lib: &Path, verbs_dir: &Path, program: &Path, args: &[&str]) -> Output {
    iwarp_run_command(lib, verbs_dir, program, args)
        .output()
        .expect("run scripts/iwarp-run")
}

/// The command [`iwarp_run`] runs, for a caller that drives the program while it runs.
pub fn iwarp_run_command(lib: &Path, verbs_dir: &Path, program: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(workspace_root().join("scripts/iwarp-run"));
    c.arg(program)
        .args(args)
        .env("IWARP_LIB_DIR", lib)
        .env("IWARP_VERBS_DIR", verbs_dir)
        .env("IWARP_DEBUG", "1")
        .env_remove("IWARP_VERBS_SOCKET");
    c
}

/// stdout and stderr of an output, for assertion messages.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Compiles `tests/c/<name>.c` against the system's rdma-core headers and links it
/// against this build's libraries (`-L lib`, `extra` flags such as `-lrdmacm`, then
/// `-libverbs`); the executable.
pub fn compile_c(name: &str, lib: &Path, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let out = temp_dir(&format!("cc-{name}")).join(name);
    // The linker looks for the development names beside the sonames.
    for (dev, so) in [
        ("libibverbs.so", profile_dir().join("libibverbs.so")),
        ("librdmacm.so", rdmacm_so()),
    ] {
        if !lib.join(dev).exists() {
            std::os::unix::fs::symlink(so, lib.join(dev)).expect("symlink");
        }
    }
    let o = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .arg(format!("-L{}", lib.display()))
        .args(extra)
        .arg("-libverbs")
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}
