//! A message channel over a unix `SOCK_SEQPACKET` socket, with file descriptors passed
//! as `SCM_RIGHTS` and the peer's credentials from `SO_PEERCRED`.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use rustix::net::{
    self, sockopt, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags,
    ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags,
    SocketType,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::frame::{decode, encode, FrameError};
use crate::MAX_MESSAGE_BYTES;

/// Most descriptors accepted beside one message.
pub const MAX_FDS: usize = 4;

/// The process at the other end of a channel, as the kernel saw it at `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: u32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// Why a receive produced no message.
#[derive(Debug)]
pub enum RecvError {
    /// The peer closed the socket.
    Closed,
    /// Nothing there (non-blocking socket) or the receive timeout expired.
    WouldBlock,
    /// The socket failed.
    Io(io::Error),
    /// A datagram that is not a message (the descriptors that came with it are closed).
    Frame(FrameError),
    /// The datagram or its descriptors were truncated.
    Truncated,
}

impl core::fmt::Display for RecvError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RecvError::Closed => f.write_str("connection closed by peer"),
            RecvError::WouldBlock => f.write_str("no message"),
            RecvError::Io(e) => write!(f, "{e}"),
            RecvError::Frame(e) => write!(f, "{e}"),
            RecvError::Truncated => f.write_str("message or descriptors truncated"),
        }
    }
}

impl std::error::Error for RecvError {}

