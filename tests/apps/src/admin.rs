//! A raw control-protocol client: `Hello`, then requests one at a time with their replies
//! (events in between are kept aside). The admin queries (object totals, clients) and the
//! malicious-client suite speak through it, without the client library.

use std::collections::VecDeque;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use iwarp_shm_socket::{
    AdminRequest, AdminResponse, Channel, ClientInfo, ClientMsg, DaemonStatus, ErrorReply, Event,
    ObjectTotals, RecvError, Request, Response, ServerMsg, Welcome, PROTOCOL_VERSION,
};

/// How long a reply may take.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection to a daemon's verbs socket.
pub struct RawClient {
    /// The socket.
    pub chan: Channel,
    /// What `Hello` returned.
    pub welcome: Welcome,
    /// The ring-area memfd that came with `Welcome`.
    pub ring_area: Option<OwnedFd>,
    seq: u64,
    /// Events received while waiting for replies.
    pub events: VecDeque<Event>,
}

/// A reply: the outcome and the descriptors that came with it.
pub type Reply = (Result<Response, ErrorReply>, Vec<OwnedFd>);

impl RawClient {
    /// Connects and says `Hello`.
    pub fn connect(path: &Path, name: &str) -> Result<RawClient, String> {
        let chan =
            Channel::connect(path).map_err(|e| format!("connect {}: {e}", path.display()))?;
        chan.set_recv_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let hello = ClientMsg {
            seq: 1,
            request: Request::Hello {
                version: PROTOCOL_VERSION,
                name: name.into(),
            },
        };
        // A connection refused at once (policy, full daemon) is answered and closed
        // before the daemon reads anything: the send may fail, the answer is there.
        let sent = chan.send(&hello, &[]);
        let mut c = RawClient {
            chan,
            welcome: Welcome {
                version: 0,
                client_id: 0,
                ring_area_len: 0,
                doorbells: Vec::new(),
                doorbell_bits: 0,
                device: empty_device(),
                ports: Vec::new(),
            },
            ring_area: None,
            seq: 1,
            events: VecDeque::new(),
        };
        let (result, mut fds) = c.wait_reply(1).map_err(|e| match &sent {
            Err(s) => format!("send Hello: {s}; {e}"),
            Ok(()) => e,
        })?;
        match result {
            Ok(Response::Welcome(w)) => {
                c.welcome = w;
                c.ring_area = fds.pop();
                Ok(c)
            }
            other => Err(format!("Hello answered {other:?}")),
        }
    }

    /// Sends a request with descriptors and waits for its reply.
    pub fn call_with_fds(
        &mut self,
        request: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<Reply, String> {
        self.seq += 1;
        let seq = self.seq;
        self.chan
            .send(&ClientMsg { seq, request }, fds)
            .map_err(|e| format!("send: {e}"))?;
        self.wait_reply(seq)
    }

    /// Sends a request and waits for its outcome.
    pub fn call(&mut self, request: Request) -> Result<Result<Response, ErrorReply>, String> {
        self.call_with_fds(request, &[]).map(|(r, _)| r)
    }

    /// The next sequence number (for hand-made frames).
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Waits for the reply with sequence number `seq`, keeping events aside.
    pub fn wait_reply(&mut self, seq: u64) -> Result<Reply, String> {
        let end = Instant::now() + REPLY_TIMEOUT;
        let mut reset = false;
        loop {
            if Instant::now() > end {
                return Err(format!(
                    "no reply to request {seq} within {REPLY_TIMEOUT:?}"
                ));
            }
            match self.chan.recv::<ServerMsg>() {
                Ok((ServerMsg::Reply { seq: s, result }, fds)) if s == seq => {
                    return Ok((result, fds))
                }
                // The refusal of a connection before its first message was read.
                Ok((
                    ServerMsg::Reply {
                        seq: 0,
                        result: Err(e),
                    },
                    fds,
                )) => return Ok((Err(e), fds)),
                Ok((ServerMsg::Reply { seq: s, result }, _)) => {
                    return Err(format!("reply to {s} while waiting for {seq}: {result:?}"))
                }
                Ok((ServerMsg::Event(e), _)) => self.events.push_back(e),
                Err(RecvError::WouldBlock) => {
                    return Err(format!(
                        "no reply to request {seq} within {REPLY_TIMEOUT:?}"
                    ))
                }
                // Refused and closed before the daemon read our request: the reset comes
                // first, the answer next.
                Err(RecvError::Io(e))
                    if e.kind() == std::io::ErrorKind::ConnectionReset && !reset =>
                {
                    reset = true;
                }
                Err(e) => return Err(format!("receive: {e}")),
            }
        }
    }

    /// One admin request.
    pub fn admin(&mut self, req: AdminRequest) -> Result<AdminResponse, String> {
        match self.call(Request::Admin(req))? {
            Ok(Response::Admin(a)) => Ok(a),
            other => Err(format!("admin answered {other:?}")),
        }
    }

    /// A counter of the control thread (`control_refused_policy`, ...).
    pub fn control_counter(&mut self, name: &str) -> Result<u64, String> {
        match self.admin(AdminRequest::Counters)? {
            AdminResponse::Counters(sets) => sets
                .iter()
                .flat_map(|s| s.values.iter())
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("no counter {name}")),
            other => Err(format!("Counters answered {other:?}")),
        }
    }

    /// The daemon's status.
    pub fn status(&mut self) -> Result<DaemonStatus, String> {
        match self.admin(AdminRequest::Status)? {
            AdminResponse::Status(s) => Ok(s),
            other => Err(format!("Status answered {other:?}")),
        }
    }

    /// The connected clients.
    pub fn clients(&mut self) -> Result<Vec<ClientInfo>, String> {
        match self.admin(AdminRequest::Clients)? {
            AdminResponse::Clients(c) => Ok(c),
            other => Err(format!("Clients answered {other:?}")),
        }
    }

    /// The totals of the client with id `id` (`None` if it is not connected any more).
    pub fn client_totals(&mut self, id: u32) -> Result<Option<ObjectTotals>, String> {
        Ok(self
            .clients()?
            .into_iter()
            .find(|c| c.id == id)
            .map(|c| c.totals))
    }
}

fn empty_device() -> iwarp_shm_socket::DeviceAttr {
    iwarp_shm_socket::DeviceAttr {
        vendor: String::new(),
        daemon: String::new(),
        version: String::new(),
        ports: 0,
        cores: 0,
        max_qp: 0,
        max_qp_wr: 0,
        max_sge: 0,
        max_cq: 0,
        max_cqe: 0,
        max_mr: 0,
        max_mr_size: 0,
        max_pd: 0,
        max_srq: 0,
        max_srq_wr: 0,
        max_ird: 0,
        max_ord: 0,
        max_arena_bytes: 0,
        max_private_data: 0,
        memory_windows: false,
        srq: false,
    }
}

/// Totals minus the admin client's own (which holds nothing): true if nothing is held.
pub fn is_zero(t: &ObjectTotals) -> bool {
    *t == ObjectTotals::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_totals() {
        assert!(is_zero(&ObjectTotals::default()));
        assert!(!is_zero(&ObjectTotals {
            arena_bytes: 1,
            ..ObjectTotals::default()
        }));
    }

    #[test]
    fn a_missing_socket_is_an_error_not_a_panic() {
        let e = RawClient::connect(Path::new("/nonexistent/apps.verbs"), "t")
            .err()
            .expect("error");
        assert!(e.contains("/nonexistent/apps.verbs"), "{e}");
    }
}
