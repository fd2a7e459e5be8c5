//! For each Terminate code a crafted inbound DDP segment can trigger: the bytes, the exact
//! code returned, the Terminate sent (with the headers RFC 5040 figure 10 asks for), the
//! state, and the async event or completion.

use iwarp_types::{
    Access, AsyncEventKind, EventResource, QpState, SendFlags, SendOp, Stag, TermCode, WcOpcode,
    WcStatus,
};
use iwarp_wire::ddp::{Model, Repr};
use iwarp_wire::rdmap::{Opcode, ReadRequest, ReadRequestRepr};

use super::pair::*;
use crate::mem::MwType;

fn untagged(
    opcode: Opcode,
    last: bool,
    qn: u32,
    msn: u32,
    mo: u32,
    inv: Stag,
    body: &[u8],
) -> Vec<u8> {
    let h = Repr {
        last,
        opcode,
        model: Model::Untagged {
            inv_stag: inv,
            qn,
            msn,
            mo,
        },
    };
    let mut v = vec![0u8; 18 + body.len()];
    h.emit_bytes(&mut v);
    v[18..].copy_from_slice(body);
    v
}

fn send(msn: u32, mo: u32, last: bool, payload: &[u8]) -> Vec<u8> {
    untagged(Opcode::Send, last, 0, msn, mo, Stag(0), payload)
}

fn tagged(opcode: Opcode, last: bool, stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
    let h = Repr {
        last,
        opcode,
        model: Model::Tagged { stag, to },
    };
    let mut v = vec![0u8; 14 + payload.len()];
    h.emit_bytes(&mut v);
    v[14..].copy_from_slice(payload);
    v
}

fn read_req(msn: u32, sink: Stag, size: u32, src: Stag, src_to: u64) -> Vec<u8> {
    let r = ReadRequestRepr {
        sink_stag: sink,
        sink_to: 0x1000,
        size,
        src_stag: src,
        src_to,
    };
    let mut body = [0u8; 28];
    r.emit(&mut ReadRequest::new_unchecked(&mut body[..]));
    untagged(Opcode::ReadRequest, true, 1, msn, 0, Stag(0), &body)
}

fn side() -> Side {
    Side::new(2, &Opts::default())
}

/// Injects `seg`, expects `code` back, a Terminate carrying `code` and the Terminate state.
fn expect(s: &mut Side, seg: &[u8], code: TermCode) -> iwarp_wire::rdmap::TerminateRepr {
    assert_eq!(s.inject(seg), Err(code), "code for {seg:02x?}");
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().state, QpState::Terminate);
    let t = s.sent_terminate_repr().expect("a Terminate is sent");
    assert_eq!(t.code, code);
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().terminate.unwrap().code, code);
    assert_eq!(s.take_ulpdu(4096), None, "nothing after the Terminate");
    assert_eq!(
        s.rnic.qp_poll_llp_request(s.qp),
        Some(crate::LlpRequest::Close)
    );
    // Later segments are ignored.
    assert_eq!(s.inject(&send(1, 0, true, b"x")), Ok(()));
    t
}

fn event_of(s: &mut Side) -> Vec<AsyncEventKind> {
    s.events()
        .into_iter()
        .filter(|e| e.resource == EventResource::Qp(s.qp))
        .map(|e| e.kind)
        .collect()
}

#[test]
fn ddp_version_tagged_and_untagged() {
    let mut s = side();
    let mut seg = tagged(Opcode::Write, true, Stag(1), 0, b"ab");
    seg[0] = (seg[0] & !0x03) | 0x02;
    let t = expect(&mut s, &seg, TermCode::DDP_TAGGED_INVALID_VERSION);
    assert!(t.ddp_header.is_some());
    assert_eq!(
        event_of(&mut s),
        [AsyncEventKind::RemoteOperationError(t.code)]
    );

    let mut s = side();
    let mut seg = send(1, 0, true, b"ab");
    seg[0] &= !0x03;
    expect(&mut s, &seg, TermCode::DDP_UNTAGGED_INVALID_VERSION);
}

#[test]
fn rdmap_version() {
    let mut s = side();
    let mut seg = send(1, 0, true, b"ab");
    seg[1] = (seg[1] & 0x3f) | 0x80;
    expect(&mut s, &seg, TermCode::RDMAP_INVALID_VERSION);
}

