//! Two processes over memif: this test process is the server; it spawns itself as the
//! client (an echo), checks the echo byte for byte, then kills the client with SIGKILL
//! while it keeps polling, 20 times. The server must not crash and must report the link
//! down each time. Also: a second server on the same socket gets one clear error.
//!
//! `IWARP_DPDK_NO_GUARD=1` turns the peer-loss guard off, to see what it prevents.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{eal, test_frame};
use iwarp_dpdk::{memif, DpdkError, Mempool, Port, PortConfig};
use iwarp_runtime::{FrameIo, TxOutcome};

const ROLE: &str = "IWARP_DPDK_MEMIF_ROLE";
const SOCKET: &str = "IWARP_DPDK_MEMIF_SOCKET";
const ROUNDS: usize = 20;

/// Removes the runtime directory of a child EAL that was killed (or exited without cleanup).
fn remove_child_runtime_dir(role: &str, pid: u32) {
    let _ = std::fs::remove_dir_all(iwarp_dpdk::eal::runtime_dir_of(format!(
        "memif-{role}-{pid}"
    )));
}

fn spawn(role: &str, socket: &str) -> std::process::Child {
    let exe = std::env::current_exe().expect("test binary path");
    Command::new(exe)
        .args([
            "--exact",
            "memif_peer_loss",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ROLE, role)
        .env(SOCKET, socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// Child "client": echo every frame back until killed (or 60 s pass).
fn echo_client(socket: &str) {
    let eal = eal("memif-client");
    let pool = Mempool::new(&eal, "client", 4095, 64, 2048 + 128, -1).expect("pool");
    let mut port =
        Port::open(&eal, &format!("net_memif0,role=client,socket={socket}")).expect("client port");
    port.configure(&PortConfig::default(), &pool)
        .expect("configure");
    port.start().expect("start");
    let mut q = port.queue(0, &pool).expect("queue");
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(64);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        q.rx_burst(32, &mut |f: &[u8]| frames.push(f.to_vec()));
        for f in frames.drain(..) {
            while let TxOutcome::NoBuffer = q.tx_frame(&mut |buf: &mut [u8]| {
                buf[..f.len()].copy_from_slice(&f);
                f.len()
            }) {
                q.tx_flush();
            }
        }
        q.tx_flush();
    }
}

/// Child "busy": a second server on the socket the parent serves must get one clear error.
fn busy_server(socket: &str) {
    let eal = eal("memif-busy");
    match Port::open(&eal, &format!("net_memif0,role=server,socket={socket}")) {
        Err(DpdkError::MemifSocketInUse { socket: s }) => {
            assert_eq!(s, socket);
            std::process::exit(42);
        }
        other => panic!("expected MemifSocketInUse, got {:?}", other.err()),
    }
}

/// Sends `frames` and collects what comes back (the client echoes), bounded to 20 s.
fn echo_round(q: &mut iwarp_dpdk::PortQueue, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let start = Instant::now();
    let mut sent = 0;
    let mut got = Vec::new();
    while got.len() < frames.len() && start.elapsed() < Duration::from_secs(20) {
        if let Some(f) = frames.get(sent) {
            if let TxOutcome::Queued(_) = q.tx_frame(&mut |buf: &mut [u8]| {
                buf[..f.len()].copy_from_slice(f);
                f.len()
            }) {
                sent += 1;
            }
        }
        q.tx_flush();
        q.rx_burst(32, &mut |f: &[u8]| {
            if f.len() >= 14 && f[12..14] == [0x88, 0xb5] {
                got.push(f.to_vec());
            }
        });
    }
    got
}

#[test]
fn memif_peer_loss() {
    if let (Ok(role), Ok(socket)) = (std::env::var(ROLE), std::env::var(SOCKET)) {
        match role.as_str() {
            "client" => echo_client(&socket),
            _ => busy_server(&socket),
        }
        return;
    }
    let guard = std::env::var("IWARP_DPDK_NO_GUARD").is_err();
    memif::set_guard_enabled(guard);
    let eal = eal("memif-server");
    assert!(memif::guard_active(), "munmap resolves to the guard");
    let socket = format!("/iwarp-dpdk-loss-{}", std::process::id());
    let pool = Mempool::new(&eal, "server", 8191, 64, 2048 + 128, -1).expect("pool");
    let mut port =
        Port::open(&eal, &format!("net_memif0,role=server,socket={socket}")).expect("server port");
    port.configure(&PortConfig::default(), &pool)
        .expect("configure");
    port.start().expect("start");
    let mut q = port.queue(0, &pool).expect("queue");

    let mut busy = spawn("busy", &socket);
    let status = busy.wait().expect("busy child");
    remove_child_runtime_dir("busy", busy.id());
    assert_eq!(
        status.code(),
        Some(42),
        "second server reports MemifSocketInUse"
    );

    let frames: Vec<Vec<u8>> = (0..200u32)
        .map(|i| test_frame(i, 60 + (i as usize * 53) % 1454))
        .collect();
    let mut downs = 0;
    for round in 0..ROUNDS {
        let mut child = spawn("client", &socket);
        let child_pid = child.id();
        let up = {
            let start = Instant::now();
            let mut up = false;
            while start.elapsed() < Duration::from_secs(20) && !up {
                q.rx_burst(32, &mut |_f: &[u8]| {});
                up = q.link().up;
            }
            up
        };
        assert!(up, "round {round}: link up");
        let got = echo_round(&mut q, &frames);
        assert!(
            got == frames,
            "round {round}: echo byte for byte ({} of {})",
            got.len(),
            frames.len()
        );

        // Keep both directions busy, and kill the client in the middle of it.
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20 + (round as u64 * 7) % 60));
            child.kill().expect("SIGKILL the client");
            child.wait().expect("reap the client");
        });
        let start = Instant::now();
        let mut seq = 0u32;
        let mut down = false;
        while start.elapsed() < Duration::from_secs(10) {
            let f = test_frame(seq, 1000);
            if let TxOutcome::Queued(_) = q.tx_frame(&mut |buf: &mut [u8]| {
                buf[..f.len()].copy_from_slice(&f);
                f.len()
            }) {
                seq += 1;
            }
            q.tx_flush();
            q.rx_burst(32, &mut |_f: &[u8]| {});
            if killer.is_finished() && !q.link().up {
                down = true;
                break;
            }
        }
        killer.join().expect("killer");
        remove_child_runtime_dir("client", child_pid);
        assert!(
            down,
            "round {round}: link reported down after the peer died"
        );
        downs += 1;
        // What could not be sent to the dead peer is dropped, not sent to the next one.
        q.tx_drop_pending();
    }
    let (barriers, timeouts) = memif::guard_stats();
    eprintln!("peer loss: {downs} rounds survived, guard barriers {barriers}, timeouts {timeouts}");
    assert_eq!(downs, ROUNDS);
    if guard {
        assert!(barriers > 0, "the guard ran on peer loss");
        assert_eq!(timeouts, 0);
    }
    drop(q);
    drop(port);
}
