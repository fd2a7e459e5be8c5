//! An rping-like ping-pong over iwarpd: the server listens, the client connects over the
//! CM (each side's RDMA buffer in the private data), then `--count` SEND/RECV round trips
//! of `--size` bytes with every byte checked on both sides, then an RDMA WRITE of the
//! client's pattern into the server's buffer read back with an RDMA READ, and checked by
//! the server too.
//!
//! ```sh
//! pingpong --daemon a --server &
//! pingpong --daemon b --connect 198.18.0.1 --count 1000 --size 4096
//! ```

mod common;

use std::time::Instant;

use clap::Parser;
use common::*;
use iwarp_verbs::*;

/// Receives posted ahead on each side (the n-th message lands in the n-th receive).
const RECV_DEPTH: u64 = 8;
/// Seed of the RDMA WRITE pattern.
const WRITE_SEED: u64 = 0x0057_5249_5445;

#[derive(Parser, Debug)]
#[command(about = "rping-like SEND/RECV ping-pong and RDMA WRITE+READ check over iwarpd")]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Round trips.
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// Bytes of each ping and pong (8 to 65536).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(8..=65536))]
    size: u32,
    /// Bytes of the RDMA WRITE and READ check (8 to 1 MiB).
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(8..=1 << 20))]
    rdma_size: u32,
}

/// Where things are in the arena: receive slots, the send buffer, the RDMA buffer offered
/// to the peer, the READ-back buffer.
struct Layout {
    size: u64,
    send: u64,
    rdma: u64,
    back: u64,
    total: u64,
}

impl Layout {
    fn new(size: u32, rdma: u32) -> Layout {
        let size = (size as u64).next_multiple_of(64);
        let send = RECV_DEPTH * size;
        let rdma_off = send + size;
        let back = rdma_off + (rdma as u64).next_multiple_of(64);
        let total = (back + rdma as u64).next_multiple_of(4096);
        Layout {
            size,
            send,
            rdma: rdma_off,
            back,
            total,
        }
    }

    fn slot(&self, n: u64) -> u64 {
        (n % RECV_DEPTH) * self.size
    }
}

fn post_receives(side: &Side, qp: &mut Qp, l: &Layout, size: u32) -> Res<()> {
    for n in 0..RECV_DEPTH {
        side.post_recv(qp, n, l.slot(n), size)?;
    }
    // A control call orders after the WRs posted before it: the receives are on the RQ
    // before the peer may send.
    qp.query()?;
    Ok(())
}

/// Waits for receive `n` (wr_id `n % RECV_DEPTH`), returns its bytes and reposts it.
fn recv(side: &mut Side, qp: &mut Qp, l: &Layout, n: u64, len: u32) -> Res<Vec<u8>> {
    let c = wait_one(side, true, n % RECV_DEPTH, WcOpcode::Recv)?;
    let off = l.slot(n) as usize;
    let data = side.arena.as_slice()[off..off + c.byte_len as usize].to_vec();
    side.post_recv(qp, n % RECV_DEPTH, l.slot(n), len)?;
    Ok(data)
}

fn send(side: &mut Side, qp: &mut Qp, l: &Layout, wr_id: u64, len: u32) -> Res<()> {
    qp.post_send(&send_wr(side, wr_id, SendOp::Send, l.send, len)?)?;
    wait_one(side, false, wr_id, WcOpcode::Send)?;
    Ok(())
}

fn main() -> Res<()> {
    let a = Args::parse();
    let l = Layout::new(a.size, a.rdma_size);
    let mut side = Side::open(&a.common, l.total as usize)?;
    let offer = side.remote_buf(l.rdma, a.rdma_size);
    let size = a.size;
    match role(&a.common) {
        None => server(&a, &l, side, offer),
        Some(ip) => {
            let (mut qp, id, peer) = side.connect(ip, a.common.port, offer, |s, qp| {
                post_receives(s, qp, &l, size)
            })?;
            let r = client(&a, &l, &mut side, &mut qp, peer);
            side.disconnect(&id);
            r
        }
    }
}

