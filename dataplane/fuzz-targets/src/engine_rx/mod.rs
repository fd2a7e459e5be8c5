//! Target `engine_rx`: two `iwarp_engine::Engine`s joined by a wire, a QP connected between
//! them, and the fuzzer's frames injected on the wire: arbitrary frames, and legitimate
//! frames of the connection with the fuzzer's bytes written over their headers (checksums
//! fixed or not, the original delivered too or lost), mixed with legitimate traffic and
//! time passing.
//!
//! Invariants: no panic; `poll_transmit` and `poll_event` always end; every frame sent is a
//! whole Ethernet frame of at most 1514 bytes; no byte outside the regions writes may
//! reach ever changes; and when both QPs are still in RTS at the end (the input did not
//! hit the connection hard enough to tear it down), a Send and an RDMA Write still go
//! through with their bytes intact.

mod node;

use iwarp_engine::{AcceptParams, ConnectParams, Event, PrivateData};
use iwarp_types::{Duration, Instant, SendFlags, SendOp, SendWr, SgList, Sge, WcOpcode, WcStatus};
use iwarp_wire::l2l4::{
    EthernetFrame, EthernetProtocol, IpAddress, IpProtocol, Ipv4Packet, TcpPacket,
};

use iwarp_testkit::wire::{self, Settle, Timers};

use crate::cursor::Cursor;
use node::{Node, FRAME_MAX, RCV_WND, READABLE_END, RECV_AREA, RECV_LEN, WRITABLE_END};

/// Most operations one input drives.
const MAX_OPS: usize = 64;
/// Legitimate frames kept as mutation templates.
const TEMPLATES: usize = 32;
/// Operation bit: leave the IPv4/TCP checksums as they are (they are fixed by default:
/// a fuzz build does not verify them anyway, smoltcp's `verify_checksum` returns true under
/// `cfg(fuzzing)`, so fixing them keeps `cargo test` replays faithful).
const KEEP_CHECKSUMS: u8 = 0x10;
/// The listening port.
const PORT: u16 = 4791;
/// Where the final transfer's RDMA Write lands in B's writable region: `[FINAL_WRITE,
/// FINAL_WRITE + 3000)`.
const FINAL_WRITE: u64 = RECV_AREA + 4096;
/// The input's own Writes land at or above this, never where the final Write lands. An
/// attacker that can inject in-window TCP segments (what the input does) can replay a
/// whole FPDU it saw, at a stream position where it replaces the peer's bytes (TCP keeps
/// the first copy it holds; the replayed FPDU's CRC is right; a tagged Write has no
/// sequence number above TCP's): Linux behaves the same, and nothing short of a MAC could
/// tell. So bytes the input's Writes could have carried prove nothing; what it cannot
/// have seen (the final Write's region) must arrive intact.
const INPUT_WRITES: u64 = RECV_AREA + 8192;

/// Legitimate operations of A.
#[derive(Clone, Copy)]
enum Legit {
    Send,
    Write,
    Read,
}

/// A frame seen on the wire, with its direction.
#[derive(Clone)]
struct Template {
    to_b: bool,
    frame: Vec<u8>,
}

/// Two nodes, the wire, virtual time.
struct Pair {
    a: Node,
    b: Node,
    now: Instant,
    templates: Vec<Template>,
    next_wr: u64,
}

impl Pair {
    /// Moves frames until both sides are quiet (bounded); with `advance`, jumps to timers
    /// (at most `horizon` ahead) when quiet. Legitimate frames become templates.
    fn run(&mut self, advance: bool, horizon: Duration) {
        let timers = if advance {
            Timers::Until(self.now + horizon)
        } else {
            Timers::Never
        };
        let settle = Settle {
            max_rounds: 2_000,
            step: Duration::from_micros(10),
            timers,
        };
        let templates = &mut self.templates;
        wire::settle(
            &mut self.a,
            &mut self.b,
            &mut self.now,
            settle,
            |to_b, f| {
                keep(templates, to_b, f.clone());
                true
            },
        );
    }

