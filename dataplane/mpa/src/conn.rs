//! [`MpaConn`]: one MPA connection, tying the start-up phase, the FPDU transmit ring and
//! the deframer together, with the adapters TCP drives ([`MpaTx`], [`MpaRx`]).

use std::collections::VecDeque;

use iwarp_types::{Duration, Instant, TermCode};

use crate::config::MpaConfig;
use crate::event::{FailReason, Failure, MpaEvent, Negotiated};
use crate::handshake::{Handshake, MpaApiError, MpaState, Role};
use crate::pool::MpaPool;
use crate::rx::{Deframer, UlpduSink};
use crate::tx::{PushError, TxQueue, UlpduSource};

/// Bound of the event queue (the start-up phase produces at most two events; FPDU
/// errors one).
const EVENTS_MAX: usize = 8;

/// The bounded event queue. Events come from the start-up phase and from failures only,
/// so its storage is allocated by the first event and freed when it is drained: an
/// established connection without a failure holds none.
pub(crate) struct Events {
    q: VecDeque<MpaEvent>,
    dropped: u64,
}

impl Events {
    fn new() -> Events {
        Events {
            q: VecDeque::new(),
            dropped: 0,
        }
    }

    pub(crate) fn push(&mut self, e: MpaEvent) {
        if self.q.len() < EVENTS_MAX {
            self.q.push_back(e);
        } else {
            self.dropped += 1;
        }
    }

    fn pop(&mut self) -> Option<MpaEvent> {
        let e = self.q.pop_front();
        if e.is_none() && self.q.capacity() > 0 {
            self.q = VecDeque::new();
        }
        e
    }

    fn heap_bytes(&self) -> usize {
        self.q.capacity() * core::mem::size_of::<MpaEvent>()
    }
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpaCounters {
    /// FPDUs queued for sending.
    pub fpdus_tx: u64,
    /// FPDUs received and handed to the sink.
    pub fpdus_rx: u64,
    /// FPDUs handed on without a copy.
    pub fpdus_rx_zero_copy: u64,
    /// CRC errors.
    pub crc_errors: u64,
    /// Marker errors.
    pub marker_errors: u64,
    /// Bad ULPDU_Length values.
    pub length_errors: u64,
    /// Octets dropped after a failure or a reject.
    pub rx_dropped_bytes: u64,
    /// Streams declared lost because an FPDU stopped growing
    /// ([`MpaConfig::fpdu_stall_timeout`]).
    pub fpdu_stalls: u64,
    /// Events lost because the queue was full (never expected).
    pub events_dropped: u64,
}

/// One MPA connection, generic over the descriptor `D` of a queued ULPDU.
pub struct MpaConn<D> {
    cfg: MpaConfig,
    hs: Handshake,
    tx: TxQueue<D>,
    rx: Option<Deframer>,
    /// Next stream offset expected on receive.
    rx_next: u64,
    /// Stream offset where the peer's FPDUs start (end of its Request/Reply).
    rx_base: u64,
    /// While an FPDU is partial: when the stream is declared lost if no octet arrives
    /// (set by receives that carry a clock, [`MpaRx::at`]).
    rx_stall_deadline: Option<Instant>,
    events: Events,
    counters: MpaCounters,
}

impl<D> MpaConn<D> {
    /// Initiator: queues the MPA Request with `private_data` (at most 512 octets, 508 in
    /// revision 2) and waits for the Reply until `now + handshake_timeout`.
    pub fn initiator(
        cfg: &MpaConfig,
        private_data: &[u8],
        now: Instant,
    ) -> Result<MpaConn<D>, MpaApiError> {
        let hs = Handshake::initiator(cfg, private_data, now)?;
        let mut c = MpaConn::with(cfg, hs);
        c.sync();
        Ok(c)
    }

    /// Responder: waits for the MPA Request until `now + handshake_timeout`.
    pub fn responder(cfg: &MpaConfig, now: Instant) -> MpaConn<D> {
        MpaConn::with(cfg, Handshake::responder(cfg, now))
    }

