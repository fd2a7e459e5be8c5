//! A local user that tries to lock applications out of a daemon: `apps-flood SOCKET N`
//! opens N connections to the verbs socket and never says a word on any of them. Every
//! 100 ms it opens again (at most 100 at a time) those the daemon has closed. Prints
//! `flooding N` once N connections were made, then runs until its stdin closes and
//! prints `done connects=C closed=D` (C connections made in all, D of them reopened
//! after the daemon closed them). The admission test runs it as other users (`nobody`, ...).

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use iwarp_shm_socket::Channel;
use rustix::event::{poll, PollFd, PollFlags};

/// Reconnects per round at most.
const RECONNECTS_PER_ROUND: usize = 100;
/// Time between rounds.
const ROUND: Duration = Duration::from_millis(100);

fn fail(msg: String) -> ! {
    println!("ERROR: {msg}");
    let _ = std::io::stdout().flush();
    std::process::exit(1);
}

/// Room for `n` descriptors and some.
fn raise_fd_limit(n: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    let want = n + 64;
    if l.current.is_some_and(|c| c >= want) {
        return;
    }
    let max = l.maximum.unwrap_or(u64::MAX);
    if max < want {
        fail(format!("RLIMIT_NOFILE hard limit {max} < {want}"));
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: l.maximum,
        },
    )
    .unwrap_or_else(|e| fail(format!("setrlimit: {e}")));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        fail("usage: apps-flood SOCKET N".into());
    }
    let path = std::path::PathBuf::from(&args[1]);
    let n: usize = args[2].parse().unwrap_or_else(|e| fail(format!("N: {e}")));
    raise_fd_limit(n as u64);
    let connect = || {
        Channel::connect(&path).unwrap_or_else(|e| fail(format!("connect {}: {e}", path.display())))
    };
    let mut conns: Vec<Channel> = (0..n).map(|_| connect()).collect();
    let mut connects = n as u64;
    let mut closed = 0u64;
    println!("flooding {n}");
    let _ = std::io::stdout().flush();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
                line.clear();
            }
            stop.store(true, Ordering::Release);
        });
    }
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(ROUND);
        let gone: Vec<usize> = {
            let mut fds: Vec<PollFd<'_>> = conns
                .iter()
                .map(|c| PollFd::new(c, PollFlags::IN))
                .collect();
            let zero = rustix::event::Timespec::default();
            poll(&mut fds, Some(&zero)).unwrap_or_else(|e| fail(format!("poll: {e}")));
            fds.iter()
                .enumerate()
                .filter(|(_, f)| !f.revents().is_empty())
                .map(|(i, _)| i)
                .collect()
        };
        // Those not reopened this round are seen again next round.
        for i in gone.into_iter().take(RECONNECTS_PER_ROUND) {
            conns[i] = connect();
            connects += 1;
            closed += 1;
        }
    }
    println!("done connects={connects} closed={closed}");
}
