//! Target `rdma_rx`: an `iwarp_rdma::Rnic` with a connected QP (regions of every kind of
//! right, a bound window, posted receives, an outstanding RDMA Read) fed arbitrary ULPDUs
//! through `qp_on_ulpdu`, or framed as FPDUs through `qp_on_fpdu` with their CRC pending
//! (right or wrong: `MpaConfig::place_before_crc`'s path), interleaved with
//! transmissions, completions, new WRs and LLP events.
//!
//! Input: configuration bytes (see [`setup::Setup::new`]), then operations. A ULPDU
//! operation carries a length-prefixed segment and fix-up bits that point its STag fields
//! at registered STags, its TO inside a region and its MSN at the next expected one, so the
//! fuzzer reaches placement as well as every validation error.
//!
//! Invariants: every error is a Terminate code the RFCs define and leaves the QP in
//! Terminate or Error, and the first Terminate sent carries it; everything the QP sends
//! parses as a DDP segment no longer than the segment size, and re-reads identically;
//! each WR completes at most once, a receive with at most its length; and no byte of the
//! arena outside the writable regions ever changes (guards, read-only region). A wrong
//! CRC is `LLP_CRC` with nothing done but placement: no completion, no state change, no
//! Terminate queued by the QP (the target then terminates as MPA's failure path does).

mod setup;

use iwarp_rdma::LlpEvent;
use iwarp_types::{Cqe, QpState, SendFlags, SendOp, SendWr, SgList, Sge, WcStatus};
use iwarp_wire::ddp::{self, FLG_T};
use iwarp_wire::rdmap::{is_defined_term_code, Body, Segment, QN_READ_REQUEST, QN_SEND};

use crate::cursor::Cursor;
use setup::{Setup, ARENA_LEN, RECV_LEN, VA_BASE};

/// Most operations one input drives.
const MAX_OPS: usize = 256;
/// Largest segment fed at once.
const MAX_SEGMENT: usize = 4096;

/// Fix-up bits of a ULPDU operation.
mod fix {
    /// Tagged: STag from the table (index in the next byte).
    pub const STAG: u8 = 1;
    /// Tagged: TO inside the region of that STag (offset in the next 16 bits).
    pub const TO: u8 = 2;
    /// Untagged: MSN = the next one expected on its queue.
    pub const MSN: u8 = 4;
    /// Read Request: sink and source STags from the table, source TO inside its region.
    pub const READ: u8 = 8;
    /// Untagged: Invalidate STag from the table.
    pub const INV: u8 = 16;
    /// Framed as an FPDU and fed with its CRC pending (`qp_on_fpdu`).
    pub const FPDU: u8 = 32;
    /// With `FPDU`: the CRC field is wrong.
    pub const BAD_CRC: u8 = 64;
}

/// The body of the `rdma_rx` fuzz target.
pub fn rdma_rx(data: &[u8]) {
    run(data);
}

/// Runs the target; returns the QP and what was tracked, for tests.
fn run(data: &[u8]) -> Option<(Setup, State)> {
    let mut c = Cursor::new(data);
    let mut s = Setup::new(&mut c)?;
    let mut st = State::default();
    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        match c.u8() % 10 {
            0..=4 => feed(&mut s, &mut st, &mut c),
            5 | 6 => drain(&mut s, &mut st, 1 + c.below(8)),
            7 => post(&mut s, &mut st, &mut c),
            8 => {
                let ev = [
                    LlpEvent::PeerClosed,
                    LlpEvent::Reset,
                    LlpEvent::TimedOut,
                    LlpEvent::Closed,
                ][c.below(4)];
                s.rnic.qp_llp_event(s.qp, ev);
            }
            _ => {
                let _ = s.rnic.qp_take_rtr_received(s.qp);
                let _ = s.rnic.qp_poll_llp_request(s.qp);
                let _ = s.rnic.qp_disconnect(s.qp);
            }
        }
        completions(&mut s, &mut st);
        while s.rnic.poll_async_event().is_some() {}
        while s.rnic.poll_cq_event().is_some() {}
    }
    drain(&mut s, &mut st, 64);
    completions(&mut s, &mut st);
    check_memory(&s);
    Some((s, st))
}