    fn with(cfg: &MpaConfig, hs: Handshake) -> MpaConn<D> {
        MpaConn {
            cfg: *cfg,
            hs,
            tx: TxQueue::new(cfg.tx_queue_len, cfg.tx_ulpdu_max()),
            rx: None,
            rx_next: 0,
            rx_base: 0,
            rx_stall_deadline: None,
            events: Events::new(),
            counters: MpaCounters::default(),
        }
    }

    /// Responder: accepts the pending Request, answering with `private_data` and our
    /// IRD/ORD (RFC 6581; the ORD sent is capped at the initiator's IRD). FPDU mode starts.
    pub fn accept(&mut self, private_data: &[u8], ird: u16, ord: u16) -> Result<(), MpaApiError> {
        self.hs.accept(private_data, ird, ord, &mut self.events)?;
        self.sync();
        Ok(())
    }

    /// Responder: rejects the pending Request (Reply with R and `private_data`). The
    /// engine closes the connection once the Reply is sent.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), MpaApiError> {
        self.hs.reject(private_data)?;
        self.sync();
        Ok(())
    }

    /// The next event. `None` also frees the event queue's storage (events are rare:
    /// start-up and failures).
    pub fn poll_event(&mut self) -> Option<MpaEvent> {
        self.events.pop()
    }

    /// Heap bytes the connection holds: start-up buffers until the handshake is over,
    /// our Request/Reply frame until acknowledged, the event queue while events wait,
    /// and the FPDU ring, receive staging and transmit scratch buffers while held (lent
    /// by an [`MpaPool`] or, without one, allocated on first use). Zero for an idle
    /// established connection using a pool.
    pub fn heap_bytes(&self) -> usize {
        self.hs.heap_bytes()
            + self.tx.heap_bytes()
            + self.rx.as_ref().map_or(0, Deframer::heap_bytes)
            + self.events.heap_bytes()
    }

    /// Makes sure the FPDU ring has storage, borrowing it from `pool` if it has none
    /// (call before taking a ULPDU from the QP). False if the pool is exhausted: nothing
    /// can be queued until a ring comes back ([`MpaPool::rings_available`]).
    pub fn take_tx_ring(&mut self, pool: &mut MpaPool<D>) -> bool {
        self.tx.take_ring(pool)
    }

    /// True if the connection holds an FPDU ring (lent by the pool or its own).
    pub fn holds_tx_ring(&self) -> bool {
        self.tx.holds_ring()
    }

    /// True if the FPDU ring holds storage for another FPDU (without growing).
    pub fn has_tx_ring(&self) -> bool {
        self.tx.has_ring()
    }

    /// [`MpaConn::released`], then gives the ring back to `pool` if every FPDU is
    /// released. Returns true if a ring went back.
    pub fn released_pooled(
        &mut self,
        acked_offset: u64,
        f: impl FnMut(D),
        pool: &mut MpaPool<D>,
    ) -> bool {
        self.tx.released(acked_offset, f);
        self.tx.give_ring(pool, false)
    }

    /// Gives the FPDU ring back to `pool` if it is lent and empty (nothing queued or
    /// unacknowledged). Returns true if it went back.
    pub fn return_tx_ring(&mut self, pool: &mut MpaPool<D>) -> bool {
        self.tx.give_ring(pool, false)
    }

    /// Gives everything lent by `pool` back (the connection is going away; queued
    /// descriptors are dropped).
    pub fn return_storage(&mut self, pool: &mut MpaPool<D>) {
        self.tx.give_ring(pool, true);
        if let Some(rx) = self.rx.as_mut() {
            rx.give_staging(pool);
        }
    }

    /// When `handle_timeout` must be called (handshake deadline, or the deadline of a
    /// partial FPDU), if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.hs.poll_timeout(), self.rx_stall_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// Starts the handshake timeout again from `now`. The engine calls it when the TCP
    /// connection is established, so that the MPA timeout measures MPA and not TCP's SYN
    /// retransmissions.
    pub fn restart_timer(&mut self, now: Instant) {
        self.hs.restart_timer(now);
    }