    /// Connects A to B's listener and accepts: both QPs in RTS, or `None`.
    fn connect() -> Option<Pair> {
        let mut p = Pair {
            a: Node::new(1)?,
            b: Node::new(2)?,
            now: Instant(1_000_000),
            templates: Vec::new(),
            next_wr: 1,
        };
        p.b.eng.listen(PORT, 2).ok()?;
        let params = ConnectParams {
            private_data: PrivateData::new(b"fuzz")?,
            ..ConnectParams::default()
        };
        let b_ip = p.b.eng.config().ipv4;
        p.a.eng.connect(p.now, p.a.qp, b_ip, PORT, params).ok()?;
        p.run(false, Duration::ZERO);
        let conn = p.b.events.iter().find_map(|e| match e {
            Event::ConnectRequest { conn, .. } => Some(*conn),
            _ => None,
        })?;
        let accept = AcceptParams {
            private_data: PrivateData::new(b"ok")?,
            ..AcceptParams::default()
        };
        p.b.eng.accept(p.now, conn, p.b.qp, accept).ok()?;
        p.run(false, Duration::ZERO);
        (p.a.rts() && p.b.rts()).then_some(p)
    }

    /// A posts a Send of `len` bytes (B posts the receive first), an RDMA Write of `len`
    /// bytes into B's writable region at `to`, or an RDMA Read of `len` bytes of B's
    /// readable region into its receive area; then the wire runs.
    fn legit(&mut self, kind: Legit, len: u32, to: u64) {
        let wr_id = self.next_wr;
        self.next_wr += 1;
        let len = len % RECV_LEN;
        let room = |size: u64| (size - u64::from(len)).max(1);
        let (op, sge) = match kind {
            Legit::Write => (
                SendOp::Write {
                    remote_to: INPUT_WRITES + to % room(WRITABLE_END - INPUT_WRITES),
                    rkey: self.b.writable,
                },
                (RECV_AREA, self.a.writable),
            ),
            Legit::Read => (
                SendOp::Read {
                    remote_to: WRITABLE_END + to % room(READABLE_END - WRITABLE_END),
                    rkey: self.b.readable,
                    invalidate_local: false,
                },
                (to % room(RECV_AREA), self.a.local),
            ),
            Legit::Send => {
                self.b.post_recv(wr_id);
                (SendOp::Send, (RECV_AREA, self.a.writable))
            }
        };
        let wr = SendWr {
            wr_id,
            op,
            sgl: SgList::single(Sge {
                addr: sge.0,
                length: len,
                lkey: sge.1,
            }),
            flags: SendFlags::SIGNALED,
        };
        let _ = self.a.eng.post_send(self.a.qp, &wr);
        self.run(false, Duration::ZERO);
    }
}

/// Recomputes the IPv4 header checksum and the TCP checksum of an Ethernet frame, when
/// they can be found.
/// Keeps a frame seen on the wire as a template (the last [`TEMPLATES`]).
fn keep(templates: &mut Vec<Template>, to_b: bool, frame: Vec<u8>) {
    if templates.len() >= TEMPLATES {
        templates.remove(0);
    }
    templates.push(Template { to_b, frame });
}

fn fix_checksums(frame: &mut [u8]) {
    let Ok(eth) = EthernetFrame::new_checked(&*frame) else {
        return;
    };
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return;
    }
    let Some(ip_bytes) = frame.get_mut(14..) else {
        return;
    };
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut *ip_bytes) else {
        return;
    };
    ip.fill_checksum();
    let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.next_header());
    if proto != IpProtocol::Tcp {
        return;
    }
    let Ok(mut tcp) = TcpPacket::new_checked(ip.payload_mut()) else {
        return;
    };
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
}

/// Virtual time given to retransmissions after the input, before the final transfer.
const REPAIR_WINDOW: Duration = Duration::from_secs(300);

/// The body of the `engine_rx` fuzz target.
pub fn engine_rx(data: &[u8]) {
    run(data);
}

