//! Writes the seed corpora of the fuzz targets from the siw captures and byte literals.
//!
//! `cargo run -p iwarp-fuzz-targets --example write_seeds [CAPTURES_DIR] [CORPUS_DIR]`
//! (defaults: `shared/captures` beside the repository, `dataplane/fuzz/corpus`). Existing
//! files are kept; seeds are named by content, so re-running adds nothing new.

use std::path::PathBuf;
use std::{env, fs};

use iwarp_fuzz_targets::{seeds, target};

fn main() -> std::io::Result<()> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = env::args().skip(1);
    let captures = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| here.join("../../../shared/captures"));
    let corpus = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| here.join("../fuzz/corpus"));
    let mut pcaps: Vec<PathBuf> = fs::read_dir(&captures)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    pcaps.sort();
    let mut all: Vec<(&str, seeds::Seed)> = Vec::new();
    for p in &pcaps {
        let frames = seeds::frames(&fs::read(p)?);
        eprintln!("{}: {} frames", p.display(), frames.len());
        for (t, list) in seeds::seeds_from_capture(&frames) {
            all.extend(list.into_iter().map(|s| (t, s)));
        }
    }
    for (t, list) in seeds::literal_seeds() {
        all.extend(list.into_iter().map(|s| (t, s)));
    }
    let mut written = 0;
    for (t, s) in all {
        let dir = corpus.join(t);
        fs::create_dir_all(&dir)?;
        let path = dir.join(&s.name);
        if !path.exists() {
            // Every seed must pass its own target before it goes in.
            (target(t).expect("known target").run)(&s.bytes);
            fs::write(&path, &s.bytes)?;
            written += 1;
        }
    }
    eprintln!("{written} new seed files under {}", corpus.display());
    Ok(())
}
