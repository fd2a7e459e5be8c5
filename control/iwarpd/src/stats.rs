//! The stats socket: a unix stream socket where `iwarpd stats` (or `socat`) reads the
//! counters of a running daemon. Request: one line, `table` or `json` (any other line gets
//! the table). Reply: the text, then the connection is closed. A client that sends no
//! request within 100 ms is closed without an answer (the control thread does not wait
//! longer); `query` then asks again. Served by the control thread, never by a core.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

/// The listening socket (removed when dropped).
#[derive(Debug)]
pub struct StatsServer {
    listener: UnixListener,
    path: PathBuf,
}

impl StatsServer {
    /// Binds `path` (its directory is created; a stale socket left by a daemon that died
    /// is replaced, a live one is an error naming the path).
    pub fn bind(path: &Path) -> Result<StatsServer, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                format!("daemon.stats_socket: cannot create {}: {e}", dir.display())
            })?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "daemon.stats_socket: {} is in use by a running daemon (another iwarpd with daemon.name = the same?)",
                    path.display()
                ));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| format!("daemon.stats_socket: cannot bind {}: {e}", path.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("daemon.stats_socket: {e}"))?;
        Ok(StatsServer {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// Answers every waiting request with `render(json)`; never blocks for long (a slow
    /// client gets 100 ms).
    pub fn serve(&self, render: &mut dyn FnMut(bool) -> String) {
        for _ in 0..16 {
            let Ok((stream, _)) = self.listener.accept() else {
                return;
            };
            let _ = answer(stream, render);
        }
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn answer(stream: UnixStream, render: &mut dyn FnMut(bool) -> String) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(StdDuration::from_millis(100)))?;
    stream.set_write_timeout(Some(StdDuration::from_millis(100)))?;
    let mut line = String::new();
    let got = BufReader::new(stream.try_clone()?.take(64)).read_line(&mut line);
    let json = match line.trim() {
        "json" => true,
        "table" => false,
        _ if got.is_ok() && line.ends_with('\n') => false,
        // Nothing (or half a line) within the read timeout: no answer rather than a
        // guess; a client that was slow to write asks again.
        _ => return Ok(()),
    };
    let mut s = stream;
    s.write_all(render(json).as_bytes())
}

/// How many times `query` asks before it gives up on a daemon that closes without an
/// answer (its request was not read in time: this process was descheduled between its
/// connect and its write).
const QUERY_ATTEMPTS: u32 = 5;

/// `iwarpd stats`: asks the daemon at `path` and returns its answer.
pub fn query(path: &Path, json: bool) -> Result<String, String> {
    let mut last = String::new();
    for _ in 0..QUERY_ATTEMPTS {
        let mut s = UnixStream::connect(path).map_err(|e| {
            format!(
                "cannot reach the daemon's stats socket {}: {e} (is iwarpd running with this daemon.name?)",
                path.display()
            )
        })?;
        let _ = s.set_read_timeout(Some(StdDuration::from_secs(5)));
        let mut out = String::new();
        // A write or read that fails (the daemon closed first) is a refusal like an
        // empty answer: asked again.
        match s
            .write_all(if json { b"json\n" } else { b"table\n" })
            .and_then(|()| s.read_to_string(&mut out))
        {
            Ok(_) if !out.is_empty() => return Ok(out),
            Ok(_) => last = "closed without an answer".to_string(),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!(
        "stats socket {}: no answer in {QUERY_ATTEMPTS} attempts (last: {last})",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_gets_what_serve_renders_and_a_live_socket_is_not_stolen() {
        let dir = std::env::temp_dir().join(format!("iwarpd-stats-test-{}", std::process::id()));
        let path = dir.join("s.sock");
        let server = StatsServer::bind(&path).expect("bind");
        assert!(StatsServer::bind(&path).unwrap_err().contains("in use"));
        // The probe connection of the in-use check is answered (and ignored) first.
        server.serve(&mut |_| String::new());
        let p2 = path.clone();
        let client = std::thread::spawn(move || query(&p2, true));
        let mut asked = None;
        let end = std::time::Instant::now() + StdDuration::from_secs(30);
        while std::time::Instant::now() < end {
            server.serve(&mut |json| {
                asked = Some(json);
                "{\"ok\":1}".to_string()
            });
            if asked.is_some() {
                break;
            }
            std::thread::sleep(StdDuration::from_millis(2));
        }
        assert_eq!(client.join().unwrap().unwrap(), "{\"ok\":1}");
        assert_eq!(asked, Some(true));
        drop(server);
        assert!(!path.exists());
        assert!(query(&path, false).unwrap_err().contains("cannot reach"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_client_that_asks_nothing_gets_no_answer_and_query_asks_again() {
        let dir = std::env::temp_dir().join(format!("iwarpd-stats-mute-{}", std::process::id()));
        let path = dir.join("s.sock");
        let server = StatsServer::bind(&path).expect("bind");
        // Connected, silent: after the read timeout it is closed unanswered.
        let mut mute = UnixStream::connect(&path).expect("connect");
        let mut rendered = 0;
        server.serve(&mut |_| {
            rendered += 1;
            "x".to_string()
        });
        assert_eq!(rendered, 0, "no request, no rendering");
        let mut out = String::new();
        mute.read_to_string(&mut out).expect("closed");
        assert_eq!(out, "", "no answer to no request");
        // Half a line, then the writer closes: no answer either.
        let mut half = UnixStream::connect(&path).expect("connect");
        half.write_all(b"js").expect("write");
        half.shutdown(std::net::Shutdown::Write).expect("shutdown");
        server.serve(&mut |_| "x".to_string());
        out.clear();
        half.read_to_string(&mut out).expect("closed");
        assert_eq!(out, "");
        // An unknown whole line gets the table.
        let mut other = UnixStream::connect(&path).expect("connect");
        other.write_all(b"counters\n").expect("write");
        let mut json = None;
        server.serve(&mut |j| {
            json = Some(j);
            "t".to_string()
        });
        out.clear();
        other.read_to_string(&mut out).expect("answer");
        assert_eq!((out.as_str(), json), ("t", Some(false)));
        // A server that answers nothing: query gives up with an error, not an empty answer.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let p2 = path.clone();
        let client = std::thread::spawn(move || query(&p2, true));
        let listener = server.listener.try_clone().expect("clone");
        let s2 = stop.clone();
        let closer = std::thread::spawn(move || {
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((c, _)) = listener.accept() {
                    drop(c);
                }
                std::thread::sleep(StdDuration::from_millis(1));
            }
        });
        let err = client.join().unwrap().unwrap_err();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        closer.join().unwrap();
        assert!(err.contains("no answer in 5 attempts"), "{err}");
        drop(server);
        let _ = std::fs::remove_dir_all(dir);
    }
}