/// Runs the target; returns whether the final transfer was checked (both QPs in RTS).
fn run(data: &[u8]) -> bool {
    let Some(mut p) = Pair::connect() else {
        panic!("two engines on a clean wire must connect");
    };
    let mut c = Cursor::new(data);
    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        let op = c.u8();
        match op % 8 {
            // An arbitrary frame to B or A.
            0 | 1 => {
                let mut f = c.chunk(FRAME_MAX).to_vec();
                if op & KEEP_CHECKSUMS == 0 {
                    fix_checksums(&mut f);
                }
                if op & 1 == 0 {
                    p.b.eng.handle_frame(p.now, &f, &mut p.b.mem);
                } else {
                    p.a.eng.handle_frame(p.now, &f, &mut p.a.mem);
                }
                p.run(false, Duration::ZERO);
            }
            // A legitimate frame with the fuzzer's bytes over it: at an offset in the
            // headers (Ethernet, IPv4, TCP, MPA, DDP, RDMAP), written or xored, checksums
            // fixed or kept, the original delivered as well or lost.
            2..=4 if !p.templates.is_empty() => {
                // Index 0 is the most recent frame.
                let k = c.below(p.templates.len());
                let t = p.templates[p.templates.len() - 1 - k].clone();
                let mut f = t.frame.clone();
                let at = c.below(f.len().min(14 + 20 + 60 + 18 + 28 + 8));
                let bytes = c.chunk(16);
                for (k, &b) in bytes.iter().enumerate() {
                    if let Some(x) = f.get_mut(at + k) {
                        *x = if op & 0x20 != 0 { *x ^ b } else { b };
                    }
                }
                if op & KEEP_CHECKSUMS == 0 {
                    fix_checksums(&mut f);
                }
                let (to, mem) = if t.to_b {
                    (&mut p.b.eng, &mut p.b.mem)
                } else {
                    (&mut p.a.eng, &mut p.a.mem)
                };
                // Both in one receive pass, as a burst off the wire.
                let mut pass = to.receiver(p.now);
                pass.handle_frame(&f, mem);
                if op & 0x40 != 0 {
                    pass.handle_frame(&t.frame, mem);
                }
                drop(pass);
                p.run(false, Duration::ZERO);
            }
            5 | 6 => {
                let len = u32::from(c.u16());
                let to = u64::from(c.u16());
                let kind = match (op % 8, op & 0x80 != 0) {
                    (6, _) => Legit::Write,
                    (_, true) => Legit::Read,
                    _ => Legit::Send,
                };
                p.legit(kind, len, to);
            }
            _ => {
                let ms = u64::from(c.u8()) * 50;
                p.now = Instant(p.now.0 + ms * 1_000_000);
                p.a.eng.handle_timeout(p.now, &mut p.a.mem);
                p.b.eng.handle_timeout(p.now, &mut p.b.mem);
                p.run(false, Duration::ZERO);
            }
        }
    }
    // Let retransmissions repair what was lost, then check the connection still serves.
    // The input may have inflated the RTT legitimately (it advances virtual time while
    // frames are in flight), so the repair window covers a few retransmissions at the
    // largest RTO (60 s), not a fixed short time.
    p.run(true, REPAIR_WINDOW);
    p.a.check_memory();
    p.b.check_memory();
    if !(p.a.rts() && p.b.rts()) {
        return false;
    }
    final_transfer(&mut p);
    p.a.check_memory();
    p.b.check_memory();
    true
}

/// When B's TCP holds bytes out of order (perhaps forged by the input: B keeps the first
/// copy), A's RDMA Writes into the input's region until more than a receive window of
/// stream has passed, so that held bytes can only replace bytes of these Writes, never
/// those of the final transfer. False if the connection went down.
fn flush_window(p: &mut Pair) -> bool {
    let held =
        p.b.eng
            .qp_conn(p.b.qp)
            .and_then(|id| p.b.eng.conn(id))
            .is_some_and(|c| c.tcp.holds_out_of_order());
    if !held {
        return true;
    }
    let len = (WRITABLE_END - INPUT_WRITES) as u32;
    let mut sent = 0u32;
    // Batches of 16 (the send queue holds 32; the input may have left some WRs).
    while sent <= RCV_WND {
        for _ in 0..16 {
            let wr = SendWr {
                wr_id: 0xf1,
                op: SendOp::Write {
                    remote_to: INPUT_WRITES,
                    rkey: p.b.writable,
                },
                sgl: SgList::single(Sge {
                    addr: RECV_AREA,
                    length: len,
                    lkey: p.a.writable,
                }),
                flags: SendFlags::NONE,
            };
            if p.a.eng.post_send(p.a.qp, &wr).is_err() {
                return false;
            }
            sent += len;
        }
        p.run(true, Duration::from_secs(120));
        if !(p.a.rts() && p.b.rts()) {
            return false;
        }
    }
    true
}