/// What the target tracks across operations.
#[derive(Default)]
struct State {
    /// Next MSN expected on queues 0 (Send), 1 (Read Request).
    msn: [u32; 2],
    /// The first error `qp_on_ulpdu` returned, until its Terminate is seen on the wire.
    pending_term: Option<iwarp_types::TermCode>,
    /// A Terminate was sent.
    term_sent: bool,
    /// wr_ids already completed.
    completed: Vec<u64>,
    next_wr_id: u64,
}

/// One inbound segment, with fix-ups.
fn feed(s: &mut Setup, st: &mut State, c: &mut Cursor<'_>) {
    let fixes = c.u8();
    let pick = c.u8();
    let to_off = u64::from(c.u16());
    let mut seg = c.chunk(MAX_SEGMENT).to_vec();
    let stag = s.stags[usize::from(pick) % s.stags.len()];
    let region = s.regions.iter().find(|r| r.stag == stag).copied();
    let tagged = seg.first().is_some_and(|b| b & FLG_T != 0);
    if tagged && seg.len() >= ddp::TAGGED_HEADER_LEN {
        if fixes & fix::STAG != 0 {
            seg[2..6].copy_from_slice(&stag.0.to_be_bytes());
        }
        if fixes & fix::TO != 0 {
            let base = region.map_or(0, |r| r.base_to);
            seg[6..14].copy_from_slice(&base.wrapping_add(to_off).to_be_bytes());
        }
    }
    if !tagged && seg.len() >= ddp::UNTAGGED_HEADER_LEN {
        let qn = u32::from_be_bytes([seg[6], seg[7], seg[8], seg[9]]);
        if fixes & fix::MSN != 0 && (qn == QN_SEND || qn == QN_READ_REQUEST) {
            let m = st.msn[qn as usize].wrapping_add(1);
            seg[10..14].copy_from_slice(&m.to_be_bytes());
        }
        if fixes & fix::INV != 0 {
            seg[2..6].copy_from_slice(&stag.0.to_be_bytes());
        }
        if fixes & fix::READ != 0 && seg.len() >= ddp::UNTAGGED_HEADER_LEN + 28 {
            let src = s.stags[usize::from(pick >> 4) % s.stags.len()];
            let base = s
                .regions
                .iter()
                .find(|r| r.stag == src)
                .map_or(0, |r| r.base_to);
            let b = ddp::UNTAGGED_HEADER_LEN;
            seg[b..b + 4].copy_from_slice(&stag.0.to_be_bytes());
            seg[b + 16..b + 20].copy_from_slice(&src.0.to_be_bytes());
            seg[b + 20..b + 28].copy_from_slice(&base.wrapping_add(to_off).to_be_bytes());
        }
    }
    let before = s.rnic.query_qp(s.qp).map(|q| q.state).ok();
    let r = if fixes & fix::FPDU != 0 {
        on_fpdu(s, st, &seg, fixes & fix::BAD_CRC != 0, pick)
    } else {
        s.rnic.qp_on_ulpdu(s.qp, &seg, &mut s.mem)
    };
    let state = s.rnic.query_qp(s.qp).map(|q| q.state).ok();
    match r {
        Ok(()) => {
            // Track MSNs of whole untagged messages accepted.
            if let Ok(h) = ddp::Repr::parse_bytes(&seg) {
                if let ddp::Model::Untagged { qn, msn, .. } = h.model {
                    if h.last && (qn == QN_SEND || qn == QN_READ_REQUEST) {
                        st.msn[qn as usize] = msn;
                    }
                }
            }
        }
        Err(code) => {
            assert!(
                is_defined_term_code(code),
                "undefined Terminate code {code:?} for {seg:02x?}"
            );
            assert!(
                matches!(state, Some(QpState::Terminate | QpState::Error)),
                "QP in {state:?} after an error (was {before:?})"
            );
            if before == Some(QpState::Rts) && !st.term_sent && st.pending_term.is_none() {
                st.pending_term = Some(code);
            }
        }
    }
}

