//! Adapters between the layers: the RDMA layer as MPA's ULPDU source (transmit) and sink
//! (receive), and MPA's adapters as TCP's `TxSource` / `RxSink`. Built by the engine for
//! each TCP call; they hold borrows only.

use iwarp_mpa::{MpaRx, MpaTx, RxCrc, UlpduSink, UlpduSource};
use iwarp_rdma::{Rnic, TxUlpdu};
use iwarp_tcp::{RxSink, TxSource};
use iwarp_types::{Memory, QpId, TermCode};

/// Transmit side: MPA asks for the bytes of a queued ULPDU; the QP regenerates them from
/// registered memory (first transmissions and retransmissions alike).
pub struct QpSource<'a> {
    /// The verbs objects.
    pub rnic: &'a mut Rnic,
    /// The connection's QP (`None` during the MPA handshake: nothing is queued then).
    pub qp: Option<QpId>,
    /// Caller memory.
    pub mem: &'a dyn Memory,
}

impl UlpduSource<TxUlpdu> for QpSource<'_> {
    fn fill_ulpdu(&mut self, desc: &TxUlpdu, out: &mut [u8]) {
        match self.qp {
            Some(qp) => self.rnic.fill_ulpdu(qp, desc, self.mem, out),
            // Cannot happen (descriptors are queued only once a QP is associated); keep
            // the bytes defined.
            None => out.fill(0),
        }
    }

    fn fill_ulpdu_crc32c(&mut self, desc: &TxUlpdu, out: &mut [u8], crc: u32) -> Option<u32> {
        let qp = self.qp?;
        Some(self.rnic.fill_ulpdu_crc32c(qp, desc, self.mem, out, crc))
    }
}

/// Receive side: MPA hands over ULPDUs (CRC checked, or pending for the QP to check while
/// it places the payload); the QP validates and places them.
pub struct QpSink<'a> {
    /// The verbs objects.
    pub rnic: &'a mut Rnic,
    /// The connection's QP (`None`: not associated yet; FPDUs are a protocol error).
    pub qp: Option<QpId>,
    /// Caller memory.
    pub mem: &'a mut dyn Memory,
}

impl UlpduSink for QpSink<'_> {
    fn on_ulpdu(&mut self, ulpdu: &[u8]) -> Result<(), TermCode> {
        match self.qp {
            Some(qp) => self.rnic.qp_on_ulpdu(qp, ulpdu, self.mem),
            None => Err(TermCode::RDMAP_CATASTROPHIC_STREAM),
        }
    }

    fn on_fpdu(&mut self, ulpdu: &[u8], crc: &mut RxCrc<'_>) -> Result<(), TermCode> {
        match self.qp {
            // The QP checks the CRC before it acts, or while it places the payload.
            Some(qp) => self.rnic.qp_on_fpdu(qp, ulpdu, crc, self.mem),
            None if !crc.check() => Err(TermCode::LLP_CRC),
            None => Err(TermCode::RDMAP_CATASTROPHIC_STREAM),
        }
    }
}

/// `TxSource` for TCP over MPA's transmit adapter; records the highest stream offset TCP
/// has taken (the engine's view of `snd.max`, used to keep about one window queued).
pub struct TcpTx<'a, S> {
    /// MPA's adapter.
    pub mpa: MpaTx<'a, TxUlpdu, S>,
    /// Highest stream offset filled so far.
    pub sent_max: &'a mut u64,
}

impl<S: UlpduSource<TxUlpdu>> TxSource for TcpTx<'_, S> {
    fn end_offset(&self) -> u64 {
        self.mpa.end_offset()
    }

    fn seg_len(&self, offset: u64, max: usize) -> usize {
        self.mpa.seg_len(offset, max)
    }

    fn fill(&mut self, offset: u64, buf: &mut [u8]) {
        self.mpa.fill(offset, buf);
        let end = offset.saturating_add(buf.len() as u64);
        if end > *self.sent_max {
            *self.sent_max = end;
        }
    }
}

/// `RxSink` for TCP over MPA's receive adapter.
pub struct TcpRx<'a, K>(pub MpaRx<'a, TxUlpdu, K>);

impl<K: UlpduSink> RxSink for TcpRx<'_, K> {
    fn deliver(&mut self, offset: u64, data: &[u8]) -> usize {
        self.0.deliver(offset, data)
    }
}
