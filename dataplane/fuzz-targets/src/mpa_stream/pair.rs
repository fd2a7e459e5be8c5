//! Pair mode: an initiator and a responder joined by an emulated TCP.

use iwarp_mpa::{MpaConn, MpaEvent, MpaState, PushError, UlpduSource, MIN_ULPDU_LEN};
use iwarp_types::Instant;

use super::{config, Sink};
use crate::cursor::Cursor;

/// Most operations one input drives.
const MAX_OPS: usize = 256;
/// Most ULPDUs pushed per side.
const MAX_PUSHED: usize = 64;
/// Most segments one pump moves (the rest waits for the next pump).
const MAX_SEGS_PER_PUMP: usize = 256;

/// ULPDU bytes by descriptor (the index of the push).
#[derive(Default)]
struct Src {
    ulpdus: Vec<Vec<u8>>,
}

impl UlpduSource<usize> for Src {
    fn fill_ulpdu(&mut self, desc: &usize, out: &mut [u8]) {
        let u = &self.ulpdus[*desc];
        assert_eq!(
            u.len(),
            out.len(),
            "fill_ulpdu length differs from the push"
        );
        out.copy_from_slice(u);
    }
}

/// One end: its connection, what it pushed, what it received.
struct End {
    conn: MpaConn<usize>,
    src: Src,
    /// Indexes of `src.ulpdus` that were queued (in order).
    queued: Vec<usize>,
    released: Vec<usize>,
    sink: Sink,
    /// Next stream offset to send.
    sent: u64,
    /// Whether the peer's stream was corrupted on the way to this end.
    rx_corrupted: bool,
    failed: Option<usize>,
    established: bool,
    /// The responder sends no FPDU before it received one (RFC 5044 section 7.1.2).
    responder: bool,
}

impl End {
    fn new(conn: MpaConn<usize>, rx_max: usize, refuse_at: Option<usize>) -> End {
        let responder = conn.role() == iwarp_mpa::Role::Responder;
        End {
            conn,
            src: Src::default(),
            queued: Vec::new(),
            released: Vec::new(),
            sink: Sink::new(rx_max, refuse_at),
            sent: 0,
            rx_corrupted: false,
            failed: None,
            established: false,
            responder,
        }
    }

    fn push(&mut self, c: &mut Cursor<'_>) {
        if self.src.ulpdus.len() >= MAX_PUSHED {
            return;
        }
        let len = MIN_ULPDU_LEN + c.below(1500);
        let seed = c.u8();
        let bytes: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
        let desc = self.src.ulpdus.len();
        self.src.ulpdus.push(bytes);
        match self.conn.push_ulpdu(desc, len) {
            Ok(()) => self.queued.push(desc),
            Err(PushError::Full(d) | PushError::TooLong(d) | PushError::NotEstablished(d)) => {
                assert_eq!(d, desc, "the refused descriptor is handed back");
            }
        }
    }

    fn poll(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                MpaEvent::Failed(_) => {
                    self.failed.get_or_insert(self.sink.got.len());
                }
                MpaEvent::Established(_) => self.established = true,
                MpaEvent::RequestReceived(_) | MpaEvent::Rejected { .. } => {}
            }
        }
        if let Some(n) = self.failed {
            assert_eq!(self.sink.got.len(), n, "ULPDUs delivered after the failure");
        }
    }
}

/// The corruption of one octet of one direction's stream.
#[derive(Clone, Copy)]
struct Corruption {
    at: u64,
    mask: u8,
}

/// Moves what `from` has to send into `to`, segment by segment (`mss` octets at most),
/// each cut in two chunks, re-reading some for retransmission; returns true if anything
/// moved.
fn pump(
    from: &mut End,
    to: &mut End,
    mss: usize,
    c: &mut Cursor<'_>,
    corrupt: Option<Corruption>,
) -> bool {
    let mut moved = false;
    for _ in 0..MAX_SEGS_PER_PUMP {
        let end = from.conn.end_offset();
        if from.sent >= end {
            break;
        }
        let n = from.conn.seg_len(from.sent, mss);
        assert!(n > 0 && n <= mss, "seg_len {n} for mss {mss}");
        assert!(from.sent + n as u64 <= end);
        let mut seg = vec![0u8; n];
        from.conn.fill(from.sent, &mut seg, &mut from.src);
        if c.bool() {
            // A retransmission re-reads the same octets.
            let mut again = vec![0u8; n];
            from.conn.fill(from.sent, &mut again, &mut from.src);
            assert_eq!(again, seg, "retransmission differs");
        }
        if let Some(k) = corrupt {
            if (from.sent..from.sent + n as u64).contains(&k.at) {
                seg[(k.at - from.sent) as usize] ^= k.mask;
                to.rx_corrupted = true;
            }
        }
        let cut = c.below(n + 1);
        let (a, b) = seg.split_at(cut);
        assert_eq!(to.conn.rx(&mut to.sink).deliver(from.sent, a), a.len());
        assert_eq!(
            to.conn.rx(&mut to.sink).deliver(from.sent + cut as u64, b),
            b.len()
        );
        from.sent += n as u64;
        // TCP acknowledges what was delivered.
        let released = &mut from.released;
        from.conn.released(from.sent, |d| released.push(d));
        moved = true;
    }
    to.poll();
    from.poll();
    moved
}

