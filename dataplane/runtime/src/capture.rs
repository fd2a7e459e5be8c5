//! Capture: when enabled, every frame a core receives or sends is copied (up to the snap
//! length) with its timestamp into the core's bounded ring of preallocated buffers; a
//! writer thread ([`CaptureWriter`], never a dataplane core) drains every core's ring
//! into one pcap file. A full ring means the frame is not captured (counted by the core).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use iwarp_types::Instant;
use iwarp_wire::pcap::{PcapWriter, TsResolution};

use crate::ring::{FrameBuf, FrameRing};

/// Direction of a captured frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CaptureDir {
    /// Received from the port.
    Rx = 0,
    /// Sent to the port.
    Tx = 1,
}

/// The capture rings of every core, the switch that turns capture on, and what is kept:
/// which ports, how many bytes of each frame.
#[derive(Debug, Clone)]
pub struct Capture {
    enabled: Arc<AtomicBool>,
    filter: Arc<Filter>,
    rings: Vec<Arc<FrameRing>>,
}

/// Which frames a capture keeps; changed only while capture is off.
#[derive(Debug)]
struct Filter {
    /// Bit `i`: port index `i` is captured (ports 64 and above: with bit 63).
    ports: AtomicU64,
    /// Bytes kept of each frame (at most the rings' buffer size).
    snaplen: AtomicUsize,
}

/// One core's end: copies frames into its ring while capture is on.
#[derive(Debug, Clone)]
pub struct CoreCapture {
    enabled: Arc<AtomicBool>,
    filter: Arc<Filter>,
    ring: Arc<FrameRing>,
}

impl Capture {
    /// Rings for `cores` cores of `frames` buffers of `snaplen` bytes each (allocated
    /// now). Capture starts disabled.
    pub fn new(cores: usize, frames: usize, snaplen: usize) -> Capture {
        Capture {
            enabled: Arc::new(AtomicBool::new(false)),
            filter: Arc::new(Filter {
                ports: AtomicU64::new(u64::MAX),
                snaplen: AtomicUsize::new(usize::MAX),
            }),
            rings: (0..cores)
                .map(|_| Arc::new(FrameRing::new(frames, snaplen.max(14))))
                .collect(),
        }
    }

    /// Core `i`'s end (`None` if out of range).
    pub fn core_end(&self, i: usize) -> Option<CoreCapture> {
        self.rings.get(i).map(|ring| CoreCapture {
            enabled: Arc::clone(&self.enabled),
            filter: Arc::clone(&self.filter),
            ring: Arc::clone(ring),
        })
    }

    /// What the next capture keeps: the frames of `ports` (port indices; empty: all) cut
    /// to `snaplen` bytes (`None`: as many as the rings hold). Set it while capture is off.
    pub fn set_filter(&self, ports: &[u16], snaplen: Option<usize>) {
        let mask = if ports.is_empty() {
            u64::MAX
        } else {
            ports.iter().fold(0u64, |m, &p| m | port_bit(p))
        };
        self.filter.ports.store(mask, Ordering::Relaxed);
        self.filter
            .snaplen
            .store(snaplen.unwrap_or(usize::MAX), Ordering::Relaxed);
    }

    /// The most bytes of a frame the rings can keep.
    pub fn buffer_len(&self) -> usize {
        self.rings.first().map_or(0, |r| r.buf_len())
    }

    /// Turns capture on or off (every core sees it at its next frame).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// True while capture is on.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }
}

impl CoreCapture {
    /// True while capture is on (one Relaxed load).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// True if frames of port index `port` are captured (one Relaxed load).
    #[inline]
    pub fn wants(&self, port: u16) -> bool {
        self.filter.ports.load(Ordering::Relaxed) & port_bit(port) != 0
    }

    /// Copies a frame (cut to the snap length) into the ring. False if the ring was full
    /// (not captured).
    #[inline]
    pub fn record(&self, port: u16, dir: CaptureDir, ts: Instant, frame: &[u8]) -> bool {
        let keep = frame.len().min(self.filter.snaplen.load(Ordering::Relaxed));
        self.ring.push_copy(&frame[..keep], port, dir as u8, ts)
    }
}

/// The filter bit of port index `port`.
#[inline]
fn port_bit(port: u16) -> u64 {
    1u64 << port.min(63)
}

/// What a finished capture wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureSummary {
    /// Frames written to the file.
    pub frames: u64,
}

