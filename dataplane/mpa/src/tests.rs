//! Tests of the whole connection: start-up in both roles, negotiation, FPDU round trips,
//! corruption, markers, capture streams.

mod fpdu;
mod handshake;
mod pool;

use std::collections::HashMap;

use iwarp_types::{Duration, Instant, TermCode};
use iwarp_wire::mpa::{EnhancedData, Frame, FrameKind, FrameRepr};

use crate::*;

/// A ULPDU source backed by a map from descriptor to bytes.
#[derive(Default)]
pub(crate) struct Src {
    pub ulpdus: HashMap<u32, Vec<u8>>,
}

impl UlpduSource<u32> for Src {
    fn fill_ulpdu(&mut self, desc: &u32, out: &mut [u8]) {
        let b = &self.ulpdus[desc];
        assert_eq!(b.len(), out.len());
        out.copy_from_slice(b);
    }
}

/// A sink recording ULPDUs; fails on the `fail_at`-th one if set.
#[derive(Default)]
pub(crate) struct Sink {
    pub got: Vec<Vec<u8>>,
    pub fail_at: Option<(usize, TermCode)>,
}

impl UlpduSink for Sink {
    fn on_ulpdu(&mut self, ulpdu: &[u8]) -> Result<(), TermCode> {
        if let Some((n, t)) = self.fail_at {
            if self.got.len() == n {
                return Err(t);
            }
        }
        self.got.push(ulpdu.to_vec());
        Ok(())
    }
}

pub(crate) const T0: Instant = Instant(1_000);

/// Every octet `from` has queued from `*sent` on (FPDUs fully rendered).
pub(crate) fn drain(from: &mut MpaConn<u32>, src: &mut Src, sent: &mut u64) -> Vec<u8> {
    let end = from.tx(src).end_offset();
    let mut buf = vec![0u8; (end - *sent) as usize];
    from.tx(src).fill(*sent, &mut buf);
    *sent = end;
    buf
}

/// Moves everything queued by `from` into `to`.
pub(crate) fn pump(
    from: &mut MpaConn<u32>,
    src: &mut Src,
    sent: &mut u64,
    to: &mut MpaConn<u32>,
    sink: &mut Sink,
) {
    let at = *sent;
    let bytes = drain(from, src, sent);
    assert_eq!(to.rx(sink).deliver(at, &bytes), bytes.len());
}

/// A pair of connections with their sources, sinks and offsets.
pub(crate) struct Pair {
    pub i: MpaConn<u32>,
    pub r: MpaConn<u32>,
    pub isrc: Src,
    pub rsrc: Src,
    pub isink: Sink,
    pub rsink: Sink,
    pub i_sent: u64,
    pub r_sent: u64,
}

impl Pair {
    pub fn new(ci: &MpaConfig, cr: &MpaConfig, pd: &[u8]) -> Pair {
        Pair {
            i: MpaConn::initiator(ci, pd, T0).unwrap(),
            r: MpaConn::responder(cr, T0),
            isrc: Src::default(),
            rsrc: Src::default(),
            isink: Sink::default(),
            rsink: Sink::default(),
            i_sent: 0,
            r_sent: 0,
        }
    }

    pub fn i_to_r(&mut self) {
        pump(
            &mut self.i,
            &mut self.isrc,
            &mut self.i_sent,
            &mut self.r,
            &mut self.rsink,
        );
    }

    pub fn r_to_i(&mut self) {
        pump(
            &mut self.r,
            &mut self.rsrc,
            &mut self.r_sent,
            &mut self.i,
            &mut self.isink,
        );
    }

    /// Request → RequestReceived → accept → Reply → Established on both sides.
    pub fn establish(&mut self, pd: &[u8], ird: u16, ord: u16) -> (Negotiated, Negotiated) {
        self.i_to_r();
        match self.r.poll_event() {
            Some(MpaEvent::RequestReceived(_)) => {}
            e => panic!("expected RequestReceived, got {e:?}"),
        }
        self.r.accept(pd, ird, ord).unwrap();
        let rn = match self.r.poll_event() {
            Some(MpaEvent::Established(n)) => n,
            e => panic!("responder: {e:?}"),
        };
        self.r_to_i();
        let inn = match self.i.poll_event() {
            Some(MpaEvent::Established(n)) => n,
            e => panic!("initiator: {e:?}"),
        };
        (inn, rn)
    }
}

/// Raw Request/Reply bytes.
pub(crate) fn raw_frame(
    kind: FrameKind,
    flags: (bool, bool, bool),
    revision: u8,
    enhanced: Option<EnhancedData>,
    pd: &[u8],
) -> Vec<u8> {
    let repr = FrameRepr {
        kind,
        markers: flags.0,
        crc: flags.1,
        reject: flags.2,
        revision,
        enhanced,
        private_data: pd,
    };
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Frame::new_unchecked(&mut b[..]));
    b
}

pub(crate) fn expect_failed(c: &mut MpaConn<u32>, reason: FailReason, term: Option<TermCode>) {
    let mut seen = None;
    while let Some(e) = c.poll_event() {
        if let MpaEvent::Failed(f) = e {
            seen = Some(f);
        }
    }
    assert_eq!(seen, Some(Failure { reason, term }));
    assert_eq!(c.state(), MpaState::Failed);
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
