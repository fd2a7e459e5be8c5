//! iwarp-perftest: the other end of perftest's `ib_{send,write,read}_{bw,lat} -R` (linux-rdma
//! perftest over rdma_cm) on iwarpd's verbs client library, so that the perftest tools of
//! Linux siw can measure against iwarpd.
//!
//!   iwarp-perftest TEST [-a ADDR] [-p PORT] [-s SIZE] [-n ITERS] [-r RX_DEPTH] [-d DAEMON]
//!                  [--timeout-ms N] [--quiet-ms N]
//!
//! TEST is send_bw, write_bw, read_bw, send_lat, write_lat or read_lat. This side is the
//! server (the perftest tool connects to ADDR:PORT, default 0.0.0.0:18515); give it the
//! tool's `-s`, `-n` (and `-r`). Exit status 0 when the tool got through its run, 1 on an
//! error, 2 for usage.
#![forbid(unsafe_code)]

#[path = "../perftest/mod.rs"]
mod perftest;

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use perftest::server::{run_server, ServerOpts};
use perftest::session::{Test, MAX_SIZE};
use perftest::wire::DEFAULT_PORT;

fn usage() -> ExitCode {
    eprintln!(
        "usage: iwarp-perftest send_bw|write_bw|read_bw|send_lat|write_lat|read_lat [-a ADDR] \
         [-p PORT] [-s SIZE] [-n ITERS] [-r RX_DEPTH] [-d DAEMON] [--timeout-ms N] [--quiet-ms N]"
    );
    ExitCode::from(2)
}

fn parse(args: &[String]) -> Option<ServerOpts> {
    let mut it = args.iter();
    let test = Test::parse(it.next()?)?;
    let mut o = ServerOpts {
        test,
        addr: Ipv4Addr::UNSPECIFIED,
        port: DEFAULT_PORT,
        size: if test.is_lat() { 2 } else { 65536 },
        iters: 1000,
        rx_depth: 512,
        timeout: Duration::from_secs(60),
        quiet: Duration::from_secs(3),
        daemon: "iwarpd".into(),
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "-a" => o.addr = it.next()?.parse().ok()?,
            "-p" => o.port = it.next()?.parse().ok()?,
            "-s" => o.size = it.next()?.parse().ok()?,
            "-n" => o.iters = it.next()?.parse().ok()?,
            "-r" => o.rx_depth = it.next()?.parse().ok()?,
            "-d" => o.daemon = it.next()?.clone(),
            "--timeout-ms" => o.timeout = Duration::from_millis(it.next()?.parse().ok()?),
            "--quiet-ms" => o.quiet = Duration::from_millis(it.next()?.parse().ok()?),
            _ => return None,
        }
    }
    if o.size == 0 || o.size > MAX_SIZE || o.iters == 0 || o.rx_depth == 0 {
        return None;
    }
    Some(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(o) = parse(&args) else {
        return usage();
    };
    match run_server(&o) {
        Ok(r) => {
            println!(
                "server done: rounds={} dests={} recvs={} sends={} credits={} end={}",
                r.rounds, r.dests, r.recvs, r.sends, r.credits, r.end
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_perftests_options() {
        let o = parse(&args(
            "send_bw -p 7500 -s 64 -n 100 -d siw-srv -a 198.18.0.2",
        ))
        .unwrap();
        assert_eq!(o.test, Test::SendBw);
        assert_eq!((o.port, o.size, o.iters), (7500, 64, 100));
        assert_eq!(o.daemon, "siw-srv");
        assert_eq!(o.addr, Ipv4Addr::new(198, 18, 0, 2));
        let o = parse(&args("write_lat")).unwrap();
        assert_eq!((o.size, o.port), (2, DEFAULT_PORT));
    }

    #[test]
    fn refuses_bad_options() {
        assert!(parse(&args("")).is_none());
        assert!(parse(&args("atomic_bw")).is_none());
        assert!(parse(&args("send_bw -s 0")).is_none());
        assert!(parse(&args("send_bw -n 0")).is_none());
        assert!(parse(&args("send_bw -x")).is_none());
    }
}
