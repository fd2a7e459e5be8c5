//! Start-up phase: roles, revisions, CRC/marker/IRD-ORD/RTR negotiation, reject, private
//! data bounds, timeouts, malformed frames.

use super::*;
use iwarp_wire::mpa::{RtrSet, KEY_REP, KEY_REQ};

fn cfg() -> MpaConfig {
    MpaConfig::default()
}

#[test]
fn rev2_both_roles_defaults() {
    let mut p = Pair::new(&cfg(), &cfg(), b"hello");
    assert_eq!(p.i.state(), MpaState::AwaitReply);
    assert_eq!(p.r.state(), MpaState::AwaitRequest);
    p.i_to_r();
    let req = match p.r.poll_event() {
        Some(MpaEvent::RequestReceived(r)) => r,
        e => panic!("{e:?}"),
    };
    assert_eq!(req.private_data.as_slice(), b"hello");
    assert_eq!(
        (
            req.revision,
            req.ird,
            req.ord,
            req.p2p,
            req.crc,
            req.markers
        ),
        (2, 16, 16, false, true, false)
    );
    p.r.accept(b"world", 16, 16).unwrap();
    let rn = match p.r.poll_event() {
        Some(MpaEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    p.r_to_i();
    let inn = match p.i.poll_event() {
        Some(MpaEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    assert_eq!(inn.private_data.as_slice(), b"world");
    assert_eq!(rn.private_data.as_slice(), b"hello");
    for n in [inn, rn] {
        assert_eq!(n.revision, 2);
        assert!(n.crc && !n.markers_tx && !n.markers_rx && !n.p2p);
        assert_eq!((n.ird, n.ord), (16, 16));
    }
    assert!(p.i.is_fpdu_mode() && p.r.is_fpdu_mode());
    assert_eq!(p.i.state(), MpaState::Established);
    assert_eq!(p.i.poll_timeout(), None);
    assert_eq!(p.r.poll_timeout(), None);
}

#[test]
fn request_bytes_match_siw_layout() {
    let c = MpaConfig {
        ird: 128,
        ord: 128,
        ..cfg()
    };
    let mut i: MpaConn<u32> = MpaConn::initiator(&c, &[], T0).unwrap();
    let mut src = Src::default();
    let mut sent = 0;
    let b = drain(&mut i, &mut src, &mut sent);
    // 04-read-bw-mpa2-crc.pcap frame 21 (C and siw's enhanced flag, rev 2, IRD=ORD=128).
    let mut want = KEY_REQ.to_vec();
    want.extend_from_slice(&[0x50, 0x02, 0x00, 0x04, 0x00, 0x80, 0x00, 0x80]);
    assert_eq!(b, want);
}

#[test]
fn rev1_both() {
    let c = MpaConfig {
        revision: 1,
        ..cfg()
    };
    let mut p = Pair::new(&c, &c, b"x");
    let (i, r) = p.establish(b"y", 3, 4);
    assert_eq!((i.revision, r.revision), (1, 1));
    // No RFC 6581 exchange: each side keeps its own values.
    assert_eq!((i.ird, i.ord), (16, 16));
    assert_eq!((r.ird, r.ord), (3, 4));
    assert_eq!(i.private_data.as_slice(), b"y");
}

#[test]
fn rev2_initiator_rev1_responder() {
    let c1 = MpaConfig {
        revision: 1,
        ..cfg()
    };
    let mut p = Pair::new(&cfg(), &c1, b"abc");
    p.i_to_r();
    match p.r.poll_event() {
        Some(MpaEvent::RequestReceived(r)) => {
            assert_eq!(r.revision, 2);
            // The enhanced data is stripped from the ULP's private data.
            assert_eq!(r.private_data.as_slice(), b"abc");
        }
        e => panic!("{e:?}"),
    }
    p.r.accept(b"", 1, 1).unwrap();
    p.r.poll_event();
    let mut probe = Src::default();
    let mut at = 0;
    let reply = drain(&mut p.r, &mut probe, &mut at);
    assert_eq!(reply[17], 1);
    assert_eq!(reply.len(), 20);
    p.r_sent = 0;
    p.r_to_i();
    match p.i.poll_event() {
        Some(MpaEvent::Established(n)) => {
            assert_eq!(n.revision, 1);
            assert!(!n.p2p);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn rev1_initiator_rev2_responder() {
    let c1 = MpaConfig {
        revision: 1,
        ..cfg()
    };
    let mut p = Pair::new(&c1, &cfg(), b"");
    let (i, r) = p.establish(b"", 1, 1);
    assert_eq!((i.revision, r.revision), (1, 1));
}

#[test]
fn crc_negotiation() {
    use CrcPolicy::*;
    // (initiator, responder) → CRC in use.
    for (ci, cr, want) in [
        (Off, Off, false),
        (Request, Off, true),
        (Off, Request, true),
        (Request, Request, true),
    ] {
        let mut p = Pair::new(
            &MpaConfig { crc: ci, ..cfg() },
            &MpaConfig { crc: cr, ..cfg() },
            b"",
        );
        let (i, r) = p.establish(b"", 1, 1);
        assert_eq!((i.crc, r.crc), (want, want), "{ci:?} {cr:?}");
    }
}

#[test]
fn crc_required_mismatch_initiator_forbids() {
    let mut p = Pair::new(
        &MpaConfig {
            crc: CrcPolicy::Forbid,
            ..cfg()
        },
        &cfg(),
        b"",
    );
    p.i_to_r();
    p.r.poll_event();
    p.r.accept(b"", 1, 1).unwrap();
    p.r_to_i();
    expect_failed(&mut p.i, FailReason::CrcMismatch, None);
    assert!(!p.i.is_fpdu_mode());
}

#[test]
fn crc_required_mismatch_responder_forbids() {
    let mut p = Pair::new(
        &cfg(),
        &MpaConfig {
            crc: CrcPolicy::Forbid,
            ..cfg()
        },
        b"",
    );
    p.i_to_r();
    expect_failed(&mut p.r, FailReason::CrcMismatch, None);
    // The responder answered with a reject (C cleared).
    p.r_to_i();
    match p.i.poll_event() {
        Some(MpaEvent::Rejected { private_data }) => assert!(private_data.is_empty()),
        e => panic!("{e:?}"),
    }
    assert_eq!(p.i.state(), MpaState::Rejected);
}

#[test]
fn markers_negotiation() {
    use MarkerPolicy::*;
    for (mi, mr) in [
        (Off, Off),
        (Request, Off),
        (Off, Request),
        (Request, Request),
    ] {
        let mut p = Pair::new(
            &MpaConfig {
                markers: mi,
                ..cfg()
            },
            &MpaConfig {
                markers: mr,
                ..cfg()
            },
            b"",
        );
        let (i, r) = p.establish(b"", 1, 1);
        assert_eq!(i.markers_rx, mi == Request);
        assert_eq!(r.markers_tx, mi == Request);
        assert_eq!(r.markers_rx, mr == Request);
        assert_eq!(i.markers_tx, mr == Request);
    }
}

#[test]
fn markers_refused() {
    let refuse = MpaConfig {
        markers: MarkerPolicy::Refuse,
        ..cfg()
    };
    let want = MpaConfig {
        markers: MarkerPolicy::Request,
        ..cfg()
    };
    let mut p = Pair::new(&want, &refuse, b"");
    p.i_to_r();
    expect_failed(&mut p.r, FailReason::MarkersRefused, None);
    p.r_to_i();
    assert!(matches!(p.i.poll_event(), Some(MpaEvent::Rejected { .. })));

    let mut p = Pair::new(&refuse, &want, b"");
    p.i_to_r();
    p.r.poll_event();
    p.r.accept(b"", 1, 1).unwrap();
    p.r_to_i();
    expect_failed(&mut p.i, FailReason::MarkersRefused, None);
}

#[test]
fn ird_ord_negotiation() {
    let ci = MpaConfig {
        ird: 4,
        ord: 8,
        ..cfg()
    };
    let mut p = Pair::new(&ci, &cfg(), b"");
    p.i_to_r();
    match p.r.poll_event() {
        Some(MpaEvent::RequestReceived(r)) => assert_eq!((r.ird, r.ord), (4, 8)),
        e => panic!("{e:?}"),
    }
    // Responder IRD 2 (< initiator ORD 8), ORD 16 (> initiator IRD 4: capped to 4).
    p.r.accept(b"", 2, 16).unwrap();
    let rn = match p.r.poll_event() {
        Some(MpaEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    assert_eq!((rn.ird, rn.ord), (2, 4));
    p.r_to_i();
    let inn = match p.i.poll_event() {
        Some(MpaEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    assert_eq!((inn.ird, inn.ord), (4, 2));
}

/// Feeds the initiator a hand-made Reply.
fn initiator_with_reply(ci: &MpaConfig, reply: &[u8]) -> MpaConn<u32> {
    let mut i: MpaConn<u32> = MpaConn::initiator(ci, b"", T0).unwrap();
    let mut sink = Sink::default();
    assert_eq!(i.rx(&mut sink).deliver(0, reply), reply.len());
    i
}

#[test]
fn insufficient_ird() {
    let ci = MpaConfig {
        ird: 4,
        ord: 4,
        ..cfg()
    };
    let e = EnhancedData {
        ird: 4,
        ord: 5,
        p2p: false,
        rtr: RtrSet::NONE,
    };
    let reply = raw_frame(FrameKind::Reply, (false, true, false), 2, Some(e), b"");
    let mut i = initiator_with_reply(&ci, &reply);
    expect_failed(
        &mut i,
        FailReason::InsufficientIrd,
        Some(TermCode::LLP_INSUFFICIENT_IRD),
    );
    // FPDU mode is up so that the engine can send the Terminate.
    assert!(i.is_fpdu_mode());
    assert!(i.push_ulpdu(1, 28).is_ok());
}

#[test]
fn p2p_each_rtr_type() {
    for (resp_rtr, want) in [
        (RtrSet::WRITE | RtrSet::READ, RtrType::Write),
        (RtrSet::WRITE, RtrType::Write),
        (RtrSet::READ, RtrType::Read),
    ] {
        let ci = MpaConfig { p2p: true, ..cfg() };
        let cr = MpaConfig {
            rtr: resp_rtr,
            ..cfg()
        };
        let mut p = Pair::new(&ci, &cr, b"");
        p.i_to_r();
        match p.r.poll_event() {
            Some(MpaEvent::RequestReceived(r)) => {
                assert!(r.p2p);
                assert_eq!(r.rtr, RtrSet::WRITE | RtrSet::READ);
            }
            e => panic!("{e:?}"),
        }
        p.r.accept(b"", 1, 1).unwrap();
        let rn = match p.r.poll_event() {
            Some(MpaEvent::Established(n)) => n,
            e => panic!("{e:?}"),
        };
        p.r_to_i();
        let inn = match p.i.poll_event() {
            Some(MpaEvent::Established(n)) => n,
            e => panic!("{e:?}"),
        };
        assert!(inn.p2p && rn.p2p);
        assert_eq!(inn.send_rtr, Some(want));
        assert_eq!(inn.await_rtr, None);
        assert_eq!(rn.await_rtr, Some(want));
        assert_eq!(rn.send_rtr, None);
    }
}

#[test]
fn p2p_never_offers_send_but_accepts_it() {
    // Our initiator drops Send from its offer.
    let ci = MpaConfig {
        p2p: true,
        rtr: RtrSet::SEND | RtrSet::READ,
        ..cfg()
    };
    let mut i: MpaConn<u32> = MpaConn::initiator(&ci, b"", T0).unwrap();
    let mut s = Src::default();
    let mut at = 0;
    let b = drain(&mut i, &mut s, &mut at);
    assert_eq!(&b[20..24], &[0x80, 0x10, 0x40, 0x10]);

    // A peer offering only a zero-length Send: accepted when Send is allowed.
    let e = EnhancedData {
        ird: 1,
        ord: 1,
        p2p: true,
        rtr: RtrSet::SEND,
    };
    let req = raw_frame(FrameKind::Request, (false, false, false), 2, Some(e), b"");
    let cr = MpaConfig {
        rtr: RtrSet::WRITE | RtrSet::SEND,
        ..cfg()
    };
    let mut r: MpaConn<u32> = MpaConn::responder(&cr, T0);
    let mut sink = Sink::default();
    r.rx(&mut sink).deliver(0, &req);
    assert!(matches!(r.poll_event(), Some(MpaEvent::RequestReceived(_))));
    r.accept(b"", 1, 1).unwrap();
    match r.poll_event() {
        Some(MpaEvent::Established(n)) => assert_eq!(n.await_rtr, Some(RtrType::Send)),
        e => panic!("{e:?}"),
    }
    let mut at = 0;
    let reply = drain(&mut r, &mut s, &mut at);
    // P2P | Send RTR in the IRD word, no Write/Read RTR in the ORD word.
    assert_eq!(&reply[20..24], &[0xc0, 0x01, 0x00, 0x01]);
}

#[test]
fn p2p_no_matching_rtr() {
    // Responder side: offer Read only, accept Write only → reject.
    let ci = MpaConfig {
        p2p: true,
        rtr: RtrSet::READ,
        ..cfg()
    };
    let cr = MpaConfig {
        rtr: RtrSet::WRITE,
        ..cfg()
    };
    let mut p = Pair::new(&ci, &cr, b"");
    p.i_to_r();
    expect_failed(
        &mut p.r,
        FailReason::NoMatchingRtr,
        Some(TermCode::LLP_NO_MATCHING_RTR),
    );
    p.r_to_i();
    assert!(matches!(p.i.poll_event(), Some(MpaEvent::Rejected { .. })));

    // Initiator side: the Reply picks a type we did not offer.
    let ci = MpaConfig {
        p2p: true,
        rtr: RtrSet::WRITE,
        ..cfg()
    };
    let e = EnhancedData {
        ird: 1,
        ord: 1,
        p2p: true,
        rtr: RtrSet::READ,
    };
    let reply = raw_frame(FrameKind::Reply, (false, true, false), 2, Some(e), b"");
    let mut i = initiator_with_reply(&ci, &reply);
    expect_failed(
        &mut i,
        FailReason::NoMatchingRtr,
        Some(TermCode::LLP_NO_MATCHING_RTR),
    );
    assert!(i.is_fpdu_mode());
}

#[test]
fn reject_with_private_data() {
    let mut p = Pair::new(&cfg(), &cfg(), b"please");
    p.i_to_r();
    assert!(matches!(
        p.r.poll_event(),
        Some(MpaEvent::RequestReceived(_))
    ));
    p.r.reject(b"no thanks").unwrap();
    assert_eq!(p.r.state(), MpaState::Rejected);
    assert_eq!(p.r.accept(b"", 1, 1), Err(MpaApiError::InvalidState));
    p.r_to_i();
    match p.i.poll_event() {
        Some(MpaEvent::Rejected { private_data }) => {
            assert_eq!(private_data.as_slice(), b"no thanks")
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(p.i.state(), MpaState::Rejected);
    assert!(!p.i.is_fpdu_mode());
    assert!(matches!(
        p.i.push_ulpdu(7, 20),
        Err(PushError::NotEstablished(7))
    ));
    // Later octets are dropped.
    let mut sink = Sink::default();
    let at = p.r_sent;
    assert_eq!(p.i.rx(&mut sink).deliver(at, &[0, 14, 1, 2]), 4);
    assert_eq!(p.i.counters().rx_dropped_bytes, 4);
}

#[test]
fn private_data_bounds() {
    let c1 = MpaConfig {
        revision: 1,
        ..cfg()
    };
    for (c, max) in [(c1, 512usize), (cfg(), 508)] {
        assert!(MpaConn::<u32>::initiator(&c, &vec![7; max], T0).is_ok());
        assert_eq!(
            MpaConn::<u32>::initiator(&c, &vec![7; max + 1], T0).err(),
            Some(MpaApiError::PrivateDataTooLong)
        );
        let mut p = Pair::new(&c, &c, &vec![9; max]);
        p.i_to_r();
        match p.r.poll_event() {
            Some(MpaEvent::RequestReceived(r)) => {
                assert_eq!(r.private_data.as_slice(), &vec![9; max][..])
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(
            p.r.accept(&vec![1; max + 1], 1, 1),
            Err(MpaApiError::PrivateDataTooLong)
        );
        p.r.accept(&vec![1; max], 1, 1).unwrap();
        p.r.poll_event();
        p.r_to_i();
        match p.i.poll_event() {
            Some(MpaEvent::Established(n)) => assert_eq!(n.private_data.len(), max),
            e => panic!("{e:?}"),
        }
        // Zero octets.
        let mut p = Pair::new(&c, &c, b"");
        let (i, r) = p.establish(b"", 1, 1);
        assert!(i.private_data.is_empty() && r.private_data.is_empty());
    }
}

#[test]
fn frame_split_at_every_offset() {
    let req = raw_frame(
        FrameKind::Request,
        (false, true, false),
        2,
        Some(EnhancedData::default()),
        b"abcdef",
    );
    for k in 0..=req.len() {
        let mut r: MpaConn<u32> = MpaConn::responder(&cfg(), T0);
        let mut sink = Sink::default();
        r.rx(&mut sink).deliver(0, &req[..k]);
        if k < req.len() {
            assert_eq!(r.poll_event(), None);
        }
        r.rx(&mut sink).deliver(k as u64, &req[k..]);
        match r.poll_event() {
            Some(MpaEvent::RequestReceived(q)) => assert_eq!(q.private_data.as_slice(), b"abcdef"),
            e => panic!("split {k}: {e:?}"),
        }
    }
}

#[test]
fn timeouts() {
    let c = MpaConfig {
        handshake_timeout: secs(2),
        ..cfg()
    };
    let mut i: MpaConn<u32> = MpaConn::initiator(&c, b"", T0).unwrap();
    let deadline = T0 + secs(2);
    assert_eq!(i.poll_timeout(), Some(deadline));
    i.handle_timeout(Instant(deadline.0 - 1));
    assert_eq!(i.poll_event(), None);
    i.handle_timeout(deadline);
    expect_failed(&mut i, FailReason::Timeout, None);
    assert_eq!(i.poll_timeout(), None);

    let mut r: MpaConn<u32> = MpaConn::responder(&c, T0);
    assert_eq!(r.poll_timeout(), Some(deadline));
    r.handle_timeout(deadline + secs(1));
    expect_failed(&mut r, FailReason::Timeout, None);

    // A partial frame does not stop the clock; a complete one does.
    let mut r: MpaConn<u32> = MpaConn::responder(&c, T0);
    let req = raw_frame(FrameKind::Request, (false, false, false), 1, None, b"");
    let mut sink = Sink::default();
    r.rx(&mut sink).deliver(0, &req[..10]);
    assert_eq!(r.poll_timeout(), Some(deadline));
    r.rx(&mut sink).deliver(10, &req[10..]);
    assert_eq!(r.poll_timeout(), None);
    // Once stopped, a restart does not start it again.
    r.restart_timer(deadline);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn restart_timer_moves_the_deadline() {
    let c = MpaConfig {
        handshake_timeout: secs(2),
        ..cfg()
    };
    let mut i: MpaConn<u32> = MpaConn::initiator(&c, b"", T0).unwrap();
    // TCP took 5 s to connect: the MPA deadline counts from then.
    let connected = T0 + secs(5);
    i.restart_timer(connected);
    assert_eq!(i.poll_timeout(), Some(connected + secs(2)));
    i.handle_timeout(connected + secs(1));
    assert_eq!(i.poll_event(), None);
    i.handle_timeout(connected + secs(2));
    expect_failed(&mut i, FailReason::Timeout, None);
}

fn responder_fed(bytes: &[u8]) -> MpaConn<u32> {
    let mut r: MpaConn<u32> = MpaConn::responder(&cfg(), T0);
    let mut sink = Sink::default();
    assert_eq!(r.rx(&mut sink).deliver(0, bytes), bytes.len());
    assert!(sink.got.is_empty());
    r
}

#[test]
fn malformed_frames() {
    let inv = Some(TermCode::LLP_INVALID_REQ_RESP);
    // A Reply sent to a responder.
    let rep = raw_frame(FrameKind::Reply, (false, false, false), 1, None, b"");
    expect_failed(&mut responder_fed(&rep), FailReason::BadKey, inv);
    // Garbage key.
    let mut bad = raw_frame(FrameKind::Request, (false, false, false), 1, None, b"");
    bad[0] = b'X';
    expect_failed(&mut responder_fed(&bad), FailReason::BadKey, inv);
    // Revisions 0 and 3.
    for rev in [0u8, 3] {
        let f = raw_frame(FrameKind::Request, (false, false, false), rev, None, b"");
        expect_failed(&mut responder_fed(&f), FailReason::BadRevision, inv);
    }
    // PD_Length 513.
    let mut big = raw_frame(FrameKind::Request, (false, false, false), 1, None, b"");
    big[18] = 0x02;
    big[19] = 0x01;
    big.extend_from_slice(&[0u8; 513]);
    expect_failed(
        &mut responder_fed(&big),
        FailReason::PrivateDataTooLong,
        inv,
    );
    // Enhanced flag, revision 2, only 2 octets of private data.
    let mut short = raw_frame(FrameKind::Request, (false, false, false), 2, None, b"ab");
    short[16] |= iwarp_wire::mpa::FLAG_ENHANCED;
    expect_failed(
        &mut responder_fed(&short),
        FailReason::MissingEnhancedData,
        inv,
    );
    // Data after the Request, before the ULP answered.
    let mut req = raw_frame(FrameKind::Request, (false, false, false), 1, None, b"");
    req.extend_from_slice(&[0, 14]);
    let mut r = responder_fed(&req);
    assert!(matches!(r.poll_event(), Some(MpaEvent::RequestReceived(_))));
    expect_failed(&mut r, FailReason::UnexpectedData, inv);
    assert_eq!(r.accept(b"", 1, 1), Err(MpaApiError::InvalidState));

    // Initiator: a Request where the Reply belongs (also: a reply to a Request never
    // sent is a Reply reaching a responder, above).
    let req = raw_frame(
        FrameKind::Request,
        (false, false, false),
        2,
        Some(EnhancedData::default()),
        b"",
    );
    expect_failed(
        &mut initiator_with_reply(&cfg(), &req),
        FailReason::BadKey,
        inv,
    );
    // Revision 2 Reply to a revision 1 Request.
    let c1 = MpaConfig {
        revision: 1,
        ..cfg()
    };
    let rep2 = raw_frame(
        FrameKind::Reply,
        (false, false, false),
        2,
        Some(EnhancedData::default()),
        b"",
    );
    expect_failed(
        &mut initiator_with_reply(&c1, &rep2),
        FailReason::BadRevision,
        inv,
    );
    // Revision 2 Reply without the RFC 6581 data to an enhanced Request.
    let bare = raw_frame(FrameKind::Reply, (false, true, false), 2, None, b"");
    expect_failed(
        &mut initiator_with_reply(&cfg(), &bare),
        FailReason::MissingEnhancedData,
        inv,
    );
    // Keys are exactly the RFC strings.
    assert_eq!(&rep[..16], KEY_REP);
}

#[test]
fn api_misuse() {
    let mut i: MpaConn<u32> = MpaConn::initiator(&cfg(), b"", T0).unwrap();
    assert_eq!(i.accept(b"", 1, 1), Err(MpaApiError::InvalidState));
    assert_eq!(i.reject(b""), Err(MpaApiError::InvalidState));
    assert!(matches!(
        i.push_ulpdu(1, 20),
        Err(PushError::NotEstablished(1))
    ));
    assert_eq!(i.tx_room(), 0);
    assert_eq!(i.role(), Role::Initiator);
}
