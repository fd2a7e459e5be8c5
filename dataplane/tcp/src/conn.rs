//! The connection object: state, constructors, getters and application commands.
//!
//! Inputs are [`TcpConn::handle_segment`] (in `input.rs`) and [`TcpConn::handle_timeout`]
//! (in `timeout.rs`); outputs are [`TcpConn::poll_transmit`] (in `output.rs`),
//! [`TcpConn::poll_timeout`] and [`TcpConn::poll_event`]. Call order after any input or
//! command: `poll_transmit` until `None`, then `poll_event` until `None`, then
//! `poll_timeout`.
//!
//! Stream offsets (see `docs/ENGINE.md`): offset 0 is the byte after the SYN. The send
//! side keeps `snd_una`, `snd_nxt`, `snd_max` as offsets; sequence numbers are derived.

use iwarp_types::{Duration, Instant, SecondBudget};

use crate::cc::CongestionControl;
use crate::config::TcpConfig;
use crate::ooo::OooBuffer;
use crate::rtt::RttEstimator;
use crate::scoreboard::Scoreboard;
use crate::segmap::SegMap;
use crate::segment::{FourTuple, PseudoSum, TcpSegment};
use crate::seq::SeqNumber;
use crate::timer::{Timer, TimerTable};

/// Default MSS when the peer sends none (RFC 9293 section 3.7.1).
pub(crate) const DEFAULT_PEER_MSS: u16 = 536;
/// Smallest effective MSS we accept from a peer (guards against tiny-MSS abuse).
pub(crate) const MIN_EFF_MSS: usize = 64;
/// Bytes of the timestamp option with its padding.
pub(crate) const TS_OPTION_LEN: usize = 12;
/// Most events queued between two `poll_event` drains.
const EVENT_QUEUE_LEN: usize = 8;

/// What TCP sends: a sequence of records (MPA frames, FPDUs) that TCP never splits if it
/// can avoid it. TCP keeps no copy of payload; a retransmission calls `fill` again.
pub trait TxSource {
    /// Stream offset one past the last byte queued so far.
    fn end_offset(&self) -> u64;
    /// Largest `n <= max` such that `[offset, offset + n)` is a run of whole records
    /// starting at a record boundary. If the record at `offset` alone is longer than `max`
    /// (the MSS shrank), returns `max` (the record is split: correctness first).
    /// `offset` is always a record boundary or a point inside a record TCP already split.
    fn seg_len(&self, offset: u64, max: usize) -> usize;
    /// Writes exactly `buf.len()` stream bytes starting at `offset` into `buf`.
    /// Called for first transmissions and for retransmissions alike.
    fn fill(&mut self, offset: u64, buf: &mut [u8]);
}

/// Where in-order received bytes go. Out-of-order segments are held by TCP (bounded) and
/// replayed through `deliver` when the hole is filled.
pub trait RxSink {
    /// In-order bytes at stream `offset`. Returns the number consumed; the upper layer
    /// consumes everything unless it has failed (then TCP acknowledges only what was
    /// consumed and drops the rest).
    fn deliver(&mut self, offset: u64, data: &[u8]) -> usize;
}

/// RFC 9293 connection states (LISTEN lives in the engine: see [`TcpConn::accept`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for its ACK.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed; our FIN is queued or unacknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both sent FIN simultaneously; waiting for the ACK of ours.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Waiting 2 * MSL before forgetting the connection.
    TimeWait,
    /// Gone.
    Closed,
}

impl TcpState {
    /// Whether the handshake completed (RFC 9293 "synchronized" states).
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            TcpState::SynSent | TcpState::SynReceived | TcpState::Closed
        )
    }
}

/// What happened to the connection, for the upper layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpEvent {
    /// The three-way handshake completed.
    Connected,
    /// The peer's FIN arrived and every byte before it was delivered.
    PeerClosed,
    /// Fully closed (after LAST_ACK, TIME_WAIT expiry, a local abort, or a close before
    /// the handshake completed). Terminal.
    Closed,
    /// The peer reset the connection. Terminal.
    Reset,
    /// Retransmissions, SYN retries or keepalives ran out. Terminal.
    TimedOut,
}

