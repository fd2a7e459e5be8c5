//! Helpers shared by the DPDK-running integration tests (each test binary runs one EAL).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use iwarp_dpdk::{Eal, EalArgs, MemoryMode, Port, PortQueue};
use iwarp_runtime::{FrameIo, TxOutcome};

/// The EAL arguments of a test: main lcore only, hugepages if reserved, else `--no-huge`,
/// a file prefix unique to the process, errors logged only.
pub fn eal_args(prefix: &str) -> EalArgs {
    let memory = MemoryMode::detect(256, 256);
    let mut args = EalArgs::new(
        "iwarp-dpdk-test",
        &format!("{prefix}-{}", std::process::id()),
        memory,
    );
    args.log_levels = vec!["error".into()];
    args
}

/// Starts the EAL for a test with [`eal_args`].
pub fn eal(prefix: &str) -> Eal {
    Eal::init(&eal_args(prefix).build()).expect("EAL init")
}

/// Starts both ports of a memif pair and waits (bounded) until both links are up.
pub fn start_pair(server: &mut Port, client: &mut Port) {
    server.start().expect("start server");
    client.start().expect("start client");
    assert!(
        wait_link(server, true, Duration::from_secs(10)),
        "server link up"
    );
    assert!(
        wait_link(client, true, Duration::from_secs(10)),
        "client link up"
    );
}

/// Tears a memif pair down in the order DPDK needs: the queues, then the client's port,
/// then the server's (the caller's mempool and EAL go after them).
pub fn stop_pair(queues: (PortQueue, PortQueue), mut server: Port, mut client: Port) {
    drop(queues);
    client.stop().expect("client stop");
    server.stop().expect("server stop");
    drop(client);
    drop(server);
}

/// Waits (bounded) until the port's link is up.
pub fn wait_link(port: &Port, up: bool, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if port.link().up == up {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A test frame: broadcast Ethernet header, ethertype 0x88b5, then `len - 14` bytes of
/// a pattern that depends on `seq`.
pub fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32).wrapping_mul(31).wrapping_add(seq) as u8);
    }
    f.truncate(len);
    f
}

/// Sends every frame through `q` (retrying on back-pressure, bounded by `within`).
pub fn send_all(q: &mut impl FrameIo, frames: &[Vec<u8>], within: Duration) -> usize {
    let start = Instant::now();
    let mut sent = 0;
    while sent < frames.len() && start.elapsed() < within {
        let f = &frames[sent];
        match q.tx_frame(&mut |buf: &mut [u8]| {
            buf[..f.len()].copy_from_slice(f);
            f.len()
        }) {
            TxOutcome::Queued(n) => {
                assert_eq!(n, f.len());
                sent += 1;
            }
            TxOutcome::NoBuffer => {
                q.tx_flush();
            }
            TxOutcome::Empty => panic!("fill returned a length"),
        }
    }
    while q.tx_flush() > 0 && start.elapsed() < within {}
    sent
}

/// Receives until `n` frames arrived or `within` passed; only ethertype 0x88b5 counts.
pub fn recv_n(q: &mut impl FrameIo, n: usize, within: Duration) -> Vec<Vec<u8>> {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n && start.elapsed() < within {
        q.rx_burst(32, &mut |f: &[u8]| {
            if f.len() >= 14 && f[12..14] == [0x88, 0xb5] {
                got.push(f.to_vec());
            }
        });
    }
    got
}

/// Sends `frames` through `from` while receiving on `to` (so a bounded ring never stalls
/// the sender); returns the frames of ethertype 0x88b5 that arrived within `within`.
pub fn exchange(
    from: &mut impl FrameIo,
    to: &mut impl FrameIo,
    frames: &[Vec<u8>],
    within: Duration,
) -> Vec<Vec<u8>> {
    let start = Instant::now();
    let mut sent = 0;
    let mut got = Vec::new();
    while got.len() < frames.len() && start.elapsed() < within {
        for _ in 0..16 {
            let Some(f) = frames.get(sent) else { break };
            match from.tx_frame(&mut |buf: &mut [u8]| {
                buf[..f.len()].copy_from_slice(f);
                f.len()
            }) {
                TxOutcome::Queued(_) => sent += 1,
                _ => break,
            }
        }
        from.tx_flush();
        to.rx_burst(32, &mut |f: &[u8]| {
            if f.len() >= 14 && f[12..14] == [0x88, 0xb5] {
                got.push(f.to_vec());
            }
        });
    }
    got
}
