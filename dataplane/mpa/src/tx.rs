//! The transmit side: our Request/Reply frame followed by the FPDU ring, seen by TCP as
//! records (`TxSource` semantics of ENGINE.md seam 1).
//!
//! MPA keeps no copy of payload: an FPDU is a descriptor `D` plus its ULPDU length; its
//! bytes are produced by [`UlpduSource::fill_ulpdu`] each time TCP asks (first
//! transmission and retransmissions). When TCP asks for a whole FPDU, it is written
//! straight into TCP's buffer (markers are opened up in place); when TCP asks for part
//! of one (the MSS shrank and TCP split it), the FPDU is rendered in a scratch buffer and
//! the part is copied: the engine's shared one ([`crate::MpaPool`]), or one the connection
//! allocates the first time it needs it when no pool is used.
//!
//! Memory: the ring starts without storage. With a pool it is lent by the pool while
//! FPDUs are queued or unacknowledged and given back when the last one is released; without
//! one it grows on demand up to `tx_queue_len` entries. Our Request/Reply frame is freed
//! once TCP has it acknowledged.

use std::cell::Cell;
use std::collections::VecDeque;

use iwarp_wire::marker::{MarkerLayout, MARKER_INTERVAL, MARKER_LEN};
use iwarp_wire::mpa::{
    crc32c, crc32c_append, crc_to_wire, fpdu_len, zero_pad, Fpdu, CRC_LEN, FRAME_MAX_LEN,
    ULPDU_LENGTH_LEN,
};

/// Produces the bytes of a queued ULPDU (DDP/RDMAP header + payload), reading payload
/// from registered memory. Implemented by the RDMA layer (ENGINE.md seam 2).
pub trait UlpduSource<D> {
    /// Writes the ULPDU of `desc`; `out.len()` is the `ulpdu_len` it was pushed with.
    fn fill_ulpdu(&mut self, desc: &D, out: &mut [u8]);

    /// As [`UlpduSource::fill_ulpdu`], and returns the CRC32c of `out` continued from
    /// `crc` when the source computes it while writing (one pass over the payload instead
    /// of a copy and a CRC); `None` leaves the CRC to the caller, as this default does.
    fn fill_ulpdu_crc32c(&mut self, desc: &D, out: &mut [u8], crc: u32) -> Option<u32> {
        let _ = crc;
        self.fill_ulpdu(desc, out);
        None
    }
}

/// Why `push_ulpdu` refused a ULPDU; the descriptor is handed back.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<D> {
    /// The FPDU ring is full (capacity `MpaConfig::tx_queue_len`).
    Full(D),
    /// ULPDU longer than `MpaConfig::tx_ulpdu_max_bytes` (or 65535).
    TooLong(D),
    /// Not in FPDU mode.
    NotEstablished(D),
}

impl<D> PushError<D> {
    /// The descriptor that was not queued.
    pub fn into_desc(self) -> D {
        match self {
            PushError::Full(d) | PushError::TooLong(d) | PushError::NotEstablished(d) => d,
        }
    }
}

/// One queued FPDU.
#[derive(Debug)]
pub(crate) struct Entry<D> {
    desc: D,
    /// Stream offset of its first octet (a leading marker included).
    start: u64,
    /// Octets on the wire, markers included.
    wire_len: u32,
    ulpdu_len: u16,
}

impl<D> Entry<D> {
    fn end(&self) -> u64 {
        self.start + self.wire_len as u64
    }
}

/// Our transmit stream.
pub(crate) struct TxQueue<D> {
    /// Our Request/Reply frame until TCP has it acknowledged (then empty).
    frame: Vec<u8>,
    frame_len: usize,
    ring: VecDeque<Entry<D>>,
    /// `ring` is lent by a pool (and goes back when empty).
    ring_pooled: bool,
    /// FPDUs released (popped from the ring's front) so far: ring position `i` is FPDU
    /// number `released + i`.
    released: u64,
    /// Number of the FPDU the last lookup found: TCP almost always asks for that one or
    /// the next, so [`TxQueue::find`] tries them before searching.
    hint: Cell<u64>,
    cap: usize,
    end: u64,
    fpdu_mode: bool,
    crc: bool,
    markers: Option<MarkerLayout>,
    ulpdu_max: usize,
    /// The connection's own scratch buffer, allocated the first time an FPDU is split
    /// without a shared one (see [`TxQueue::fill`]).
    scratch: Vec<u8>,
    /// FPDUs are held back (responder before its first received FPDU).
    gated: bool,
}