    /// Fails the start-up phase with `Timeout` if its deadline passed; declares the
    /// stream lost (`LLP_STREAM_LOST`) if a partial FPDU got no octet in
    /// [`MpaConfig::fpdu_stall_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.hs.handle_timeout(now, &mut self.events);
        if self.rx_stall_deadline.is_some_and(|t| now >= t) {
            self.rx_stall_deadline = None;
            if self.rx.as_ref().is_some_and(Deframer::partial)
                && self.hs.state() == MpaState::Established
            {
                self.counters.fpdu_stalls += 1;
                if let Some(rx) = self.rx.as_mut() {
                    rx.abandon();
                }
                self.fail(FailReason::FpduStalled, Some(TermCode::LLP_STREAM_LOST));
            }
        }
    }

    /// After a receive at `now`: a partial FPDU that grew (or began) gets a new
    /// deadline; none is kept once no FPDU is partial.
    fn note_progress(&mut self, now: Instant, grew: bool) {
        let t = self.cfg.fpdu_stall_timeout;
        let partial = self.rx.as_ref().is_some_and(Deframer::partial);
        if !partial || t == Duration::ZERO || self.hs.state() != MpaState::Established {
            self.rx_stall_deadline = None;
        } else if grew || self.rx_stall_deadline.is_none() {
            self.rx_stall_deadline = Some(now + t);
        }
    }

    /// Role.
    pub fn role(&self) -> Role {
        self.hs.role()
    }

    /// State of the start-up phase.
    pub fn state(&self) -> MpaState {
        self.hs.state()
    }

    /// The negotiated parameters, once established (also after a failure found in a
    /// valid Reply, when a Terminate can still be sent).
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.hs.negotiated()
    }

    /// FPDUs may be pushed.
    pub fn is_fpdu_mode(&self) -> bool {
        self.tx.fpdu_mode()
    }

    /// Counters.
    pub fn counters(&self) -> MpaCounters {
        let mut c = self.counters;
        if let Some(rx) = &self.rx {
            c.fpdus_rx = rx.counters.fpdus;
            c.fpdus_rx_zero_copy = rx.counters.fpdus_zero_copy;
            c.crc_errors = rx.counters.crc_errors;
            c.marker_errors = rx.counters.marker_errors;
            c.length_errors = rx.counters.length_errors;
        }
        c.events_dropped = self.events.dropped;
        c
    }

    /// MULPDU: the largest ULPDU whose FPDU fits one TCP segment of `emss` octets (RFC
    /// 5044 section 6.1, markers counted when we insert them), capped by
    /// `tx_ulpdu_max_bytes`.
    pub fn max_ulpdu_len(&self, emss: usize) -> usize {
        self.tx.max_ulpdu_len(emss)
    }

    /// Free slots of the FPDU ring (0 before FPDU mode).
    pub fn tx_room(&self) -> usize {
        self.tx.room()
    }

    /// FPDUs queued and not yet released.
    pub fn tx_queued(&self) -> usize {
        self.tx.queued()
    }

    /// Queues one ULPDU of `ulpdu_len` octets (FPDU mode only).
    #[inline]
    pub fn push_ulpdu(&mut self, desc: D, ulpdu_len: usize) -> Result<(), PushError<D>> {
        self.tx.push(desc, ulpdu_len)?;
        self.counters.fpdus_tx += 1;
        Ok(())
    }

    /// Calls `f` for each FPDU fully acknowledged (`acked_offset` = TCP's
    /// `acked_offset()`), in order.
    pub fn released(&mut self, acked_offset: u64, f: impl FnMut(D)) {
        self.tx.released(acked_offset, f);
    }

    /// The transmit adapter TCP reads records from. A split FPDU is rendered in a
    /// scratch buffer the connection allocates the first time (see [`MpaConn::tx_pooled`]).
    pub fn tx<'a, S: UlpduSource<D>>(&'a mut self, src: &'a mut S) -> MpaTx<'a, D, S> {
        MpaTx {
            conn: self,
            src,
            scratch: None,
        }
    }

    /// The transmit adapter, rendering split FPDUs in `pool`'s shared scratch buffer.
    pub fn tx_pooled<'a, S: UlpduSource<D>>(
        &'a mut self,
        src: &'a mut S,
        pool: &'a mut MpaPool<D>,
    ) -> MpaTx<'a, D, S> {
        MpaTx {
            conn: self,
            src,
            scratch: Some(pool.scratch()),
        }
    }

    /// The receive adapter TCP delivers in-order octets to. Straddling FPDUs are staged
    /// in a buffer the connection allocates the first time (see [`MpaConn::rx_pooled`]).
    pub fn rx<'a, K: UlpduSink>(&'a mut self, sink: &'a mut K) -> MpaRx<'a, D, K> {
        MpaRx {
            conn: self,
            sink,
            pool: None,
            now: None,
        }
    }

    /// The receive adapter, staging straddling FPDUs in buffers lent by `pool`.
    pub fn rx_pooled<'a, K: UlpduSink>(
        &'a mut self,
        sink: &'a mut K,
        pool: &'a mut MpaPool<D>,
    ) -> MpaRx<'a, D, K> {
        MpaRx {
            conn: self,
            sink,
            pool: Some(pool),
            now: None,
        }
    }

    /// Stream offset one past the last octet TCP may send (`TxSource::end_offset`).
    pub fn end_offset(&self) -> u64 {
        self.tx.end_offset()
    }

    /// Stream offset one past the last octet queued, FPDUs a responder still holds back
    /// (RFC 5044 7.1.2) included. Equal to [`MpaConn::end_offset`] once the gate is open.
    pub fn queued_end_offset(&self) -> u64 {
        self.tx.queued_end()
    }

    /// `TxSource::seg_len`.
    pub fn seg_len(&self, offset: u64, max: usize) -> usize {
        self.tx.seg_len(offset, max)
    }

    /// `TxSource::fill`.
    pub fn fill<S: UlpduSource<D>>(&mut self, offset: u64, buf: &mut [u8], src: &mut S) {
        self.tx.fill(offset, buf, src, None);
    }

    /// `RxSink::deliver`: in-order octets at stream `offset`. Always consumes everything
    /// (after a failure or a reject the octets are dropped and counted).
    pub fn deliver<K: UlpduSink>(&mut self, offset: u64, data: &[u8], sink: &mut K) -> usize {
        self.deliver_with(offset, data, sink, None)
    }

    /// `deliver`, staging straddling FPDUs in buffers lent by `pool`. Consumes
    /// everything, except when a staging buffer is needed and the pool has none: then
    /// the octets from that FPDU's start on are left (TCP does not acknowledge them).
    fn deliver_with<K: UlpduSink>(
        &mut self,
        offset: u64,
        data: &[u8],
        sink: &mut K,
        mut pool: Option<&mut MpaPool<D>>,
    ) -> usize {
        let total = data.len();
        let mut data = data;
        if offset > self.rx_next {
            if !matches!(self.hs.state(), MpaState::Failed | MpaState::Rejected) {
                self.fail(FailReason::StreamGap, Some(TermCode::LLP_STREAM_LOST));
            }
            self.counters.rx_dropped_bytes += total as u64;
            return total;
        }
        let skip = (self.rx_next - offset).min(total as u64) as usize;
        data = &data[skip..];
        while !data.is_empty() {
            let at = self.rx_next;
            match self.hs.state() {
                MpaState::AwaitReply | MpaState::AwaitRequest => {
                    let n = self.hs.feed(data, &mut self.events);
                    self.rx_next += n as u64;
                    data = &data[n..];
                    if !matches!(
                        self.hs.state(),
                        MpaState::AwaitReply | MpaState::AwaitRequest
                    ) {
                        self.rx_base = self.rx_next;
                    }
                    self.sync();
                    if n == 0 {
                        break;
                    }
                }
                MpaState::RequestPending => {
                    self.fail(
                        FailReason::UnexpectedData,
                        Some(TermCode::LLP_INVALID_REQ_RESP),
                    );
                }
                MpaState::Established => {
                    let Some(rx) = self.rx.as_mut() else { break };
                    let staging = pool
                        .as_deref_mut()
                        .map(|p| p as &mut dyn crate::rx::StagingSource);
                    let r = rx.deliver(at, data, sink, staging);
                    if rx.counters.fpdus > 0 {
                        self.tx.open_gate();
                    }
                    if let Ok(n) = r {
                        if n < data.len() {
                            // Waiting for a staging buffer: the rest is not consumed.
                            self.rx_next += n as u64;
                            return total - (data.len() - n);
                        }
                    }
                    self.rx_next += data.len() as u64;
                    data = &[];
                    if let Err(f) = r {
                        // A failed first FPDU was still received: the Terminate that answers
                        // it may go out (RFC 5044 7.1.2 only holds FPDUs back before then).
                        self.tx.open_gate();
                        self.hs.set_failed();
                        self.events.push(MpaEvent::Failed(f));
                    }
                }
                MpaState::Rejected | MpaState::Failed => break,
            }
        }
        self.rx_next += data.len() as u64;
        self.counters.rx_dropped_bytes += data.len() as u64;
        total
    }

    fn fail(&mut self, reason: FailReason, term: Option<TermCode>) {
        self.hs.set_failed();
        self.events.push(MpaEvent::Failed(Failure { reason, term }));
    }

    /// Moves what the handshake produced into the transmit stream and sets up FPDU mode;
    /// frees the start-up buffers once the exchange is over.
    fn sync(&mut self) {
        let frame = self.hs.take_tx_frame();
        if !frame.is_empty() {
            self.tx.set_frame(frame);
        }
        if self.hs.fpdu_mode() && !self.tx.fpdu_mode() {
            if let Some(n) = self.hs.negotiated().copied() {
                let gated =
                    self.hs.role() == Role::Responder && self.cfg.responder_waits_for_first_fpdu;
                self.tx.enter_fpdu_mode(n.crc, n.markers_tx, gated);
                if self.hs.state() == MpaState::Established {
                    self.rx = Some(Deframer::new(
                        n.crc,
                        n.markers_rx,
                        self.rx_base,
                        self.cfg.rx_ulpdu_max(),
                        n.crc && self.cfg.place_before_crc,
                    ));
                }
            }
        }
        self.hs.release_startup();
    }
}

