//! The command line, in the manner of perftest (`ib_write_bw`, `ib_send_lat`, ...).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Largest message size (`-s`, and the top of the `-a` sweep).
pub const MAX_SIZE_BYTES: u64 = 8 << 20;
/// Smallest size of the `-a` sweep.
pub const SWEEP_MIN_BYTES: u64 = 2;
/// Most QPs of one run.
pub const MAX_QPS: u32 = 64;
/// Most work requests outstanding per QP.
pub const MAX_DEPTH: u32 = 4096;

/// The tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// RDMA WRITE throughput, --depth WRs outstanding per QP.
    #[value(name = "write_bw")]
    WriteBw,
    /// RDMA WRITE ping-pong: each side writes the other's buffer and polls its last byte.
    #[value(name = "write_lat")]
    WriteLat,
    /// RDMA READ throughput (outstanding reads bounded by the ORD).
    #[value(name = "read_bw")]
    ReadBw,
    /// RDMA READ round trips, one at a time.
    #[value(name = "read_lat")]
    ReadLat,
    /// SEND/RECV throughput (the receiver returns credits).
    #[value(name = "send_bw")]
    SendBw,
    /// SEND/RECV ping-pong.
    #[value(name = "send_lat")]
    SendLat,
}

impl Test {
    /// Every test, in wire order.
    pub const ALL: [Test; 6] = [
        Test::WriteBw,
        Test::WriteLat,
        Test::ReadBw,
        Test::ReadLat,
        Test::SendBw,
        Test::SendLat,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write_bw",
            Test::WriteLat => "write_lat",
            Test::ReadBw => "read_bw",
            Test::ReadLat => "read_lat",
            Test::SendBw => "send_bw",
            Test::SendLat => "send_lat",
        }
    }

    /// A latency test (one message in flight) rather than a bandwidth test.
    pub fn is_latency(self) -> bool {
        matches!(self, Test::WriteLat | Test::ReadLat | Test::SendLat)
    }

    /// The latency reported is half the round trip (ping-pong), not the full round trip.
    pub fn reports_half_rtt(self) -> bool {
        matches!(self, Test::WriteLat | Test::SendLat)
    }

    /// Its code in the connection's private data.
    pub fn code(self) -> u8 {
        Test::ALL.iter().position(|t| *t == self).unwrap_or(0) as u8
    }

    /// The test of a private-data code.
    pub fn from_code(c: u8) -> Option<Test> {
        Test::ALL.get(c as usize).copied()
    }
}

/// A perftest-like benchmark over iwarpd's shared-memory verbs.
#[derive(Debug, Parser, PartialEq)]
#[command(name = "iwarp-perf", version)]
pub struct Args {
    /// The test.
    pub test: Test,
    /// Wait for the client (the default unless --connect or --loopback).
    #[arg(long, conflicts_with_all = ["connect", "loopback"])]
    pub server: bool,
    /// Connect to the server at this IPv4 address (a port address of its iwarpd).
    #[arg(long, value_name = "IP")]
    pub connect: Option<Ipv4Addr>,
    /// Both ends in this process: the server end on --daemon, the client end on
    /// --peer-daemon (the engine does not connect to its own address).
    #[arg(long, conflicts_with = "connect")]
    pub loopback: bool,
    /// TCP port of the server's listener.
    #[arg(long, short = 'p', default_value_t = 18515)]
    pub port: u16,
    /// The iwarpd to use (its verbs socket /run/iwarpd/NAME.verbs).
    #[arg(long, default_value = "iwarpd")]
    pub daemon: String,
    /// --loopback: the iwarpd of the client end.
    #[arg(long, value_name = "NAME", requires = "loopback")]
    pub peer_daemon: Option<String>,
    /// Message size (bytes; K, M suffixes are KiB, MiB).
    #[arg(short = 's', long = "size", value_parser = parse_size, default_value = "65536",
          conflicts_with = "all")]
    pub size: u64,
    /// Every power of two from 2 bytes to 8 MiB.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per size (default 1000 for latency tests, 5000 for bandwidth tests).
    #[arg(short = 'n', long = "iters", conflicts_with = "duration_s",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub iters: Option<u64>,
    /// Run each size for this many seconds instead of a count.
    #[arg(short = 'D', long = "duration", value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub duration_s: Option<u32>,
    /// With -D: print a line every SECONDS (rate, or p50/p99 latency, of that interval;
    /// kept in --json); 0: none. Default 1 with -D.
    #[arg(short = 'i', long = "interval", value_name = "SECONDS", requires = "duration_s",
          value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub interval_s: Option<u32>,
    /// Work requests outstanding per QP (bandwidth tests).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=MAX_DEPTH as i64))]
    pub depth: u32,
    /// Connections (QPs) in parallel (bandwidth tests).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_QPS as i64))]
    pub qps: u32,
    /// Iterations before the measured ones (latency tests).
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// Inbound RDMA READs the QP accepts (IRD; 0: the daemon's maximum).
    #[arg(long, default_value_t = 0)]
    pub ird: u32,
    /// Outbound RDMA READs in flight (ORD; 0: the daemon's maximum).
    #[arg(long, default_value_t = 0)]
    pub ord: u32,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The role of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Waits for connections.
    Server,
    /// Connects and measures.
    Client(Ipv4Addr),
    /// Both, in one process.
    Loopback,
}