#[test]
fn unexpected_opcode_reserved_and_wrong_model() {
    let mut s = side();
    let mut seg = send(1, 0, true, b"ab");
    seg[1] = (seg[1] & 0xf0) | 0x09;
    expect(&mut s, &seg, TermCode::RDMAP_UNEXPECTED_OPCODE);

    // A Send with the Tagged flag.
    let mut s = side();
    let mut seg = tagged(Opcode::Write, true, Stag(1), 0, b"ab");
    seg[1] = (seg[1] & 0xf0) | Opcode::Send as u8;
    expect(&mut s, &seg, TermCode::RDMAP_UNEXPECTED_OPCODE);
}

#[test]
fn segment_too_short() {
    let mut s = side();
    let seg = &send(1, 0, true, b"")[..12];
    expect(&mut s, seg, TermCode::DDP_LOCAL_CATASTROPHIC);
}

#[test]
fn invalid_qn() {
    let mut s = side();
    let seg = untagged(Opcode::Send, true, 1, 1, 0, Stag(0), b"x");
    let t = expect(&mut s, &seg, TermCode::DDP_UNTAGGED_INVALID_QN);
    assert_eq!(t.ddp_header.unwrap().as_bytes(), &seg[..18]);
    assert_eq!(t.ddp_segment_len, Some(1));
    let mut s = side();
    expect(
        &mut s,
        &untagged(Opcode::Send, true, 7, 1, 0, Stag(0), b"x"),
        TermCode::DDP_UNTAGGED_INVALID_QN,
    );
}

#[test]
fn msn_no_buffer() {
    let mut s = side();
    let t = expect(
        &mut s,
        &send(1, 0, true, b"hello"),
        TermCode::DDP_UNTAGGED_NO_BUFFER,
    );
    assert!(t.rdma_header.is_none());
    assert_eq!(event_of(&mut s), [AsyncEventKind::ProtectionError(t.code)]);
}

#[test]
fn msn_range() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post_recv(1, st, va, 64);
    expect(
        &mut s,
        &send(5, 0, true, b"hello"),
        TermCode::DDP_UNTAGGED_MSN_RANGE,
    );
    // The WR was not consumed: it is flushed when the QP reaches Error.
    s.rnic.qp_llp_event(s.qp, crate::LlpEvent::Closed);
    let c = s.cqes();
    assert_eq!((c.len(), c[0].status), (1, WcStatus::Flushed));
}

#[test]
fn invalid_mo() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post_recv(1, st, va, 64);
    expect(
        &mut s,
        &send(1, 4, true, b"hello"),
        TermCode::DDP_UNTAGGED_INVALID_MO,
    );

    // A continuation segment with the wrong MO.
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post_recv(1, st, va, 64);
    assert_eq!(s.inject(&send(1, 0, false, b"hel")), Ok(()));
    expect(
        &mut s,
        &send(1, 2, true, b"lo"),
        TermCode::DDP_UNTAGGED_INVALID_MO,
    );
}

#[test]
fn message_too_long_for_the_receive() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post_recv(1, st, va, 10);
    assert_eq!(s.inject(&send(1, 0, false, b"0123456")), Ok(()));
    expect(
        &mut s,
        &send(1, 7, true, b"789ab"),
        TermCode::DDP_UNTAGGED_TOO_LONG,
    );
    let c = s.cqes();
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 1, WcStatus::BaseBounds)
    );
    assert!(
        event_of(&mut s).is_empty(),
        "reported through the CQE, no async event"
    );
}

#[test]
fn l_bit_missing() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post_recv(1, st, va, 64);
    s.post_recv(2, st, va, 64);
    assert_eq!(s.inject(&send(1, 0, false, b"abc")), Ok(()));
    expect(
        &mut s,
        &send(2, 0, true, b"def"),
        TermCode::RDMAP_CATASTROPHIC_STREAM,
    );

    let mut s = side();
    let mut seg = read_req(1, Stag(5), 0, Stag(6), 0);
    seg[0] &= !0x40;
    expect(&mut s, &seg, TermCode::RDMAP_CATASTROPHIC_STREAM);
}