/// The transmit adapter (`TxSource` of ENGINE.md seam 1): records are our Request/Reply
/// frame and then one FPDU each.
pub struct MpaTx<'a, D, S> {
    conn: &'a mut MpaConn<D>,
    src: &'a mut S,
    scratch: Option<&'a mut Vec<u8>>,
}

impl<D, S: UlpduSource<D>> MpaTx<'_, D, S> {
    /// Stream offset one past the last octet queued (held-back FPDUs excluded).
    pub fn end_offset(&self) -> u64 {
        self.conn.end_offset()
    }

    /// Largest `n <= max` such that `[offset, offset + n)` is a run of whole records (or
    /// the rest of a record TCP split); `max` if the record at `offset` is longer.
    pub fn seg_len(&self, offset: u64, max: usize) -> usize {
        self.conn.seg_len(offset, max)
    }

    /// Writes exactly `buf.len()` stream octets from `offset` (first transmission or
    /// retransmission alike).
    pub fn fill(&mut self, offset: u64, buf: &mut [u8]) {
        let scratch = self.scratch.as_deref_mut();
        self.conn.tx.fill(offset, buf, self.src, scratch);
    }
}

/// The receive adapter (`RxSink` of ENGINE.md seam 1).
pub struct MpaRx<'a, D, K> {
    conn: &'a mut MpaConn<D>,
    sink: &'a mut K,
    pool: Option<&'a mut MpaPool<D>>,
    now: Option<Instant>,
}

impl<'a, D, K: UlpduSink> MpaRx<'a, D, K> {
    /// Receives at `now`: a partial FPDU left by the octets delivered gets its stall
    /// deadline ([`MpaConfig::fpdu_stall_timeout`]). Without a clock (unit tests of the
    /// framing) no deadline is kept.
    pub fn at(mut self, now: Instant) -> MpaRx<'a, D, K> {
        self.now = Some(now);
        self
    }

    /// In-order octets at stream `offset`; returns the number consumed (all of them,
    /// unless a pool was given and had no staging buffer for a straddling FPDU).
    pub fn deliver(&mut self, offset: u64, data: &[u8]) -> usize {
        let pool = self.pool.as_deref_mut();
        let before = self.conn.rx_next;
        let n = self.conn.deliver_with(offset, data, self.sink, pool);
        if let Some(now) = self.now {
            let grew = self.conn.rx_next != before;
            self.conn.note_progress(now, grew);
        }
        n
    }
}