/// Largest wire length of an FPDU of `content` octets with markers.
pub(crate) fn wire_bound(content: usize, markers: bool) -> usize {
    if markers {
        content + MARKER_LEN * (content / (MARKER_INTERVAL as usize - MARKER_LEN) + 2)
    } else {
        content
    }
}

impl<D> TxQueue<D> {
    pub(crate) fn new(cap: usize, ulpdu_max: usize) -> TxQueue<D> {
        TxQueue {
            frame: Vec::new(),
            frame_len: 0,
            ring: VecDeque::new(),
            ring_pooled: false,
            released: 0,
            hint: Cell::new(0),
            cap,
            end: 0,
            fpdu_mode: false,
            crc: false,
            markers: None,
            ulpdu_max,
            scratch: Vec::new(),
            gated: false,
        }
    }

    /// Queues our Request/Reply frame: the first record of the stream.
    pub(crate) fn set_frame(&mut self, frame: Vec<u8>) {
        if self.frame_len != 0 || frame.len() > FRAME_MAX_LEN || self.end != 0 {
            return;
        }
        self.frame_len = frame.len();
        self.end = frame.len() as u64;
        self.frame = frame;
    }

    /// Starts FPDU mode right after the frame.
    pub(crate) fn enter_fpdu_mode(&mut self, crc: bool, markers: bool, gated: bool) {
        if self.fpdu_mode {
            return;
        }
        self.fpdu_mode = true;
        self.crc = crc;
        self.gated = gated;
        self.markers = markers.then(|| MarkerLayout::new(self.frame_len as u64));
    }

