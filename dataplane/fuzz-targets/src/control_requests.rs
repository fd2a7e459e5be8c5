//! Fuzz target `control_requests`: a client's datagrams as the control server decodes and
//! serves them (`iwarp_control::testkit`: fake cores behind the real server, a peer on a
//! socket pair).
//!
//! The input is a program: each step sends one datagram, either a valid request with a few
//! bytes changed (handles, sizes and variants the fuzzer picks) or raw bytes, then lets
//! the server run. Checked: nothing panics; every request the server could decode gets
//! its reply; when the client goes, its objects go with it (the fake cores end with none
//! alive); and the server still welcomes a new client and serves it.

use std::time::Duration;

use iwarp_control::testkit::{connect, server, Peer};
use iwarp_shm_socket::{
    frame, AccessFlags, Addr, ArenaHandle, ClientMsg, CmIdHandle, CqCreate, CqHandle, MrReg,
    PdHandle, QpCreate, QpHandle, RecvError, Request, Response, ServerMsg,
};

use crate::cursor::Cursor;

/// Datagrams of one program.
const STEPS_MAX: usize = 32;
/// Largest raw datagram drawn from the input.
const RAW_BYTES_MAX: usize = 512;

/// The handle of a client's first object of each kind (generation 1, index 0).
const FIRST: u32 = 0x0010_0000;

/// Valid requests naming each client's first objects: unchanged and in order, a client's
/// whole life; changed, every handler with handles, sizes and variants it did not expect.
fn templates() -> Vec<Request> {
    let qp = QpCreate::new(PdHandle(FIRST), CqHandle(FIRST));
    vec![
        Request::AllocPd,
        Request::CreateCq(CqCreate {
            depth: 16,
            channel: None,
        }),
        Request::CreateQp(qp),
        Request::AllocArena {
            len: 8192,
            hugepages_required: false,
        },
        Request::RegMr(MrReg {
            pd: PdHandle(FIRST),
            arena: ArenaHandle(FIRST),
            offset: 0,
            len: 4096,
            va: 0,
            zero_based: true,
            access: AccessFlags::LOCAL_WRITE,
        }),
        Request::CreateCmId,
        Request::Listen {
            id: CmIdHandle(FIRST),
            addr: Addr {
                ip: [0; 4],
                port: 7000,
            },
            backlog: 4,
        },
        Request::QueryQp(QpHandle(FIRST)),
        Request::DestroyQp(QpHandle(FIRST)),
        Request::DestroyCq(CqHandle(FIRST)),
        Request::DeallocPd(PdHandle(FIRST)),
        Request::QueryDevice,
    ]
}

/// The body of the `control_requests` target.
pub fn control_requests(data: &[u8]) {
    let _ = run(data);
}

/// Runs one program; returns the replies the client read.
fn run(data: &[u8]) -> Vec<ServerMsg> {
    let mut replies = Vec::new();
    let mut c = Cursor::new(data);
    let (mut s, log, _regions) = server(false);
    let (mut p, _) = connect(&mut s);
    let templates = templates();
    let mut seq = 1u64;
    for _ in 0..STEPS_MAX {
        if c.is_empty() {
            break;
        }
        let bytes = if c.u8().is_multiple_of(4) {
            let n = c.below(RAW_BYTES_MAX + 1);
            c.take(n).to_vec()
        } else {
            seq += 1;
            let request = templates[c.below(templates.len())].clone();
            let Ok(mut b) = frame::encode(&ClientMsg { seq, request }) else {
                continue;
            };
            c.change_bytes(&mut b, 4);
            b
        };
        if p.chan.send_raw(&bytes, &[]).is_err() {
            break;
        }
        serve(&mut s, &mut p, &mut replies);
    }
    drop(p);
    for _ in 0..4 {
        s.step(Duration::ZERO);
    }
    assert_eq!(log.lock().unwrap().live, 0, "objects outlived their client");
    // The server is not wedged: a new client is welcomed and served.
    let (mut q, _) = connect(&mut s);
    let (r, _) = q.call(&mut s, Request::AllocPd);
    assert!(matches!(r, Ok(Response::Pd(_))), "{r:?}");
    replies
}

/// Steps the server and reads what it answers until it has nothing more to say (the
/// server may also have closed the peer for a malformed message).
fn serve<C: iwarp_control::CoreLink>(
    s: &mut iwarp_control::ControlServer<C>,
    p: &mut Peer,
    replies: &mut Vec<ServerMsg>,
) {
    for _ in 0..8 {
        s.step(Duration::ZERO);
        loop {
            match p.chan.recv::<ServerMsg>() {
                Ok((m, _)) => replies.push(m),
                Err(RecvError::WouldBlock) => break,
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The templates unchanged, in order, are a client's life: every one is served.
    #[test]
    fn the_templates_in_order_are_all_served() {
        let program: Vec<u8> = (0..templates().len() as u8)
            .flat_map(|t| [1, 0, t, 0])
            .collect();
        let replies = run(&program);
        let results: Vec<_> = replies
            .iter()
            .filter_map(|m| match m {
                ServerMsg::Reply { result, .. } => Some(result),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), templates().len(), "{replies:?}");
        // AllocPd, CreateCq, CreateQp, AllocArena, RegMr, CreateCmId, Listen, QueryQp,
        // DestroyQp, DestroyCq: done. DeallocPd: refused, the MR still holds the PD (and
        // goes with the client). QueryDevice: done.
        for (i, r) in results.iter().enumerate() {
            match i {
                10 => assert!(
                    matches!(r, Err(e) if e.code == iwarp_shm_socket::ErrorCode::InUse),
                    "{r:?}"
                ),
                _ => assert!(r.is_ok(), "template {i}: {r:?}"),
            }
        }
    }
}
