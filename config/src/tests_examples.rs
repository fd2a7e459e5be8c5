//! The example files in `config/examples/`: each loads and validates, and no mutation
//! of them makes the loader panic.

use std::path::PathBuf;

use crate::{Config, Override};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn examples() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_example_loads_and_validates() {
    let ex = examples();
    let names: Vec<&str> = ex.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "af-packet-veth.toml",
        "af-xdp-veth.toml",
        "loadgen-server.toml",
        "memif-client.toml",
        "memif-server.toml",
        "pci-nic.toml",
        "tap.toml",
    ] {
        assert!(names.contains(&want), "{want} is missing");
    }
    for (name, text) in &ex {
        let c = Config::from_toml_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = Config::from_toml_str(&c.to_toml_string().unwrap()).unwrap();
        assert_eq!(again, c, "{name} round trip");
        Config::build(Some(&examples_dir().join(name)), &[]).unwrap();
    }
}

#[test]
fn the_memif_pair_fits_together() {
    let load = |n: &str| Config::build(Some(&examples_dir().join(n)), &[]).unwrap();
    let s = load("memif-server.toml");
    let c = load("memif-client.toml");
    assert_ne!(s.daemon.name, c.daemon.name);
    assert_ne!(s.ports[0].ipv4, c.ports[0].ipv4);
    assert_eq!(s.ports[0].prefix_len, 24);
    let (sv, cv) = (
        s.ports[0].device.vdev().unwrap(),
        c.ports[0].device.vdev().unwrap(),
    );
    assert_eq!(sv.arg("socket"), cv.arg("socket"));
    assert_eq!(sv.arg("role"), Some("server"));
    assert_eq!(cv.arg("role"), Some("client"));
    assert_eq!(s.cores.dataplane.len(), 1);
    assert_eq!(c.cores.dataplane.len(), 1);
    assert_ne!(s.cores.dataplane, c.cores.dataplane);
    assert!(s.loadgen.listen_port != 0);
}

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn mutated_examples_never_panic() {
    const PIECES: &[&str] = &[
        "",
        "0",
        "-1",
        "99999999999999999999",
        "\"\"",
        "\"x\"",
        "[",
        "]",
        "=",
        "[[port]]",
        "\n",
        "true",
        "1.5",
        "[1, \"a\"]",
        "{a = 1}",
        "\"net_memif0,role=\"",
        "\"0000:ff:1f.7\"",
        "#",
        ".",
        "\"\\u0000\"",
        "65536",
        "4294967296",
        "9000",
        "\"198.18.0.300\"",
    ];
    let mut rng = Lcg(0x1234_5678);
    let ex = examples();
    let mut outcomes = [0usize; 2];
    for round in 0..3000 {
        let (_, text) = &ex[round % ex.len()];
        let mut bytes: Vec<u8> = text.as_bytes().to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(3) {
                0 => {
                    let end = (at + rng.below(12)).min(bytes.len());
                    bytes.drain(at..end);
                }
                1 => {
                    let piece = PIECES[rng.below(PIECES.len())];
                    bytes.splice(at..at, piece.bytes());
                }
                _ => {
                    if at < bytes.len() {
                        bytes[at] = bytes[at].wrapping_add(1 + rng.below(40) as u8);
                    }
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let ok = Config::from_toml_str(&text).and_then(|c| {
            c.validate()?;
            c.to_toml_string().map(|_| ())
        });
        outcomes[usize::from(ok.is_ok())] += 1;
        if let Err(e) = ok {
            assert!(!e.field.is_empty() && !e.message.is_empty(), "{e:?}");
        }
    }
    assert!(outcomes[0] > 100 && outcomes[1] > 100, "{outcomes:?}");
    // Overrides with odd keys and values never panic either.
    for i in 0..2000 {
        let key = [
            "port.0.mtu",
            "port[1].device",
            "cores.dataplane.3",
            "eal.extra_args[0]",
            "tcp",
            "port",
            "a.b.c.d",
            "limits.max_qps",
        ][i % 8];
        let value = PIECES[rng.below(PIECES.len())];
        if let Ok(o) = Override::parse(&format!("{key}={value}")) {
            let _ = Config::from_toml_with("", &[o]).map(|c| c.validate());
        }
    }
}