/// Per-connection counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Segments handed to `handle_segment`.
    pub segs_in: u64,
    /// Of those, in-order data taken by header prediction (the checks of a segment
    /// that could be anything skipped).
    pub segs_predicted: u64,
    /// Segments written by `poll_transmit`.
    pub segs_out: u64,
    /// Data segments retransmitted (any cause).
    pub retransmits: u64,
    /// Loss recoveries entered by duplicate ACKs or SACK (fast retransmit).
    pub fast_retransmits: u64,
    /// Retransmission timer expirations.
    pub rto_expirations: u64,
    /// Retransmission timeouts found spurious by the timestamp echo of the first ACK
    /// after them (RFC 3522) and undone (RFC 4015).
    pub spurious_rtos: u64,
    /// Duplicate ACKs received.
    pub dup_acks: u64,
    /// Out-of-order segments (or parts) dropped for lack of buffer or ranges.
    pub ooo_drops: u64,
    /// Out-of-order segments buffered.
    pub ooo_segments: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Segments dropped by PAWS (RFC 7323).
    pub paws_drops: u64,
    /// Segments outside the receive window.
    pub out_of_window: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keepalive probes sent.
    pub keepalive_probes: u64,
    /// Bytes the upper layer refused (`deliver` consumed less than offered).
    pub rx_refused_bytes: u64,
    /// ACKs not sent in reply to unacceptable segments (and challenge ACKs not sent)
    /// because one was sent less than `invalid_ack_interval_ms` before.
    pub invalid_acks_suppressed: u64,
    /// Out-of-order FINs remembered until the data before them arrived.
    pub ooo_fins: u64,
}

/// What a retransmission timeout changed, kept to undo it if it proves spurious.
#[derive(Clone, Debug)]
pub(crate) struct RtoUndo {
    /// Our timestamp clock at the timeout: every retransmission after it carries a
    /// TSval at least this, so an echo below it acknowledges an original transmission.
    pub(crate) tsval: u32,
    /// The congestion state before the timeout.
    pub(crate) cc: CongestionControl,
}

/// A TCP connection built for MPA. See the module documentation for the call order.
#[derive(Debug)]
pub struct TcpConn {
    pub(crate) cfg: TcpConfig,
    pub(crate) tuple: FourTuple,
    /// The pseudo-header sum of `tuple`'s addresses (`PseudoSum::of`), kept for the
    /// checksum of every segment.
    pub(crate) pseudo: PseudoSum,
    pub(crate) state: TcpState,
    pub(crate) iss: SeqNumber,
    pub(crate) irs: SeqNumber,

    // Send sequence space (stream offsets).
    pub(crate) snd_una: u64,
    pub(crate) snd_nxt: u64,
    pub(crate) snd_max: u64,
    /// SYN (or SYN-ACK) must be (re)transmitted.
    pub(crate) syn_pending: bool,
    /// Application asked to close: FIN follows the queued data.
    pub(crate) fin_queued: bool,
    /// Offset of our FIN once sent (it occupies sequence `ISS + 1 + fin_off`).
    pub(crate) fin_off: Option<u64>,
    /// FIN must be (re)transmitted.
    pub(crate) fin_pending: bool,
    pub(crate) fin_acked: bool,
    pub(crate) snd_wnd: u64,
    pub(crate) max_snd_wnd: u64,
    pub(crate) snd_wl1: SeqNumber,
    pub(crate) snd_wl2: SeqNumber,
    pub(crate) snd_wscale: u8,
    pub(crate) rcv_wscale: u8,
    /// Both sides sent the window scale option.
    pub(crate) ws_ok: bool,
    pub(crate) peer_mss: u16,
    /// MSS the path allows (lowered by [`TcpConn::set_path_mss`]); `u16::MAX` if unknown.
    pub(crate) path_mss: u16,
    pub(crate) sack_ok: bool,
    pub(crate) ts_ok: bool,