/// `seg` framed as an FPDU (its CRC field flipped in bit `pick % 8` if `bad_crc`) and fed
/// through `qp_on_fpdu` with the CRC pending. A wrong CRC must come back as `LLP_CRC`
/// with nothing done but placement; then the QP is terminated with that code, as the
/// engine does when MPA fails.
fn on_fpdu(
    s: &mut Setup,
    st: &mut State,
    seg: &[u8],
    bad_crc: bool,
    pick: u8,
) -> Result<(), iwarp_types::TermCode> {
    use iwarp_types::TermCode;
    use iwarp_wire::mpa::{fpdu_len, Fpdu, RxCrc};
    let mut buf = vec![0u8; fpdu_len(seg.len())];
    let mut f = Fpdu::new_unchecked(&mut buf[..]);
    f.set_ulpdu_len(seg.len() as u16);
    f.ulpdu_mut().copy_from_slice(seg);
    f.finish(true);
    if bad_crc {
        let n = buf.len();
        buf[n - 1] ^= 1 << (pick % 8);
    }
    completions(s, st);
    let before = s.rnic.query_qp(s.qp).map(|q| q.state).ok();
    let f = Fpdu::new_unchecked(&buf[..]);
    let mut crc = RxCrc::pending(&f);
    let r = s.rnic.qp_on_fpdu(s.qp, f.ulpdu(), &mut crc, &mut s.mem);
    assert!(!crc.is_pending(), "the CRC was left unchecked");
    if !bad_crc {
        assert_ne!(r, Err(TermCode::LLP_CRC), "a right CRC refused: {seg:02x?}");
        return r;
    }
    assert_eq!(
        r,
        Err(TermCode::LLP_CRC),
        "a wrong CRC accepted: {seg:02x?}"
    );
    let after = s.rnic.query_qp(s.qp).map(|q| q.state).ok();
    assert_eq!(before, after, "a wrong CRC changed the QP's state");
    let mut out = [Cqe::EMPTY; 1];
    assert_eq!(
        s.rnic.poll_cq(s.cq, &mut out).unwrap_or(0),
        0,
        "a wrong CRC completed a WR: {out:?}"
    );
    s.rnic.qp_terminate(s.qp, TermCode::LLP_CRC);
    r
}

/// Takes up to `n` outbound ULPDUs: each parses, fits, re-reads the same; the first
/// Terminate carries the first error.
fn drain(s: &mut Setup, st: &mut State, n: usize) {
    for _ in 0..n {
        let Some((d, len)) = s.rnic.qp_next_ulpdu(s.qp, s.max_ulpdu, &s.mem) else {
            break;
        };
        assert!(len <= s.max_ulpdu, "segment of {len} above {}", s.max_ulpdu);
        let mut buf = vec![0u8; len];
        s.rnic.fill_ulpdu(s.qp, &d, &s.mem, &mut buf);
        let mut again = vec![0xa5u8; len];
        s.rnic.fill_ulpdu(s.qp, &d, &s.mem, &mut again);
        assert_eq!(buf, again, "a re-read ULPDU differs");
        let seg = Segment::parse(&buf).expect("what the QP sends parses");
        if let Body::Terminate(t) = seg.body {
            if !st.term_sent {
                if let Some(code) = st.pending_term.take() {
                    assert_eq!(t.code, code, "the Terminate sent is not the error returned");
                }
            }
            st.term_sent = true;
        }
        s.rnic.qp_ulpdu_acked(s.qp, &d);
    }
}

/// Posts a new WR: a receive, a Send, an RDMA Write or an RDMA Read.
fn post(s: &mut Setup, st: &mut State, c: &mut Cursor<'_>) {
    st.next_wr_id += 1;
    let wr_id = 1000 + st.next_wr_id;
    let l = s.regions[2];
    let len = u32::from(c.u16()) % 2048;
    let sge = Sge {
        addr: VA_BASE + l.off + u64::from(c.u16()) % 4096,
        length: len,
        lkey: l.stag,
    };
    let pick = s.stags[c.below(s.stags.len())];
    let op = match c.u8() % 4 {
        0 => {
            s.post_recv(
                wr_id,
                l.stag,
                sge.addr.min(VA_BASE + l.off + l.len - u64::from(RECV_LEN)),
            );
            return;
        }
        1 => SendOp::Send,
        2 => SendOp::Write {
            remote_to: u64::from(c.u16()),
            rkey: pick,
        },
        _ => SendOp::Read {
            remote_to: u64::from(c.u16()),
            rkey: pick,
            invalidate_local: false,
        },
    };
    let wr = SendWr {
        wr_id,
        op,
        sgl: SgList::single(sge),
        flags: SendFlags::SIGNALED,
    };
    if s.rnic.post_send(s.qp, &wr).is_ok() {
        s.send_ids.push(wr_id);
    }
}

