//! The operator's actions through `iwarpctl` on a live daemon (issue 16 item 4):
//! `qp reset` moves a connected QP to Error (its owner gets a QP-fatal event, the peer
//! sees its connection end), `disconnect-client` ends a client's session (its calls
//! answer DaemonGone, the daemon frees everything it held), `capture start|stop` writes
//! the frames of a connection into a pcap file the operator's iwarpctl created,
//! `counters --watch` prints one reading per interval with what moved.

use std::io::{BufRead, Read};
use std::process::Command;
use std::time::{Duration, Instant};

use iwarp_apps::side::*;
use iwarp_apps::{skip, DaemonPair, SystemLock};
use iwarp_verbs::*;

const A_IP: [u8; 4] = [198, 18, 0, 1];

/// Runs `iwarpctl --socket SOCKET --json ARGS...`; returns its JSON output.
fn iwarpctl(socket: &std::path::Path, args: &[&str]) -> String {
    let bin = iwarp_apps::system::workspace_bin("iwarpctl", "iwarpctl");
    let out = Command::new(bin)
        .arg("--socket")
        .arg(socket)
        .arg("--json")
        .args(args)
        .output()
        .expect("run iwarpctl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "iwarpctl {args:?} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn iwarpctl_resets_a_qp_and_disconnects_a_client() {
    if skip("iwarpctl_resets_a_qp_and_disconnects_a_client") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("admact");
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, aid, bqp, _bid) = connect(&mut a, A_IP, &mut b, 9601, b"", b"");

    // qp reset: B's QP goes to Error, B hears QP fatal, A's connection ends.
    let client = b.ctx.client_id().to_string();
    let qp = bqp.handle().0.to_string();
    let out = iwarpctl(&pair.b.socket, &["qp", "reset", &qp, "--client", &client]);
    assert!(out.contains("\"done\""), "{out}");
    let ev = b
        .ctx
        .get_async_event_timeout(WAIT)
        .expect("B's QP-fatal event");
    assert_eq!(ev.kind, AsyncKind::LocalQpCatastrophic, "{ev:?}");
    assert_eq!(ev.resource, EventResourceRef::Qp(bqp.handle()), "{ev:?}");
    assert_eq!(bqp.query().expect("query").state, QpStateValue::Error);
    let ev = a.cm_event();
    assert_eq!(ev.id, aid.handle(), "{ev:?}");
    assert!(matches!(ev.event, CmEvent::Disconnected), "A sees {ev:?}");

    // disconnect-client: B's calls answer DaemonGone; the daemon frees what B held,
    // while A is still served.
    let out = iwarpctl(&pair.b.socket, &["disconnect-client", &client]);
    assert!(out.contains("disconnected"), "{out}");
    let start = Instant::now();
    loop {
        match b.ctx.alloc_pd() {
            Err(Error::DaemonGone) => break,
            // At once; the bound is for a starved test machine.
            _ if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => panic!("B still served after disconnect-client: {other:?}"),
        }
    }
    pair.b.wait_objects_freed(&[], Duration::from_secs(10));
    assert!(a.ctx.alloc_pd().is_ok());
}

#[test]
fn iwarpctl_captures_a_connection_into_a_pcap_file() {
    if skip("iwarpctl_captures_a_connection_into_a_pcap_file") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("admcap");
    let dir = std::env::temp_dir().join(format!("iwarp-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("b.pcap");
    let path = file.to_str().expect("utf-8 path");
    let out = iwarpctl(
        &pair.b.socket,
        &["capture", "start", path, "--snaplen", "96"],
    );
    assert!(out.contains("96 bytes"), "{out}");
    // A second start is refused while one runs.
    let bin = iwarp_apps::system::workspace_bin("iwarpctl", "iwarpctl");
    let again = Command::new(&bin)
        .arg("--socket")
        .arg(&pair.b.socket)
        .args(["capture", "start", path])
        .output()
        .expect("run iwarpctl");
    assert_eq!(again.status.code(), Some(1), "refused: {again:?}");

    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let (_aqp, _aid, _bqp, _bid) = connect(&mut a, A_IP, &mut b, 9602, b"hello", b"");
    let out = iwarpctl(&pair.b.socket, &["capture", "stop"]);
    assert!(out.contains("frames written"), "{out}");

    let bytes = std::fs::read(&file).expect("the pcap file");
    let frames: Vec<_> = iwarp_wire::pcap::PcapReader::new(&bytes)
        .expect("a pcap file")
        .map(|r| r.expect("a whole record"))
        .collect();
    // The TCP handshake and the MPA exchange of port 9602 at least, each cut to 96 bytes.
    let port = 9602u16.to_be_bytes();
    let of_conn = frames
        .iter()
        .filter(|r| {
            r.data.len() >= 38
                && r.data[12..14] == [0x08, 0x00]
                && r.data[23] == 6
                && (r.data[34..36] == port || r.data[36..38] == port)
        })
        .count();
    assert!(
        of_conn >= 4,
        "{of_conn} frames of the connection in {} frames",
        frames.len()
    );
    assert!(
        frames.iter().all(|r| r.data.len() <= 96),
        "cut to --snaplen"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn iwarpctl_watches_the_counters_move_interval_by_interval() {
    if skip("iwarpctl_watches_the_counters_move_interval_by_interval") {
        return;
    }
    let _lock = SystemLock::acquire();
    let pair = DaemonPair::start("admwatch");
    let bin = iwarp_apps::system::workspace_bin("iwarpctl", "iwarpctl");
    // Eight readings, one a second. The connection is made after the first is printed,
    // so iwarpctl's baseline was read before it (started together, a slow iwarpctl on a
    // loaded machine took its baseline after the connection and saw no change), and it
    // has seven seconds to be made.
    const READINGS: usize = 8;
    let mut watch = Command::new(&bin)
        .arg("--socket")
        .arg(&pair.b.socket)
        .args(["--json", "counters", "--watch", "1", "--count"])
        .arg(READINGS.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run iwarpctl");
    let mut stdout = std::io::BufReader::new(watch.stdout.take().expect("piped stdout"));
    let mut text = String::new();
    stdout
        .read_line(&mut text)
        .expect("iwarpctl's first reading");
    // Something moves meanwhile: a connection to B.
    let mut a = Side::open("A", &pair.a.socket);
    let mut b = Side::open("B", &pair.b.socket);
    let _conn = connect(&mut a, A_IP, &mut b, 9603, b"watch", b"");
    stdout
        .read_to_string(&mut text)
        .expect("iwarpctl's readings");
    let out = watch.wait_with_output().expect("iwarpctl output");
    assert!(
        out.status.success(),
        "iwarpctl counters --watch: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(
        lines.len(),
        READINGS,
        "one reading per interval, --count {READINGS}: {text}"
    );
    let mut t_prev = 0.0;
    for l in &lines {
        let t = l["t_s"].as_f64().expect("t_s");
        let len = l["interval_s"].as_f64().expect("interval_s");
        assert!(t > t_prev && len >= 0.9, "{l}");
        t_prev = t;
        assert!(
            l["total"]["frames_rx"].is_u64(),
            "totals in every reading: {l}"
        );
    }
    assert_eq!(
        lines[0]["total"]["conns_established"].as_u64(),
        Some(0),
        "no connection before the first reading: {}",
        lines[0]
    );
    let established: i64 = lines
        .iter()
        .filter_map(|l| l["change"]["conns_established"].as_i64())
        .sum();
    assert_eq!(
        established, 1,
        "the connection shows in the interval it came: {text}"
    );
    let last = &lines[READINGS - 1]["total"];
    assert!(last["frames_rx"].as_u64().unwrap_or(0) > 0, "{last}");
}
