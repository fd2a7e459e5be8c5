//! A corrupted FPDU, with the CRC checked before placement (the default) and with the
//! payload placed in the pass that checks the CRC (`MpaConfig::place_before_crc`,
//! `iwarp_wire::mpa::RxCrc`): both are the same CRC error. The Terminate carries the LLP
//! CRC code (never a DDP code from a corrupted header), the work request never completes
//! successfully, memory outside the range the segment addressed is untouched, and by
//! default no corrupted byte is placed at all. A corrupted ULPDU_Length above the receive
//! bound is caught before any CRC can be: "segment size invalid", an LLP integrity error.

use core::net::Ipv4Addr;

use iwarp_types::{AsyncEventKind, QpState, SendFlags, SendOp, SendWr, TermCode, WcStatus};

use super::b2b::{establish, pattern, sge, tcp_payload_at, B_IP};
use super::harness::{config, Node, Pair};
use crate::Event;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// Where in the TCP payload of a data frame a byte is flipped.
#[derive(Clone, Copy)]
enum Flip {
    /// In the payload of the frame's (tagged) DDP segment, `n` octets in.
    Payload(usize),
    /// The low octet of the tagged header's STag.
    Stag,
    /// The high bit of ULPDU_Length (the length grows by 32,768).
    LengthHighBit,
}

/// A filter that flips one byte of the first data frame it sees and fixes the TCP
/// checksum, so that only the MPA CRC can notice.
fn corrupt_first(flip: Flip, src: Ipv4Addr, dst: Ipv4Addr) -> super::harness::Filter {
    let mut armed = true;
    Box::new(move |f| {
        let Some(at) = tcp_payload_at(f) else {
            return true;
        };
        if armed {
            armed = false;
            // ULPDU_Length (2), then the tagged header: control (2), STag (4), TO (8).
            let (pos, mask) = match flip {
                Flip::Payload(n) => (at + 2 + 14 + n, 0x55),
                Flip::Stag => (at + 2 + 2 + 3, 0x55),
                Flip::LengthHighBit => (at, 0x80),
            };
            f[pos] ^= mask;
            let mut t = smoltcp::wire::TcpPacket::new_unchecked(&mut f[34..]);
            t.fill_checksum(&src.into(), &dst.into());
        }
        true
    })
}

/// The receiver of the corrupted segment counted one CRC error and sent one Terminate
/// with the LLP CRC code, which the other side received before it was disconnected; the
/// receiver's QP left RTS.
fn assert_crc_terminate(rx: &mut Node, tx: &mut Node) {
    let c = rx.eng.counters().clone();
    assert_eq!((c.mpa_crc_errors, c.terminates_sent), (1, 1));
    let ev = tx.take_events();
    assert!(
        ev.iter().any(|e| matches!(e, Event::Async(a)
            if matches!(a.kind, AsyncEventKind::TerminateReceived(t) if t == TermCode::LLP_CRC))),
        "the peer got no LLP CRC Terminate: {ev:?}"
    );
    assert!(
        ev.iter().any(|e| matches!(e, Event::Disconnected { .. })),
        "{ev:?}"
    );
    assert_ne!(rx.eng.rnic().query_qp(rx.qp).unwrap().state, QpState::Rts);
}

fn write(p: &mut Pair, wr_id: u64, src: u64, remote_to: u64, len: u32) {
    let w = SendWr {
        wr_id,
        op: SendOp::Write {
            remote_to,
            rkey: p.b.mr,
        },
        sgl: sge(&p.a, src, len),
        flags: SendFlags::SIGNALED,
    };
    let qa = p.a.qp;
    p.a.eng.post_send(qa, &w).unwrap();
}

/// Two engines, both placing before the CRC check or neither.
fn pair(place_before_crc: bool) -> Pair {
    let cfg = |last| {
        let mut c = config(last);
        c.mpa.place_before_crc = place_before_crc;
        c
    };
    Pair::with_configs(cfg(1), cfg(2))
}