/// Polls the CQ: every completion names a posted WR, once; receives carry at most their
/// length.
fn completions(s: &mut Setup, st: &mut State) {
    let mut out = [Cqe::EMPTY; 16];
    for _ in 0..64 {
        let n = s.rnic.poll_cq(s.cq, &mut out).unwrap_or(0);
        if n == 0 {
            return;
        }
        for e in &out[..n] {
            let is_recv = s.recv_ids.contains(&e.wr_id);
            assert!(
                is_recv || s.send_ids.contains(&e.wr_id),
                "completion of an unknown WR {e:?}"
            );
            assert!(
                !st.completed.contains(&e.wr_id),
                "WR completed twice: {e:?}"
            );
            st.completed.push(e.wr_id);
            if is_recv && e.status == WcStatus::Success {
                assert!(e.byte_len <= RECV_LEN, "receive of {} octets", e.byte_len);
            }
        }
    }
}

/// No byte outside the writable regions changed.
fn check_memory(s: &Setup) {
    let a = s.mem.arena(s.arena);
    assert_eq!(a.len(), ARENA_LEN);
    let mut writable: Vec<(usize, usize)> = s
        .regions
        .iter()
        .filter(|r| r.writable)
        .map(|r| (r.off as usize, (r.off + r.len) as usize))
        .collect();
    writable.sort_unstable();
    let mut lo = 0;
    for (start, end) in writable.into_iter().chain([(ARENA_LEN, ARENA_LEN)]) {
        if let Some(i) = crate::arena::first_change(a, lo, start) {
            panic!("arena byte {i} outside the writable regions changed");
        }
        lo = lo.max(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds made from the captures reach placement: some complete receives, some
    /// change the writable region.
    #[test]
    fn capture_seeds_place_data() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/rdma_rx");
        let (mut recvs, mut writes) = (0, 0);
        for e in std::fs::read_dir(dir).expect("corpus").flatten() {
            let Some((s, st)) = run(&std::fs::read(e.path()).expect("file")) else {
                continue;
            };
            recvs += st
                .completed
                .iter()
                .filter(|&&id| (100..100 + setup::RECVS).contains(&id))
                .count();
            let w = s.regions[0];
            let a = &s.mem.arena(s.arena)[w.off as usize..(w.off + w.len) as usize];
            if a.iter()
                .enumerate()
                .any(|(i, &b)| b != crate::arena::pattern_byte(w.off as usize + i))
            {
                writes += 1;
            }
        }
        assert!(recvs > 0, "no capture seed completes a receive");
        assert!(writes > 0, "no capture seed places an RDMA Write");
    }

    #[test]
    fn set_up_and_send_and_write_literals() {
        // Config 0 (no SRQ, IRD 1, ORD 1, Initiator, no RTR), segment size 64 + 8 * 200.
        let mut v = vec![0u8, 200];
        // Drain (the Read Request goes out).
        v.extend_from_slice(&[5, 0, 3]);
        // A Send of 4 octets with MSN fixed: untagged L, opcode 3, QN 0.
        let send = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4,
        ];
        v.extend_from_slice(&[0, fix::MSN, 0, 0, 0, 0, send.len() as u8]);
        v.extend_from_slice(&send);
        // An RDMA Write of 4 octets to the writable region at offset 16.
        let write = [0xc1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9];
        v.extend_from_slice(&[0, fix::STAG | fix::TO, 0, 0, 16, 0, write.len() as u8]);
        v.extend_from_slice(&write);
        // A Write to the read-only region: refused.
        v.extend_from_slice(&[0, fix::STAG | fix::TO, 1, 0, 16, 0, write.len() as u8]);
        v.extend_from_slice(&write);
        let (s, st) = run(&v).expect("set up");
        // The Write landed at TO base + 16 of the writable region.
        let w = s.regions[0];
        let at = (w.off + 16) as usize;
        assert_eq!(&s.mem.arena(s.arena)[at..at + 4], &[9, 9, 9, 9]);
        // The Send completed receive 100 with 4 octets.
        assert!(st.completed.contains(&100));
        // The Write to the read-only region was refused with a Terminate.
        assert!(st.term_sent);
        let term = s
            .rnic
            .query_qp(s.qp)
            .unwrap()
            .terminate
            .expect("a Terminate");
        assert!(term.local);
    }
}