/// A Send and an RDMA Write with known bytes must arrive intact on a connection that is
/// still up.
fn final_transfer(p: &mut Pair) {
    if !flush_window(p) {
        return;
    }
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 1) as u8).collect();
    let src = RECV_AREA as usize + 16 * 1024;
    p.a.mem.arena_mut(p.a.arena)[src..src + data.len()].copy_from_slice(&data);
    let _ = p.b.completions();
    let _ = p.a.completions();
    if !p.b.post_recv(0xfeed) {
        // The input's Sends filled B's receive queue with receives never consumed.
        return;
    }
    let wr = |wr_id, op| SendWr {
        wr_id,
        op,
        sgl: SgList::single(Sge {
            addr: src as u64,
            length: data.len() as u32,
            lkey: p.a.writable,
        }),
        flags: SendFlags::SIGNALED,
    };
    let send = wr(0xa1, SendOp::Send);
    let write = wr(
        0xa2,
        SendOp::Write {
            remote_to: FINAL_WRITE,
            rkey: p.b.writable,
        },
    );
    let sq = &mut p.a.eng;
    assert!(sq.post_send(p.a.qp, &send).is_ok(), "A cannot post a Send");
    assert!(
        sq.post_send(p.a.qp, &write).is_ok(),
        "A cannot post a Write"
    );
    // Up to 15 minutes: an input that injected in-window bytes can desynchronise the two
    // TCPs (B took forged bytes as A's, so B acknowledges data A never sent and A's own
    // retransmissions are old to B). Nothing on the wire can tell (Linux behaves the
    // same); what ends it is the retransmission limit (`max_retries` 6: about 5 minutes
    // of backed-off timeouts) and B's MPA stall timer, after which both QPs leave RTS.
    // Found by `scripts/fuzz.sh engine_rx` (corpus file crash-a99ae1ff...): with a
    // 2-minute horizon the connection was still up, and the final Send still waiting.
    p.run(true, Duration::from_secs(900));
    if !(p.a.rts() && p.b.rts()) {
        // Torn down while delivering: a Terminate or a reset the fuzz input provoked
        // (for example, B's receive queue was already full of the input's Sends).
        return;
    }
    // Receives left over by the input may be ahead of ours: the Send lands in the first
    // one still posted, which completes with its length.
    let got = p.b.completions();
    let recv = got
        .iter()
        .find(|e| e.opcode == WcOpcode::Recv && e.byte_len as usize == data.len())
        .unwrap_or_else(|| {
            panic!(
                "the Send never completed at B: {got:?}, A: {:?}, counters A {:?} B {:?}",
                p.a.completions(),
                p.a.eng.counters(),
                p.b.eng.counters()
            )
        });
    assert_eq!(recv.status, WcStatus::Success);
    let at =
        p.b.recv_at
            .iter()
            .find(|(id, _)| *id == recv.wr_id)
            .map(|(_, at)| *at as usize)
            .expect("a receive we posted");
    assert_eq!(&p.b.mem.arena(p.b.arena)[at..at + data.len()], &data[..]);
    let w = FINAL_WRITE as usize;
    assert_eq!(
        &p.b.mem.arena(p.b.arena)[w..w + data.len()],
        &data[..],
        "the RDMA Write did not land"
    );
    let done = p.a.completions();
    assert!(
        done.iter()
            .any(|e| e.wr_id == 0xa2 && e.status == WcStatus::Success),
        "the Write never completed at A: {done:?}; A {:?} {:?}; B {:?}",
        p.a.eng.rnic().query_qp(p.a.qp),
        p.a.eng.counters(),
        p.b.eng.counters()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds reach both outcomes: connections that survive the input and serve the
    /// final transfer, and connections the input tears down (forged RST/FIN, bad CRC).
    #[test]
    fn seeds_reach_both_outcomes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/engine_rx");
        let (mut up, mut down) = (0, 0);
        for e in std::fs::read_dir(dir).expect("corpus").flatten() {
            // Crash regressions are replayed by tests/corpus_replay.rs.
            if e.file_name().to_string_lossy().starts_with("regress-") {
                continue;
            }
            if run(&std::fs::read(e.path()).expect("file")) {
                up += 1;
            } else {
                down += 1;
            }
        }
        eprintln!(
            "engine_rx seeds: {up} served the final transfer, {down} tore the connection down"
        );
        assert!(up > 0 && down > 0, "up {up} down {down}");
    }

    #[test]
    fn clean_pair_serves_and_garbage_is_survived() {
        assert!(run(&[]));
        // Legit Send and Write, a junk frame to B, a header-mutated copy with checksums
        // fixed (original also delivered), time passing.
        let input = [
            5, 0x01, 0x00, 0, 0, // Send of 256 bytes
            6, 0x02, 0x00, 0, 64, // Write of 512 bytes
            0x85, 0x03, 0x00, 0, 8, // Read of 768 bytes
            0, 0, 4, 0xde, 0xad, 0xbe, 0xef, // junk frame
            0x52, 0, 0, 0, 40, 0, 4, 1, 2, 3,
            4, // template mutated at TCP seq, fixed + original
            7, 10, // 500 ms
        ];
        run(&input);
    }
}
