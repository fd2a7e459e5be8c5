//! net_ring loopback on a worker lcore: `Eal::launch`/`wait` run a closure that owns a
//! `PortQueue`, sends frames through the ring and reads them back byte for byte.

mod common;

use std::time::Duration;

use common::{eal_args, test_frame, wait_link};
use iwarp_dpdk::{Eal, Mempool, Port, PortConfig};
use iwarp_runtime::{FrameIo, TxOutcome};

#[test]
fn ring_loopback_on_a_worker_lcore() {
    let mut args = eal_args("ring-launch");
    args.main_cpus = vec![0];
    args.dataplane_cpus = vec![iwarp_dpdk::args::online_cpus().saturating_sub(1)];
    let eal = Eal::init(&args.build()).expect("EAL");
    assert_eq!(eal.worker_lcores(), [1]);
    assert_eq!(eal.lcores(), [0, 1]);
    assert_eq!(Eal::current_lcore(), eal.main_lcore());

    let pool = Mempool::new(&eal, "ring", 2047, 32, 2048 + 128, -1).expect("pool");
    let mut port = Port::open(&eal, "net_ring0").expect("ring port");
    let setup = port
        .configure(&PortConfig::default(), &pool)
        .expect("configure");
    assert_eq!(setup.frame_len_max, 1514);
    port.start().expect("start");
    assert!(wait_link(&port, true, Duration::from_secs(5)));
    let mut q = port.queue(0, &pool).expect("queue");

    eal.launch(1, move || {
        if Eal::current_lcore() != 1 {
            return -2;
        }
        let frames: Vec<Vec<u8>> = (0..300u32)
            .map(|i| test_frame(i, 64 + i as usize * 4))
            .collect();
        let mut got = Vec::new();
        for f in &frames {
            let out = q.tx_frame(&mut |buf: &mut [u8]| {
                buf[..f.len()].copy_from_slice(f);
                f.len()
            });
            if out != TxOutcome::Queued(f.len()) {
                return -3;
            }
            q.tx_flush();
            q.rx_burst(64, &mut |r: &[u8]| got.push(r.to_vec()));
        }
        for _ in 0..100 {
            q.rx_burst(64, &mut |r: &[u8]| got.push(r.to_vec()));
        }
        if got != frames {
            return -4;
        }
        i32::try_from(q.counters.rx_frames).unwrap_or(-5)
    })
    .expect("launch");
    assert_eq!(
        eal.wait(1),
        300,
        "the worker looped 300 frames back byte for byte"
    );

    eal.launch(1, || panic!("a panicking job")).expect("launch");
    assert_eq!(eal.wait(1), -1, "a panic comes back as -1");
    assert!(
        eal.launch(0, || 0).is_err(),
        "the main lcore is not a worker"
    );

    port.stop().expect("stop after the queue is gone");
}
