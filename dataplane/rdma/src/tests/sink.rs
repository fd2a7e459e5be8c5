//! The completion sink seam: a CQ created with an owner's sink gets every completion of
//! its QPs (and the owner's own), with the CQ's overflow and notification rules.

use std::sync::{Arc, Mutex};

use iwarp_types::{
    AsyncEventKind, ConnId, CqId, Cqe, EventResource, QpId, SendFlags, SendOp, VerbError, WcOpcode,
    WcStatus,
};

use super::pair::{sgl, Pair, ALL};
use crate::cq::{CqFull, CqSink, Notify, NotifyMode};
use crate::{LlpParams, LlpRole};

/// A bounded sink over memory the test also holds (as the owner's reader would).
struct TestSink {
    seen: Arc<Mutex<Vec<Cqe>>>,
    cap: usize,
    armed: Option<NotifyMode>,
    arms: u32,
}

impl TestSink {
    fn new(cap: usize) -> (TestSink, Arc<Mutex<Vec<Cqe>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        (
            TestSink {
                seen: seen.clone(),
                cap,
                armed: None,
                arms: 0,
            },
            seen,
        )
    }
}

impl CqSink for TestSink {
    fn push(&mut self, cqe: &Cqe) -> Result<Notify, CqFull> {
        let mut seen = self.seen.lock().unwrap();
        if seen.len() >= self.cap {
            return Err(CqFull);
        }
        seen.push(*cqe);
        match self.armed.take() {
            Some(NotifyMode::NextCompletion) => Ok(Notify::Event),
            Some(NotifyMode::Solicited) if cqe.status != WcStatus::Success => Ok(Notify::Event),
            other => {
                self.armed = other;
                Ok(Notify::Quiet)
            }
        }
    }

    fn arm(&mut self, mode: NotifyMode) {
        self.arms += 1;
        self.armed = Some(mode);
    }

    fn depth(&self) -> usize {
        self.cap
    }
}

/// A's QP moved onto a new CQ backed by `sink` (send and receive completions).
fn with_sink(p: &mut Pair, sink: TestSink) -> CqId {
    let (cq, depth) =
        p.a.rnic
            .create_cq_with_sink(sink.cap as u32, Box::new(sink))
            .unwrap();
    assert_eq!(p.a.rnic.query_cq(cq), Ok(depth));
    let mut attr = p.a.rnic.query_qp(p.a.qp).unwrap().attr;
    attr.send_cq = cq;
    attr.recv_cq = cq;
    let (qp, _) = p.a.rnic.create_qp(&attr).unwrap();
    let params = LlpParams {
        ird: 1,
        ord: 1,
        role: LlpRole::Initiator,
        rtr: None,
    };
    p.a.rnic.qp_establish(qp, ConnId(2), params).unwrap();
    p.a.qp = qp;
    cq
}

#[test]
fn completions_go_to_the_sink_with_the_completion_id() {
    let mut p = Pair::new();
    let (sink, seen) = TestSink::new(8);
    let cq = with_sink(&mut p, sink);
    p.a.rnic.set_qp_completion_id(p.a.qp, QpId(4242)).unwrap();
    assert_eq!(
        p.a.rnic.set_qp_completion_id(QpId(77), QpId(1)),
        Err(VerbError::InvalidQp)
    );
    let (sb, vb) = p.b.reg(64, ALL);
    let (sa, va) = p.a.reg(64, ALL);
    p.b.post_recv(7, sb, vb, 64);
    p.a.post(1, SendOp::Send, sgl(sa, va, 16), SendFlags::SIGNALED);
    p.run();
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].wr_id, got[0].status, got[0].opcode, got[0].qp),
        (1, WcStatus::Success, WcOpcode::Send, QpId(4242))
    );
    // Not an in-engine queue: nothing to poll or resize here.
    let mut out = [got[0]; 4];
    assert_eq!(p.a.rnic.poll_cq(cq, &mut out), Err(VerbError::InvalidCq));
    assert_eq!(p.a.rnic.resize_cq(cq, 16), Err(VerbError::InvalidCq));
    // The in-engine CQ of B still carries B's QP id.
    let b = p.b.cqes();
    assert_eq!((b[0].wr_id, b[0].qp), (7, p.b.qp));
}