/// A good Write first (B, the MPA responder, sends no FPDU before it received one), then
/// a 20,000-byte Write to B at 65,536 whose first frame is corrupted by `flip`. Returns
/// B's arena after the connection is gone, and the good Write's bytes. By default, no
/// corrupted byte was placed.
fn corrupted_write(flip: Flip, place_before_crc: bool) -> (Vec<u8>, Vec<u8>) {
    let mut p = pair(place_before_crc);
    establish(&mut p);
    let first = pattern(500, 1);
    p.a.fill(0, &first);
    write(&mut p, 1, 0, 0, 500);
    let mut ca = Vec::new();
    p.run_until(|p| {
        ca.extend(p.a.completions());
        !ca.is_empty()
    });
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::Success));
    let sent = pattern(20_000, 2);
    p.a.fill(4096, &sent);
    p.a_to_b = corrupt_first(flip, A_IP, B_IP);
    write(&mut p, 2, 4096, 65_536, 20_000);
    p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);
    let ca = p.a.completions();
    assert!(
        ca.iter().all(|c| c.status != WcStatus::Success),
        "the corrupted Write completed: {ca:?}"
    );
    assert_crc_terminate(&mut p.b, &mut p.a);
    let b = p.b.mem.arena(p.b.region).to_vec();
    if !place_before_crc {
        let placed = &b[65_536..65_536 + 20_000];
        for (i, (g, d)) in placed.iter().zip(&sent).enumerate() {
            assert!(
                *g == *d || *g == 0,
                "byte {i}: placed {g:#04x}, sent {d:#04x}"
            );
        }
    }
    (b, first)
}

#[test]
fn a_write_whose_payload_fails_the_crc_terminates_with_the_crc_code() {
    for place_before_crc in [false, true] {
        let (b, first) = corrupted_write(Flip::Payload(700), place_before_crc);
        assert_eq!(&b[..500], &first[..]);
        // Only the addressed range may hold what was placed; nothing else changed.
        assert!(b[500..65_536].iter().all(|&x| x == 0));
        assert!(b[65_536 + 20_000..].iter().all(|&x| x == 0));
    }
}

#[test]
fn a_corrupted_stag_is_a_crc_error_and_places_nothing() {
    for place_before_crc in [false, true] {
        let (b, first) = corrupted_write(Flip::Stag, place_before_crc);
        assert_eq!(&b[..500], &first[..]);
        assert!(
            b[500..].iter().all(|&x| x == 0),
            "placed through a bad STag"
        );
    }
}

#[test]
fn a_read_response_that_fails_the_crc_never_completes_the_read() {
    for place_before_crc in [false, true] {
        read_response_fails_the_crc(place_before_crc);
    }
}

fn read_response_fails_the_crc(place_before_crc: bool) {
    let mut p = pair(place_before_crc);
    establish(&mut p);
    let data = pattern(20_000, 9);
    p.b.fill(200_000, &data);
    p.b_to_a = corrupt_first(Flip::Payload(1000), B_IP, A_IP);
    let read = SendWr {
        wr_id: 3,
        op: SendOp::Read {
            remote_to: 200_000,
            rkey: p.b.mr,
            invalidate_local: false,
        },
        sgl: sge(&p.a, 300_000, 20_000),
        flags: SendFlags::SIGNALED,
    };
    let qa = p.a.qp;
    p.a.eng.post_send(qa, &read).unwrap();
    p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);
    let ca = p.a.completions();
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert_eq!(ca[0].wr_id, 3);
    assert_ne!(ca[0].status, WcStatus::Success);
    assert_crc_terminate(&mut p.a, &mut p.b);
    let a = p.a.mem.arena(p.a.region);
    assert!(a[..300_000].iter().all(|&x| x == 0));
    assert!(a[320_000..].iter().all(|&x| x == 0));
    if !place_before_crc {
        for (i, (g, d)) in a[300_000..320_000].iter().zip(&data).enumerate() {
            assert!(
                *g == *d || *g == 0,
                "byte {i}: placed {g:#04x}, sent {d:#04x}"
            );
        }
    }
}

