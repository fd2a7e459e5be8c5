//! The receive side in FPDU mode: a deframer resumable over arbitrarily chunked input.
//!
//! A ULPDU is handed to [`UlpduSink::on_ulpdu`] only after its FPDU's CRC verified (when
//! CRC is in use). When a whole FPDU lies inside one delivered slice and no marker falls
//! inside it, the CRC is checked over the slice and the ULPDU is handed on as a sub-slice
//! (no copy); with `MpaConfig::place_before_crc` it goes to [`UlpduSink::on_fpdu`] with
//! its CRC still to check ([`RxCrc`]) instead: the sink checks it before it acts on the
//! ULPDU, or while it places the payload (one pass over the payload on receive). Otherwise its octets (markers removed) are gathered in a staging buffer
//! sized for the largest ULPDU we accept (`MpaConfig::rx_ulpdu_max_bytes`), while the CRC
//! runs over the wire octets. The staging buffer is borrowed from the engine's
//! [`crate::MpaPool`] for the time the FPDU is incomplete and given back when it is
//! complete; if the pool is exhausted, the octets from the FPDU's start on are left
//! unconsumed (TCP does not acknowledge them and the peer sends them again). Without a
//! pool the deframer allocates its own buffer the first time it needs one and keeps it.
//!
//! Errors (each counted, then the deframer drops everything that follows):
//! - CRC mismatch → `LLP_CRC` (0x2002);
//! - a marker whose FPDUPTR disagrees with the FPDU start → `LLP_FPDU_START` (0x2003);
//! - ULPDU_Length smaller than the smallest DDP header (14, tagged) → `LLP_FPDU_START`,
//!   what Linux siw sends for a short `mpa_len`;
//! - ULPDU_Length larger than our bound → `DDP_LOCAL_CATASTROPHIC` (0x1000), the code the
//!   verbs specification gives "segment size invalid ... larger than supported";
//! - the sink refused a ULPDU → its code.
//! - an FPDU begun that gets no octet for `MpaConfig::fpdu_stall_timeout` (checked by
//!   the connection's timer, `MpaConn::handle_timeout`) → `LLP_STREAM_LOST` (0x2001).

use iwarp_types::TermCode;
use iwarp_wire::marker::{Marker, MarkerLayout, MARKER_LEN};
use iwarp_wire::mpa::{
    crc32c_append, crc_from_wire, fpdu_len, Fpdu, RxCrc, CRC_LEN, ULPDU_LENGTH_LEN,
};

use crate::event::{FailReason, Failure};

/// Smallest ULPDU: the tagged DDP header (RFC 5041 section 4.2, siw `MIN_DDP_HDR` - 2).
pub const MIN_ULPDU_LEN: usize = 14;

/// Receives complete ULPDUs. Implemented by the RDMA layer.
pub trait UlpduSink {
    /// One CRC-verified ULPDU (DDP header + payload). An error makes MPA fail with that
    /// code.
    fn on_ulpdu(&mut self, ulpdu: &[u8]) -> Result<(), TermCode>;

    /// One ULPDU of an FPDU that came whole, whose CRC (`crc`) may not be checked yet:
    /// the sink calls [`RxCrc::check`] before acting on the ULPDU in any way other than
    /// placing payload into memory the peer may write, which it may do in the pass that
    /// computes the CRC ([`RxCrc::before`]). `Err(TermCode::LLP_CRC)`: the CRC did not
    /// match and the sink did nothing else (no Terminate queued); MPA fails as for any
    /// CRC error. MPA checks whatever is still pending when the sink returns. This
    /// default checks first, then hands the ULPDU to [`UlpduSink::on_ulpdu`].
    fn on_fpdu(&mut self, ulpdu: &[u8], crc: &mut RxCrc<'_>) -> Result<(), TermCode> {
        if !crc.check() {
            return Err(TermCode::LLP_CRC);
        }
        self.on_ulpdu(ulpdu)
    }
}

