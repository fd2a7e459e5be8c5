//! Checks a capture with tshark (when it is installed): frames, malformed packets and
//! MPA CRC verdicts, with the options of `/work/shared/captures/README.md`.

use std::path::Path;
use std::process::Command;

/// What tshark says about a capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TsharkVerdict {
    /// Frames in the file.
    pub frames: u64,
    /// Frames tshark flags as malformed.
    pub malformed: u64,
    /// FPDUs whose MPA CRC verified.
    pub good_crc: u64,
    /// FPDUs whose MPA CRC did not verify.
    pub bad_crc: u64,
    /// MPA Request/Reply frames (`iwarp_mpa.key.req` / `.rep`) recognised.
    pub mpa_req_rep: u64,
    /// DDP/RDMAP segments recognised.
    pub ddp_segments: u64,
}

/// The options that keep Wireshark's heuristics from mis-decoding iWARP payload.
pub const TSHARK_OPTS: [&str; 8] = [
    "--disable-heuristic",
    "rpcrdma_iwarp",
    "--disable-heuristic",
    "smb_direct_iwarp",
    "-o",
    "tcp.try_heuristic_first:TRUE",
    "-o",
    "tcp.desegment_tcp_streams:TRUE",
];

/// True if `tshark` can be run.
pub fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(path: &Path, extra: &[&str]) -> Option<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(TSHARK_OPTS)
        .args(extra)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("tshark failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn count_lines(text: &str, needle: &str) -> u64 {
    text.lines().filter(|l| l.contains(needle)).count() as u64
}

/// Runs tshark over `path`; `None` if tshark is missing or fails.
pub fn tshark_check(path: &Path) -> Option<TsharkVerdict> {
    let summary = run(path, &[])?;
    let frames = summary.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    let malformed = count_lines(&summary, "Malformed");
    let detail = run(path, &["-O", "iwarp_mpa"])?;
    let good_crc = detail.matches("Good CRC32").count() as u64;
    let bad_crc = detail.matches("Bad CRC32").count() as u64;
    let fields = run(
        path,
        &[
            "-T",
            "fields",
            "-e",
            "iwarp_mpa.key.req",
            "-e",
            "iwarp_mpa.key.rep",
            "-e",
            "iwarp_ddp.control_field",
        ],
    )
    .unwrap_or_default();
    let mut mpa_req_rep = 0;
    let mut ddp_segments = 0;
    for line in fields.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.first().is_some_and(|c| !c.is_empty()) || cols.get(1).is_some_and(|c| !c.is_empty())
        {
            mpa_req_rep += 1;
        }
        if let Some(c) = cols.get(2) {
            ddp_segments += c.split(',').filter(|s| !s.is_empty()).count() as u64;
        }
    }
    Some(TsharkVerdict {
        frames,
        malformed,
        good_crc,
        bad_crc,
        mpa_req_rep,
        ddp_segments,
    })
}