/// Runs pair mode; returns the number of ULPDUs both sinks accepted.
pub(super) fn run(mode: u8, c: &mut Cursor<'_>) -> usize {
    let ci = config(c);
    let cr = config(c);
    let mut now = Instant(1_000);
    let Ok(i) = MpaConn::initiator(&ci, c.chunk(96), now) else {
        return 0;
    };
    let r = MpaConn::responder(&cr, now);
    let refuse = |shift: u8| (mode >> shift & 1 != 0).then_some(usize::from(mode >> 4));
    let mut i = End::new(i, ci.rx_ulpdu_max_bytes, refuse(1));
    let mut r = End::new(r, cr.rx_ulpdu_max_bytes, refuse(2));
    let mss = 32 + c.below(1500);
    let mut corrupt_i: Option<Corruption> = None; // of the stream i → r
    let mut corrupt_r: Option<Corruption> = None;

    // Start-up: Request, the responder's decision, Reply.
    pump(&mut i, &mut r, mss, c, None);
    if r.conn.state() == MpaState::RequestPending {
        let pd = c.chunk(64);
        let _ = if mode & 8 != 0 {
            r.conn.reject(pd)
        } else {
            r.conn.accept(pd, u16::from(c.u8()), u16::from(c.u8()))
        };
        r.poll();
    }
    pump(&mut r, &mut i, mss, c, None);

    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        match c.u8() % 8 {
            0 | 1 => i.push(c),
            2 | 3 => r.push(c),
            4 => {
                pump(&mut i, &mut r, mss, c, corrupt_i);
            }
            5 => {
                pump(&mut r, &mut i, mss, c, corrupt_r);
            }
            6 => {
                let k = Corruption {
                    at: u64::from(c.u16()),
                    mask: c.u8() | 1,
                };
                if c.bool() {
                    corrupt_i.get_or_insert(Corruption {
                        at: i.sent + k.at,
                        ..k
                    });
                } else {
                    corrupt_r.get_or_insert(Corruption {
                        at: r.sent + k.at,
                        ..k
                    });
                }
            }
            _ => {
                now = Instant(now.0.saturating_add(u64::from(c.u32())));
                i.conn.handle_timeout(now);
                r.conn.handle_timeout(now);
                i.poll();
                r.poll();
            }
        }
    }
    // Let everything queued arrive.
    for _ in 0..64 {
        let a = pump(&mut i, &mut r, mss, c, corrupt_i);
        let b = pump(&mut r, &mut i, mss, c, corrupt_r);
        if !a && !b {
            break;
        }
    }
    check_delivery(&i, &r);
    check_delivery(&r, &i);
    check_release(&i);
    check_release(&r);
    i.sink.got.len() + r.sink.got.len()
}

/// What `to` received is what `from` queued, in order: a prefix always (CRC protects
/// even a corrupted stream), the whole when nothing went wrong.
fn check_delivery(from: &End, to: &End) {
    let crc = to.conn.negotiated().is_some_and(|n| n.crc);
    if to.rx_corrupted && !crc {
        return;
    }
    let got = &to.sink.got;
    assert!(
        got.len() <= from.queued.len(),
        "more ULPDUs received than sent"
    );
    for (k, u) in got.iter().enumerate() {
        assert_eq!(
            u, &from.src.ulpdus[from.queued[k]],
            "ULPDU {k} differs from the one sent"
        );
    }
    // The responder holds its FPDUs back until the initiator's first one arrived.
    let gate_open = !from.responder || from.conn.counters().fpdus_rx > 0;
    let clean = gate_open
        && !to.rx_corrupted
        && to.failed.is_none()
        && from.failed.is_none()
        && !to.sink.refused
        && from.conn.state() == MpaState::Established
        && to.conn.state() == MpaState::Established;
    if clean && from.sent == from.conn.end_offset() {
        assert_eq!(
            got.len(),
            from.queued.len(),
            "ULPDUs lost on a clean stream"
        );
    }
}

/// Descriptors come back in push order, each once, and only once sent.
fn check_release(e: &End) {
    assert!(e.released.len() <= e.queued.len());
    assert_eq!(e.released[..], e.queued[..e.released.len()]);
}
