//! The MPA start-up phase (RFC 5044 section 7.1, RFC 6581): the initiator sends the
//! Request and waits for the Reply; the responder waits for the Request, surfaces it and
//! answers with the Reply chosen by the ULP (accept or reject).
//!
//! Negotiation rules:
//! - Revision: the responder answers `min(request revision, our revision)`; RFC 6581 data
//!   is exchanged only when both speak revision 2 and the Request carries the enhanced flag
//!   (siw's convention). A revision 2 initiator accepts a revision 1 Reply (no IRD/ORD, no
//!   peer-to-peer).
//! - CRC: used when either frame has C (RFC 5044 section 7.1). The responder echoes the
//!   initiator's C (siw initiators with `mpa_crc_required` check it). [`CrcPolicy::Forbid`]
//!   refuses a peer's C.
//! - Markers: per direction; the M bit a side sends asks for markers in the stream it
//!   receives. [`MarkerPolicy::Refuse`] refuses a peer's M.
//! - IRD/ORD (RFC 6581): the responder replies with its IRD and `min(its ORD, initiator's
//!   IRD)`; the initiator uses `min(its ORD, responder's IRD)` and fails with
//!   `LLP_INSUFFICIENT_IRD` if the responder's ORD exceeds its IRD.
//! - Peer-to-peer: the initiator offers RTR types (never Send); the responder picks one
//!   it accepts (Write, then Read, then Send) and sets only that one; no common type →
//!   the responder rejects, or the initiator fails with `LLP_NO_MATCHING_RTR`.
//!
//! Malformed frames fail with `LLP_INVALID_REQ_RESP`.

use iwarp_types::{Instant, TermCode};
use iwarp_wire::mpa::{
    EnhancedData, Frame, FrameKind, FrameRepr, RtrSet, RtrType, ENHANCED_LEN, FRAME_HEADER_LEN,
    FRAME_MAX_LEN, IRD_ORD_MASK, PRIVATE_DATA_MAX, REVISION_1, REVISION_2,
};
use iwarp_wire::WireError;

use crate::config::{CrcPolicy, MarkerPolicy, MpaConfig};
use crate::event::{FailReason, Failure, MpaEvent, Negotiated, PrivateData, RequestInfo};

/// Which side of the MPA exchange we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends the Request (the TCP active opener).
    Initiator,
    /// Answers with the Reply.
    Responder,
}

/// Where the start-up phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpaState {
    /// Initiator: Request queued, waiting for the Reply.
    AwaitReply,
    /// Responder: waiting for the Request.
    AwaitRequest,
    /// Responder: Request surfaced, waiting for `accept` or `reject`.
    RequestPending,
    /// Full operation: FPDUs flow.
    Established,
    /// A Reply with R was sent or received: no FPDU mode; the engine closes.
    Rejected,
    /// Failed (see the `Failed` event).
    Failed,
}

/// Errors of the ULP-facing calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpaApiError {
    /// Not allowed in the current state (e.g. `accept` without a pending Request).
    InvalidState,
    /// Private data longer than the configured maximum (512 octets, 508 in revision 2).
    PrivateDataTooLong,
}

impl core::fmt::Display for MpaApiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for MpaApiError {}

/// What the initiator put in its Request.
#[derive(Clone, Copy, Debug)]
struct Sent {
    crc: bool,
    markers: bool,
    enhanced: Option<EnhancedData>,
}

/// The Request as the responder parsed it.
#[derive(Clone, Copy, Debug)]
struct Received {
    info: RequestInfo,
    /// Revision of our Reply.
    reply_revision: u8,
    /// Our Reply carries RFC 6581 data.
    reply_enhanced: bool,
    /// Peer-to-peer agreed (responder).
    p2p: bool,
    /// RTR type chosen (responder).
    rtr: Option<RtrType>,
}

/// What the start-up phase needs and the rest of the connection's life does not: the
/// peer's frame being gathered, our frame being built, the Request awaiting an answer.
/// Boxed, and freed once the exchange is over (an established connection keeps only the
/// [`Negotiated`] parameters).
struct Startup {
    rx_buf: [u8; FRAME_MAX_LEN],
    rx_got: usize,
    tx_frame: [u8; FRAME_MAX_LEN],
    tx_len: usize,
    received: Option<Received>,
}

