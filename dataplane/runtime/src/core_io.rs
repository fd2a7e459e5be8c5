//! The core's frame paths: receive and steer, frames forwarded by other cores,
//! transmit and flush, and the capture copy of each frame.

use iwarp_types::{Instant, Memory};

use crate::capture::{CaptureDir, CoreCapture};
use crate::core::{Core, Port};
use crate::counters::CorePlain;
use crate::forward::ForwardKind;
use crate::io::TxOutcome;
use crate::steer::Route;

impl<M: Memory> Core<M> {
    /// Receives one burst from port `i` and steers each frame.
    pub(crate) fn receive(&mut self, now: Instant, i: usize) -> usize {
        let me = self.cfg.index;
        // The capture filter names ports by index (`capture.ports`).
        let index = u16::try_from(i).unwrap_or(u16::MAX);
        let Some(port) = self.ports.get_mut(i) else {
            return 0;
        };
        let Port {
            id,
            engine,
            io,
            steering,
            counters,
            ..
        } = port;
        let (mem, forward, capture, lc, apps) = (
            &mut self.mem,
            &self.forward,
            &self.capture,
            &mut self.loop_counters,
            &mut self.apps,
        );
        let port_id = *id;
        let mut first = true;
        // One receive pass for the burst: a connection's segments that arrive together
        // are serviced once (engine `Receiver`).
        let mut pass = engine.receiver(now);
        let n = io.rx_burst(self.cfg.rx_burst, &mut |frame: &[u8]| {
            if first {
                // The burst is off the device (FrameIo::rx_burst): every receive posted
                // before any of its frames was sent is rung by now.
                first = false;
                for slot in apps.iter_mut().flatten().filter(|s| s.port == i) {
                    slot.app.before_frames(now, pass.engine(), mem);
                }
            }
            counters.c.frames_rx += 1;
            counters.c.bytes_rx += frame.len() as u64;
            record(capture, lc, index, CaptureDir::Rx, now, frame);
            match steering.route(me, frame) {
                Route::Here => pass.handle_frame(frame, mem),
                Route::Core(owner) => {
                    let ring = forward.out.get(owner).and_then(Option::as_ref);
                    let kind = ForwardKind::Owned as u8;
                    if ring.is_some_and(|r| r.push_copy(frame, port_id, kind, now)) {
                        counters.c.forwarded_out += 1;
                    } else {
                        counters.c.forward_drops += 1;
                    }
                }
                Route::AllCores => {
                    pass.handle_frame(frame, mem);
                    for &c in steering.cores() {
                        if c == me {
                            continue;
                        }
                        let ring = forward.out.get(c).and_then(Option::as_ref);
                        let kind = ForwardKind::ArpCopy as u8;
                        if ring.is_some_and(|r| r.push_copy(frame, port_id, kind, now)) {
                            counters.c.arp_copies += 1;
                        } else {
                            counters.c.forward_drops += 1;
                        }
                    }
                }
            }
        });
        drop(pass);
        n
    }

    /// Handles frames other cores forwarded here.
    pub(crate) fn receive_forwarded(&mut self, now: Instant) -> usize {
        let mut n = 0;
        for ring in &self.forward.inbound {
            // The frames queued now, taken after the apps' `before_frames` (as for a
            // burst off the device): each was queued before the receives were handed over.
            let queued = ring.pending().min(self.cfg.forward_burst);
            if queued == 0 {
                continue;
            }
            for slot in self.apps.iter_mut().flatten() {
                if let Some(p) = self.ports.get_mut(slot.port) {
                    slot.app.before_frames(now, &mut p.engine, &mut self.mem);
                }
            }
            for _ in 0..queued {
                let Some(b) = ring.pop() else {
                    break;
                };
                if let Some(p) = self.ports.iter_mut().find(|p| p.id == b.port) {
                    if b.tag == ForwardKind::ArpCopy as u8 {
                        p.counters.c.arp_copies_in += 1;
                    } else {
                        p.counters.c.forwarded_in += 1;
                    }
                    p.engine.handle_frame(now, b.bytes(), &mut self.mem);
                }
                ring.recycle(b);
                n += 1;
            }
        }
        n
    }

    /// Transmits what port `i`'s engine has, within the per-iteration bound, then flushes.
    pub(crate) fn transmit(&mut self, now: Instant, i: usize) -> usize {
        let index = u16::try_from(i).unwrap_or(u16::MAX);
        let Some(port) = self.ports.get_mut(i) else {
            return 0;
        };
        let Port {
            engine,
            io,
            counters,
            ..
        } = port;
        let (mem, capture, lc) = (&self.mem, &self.capture, &mut self.loop_counters);
        let mut sent = 0;
        let mut refused = false;
        // One transmit pass: a connection keeps its turn for several segments.
        let mut pass = engine.transmitter(now, mem);
        while sent < self.cfg.tx_frames_max {
            let outcome = io.tx_frame(&mut |buf: &mut [u8]| {
                let n = pass.next(buf).unwrap_or(0);
                if n > 0 {
                    record(capture, lc, index, CaptureDir::Tx, now, &buf[..n]);
                }
                n
            });
            match outcome {
                TxOutcome::Queued(n) => {
                    sent += 1;
                    counters.c.frames_tx += 1;
                    counters.c.bytes_tx += n as u64;
                }
                TxOutcome::Empty => break,
                TxOutcome::NoBuffer => {
                    counters.c.tx_backpressure += 1;
                    refused = true;
                    break;
                }
            }
        }
        drop(pass);
        if sent > 0 || refused || counters.c.tx_pending > 0 {
            counters.c.tx_pending = io.tx_flush() as u64;
        }
        sent
    }
}

/// Copies a frame of port index `port` to the capture ring when capture is on and the
/// filter keeps that port.
#[inline]
fn record(
    capture: &Option<CoreCapture>,
    lc: &mut CorePlain,
    port: u16,
    dir: CaptureDir,
    now: Instant,
    frame: &[u8],
) {
    if let Some(c) = capture {
        if c.enabled() && c.wants(port) {
            if c.record(port, dir, now, frame) {
                lc.captured += 1;
            } else {
                lc.capture_drops += 1;
            }
        }
    }
}