/// The thread that drains the capture rings into a pcap file.
#[derive(Debug)]
pub struct CaptureWriter {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    capture: Capture,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

impl CaptureWriter {
    /// Writes the pcap header to `out`, turns capture on and starts the writer thread.
    /// Frames of one drain round are written in timestamp order (rounds are every
    /// millisecond or so; frames of different cores may interleave across rounds).
    pub fn spawn<W: Write + Send + 'static>(
        capture: &Capture,
        out: W,
        resolution: TsResolution,
    ) -> io::Result<CaptureWriter> {
        let mut pcap = PcapWriter::new(out, resolution)?;
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let rings = capture.rings.clone();
        let (stop2, written2) = (Arc::clone(&stop), Arc::clone(&written));
        let thread = std::thread::Builder::new()
            .name("iwarp-capture".into())
            .spawn(move || {
                let mut batch: Vec<(usize, FrameBuf)> = Vec::new();
                loop {
                    // Read the flag first: after it is set, one more full drain runs.
                    let last = stop2.load(Ordering::Acquire);
                    let n = drain(&rings, &mut batch, &mut pcap);
                    written2.store(pcap.frames(), Ordering::Relaxed);
                    n?;
                    if last {
                        break;
                    }
                    if rings.iter().all(|r| r.pending() == 0) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                pcap.flush()?;
                let frames = pcap.frames();
                pcap.finish()?;
                Ok(frames)
            })?;
        capture.set_enabled(true);
        Ok(CaptureWriter {
            stop,
            written,
            capture: capture.clone(),
            thread: Some(thread),
        })
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Turns capture off, writes what the rings still hold, closes the file.
    pub fn finish(mut self) -> io::Result<CaptureSummary> {
        self.capture.set_enabled(false);
        self.stop.store(true, Ordering::Release);
        let Some(t) = self.thread.take() else {
            return Err(io::Error::other("capture writer already finished"));
        };
        let frames = t
            .join()
            .map_err(|_| io::Error::other("capture writer panicked"))??;
        Ok(CaptureSummary { frames })
    }
}

impl Drop for CaptureWriter {
    fn drop(&mut self) {
        self.capture.set_enabled(false);
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One drain round: every queued frame of every ring, written in timestamp order.
fn drain<W: Write>(
    rings: &[Arc<FrameRing>],
    batch: &mut Vec<(usize, FrameBuf)>,
    pcap: &mut PcapWriter<W>,
) -> io::Result<()> {
    for (i, r) in rings.iter().enumerate() {
        // Bounded by the ring's size: what is queued now.
        for _ in 0..r.capacity() {
            match r.pop() {
                Some(b) => batch.push((i, b)),
                None => break,
            }
        }
    }
    batch.sort_by_key(|(_, b)| b.ts);
    let mut result = Ok(());
    for (i, b) in batch.drain(..) {
        if result.is_ok() {
            // A frame cut to the snap length is recorded with the bytes kept
            // (`PcapWriter` writes orig_len = incl_len).
            result = pcap.write_frame(b.ts, b.bytes());
        }
        if let Some(r) = rings.get(i) {
            r.recycle(b);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_wire::pcap::PcapReader;

    /// A `Write` into shared memory, readable after the writer finished.
    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn frames_of_all_cores_reach_the_file_in_time_order() {
        let cap = Capture::new(2, 4, 64);
        let c0 = cap.core_end(0).unwrap();
        let c1 = cap.core_end(1).unwrap();
        assert!(!c0.enabled());
        let out = Shared::default();
        let w = CaptureWriter::spawn(&cap, out.clone(), TsResolution::Nanos).unwrap();
        assert!(c0.enabled());
        assert!(c1.record(0, CaptureDir::Rx, Instant(20), &[1u8; 60]));
        assert!(c0.record(0, CaptureDir::Tx, Instant(10), &[2u8; 100]));
        let summary = w.finish().unwrap();
        assert_eq!(summary.frames, 2);
        assert!(!cap.enabled());
        let bytes = out.0.lock().unwrap().clone();
        let recs: Vec<_> = PcapReader::new(&bytes)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].ts, Instant(10));
        assert_eq!(recs[0].data.len(), 64, "cut to the snap length");
        assert_eq!(recs[1].data, &[1u8; 60][..]);
    }

    #[test]
    fn the_filter_keeps_ports_and_a_snap_length() {
        let cap = Capture::new(1, 8, 128);
        assert_eq!(cap.buffer_len(), 128);
        let c = cap.core_end(0).unwrap();
        assert!(c.wants(0) && c.wants(1));
        cap.set_filter(&[1], Some(20));
        assert!(!c.wants(0) && c.wants(1) && !c.wants(2));
        let out = Shared::default();
        let w = CaptureWriter::spawn(&cap, out.clone(), TsResolution::Nanos).unwrap();
        assert!(c.record(1, CaptureDir::Rx, Instant(1), &[7u8; 100]));
        assert_eq!(w.finish().unwrap().frames, 1);
        let bytes = out.0.lock().unwrap().clone();
        let recs: Vec<_> = PcapReader::new(&bytes)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(recs[0].data, &[7u8; 20][..], "cut to --snaplen");
        cap.set_filter(&[], None);
        assert!(c.wants(0) && c.wants(5));
    }

    #[test]
    fn full_ring_refuses() {
        let cap = Capture::new(1, 2, 64);
        let c = cap.core_end(0).unwrap();
        assert!(c.record(0, CaptureDir::Rx, Instant(1), b"a"));
        assert!(c.record(0, CaptureDir::Rx, Instant(2), b"b"));
        assert!(!c.record(0, CaptureDir::Rx, Instant(3), b"c"));
        assert!(cap.core_end(1).is_none());
    }
}