    // Receive sequence space.
    pub(crate) rcv_nxt: u64,
    pub(crate) fin_received: bool,
    pub(crate) rcv_wnd: u32,
    pub(crate) ts_recent: u32,
    pub(crate) last_ack_sent: SeqNumber,

    // Acknowledgment scheduling.
    pub(crate) ack_pending: bool,
    pub(crate) delack_segs: u32,
    /// This second's answers to what we did not ask for: challenge ACKs and ACKs to
    /// unacceptable data (`challenge_acks_per_s`, `ack_limit.rs`).
    pub(crate) answers: SecondBudget,
    /// When the last ACK answering an unacceptable segment (or challenge ACK) was sent.
    pub(crate) last_invalid_ack: Option<Instant>,

    // Loss recovery and timing.
    pub(crate) dupacks: u32,
    pub(crate) in_recovery: bool,
    pub(crate) recover: u64,
    pub(crate) high_rxt: u64,
    pub(crate) lost_end: u64,
    pub(crate) rxt_force: bool,
    /// A retransmission timeout fired: the segment at snd.una goes out once even if the
    /// peer's window has no room for it, so it doubles as a zero-window probe (RFC 9293
    /// 3.8.6.1: retransmit even when the window is zero; Linux tcp_retransmit_timer).
    pub(crate) rto_head: bool,
    pub(crate) rto_retries: u32,
    pub(crate) syn_retries: u32,
    pub(crate) rtt: RttEstimator,
    pub(crate) rtt_probe: Option<(u64, Instant)>,
    pub(crate) cc: CongestionControl,
    /// Set by the first retransmission timeout of a series (timestamps on): what to
    /// restore if the first ACK after it shows the peer had the data (RFC 3522/4015).
    pub(crate) rto_undo: Option<RtoUndo>,
    pub(crate) scoreboard: Scoreboard,
    pub(crate) segmap: SegMap,
    pub(crate) ooo: OooBuffer,
    pub(crate) last_send: Instant,

    // Probes.
    pub(crate) probe_pending: bool,
    pub(crate) persist_backoff: u32,
    pub(crate) persist_force: bool,
    pub(crate) keepalive_sent: u32,
    /// An RST to send (abort), with this sequence number.
    pub(crate) rst_pending: Option<SeqNumber>,

    pub(crate) timers: TimerTable,
    events: [Option<TcpEvent>; EVENT_QUEUE_LEN],
    ev_head: usize,
    ev_len: usize,
    pub(crate) counters: TcpCounters,
    /// Tests compare the input path with and without header prediction.
    #[cfg(test)]
    pub(crate) no_prediction: bool,
}

