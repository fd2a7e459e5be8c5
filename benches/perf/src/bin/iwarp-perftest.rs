//! iwarp-perftest: either end of perftest's `ib_{send,write,read}_{bw,lat} -R` (linux-rdma
//! perftest over rdma_cm) on iwarpd's verbs client library, so that the perftest tools of
//! Linux siw can measure against iwarpd, as client or as server.
//!
//! ```text
//!   iwarp-perftest TEST [-a ADDR] [-p PORT] [-s SIZE] [-n ITERS] [-r RX_DEPTH] [-t TX_DEPTH]
//!                  [-d DAEMON] [--timeout-ms N] [SERVER]
//! ```
//!
//! TEST is send_bw, write_bw, read_bw, send_lat, write_lat or read_lat. Without SERVER this
//! side is the server (the perftest tool connects to ADDR:PORT, default 0.0.0.0:18515; give
//! it the tool's `-s`, `-n` and `-r`); with SERVER (an IPv4 address) it is the client of a
//! perftest tool started as the server there. Exit status 0 when the run got through, 1 on
//! an error, 2 for usage.
#![forbid(unsafe_code)]

#[path = "../perftest/mod.rs"]
mod perftest;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::Duration;

use perftest::client::{run_client, ClientOpts};
use perftest::server::{run_server, ServerOpts};
use perftest::session::{Test, MAX_SIZE};
use perftest::wire::DEFAULT_PORT;

fn usage() -> ExitCode {
    eprintln!(
        "usage: iwarp-perftest send_bw|write_bw|read_bw|send_lat|write_lat|read_lat [-a ADDR] \
         [-p PORT] [-s SIZE] [-n ITERS] [-r RX_DEPTH] [-t TX_DEPTH] [-d DAEMON] \
         [--timeout-ms N] [SERVER]"
    );
    ExitCode::from(2)
}

/// The parsed command line: the options and, for the client, the server's address.
struct Args {
    opts: ServerOpts,
    tx_depth: u32,
    server: Option<Ipv4Addr>,
}

fn parse(args: &[String]) -> Option<Args> {
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
        daemon: "iwarpd".into(),
    };
    let mut tx_depth = 128;
    let mut server = None;
    while let Some(a) = it.next() {
        match a.as_str() {
            "-a" => o.addr = it.next()?.parse().ok()?,
            "-p" => o.port = it.next()?.parse().ok()?,
            "-s" => o.size = it.next()?.parse().ok()?,
            "-n" => o.iters = it.next()?.parse().ok()?,
            "-r" => o.rx_depth = it.next()?.parse().ok()?,
            "-t" => tx_depth = it.next()?.parse().ok()?,
            "-d" => o.daemon = it.next()?.clone(),
            "--timeout-ms" => o.timeout = Duration::from_millis(it.next()?.parse().ok()?),
            s if !s.starts_with('-') && server.is_none() => server = Some(s.parse().ok()?),
            _ => return None,
        }
    }
    let bad = o.size == 0 || o.size > MAX_SIZE || o.iters == 0 || o.rx_depth == 0;
    if bad || tx_depth == 0 || tx_depth > 1024 {
        return None;
    }
    Some(Args {
        opts: o,
        tx_depth,
        server,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(a) = parse(&args) else {
        return usage();
    };
    let o = a.opts;
    let result = match a.server {
        None => run_server(&o).map(|r| {
            format!(
                "server done: rounds={} dests={} recvs={} sends={} credits={} end={}",
                r.rounds, r.dests, r.recvs, r.sends, r.credits, r.end
            )
        }),
        Some(ip) => {
            let c = ClientOpts {
                test: o.test,
                server: SocketAddrV4::new(ip, o.port),
                size: o.size,
                iters: o.iters,
                rx_depth: o.rx_depth,
                tx_depth: a.tx_depth,
                timeout: o.timeout,
                daemon: o.daemon.clone(),
            };
            run_client(&c).map(|r| {
                let figures = if o.test.is_lat() {
                    let div = if o.test == Test::ReadLat { 1 } else { 2 };
                    format!("t_typical={:.2}us", r.median_us(div))
                } else {
                    format!("bw_avg={:.2}MB/s", r.mb_per_s(o.size))
                };
                format!(
                    "client done: {} B x {}: {figures} rounds={} completed={}",
                    o.size, o.iters, r.rounds, r.completed
                )
            })
        }
    };
    match result {
        Ok(line) => {
            println!("{line}");
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
        let a = parse(&args(
            "send_bw -p 7500 -s 64 -n 100 -d siw-srv -a 198.18.0.2",
        ))
        .unwrap();
        assert!(a.server.is_none(), "no server name: the server");
        let o = a.opts;
        assert_eq!(o.test, Test::SendBw);
        assert_eq!((o.port, o.size, o.iters), (7500, 64, 100));
        assert_eq!(o.daemon, "siw-srv");
        assert_eq!(o.addr, Ipv4Addr::new(198, 18, 0, 2));
        let o = parse(&args("write_lat")).unwrap().opts;
        assert_eq!((o.size, o.port), (2, DEFAULT_PORT));
        let a = parse(&args("read_bw -t 16 -p 7600 198.18.0.11")).unwrap();
        assert_eq!(a.server, Some(Ipv4Addr::new(198, 18, 0, 11)));
        assert_eq!((a.tx_depth, a.opts.port), (16, 7600));
    }

    #[test]
    fn refuses_bad_options() {
        assert!(parse(&args("")).is_none());
        assert!(parse(&args("atomic_bw")).is_none());
        assert!(parse(&args("send_bw -s 0")).is_none());
        assert!(parse(&args("send_bw -n 0")).is_none());
        assert!(parse(&args("send_bw -x")).is_none());
        assert!(parse(&args("send_bw -t 0")).is_none());
        assert!(parse(&args("send_bw 198.18.0.11 198.18.0.12")).is_none());
        assert!(parse(&args("send_bw not-an-address")).is_none());
    }
}
