//! One admin session with the daemon: connect, `Hello`, Admin requests, `Bye`; and the
//! errors an operator can act on, each with its exit code.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iwarp_shm_socket::{
    AdminRequest, AdminResponse, Channel, ClientMsg, ErrorCode, ErrorReply, FrameError, RecvError,
    Request, Response, ServerMsg, PROTOCOL_VERSION,
};

/// Unsolicited messages skipped while waiting for one answer (events a daemon might send
/// to any client, e.g. `Shutdown`); more than this is a misbehaving daemon.
const MAX_SKIPPED_MESSAGES: usize = 64;

/// Why a command failed.
#[derive(Debug)]
pub enum CtlError {
    /// No socket, or nobody accepts on it.
    NotRunning(String),
    /// The socket's permissions, the access policy or the admin policy refused us.
    Permission(String),
    /// The daemon speaks another protocol version.
    Version(String),
    /// The daemon answered the request with an error.
    Refused(ErrorReply),
    /// Timeout, closed connection, malformed or unexpected answer.
    Comm(String),
    /// Something on our side the command names (a file that cannot be created).
    Usage(String),
}

impl CtlError {
    /// The process exit code (documented in `iwarpctl --help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::Refused(_) => 1,
            CtlError::NotRunning(_) => 3,
            CtlError::Permission(_) => 4,
            CtlError::Version(_) => 5,
            CtlError::Comm(_) => 6,
            CtlError::Usage(_) => 2,
        }
    }

    fn from_reply(label: &str, e: ErrorReply) -> CtlError {
        match e.code {
            ErrorCode::PermissionDenied => CtlError::Permission(format!(
                "{label} refused this user ({}): see [control] allow_users / allow_groups",
                e.message
            )),
            ErrorCode::NotAdmin => CtlError::Permission(format!(
                "{label}: admin requests need root or a user in [control] admin_users ({})",
                e.message
            )),
            ErrorCode::VersionMismatch => CtlError::Version(format!(
                "{label} speaks another protocol version than iwarpctl ({PROTOCOL_VERSION}): {}",
                e.message
            )),
            _ => CtlError::Refused(e),
        }
    }
}

impl core::fmt::Display for CtlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CtlError::NotRunning(m)
            | CtlError::Permission(m)
            | CtlError::Version(m)
            | CtlError::Comm(m)
            | CtlError::Usage(m) => f.write_str(m),
            CtlError::Refused(e) => write!(f, "the daemon refused the request: {e}"),
        }
    }
}

impl std::error::Error for CtlError {}

/// A connected, greeted admin session.
#[derive(Debug)]
pub struct AdminSession {
    chan: Channel,
    label: String,
    next_seq: u64,
    /// The client id the daemon gave this session.
    pub client_id: u32,
}

impl AdminSession {
    /// Connects to `path` and says `Hello`. `label` names the daemon in messages
    /// ("iwarpd NAME").
    pub fn open(path: &Path, label: &str, timeout: Duration) -> Result<AdminSession, CtlError> {
        let chan = Channel::connect(path).map_err(|e| connect_error(label, path, &e))?;
        let comm =
            |e: io::Error| CtlError::Comm(format!("{label}: socket {}: {e}", path.display()));
        chan.set_recv_timeout(Some(timeout)).map_err(comm)?;
        chan.set_send_timeout(Some(timeout)).map_err(comm)?;
        let mut s = AdminSession {
            chan,
            label: label.to_string(),
            next_seq: 1,
            client_id: 0,
        };
        let hello = Request::Hello {
            version: PROTOCOL_VERSION,
            name: "iwarpctl".to_string(),
        };
        match s.call(hello)? {
            Response::Welcome(w) => {
                s.client_id = w.client_id;
                Ok(s)
            }
            other => Err(CtlError::Comm(format!(
                "{label} answered Hello with {}",
                response_name(&other)
            ))),
        }
    }

    /// One Admin request and its answer.
    pub fn admin(&mut self, req: AdminRequest) -> Result<AdminResponse, CtlError> {
        match self.call(Request::Admin(req))? {
            Response::Admin(a) => Ok(a),
            other => Err(CtlError::Comm(format!(
                "{} answered an admin request with {}",
                self.label,
                response_name(&other)
            ))),
        }
    }

    /// One Admin request that carries a descriptor (`CaptureStart`: the file).
    pub fn admin_with_fd(
        &mut self,
        req: AdminRequest,
        fd: std::os::fd::BorrowedFd<'_>,
    ) -> Result<AdminResponse, CtlError> {
        match self.call_fds(Request::Admin(req), &[fd])? {
            Response::Admin(a) => Ok(a),
            other => Err(CtlError::Comm(format!(
                "{} answered an admin request with {}",
                self.label,
                response_name(&other)
            ))),
        }
    }

    /// Sends `request`, waits for the reply with its sequence number (skipping a bounded
    /// number of events).
    fn call(&mut self, request: Request) -> Result<Response, CtlError> {
        self.call_fds(request, &[])
    }