#[test]
fn a_full_sink_is_a_cq_overflow_and_the_qp_terminates() {
    let mut p = Pair::new();
    let (sink, seen) = TestSink::new(1);
    let cq = with_sink(&mut p, sink);
    let (sa, va) = p.a.reg(64, ALL);
    let write = SendOp::Write {
        remote_to: 0,
        rkey: sa,
    };
    p.a.post(1, write, sgl(sa, va, 0), SendFlags::SIGNALED);
    p.a.post(2, write, sgl(sa, va, 0), SendFlags::SIGNALED);
    assert!(p.a.take_ulpdu(1024).is_some());
    assert!(p.a.take_ulpdu(1024).is_some());
    assert_eq!(
        p.a.sent_terminate(),
        Some(iwarp_types::TermCode::RDMAP_CATASTROPHIC_STREAM)
    );
    // Nothing written over the unread completion.
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1]);
    let ev = p.a.events();
    let qp = p.a.qp;
    assert_eq!(
        ev.iter()
            .filter(|e| e.resource == EventResource::Cq(cq) && e.kind == AsyncEventKind::CqOverflow)
            .count(),
        1,
        "{ev:?}"
    );
    assert!(ev
        .iter()
        .any(|e| e.resource == EventResource::Qp(qp) && e.kind == AsyncEventKind::CqError));
    assert!(p.a.rnic.cqs.get(cq).unwrap().overflows() >= 1);
}

#[test]
fn req_notify_arms_the_sink_and_one_notification_stands_for_several() {
    let mut p = Pair::new();
    let (sink, _seen) = TestSink::new(16);
    let cq = with_sink(&mut p, sink);
    p.a.rnic.req_notify_cq(cq, false).unwrap();
    assert_eq!(p.a.rnic.cq_sink::<TestSink>(cq).unwrap().arms, 1);
    assert!(p.a.rnic.cq_sink::<crate::cq::CqQueue>(cq).is_none());
    let cqe = |wr_id| Cqe {
        wr_id,
        status: WcStatus::InvalidWqe,
        opcode: WcOpcode::Send,
        byte_len: 0,
        qp: QpId(9),
        invalidated: None,
        solicited: false,
    };
    let qp = p.a.qp;
    assert_eq!(p.a.rnic.push_completion(cq, cqe(1), Some(qp)), Ok(true));
    // Fired again before the first notification was taken: merged into it.
    p.a.rnic.cq_sink_mut::<TestSink>(cq).unwrap().armed = Some(NotifyMode::NextCompletion);
    assert_eq!(p.a.rnic.push_completion(cq, cqe(2), None), Ok(true));
    assert_eq!(p.a.rnic.poll_cq_event(), Some(cq));
    assert_eq!(p.a.rnic.poll_cq_event(), None);
    // Taken: the next fire is queued again.
    p.a.rnic.req_notify_cq(cq, true).unwrap();
    assert_eq!(p.a.rnic.push_completion(cq, cqe(3), None), Ok(true));
    assert_eq!(p.a.rnic.poll_cq_event(), Some(cq));
    assert_eq!(
        p.a.rnic.push_completion(CqId(999), cqe(4), None),
        Err(VerbError::InvalidCq)
    );
    assert_eq!(
        p.a.rnic.push_completion(cq, cqe(4), Some(QpId(999))),
        Err(VerbError::InvalidQp)
    );
}

#[test]
fn an_owner_completion_that_overflows_terminates_its_qp() {
    let mut p = Pair::new();
    let (sink, seen) = TestSink::new(1);
    let cq = with_sink(&mut p, sink);
    let cqe = |wr_id| Cqe {
        wr_id,
        status: WcStatus::InvalidWqe,
        opcode: WcOpcode::Recv,
        byte_len: 0,
        qp: QpId(9),
        invalidated: None,
        solicited: false,
    };
    let qp = p.a.qp;
    assert_eq!(p.a.rnic.push_completion(cq, cqe(1), Some(qp)), Ok(true));
    assert_eq!(p.a.rnic.push_completion(cq, cqe(2), None), Ok(false));
    assert_eq!(p.a.rnic.push_completion(cq, cqe(3), Some(qp)), Ok(false));
    assert_eq!(seen.lock().unwrap().len(), 1);
    let ev = p.a.events();
    assert_eq!(
        ev.iter()
            .filter(|e| e.kind == AsyncEventKind::CqOverflow)
            .count(),
        1,
        "once per episode: {ev:?}"
    );
    assert!(ev
        .iter()
        .any(|e| e.resource == EventResource::Qp(qp) && e.kind == AsyncEventKind::CqError));
    assert_eq!(
        p.a.rnic.query_qp(qp).unwrap().state,
        iwarp_types::QpState::Terminate
    );
    // A sink smaller than the depth asked for is refused.
    let (small, _) = TestSink::new(2);
    assert_eq!(
        p.a.rnic
            .create_cq_with_sink(3, Box::new(small))
            .map(|(_, d)| d),
        Err(VerbError::InsufficientResources)
    );
}