#[test]
fn tagged_invalid_stag() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    let bad = st.with_key(st.key().wrapping_add(1));
    let t = expect(
        &mut s,
        &tagged(Opcode::Write, true, bad, va, b"abc"),
        TermCode::DDP_TAGGED_INVALID_STAG,
    );
    assert_eq!(t.ddp_segment_len, Some(3));
    assert_eq!(event_of(&mut s), [AsyncEventKind::ProtectionError(t.code)]);
    let mut s = side();
    expect(
        &mut s,
        &tagged(Opcode::Write, true, Stag(0), 0, b"abc"),
        TermCode::DDP_TAGGED_INVALID_STAG,
    );
}

#[test]
fn tagged_base_bounds() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    expect(
        &mut s,
        &tagged(Opcode::Write, true, st, va + 62, b"abc"),
        TermCode::DDP_TAGGED_BASE_BOUNDS,
    );
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    expect(
        &mut s,
        &tagged(Opcode::Write, true, st, va - 1, b"abc"),
        TermCode::DDP_TAGGED_BASE_BOUNDS,
    );
}

#[test]
fn tagged_access_rights() {
    let mut s = side();
    let (st, va) = s.reg(
        64,
        Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_READ,
    );
    expect(
        &mut s,
        &tagged(Opcode::Write, true, st, va, b"abc"),
        TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
    );
}

#[test]
fn tagged_write_when_qp_disables_inbound_writes() {
    let mut p = Pair::new();
    let s = &mut p.b;
    let (st, va) = s.reg(64, ALL);
    // A second QP without inbound writes, on the same PD.
    let mut attr = s.rnic.query_qp(s.qp).unwrap().attr;
    attr.inbound_write = false;
    let (qp2, _) = s.rnic.create_qp(&attr).unwrap();
    let params = crate::LlpParams {
        ird: 4,
        ord: 4,
        role: crate::LlpRole::Initiator,
        rtr: None,
    };
    s.rnic
        .qp_establish(qp2, iwarp_types::ConnId(2), params)
        .unwrap();
    s.qp = qp2;
    expect(
        s,
        &tagged(Opcode::Write, true, st, va, b"abc"),
        TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
    );
}

#[test]
fn tagged_not_associated() {
    let mut s = side();
    let pd2 = s.rnic.alloc_pd().unwrap();
    let (st, va) = s.reg_in(pd2, 64, ALL);
    expect(
        &mut s,
        &tagged(Opcode::Write, true, st, va, b"abc"),
        TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
    );
}

#[test]
fn tagged_wrap() {
    let mut s = side();
    let (st, _) = s.reg(64, ALL);
    expect(
        &mut s,
        &tagged(Opcode::Write, true, st, u64::MAX - 1, b"abc"),
        TermCode::DDP_TAGGED_TO_WRAP,
    );
}

#[test]
fn read_request_source_errors_carry_the_rdma_header() {
    type Mk = fn(Stag, u64) -> (Stag, u64, u32);
    let cases: [(Mk, TermCode); 4] = [
        (
            |st, va| (st.with_key(st.key() ^ 1), va, 8),
            TermCode::RDMAP_INVALID_STAG,
        ),
        (|st, va| (st, va + 60, 8), TermCode::RDMAP_BASE_BOUNDS),
        (|st, _| (st, u64::MAX - 3, 8), TermCode::RDMAP_TO_WRAP),
        (|st, va| (st, va, 65), TermCode::RDMAP_BASE_BOUNDS),
    ];
    for (mk, code) in cases {
        let mut s = side();
        let (st, va) = s.reg(64, ALL);
        let (stag, to, size) = mk(st, va);
        let seg = read_req(1, Stag(0x99), size, stag, to);
        let t = expect(&mut s, &seg, code);
        let r = t.rdma_header.expect("RDMA header copied");
        assert_eq!((r.src_stag, r.src_to, r.size), (stag, to, size));
        assert_eq!(t.ddp_header.unwrap().as_bytes(), &seg[..18]);
        assert_eq!(event_of(&mut s), [AsyncEventKind::ProtectionError(code)]);
    }
    // Access: a source without Remote Read.
    let mut s = side();
    let (st, va) = s.reg(
        64,
        Access::LOCAL_READ | Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    );
    expect(
        &mut s,
        &read_req(1, Stag(1), 8, st, va),
        TermCode::RDMAP_ACCESS_RIGHTS,
    );
    // Not associated: a source of another PD.
    let mut s = side();
    let pd2 = s.rnic.alloc_pd().unwrap();
    let (st, va) = s.reg_in(pd2, 64, ALL);
    expect(
        &mut s,
        &read_req(1, Stag(1), 8, st, va),
        TermCode::RDMAP_STAG_NOT_ASSOCIATED,
    );
}

