//! What a client runs and how a server is bounded, with validation that names the field,
//! and the arena layouts both derive from them.

use core::fmt;
use core::net::Ipv4Addr;

use iwarp_engine::CmError;
use iwarp_rdma::RnicLimits;
use iwarp_types::{Duration, Memory, RegionId, VerbError};

use crate::messages::{Op, CTL_LEN};

/// Alignment of every buffer carved from an arena.
pub const ALIGN: u64 = 64;

fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// The part of a core's memory an app may use: `len` bytes at `offset` of arena
/// `region`. The app registers its own MRs over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arena {
    /// The memory arena.
    pub region: RegionId,
    /// First byte inside the arena.
    pub offset: u64,
    /// Bytes available.
    pub len: u64,
}

impl Arena {
    /// Checks that the arena holds `need` bytes and lies inside its region of `mem`.
    pub fn check<M: Memory>(&self, need: u64, mem: &M) -> Result<(), SetupError> {
        let region_len = mem.region_len(self.region).unwrap_or(0);
        let inside = self
            .offset
            .checked_add(need)
            .is_some_and(|end| end <= region_len);
        if self.len < need || !inside {
            return Err(SetupError::Arena {
                need,
                have: self.len.min(region_len.saturating_sub(self.offset)),
            });
        }
        Ok(())
    }
}

/// A load-generator run: one client per (peer, spec) on a core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientSpec {
    /// The peer daemon's address.
    pub peer: Ipv4Addr,
    /// The peer's loadgen server port.
    pub port: u16,
    /// The operation.
    pub op: Op,
    /// Message size in bytes (ignored for `Connect`).
    pub size: u32,
    /// QPs (connections) this client opens.
    pub qps: u32,
    /// WRs outstanding per QP.
    pub depth: u32,
    /// Distinct message buffers per QP (local, and remote targets) the outstanding WRs
    /// cycle through; 0 (the default): one per outstanding WR, `depth`. Fewer keep the
    /// data in the caches, as a socket benchmark that sends one buffer over and over.
    /// Buffers shared by WRs in flight are overwritten: not with `verify`.
    pub buffers: u32,
    /// Verify data: the server checks WRITE and SEND payloads, the client checks READs.
    pub verify: bool,
    /// Traffic before the measurement window (from the moment every connect resolved).
    pub warmup: Duration,
    /// Length of the measurement window (for `Connect`: how long connections are held).
    pub duration: Duration,
    /// Selective signaling (non-verify runs): every n-th WR, and the last WR of every
    /// posting batch, is signaled; a signaled completion completes every older WR of its
    /// QP. 1 signals every WR. Verify runs signal every WR.
    pub signal_every: u32,
    /// Connects in flight at most (SYN sent, Established or failure not yet seen).
    pub max_connecting: u32,
    /// Connects not resolved by then (from the first poll) are aborted.
    pub connect_timeout: Duration,
    /// After the window, outstanding WRs get this long to complete before the QPs are
    /// disconnected anyway.
    pub drain_timeout: Duration,
    /// Disconnects not complete by then are aborted (RST).
    pub close_timeout: Duration,
    /// Index of this client's first QP (several cores' clients use disjoint ranges; the
    /// index is part of the verify pattern).
    pub qp_index_base: u32,
}

impl Default for ClientSpec {
    /// 64 KiB WRITEs, one QP, depth 16, 1 s warmup, 10 s window, peer 198.18.0.2:7174.
    fn default() -> ClientSpec {
        ClientSpec {
            peer: Ipv4Addr::new(198, 18, 0, 2),
            port: DEFAULT_PORT,
            op: Op::Write,
            size: 65536,
            qps: 1,
            depth: 16,
            buffers: 0,
            verify: false,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(10),
            signal_every: 1,
            max_connecting: 64,
            connect_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(5),
            close_timeout: Duration::from_secs(5),
            qp_index_base: 0,
        }
    }
}

/// The default loadgen server port.
pub const DEFAULT_PORT: u16 = 7174;

/// Bounds of a loadgen server (one per listening port on a core).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Listening port.
    pub port: u16,
    /// Connect requests waiting for an answer at most (capped by the engine).
    pub backlog: usize,
    /// Connections served at once (`Connect` runs need no buffer).
    pub max_conns: u32,
    /// Target buffers: connections moving data at once.
    pub buffers: u32,
    /// Bytes of each target buffer: a client's depth x size, plus 2 x depth x 16 bytes
    /// of control slots, must fit.
    pub buffer_bytes: u64,
    /// Largest depth a client may ask for.
    pub max_depth: u32,
}