impl TcpConn {
    fn new(
        cfg: TcpConfig,
        tuple: FourTuple,
        isn: SeqNumber,
        state: TcpState,
        now: Instant,
    ) -> Self {
        let mut cfg = cfg;
        cfg.wscale = cfg.wscale.min(14);
        cfg.mss_bytes = cfg.mss_bytes.max(MIN_EFF_MSS as u16 + TS_OPTION_LEN as u16);
        cfg.ts_tick_us = cfg.ts_tick_us.max(1);
        let max_wnd = 65_535u64 << cfg.wscale;
        let rcv_wnd = u64::from(cfg.rcv_wnd_bytes).clamp(1, max_wnd) as u32;
        let mss = usize::from(cfg.mss_bytes);
        TcpConn {
            cfg,
            tuple,
            pseudo: PseudoSum::of(&tuple),
            state,
            iss: isn,
            irs: SeqNumber(0),
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            syn_pending: true,
            fin_queued: false,
            fin_off: None,
            fin_pending: false,
            fin_acked: false,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: SeqNumber(0),
            snd_wscale: 0,
            rcv_wscale: 0,
            ws_ok: false,
            peer_mss: DEFAULT_PEER_MSS,
            path_mss: u16::MAX,
            sack_ok: false,
            ts_ok: false,
            rcv_nxt: 0,
            fin_received: false,
            rcv_wnd,
            ts_recent: 0,
            last_ack_sent: SeqNumber(0),
            ack_pending: false,
            delack_segs: 0,
            answers: SecondBudget::new(),
            last_invalid_ack: None,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            high_rxt: 0,
            lost_end: 0,
            rxt_force: false,
            rto_head: false,
            rto_retries: 0,
            syn_retries: 0,
            rtt: RttEstimator::new(cfg.rto_ms_initial, cfg.rto_ms_min, cfg.rto_ms_max),
            rtt_probe: None,
            cc: CongestionControl::new(cfg.congestion, cfg.initial_cwnd_segments, mss),
            rto_undo: None,
            scoreboard: Scoreboard::new(cfg.sack_max_ranges),
            segmap: SegMap::new(cfg.max_inflight_segments),
            // Data beyond the receive window is trimmed: no use holding more.
            ooo: OooBuffer::new(cfg.ooo_max_bytes.min(rcv_wnd as usize), cfg.ooo_max_ranges),
            last_send: now,
            probe_pending: false,
            persist_backoff: 0,
            persist_force: false,
            keepalive_sent: 0,
            rst_pending: None,
            timers: TimerTable::default(),
            events: [None; EVENT_QUEUE_LEN],
            ev_head: 0,
            ev_len: 0,
            counters: TcpCounters::default(),
            #[cfg(test)]
            no_prediction: false,
        }
    }

    /// Active open: a connection in SYN_SENT whose SYN goes out on the next
    /// `poll_transmit`. `isn` comes from an [`crate::IsnGenerator`].
    pub fn connect(cfg: TcpConfig, tuple: FourTuple, isn: SeqNumber, now: Instant) -> TcpConn {
        let mut c = TcpConn::new(cfg, tuple, isn, TcpState::SynSent, now);
        c.arm_rto(now);
        c
    }

    /// Passive open from a listener: `syn` is a segment for `tuple` with SYN set and
    /// neither ACK nor RST. Returns a connection in SYN_RECEIVED whose SYN-ACK goes out on
    /// the next `poll_transmit`, or `None` if `syn` is not such a segment.
    pub fn accept(
        cfg: TcpConfig,
        tuple: FourTuple,
        syn: &TcpSegment<'_>,
        isn: SeqNumber,
        now: Instant,
    ) -> Option<TcpConn> {
        if !syn.flags.syn || syn.flags.ack || syn.flags.rst {
            return None;
        }
        let mut c = TcpConn::new(cfg, tuple, isn, TcpState::SynReceived, now);
        c.take_syn_options(syn);
        c.snd_wnd = u64::from(syn.window);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq;
        c.snd_wl2 = isn;
        c.arm_rto(now);
        Some(c)
    }

    /// Records the peer's SYN: IRS and negotiated options.
    pub(crate) fn take_syn_options(&mut self, syn: &TcpSegment<'_>) {
        self.irs = syn.seq;
        self.rcv_nxt = 0;
        self.peer_mss = syn.options.mss.unwrap_or(DEFAULT_PEER_MSS);
        if let Some(ws) = syn.options.wscale {
            self.snd_wscale = ws.min(14);
            self.rcv_wscale = self.cfg.wscale;
            self.ws_ok = true;
        } else {
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
            self.ws_ok = false;
            self.rcv_wnd = self.rcv_wnd.min(65_535);
            self.ooo.limit_bytes(self.rcv_wnd as usize);
        }
        self.sack_ok = self.cfg.sack && syn.options.sack_permitted;
        self.ts_ok = self.cfg.timestamps && syn.options.timestamp.is_some();
        if let Some((tsval, _)) = syn.options.timestamp {
            self.ts_recent = tsval;
        }
        self.last_ack_sent = syn.seq + 1;
    }

