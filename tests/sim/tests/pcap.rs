//! The representative session, captured and (when tshark is installed) checked by
//! Wireshark's dissectors: no malformed frame, every MPA CRC good.

use iwarp_sim::rng::{seed_or_fresh, SeedGuard};
use iwarp_sim::session::representative_session;
use iwarp_sim::tshark::{tshark_available, tshark_check};

#[test]
fn session_capture_passes_tshark() {
    let seed = seed_or_fresh();
    let _g = SeedGuard::new(seed, "session_capture_passes_tshark");
    let dir = std::env::temp_dir().join(format!("iwarp-sim-{}-{seed:x}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.pcap");
    let file = std::fs::File::create(&path).unwrap();
    let summary = representative_session(seed, Box::new(std::io::BufWriter::new(file))).unwrap();
    assert!(summary.frames > 20, "{summary:?}");
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 24 + summary.frames * 16, "file holds the frames");
    if !tshark_available() {
        eprintln!("tshark not installed: capture written, not dissected");
        return;
    }
    let v = tshark_check(&path).expect("tshark runs");
    eprintln!("tshark verdict: {v:?}");
    assert_eq!(v.frames, summary.frames);
    assert_eq!(v.malformed, 0, "{v:?}");
    assert_eq!(v.bad_crc, 0, "{v:?}");
    assert!(v.good_crc > 0, "{v:?}");
    assert_eq!(v.mpa_req_rep, 4, "two MPA Requests and two Replies: {v:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