/// Receive counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCounters {
    /// FPDUs delivered to the sink.
    pub fpdus: u64,
    /// FPDUs handed on without a copy.
    pub fpdus_zero_copy: u64,
    /// CRC errors.
    pub crc_errors: u64,
    /// Marker errors.
    pub marker_errors: u64,
    /// Bad ULPDU_Length values.
    pub length_errors: u64,
}

/// The FPDU deframer of one connection.
pub(crate) struct Deframer {
    crc: bool,
    /// Whole FPDUs go to the sink with their CRC pending (`MpaConfig::place_before_crc`).
    place_before_crc: bool,
    markers: Option<MarkerLayout>,
    ulpdu_max: usize,
    /// Content octets (ULPDU_Length .. CRC, markers removed) of the current FPDU; empty
    /// while no FPDU is being gathered and no own buffer was allocated.
    staging: Vec<u8>,
    /// `staging` is lent by a pool (and goes back when the FPDU is complete).
    staging_pooled: bool,
    /// Content octets received of the current FPDU (0: at an FPDU boundary).
    got: usize,
    /// Content length of the current FPDU once its header is in (0: not yet).
    content_len: usize,
    /// Stream offset of the current FPDU's ULPDU_Length.
    hdr_pos: u64,
    crc_acc: u32,
    marker: [u8; MARKER_LEN],
    marker_got: usize,
    marker_pos: u64,
    failed: bool,
    pub(crate) counters: RxCounters,
}

/// Where staging buffers come from: the engine's pool ([`crate::MpaPool`]).
pub(crate) trait StagingSource {
    /// A buffer of one largest FPDU, or `None` if none is free.
    fn take_staging(&mut self) -> Option<Vec<u8>>;
    /// Gives a buffer back.
    fn put_staging(&mut self, buf: Vec<u8>);
}

impl<D> StagingSource for crate::MpaPool<D> {
    fn take_staging(&mut self) -> Option<Vec<u8>> {
        crate::MpaPool::take_staging(self)
    }

    fn put_staging(&mut self, buf: Vec<u8>) {
        crate::MpaPool::put_staging(self, buf)
    }
}

fn failure(reason: FailReason, term: TermCode) -> Failure {
    Failure {
        reason,
        term: Some(term),
    }
}

impl Deframer {
    /// A deframer whose first FPDU (or first marker) starts at stream offset `base`;
    /// `place_before_crc` (with `crc`) hands whole FPDUs on with their CRC pending.
    pub(crate) fn new(
        crc: bool,
        markers: bool,
        base: u64,
        ulpdu_max: usize,
        place_before_crc: bool,
    ) -> Deframer {
        Deframer {
            crc,
            place_before_crc: crc && place_before_crc,
            markers: markers.then(|| MarkerLayout::new(base)),
            ulpdu_max,
            staging: Vec::new(),
            staging_pooled: false,
            got: 0,
            content_len: 0,
            hdr_pos: 0,
            crc_acc: 0,
            marker: [0; MARKER_LEN],
            marker_got: 0,
            marker_pos: 0,
            failed: false,
            counters: RxCounters::default(),
        }
    }

    fn check_len(&mut self, ulen: usize) -> Result<usize, Failure> {
        if ulen < MIN_ULPDU_LEN {
            self.counters.length_errors += 1;
            return Err(failure(FailReason::SegmentSize, TermCode::LLP_FPDU_START));
        }
        if ulen > self.ulpdu_max {
            self.counters.length_errors += 1;
            return Err(failure(
                FailReason::SegmentSize,
                TermCode::DDP_LOCAL_CATASTROPHIC,
            ));
        }
        Ok(fpdu_len(ulen))
    }

    /// True while an FPDU (or a marker) has begun and is not complete.
    pub(crate) fn partial(&self) -> bool {
        !self.failed && (self.got > 0 || self.marker_got > 0)
    }

    /// Gives up on the stream (the partial FPDU is never completed): everything that
    /// follows is dropped. A lent staging buffer goes back with the connection's storage.
    pub(crate) fn abandon(&mut self) {
        self.failed = true;
    }

