//! Replays every file of the checked-in corpora (`dataplane/fuzz/corpus/<target>/`) through
//! the target bodies, so `cargo test` keeps every seed, every input the fuzzer kept and every
//! fixed crash as a regression test.

use std::fs;
use std::path::PathBuf;

use iwarp_fuzz_targets::{target, TARGETS};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The files of one target's corpus, sorted (empty if the directory does not exist).
fn corpus_files(name: &str) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(corpus_dir().join(name)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every file of `name`'s corpus; reports all failing files at once.
fn replay(name: &str) {
    let t = target(name).expect("a known target");
    let files = corpus_files(name);
    assert!(!files.is_empty(), "corpus/{name} is empty");
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let bytes = fs::read(path).expect("readable corpus file");
            std::panic::catch_unwind(|| (t.run)(&bytes)).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{name}: {} of {} corpus files fail (replay one with \
         `cargo fuzz run --fuzz-dir dataplane/fuzz --sanitizer none -O -a {name} FILE`):\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn every_corpus_directory_belongs_to_a_target() {
    let Ok(rd) = fs::read_dir(corpus_dir()) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(target(&name).is_some(), "corpus/{name} has no target");
    }
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let bins = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/fuzz_targets");
    for t in TARGETS {
        assert!(
            bins.join(format!("{}.rs", t.name)).is_file(),
            "no fuzz binary for {}",
            t.name
        );
    }
}

#[test]
fn replay_wire_parsers() {
    replay("wire_parsers");
}

#[test]
fn replay_tcp_segment() {
    replay("tcp_segment");
}

#[test]
fn replay_mpa_stream() {
    replay("mpa_stream");
}

#[test]
fn replay_rdma_rx() {
    replay("rdma_rx");
}

#[test]
fn replay_engine_rx() {
    replay("engine_rx");
}

#[test]
fn replay_service_rings() {
    replay("service_rings");
}

#[test]
fn replay_control_requests() {
    replay("control_requests");
}

#[test]
fn replay_crc_copy() {
    replay("crc_copy");
}

/// The seeds the generator makes from the captures and literals are all checked in, as
/// generated (re-run `cargo run -p iwarp-fuzz-targets --example write_seeds` otherwise).
#[test]
fn generated_seeds_are_checked_in() {
    use iwarp_fuzz_targets::seeds;
    let captures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    let mut all = seeds::literal_seeds();
    match fs::read_dir(&captures) {
        Ok(rd) => {
            let mut pcaps: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
                .collect();
            pcaps.sort();
            for p in pcaps {
                let frames = seeds::frames(&fs::read(&p).expect("readable capture"));
                all.extend(seeds::seeds_from_capture(&frames));
            }
        }
        Err(_) => eprintln!(
            "{}: not found, capture seeds not checked",
            captures.display()
        ),
    }
    for (t, list) in all {
        for s in list {
            let path = corpus_dir().join(t).join(&s.name);
            let got = fs::read(&path).unwrap_or_else(|_| panic!("{} missing", path.display()));
            assert_eq!(
                got,
                s.bytes,
                "{} differs from the generator",
                path.display()
            );
        }
    }
}