impl Default for ServerConfig {
    /// Port 7174, 1,024 connections, 8 buffers of 1 MiB + control slots, depth <= 64.
    fn default() -> ServerConfig {
        ServerConfig {
            port: DEFAULT_PORT,
            backlog: 64,
            max_conns: 1024,
            buffers: 8,
            buffer_bytes: (1 << 20) + 4096,
            max_depth: 64,
        }
    }
}

/// Why an app could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// A field of the spec or config is out of range.
    Field {
        /// The field.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The arena is too small (or lies outside its memory region).
    Arena {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        have: u64,
    },
    /// A verb failed.
    Verb {
        /// Which.
        what: &'static str,
        /// Its error.
        err: VerbError,
    },
    /// `listen` failed.
    Listen(CmError),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Field { field, reason } => write!(f, "loadgen: `{field}` {reason}"),
            SetupError::Arena { need, have } => write!(
                f,
                "loadgen: arena too small or outside its region: need {need} bytes, have {have}"
            ),
            SetupError::Verb { what, err } => write!(f, "loadgen: {what} failed: {err}"),
            SetupError::Listen(e) => write!(f, "loadgen: listen failed: {e}"),
        }
    }
}

impl std::error::Error for SetupError {}

pub(crate) fn field(field: &'static str, reason: &'static str) -> SetupError {
    SetupError::Field { field, reason }
}

/// Where a QP's (client) or a connection's (server) buffers lie inside its stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Bytes of each data slot.
    pub size: u64,
    /// Data slots (= depth).
    pub depth: u64,
    /// Offset of the control receive slots (depth x [`CTL_LEN`]).
    pub ctl_rx: u64,
    /// Offset of the control send slots (depth x [`CTL_LEN`]).
    pub ctl_tx: u64,
    /// Bytes used, aligned.
    pub stride: u64,
}

impl Layout {
    /// Data slots, then control receive and send slots (present only if `ctl`).
    pub fn new(size: u64, depth: u64, ctl: bool) -> Layout {
        let data = align_up(size.saturating_mul(depth));
        let ctl_bytes = if ctl {
            align_up(depth * CTL_LEN as u64)
        } else {
            0
        };
        Layout {
            size,
            depth,
            ctl_rx: data,
            ctl_tx: data + ctl_bytes,
            stride: data.saturating_add(2 * ctl_bytes),
        }
    }

    /// Offset of data slot `k`.
    #[inline]
    pub fn data(&self, k: u64) -> u64 {
        k * self.size
    }
}

impl ClientSpec {
    /// The message size actually moved (0 for `Connect`).
    pub fn payload_size(&self) -> u32 {
        if self.op == Op::Connect {
            0
        } else {
            self.size
        }
    }

    /// Verify in force (never for `Connect`).
    pub(crate) fn verifying(&self) -> bool {
        self.verify && self.op != Op::Connect
    }

    /// QPs exchange control SENDs (credits, checks, acks).
    pub(crate) fn uses_ctl(&self) -> bool {
        self.op == Op::Send || (self.op == Op::Write && self.verify)
    }

    /// Send queue entries a QP needs.
    pub(crate) fn sq_depth(&self) -> u32 {
        match self.op {
            Op::Connect => 1,
            Op::Write if self.verify => self.depth.saturating_mul(2),
            _ => self.depth,
        }
    }

    pub(crate) fn layout(&self) -> Layout {
        if self.op == Op::Connect {
            return Layout::new(0, 0, false);
        }
        Layout::new(u64::from(self.size), u64::from(self.depth), self.uses_ctl())
    }

    /// Checks every field against itself and against the engine's verbs limits.
    pub fn validate(&self, limits: &RnicLimits) -> Result<(), SetupError> {
        if self.qps == 0 {
            return Err(field("qps", "must be at least 1"));
        }
        if self.qps > limits.max_qps {
            return Err(field("qps", "exceeds the engine's QP limit"));
        }
        if self.port == 0 {
            return Err(field("port", "must not be 0"));
        }
        if self.max_connecting == 0 {
            return Err(field("max_connecting", "must be at least 1"));
        }
        if self.qp_index_base.checked_add(self.qps).is_none() {
            return Err(field("qp_index_base", "plus qps overflows"));
        }
        if self.op == Op::Connect {
            return Ok(());
        }
        if self.size == 0 {
            return Err(field("size", "must be at least 1 byte"));
        }
        if self.depth == 0 {
            return Err(field("depth", "must be at least 1"));
        }
        if self.sq_depth() > limits.max_sq_wr || self.depth > limits.max_rq_wr {
            return Err(field(
                "depth",
                "exceeds the engine's queue limit (verified WRITE needs 2 x depth)",
            ));
        }
        if self.depth >= 1 << 27 {
            return Err(field("depth", "too large"));
        }
        if self.signal_every == 0 {
            return Err(field("signal_every", "must be at least 1"));
        }
        Ok(())
    }