    /// [`AdminSession::call`] with descriptors sent along.
    fn call_fds(
        &mut self,
        request: Request,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<Response, CtlError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let label = self.label.clone();
        self.chan
            .send(&ClientMsg { seq, request }, fds)
            .map_err(|e| CtlError::Comm(format!("{label}: sending failed: {e}")))?;
        for _ in 0..MAX_SKIPPED_MESSAGES {
            // Descriptors that come along (the ring-area memfd of `Welcome`) are closed here.
            let msg = match self.chan.recv::<ServerMsg>() {
                Ok((m, _fds)) => m,
                Err(e) => return Err(recv_error(&label, e)),
            };
            match msg {
                ServerMsg::Reply { seq: s, result } if s == seq => {
                    return result.map_err(|e| CtlError::from_reply(&label, e));
                }
                // A refusal before the daemon read anything (policy, full): sequence 0.
                ServerMsg::Reply {
                    seq: 0,
                    result: Err(e),
                } => return Err(CtlError::from_reply(&label, e)),
                ServerMsg::Reply { .. } | ServerMsg::Event(_) => continue,
            }
        }
        Err(CtlError::Comm(format!(
            "{label} sent {MAX_SKIPPED_MESSAGES} messages without answering request {seq}"
        )))
    }
}

impl Drop for AdminSession {
    fn drop(&mut self) {
        // Orderly goodbye; the daemon frees the session either way when the socket closes.
        let _ = self.chan.send(
            &ClientMsg {
                seq: self.next_seq,
                request: Request::Bye,
            },
            &[],
        );
    }
}

fn connect_error(label: &str, path: &Path, e: &io::Error) -> CtlError {
    let p = PathBuf::from(path).display().to_string();
    match e.kind() {
        io::ErrorKind::NotFound => {
            CtlError::NotRunning(format!("{label} is not running (no socket at {p})"))
        }
        io::ErrorKind::ConnectionRefused => CtlError::NotRunning(format!(
            "{label} is not running (nobody accepts on {p}: a stale socket of a daemon that died?)"
        )),
        io::ErrorKind::PermissionDenied => CtlError::Permission(format!(
            "permission denied connecting to {p} (run as root or as a user the daemon admits)"
        )),
        _ => CtlError::Comm(format!("cannot connect to {label} at {p}: {e}")),
    }
}

fn recv_error(label: &str, e: RecvError) -> CtlError {
    match e {
        RecvError::WouldBlock => CtlError::Comm(format!("{label} did not answer in time")),
        RecvError::Closed => CtlError::Comm(format!(
            "{label} closed the connection without answering (see the daemon's log)"
        )),
        RecvError::Frame(FrameError::Version(v)) => CtlError::Version(format!(
            "{label} speaks protocol version {v}, iwarpctl speaks {PROTOCOL_VERSION}: use the iwarpctl of the same release"
        )),
        other => CtlError::Comm(format!("{label}: bad answer: {other}")),
    }
}