#[test]
fn a_send_that_fails_the_crc_flushes_its_receive_once() {
    for place_before_crc in [false, true] {
        let mut p = pair(place_before_crc);
        establish(&mut p);
        let (qa, qb) = (p.a.qp, p.b.qp);
        for wr_id in [10, 11] {
            let recv = iwarp_types::RecvWr {
                wr_id,
                sgl: sge(&p.b, 8192 * (wr_id - 9), 8192),
            };
            p.b.eng.post_recv(qb, &recv).unwrap();
        }
        // A good Write releases B (the MPA responder); then a 5,000-byte Send whose first
        // frame is corrupted in its payload.
        write(&mut p, 1, 0, 0, 100);
        p.run(false);
        p.a.fill(0, &pattern(5000, 4));
        p.a_to_b = corrupt_first(Flip::Payload(600), A_IP, B_IP);
        let send = SendWr {
            wr_id: 2,
            op: SendOp::Send,
            sgl: sge(&p.a, 0, 5000),
            flags: SendFlags::SIGNALED,
        };
        p.a.eng.post_send(qa, &send).unwrap();
        p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);
        let mut cb = p.b.completions();
        cb.sort_by_key(|c| c.wr_id);
        assert_eq!(
            cb.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            [10, 11],
            "each receive completes exactly once: {cb:?}"
        );
        assert!(cb.iter().all(|c| c.status == WcStatus::Flushed), "{cb:?}");
        assert_crc_terminate(&mut p.b, &mut p.a);
    }
}

/// A flipped high bit of ULPDU_Length puts the FPDU above the receive bound: its end, and
/// so its CRC, cannot be found. B (either placement mode) answers "segment size invalid"
/// (0x1000, verbs figure 24), counts a framing error, not a CRC error, and reports an LLP
/// integrity error (verbs figure 37, event 5), not a remote operation error; nothing of
/// the FPDU is placed and the Write never completes successfully.
#[test]
fn a_ulpdu_length_above_the_bound_is_a_segment_size_error() {
    for place_before_crc in [false, true] {
        // The engines' default receive bound (`DEFAULT_MPA_RX_ULPDU_BYTES`, 9,216) is
        // below the flipped length (32,768 more than the sent one).
        let mut p = pair(place_before_crc);
        establish(&mut p);
        write(&mut p, 1, 0, 0, 500);
        p.run(false);
        p.a.fill(4096, &pattern(20_000, 2));
        p.a_to_b = corrupt_first(Flip::LengthHighBit, A_IP, B_IP);
        write(&mut p, 2, 4096, 65_536, 20_000);
        let mut eb = Vec::new();
        p.run_until(|p| {
            eb.extend(p.b.take_events());
            p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0
        });
        eb.extend(p.b.take_events());
        let ca = p.a.completions();
        assert!(
            ca.iter()
                .all(|c| c.wr_id != 2 || c.status != WcStatus::Success),
            "the corrupted Write completed: {ca:?}"
        );
        let code = TermCode::DDP_LOCAL_CATASTROPHIC;
        let c = p.b.eng.counters().clone();
        assert_eq!(
            (c.mpa_framing_errors, c.mpa_crc_errors, c.terminates_sent),
            (1, 0, 1)
        );
        assert!(
            eb.iter().any(|e| matches!(e, Event::Async(a)
                if a.kind == AsyncEventKind::LlpIntegrityError(code))),
            "B reported no LLP integrity error: {eb:?}"
        );
        let ea = p.a.take_events();
        assert!(
            ea.iter().any(|e| matches!(e, Event::Async(a)
                if a.kind == AsyncEventKind::TerminateReceived(code))),
            "A got no segment size Terminate: {ea:?}"
        );
        let b = p.b.mem.arena(p.b.region);
        assert!(
            b[65_536..].iter().all(|&x| x == 0),
            "placed {place_before_crc}"
        );
    }
}
