//! An MPA Reject and the FIN after it travel in separate segments, the FIN only once the
//! peer acknowledged the Reject. Linux siw (6.1) handles a FIN that shares a segment with
//! the MPA Reply before the Reply itself, and reports the connection as reset without the
//! reject's private data (docs/INTEROP.md, scripts/interop-siw.sh `reject.by-iwarpd`).

use std::cell::RefCell;
use std::rc::Rc;

use super::b2b::{pd, B_IP, PORT};
use super::harness::Pair;
use crate::{ConnectParams, Event};

/// What one frame from B carried: the MPA Reply, a FIN, an ACK of new data from A.
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    reply: bool,
    fin: bool,
}

/// TCP facts of an Ethernet/IPv4/TCP frame (None for anything else).
fn seg_of(f: &[u8]) -> Option<Seg> {
    if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] || f[14 + 9] != 6 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let t = 14 + ihl;
    if f.len() < t + 20 {
        return None;
    }
    let doff = usize::from(f[t + 12] >> 4) * 4;
    let end = (14 + total).min(f.len());
    let payload = f.get(t + doff..end).unwrap_or(&[]);
    Some(Seg {
        reply: payload.starts_with(b"MPA ID Rep Frame"),
        fin: f[t + 13] & 0x01 != 0,
    })
}

#[test]
fn reject_fin_waits_for_the_ack_of_the_reject() {
    let mut p = Pair::new();
    let from_b: Rc<RefCell<Vec<Seg>>> = Rc::default();
    let log = from_b.clone();
    p.b_to_a = Box::new(move |f| {
        if let Some(s) = seg_of(f) {
            log.borrow_mut().push(s);
        }
        true
    });
    p.b.eng.listen(PORT, 4).unwrap();
    let qa = p.a.qp;
    let a_conn =
        p.a.eng
            .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
            .unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    p.b.eng.reject(p.now, conn, pd(b"not here")).unwrap();
    p.run_until(|p| p.a.eng.conn_count() == 0 && p.b.eng.conn_count() == 0);

    let segs = from_b.borrow();
    let reply = segs
        .iter()
        .position(|s| s.reply)
        .unwrap_or_else(|| panic!("no MPA Reply from B: {segs:?}"));
    assert!(!segs[reply].fin, "the FIN rode with the Reject: {segs:?}");
    assert!(
        segs[reply + 1..].iter().any(|s| s.fin),
        "no FIN after the Reject: {segs:?}"
    );
    let ea = p.a.take_events();
    assert!(
        matches!(ea.first(), Some(Event::Rejected { conn, private_data })
            if *conn == a_conn && private_data.as_slice() == b"not here"),
        "{ea:?}"
    );
    assert_eq!(
        p.b.eng.counters().llp_close_timeouts,
        0,
        "the close timed out"
    );
}

#[test]
fn reject_closes_by_the_deadline_when_the_peer_never_acks() {
    let mut p = Pair::new();
    p.b.eng.listen(PORT, 4).unwrap();
    let qa = p.a.qp;
    p.a.eng
        .connect(p.now, qa, B_IP, PORT, ConnectParams::default())
        .unwrap();
    p.run(false);
    let conn = match p.b.take_events().as_slice() {
        [Event::ConnectRequest { conn, .. }] => *conn,
        other => panic!("{other:?}"),
    };
    // A goes silent: nothing from B arrives any more, so the Reject is never acknowledged.
    p.b_to_a = Box::new(|_| false);
    p.b.eng.reject(p.now, conn, pd(b"x")).unwrap();
    p.run_until(|p| p.b.eng.conn_count() == 0);
}
