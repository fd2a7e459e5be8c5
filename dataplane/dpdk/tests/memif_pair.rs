//! One process, two memif ports (server and client on one socket) as a wire: frames go
//! through `PortQueue` both ways byte for byte; also the error paths of the API.

mod common;

use std::time::Duration;

use common::{eal, exchange, start_pair, stop_pair, test_frame};
use iwarp_dpdk::{DpdkError, Eal, Mempool, Port, PortConfig, PortQueue};
use iwarp_runtime::{FrameIo, TxOutcome};

#[test]
fn memif_pair_moves_frames_both_ways_and_reports_errors() {
    let eal = eal("memif-pair");
    assert!(
        iwarp_dpdk::memif::guard_active(),
        "munmap resolves to the peer-loss guard"
    );
    assert_eq!(
        Eal::init(&["again".into()]).err(),
        Some(DpdkError::EalAlreadyInitialised)
    );

    let sock = format!("/iwarp-dpdk-pair-{}", std::process::id());
    let pool = Mempool::new(&eal, "pair", 4095, 64, 2048 + 128, -1).expect("mempool");
    assert_eq!(pool.frame_room(), 2048);

    // Error paths.
    match Port::open(&eal, "net_nosuch0,x=1") {
        Err(DpdkError::UnknownDriver { driver, .. }) => assert_eq!(driver, "net_nosuch"),
        other => panic!("unknown driver: {:?}", other.err()),
    }
    assert!(matches!(
        Port::open(&eal, "0000:99:00.0"),
        Err(DpdkError::DeviceNotFound { .. })
    ));

    let mut server =
        Port::open(&eal, &format!("net_memif0,role=server,socket={sock}")).expect("server");
    let mut client =
        Port::open(&eal, &format!("net_memif1,role=client,socket={sock}")).expect("client");
    assert_eq!(server.info().driver, "net_memif");
    assert!(server.info().max_rx_queues >= 1);

    let jumbo = PortConfig {
        mtu: 9000,
        ..PortConfig::default()
    };
    let e = server.configure(&jumbo, &pool).unwrap_err();
    assert!(e.to_string().contains("mtu"), "{e}");
    let none = PortConfig {
        rx_queues: 0,
        ..PortConfig::default()
    };
    assert!(matches!(
        server.configure(&none, &pool),
        Err(DpdkError::NoQueues { .. })
    ));

    let cfg = PortConfig {
        rx_desc: 1024,
        tx_desc: 1024,
        ..PortConfig::default()
    };
    let s_setup = server.configure(&cfg, &pool).expect("configure server");
    let c_setup = client.configure(&cfg, &pool).expect("configure client");
    assert_eq!(s_setup.frame_len_max, 1514);
    assert!(!s_setup.tx_checksum_offload && !s_setup.rss);
    assert_eq!(c_setup.queues, 1);
    start_pair(&mut server, &mut client);

    let mut sq = server.queue(0, &pool).expect("server queue");
    let mut cq = client.queue(0, &pool).expect("client queue");
    assert!(sq.guarded() && cq.guarded());
    assert!(matches!(
        server.queue(0, &pool),
        Err(DpdkError::Busy { .. })
    ));
    assert!(matches!(
        server.queue(1, &pool),
        Err(DpdkError::NoQueues { .. })
    ));
    assert!(matches!(server.stop(), Err(DpdkError::Busy { .. })));
    assert_eq!(sq.caps().mac, server.mac());

    // An empty offer costs nothing and is not sent.
    assert_eq!(sq.tx_frame(&mut |_buf: &mut [u8]| 0), TxOutcome::Empty);
    // A fill that claims more than the buffer is discarded and counted.
    assert_eq!(
        sq.tx_frame(&mut |buf: &mut [u8]| buf.len() + 1),
        TxOutcome::Empty
    );
    assert_eq!(sq.counters.tx_invalid, 1);

    fn one_way(from: &mut PortQueue, to: &mut PortQueue, label: &str) {
        let frames: Vec<Vec<u8>> = (0..500u32)
            .map(|i| test_frame(i, 60 + (i as usize * 37) % (1514 - 60)))
            .collect();
        let got = exchange(from, to, &frames, Duration::from_secs(20));
        assert_eq!(got.len(), frames.len(), "{label}: all received");
        assert!(got == frames, "{label}: byte for byte, in order");
    }
    one_way(&mut sq, &mut cq, "server->client");
    one_way(&mut cq, &mut sq, "client->server");
    assert_eq!(sq.counters.tx_frames, 500);
    assert_eq!(cq.counters.rx_frames, 500);
    assert_eq!(sq.counters.rx_frames, 500);
    let bytes: u64 = (0..500usize)
        .map(|i| 60 + (i * 37) % (1514 - 60))
        .sum::<usize>() as u64;
    assert_eq!(cq.counters.rx_bytes, bytes);
    let stats = server.stats().expect("stats");
    assert_eq!(stats.opackets, 500);
    assert_eq!(stats.ipackets, 500);
    assert!(server.xstat("rx_good_packets").is_ok_and(|v| v == 500));
    assert!(server.xstat("no_such_counter").is_err());

    stop_pair((sq, cq), server, client);
    drop(pool);
    drop(eal);
}
