//! Transmit back-pressure (issue 15 item 6): a port whose buffer pool and receive rings
//! are nearly always full. The core stops asking the engine for frames when the port has
//! no buffer (counted as `tx_backpressure`), keeps what it queued until the ring takes
//! it, and the transfer completes with every byte right and no retransmission: the
//! pressure slows the stream, it loses nothing.

use iwarp_types::{SendOp, WcOpcode, WcStatus};

use super::helpers::*;
use crate::memlink::MemLinkConfig;
use crate::testutil::{Testbed, TestbedConfig, Which, ARENA};

const ARENA_LEN: usize = 1 << 20;
const LEN: usize = 512 * 1024;

#[test]
fn a_port_without_buffers_slows_the_stream_and_loses_nothing() {
    let cfg = TestbedConfig {
        arena_bytes: ARENA_LEN,
        link: MemLinkConfig {
            pool_frames: 6,
            ring_frames: 3,
            tx_batch: 4,
            ..MemLinkConfig::default()
        },
        ..TestbedConfig::default()
    };
    let mut tb = Testbed::new(&cfg).unwrap();
    let src = pattern(LEN, 11);
    tb.a.cores[0].mem_mut().arena_mut(ARENA)[..LEN].copy_from_slice(&src);
    listen_all(&mut tb, Which::B);
    let a = verbs(&mut tb, Which::A, 0, ARENA_LEN as u64);
    let c = connect(&mut tb, 0, a, ARENA_LEN as u64);
    let w = wr(
        1,
        SendOp::Write {
            remote_to: 0,
            rkey: c.b.mr,
        },
        0,
        LEN as u32,
        c.a.mr,
    );
    post_send(&mut tb, Which::A, 0, c.a.qp, w).unwrap();
    let cqe = wait_cqe(&mut tb, Which::A, 0, c.a.cq);
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (1, WcStatus::Success, WcOpcode::Write)
    );
    assert_eq!(&tb.b.cores[0].mem().arena(ARENA)[..LEN], &src[..]);
    let now = tb.clock.now();
    let ta = tb.a.cores[0].final_snapshot(now).total();
    let tbt = tb.b.cores[0].final_snapshot(now).total();
    assert!(ta.c.tx_backpressure > 0, "the port refused buffers");
    assert_eq!(ta.c.frames_tx, tbt.c.frames_rx, "nothing lost on the link");
    assert_eq!(ta.c.tcp_retransmissions, 0);
    assert_eq!(tbt.c.tcp_retransmissions, 0);
}
