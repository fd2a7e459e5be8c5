//! The library's ABI: every symbol of rdma-core 44's libibverbs.so.1 with its version, the
//! soname, and the distribution's binaries (and the provider libraries perftest links,
//! libmlx5 and libefa) resolving every symbol against it.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::*;

fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The (version, name) pairs of a `symbols.txt` (rdma-core 44's exports, one per line).
fn symbols_txt(path: &str) -> BTreeSet<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[1].to_string())
        })
        .collect()
}

/// The (version, name) pairs a library defines under versions starting with `prefix`.
/// objdump -T: "... DF .text size  VERSION name" (versions of definitions, no parens).
fn exported(so: &std::path::Path, prefix: &str) -> BTreeSet<(String, String)> {
    run("objdump", &["-T", so.to_str().unwrap()])
        .lines()
        .filter(|l| !l.contains("*UND*"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (v, n) = (f.get(f.len().wrapping_sub(2))?, f.last()?);
            (v.starts_with(prefix) && v != n).then(|| (v.to_string(), n.to_string()))
        })
        .collect()
}

#[test]
fn exports_every_rdma_core_44_symbol_with_its_version_and_the_soname() {
    let so = profile_dir().join("libibverbs.so");
    let want = symbols_txt(concat!(env!("CARGO_MANIFEST_DIR"), "/symbols.txt"));
    assert!(want.len() > 140, "symbols.txt has {} symbols", want.len());
    let have = exported(&so, "IBVERBS_");
    let missing: Vec<_> = want.difference(&have).collect();
    let extra: Vec<_> = have.difference(&want).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    assert!(extra.is_empty(), "exported beyond rdma-core 44: {extra:?}");
    let dynamic = run("readelf", &["-d", so.to_str().unwrap()]);
    assert!(
        dynamic.contains("Library soname: [libibverbs.so.1]"),
        "{dynamic}"
    );
}

#[test]
fn librdmacm_exports_every_rdma_core_44_symbol_with_its_version() {
    let so = rdmacm_so();
    let want = symbols_txt(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rdmacm/symbols.txt"
    ));
    assert!(want.len() > 60, "symbols.txt has {} symbols", want.len());
    let have = exported(&so, "RDMACM_");
    assert_eq!(want, have, "librdmacm.so's versioned symbols");
    let dynamic = run("readelf", &["-d", so.to_str().unwrap()]);
    assert!(
        dynamic.contains("Library soname: [librdmacm.so.1]"),
        "{dynamic}"
    );
    assert!(
        dynamic.contains("Shared library: [libibverbs.so.1]"),
        "{dynamic}"
    );
}

#[test]
fn distribution_binaries_resolve_every_symbol_against_it() {
    let lib = lib_dir("abi");
    let mut checked = 0;
    for prog in [
        "ibv_devices",
        "ibv_devinfo",
        "ibv_rc_pingpong",
        "ib_write_bw",
        "rping",
    ] {
        let Some(path) = need_program(prog) else {
            continue;
        };
        let o = Command::new("ldd")
            .arg("-r")
            .arg(&path)
            .env("LD_LIBRARY_PATH", &lib)
            .output()
            .expect("ldd");
        let out =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        let ours = format!("libibverbs.so.1 => {}/libibverbs.so.1", lib.display());
        assert!(
            out.contains(&ours),
            "{prog} does not load our library:\n{out}"
        );
        assert!(
            !out.contains("undefined symbol") && !out.contains("not found"),
            "{prog}: unresolved symbols:\n{out}"
        );
        checked += 1;
    }
    if checked > 0 {
        eprintln!("{checked} programs resolve every symbol");
    }
}
