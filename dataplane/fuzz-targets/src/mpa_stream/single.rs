//! Single mode: one connection fed arbitrary octets.

use iwarp_mpa::{MpaConn, MpaEvent, MpaState, Role, UlpduSource};
use iwarp_types::Instant;
use iwarp_wire::mpa::{Frame, FrameKind, FrameRepr, FRAME_MAX_LEN};

use super::{config, Sink};
use crate::cursor::Cursor;

/// Most operations one input drives.
const MAX_OPS: usize = 512;
/// Largest chunk delivered at once.
const MAX_CHUNK: usize = 4096;

/// A source that is never asked for anything: nothing is pushed in single mode.
struct NoUlpdus;

impl UlpduSource<()> for NoUlpdus {
    fn fill_ulpdu(&mut self, _: &(), _: &mut [u8]) {
        panic!("no ULPDU was pushed");
    }
}

/// Runs single mode; returns the number of ULPDUs the sink accepted.
pub(super) fn run(mode: u8, c: &mut Cursor<'_>) -> usize {
    let cfg = config(c);
    let role = if mode & 2 != 0 {
        Role::Initiator
    } else {
        Role::Responder
    };
    let refuse_at = (mode & 4 != 0).then(|| usize::from(mode >> 4));
    let mut now = Instant(1_000);
    let mut conn: MpaConn<()> = match role {
        Role::Initiator => match MpaConn::initiator(&cfg, c.chunk(600), now) {
            Ok(conn) => conn,
            Err(_) => return 0,
        },
        Role::Responder => MpaConn::responder(&cfg, now),
    };
    let mut sink = Sink::new(cfg.rx_ulpdu_max_bytes.min(65535), refuse_at);
    let mut stream: Vec<u8> = Vec::new();
    let mut failed_at: Option<usize> = None;
    let mut events = 0usize;
    check_tx_frame(&mut conn, role);
    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        match c.u8() % 8 {
            // TCP re-delivers octets it already delivered (identical, overlapping).
            5 if !stream.is_empty() => {
                let back = 1 + c.below(stream.len());
                let from = stream.len() - back;
                let extra = c.chunk(MAX_CHUNK);
                let mut data = stream[from..].to_vec();
                data.extend_from_slice(extra);
                let n = conn.rx(&mut sink).deliver(from as u64, &data);
                assert_eq!(n, data.len(), "deliver must consume everything");
                stream.extend_from_slice(extra);
            }
            6 => {
                now = Instant(now.0.saturating_add(u64::from(c.u32())));
                conn.handle_timeout(now);
            }
            7 => {
                // The ULP answers a pending Request (calls in the wrong state are refused).
                let pd = c.chunk(600);
                let r = if c.bool() {
                    conn.accept(pd, u16::from(c.u8()), u16::from(c.u8()))
                } else {
                    conn.reject(pd)
                };
                if r.is_ok() {
                    assert!(matches!(
                        conn.state(),
                        MpaState::Established | MpaState::Rejected
                    ));
                }
                check_tx_frame(&mut conn, role);
            }
            _ => {
                let data = c.chunk(MAX_CHUNK);
                let at = stream.len() as u64;
                assert_eq!(conn.rx(&mut sink).deliver(at, data), data.len());
                stream.extend_from_slice(data);
            }
        }
        while let Some(e) = conn.poll_event() {
            events += 1;
            match e {
                MpaEvent::Failed(_) => {
                    assert_eq!(conn.state(), MpaState::Failed);
                    failed_at.get_or_insert(sink.got.len());
                }
                MpaEvent::RequestReceived(info) => {
                    assert_eq!(role, Role::Responder);
                    assert!(info.private_data.len() <= 512);
                }
                MpaEvent::Rejected { .. } => assert_eq!(role, Role::Initiator),
                MpaEvent::Established(n) => {
                    assert!(n.revision == 1 || n.revision == 2);
                    assert!(n.ird <= 0x3fff && n.ord <= 0x3fff);
                }
            }
        }
        if let Some(n) = failed_at {
            assert_eq!(sink.got.len(), n, "ULPDUs delivered after the failure");
        }
        // One event per state change at most: bounded by the operations done.
        assert!(events <= 4 + MAX_OPS);
    }
    let counters = conn.counters();
    assert_eq!(counters.events_dropped, 0);
    assert!(counters.fpdus_rx >= sink.got.len() as u64);
    sink.got.len()
}

/// What the connection queued for sending so far must be our frame of the right kind.
fn check_tx_frame(conn: &mut MpaConn<()>, role: Role) {
    let end = conn.end_offset();
    if end == 0 {
        return;
    }
    // Nothing is pushed in single mode: the frame is the only record.
    let n = conn.seg_len(0, FRAME_MAX_LEN);
    assert_eq!(n as u64, end);
    let mut buf = [0u8; FRAME_MAX_LEN];
    conn.tx(&mut NoUlpdus).fill(0, &mut buf[..n]);
    let f = Frame::new_checked(&buf[..n]).expect("our frame is whole");
    let repr = FrameRepr::parse(&f).expect("our frame parses");
    let kind = match role {
        Role::Initiator => FrameKind::Request,
        Role::Responder => FrameKind::Reply,
    };
    assert_eq!(repr.kind, kind);
    assert_eq!(f.total_len(), n);
}
