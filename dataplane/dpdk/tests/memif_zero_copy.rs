//! One process, a memif server and a zero-copy memif client (`zero-copy=yes`: the client's
//! mbufs are the shared ring's buffers) on one socket, as iwarpd's perf-loopback uses
//! them: jumbo frames go through `PortQueue` both ways byte for byte, many times around
//! a small ring, so every ring slot and every recycled mbuf carries data more than once.

mod common;

use std::time::Duration;

use common::{eal_args, exchange, start_pair, stop_pair, test_frame};
use iwarp_dpdk::{Eal, Mempool, Port, PortConfig, PortQueue};

/// Frames per direction: 24 times around the 256-slot ring.
const FRAMES: u32 = 6144;
/// Largest frame: MTU 9000 plus the Ethernet header.
const FRAME_LEN_MAX: usize = 9014;

#[test]
fn zero_copy_client_moves_jumbo_frames_both_ways_byte_for_byte() {
    let mut args = eal_args("memif-zc");
    // DPDK refuses a zero-copy memif without it ("Zero-copy doesn't support multi-file
    // segments"); iwarpd adds it itself (`Config::eal_extra_args`).
    args.extra = vec!["--single-file-segments".into()];
    let eal = Eal::init(&args.build()).expect("EAL init");

    let sock = format!("/iwarp-dpdk-zc-{}", std::process::id());
    let pool = Mempool::new(&eal, "zc", 4095, 64, 10240 + 128, -1).expect("mempool");
    assert!(pool.frame_room() >= FRAME_LEN_MAX);
    let mut server = Port::open(
        &eal,
        &format!("net_memif0,role=server,socket={sock},bsize=10240,rsize=8"),
    )
    .expect("server");
    let mut client = Port::open(
        &eal,
        &format!("net_memif1,role=client,socket={sock},bsize=10240,rsize=8,zero-copy=yes"),
    )
    .expect("zero-copy client");
    let cfg = PortConfig {
        mtu: 9000,
        rx_desc: 256,
        tx_desc: 256,
        ..PortConfig::default()
    };
    let s_setup = server.configure(&cfg, &pool).expect("configure server");
    let c_setup = client.configure(&cfg, &pool).expect("configure client");
    assert_eq!(
        (s_setup.frame_len_max, c_setup.frame_len_max),
        (FRAME_LEN_MAX, FRAME_LEN_MAX)
    );
    start_pair(&mut server, &mut client);
    let mut sq = server.queue(0, &pool).expect("server queue");
    let mut cq = client.queue(0, &pool).expect("client queue");

    fn one_way(from: &mut PortQueue, to: &mut PortQueue, label: &str) -> u64 {
        let frames: Vec<Vec<u8>> = (0..FRAMES)
            .map(|i| test_frame(i, 60 + (i as usize * 997) % (FRAME_LEN_MAX - 60 + 1)))
            .collect();
        let got = exchange(from, to, &frames, Duration::from_secs(60));
        assert_eq!(got.len(), frames.len(), "{label}: all received");
        assert!(got == frames, "{label}: byte for byte, in order");
        frames.iter().map(|f| f.len() as u64).sum()
    }
    let to_client = one_way(&mut sq, &mut cq, "server->zero-copy client");
    let to_server = one_way(&mut cq, &mut sq, "zero-copy client->server");
    assert_eq!(cq.counters.rx_frames, u64::from(FRAMES));
    assert_eq!(cq.counters.rx_bytes, to_client);
    assert_eq!(sq.counters.rx_frames, u64::from(FRAMES));
    assert_eq!(sq.counters.rx_bytes, to_server);
    assert_eq!(cq.counters.tx_frames, u64::from(FRAMES));

    stop_pair((sq, cq), server, client);
    drop(pool);
    drop(eal);
}