#[test]
fn read_request_queue_errors() {
    // MSN out of range, MO non-zero, trailing payload.
    let mut s = side();
    expect(
        &mut s,
        &read_req(2, Stag(1), 0, Stag(2), 0),
        TermCode::DDP_UNTAGGED_MSN_RANGE,
    );
    let mut s = side();
    let mut seg = read_req(1, Stag(1), 0, Stag(2), 0);
    seg[17] = 4;
    expect(&mut s, &seg, TermCode::DDP_UNTAGGED_INVALID_MO);
    let mut s = side();
    let mut seg = read_req(1, Stag(1), 0, Stag(2), 0);
    seg.push(0);
    expect(&mut s, &seg, TermCode::DDP_LOCAL_CATASTROPHIC);
}

#[test]
fn too_many_read_requests() {
    let mut s = Side::new(
        2,
        &Opts {
            ird: 1,
            ..Opts::default()
        },
    );
    assert_eq!(s.inject(&read_req(1, Stag(1), 0, Stag(2), 0)), Ok(()));
    let t = expect(
        &mut s,
        &read_req(2, Stag(1), 0, Stag(2), 0),
        TermCode::DDP_UNTAGGED_MSN_RANGE,
    );
    assert!(t.rdma_header.is_none(), "DDP errors carry no RDMA header");
}

#[test]
fn read_not_enabled() {
    let mut p = Pair::new();
    let s = &mut p.b;
    let mut attr = s.rnic.query_qp(s.qp).unwrap().attr;
    attr.inbound_read = false;
    let (qp2, _) = s.rnic.create_qp(&attr).unwrap();
    let params = crate::LlpParams {
        ird: 4,
        ord: 4,
        role: crate::LlpRole::Initiator,
        rtr: None,
    };
    s.rnic
        .qp_establish(qp2, iwarp_types::ConnId(2), params)
        .unwrap();
    s.qp = qp2;
    expect(
        s,
        &read_req(1, Stag(1), 0, Stag(2), 0),
        TermCode::DDP_UNTAGGED_INVALID_QN,
    );
}

#[test]
fn read_response_without_request_or_mismatched() {
    let mut s = side();
    expect(
        &mut s,
        &tagged(Opcode::ReadResponse, true, Stag(1), 0, b"x"),
        TermCode::RDMAP_UNEXPECTED_OPCODE,
    );

    // Outstanding Read of 8 bytes into (st, va): wrong STag, then wrong TO, then too long.
    let setup = || {
        let mut s = side();
        let (st, va) = s.reg(64, ALL);
        let op = SendOp::Read {
            remote_to: 0,
            rkey: Stag(0x4242),
            invalidate_local: false,
        };
        s.post(1, op, sgl(st, va, 8), SIG);
        assert!(s.take_ulpdu(1024).is_some());
        (s, st, va)
    };
    let (mut s, st, va) = setup();
    let other = st.with_key(st.key() ^ 0x10);
    expect(
        &mut s,
        &tagged(Opcode::ReadResponse, true, other, va, &[0; 8]),
        TermCode::DDP_TAGGED_INVALID_STAG,
    );
    let (mut s, st, va) = setup();
    expect(
        &mut s,
        &tagged(Opcode::ReadResponse, true, st, va + 1, &[0; 8]),
        TermCode::DDP_TAGGED_BASE_BOUNDS,
    );
    let (mut s, st, va) = setup();
    expect(
        &mut s,
        &tagged(Opcode::ReadResponse, true, st, va, &[0; 9]),
        TermCode::DDP_TAGGED_BASE_BOUNDS,
    );
    let (mut s, st, va) = setup();
    expect(
        &mut s,
        &tagged(Opcode::ReadResponse, true, st, va, &[0; 7]),
        TermCode::DDP_TAGGED_BASE_BOUNDS,
    );
    // After the error the Read completes Flushed once the LLP is gone.
    s.rnic.qp_llp_event(s.qp, crate::LlpEvent::Closed);
    let c = s.cqes();
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode),
        (1, WcStatus::Flushed, WcOpcode::Read)
    );
}

