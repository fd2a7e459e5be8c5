//! The server side of a perftest run (the perftest tool on the other end is the client):
//! answers every channel message in kind ([`super::wire::server_answer`], our `pingpong_dest`
//! for a non-zero one), accepts the channel and the data connection on one listener, and
//! plays the passive part of the test: receives and iWARP credits for `send_bw`, echoes for
//! `send_lat`, the server's half of the `write_lat` ping-pong (the server writes first),
//! nothing for the READ and WRITE bandwidth tests and `read_lat` (the client moves the data).
//!
//! The end: after the last channel round (`ctx_close_connection`) both perftest ends
//! disconnect their data connection (`rdma_cm_disconnect_nodes`) and wait for the
//! disconnect; the tool then exits and its channel closes. This side lets the client's
//! disconnect end the data connection (the engine answers its FIN with ours), takes the
//! flushed receives that follow as part of the close, and is done when the channel closes
//! (or [`CHANNEL_LINGER`] after the data connection closed).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use iwarp_verbs::{SendOp, Stag, WcOpcode};

use super::session::{err, Session, Test, CTRL, DATA};
use super::wire::{credit_due, send_rx_depth, server_answer, Dest, Msg, DEST_LEN};

/// What the server is asked to do.
pub struct ServerOpts {
    /// The tool on the other side.
    pub test: Test,
    /// Address to listen on.
    pub addr: Ipv4Addr,
    /// Port.
    pub port: u16,
    /// Message size in bytes (`-s` of the peer).
    pub size: u32,
    /// Iterations (`-n` of the peer).
    pub iters: u64,
    /// Receive depth (`-r` of the peer; SEND tests).
    pub rx_depth: u32,
    /// Whole-run limit.
    pub timeout: Duration,
    /// Daemon name.
    pub daemon: String,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct ServerReport {
    /// Channel rounds answered.
    pub rounds: u32,
    /// Non-zero `pingpong_dest`s received.
    pub dests: u32,
    /// Data receives completed.
    pub recvs: u64,
    /// Data sends or writes posted (echoes, credits).
    pub sends: u64,
    /// Credits written.
    pub credits: u64,
    /// How the end was found.
    pub end: &'static str,
}

/// How long the server waits for the channel to close after the data connection closed
/// (and for the data connection's close after the channel's).
pub const CHANNEL_LINGER: Duration = Duration::from_secs(5);

/// The server's half of `ib_write_lat` (perftest's `run_iter_lat_write`): the server writes
/// first; each write carries its sequence number (mod 256) in the message's last byte, and
/// the server writes number `n + 1` once the client's write number `n` has landed. Given
/// the writes posted so far and the last byte of the receive area: the last byte of the
/// next write to post, if it is due.
pub fn write_lat_next(sent: u64, iters: u64, seen: u8) -> Option<u8> {
    if sent >= iters {
        return None;
    }
    (sent == 0 || seen == sent as u8).then_some((sent + 1) as u8)
}

/// Runs the server until the client has its results.
pub fn run_server(o: &ServerOpts) -> Result<ServerReport, String> {
    let mut s = Session::open(&o.daemon, o.size)?;
    let listener = s.cm.create_id().map_err(|e| err("create_id", e))?;
    listener
        .listen(SocketAddrV4::new(o.addr, o.port), 4)
        .map_err(|e| err("listen", e))?;
    println!("listening on {}:{} ({:?})", o.addr, o.port, o.test);
    let rx_depth = send_rx_depth(o.rx_depth, o.iters).max(1);
    let size = o.size as usize;
    let recv_off = s.data_recv();
    let mut r = ServerReport::default();
    let mut peer: Option<Dest> = None;
    // Non-zero dests received while the data connection was up (write_lat starts after one).
    let mut dests_up = 0u32;
    let mut data_closed_at: Option<Instant> = None;
    let mut chan_closed_at: Option<Instant> = None;
    let deadline = Instant::now() + o.timeout;
    loop {
        if Instant::now() > deadline {
            return Err(format!("timeout ({r:?})"));
        }
        if let Some(req) = s.cm_poll()? {
            if s.chan.is_none() {
                let c = s.make_conn(req, 8, 2, true)?;
                s.chan = Some(c);
                s.post_chan_recv()?;
                let c = s.chan.as_ref().ok_or("no channel")?;
                c.id.accept(&c.qp, &Session::conn_param(0))
                    .map_err(|e| err("accept (channel)", e))?;
            } else if s.data.is_none() {
                let pre = match o.test {
                    Test::SendBw => rx_depth,
                    Test::SendLat => 16,
                    _ => 0,
                };
                let c = s.make_conn(req, 2 * pre + 64, pre + 4, true)?;
                s.data = Some(c);
                for _ in 0..pre {
                    s.post_data_recv()?;
                }
                let c = s.data.as_ref().ok_or("no data connection")?;
                c.id.accept(&c.qp, &Session::conn_param(16))
                    .map_err(|e| err("accept (data)", e))?;
            } else {
                req.reject(&[]).map_err(|e| err("reject", e))?;
            }
        }
        let data_up = s.data.as_ref().is_some_and(|c| c.up) && !s.data_down;
        if let Some(len) = s.chan_poll()? {
            let msg = s.chan_msg(len);
            s.post_chan_recv()?;
            r.rounds += 1;
            let reply = match Msg::of_len(len) {
                Some(Msg::Dest) => {
                    let d = Dest::decode(&msg).map_err(|e| e.to_string())?;
                    if d.is_zero() {
                        [0u8; DEST_LEN].to_vec()
                    } else {
                        r.dests += 1;
                        if data_up {
                            dests_up += 1;
                        }
                        peer = Some(d);
                        s.my_dest(o.test).encode().to_vec()
                    }
                }
                _ => server_answer(&msg)
                    .ok_or_else(|| format!("unexpected channel message of {len} bytes"))?,
            };
            s.chan_send(&reply, o.timeout)?;
        }
        s.data_poll()?;
        let cqes: Vec<_> = s.data_cqes.drain(..).collect();
        for c in cqes {
            if c.opcode != WcOpcode::Recv || s.data_down {
                continue;
            }
            r.recvs += 1;
            s.post_data_recv()?;
            match o.test {
                Test::SendBw => {
                    if let Some(p) = peer.filter(|_| credit_due(r.recvs, rx_depth)) {
                        let v = (r.recvs as u32).to_le_bytes();
                        s.arena.as_mut_slice()[CTRL..CTRL + 4].copy_from_slice(&v);
                        let op = SendOp::Write {
                            remote_to: p.vaddr,
                            rkey: Stag(p.rkey),
                        };
                        s.post_data(5, op, CTRL, 4)?;
                        r.credits += 1;
                        r.sends += 1;
                    }
                }
                Test::SendLat => {
                    s.post_data(6, SendOp::Send, DATA, o.size)?;
                    r.sends += 1;
                }
                _ => {}
            }
        }
        if o.test == Test::WriteLat && data_up && dests_up > 0 {
            if let Some(p) = peer {
                let seen = s.arena.as_slice()[recv_off + size - 1];
                // Only write_lat's writes count in `sends` here.
                if let Some(v) = write_lat_next(r.sends, o.iters, seen) {
                    s.arena.as_mut_slice()[DATA + size - 1] = v;
                    let op = SendOp::Write {
                        remote_to: p.vaddr,
                        rkey: Stag(p.rkey),
                    };
                    s.post_data(7, op, DATA, o.size)?;
                    r.sends += 1;
                }
            }
        }
        if s.data_down && data_closed_at.is_none() {
            if !s.data.as_ref().is_some_and(|c| c.up) || r.dests == 0 {
                return Err(format!(
                    "the data connection closed before the test ({r:?})"
                ));
            }
            data_closed_at = Some(Instant::now());
            r.end = "the client closed the data connection";
        }
        if let Some(t) = data_closed_at {
            if s.chan_down {
                r.end = "the client closed the data connection and the channel";
                return Ok(r);
            }
            if t.elapsed() > CHANNEL_LINGER {
                return Ok(r);
            }
        } else if s.chan_closing() {
            // The tool closes the data connection first, but the two closes reach this
            // side through different queues (CM events, completions): give the data
            // connection's own a moment.
            let t = *chan_closed_at.get_or_insert_with(Instant::now);
            if t.elapsed() > CHANNEL_LINGER {
                return Err(format!(
                    "the channel closed, the data connection did not ({r:?})"
                ));
            }
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_lat_server_writes_first_then_answers_each_write() {
        assert_eq!(write_lat_next(0, 3, 0), Some(1), "the server starts");
        assert_eq!(
            write_lat_next(1, 3, 0),
            None,
            "then waits for the client's 1"
        );
        assert_eq!(write_lat_next(1, 3, 1), Some(2));
        assert_eq!(write_lat_next(2, 3, 1), None);
        assert_eq!(write_lat_next(2, 3, 2), Some(3));
        assert_eq!(write_lat_next(3, 3, 3), None, "all iterations written");
    }

    #[test]
    fn write_lat_sequence_wraps_like_perftests_char() {
        assert_eq!(
            write_lat_next(256, 1000, 0),
            Some(1),
            "write 257 follows the client's 256 (0 as a char)"
        );
        assert_eq!(write_lat_next(256, 1000, 255), None);
    }
}