impl Args {
    /// How often a timed run prints an interval line (`None`: never).
    pub fn interval(&self) -> Option<std::time::Duration> {
        self.duration_s?;
        match self.interval_s.unwrap_or(1) {
            0 => None,
            s => Some(std::time::Duration::from_secs(u64::from(s))),
        }
    }

    /// Parses and checks `std::env::args`-like arguments.
    pub fn parse_from_args<I: IntoIterator<Item = String>>(args: I) -> Result<Args, clap::Error> {
        let a = Args::try_parse_from(args)?;
        if a.size == 0 || a.size > MAX_SIZE_BYTES {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("size {} is not within 1..={MAX_SIZE_BYTES} bytes\n", a.size),
            ));
        }
        Ok(a)
    }

    /// The role.
    pub fn role(&self) -> Role {
        match (self.connect, self.loopback) {
            (Some(ip), _) => Role::Client(ip),
            (None, true) => Role::Loopback,
            (None, false) => Role::Server,
        }
    }

    /// The sizes to run, in order.
    pub fn sizes(&self) -> Vec<u64> {
        if self.all {
            sweep_sizes()
        } else {
            vec![self.size]
        }
    }

    /// Iterations per size when no duration is given.
    pub fn iterations(&self) -> u64 {
        self.iters
            .unwrap_or(if self.test.is_latency() { 1000 } else { 5000 })
    }

    /// QPs actually used (latency tests use one).
    pub fn qp_count(&self) -> u32 {
        if self.test.is_latency() {
            1
        } else {
            self.qps
        }
    }

    /// WRs in flight per QP (latency tests: one).
    pub fn effective_depth(&self) -> u32 {
        if self.test.is_latency() {
            1
        } else {
            self.depth
        }
    }
}

/// 2, 4, ... 8 MiB.
pub fn sweep_sizes() -> Vec<u64> {
    std::iter::successors(Some(SWEEP_MIN_BYTES), |s| Some(s * 2))
        .take_while(|s| *s <= MAX_SIZE_BYTES)
        .collect()
}

/// `65536`, `64K`, `64k`, `64KiB`, `8M`, `8MiB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 64, 4K, 1M)"))?;
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (K or M)")),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("'{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &str) -> Result<Args, clap::Error> {
        Args::parse_from_args(
            std::iter::once("iwarp-perf".to_string()).chain(a.split_whitespace().map(String::from)),
        )
    }

    #[test]
    fn sizes_and_units() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert!(parse_size("x").is_err());
        assert!(parse_size("4G").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        let s = sweep_sizes();
        assert_eq!(s.len(), 23);
        assert_eq!((s[0], s[22]), (2, 8 << 20));
    }

    #[test]
    fn roles_and_defaults() {
        let a = parse("write_bw").unwrap();
        assert_eq!(a.role(), Role::Server);
        assert_eq!(
            (a.size, a.port, a.depth, a.qps, a.iterations()),
            (65536, 18515, 128, 1, 5000)
        );
        assert_eq!(a.daemon, "iwarpd");
        let a = parse("send_lat --connect 198.18.0.1 -s 64 --daemon b --json /tmp/x.json").unwrap();
        assert_eq!(a.role(), Role::Client(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(
            (a.size, a.iterations(), a.qp_count(), a.effective_depth()),
            (64, 1000, 1, 1)
        );
        assert_eq!(a.json, Some(PathBuf::from("/tmp/x.json")));
        let a = parse(
            "read_bw --loopback --daemon a --peer-daemon b -a -D 2 --qps 4 --depth 16 --ord 8",
        )
        .unwrap();
        assert_eq!(a.role(), Role::Loopback);
        assert_eq!(a.sizes().len(), 23);
        assert_eq!(
            (a.duration_s, a.qp_count(), a.effective_depth(), a.ord),
            (Some(2), 4, 16, 8)
        );
        assert_eq!(a.peer_daemon.as_deref(), Some("b"));
        let a = parse("write_lat -n 77 -s 4K").unwrap();
        assert_eq!((a.iterations(), a.size), (77, 4096));
    }

    #[test]
    fn bad_usage_is_an_error() {
        for bad in [
            "",
            "frob_bw",
            "write_bw --server --connect 1.2.3.4",
            "write_bw --connect 1.2.3.4 --loopback",
            "write_bw --connect nohost",
            "write_bw -s 64 -a",
            "write_bw -n 5 -D 5",
            "write_bw -n 0",
            "write_bw --depth 0",
            "write_bw --qps 65",
            "write_bw -s 16M",
            "write_bw -s 0",
            "write_bw --peer-daemon x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_codes_round_trip() {
        for t in Test::ALL {
            assert_eq!(Test::from_code(t.code()), Some(t));
        }
        assert_eq!(Test::from_code(6), None);
        assert!(Test::SendLat.reports_half_rtt() && !Test::ReadLat.reports_half_rtt());
    }
}