    /// Heap bytes held: the frame until acknowledged, the ring (own or lent) and the
    /// connection's own scratch buffer.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.frame.capacity()
            + self.ring.capacity() * core::mem::size_of::<Entry<D>>()
            + self.scratch.capacity()
    }

    /// True if the connection holds ring storage (its own or lent), full or not.
    pub(crate) fn holds_ring(&self) -> bool {
        self.ring.capacity() > 0
    }

    /// True if the ring has storage for at least one more FPDU without growing.
    pub(crate) fn has_ring(&self) -> bool {
        self.ring.capacity() > self.ring.len()
    }

    /// Makes sure the ring has storage, borrowing it from `pool` if it has none. False
    /// if the pool is exhausted (nothing can be queued until a ring comes back).
    pub(crate) fn take_ring(&mut self, pool: &mut crate::MpaPool<D>) -> bool {
        if self.ring.capacity() > 0 {
            return true;
        }
        match pool.take_ring() {
            Some(r) => {
                self.ring = r;
                self.ring_pooled = true;
                true
            }
            None => false,
        }
    }

    /// Gives a lent ring back to `pool` if it is empty (or unconditionally with `all`,
    /// the connection is going away). True if a ring went back.
    pub(crate) fn give_ring(&mut self, pool: &mut crate::MpaPool<D>, all: bool) -> bool {
        if !self.ring_pooled || !(all || self.ring.is_empty()) {
            return false;
        }
        self.released += self.ring.len() as u64;
        self.ring_pooled = false;
        pool.put_ring(core::mem::take(&mut self.ring));
        true
    }

    /// Lets held-back FPDUs go.
    pub(crate) fn open_gate(&mut self) {
        self.gated = false;
    }

    pub(crate) fn fpdu_mode(&self) -> bool {
        self.fpdu_mode
    }

    pub(crate) fn room(&self) -> usize {
        if self.fpdu_mode {
            self.cap - self.ring.len()
        } else {
            0
        }
    }

    pub(crate) fn queued(&self) -> usize {
        self.ring.len()
    }

    /// MULPDU for `emss` (RFC 5044 section 6.1): one FPDU fits one segment even with the
    /// most markers that can fall inside it.
    pub(crate) fn max_ulpdu_len(&self, emss: usize) -> usize {
        let overhead = if self.markers.is_some() {
            ULPDU_LENGTH_LEN + CRC_LEN + MARKER_LEN * MarkerLayout::max_markers_in(emss) + emss % 4
        } else {
            ULPDU_LENGTH_LEN + CRC_LEN + emss % 4
        };
        emss.saturating_sub(overhead).min(self.ulpdu_max)
    }

    #[inline]
    pub(crate) fn push(&mut self, desc: D, ulpdu_len: usize) -> Result<(), PushError<D>> {
        if !self.fpdu_mode {
            return Err(PushError::NotEstablished(desc));
        }
        if ulpdu_len > self.ulpdu_max {
            return Err(PushError::TooLong(desc));
        }
        if self.ring.len() >= self.cap {
            return Err(PushError::Full(desc));
        }
        if self.ring_pooled && self.ring.len() == self.ring.capacity() {
            // A lent ring never grows (it holds `cap` entries already).
            return Err(PushError::Full(desc));
        }
        let content = fpdu_len(ulpdu_len);
        let wire = match &self.markers {
            Some(l) => l.record_wire_len(self.end, content),
            None => content,
        };
        self.ring.push_back(Entry {
            desc,
            start: self.end,
            wire_len: wire as u32,
            ulpdu_len: ulpdu_len as u16,
        });
        self.end += wire as u64;
        Ok(())
    }

    /// Calls `f` for each FPDU whose last octet is below `acked_offset`, in order. Frees
    /// our Request/Reply frame once it is acknowledged.
    pub(crate) fn released(&mut self, acked_offset: u64, mut f: impl FnMut(D)) {
        if !self.frame.is_empty() && acked_offset >= self.frame_len as u64 && self.fpdu_mode {
            self.frame = Vec::new();
        }
        while self.ring.front().is_some_and(|e| e.end() <= acked_offset) {
            if let Some(e) = self.ring.pop_front() {
                self.released += 1;
                f(e.desc);
            }
        }
    }

    /// Stream offset one past the last octet TCP may send.
    pub(crate) fn end_offset(&self) -> u64 {
        if self.gated {
            self.frame_len as u64
        } else {
            self.end
        }
    }

    /// Stream offset one past the last octet queued, held-back FPDUs included.
    pub(crate) fn queued_end(&self) -> u64 {
        self.end
    }

    /// Index of the FPDU holding `offset` (the ring's length if none does): the FPDU of
    /// the previous lookup or its successor when one of them holds it (sequential
    /// transmission), a binary search otherwise (retransmissions).
    ///
    /// The sequential case is inlined into its two callers (each segment asks twice).
    #[inline(always)]
    fn find(&self, offset: u64) -> usize {
        let hint = self.hint.get().wrapping_sub(self.released) as usize;
        for i in [hint, hint.wrapping_add(1)] {
            if let Some(e) = self.ring.get(i) {
                if e.start <= offset && offset < e.end() {
                    self.hint.set(self.released + i as u64);
                    return i;
                }
            }
        }
        self.search(offset)
    }

    /// [`TxQueue::find`] by binary search.
    fn search(&self, offset: u64) -> usize {
        let i = self.ring.partition_point(|e| e.end() <= offset);
        self.hint.set(self.released + i as u64);
        i
    }

    /// See `TxSource::seg_len`.
    pub(crate) fn seg_len(&self, offset: u64, max: usize) -> usize {
        let limit = self.end_offset();
        if offset >= limit || max == 0 {
            return 0;
        }
        let frame_end = self.frame_len as u64;
        let (first_end, mut idx) = if offset < frame_end {
            (frame_end, 0)
        } else {
            let i = self.find(offset);
            match self.ring.get(i) {
                Some(e) => (e.end(), i + 1),
                None => return 0,
            }
        };
        let first = (first_end.min(limit) - offset) as usize;
        if first >= max {
            return max;
        }
        let mut n = first;
        while let Some(e) = self.ring.get(idx) {
            let w = e.wire_len as usize;
            if e.end() > limit || n + w > max {
                break;
            }
            n += w;
            idx += 1;
        }
        n
    }

    /// See `TxSource::fill`: writes `buf.len()` octets from `offset`. Part of an FPDU is
    /// rendered in `shared` (the engine's scratch buffer) if given, else in the
    /// connection's own, allocated the first time.
    pub(crate) fn fill<S: crate::UlpduSource<D>>(
        &mut self,
        offset: u64,
        buf: &mut [u8],
        src: &mut S,
        shared: Option<&mut Vec<u8>>,
    ) {
        let end = offset + buf.len() as u64;
        let mut pos = offset;
        let frame_end = self.frame_len as u64;
        if pos < frame_end {
            let n = (frame_end.min(end) - pos) as usize;
            let out = &mut buf[..n];
            match self.frame.get(pos as usize..pos as usize + n) {
                Some(f) => out.copy_from_slice(f),
                // Already acknowledged and freed: a caller bug; zeros, never panic.
                None => out.fill(0),
            }
            pos += n as u64;
        }
        let mut idx = self.find(pos);
        let scratch = match shared {
            Some(s) => s,
            None => &mut self.scratch,
        };
        while pos < end {
            let Some(e) = self.ring.get(idx) else {
                // Beyond what was queued: a caller bug; answer zeros, never panic.
                buf[(pos - offset) as usize..].fill(0);
                return;
            };
            let (rs, re) = (e.start, e.end());
            if pos < rs {
                // Octets of FPDUs already released: a caller bug; zeros, never panic.
                let z = end.min(rs);
                buf[(pos - offset) as usize..(z - offset) as usize].fill(0);
                pos = z;
                continue;
            }
            let b = end.min(re);
            let out = &mut buf[(pos - offset) as usize..(b - offset) as usize];
            if pos == rs && b == re {
                render(e, out, src, self.crc, self.markers.as_ref());
            } else {
                let wl = e.wire_len as usize;
                if scratch.len() < wl {
                    // First split of this connection (own buffer) or a shared buffer
                    // smaller than configured: sized once for the largest FPDU.
                    let most = wire_bound(fpdu_len(self.ulpdu_max), self.markers.is_some());
                    scratch.resize(most.max(wl), 0);
                }
                let scratch = &mut scratch[..wl];
                render(e, scratch, src, self.crc, self.markers.as_ref());
                let from = (pos - rs) as usize;
                out.copy_from_slice(&scratch[from..from + out.len()]);
            }
            pos = b;
            idx += 1;
        }
    }
}

