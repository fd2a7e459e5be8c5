//! The daemon's capture: the cores' capture rings (always there, sized by
//! `[capture] ring_slots` and the largest frame the ports carry) and at most one writer
//! thread at a time, started from the configuration (`capture.path`) or by an operator
//! (`iwarpctl capture start FILE`, which opens FILE itself and passes the descriptor: the
//! daemon never opens a path an operator names) and stopped by `iwarpctl capture stop`
//! or at shutdown.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use iwarp_control::{CaptureCommand, CaptureSource};
use iwarp_runtime::{Capture, CaptureSummary, CaptureWriter};
use iwarp_wire::pcap::TsResolution;

/// The rings and the writer running now, if any.
#[derive(Clone)]
pub struct DaemonCapture {
    rings: Capture,
    writer: Arc<Mutex<Option<CaptureWriter>>>,
    ports: usize,
}

impl DaemonCapture {
    /// Rings for `cores` cores of `slots` buffers of `buffer_len` bytes; no capture runs.
    pub fn new(cores: usize, slots: usize, buffer_len: usize, ports: usize) -> DaemonCapture {
        DaemonCapture {
            rings: Capture::new(cores, slots, buffer_len),
            writer: Arc::new(Mutex::new(None)),
            ports,
        }
    }

    /// The rings (each core takes its end).
    pub fn rings(&self) -> &Capture {
        &self.rings
    }

    /// Starts writing pcap into `out`: frames of `ports` (indices; empty: all) cut to
    /// `snaplen` bytes (`None`: whole, up to the rings' buffers).
    pub fn start<W: std::io::Write + Send + 'static>(
        &self,
        out: W,
        ports: &[u16],
        snaplen: Option<u32>,
    ) -> Result<String, String> {
        let mut w = self.writer.lock().map_err(|_| "capture state poisoned")?;
        if w.is_some() {
            return Err("a capture is running already (iwarpctl capture stop)".into());
        }
        if let Some(&p) = ports.iter().find(|&&p| usize::from(p) >= self.ports) {
            return Err(format!(
                "port {p}: the daemon has {} port(s) (0..{})",
                self.ports, self.ports
            ));
        }
        if let Some(s) = snaplen {
            if !(64..=65535).contains(&s) {
                return Err(format!("snaplen {s}: must be in 64..=65535"));
            }
        }
        let keep = snaplen.map_or(self.rings.buffer_len(), |s| {
            (s as usize).min(self.rings.buffer_len())
        });
        self.rings.set_filter(ports, Some(keep));
        let writer = CaptureWriter::spawn(&self.rings, out, TsResolution::Nanos)
            .map_err(|e| format!("cannot start the capture writer: {e}"))?;
        *w = Some(writer);
        let which = if ports.is_empty() {
            "every port".to_string()
        } else {
            format!("port {}", ports[0])
        };
        Ok(format!("capturing {which}, {keep} bytes of each frame"))
    }

    /// Starts writing into a file the asker opened.
    fn start_fd(
        &self,
        file: OwnedFd,
        port: Option<u16>,
        snaplen: Option<u32>,
    ) -> Result<String, String> {
        let out = std::io::BufWriter::new(std::fs::File::from(file));
        let ports: Vec<u16> = port.into_iter().collect();
        self.start(out, &ports, snaplen)
    }

    /// Stops the running capture: the rest is written, the file closed.
    pub fn stop(&self) -> Result<Option<CaptureSummary>, String> {
        let w = self
            .writer
            .lock()
            .map_err(|_| "capture state poisoned")?
            .take();
        match w {
            Some(w) => w.finish().map(Some).map_err(|e| format!("capture: {e}")),
            None => Ok(None),
        }
    }

    /// What `iwarpctl capture` talks to.
    pub fn source(&self) -> CaptureSource {
        let me = self.clone();
        Box::new(move |cmd| {
            match cmd {
            CaptureCommand::Start {
                file,
                port,
                snaplen,
            } => me.start_fd(file, port, snaplen),
            CaptureCommand::Stop => match me.stop()? {
                Some(s) => Ok(format!(
                    "capture stopped: {} frames written (frames that found a ring full are in the counter capture_drops)",
                    s.frames
                )),
                None => Err("no capture is running".into()),
            },
        }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_capture_at_a_time_with_checked_arguments() {
        let c = DaemonCapture::new(1, 8, 1514, 2);
        let sink = std::io::sink();
        assert!(c
            .start(std::io::sink(), &[2], None)
            .unwrap_err()
            .contains("port 2"));
        assert!(c
            .start(std::io::sink(), &[], Some(10))
            .unwrap_err()
            .contains("snaplen"));
        let what = c.start(sink, &[1], Some(100)).unwrap();
        assert_eq!(what, "capturing port 1, 100 bytes of each frame");
        assert!(c.rings().enabled());
        assert!(c
            .start(std::io::sink(), &[], None)
            .unwrap_err()
            .contains("running"));
        assert_eq!(c.stop().unwrap().map(|s| s.frames), Some(0));
        assert!(!c.rings().enabled());
        assert!(c.stop().unwrap().is_none());
        // Whole frames: up to the rings' buffers.
        let what = c.start(std::io::sink(), &[], Some(9000)).unwrap();
        assert_eq!(what, "capturing every port, 1514 bytes of each frame");
        let mut src = c.source();
        assert!(src(CaptureCommand::Stop).unwrap().contains("0 frames"));
        assert!(src(CaptureCommand::Stop).is_err());
    }
}