    /// Heap bytes held (the staging buffer, own or lent).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.staging.capacity()
    }

    /// Gives a lent staging buffer back (the connection is going away).
    pub(crate) fn give_staging(&mut self, pool: &mut dyn StagingSource) {
        if self.staging_pooled {
            self.staging_pooled = false;
            pool.put_staging(core::mem::take(&mut self.staging));
        }
    }

    /// Processes `data` at stream offset `offset` (contiguous with what came before).
    /// Returns the octets consumed (all of them unless a staging buffer was needed and
    /// `pool` had none: then up to the start of the FPDU that needs it), or the first
    /// failure; after a failure everything is dropped.
    pub(crate) fn deliver<K: UlpduSink>(
        &mut self,
        offset: u64,
        data: &[u8],
        sink: &mut K,
        mut pool: Option<&mut dyn StagingSource>,
    ) -> Result<usize, Failure> {
        if self.failed {
            return Ok(data.len());
        }
        let r = self.run(offset, data, sink, &mut pool);
        if r.is_err() {
            self.failed = true;
            if let Some(p) = pool {
                self.give_staging(p);
            }
        }
        r
    }

    /// Makes sure a staging buffer is held; false if the pool has none.
    fn stage(&mut self, pool: &mut Option<&mut dyn StagingSource>) -> bool {
        let need = fpdu_len(self.ulpdu_max);
        if self.staging.len() >= need {
            return true;
        }
        match pool {
            Some(p) if self.staging.is_empty() => match p.take_staging() {
                Some(buf) => {
                    self.staging = buf;
                    self.staging_pooled = true;
                }
                None => return false,
            },
            _ => {}
        }
        if self.staging.len() < need {
            // Own buffer (no pool), or a lent one smaller than configured.
            self.staging.resize(need, 0);
        }
        true
    }

    fn run<K: UlpduSink>(
        &mut self,
        offset: u64,
        data: &[u8],
        sink: &mut K,
        pool: &mut Option<&mut dyn StagingSource>,
    ) -> Result<usize, Failure> {
        let mut i = 0usize;
        while i < data.len() {
            let pos = offset + i as u64;
            if let Some(l) = self.markers {
                if self.marker_got > 0 || l.is_marker_at(pos) {
                    i += self.take_marker(pos, &data[i..])?;
                    continue;
                }
            }
            if self.got == 0 {
                if let Some(n) = self.try_whole(pos, &data[i..], sink)? {
                    i += n;
                    continue;
                }
                if !self.stage(pool) {
                    // No staging buffer: leave this FPDU for the peer to send again.
                    return Ok(i);
                }
                self.hdr_pos = pos;
                self.crc_acc = 0;
                self.content_len = 0;
            }
            let next_marker = self.markers.map_or(u64::MAX, |l| l.next_at_or_after(pos));
            let need = if self.content_len == 0 {
                ULPDU_LENGTH_LEN - self.got
            } else {
                self.content_len - self.got
            };
            let n = need
                .min(data.len() - i)
                .min((next_marker - pos).min(usize::MAX as u64) as usize);
            let chunk = &data[i..i + n];
            // Octets before the CRC field go into the CRC.
            let crc_end = if self.content_len == 0 {
                ULPDU_LENGTH_LEN
            } else {
                self.content_len - CRC_LEN
            };
            let k = n.min(crc_end.saturating_sub(self.got));
            self.crc_acc = crc32c_append(self.crc_acc, &chunk[..k]);
            self.staging[self.got..self.got + n].copy_from_slice(chunk);
            self.got += n;
            i += n;
            if self.content_len == 0 && self.got == ULPDU_LENGTH_LEN {
                let ulen = u16::from_be_bytes([self.staging[0], self.staging[1]]) as usize;
                self.content_len = self.check_len(ulen)?;
            }
            if self.content_len != 0 && self.got == self.content_len {
                let r = self.complete(sink);
                if let (true, Some(p)) = (self.staging_pooled, pool.as_deref_mut()) {
                    self.staging_pooled = false;
                    p.put_staging(core::mem::take(&mut self.staging));
                }
                r?;
            }
        }
        Ok(data.len())
    }

    /// Collects marker octets at `pos`; checks a complete marker. Returns octets used.
    fn take_marker(&mut self, pos: u64, data: &[u8]) -> Result<usize, Failure> {
        if self.marker_got == 0 {
            self.marker_pos = pos;
        }
        let n = (MARKER_LEN - self.marker_got).min(data.len());
        self.marker[self.marker_got..self.marker_got + n].copy_from_slice(&data[..n]);
        self.marker_got += n;
        if self.got > 0 {
            // Inside an FPDU (before its CRC field): covered by the CRC.
            self.crc_acc = crc32c_append(self.crc_acc, &data[..n]);
        }
        if self.marker_got == MARKER_LEN {
            self.marker_got = 0;
            let ptr = Marker::new_unchecked(&self.marker[..]).fpduptr() as u64;
            let expect = if self.got == 0 {
                0
            } else {
                self.marker_pos - self.hdr_pos
            };
            if ptr != expect {
                self.counters.marker_errors += 1;
                return Err(failure(
                    FailReason::MarkerMismatch,
                    TermCode::LLP_FPDU_START,
                ));
            }
        }
        Ok(n)
    }

    /// Fast path at an FPDU boundary: the whole FPDU is in `data` with no marker inside.
    fn try_whole<K: UlpduSink>(
        &mut self,
        pos: u64,
        data: &[u8],
        sink: &mut K,
    ) -> Result<Option<usize>, Failure> {
        let Some(h) = data.get(..ULPDU_LENGTH_LEN) else {
            return Ok(None);
        };
        let ulen = u16::from_be_bytes([h[0], h[1]]) as usize;
        let flen = self.check_len(ulen)?;
        if data.len() < flen {
            return Ok(None);
        }
        if let Some(l) = self.markers {
            if l.next_at_or_after(pos) < pos + flen as u64 {
                return Ok(None);
            }
        }
        let f = Fpdu::new_unchecked(&data[..flen]);
        let r = if self.place_before_crc {
            // The sink checks the CRC, maybe while it places the payload (`RxCrc`).
            let mut crc = RxCrc::pending(&f);
            let r = sink.on_fpdu(f.ulpdu(), &mut crc);
            match r {
                Ok(()) if !crc.check() => Err(TermCode::LLP_CRC),
                r => r,
            }
        } else if self.crc && !f.verify_crc() {
            Err(TermCode::LLP_CRC)
        } else {
            sink.on_ulpdu(f.ulpdu())
        };
        match r {
            Ok(()) => {}
            Err(TermCode::LLP_CRC) => {
                self.counters.crc_errors += 1;
                return Err(failure(FailReason::Crc, TermCode::LLP_CRC));
            }
            Err(t) => return Err(failure(FailReason::Ulp, t)),
        }
        self.counters.fpdus += 1;
        self.counters.fpdus_zero_copy += 1;
        Ok(Some(flen))
    }

    /// The staged FPDU is complete: check its CRC and hand the ULPDU on.
    fn complete<K: UlpduSink>(&mut self, sink: &mut K) -> Result<(), Failure> {
        let cl = self.content_len;
        self.got = 0;
        self.content_len = 0;
        if self.crc {
            let c = &self.staging[cl - CRC_LEN..cl];
            if crc_from_wire([c[0], c[1], c[2], c[3]]) != self.crc_acc {
                self.counters.crc_errors += 1;
                return Err(failure(FailReason::Crc, TermCode::LLP_CRC));
            }
        }
        let ulen = u16::from_be_bytes([self.staging[0], self.staging[1]]) as usize;
        sink.on_ulpdu(&self.staging[ULPDU_LENGTH_LEN..ULPDU_LENGTH_LEN + ulen])
            .map_err(|t| failure(FailReason::Ulp, t))?;
        self.counters.fpdus += 1;
        Ok(())
    }
}