fn server(a: &Args, l: &Layout, mut side: Side, offer: RemoteBuf) -> Res<()> {
    let size = a.size;
    let (mut qp, id, _peer) =
        side.accept_one(a.common.port, offer, |s, qp| post_receives(s, qp, l, size))?;
    for i in 0..a.count {
        let ping = recv(&mut side, &mut qp, l, i, size)?;
        if ping.len() != size as usize || !holds(&ping, i) {
            return Err(format!("ping {i}: wrong data ({} bytes)", ping.len()).into());
        }
        let s = l.send as usize;
        pattern(
            &mut side.arena.as_mut_slice()[s..s + size as usize],
            i | 1 << 63,
        );
        send(&mut side, &mut qp, l, 1000 + i, size)?;
    }
    // The client's check request: its RDMA WRITE must be in our buffer.
    let req = recv(&mut side, &mut qp, l, a.count, size)?;
    if req.len() < 8 || u64::from_le_bytes(req[..8].try_into()?) != a.count {
        return Err("bad check request".into());
    }
    let r = l.rdma as usize;
    let ok = holds(
        &side.arena.as_slice()[r..r + a.rdma_size as usize],
        WRITE_SEED,
    );
    put_word(&mut side, l.send as usize, ok as u64);
    send(&mut side, &mut qp, l, 2000, 8)?;
    // Wait for the client to disconnect.
    let _ = side.cm.get_event_timeout(side.timeout);
    drop(id);
    if !ok {
        return Err("the client's RDMA WRITE did not land in the server's buffer".into());
    }
    println!(
        "pingpong server: {} round trips of {} bytes verified, RDMA WRITE of {} bytes verified",
        a.count, size, a.rdma_size
    );
    Ok(())
}

fn client(a: &Args, l: &Layout, side: &mut Side, qp: &mut Qp, peer: RemoteBuf) -> Res<()> {
    let size = a.size;
    if peer.len < a.rdma_size {
        return Err(format!("the server offers {} bytes for RDMA", peer.len).into());
    }
    let s = l.send as usize;
    let start = Instant::now();
    for i in 0..a.count {
        pattern(&mut side.arena.as_mut_slice()[s..s + size as usize], i);
        send(side, qp, l, 1000 + i, size)?;
        let pong = recv(side, qp, l, i, size)?;
        if pong.len() != size as usize || !holds(&pong, i | 1 << 63) {
            return Err(format!("pong {i}: wrong data ({} bytes)", pong.len()).into());
        }
    }
    let rtt_us = start.elapsed().as_secs_f64() * 1e6 / a.count.max(1) as f64;

    // RDMA WRITE our pattern into the server's buffer, READ it back, compare.
    let (r, b, n) = (l.rdma as usize, l.back as usize, a.rdma_size as usize);
    pattern(&mut side.arena.as_mut_slice()[r..r + n], WRITE_SEED);
    side.arena.as_mut_slice()[b..b + n].fill(0);
    let write = SendOp::Write {
        remote_to: peer.addr,
        rkey: peer.rkey,
    };
    qp.post_send(&send_wr(side, 3000, write, l.rdma, a.rdma_size)?)?;
    wait_one(side, false, 3000, WcOpcode::Write)?;
    let read = SendOp::Read {
        remote_to: peer.addr,
        rkey: peer.rkey,
        invalidate_local: false,
    };
    qp.post_send(&send_wr(side, 3001, read, l.back, a.rdma_size)?)?;
    wait_one(side, false, 3001, WcOpcode::Read)?;
    if !holds(&side.arena.as_slice()[b..b + n], WRITE_SEED) {
        return Err("RDMA READ did not return what RDMA WRITE wrote".into());
    }
    // Ask the server to check its buffer too.
    put_word(side, s, a.count);
    send(side, qp, l, 2000, 8)?;
    let reply = recv(side, qp, l, a.count, size)?;
    if reply.len() != 8 || u64::from_le_bytes(reply[..8].try_into()?) != 1 {
        return Err("the server did not find the RDMA WRITE in its buffer".into());
    }
    println!(
        "pingpong client: {} round trips of {} bytes verified ({rtt_us:.1} us per round trip), \
         RDMA WRITE+READ of {} bytes verified",
        a.count, size, a.rdma_size
    );
    Ok(())
}
