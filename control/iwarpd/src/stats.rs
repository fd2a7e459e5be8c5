//! The stats socket: a unix stream socket where `iwarpd stats` (or `socat`) reads the
//! counters of a running daemon. Request: one line, `table` or `json`. Reply: the text,
//! then the connection is closed. Served by the control thread, never by a core.

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
    let _ = BufReader::new(stream.try_clone()?.take(64)).read_line(&mut line);
    let json = line.trim() == "json";
    let mut s = stream;
    s.write_all(render(json).as_bytes())
}

/// `iwarpd stats`: asks the daemon at `path` and returns its answer.
pub fn query(path: &Path, json: bool) -> Result<String, String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach the daemon's stats socket {}: {e} (is iwarpd running with this daemon.name?)",
            path.display()
        )
    })?;
    let _ = s.set_read_timeout(Some(StdDuration::from_secs(5)));
    s.write_all(if json { b"json\n" } else { b"table\n" })
        .map_err(|e| format!("stats socket {}: {e}", path.display()))?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .map_err(|e| format!("stats socket {}: {e}", path.display()))?;
    Ok(out)
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
        for _ in 0..500 {
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
}