fn response_name(r: &Response) -> &'static str {
    match r {
        Response::Ok => "Ok",
        Response::Welcome(_) => "Welcome",
        Response::Admin(_) => "Admin",
        _ => "an unrelated response",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use iwarp_shm_socket::Listener;

    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let d = std::env::temp_dir().join(format!("iwarpctl-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            TempDir(d)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A fake daemon: accepts one client and answers with `answer` until the client says
    /// Bye or closes; returns the requests it saw.
    fn fake_daemon(
        path: &Path,
        answer: impl Fn(&Request) -> Vec<ServerMsgTemplate> + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<Request>> {
        let l = Listener::bind(path, 4).unwrap();
        std::thread::spawn(move || {
            let c = l.accept().unwrap().unwrap();
            let mut seen = Vec::new();
            loop {
                let Ok((m, _)) = c.recv::<ClientMsg>() else {
                    break;
                };
                seen.push(m.request.clone());
                if m.request == Request::Bye {
                    break;
                }
                for t in answer(&m.request) {
                    match t {
                        ServerMsgTemplate::Reply(result) => c
                            .send(&ServerMsg::Reply { seq: m.seq, result }, &[])
                            .unwrap(),
                        ServerMsgTemplate::Raw(msg) => c.send(&msg, &[]).unwrap(),
                        ServerMsgTemplate::Close => return seen,
                    }
                }
            }
            seen
        })
    }

    enum ServerMsgTemplate {
        Reply(Result<Response, ErrorReply>),
        Raw(ServerMsg),
        Close,
    }
    use ServerMsgTemplate::*;

    fn admin_answer(req: &Request) -> Vec<ServerMsgTemplate> {
        match req {
            Request::Hello { .. } => vec![Reply(Ok(Response::Welcome(fixture::welcome())))],
            Request::Admin(AdminRequest::Status) => vec![
                // An event and a stale reply first: both skipped.
                Raw(ServerMsg::Event(iwarp_shm_socket::Event::Shutdown)),
                Raw(ServerMsg::Reply {
                    seq: 999,
                    result: Ok(Response::Ok),
                }),
                Reply(Ok(Response::Admin(
                    AdminResponse::Status(fixture::status()),
                ))),
            ],
            Request::Admin(AdminRequest::Objects(None)) => {
                vec![Reply(Ok(Response::Admin(AdminResponse::Objects(
                    fixture::objects(),
                ))))]
            }
            Request::Admin(AdminRequest::Counters) => {
                vec![Reply(Err(ErrorReply::new(ErrorCode::NotAdmin, "uid 1000")))]
            }
            _ => vec![Reply(Err(ErrorReply::new(
                ErrorCode::Internal,
                "unexpected",
            )))],
        }
    }

    #[test]
    fn a_session_greets_asks_and_says_bye() {
        let dir = TempDir::new("ok");
        let path = dir.0.join("d.verbs");
        let server = fake_daemon(&path, admin_answer);
        let mut s = AdminSession::open(&path, "iwarpd t", Duration::from_secs(5)).unwrap();
        assert_eq!(s.client_id, fixture::welcome().client_id);
        assert_eq!(
            s.admin(AdminRequest::Status).unwrap(),
            AdminResponse::Status(fixture::status())
        );
        assert_eq!(
            s.admin(AdminRequest::Objects(None)).unwrap(),
            AdminResponse::Objects(fixture::objects())
        );
        let e = s.admin(AdminRequest::Counters).unwrap_err();
        assert_eq!(e.exit_code(), 4, "{e}");
        assert!(e.to_string().contains("admin_users"), "{e}");
        drop(s);
        let seen = server.join().unwrap();
        assert!(
            matches!(&seen[0], Request::Hello { version: PROTOCOL_VERSION, name } if name == "iwarpctl")
        );
        assert_eq!(seen.last(), Some(&Request::Bye));
        assert_eq!(seen.len(), 5);
    }

    #[test]
    fn daemon_errors_map_to_exit_codes() {
        let dir = TempDir::new("err");
        type Answer = fn(&Request) -> Vec<ServerMsgTemplate>;
        let cases: [(Answer, u8, &str); 5] = [
            (
                |_| {
                    vec![Reply(Err(ErrorReply::new(
                        ErrorCode::VersionMismatch,
                        "daemon speaks 2",
                    )))]
                },
                5,
                "daemon speaks 2",
            ),
            (
                |_| {
                    vec![
                        Reply(Err(ErrorReply::new(
                            ErrorCode::PermissionDenied,
                            "uid 1000",
                        ))),
                        Close,
                    ]
                },
                4,
                "allow_users",
            ),
            (|_| vec![Close], 6, "without answering"),
            (
                |_| vec![Reply(Ok(Response::Ok))],
                6,
                "answered Hello with Ok",
            ),
            (
                |_| vec![Reply(Err(ErrorReply::new(ErrorCode::ShuttingDown, "bye")))],
                1,
                "ShuttingDown",
            ),
        ];
        for (i, (answer, code, text)) in cases.into_iter().enumerate() {
            let path = dir.0.join(format!("d{i}.verbs"));
            let server = fake_daemon(&path, answer);
            let e = AdminSession::open(&path, "iwarpd t", Duration::from_secs(5)).unwrap_err();
            assert_eq!(e.exit_code(), code, "case {i}: {e}");
            assert!(e.to_string().contains(text), "case {i}: {e}");
            server.join().unwrap();
        }
    }

    #[test]
    fn a_frame_of_another_version_is_a_version_mismatch() {
        let dir = TempDir::new("ver");
        let path = dir.0.join("d.verbs");
        let l = Listener::bind(&path, 4).unwrap();
        let server = std::thread::spawn(move || {
            let c = l.accept().unwrap().unwrap();
            let _ = c.recv::<ClientMsg>().unwrap();
            let mut b =
                iwarp_shm_socket::encode(&ServerMsg::Event(iwarp_shm_socket::Event::Shutdown))
                    .unwrap();
            b[4] = 9;
            c.send_raw(&b, &[]).unwrap();
            let _ = c.recv_raw();
        });
        let e = AdminSession::open(&path, "iwarpd t", Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.exit_code(), 5);
        assert!(e.to_string().contains("version 9"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn missing_or_stale_socket_means_not_running_and_silence_times_out() {
        let dir = TempDir::new("gone");
        let path = dir.0.join("none.verbs");
        let e = AdminSession::open(&path, "iwarpd x", Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert_eq!(
            e.to_string(),
            format!("iwarpd x is not running (no socket at {})", path.display())
        );
        // A socket file nobody listens on (the daemon was killed).
        let stale = dir.0.join("stale.verbs");
        drop(Listener::bind(&stale, 1).unwrap());
        let e = AdminSession::open(&stale, "iwarpd x", Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        assert!(e.to_string().contains("stale socket"), "{e}");
        // Somebody accepts but never answers.
        let mute = dir.0.join("mute.verbs");
        let l = Listener::bind(&mute, 1).unwrap();
        let e = AdminSession::open(&mute, "iwarpd x", Duration::from_millis(100)).unwrap_err();
        assert_eq!(e.exit_code(), 6);
        assert!(e.to_string().contains("did not answer in time"), "{e}");
        drop(l);
    }
}