    /// Graceful close: FIN after every queued byte. In SYN_SENT the attempt is dropped.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            TcpState::SynSent => self.enter_closed(TcpEvent::Closed),
            TcpState::SynReceived => self.fin_queued = true,
            TcpState::Established => {
                self.fin_queued = true;
                self.fin_pending = true;
                self.state = TcpState::FinWait1;
            }
            TcpState::CloseWait => {
                self.fin_queued = true;
                self.fin_pending = true;
                self.state = TcpState::LastAck;
            }
            _ => {}
        }
        let _ = now;
    }

    /// Abortive close: an RST goes out (once the handshake began) and the connection is
    /// closed at once (event [`TcpEvent::Closed`]).
    pub fn abort(&mut self, now: Instant) {
        let _ = now;
        match self.state {
            TcpState::Closed => return,
            TcpState::SynSent | TcpState::TimeWait => {}
            _ => self.rst_pending = Some(self.seq_of(self.snd_nxt)),
        }
        self.enter_closed(TcpEvent::Closed);
    }

    /// The current state.
    pub fn state(&self) -> TcpState {
        self.state
    }

    /// Our initial sequence number (sequence of stream offset 0 is `iss + 1`).
    pub fn iss(&self) -> SeqNumber {
        self.iss
    }

    /// The peer's initial sequence number (valid once its SYN arrived).
    pub fn irs(&self) -> SeqNumber {
        self.irs
    }

    /// The connection's 4-tuple.
    pub fn tuple(&self) -> &FourTuple {
        &self.tuple
    }

    /// Our FIN is out and every byte before it is acknowledged (the FIN itself may not
    /// be yet): what remains of the close needs none of the application's data.
    pub fn fin_sent_and_data_acked(&self) -> bool {
        matches!(self.fin_off, Some(off) if self.snd_una >= off)
    }

    /// Stream offset of `snd.una`: every byte below it is acknowledged.
    pub fn acked_offset(&self) -> u64 {
        self.snd_una
    }

    /// Stream offset of `rcv.nxt`: every byte below it was delivered.
    pub fn received_offset(&self) -> u64 {
        self.rcv_nxt
    }

    /// True while bytes beyond `rcv.nxt` are held out of order (waiting for the gap).
    pub fn holds_out_of_order(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Largest payload per segment: the smallest MSS of the two sides and the path, less
    /// the timestamp option when in use.
    pub fn eff_mss(&self) -> usize {
        let mss = usize::from(self.peer_mss.min(self.cfg.mss_bytes).min(self.path_mss));
        let opt = if self.ts_ok { TS_OPTION_LEN } else { 0 };
        mss.saturating_sub(opt).max(MIN_EFF_MSS)
    }

    /// Bytes that could be sent now: the smaller of the peer's window and the congestion
    /// window, less what is in flight.
    #[inline]
    pub fn send_window_room(&self) -> usize {
        if !self.state.is_synchronized() {
            return 0;
        }
        let wnd_room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
        let cwnd_room = self.cc.cwnd().saturating_sub(self.pipe());
        usize::try_from(wnd_room.min(cwnd_room)).unwrap_or(usize::MAX)
    }

    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cc.cwnd()
    }

    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// Smoothed RTT, once sampled.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// Per-connection counters.
    pub fn counters(&self) -> &TcpCounters {
        &self.counters
    }

    /// The earliest timer deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<TcpEvent> {
        if self.ev_len == 0 {
            return None;
        }
        let ev = self.events[self.ev_head].take();
        self.ev_head = (self.ev_head + 1) % EVENT_QUEUE_LEN;
        self.ev_len -= 1;
        ev
    }

    pub(crate) fn push_event(&mut self, ev: TcpEvent) {
        if self.ev_len == EVENT_QUEUE_LEN {
            // Full: the caller has not drained events; keep the oldest (the terminal
            // event is never lost because each connection emits at most 3 events).
            return;
        }
        let idx = (self.ev_head + self.ev_len) % EVENT_QUEUE_LEN;
        self.events[idx] = Some(ev);
        self.ev_len += 1;
    }

    /// Sequence number of send offset `off`.
    pub(crate) fn seq_of(&self, off: u64) -> SeqNumber {
        self.iss + 1 + off as u32
    }

    /// Sequence number of receive offset `off`.
    pub(crate) fn rcv_seq_of(&self, off: u64) -> SeqNumber {
        self.irs + 1 + off as u32
    }

    /// `rcv.nxt` as a sequence number (counting a received FIN).
    pub(crate) fn rcv_nxt_seq(&self) -> SeqNumber {
        self.rcv_seq_of(self.rcv_nxt) + u32::from(self.fin_received)
    }

    /// `snd.una` as a sequence number (the ISS while the SYN is unacknowledged).
    pub(crate) fn snd_una_seq(&self) -> SeqNumber {
        if self.state.is_synchronized() {
            self.seq_of(self.snd_una)
        } else {
            self.iss
        }
    }

    /// One past the highest sequence number sent (counting SYN and FIN).
    pub(crate) fn snd_max_seq(&self) -> SeqNumber {
        match self.fin_off {
            Some(f) => self.seq_of(f) + 1,
            None => self.seq_of(self.snd_max),
        }
    }

    /// Data in flight, RFC 6675 style: outstanding minus SACKed minus lost-not-resent.
    #[inline]
    pub(crate) fn pipe(&self) -> u64 {
        let out = self.snd_nxt.saturating_sub(self.snd_una);
        if !self.in_recovery {
            return out.saturating_sub(self.scoreboard.sacked_bytes());
        }
        if self.sack_ok {
            let lost = self.scoreboard.holes_between(
                self.high_rxt.max(self.snd_una),
                self.lost_end.min(self.snd_max),
            );
            out.saturating_sub(self.scoreboard.sacked_bytes())
                .saturating_sub(lost)
        } else {
            let mss = self.eff_mss() as u64;
            out.saturating_sub(u64::from(self.dupacks).saturating_mul(mss))
        }
    }

    /// Whether anything we sent (SYN, data, FIN) awaits acknowledgment.
    pub(crate) fn has_outstanding(&self) -> bool {
        !self.state.is_synchronized() && self.state != TcpState::Closed
            || self.snd_max > self.snd_una
            || (self.fin_off.is_some() && !self.fin_acked)
    }

    pub(crate) fn arm_rto(&mut self, now: Instant) {
        let rto = self.rtt.rto();
        self.timers.set(Timer::Rto, now + rto);
    }

    /// Moves to CLOSED with the given terminal event; all timers stop.
    pub(crate) fn enter_closed(&mut self, ev: TcpEvent) {
        if self.state == TcpState::Closed {
            return;
        }
        self.state = TcpState::Closed;
        self.timers.stop_all();
        self.release_all();
        self.ack_pending = false;
        self.probe_pending = false;
        self.syn_pending = false;
        self.fin_pending = false;
        self.push_event(ev);
    }

    /// Moves to TIME_WAIT for 2 * MSL.
    pub(crate) fn enter_time_wait(&mut self, now: Instant) {
        self.state = TcpState::TimeWait;
        self.timers.stop_all();
        // Both FINs are in: nothing more to receive, everything we sent is acknowledged.
        self.release_all();
        let msl = Duration::from_millis(self.cfg.msl_ms);
        self.timers.set(Timer::TimeWait, now + msl + msl);
    }

    /// Our timestamp clock value. The default tick (1 us) skips the division: every
    /// segment sent asks, and a 64-bit divide by a run-time value is the slowest
    /// instruction on that path.
    pub(crate) fn ts_now(&self, now: Instant) -> u32 {
        let us = now.as_micros();
        let ticks = match self.cfg.ts_tick_us {
            1 => us,
            tick => us / tick,
        };
        (ticks as u32).wrapping_add(self.iss.0)
    }
}
