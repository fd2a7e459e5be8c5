//! A small RDMA WRITE bandwidth loop over iwarpd: the client writes `--iters` messages of
//! `--size` bytes into the server's buffer (`--slots` slots, round robin) with up to
//! `--tx-depth` WRITEs in flight, then asks the server to check what the last WRITE of
//! each slot left there; prints the bandwidth.
//!
//! ```sh
//! write_bw --daemon a --server &
//! write_bw --daemon b --connect 198.18.0.1 --size 65536 --iters 10000
//! ```

mod common;

use std::time::{Duration, Instant};

use clap::Parser;
use common::*;
use iwarp_verbs::*;

#[derive(Parser, Debug)]
#[command(about = "RDMA WRITE bandwidth over iwarpd, data verified at the end")]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Bytes of each WRITE (8 to 1 MiB).
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(8..=1 << 20))]
    size: u32,
    /// WRITEs.
    #[arg(long, default_value_t = 1000)]
    iters: u64,
    /// Slots of the server's buffer (written round robin).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    slots: u64,
    /// WRITEs in flight at most.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    tx_depth: u32,
}

/// The client's source buffers: one more than the slots, so the data each slot ends
/// with depends on which WRITE came last.
fn source_of(iter: u64, slots: u64) -> u64 {
    iter % (slots + 1)
}

/// What slot `s` holds after `iters` WRITEs: the pattern of the source of its last one.
fn expected_source(s: u64, iters: u64, slots: u64) -> Option<u64> {
    if s >= iters {
        return None;
    }
    let last = s + (iters - 1 - s) / slots * slots;
    Some(source_of(last, slots))
}

fn main() -> Res<()> {
    let a = Args::parse();
    let size = a.size as u64;
    let stride = size.next_multiple_of(64);
    let data = stride * (a.slots + 1);
    let ctl = data; // two receive buffers and a send buffer of 64 bytes
    let total = (ctl + 3 * 64).next_multiple_of(4096);
    let mut side = Side::open(&a.common, total as usize)?;
    let offer = side.remote_buf(0, (stride * a.slots) as u32);
    let post2 = |s: &Side, qp: &mut Qp| -> Res<()> {
        s.post_recv(qp, 0, ctl, 64)?;
        s.post_recv(qp, 1, ctl + 64, 64)?;
        qp.query()?; // the receives are on the RQ before the peer may send
        Ok(())
    };
    let send_off = ctl + 128;
    match role(&a.common) {
        None => {
            let (mut qp, id, _) = side.accept_one(a.common.port, offer, post2)?;
            wait_one(&mut side, true, 0, WcOpcode::Recv)?;
            let iters = get_word(&side, ctl as usize);
            // Check every slot (a generous deadline: the WRITEs came before the SEND).
            let end = Instant::now() + side.timeout;
            let bad = loop {
                let bad = (0..a.slots)
                    .filter(|&s| match expected_source(s, iters, a.slots) {
                        Some(src) => {
                            let o = (s * stride) as usize;
                            !holds(&side.arena.as_slice()[o..o + size as usize], src + 1)
                        }
                        None => false,
                    })
                    .count();
                if bad == 0 || Instant::now() > end {
                    break bad;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            put_word(&mut side, send_off as usize, (bad == 0) as u64);
            qp.post_send(&send_wr(&side, 9, SendOp::Send, send_off, 8)?)?;
            wait_one(&mut side, false, 9, WcOpcode::Send)?;
            let _ = side.cm.get_event_timeout(side.timeout);
            drop(id);
            if bad > 0 {
                return Err(format!("{bad} of {} slots hold wrong data", a.slots).into());
            }
            println!(
                "write_bw server: {iters} WRITEs of {size} bytes, {} slots verified",
                a.slots
            );
            Ok(())
        }
        Some(ip) => {
            let (mut qp, id, peer) = side.connect(ip, a.common.port, offer, post2)?;
            let r = client(&a, &mut side, &mut qp, peer, stride, ctl, send_off);
            side.disconnect(&id);
            r
        }
    }
}

fn client(
    a: &Args,
    side: &mut Side,
    qp: &mut Qp,
    peer: RemoteBuf,
    stride: u64,
    ctl: u64,
    send_off: u64,
) -> Res<()> {
    if (peer.len as u64) < stride * a.slots {
        return Err(format!("the server offers {} bytes", peer.len).into());
    }
    let size = a.size as usize;
    for src in 0..=a.slots {
        let o = (src * stride) as usize;
        pattern(&mut side.arena.as_mut_slice()[o..o + size], src + 1);
    }
    let depth = a.tx_depth.min(qp.cap().max_send_wr).max(1) as u64;
    let mut wc = [EMPTY_CQE; 64];
    let (mut posted, mut done) = (0u64, 0u64);
    let start = Instant::now();
    while done < a.iters {
        while posted < a.iters && posted - done < depth {
            let op = SendOp::Write {
                remote_to: peer.addr + (posted % a.slots) * stride,
                rkey: peer.rkey,
            };
            let src = source_of(posted, a.slots) * stride;
            qp.post_send(&send_wr(side, posted, op, src, a.size)?)?;
            posted += 1;
        }
        done += wait_cq(&mut side.send_cq, &side.chan, &mut wc, side.timeout)? as u64;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let bytes = a.iters * a.size as u64;
    // Ask the server to check its slots.
    put_word(side, send_off as usize, a.iters);
    qp.post_send(&send_wr(side, u64::MAX, SendOp::Send, send_off, 8)?)?;
    wait_one(side, false, u64::MAX, WcOpcode::Send)?;
    wait_one(side, true, 0, WcOpcode::Recv)?;
    if get_word(side, ctl as usize) != 1 {
        return Err("the server found wrong data in its slots".into());
    }
    println!(
        "write_bw client: {} WRITEs of {} bytes in {secs:.3} s: {:.1} MB/s ({:.3} Gbit/s), data verified",
        a.iters,
        a.size,
        bytes as f64 / secs / 1e6,
        bytes as f64 * 8.0 / secs / 1e9
    );
    Ok(())
}