/// The start-up state machine of one connection.
pub(crate) struct Handshake {
    cfg: MpaConfig,
    role: Role,
    state: MpaState,
    deadline: Option<Instant>,
    /// `None` once the exchange is over ([`Handshake::release_startup`]).
    startup: Option<Box<Startup>>,
    /// The Reply carried C (responder), kept past the start-up buffers.
    reply_crc: bool,
    sent: Sent,
    negotiated: Option<Negotiated>,
    /// After a failure found in a valid Reply, FPDU mode is set up anyway so that the
    /// engine can send the Terminate.
    terminate_possible: bool,
}

fn fail(events: &mut crate::conn::Events, reason: FailReason, term: Option<TermCode>) {
    events.push(MpaEvent::Failed(Failure { reason, term }));
}

impl Handshake {
    /// Initiator: builds the Request.
    pub(crate) fn initiator(
        cfg: &MpaConfig,
        private_data: &[u8],
        now: Instant,
    ) -> Result<Handshake, MpaApiError> {
        let mut h = Handshake::new(cfg, Role::Initiator, MpaState::AwaitReply, now);
        let rev = cfg.revision();
        let enhanced = (rev == REVISION_2).then(|| EnhancedData {
            ird: cfg.ird & IRD_ORD_MASK,
            ord: cfg.ord & IRD_ORD_MASK,
            p2p: cfg.p2p,
            rtr: if cfg.p2p {
                cfg.rtr.without(RtrSet::SEND)
            } else {
                RtrSet::NONE
            },
        });
        let repr = FrameRepr {
            kind: FrameKind::Request,
            markers: cfg.markers == MarkerPolicy::Request,
            crc: cfg.crc == CrcPolicy::Request,
            reject: false,
            revision: rev,
            enhanced,
            private_data,
        };
        h.check_pd(&repr)?;
        h.sent = Sent {
            crc: repr.crc,
            markers: repr.markers,
            enhanced,
        };
        if let Some(mut st) = h.startup.take() {
            h.emit(&mut st, &repr);
            h.startup = Some(st);
        }
        Ok(h)
    }

    /// Responder: waits for the Request.
    pub(crate) fn responder(cfg: &MpaConfig, now: Instant) -> Handshake {
        Handshake::new(cfg, Role::Responder, MpaState::AwaitRequest, now)
    }

    fn new(cfg: &MpaConfig, role: Role, state: MpaState, now: Instant) -> Handshake {
        Handshake {
            cfg: *cfg,
            role,
            state,
            deadline: Some(now + cfg.handshake_timeout),
            startup: Some(Box::new(Startup {
                rx_buf: [0; FRAME_MAX_LEN],
                rx_got: 0,
                tx_frame: [0; FRAME_MAX_LEN],
                tx_len: 0,
                received: None,
            })),
            reply_crc: false,
            sent: Sent {
                crc: false,
                markers: false,
                enhanced: None,
            },
            negotiated: None,
            terminate_possible: false,
        }
    }

    fn check_pd(&self, repr: &FrameRepr<'_>) -> Result<(), MpaApiError> {
        if repr.buffer_len() - FRAME_HEADER_LEN > self.cfg.private_data_max() {
            return Err(MpaApiError::PrivateDataTooLong);
        }
        Ok(())
    }

    fn emit(&mut self, st: &mut Startup, repr: &FrameRepr<'_>) {
        let n = repr.buffer_len();
        repr.emit(&mut Frame::new_unchecked(&mut st.tx_frame[..n]));
        st.tx_len = n;
        self.reply_crc = st.tx_frame[16] & iwarp_wire::mpa::FLAG_CRC != 0;
    }

    /// Frees the start-up buffers once nothing more can be received or built (the
    /// exchange ended: established, rejected, failed) and our frame was taken.
    pub(crate) fn release_startup(&mut self) {
        let over = !matches!(
            self.state,
            MpaState::AwaitReply | MpaState::AwaitRequest | MpaState::RequestPending
        );
        if over && self.startup.as_ref().is_some_and(|s| s.tx_len == 0) {
            self.startup = None;
        }
    }

    /// Heap bytes held (the start-up buffers until the exchange is over).
    pub(crate) fn heap_bytes(&self) -> usize {
        if self.startup.is_some() {
            core::mem::size_of::<Startup>()
        } else {
            0
        }
    }

    pub(crate) fn role(&self) -> Role {
        self.role
    }

    pub(crate) fn state(&self) -> MpaState {
        self.state
    }

    /// Takes our Request/Reply frame (empty until there is one, and once taken).
    pub(crate) fn take_tx_frame(&mut self) -> Vec<u8> {
        match self.startup.as_mut() {
            Some(st) if st.tx_len > 0 => {
                let f = st.tx_frame[..st.tx_len].to_vec();
                st.tx_len = 0;
                f
            }
            _ => Vec::new(),
        }
    }