/// Shortest ULPDU whose CRC is computed while the source writes it (the payload's copy
/// and CRC fused, then continued over the pad): where `iwarp-crc-copy` starts fusing.
/// Shorter ones are written, then one CRC runs over the whole FPDU: below it the source
/// would copy and then CRC anyway, and one CRC over an 80-octet FPDU costs less than the
/// three or four calls over its pieces (ULPDU_Length, headers, payload, pad), which took
/// 14 % of a 64-byte WRITE's time on both engines (docs/BENCHMARKS.md).
const FUSED_CRC_MIN_ULPDU: usize = iwarp_crc_copy::WIDE_MIN_LEN;

/// Writes the wire image of FPDU `e` into `out` (exactly its wire length).
fn render<D, S: crate::UlpduSource<D>>(
    e: &Entry<D>,
    out: &mut [u8],
    src: &mut S,
    crc: bool,
    markers: Option<&MarkerLayout>,
) {
    let ulen = e.ulpdu_len as usize;
    let content = fpdu_len(ulen);
    let wl = out.len();
    let off = wl - content;
    let c = &mut out[off..];
    c[..ULPDU_LENGTH_LEN].copy_from_slice(&e.ulpdu_len.to_be_bytes());
    if crc && markers.is_none() && ulen >= FUSED_CRC_MIN_ULPDU {
        // The CRC runs along: ULPDU_Length, the ULPDU as the source writes it (its
        // payload CRC'd while copied, when it can), then the pad.
        let head = crc32c(&c[..ULPDU_LENGTH_LEN]);
        let (fpdu, crc_field) = c.split_at_mut(content - CRC_LEN);
        let (ulpdu, pad) = fpdu[ULPDU_LENGTH_LEN..].split_at_mut(ulen);
        let run = src.fill_ulpdu_crc32c(&e.desc, ulpdu, head);
        zero_pad(pad);
        let v = match run {
            Some(v) => crc32c_append(v, pad),
            None => crc32c(fpdu),
        };
        crc_field.copy_from_slice(&crc_to_wire(v));
        return;
    }
    src.fill_ulpdu(&e.desc, &mut c[ULPDU_LENGTH_LEN..ULPDU_LENGTH_LEN + ulen]);
    match markers {
        None => Fpdu::new_unchecked(out).finish(crc),
        Some(l) => {
            // Pad and CRC placeholder are zero before spreading.
            out[off + ULPDU_LENGTH_LEN + ulen..].fill(0);
            let h = l.spread_in_place(e.start, out, content);
            let v = if crc {
                crc32c(&out[h..wl - CRC_LEN])
            } else {
                0
            };
            out[wl - CRC_LEN..].copy_from_slice(&crc_to_wire(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue in FPDU mode after a 10-octet frame, holding FPDUs of ULPDU lengths `lens`.
    fn queue(lens: &[usize]) -> TxQueue<u32> {
        let mut q = TxQueue::new(64, 1024);
        q.set_frame(vec![0xaa; 10]);
        q.enter_fpdu_mode(true, false, false);
        for (i, &l) in lens.iter().enumerate() {
            q.push(i as u32, l).unwrap();
        }
        q
    }

    /// ULPDU `d` is `d` bytes of a pattern; with `fused`, the source returns the CRC it
    /// computed while writing (as the RDMA layer does), else leaves it to `render`.
    struct Pattern {
        fused: bool,
    }

    impl crate::UlpduSource<u32> for Pattern {
        fn fill_ulpdu(&mut self, d: &u32, out: &mut [u8]) {
            for (i, b) in out.iter_mut().enumerate() {
                *b = (i as u32 * 7 + d) as u8;
            }
        }

        fn fill_ulpdu_crc32c(&mut self, d: &u32, out: &mut [u8], crc: u32) -> Option<u32> {
            self.fill_ulpdu(d, out);
            self.fused.then(|| crc32c_append(crc, out))
        }
    }

    #[test]
    fn a_crc_from_the_source_renders_the_same_fpdus() {
        let lens = [
            1usize, 2, 3, 4, 5, 6, 7, 8, 100, 255, 256, 257, 1001, 1021, 1024,
        ];
        let mut q = queue(&lens);
        let end = q.queued_end();
        let mut plain = vec![0u8; end as usize];
        let mut fused = vec![0u8; end as usize];
        q.fill(0, &mut plain, &mut Pattern { fused: false }, None);
        q.fill(0, &mut fused, &mut Pattern { fused: true }, None);
        assert_eq!(plain, fused);
        // Every FPDU after the 10-octet frame carries a CRC that verifies.
        let mut at = 10;
        for &l in &lens {
            let n = fpdu_len(l);
            let f = Fpdu::new_unchecked(&fused[at..at + n]);
            assert!(f.verify_crc(), "FPDU of ULPDU length {l}");
            at += n;
        }
        // And in pieces (TCP asking for parts of FPDUs: rendered in scratch).
        let mut pieces = vec![0u8; end as usize];
        let mut pos = 0u64;
        for step in [7u64, 100, 1, 3000, 13].iter().cycle() {
            if pos >= end {
                break;
            }
            let n = (*step).min(end - pos) as usize;
            q.fill(
                pos,
                &mut pieces[pos as usize..pos as usize + n],
                &mut Pattern { fused: true },
                None,
            );
            pos += n as u64;
        }
        assert_eq!(pieces, plain);
    }

    /// The answer of a plain binary search, for comparison.
    fn search(q: &TxQueue<u32>, offset: u64) -> usize {
        q.ring.partition_point(|e| e.end() <= offset)
    }

    #[test]
    fn find_agrees_with_the_search_in_any_order() {
        let mut q = queue(&[10, 100, 3, 50, 200, 7, 64]);
        let end = q.queued_end();
        // Sequential, backwards (retransmissions), jumps, outside the ring.
        let mut offsets: Vec<u64> = (0..end + 5).collect();
        offsets.extend((0..end + 5).rev());
        offsets.extend([200, 11, 300, 12, 0, end, 150, 149, 151]);
        for &o in &offsets {
            assert_eq!(q.find(o), search(&q, o), "offset {o}");
        }
        // After releases the ring positions shift; the hint must follow.
        let third_end = q.ring[2].end();
        let mut got = Vec::new();
        q.released(third_end, |d| got.push(d));
        assert_eq!(got, [0, 1, 2]);
        for &o in &offsets {
            assert_eq!(q.find(o), search(&q, o), "offset {o} after release");
        }
        q.released(end, |_| {});
        assert!(q.ring.is_empty());
        assert_eq!(q.find(end - 1), 0);
        q.push(9, 20).unwrap();
        assert_eq!(q.find(end), 0);
        let last = end + fpdu_len(20) as u64;
        assert_eq!(q.find(last - 1), 0);
        assert_eq!(q.find(last), 1, "past the last FPDU");
    }
}