fn seqpacket() -> io::Result<OwnedFd> {
    Ok(net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    Ok(rustix::io::ioctl_fionbio(fd, on)?)
}

/// One end of a connected `SOCK_SEQPACKET` socket.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> io::Result<Channel> {
        let fd = seqpacket()?;
        let addr = SocketAddrUnix::new(path)?;
        net::connect(&fd, &addr)?;
        Ok(Channel { fd })
    }

    /// A connected pair (tests; a client inside the daemon's process).
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let (a, b) = net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// Wraps an accepted or inherited socket.
    pub fn from_fd(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    /// The credentials of the peer process (`SO_PEERCRED`).
    pub fn peer_cred(&self) -> io::Result<PeerCred> {
        let c = sockopt::socket_peercred(&self.fd)?;
        Ok(PeerCred {
            pid: c.pid.as_raw_nonzero().get() as u32,
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
        })
    }

    /// Blocks at most `timeout` in `recv` (`None`: forever).
    pub fn set_recv_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        Ok(sockopt::set_socket_timeout(
            &self.fd,
            sockopt::Timeout::Recv,
            timeout,
        )?)
    }

    /// Blocks at most `timeout` in `send` (`None`: forever).
    pub fn set_send_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        Ok(sockopt::set_socket_timeout(
            &self.fd,
            sockopt::Timeout::Send,
            timeout,
        )?)
    }

    /// Non-blocking mode on or off.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        set_nonblocking(self.fd.as_fd(), on)
    }

    /// Sends one message with up to [`MAX_FDS`] descriptors.
    pub fn send<T: Serialize>(&self, msg: &T, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let bytes = encode(msg).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.send_raw(&bytes, fds)
    }

    /// Sends bytes as one datagram (the malicious-client tests send non-messages).
    pub fn send_raw(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many descriptors",
            ));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut cmsg = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "descriptors do not fit",
            ));
        }
        let iov = [IoSlice::new(bytes)];
        loop {
            match net::sendmsg(&self.fd, &iov, &mut cmsg, SendFlags::NOSIGNAL) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Receives one datagram's bytes and descriptors.
    pub fn recv_raw(&self) -> Result<(Vec<u8>, Vec<OwnedFd>), RecvError> {
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES + 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        loop {
            let mut cmsg = RecvAncillaryBuffer::new(&mut space);
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = match net::recvmsg(&self.fd, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC) {
                Ok(m) => m,
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return Err(RecvError::WouldBlock),
                Err(e) => return Err(RecvError::Io(e.into())),
            };
            let mut fds = Vec::new();
            for m in cmsg.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = m {
                    fds.extend(received);
                }
            }
            let n = msg.bytes;
            let truncated = msg
                .flags
                .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC);
            if n == 0 && fds.is_empty() && !truncated {
                return Err(RecvError::Closed);
            }
            if truncated || n > MAX_MESSAGE_BYTES {
                return Err(RecvError::Truncated);
            }
            buf.truncate(n);
            return Ok((buf, fds));
        }
    }

    /// Receives one message and its descriptors.
    pub fn recv<T: DeserializeOwned>(&self) -> Result<(T, Vec<OwnedFd>), RecvError> {
        let (bytes, fds) = self.recv_raw()?;
        match decode(&bytes) {
            Ok(m) => Ok((m, fds)),
            Err(e) => Err(RecvError::Frame(e)),
        }
    }

    /// Shuts both directions down (the peer sees end of file; a blocked `recv` here
    /// returns).
    pub fn shutdown(&self) {
        let _ = net::shutdown(&self.fd, net::Shutdown::Both);
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Channel {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A listening `SOCK_SEQPACKET` socket.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Binds and listens at `path` (a stale socket file there must be removed first).
    pub fn bind(path: &Path, backlog: i32) -> io::Result<Listener> {
        let fd = seqpacket()?;
        let addr = SocketAddrUnix::new(path)?;
        net::bind(&fd, &addr)?;
        net::listen(&fd, backlog)?;
        Ok(Listener { fd })
    }

    /// Non-blocking accepts on or off.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        set_nonblocking(self.fd.as_fd(), on)
    }

    /// Accepts one connection (`Ok(None)` when non-blocking and nobody waits).
    pub fn accept(&self) -> io::Result<Option<Channel>> {
        match net::accept_with(&self.fd, SocketFlags::CLOEXEC) {
            Ok(fd) => Ok(Some(Channel { fd })),
            Err(rustix::io::Errno::AGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientMsg, Request};

    #[test]
    fn messages_fds_and_credentials_cross_a_pair() {
        let (a, b) = Channel::pair().unwrap();
        let m = ClientMsg {
            seq: 3,
            request: Request::CreateChannel,
        };
        let (r, w) = rustix::pipe::pipe().unwrap();
        a.send(&m, &[w.as_fd()]).unwrap();
        drop(w);
        let (got, fds): (ClientMsg, _) = b.recv().unwrap();
        assert_eq!(got, m);
        assert_eq!(fds.len(), 1);
        rustix::io::write(&fds[0], b"x").unwrap();
        let mut one = [0u8; 1];
        rustix::io::read(&r, &mut one).unwrap();
        assert_eq!(&one, b"x");
        let cred = b.peer_cred().unwrap();
        assert_eq!(cred.pid, std::process::id());
        // Garbage is a frame error, not a panic; close is `Closed`.
        a.send_raw(b"garbage!", &[]).unwrap();
        assert!(matches!(b.recv::<ClientMsg>(), Err(RecvError::Frame(_))));
        b.set_nonblocking(true).unwrap();
        assert!(matches!(b.recv::<ClientMsg>(), Err(RecvError::WouldBlock)));
        drop(a);
        assert!(matches!(b.recv::<ClientMsg>(), Err(RecvError::Closed)));
    }

    #[test]
    fn listener_accepts() {
        let dir = std::env::temp_dir().join(format!("iwvp-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.verbs");
        let _ = std::fs::remove_file(&path);
        let l = Listener::bind(&path, 4).unwrap();
        l.set_nonblocking(true).unwrap();
        assert!(l.accept().unwrap().is_none());
        let c = Channel::connect(&path).unwrap();
        let s = l.accept().unwrap().unwrap();
        c.send(
            &ClientMsg {
                seq: 1,
                request: Request::AllocPd,
            },
            &[],
        )
        .unwrap();
        let (m, _): (ClientMsg, _) = s.recv().unwrap();
        assert_eq!(m.seq, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