fn send_inv(inv: Stag) -> Vec<u8> {
    untagged(Opcode::SendInv, true, 0, 1, 0, inv, b"data")
}

#[test]
fn remote_invalidate_failures() {
    let check = |s: &mut Side, inv: Stag, code: TermCode| {
        let (st, va) = s.reg(64, ALL);
        s.post_recv(9, st, va, 64);
        expect(s, &send_inv(inv), code);
        let c = s.cqes();
        assert_eq!(
            (c[0].wr_id, c[0].status),
            (9, WcStatus::InvalidateStagInvalid)
        );
        assert!(event_of(s).is_empty());
    };
    let mut s = side();
    check(&mut s, Stag(0x0012_3400), TermCode::RDMAP_INVALID_STAG);

    let mut s = side();
    let pd2 = s.rnic.alloc_pd().unwrap();
    let (other, _) = s.reg_in(pd2, 64, ALL);
    check(&mut s, other, TermCode::RDMAP_STAG_NOT_ASSOCIATED);

    let mut s = side();
    let (local_only, _) = s.reg(64, Access::LOCAL_READ | Access::LOCAL_WRITE);
    check(&mut s, local_only, TermCode::RDMAP_ACCESS_RIGHTS);

    // A region with a bound window cannot be invalidated.
    let mut s = side();
    let (mr, va) = s.reg(64, ALL);
    let mw = s.rnic.alloc_mw(s.pd, MwType::Type2).unwrap().with_key(3);
    let bind = SendOp::Bind {
        mw,
        mr,
        to: va,
        len: 32,
        access: Access::REMOTE_WRITE,
        zero_based: false,
    };
    s.post(1, bind, iwarp_types::SgList::new(), SendFlags::NONE);
    assert_eq!(s.take_ulpdu(1024), None, "Bind puts nothing on the wire");
    check(&mut s, mr, TermCode::RDMAP_PROT_CANNOT_INVALIDATE);
}

#[test]
fn terminate_received_is_not_answered() {
    let mut s = side();
    let (st, va) = s.reg(64, ALL);
    s.post(1, SendOp::Send, sgl(st, va, 4), SIG);
    s.post(2, SendOp::Send, sgl(st, va, 4), SIG);
    assert!(
        s.take_ulpdu(10).is_none(),
        "below the minimum segment size nothing is sent"
    );
    let (d, len) = s.rnic.qp_next_ulpdu(s.qp, 1024, &s.mem).unwrap();
    assert_eq!(len, 22);
    let body = [0x12, 0x02, 0x00, 0x00];
    let term = untagged(Opcode::Terminate, true, 2, 1, 0, Stag(0), &body);
    assert_eq!(s.inject(&term), Ok(()));
    assert_eq!(s.rnic.query_qp(s.qp).unwrap().state, QpState::Terminate);
    assert_eq!(
        event_of(&mut s),
        [AsyncEventKind::TerminateReceived(
            TermCode::DDP_UNTAGGED_NO_BUFFER
        )]
    );
    assert_eq!(s.take_ulpdu(1024), None, "no Terminate back");
    let info = s.rnic.query_qp(s.qp).unwrap().terminate.unwrap();
    assert!(!info.local);
    s.rnic.qp_ulpdu_acked(s.qp, &d);
    s.rnic.qp_llp_event(s.qp, crate::LlpEvent::Closed);
    let c = s.cqes();
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::RemoteTermination));
    assert_eq!((c[1].wr_id, c[1].status), (2, WcStatus::Flushed));
    assert_eq!(
        event_of(&mut s),
        [AsyncEventKind::QpErrorStateEntered],
        "the consumer learns the QP is in Error and flushed"
    );
}

#[test]
fn engine_reported_llp_error() {
    let mut s = side();
    s.rnic.qp_terminate(s.qp, TermCode::LLP_CRC);
    assert_eq!(s.sent_terminate(), Some(TermCode::LLP_CRC));
    assert_eq!(
        event_of(&mut s),
        [AsyncEventKind::LlpIntegrityError(TermCode::LLP_CRC)]
    );
}