    pub(crate) fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// FPDU mode must be set up: established, or a failure after a valid Reply.
    pub(crate) fn fpdu_mode(&self) -> bool {
        self.state == MpaState::Established || self.terminate_possible
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Starts the handshake deadline again from `now`, if it is still running.
    pub(crate) fn restart_timer(&mut self, now: Instant) {
        if self.deadline.is_some() {
            self.deadline = Some(now + self.cfg.handshake_timeout);
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut crate::conn::Events) {
        if let Some(d) = self.deadline {
            if now >= d {
                self.deadline = None;
                self.state = MpaState::Failed;
                fail(events, FailReason::Timeout, None);
            }
        }
    }

    /// Length of the peer's frame once its header is in, else `None`.
    fn rx_frame_len(st: &Startup) -> Option<usize> {
        if st.rx_got < FRAME_HEADER_LEN {
            return None;
        }
        let pd = u16::from_be_bytes([st.rx_buf[18], st.rx_buf[19]]) as usize;
        Some(FRAME_HEADER_LEN + pd.min(PRIVATE_DATA_MAX))
    }

    /// Feeds received octets while the peer's frame is incomplete. Returns the number
    /// consumed (never past the end of the frame); the frame is processed when complete.
    pub(crate) fn feed(&mut self, data: &[u8], events: &mut crate::conn::Events) -> usize {
        if !matches!(self.state, MpaState::AwaitReply | MpaState::AwaitRequest) {
            return 0;
        }
        let Some(mut st) = self.startup.take() else {
            return 0;
        };
        let used = self.feed_into(&mut st, data, events);
        if self.startup.is_none() {
            self.startup = Some(st);
        }
        used
    }

    fn feed_into(
        &mut self,
        st: &mut Startup,
        data: &[u8],
        events: &mut crate::conn::Events,
    ) -> usize {
        let mut used = 0;
        if st.rx_got < FRAME_HEADER_LEN {
            let n = (FRAME_HEADER_LEN - st.rx_got).min(data.len());
            st.rx_buf[st.rx_got..st.rx_got + n].copy_from_slice(&data[..n]);
            st.rx_got += n;
            used += n;
            if st.rx_got < FRAME_HEADER_LEN {
                return used;
            }
            if let Err(r) = self.check_header(st) {
                self.state = MpaState::Failed;
                self.deadline = None;
                fail(events, r, Some(TermCode::LLP_INVALID_REQ_RESP));
                return used;
            }
        }
        let total = Self::rx_frame_len(st).unwrap_or(FRAME_HEADER_LEN);
        let n = (total - st.rx_got).min(data.len() - used);
        st.rx_buf[st.rx_got..st.rx_got + n].copy_from_slice(&data[used..used + n]);
        st.rx_got += n;
        used += n;
        if st.rx_got == total {
            self.deadline = None;
            match self.role {
                Role::Initiator => self.on_reply(st, events),
                Role::Responder => self.on_request(st, events),
            }
        }
        used
    }

    /// Checks what the 20-octet header alone can tell: key, revision, PD_Length.
    fn check_header(&self, st: &Startup) -> Result<(), FailReason> {
        let f = Frame::new_unchecked(&st.rx_buf[..FRAME_HEADER_LEN]);
        let want = match self.role {
            Role::Initiator => FrameKind::Reply,
            Role::Responder => FrameKind::Request,
        };
        if f.kind() != Some(want) {
            return Err(FailReason::BadKey);
        }
        if !(REVISION_1..=REVISION_2).contains(&f.revision()) {
            return Err(FailReason::BadRevision);
        }
        if self.role == Role::Initiator && f.revision() > self.cfg.revision() {
            return Err(FailReason::BadRevision);
        }
        if f.pd_len() as usize > PRIVATE_DATA_MAX {
            return Err(FailReason::PrivateDataTooLong);
        }
        Ok(())
    }

    fn parse_rx(st: &Startup) -> Result<FrameRepr<'_>, FailReason> {
        let f = Frame::new_unchecked(&st.rx_buf[..st.rx_got]);
        FrameRepr::parse(&f).map_err(|e| match e {
            WireError::Truncated => FailReason::PrivateDataTooLong,
            WireError::Malformed => FailReason::MissingEnhancedData,
        })
    }

    fn on_reply(&mut self, st: &Startup, events: &mut crate::conn::Events) {
        let repr = match Self::parse_rx(st) {
            Ok(r) => r,
            Err(reason) => {
                self.state = MpaState::Failed;
                fail(events, reason, Some(TermCode::LLP_INVALID_REQ_RESP));
                return;
            }
        };
        let pd = PrivateData::new(repr.private_data).unwrap_or(PrivateData::EMPTY);
        if repr.reject {
            self.state = MpaState::Rejected;
            events.push(MpaEvent::Rejected { private_data: pd });
            return;
        }
        if repr.markers && self.cfg.markers == MarkerPolicy::Refuse {
            self.state = MpaState::Failed;
            fail(events, FailReason::MarkersRefused, None);
            return;
        }
        if repr.crc && self.cfg.crc == CrcPolicy::Forbid {
            self.state = MpaState::Failed;
            fail(events, FailReason::CrcMismatch, None);
            return;
        }
        let mut n = Negotiated {
            revision: repr.revision,
            crc: self.sent.crc || repr.crc,
            markers_tx: repr.markers,
            markers_rx: self.sent.markers,
            ird: self.cfg.ird & IRD_ORD_MASK,
            ord: self.cfg.ord & IRD_ORD_MASK,
            p2p: false,
            send_rtr: None,
            await_rtr: None,
            private_data: pd,
        };
        let mut failure = None;
        if let Some(sent) = self.sent.enhanced {
            match (repr.revision, repr.enhanced) {
                (REVISION_2, Some(rep)) => {
                    n.ord = n.ord.min(rep.ird);
                    if rep.ord > n.ird {
                        failure =
                            Some((FailReason::InsufficientIrd, TermCode::LLP_INSUFFICIENT_IRD));
                    } else if sent.p2p && !sent.rtr.is_empty() {
                        let common = rep.rtr.intersect(sent.rtr);
                        match common.preferred() {
                            Some(t) if rep.p2p => {
                                n.p2p = true;
                                n.send_rtr = Some(t);
                            }
                            _ => {
                                failure =
                                    Some((FailReason::NoMatchingRtr, TermCode::LLP_NO_MATCHING_RTR))
                            }
                        }
                    } else {
                        n.p2p = sent.p2p && rep.p2p;
                    }
                }
                (REVISION_1, _) => {}
                _ => {
                    self.state = MpaState::Failed;
                    fail(
                        events,
                        FailReason::MissingEnhancedData,
                        Some(TermCode::LLP_INVALID_REQ_RESP),
                    );
                    return;
                }
            }
        }
        self.negotiated = Some(n);
        match failure {
            Some((reason, term)) => {
                self.state = MpaState::Failed;
                self.terminate_possible = true;
                fail(events, reason, Some(term));
            }
            None => {
                self.state = MpaState::Established;
                events.push(MpaEvent::Established(n));
            }
        }
    }

    fn on_request(&mut self, st: &mut Startup, events: &mut crate::conn::Events) {
        let repr = match Self::parse_rx(st) {
            Ok(r) => r,
            Err(reason) => {
                self.state = MpaState::Failed;
                fail(events, reason, Some(TermCode::LLP_INVALID_REQ_RESP));
                return;
            }
        };
        let our_rev = self.cfg.revision();
        let reply_revision = repr.revision.min(our_rev);
        let reply_enhanced = repr.enhanced.is_some() && reply_revision == REVISION_2;
        let enh = repr.enhanced.unwrap_or_default();
        let info = RequestInfo {
            private_data: PrivateData::new(repr.private_data).unwrap_or(PrivateData::EMPTY),
            revision: repr.revision,
            ird: enh.ird,
            ord: enh.ord,
            p2p: enh.p2p,
            rtr: enh.rtr,
            crc: repr.crc,
            markers: repr.markers,
        };
        let mut rec = Received {
            info,
            reply_revision,
            reply_enhanced,
            p2p: false,
            rtr: None,
        };
        let refusal = if repr.markers && self.cfg.markers == MarkerPolicy::Refuse {
            Some((FailReason::MarkersRefused, None))
        } else if repr.crc && self.cfg.crc == CrcPolicy::Forbid {
            Some((FailReason::CrcMismatch, None))
        } else if reply_enhanced && enh.p2p && !enh.rtr.is_empty() {
            match enh.rtr.intersect(self.cfg.rtr).preferred() {
                Some(t) => {
                    rec.p2p = true;
                    rec.rtr = Some(t);
                    None
                }
                None => Some((
                    FailReason::NoMatchingRtr,
                    Some(TermCode::LLP_NO_MATCHING_RTR),
                )),
            }
        } else {
            rec.p2p = reply_enhanced && enh.p2p;
            None
        };
        st.received = Some(rec);
        match refusal {
            Some((reason, term)) => {
                self.send_reply(st, true, &[], 0, 0);
                self.state = MpaState::Failed;
                fail(events, reason, term);
            }
            None => {
                self.state = MpaState::RequestPending;
                events.push(MpaEvent::RequestReceived(info));
            }
        }
    }

    /// Builds our Reply. The caller checked the state.
    fn send_reply(
        &mut self,
        st: &mut Startup,
        reject: bool,
        private_data: &[u8],
        ird: u16,
        ord: u16,
    ) {
        let Some(rec) = st.received else { return };
        let enhanced = rec.reply_enhanced.then(|| EnhancedData {
            ird: ird & IRD_ORD_MASK,
            ord: ord & IRD_ORD_MASK,
            p2p: rec.p2p && !reject,
            rtr: match rec.rtr {
                Some(t) if !reject => RtrSet::of(t),
                _ => RtrSet::NONE,
            },
        });
        let crc = (!reject && self.cfg.crc == CrcPolicy::Request) || rec.info.crc;
        let crc = crc && self.cfg.crc != CrcPolicy::Forbid;
        let repr = FrameRepr {
            kind: FrameKind::Reply,
            markers: !reject && self.cfg.markers == MarkerPolicy::Request,
            crc,
            reject,
            revision: rec.reply_revision,
            enhanced,
            private_data,
        };
        self.emit(st, &repr);
    }

    fn reply_pd_room(&self, st: &Startup) -> usize {
        let extra = match st.received {
            Some(r) if r.reply_enhanced => ENHANCED_LEN,
            _ => 0,
        };
        self.cfg.private_data_max().saturating_sub(extra)
    }

    /// Responder: accepts with our private data, IRD and ORD.
    pub(crate) fn accept(
        &mut self,
        private_data: &[u8],
        ird: u16,
        ord: u16,
        events: &mut crate::conn::Events,
    ) -> Result<(), MpaApiError> {
        if self.state != MpaState::RequestPending {
            return Err(MpaApiError::InvalidState);
        }
        let Some(mut st) = self.startup.take() else {
            return Err(MpaApiError::InvalidState);
        };
        let r = self.accept_with(&mut st, private_data, ird, ord, events);
        self.startup = Some(st);
        r
    }

    fn accept_with(
        &mut self,
        st: &mut Startup,
        private_data: &[u8],
        ird: u16,
        ord: u16,
        events: &mut crate::conn::Events,
    ) -> Result<(), MpaApiError> {
        if private_data.len() > self.reply_pd_room(st) {
            return Err(MpaApiError::PrivateDataTooLong);
        }
        let Some(rec) = st.received else {
            return Err(MpaApiError::InvalidState);
        };
        let ird = ird & IRD_ORD_MASK;
        let ord = if rec.reply_enhanced {
            (ord & IRD_ORD_MASK).min(rec.info.ird)
        } else {
            ord
        };
        self.send_reply(st, false, private_data, ird, ord);
        let n = Negotiated {
            revision: rec.reply_revision,
            crc: self.reply_crc,
            markers_tx: rec.info.markers,
            markers_rx: self.cfg.markers == MarkerPolicy::Request,
            ird,
            ord: ord & IRD_ORD_MASK,
            p2p: rec.p2p,
            send_rtr: None,
            await_rtr: rec.rtr,
            private_data: rec.info.private_data,
        };
        self.negotiated = Some(n);
        self.state = MpaState::Established;
        events.push(MpaEvent::Established(n));
        Ok(())
    }

    /// Responder: rejects with our private data.
    pub(crate) fn reject(&mut self, private_data: &[u8]) -> Result<(), MpaApiError> {
        if self.state != MpaState::RequestPending {
            return Err(MpaApiError::InvalidState);
        }
        let Some(mut st) = self.startup.take() else {
            return Err(MpaApiError::InvalidState);
        };
        let room = self.reply_pd_room(&st);
        if private_data.len() <= room {
            self.send_reply(&mut st, true, private_data, 0, 0);
            self.state = MpaState::Rejected;
        }
        self.startup = Some(st);
        if private_data.len() > room {
            return Err(MpaApiError::PrivateDataTooLong);
        }
        Ok(())
    }

    /// Marks a failure found outside the frame logic (unexpected data, FPDU errors).
    pub(crate) fn set_failed(&mut self) {
        self.state = MpaState::Failed;
        self.deadline = None;
    }
}