    /// Bytes of arena this spec needs: per QP, `depth` data slots of `size` bytes, plus
    /// control slots for SEND and verified WRITE (`2 x depth x 16` bytes), each part
    /// aligned to 64 bytes. `Connect` needs none.
    pub fn required_arena_bytes(&self) -> u64 {
        self.layout().stride.saturating_mul(u64::from(self.qps))
    }
}

impl ServerConfig {
    pub(crate) fn buffer_stride(&self) -> u64 {
        align_up(self.buffer_bytes)
    }

    /// Bytes of arena this configuration needs: `buffers x buffer_bytes` (aligned).
    pub fn required_arena_bytes(&self) -> u64 {
        self.buffer_stride().saturating_mul(u64::from(self.buffers))
    }

    /// Checks every field against itself and against the engine's verbs limits.
    pub fn validate(&self, limits: &RnicLimits) -> Result<(), SetupError> {
        if self.port == 0 {
            return Err(field("port", "must not be 0"));
        }
        if self.max_conns == 0 {
            return Err(field("max_conns", "must be at least 1"));
        }
        if self.max_conns > limits.max_qps {
            return Err(field("max_conns", "exceeds the engine's QP limit"));
        }
        if self.buffers > self.max_conns {
            return Err(field("buffers", "exceeds max_conns"));
        }
        if self.buffers > 0 && self.buffer_bytes == 0 {
            return Err(field("buffer_bytes", "must be positive"));
        }
        if self.max_depth == 0 {
            return Err(field("max_depth", "must be at least 1"));
        }
        if self.max_depth > limits.max_sq_wr || self.max_depth > limits.max_rq_wr {
            return Err(field("max_depth", "exceeds the engine's queue limit"));
        }
        if self.max_depth >= 1 << 27 {
            return Err(field("max_depth", "too large"));
        }
        if self.backlog == 0 {
            return Err(field("backlog", "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_sizes_and_layouts() {
        let s = ClientSpec {
            op: Op::Write,
            size: 100,
            depth: 3,
            qps: 2,
            verify: true,
            ..ClientSpec::default()
        };
        let l = s.layout();
        assert_eq!(l.ctl_rx, 320);
        assert_eq!(l.ctl_tx, 320 + 64);
        assert_eq!(l.stride, 320 + 128);
        assert_eq!(s.required_arena_bytes(), 2 * 448);
        let plain = ClientSpec { verify: false, ..s };
        assert_eq!(plain.required_arena_bytes(), 2 * 320);
        let c = ClientSpec {
            op: Op::Connect,
            qps: 10_000,
            ..s
        };
        assert_eq!(c.required_arena_bytes(), 0);
        assert_eq!(
            ServerConfig::default().required_arena_bytes(),
            8 * ((1 << 20) + 4096)
        );
    }

    #[test]
    fn validation_names_the_field() {
        let lim = RnicLimits::default();
        assert_eq!(ClientSpec::default().validate(&lim), Ok(()));
        let bad = |s: ClientSpec| match s.validate(&lim) {
            Err(SetupError::Field { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let d = ClientSpec::default();
        assert_eq!(bad(ClientSpec { qps: 0, ..d }), "qps");
        assert_eq!(bad(ClientSpec { size: 0, ..d }), "size");
        assert_eq!(bad(ClientSpec { depth: 0, ..d }), "depth");
        assert_eq!(
            bad(ClientSpec {
                depth: 600,
                verify: true,
                ..d
            }),
            "depth"
        );
        assert_eq!(
            bad(ClientSpec {
                signal_every: 0,
                ..d
            }),
            "signal_every"
        );
        assert_eq!(bad(ClientSpec { port: 0, ..d }), "port");
        assert_eq!(
            ClientSpec {
                op: Op::Connect,
                size: 0,
                depth: 0,
                ..d
            }
            .validate(&lim),
            Ok(())
        );
        let s = ServerConfig::default();
        assert_eq!(s.validate(&lim), Ok(()));
        assert!(matches!(
            ServerConfig { max_depth: 0, ..s }.validate(&lim),
            Err(SetupError::Field {
                field: "max_depth",
                ..
            })
        ));
        assert!(matches!(
            ServerConfig { buffers: 2000, ..s }.validate(&lim),
            Err(SetupError::Field {
                field: "buffers",
                ..
            })
        ));
        assert!(SetupError::Arena { need: 5, have: 1 }
            .to_string()
            .contains("need 5"));
    }
}
