//! `[capture]` (pcap of what the ports send and receive) and `[loadgen]` (the server
//! side of the built-in load generator).

use serde::{Deserialize, Serialize};

use crate::error::{ensure, ConfigError};

/// `[capture]`: write frames to a pcap file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CaptureSection {
    /// pcap file to write; empty: no capture.
    pub path: String,
    /// Bytes kept of each frame (64..=65535).
    pub snaplen: u32,
    /// Frames buffered between the dataplane cores and the writer thread (a power of
    /// two); frames that find the ring full are counted and not written.
    pub ring_slots: u32,
    /// Port indices to capture; empty: all ports.
    pub ports: Vec<u32>,
}

impl Default for CaptureSection {
    fn default() -> CaptureSection {
        CaptureSection {
            path: String::new(),
            snaplen: 65535,
            ring_slots: 4096,
            ports: Vec::new(),
        }
    }
}

impl CaptureSection {
    /// True if capture is on.
    pub fn enabled(&self) -> bool {
        !self.path.is_empty()
    }

    /// True if port `index` is captured.
    pub fn captures_port(&self, index: usize) -> bool {
        self.enabled() && (self.ports.is_empty() || self.ports.iter().any(|p| *p as usize == index))
    }

    pub(crate) fn validate(&self, ports: usize) -> Result<(), ConfigError> {
        ensure(
            (64..=65535).contains(&self.snaplen),
            "capture.snaplen",
            "must be in 64..=65535",
        )?;
        ensure(
            self.ring_slots.is_power_of_two() && (64..=1 << 20).contains(&self.ring_slots),
            "capture.ring_slots",
            "must be a power of two in 64..=1048576",
        )?;
        for (i, p) in self.ports.iter().enumerate() {
            ensure(
                (*p as usize) < ports,
                format!("capture.ports[{i}]"),
                format!("port {p} does not exist ({ports} port(s) configured)"),
            )?;
            ensure(
                !self.ports[..i].contains(p),
                format!("capture.ports[{i}]"),
                format!("port {p} is listed twice"),
            )?;
        }
        Ok(())
    }
}

/// `[loadgen]`: the server side of the load generator (the client is `iwarpd loadgen`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadgenSection {
    /// TCP port the load generator server listens on; 0: no server.
    pub listen_port: u16,
    /// Check every received byte against the agreed pattern.
    pub verify: bool,
    /// Registered buffer per QP, bytes: target of WRITEs, source of READs, receive
    /// buffers of SENDs; the largest message a client may use.
    pub buffer_bytes: u32,
    /// Receives posted per QP for SEND traffic (at most `limits.max_rq_wr`).
    pub recv_depth: u32,
}

impl Default for LoadgenSection {
    fn default() -> LoadgenSection {
        LoadgenSection {
            listen_port: 0,
            verify: false,
            buffer_bytes: 1 << 20,
            recv_depth: 64,
        }
    }
}

impl LoadgenSection {
    pub(crate) fn validate(&self, max_rq_wr: u32) -> Result<(), ConfigError> {
        ensure(
            (1..=1 << 30).contains(&self.buffer_bytes),
            "loadgen.buffer_bytes",
            "must be in 1..=1073741824",
        )?;
        ensure(
            (1..=max_rq_wr).contains(&self.recv_depth),
            "loadgen.recv_depth",
            format!("must be positive and at most limits.max_rq_wr ({max_rq_wr})"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_rules_name_their_field() {
        let c = CaptureSection::default();
        c.validate(1).unwrap();
        assert!(!c.enabled());
        assert!(!c.captures_port(0));
        let err = |c: CaptureSection| c.validate(2).unwrap_err().field;
        assert_eq!(
            err(CaptureSection {
                snaplen: 10,
                ..c.clone()
            }),
            "capture.snaplen"
        );
        assert_eq!(
            err(CaptureSection {
                ring_slots: 1000,
                ..c.clone()
            }),
            "capture.ring_slots"
        );
        assert_eq!(
            err(CaptureSection {
                ports: vec![0, 2],
                ..c.clone()
            }),
            "capture.ports[1]"
        );
        assert_eq!(
            err(CaptureSection {
                ports: vec![1, 1],
                ..c.clone()
            }),
            "capture.ports[1]"
        );
        let on = CaptureSection {
            path: "/tmp/x.pcap".into(),
            ports: vec![1],
            ..c
        };
        assert!(on.captures_port(1));
        assert!(!on.captures_port(0));
    }

    #[test]
    fn loadgen_rules_name_their_field() {
        let l = LoadgenSection::default();
        l.validate(1024).unwrap();
        let err = |l: LoadgenSection| l.validate(32).unwrap_err().field;
        assert_eq!(
            err(LoadgenSection {
                buffer_bytes: 0,
                ..l.clone()
            }),
            "loadgen.buffer_bytes"
        );
        assert_eq!(
            err(LoadgenSection {
                recv_depth: 0,
                ..l.clone()
            }),
            "loadgen.recv_depth"
        );
        assert_eq!(err(l), "loadgen.recv_depth");
    }
}
