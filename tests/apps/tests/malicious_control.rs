//! The malicious-client suite, control half: each kind of bad control message (garbage
//! frames, wrong versions, out-of-order Hello, unknown handles, another client's handles,
//! huge lengths, missing / extra / wrong descriptors) is answered with an error (or the
//! connection is closed for frames that cannot be answered) and nothing else is touched:
//! the attacker's and a victim's objects are unchanged and the daemon keeps serving.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use iwarp_apps::admin::{RawClient, REPLY_TIMEOUT};
use iwarp_apps::{skip, Daemon, SystemLock};
use iwarp_shm_socket::*;

/// What came back for one message.
#[derive(Debug)]
enum Outcome {
    Reply(Result<Response, ErrorReply>),
    Closed,
    NoAnswer,
    #[allow(dead_code)] // printed through Debug
    Broken(String),
}

/// Receives the next reply (any sequence number), skipping events.
fn next_reply(c: &RawClient) -> Outcome {
    loop {
        match c.chan.recv::<ServerMsg>() {
            Ok((ServerMsg::Reply { result, .. }, _)) => return Outcome::Reply(result),
            Ok((ServerMsg::Event(_), _)) => continue,
            Err(RecvError::Closed) => return Outcome::Closed,
            Err(RecvError::WouldBlock) => return Outcome::NoAnswer,
            Err(RecvError::Io(e)) if e.raw_os_error() == Some(libc_econnreset()) => {
                return Outcome::Closed
            }
            Err(e) => return Outcome::Broken(e.to_string()),
        }
    }
}

fn libc_econnreset() -> i32 {
    rustix::io::Errno::CONNRESET.raw_os_error()
}

struct Suite {
    failures: Vec<String>,
    cases: usize,
}

impl Suite {
    fn fail(&mut self, case: &str, why: String) {
        eprintln!("FAIL {case}: {why}");
        self.failures.push(format!("{case}: {why}"));
    }

    /// The request must fail with one of `codes`.
    fn expect_err(
        &mut self,
        case: &str,
        got: Result<Result<Response, ErrorReply>, String>,
        codes: &[ErrorCode],
    ) {
        self.cases += 1;
        match got {
            Ok(Err(e)) if codes.contains(&e.code) => eprintln!("ok   {case}: {e}"),
            Ok(Err(e)) => self.fail(case, format!("error {e}, expected one of {codes:?}")),
            Ok(Ok(r)) => self.fail(case, format!("accepted: {r:?}")),
            Err(e) => self.fail(case, format!("no reply: {e}")),
        }
    }

    /// An unanswerable frame: an error reply or a closed connection, never silence.
    fn expect_err_or_close(&mut self, case: &str, got: Outcome) {
        self.cases += 1;
        match got {
            Outcome::Reply(Err(e)) => eprintln!("ok   {case}: {e}"),
            Outcome::Closed => eprintln!("ok   {case}: connection closed"),
            other => self.fail(case, format!("expected an error or a close, got {other:?}")),
        }
    }
}

fn eventfd() -> OwnedFd {
    rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).expect("eventfd")
}

fn memfd(len: u64, sealed: bool) -> OwnedFd {
    let fd = rustix::fs::memfd_create(
        "apps-test",
        rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
    )
    .expect("memfd");
    rustix::fs::ftruncate(&fd, len).expect("ftruncate");
    if sealed {
        rustix::fs::fcntl_add_seals(
            &fd,
            rustix::fs::SealFlags::SHRINK
                | rustix::fs::SealFlags::GROW
                | rustix::fs::SealFlags::SEAL,
        )
        .expect("seal");
    }
    fd
}

/// Sends `bytes` with any number of descriptors (more than the protocol's `MAX_FDS`).
fn send_with_fds(c: &RawClient, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(16))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    assert!(cmsg.push(SendAncillaryMessage::ScmRights(fds)));
    let iov = [std::io::IoSlice::new(bytes)];
    rustix::net::sendmsg(c.chan.as_fd(), &iov, &mut cmsg, SendFlags::NOSIGNAL).expect("sendmsg");
}

fn frame(seq: u64, request: Request) -> Vec<u8> {
    encode(&ClientMsg { seq, request }).expect("encode")
}

fn ok<T: core::fmt::Debug>(
    what: &str,
    r: Result<Result<Response, ErrorReply>, String>,
    f: impl FnOnce(Response) -> Option<T>,
) -> T {
    match r {
        Ok(Ok(resp)) => f(resp.clone()).unwrap_or_else(|| panic!("{what}: unexpected {resp:?}")),
        other => panic!("{what}: {other:?}"),
    }
}

/// What a victim holds.
struct Victim {
    c: RawClient,
    pd: PdHandle,
    arena: ArenaHandle,
    mr: StagValue,
    cq: CqHandle,
    chan: ChannelHandle,
    cm: CmIdHandle,
    mr_info: MrInfoReply,
    _arena_fd: Option<OwnedFd>,
    _event_fd: OwnedFd,
}

fn victim(d: &Daemon) -> Victim {
    let mut c = RawClient::connect(&d.socket, "victim").expect("victim connects");
    let pd = ok("victim AllocPd", c.call(Request::AllocPd), |r| match r {
        Response::Pd(p) => Some(p),
        _ => None,
    });
    let (r, mut fds) = c
        .call_with_fds(
            Request::AllocArena {
                len: 1 << 20,
                hugepages_required: false,
            },
            &[],
        )
        .expect("AllocArena");
    let arena = ok("victim AllocArena", Ok(r), |r| match r {
        Response::Arena { arena, .. } => Some(arena),
        _ => None,
    });
    let reg = MrReg {
        pd,
        arena,
        offset: 0,
        len: 1 << 20,
        va: 0,
        zero_based: true,
        access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    };
    let mr = ok("victim RegMr", c.call(Request::RegMr(reg)), |r| match r {
        Response::Stag(s) => Some(s),
        _ => None,
    });
    let efd = eventfd();
    let chan = ok(
        "victim CreateChannel",
        c.call_with_fds(Request::CreateChannel, &[efd.as_fd()])
            .map(|(r, _)| r),
        |r| match r {
            Response::Channel(h) => Some(h),
            _ => None,
        },
    );
    let cq = ok(
        "victim CreateCq",
        c.call(Request::CreateCq(CqCreate {
            depth: 64,
            channel: Some(chan),
        })),
        |r| match r {
            Response::Cq(c) => Some(c.cq),
            _ => None,
        },
    );
    let cm = ok(
        "victim CreateCmId",
        c.call(Request::CreateCmId),
        |r| match r {
            Response::CmId(h) => Some(h),
            _ => None,
        },
    );
    let mr_info = ok(
        "victim QueryMr",
        c.call(Request::QueryMr(mr)),
        |r| match r {
            Response::MrInfo(i) => Some(i),
            _ => None,
        },
    );
    Victim {
        c,
        pd,
        arena,
        mr,
        cq,
        chan,
        cm,
        mr_info,
        _arena_fd: fds.pop(),
        _event_fd: efd,
    }
}

#[test]
fn bad_control_messages_get_errors_and_touch_nothing() {
    if skip("bad_control_messages_get_errors_and_touch_nothing") {
        return;
    }
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("mctl");
    let mut admin = d.admin();
    let mut s = Suite {
        failures: Vec::new(),
        cases: 0,
    };
    let mut v = victim(&d);
    let victim_totals = admin
        .client_totals(v.c.welcome.client_id)
        .unwrap()
        .expect("victim listed");
    use ErrorCode::*;
    let no_such = [
        NoSuchObject,
        InvalidPd,
        InvalidCq,
        InvalidQp,
        InvalidSrq,
        InvalidStag,
    ];

    // --- Another client's handles (the attacker holds nothing yet, so no value of its
    // own can coincide with the victim's).
    let mut a = RawClient::connect(&d.socket, "attacker").expect("attacker connects");
    let aid = a.welcome.client_id;
    s.expect_err(
        "foreign PD dealloc",
        a.call(Request::DeallocPd(v.pd)),
        &no_such,
    );
    s.expect_err(
        "foreign arena free",
        a.call(Request::FreeArena(v.arena)),
        &no_such,
    );
    s.expect_err("foreign MR dereg", a.call(Request::DeregMr(v.mr)), &no_such);
    s.expect_err("foreign MR query", a.call(Request::QueryMr(v.mr)), &no_such);
    s.expect_err(
        "foreign MR rereg",
        a.call(Request::ReregMr {
            stag: v.mr,
            reg: MrReg {
                pd: v.pd,
                arena: v.arena,
                offset: 0,
                len: 4096,
                va: 0,
                zero_based: true,
                access: AccessFlags::ALL,
            },
        }),
        &no_such,
    );
    s.expect_err(
        "foreign CQ destroy",
        a.call(Request::DestroyCq(v.cq)),
        &no_such,
    );
    s.expect_err(
        "foreign CQ resize",
        a.call(Request::ResizeCq { cq: v.cq, depth: 8 }),
        &no_such,
    );
    s.expect_err(
        "foreign channel destroy",
        a.call(Request::DestroyChannel(v.chan)),
        &no_such,
    );
    s.expect_err(
        "foreign CM id destroy",
        a.call(Request::DestroyCmId(v.cm)),
        &no_such,
    );
    s.expect_err(
        "foreign CM id listen",
        a.call(Request::Listen {
            id: v.cm,
            addr: d.addr(9100),
            backlog: 4,
        }),
        &no_such,
    );
    s.expect_err(
        "foreign CM id disconnect",
        a.call(Request::Disconnect(v.cm)),
        &no_such,
    );
    s.expect_err(
        "foreign CQ and PD in CreateQp",
        a.call(Request::CreateQp(QpCreate::new(v.pd, v.cq))),
        &no_such,
    );
    s.expect_err(
        "foreign CQ with its channel",
        a.call(Request::CreateCq(CqCreate {
            depth: 8,
            channel: Some(v.chan),
        })),
        &no_such,
    );
    // Now the attacker's own PD: the victim's arena and MR remain out of reach.
    let apd = ok("attacker AllocPd", a.call(Request::AllocPd), |r| match r {
        Response::Pd(p) => Some(p),
        _ => None,
    });
    s.expect_err(
        "RegMr over a foreign arena",
        a.call(Request::RegMr(MrReg {
            pd: apd,
            arena: v.arena,
            offset: 0,
            len: 4096,
            va: 0,
            zero_based: true,
            access: AccessFlags::ALL,
        })),
        &no_such,
    );
    s.expect_err(
        "Bind type 1 MW to a foreign MR",
        {
            let mw = ok(
                "attacker AllocMw",
                a.call(Request::AllocMw {
                    pd: apd,
                    kind: MwKind::Type1,
                }),
                |r| match r {
                    Response::Stag(s) => Some(s),
                    _ => None,
                },
            );
            a.call(Request::BindMw(MwBindReq {
                mw,
                mr: v.mr,
                va: 0,
                len: 4096,
                access: AccessFlags::REMOTE_READ,
                zero_based: true,
            }))
        },
        &[NoSuchObject, InvalidStag, InvalidPd, InvalidArgument],
    );

    // --- Unknown handles.
    s.expect_err(
        "unknown PD",
        a.call(Request::DeallocPd(PdHandle(0xdead_beef))),
        &no_such,
    );
    s.expect_err(
        "unknown CQ",
        a.call(Request::DestroyCq(CqHandle(0x7777_0001))),
        &no_such,
    );
    s.expect_err(
        "unknown QP modify",
        a.call(Request::ModifyQp {
            qp: QpHandle(0x1234_5678),
            modify: QpModifyReq::default(),
        }),
        &no_such,
    );
    s.expect_err(
        "unknown QP query",
        a.call(Request::QueryQp(QpHandle(u32::MAX))),
        &no_such,
    );
    s.expect_err(
        "unknown SRQ",
        a.call(Request::QuerySrq(SrqHandle(42_000))),
        &no_such,
    );
    s.expect_err(
        "unknown STag",
        a.call(Request::DeregMr(StagValue(0x00ff_ff00))),
        &no_such,
    );
    s.expect_err(
        "unknown arena",
        a.call(Request::FreeArena(ArenaHandle(9999))),
        &no_such,
    );
    s.expect_err(
        "unknown CM id",
        a.call(Request::Accept {
            id: CmIdHandle(31337),
            qp: QpHandle(1),
            param: ConnParam::default(),
        }),
        &no_such,
    );

    // --- Huge lengths and counts.
    let big = [
        InvalidArgument,
        LimitReached,
        OutOfMemory,
        InsufficientResources,
        InvalidCqSize,
        TooManyWrsOrSges,
        InvalidLength,
    ];
    s.expect_err(
        "arena of 2^64-1 bytes",
        a.call(Request::AllocArena {
            len: u64::MAX,
            hugepages_required: false,
        }),
        &big,
    );
    s.expect_err(
        "arena of 1 TiB",
        a.call(Request::AllocArena {
            len: 1 << 40,
            hugepages_required: false,
        }),
        &big,
    );
    s.expect_err(
        "CQ of 2^32-1 entries",
        a.call(Request::CreateCq(CqCreate {
            depth: u32::MAX,
            channel: None,
        })),
        &big,
    );
    let acq = ok(
        "attacker CreateCq",
        a.call(Request::CreateCq(CqCreate {
            depth: 16,
            channel: None,
        })),
        |r| match r {
            Response::Cq(c) => Some(c.cq),
            _ => None,
        },
    );
    s.expect_err(
        "CQ resize to 2^32-1",
        a.call(Request::ResizeCq {
            cq: acq,
            depth: u32::MAX,
        }),
        &big,
    );
    let huge_qp = |sge: u32, wr: u32| QpCreate {
        cap: QpCap {
            max_send_wr: wr,
            max_recv_wr: wr,
            max_send_sge: sge,
            max_recv_sge: sge,
        },
        bind_enabled: true,
        ..QpCreate::new(apd, acq)
    };
    s.expect_err(
        "QP of 2^32-1 WRs",
        a.call(Request::CreateQp(huge_qp(1, u32::MAX))),
        &big,
    );
    s.expect_err(
        "QP of 1000 SGEs",
        a.call(Request::CreateQp(huge_qp(1000, 8))),
        &big,
    );
    s.expect_err(
        "QP with ORD 2^32-1",
        a.call(Request::CreateQp(QpCreate {
            ord: u32::MAX,
            ird: u32::MAX,
            ..huge_qp(1, 8)
        })),
        &[InvalidIrdOrd, InvalidArgument, LimitReached],
    );
    s.expect_err(
        "SRQ of 2^32-1 WRs",
        a.call(Request::CreateSrq(SrqCreate {
            pd: apd,
            max_wr: u32::MAX,
            max_sge: 1,
            limit: 0,
        })),
        &big,
    );
    s.expect_err(
        "fast-register MR of 2^64-1 bytes",
        a.call(Request::AllocMr {
            pd: apd,
            max_len: u64::MAX,
        }),
        &big,
    );
    let (r, _fds) = a
        .call_with_fds(
            Request::AllocArena {
                len: 65536,
                hugepages_required: false,
            },
            &[],
        )
        .expect("AllocArena");
    let aarena = ok("attacker AllocArena", Ok(r), |r| match r {
        Response::Arena { arena, .. } => Some(arena),
        _ => None,
    });
    let mr_over = |offset: u64, len: u64| MrReg {
        pd: apd,
        arena: aarena,
        offset,
        len,
        va: 0,
        zero_based: true,
        access: AccessFlags::LOCAL_WRITE,
    };
    let bounds = [InvalidArgument, InvalidLength, InvalidVa];
    s.expect_err(
        "MR past its arena",
        a.call(Request::RegMr(mr_over(0, 65537))),
        &bounds,
    );
    s.expect_err(
        "MR at an offset past its arena",
        a.call(Request::RegMr(mr_over(65536, 1))),
        &bounds,
    );
    s.expect_err(
        "MR whose offset + len wraps",
        a.call(Request::RegMr(mr_over(u64::MAX - 10, 4096))),
        &bounds,
    );
    s.expect_err(
        "MR with undefined access bits",
        a.call(Request::RegMr(MrReg {
            access: AccessFlags(0xffff_0000),
            ..mr_over(0, 4096)
        })),
        &[InvalidAccessRights, InvalidArgument],
    );
    let acm = ok(
        "attacker CreateCmId",
        a.call(Request::CreateCmId),
        |r| match r {
            Response::CmId(h) => Some(h),
            _ => None,
        },
    );
    s.expect_err(
        "Reject with 4 KiB private data",
        a.call(Request::Reject {
            id: acm,
            private_data: vec![7; 4096],
        }),
        &[InvalidArgument, InvalidCmState],
    );
    s.expect_err(
        "Connect with 4 KiB private data",
        a.call(Request::Connect {
            id: acm,
            qp: QpHandle(1),
            remote: Addr {
                ip: [198, 18, 0, 2],
                port: 9000,
            },
            param: ConnParam {
                private_data: vec![1; 4096],
                ..ConnParam::default()
            },
        }),
        &[InvalidArgument, NoSuchObject, InvalidQp],
    );

    // --- Descriptors: missing, extra, too many, of the wrong kind.
    let fd_errors = [BadFd, InvalidArgument, BadMessage];
    s.expect_err(
        "CreateChannel without its eventfd",
        a.call(Request::CreateChannel),
        &fd_errors,
    );
    let (e1, e2) = (eventfd(), eventfd());
    s.expect_err(
        "CreateChannel with two eventfds",
        a.call_with_fds(Request::CreateChannel, &[e1.as_fd(), e2.as_fd()])
            .map(|(r, _)| r),
        &fd_errors,
    );
    s.expect_err(
        "AllocPd with a stray descriptor",
        a.call_with_fds(Request::AllocPd, &[e1.as_fd()])
            .map(|(r, _)| r),
        &fd_errors,
    );
    let m = memfd(4096, true);
    s.expect_err(
        "CreateChannel with a memfd",
        a.call_with_fds(Request::CreateChannel, &[m.as_fd()])
            .map(|(r, _)| r),
        &fd_errors,
    );
    let (pr, _pw) = rustix::pipe::pipe().expect("pipe");
    s.expect_err(
        "ImportArena of a pipe",
        a.call_with_fds(Request::ImportArena { len: 4096 }, &[pr.as_fd()])
            .map(|(r, _)| r),
        &fd_errors,
    );
    let unsealed = memfd(8192, false);
    s.expect_err(
        "ImportArena of an unsealed memfd",
        a.call_with_fds(Request::ImportArena { len: 8192 }, &[unsealed.as_fd()])
            .map(|(r, _)| r),
        &[BadFd, InvalidArgument],
    );
    let small = memfd(4096, true);
    s.expect_err(
        "ImportArena longer than its memfd",
        a.call_with_fds(Request::ImportArena { len: 1 << 30 }, &[small.as_fd()])
            .map(|(r, _)| r),
        &[BadFd, InvalidArgument, LimitReached],
    );
    s.expect_err(
        "ImportArena without a descriptor",
        a.call(Request::ImportArena { len: 4096 }),
        &fd_errors,
    );
    let many: Vec<OwnedFd> = (0..12).map(|_| eventfd()).collect();
    let borrowed: Vec<BorrowedFd<'_>> = many.iter().map(|f| f.as_fd()).collect();
    let seq = a.next_seq();
    send_with_fds(&a, &frame(seq, Request::CreateChannel), &borrowed);
    a.chan.set_recv_timeout(Some(REPLY_TIMEOUT)).unwrap();
    s.expect_err_or_close("CreateChannel with 12 descriptors", next_reply(&a));
    drop(a);

    // --- Frames that are not messages, each on a fresh connection after Hello.
    let raw_case = |s: &mut Suite, name: &str, bytes: Vec<u8>| {
        let c = RawClient::connect(&d.socket, "garbage").expect("connect");
        c.chan.set_recv_timeout(Some(REPLY_TIMEOUT)).unwrap();
        match c.chan.send_raw(&bytes, &[]) {
            Ok(()) => s.expect_err_or_close(name, next_reply(&c)),
            // The kernel refuses a datagram larger than the socket buffer: fine.
            Err(e) => eprintln!("ok   {name}: the kernel refused it ({e})"),
        }
    };
    raw_case(
        &mut s,
        "garbage frame",
        b"this is not a frame at all, just bytes".to_vec(),
    );
    raw_case(
        &mut s,
        "empty-bodied frame",
        b"IWVP\x01\x00\x00\x00".to_vec(),
    );
    let mut wrong_version = frame(77, Request::AllocPd);
    wrong_version[4] = 9;
    raw_case(&mut s, "frame of protocol version 9", wrong_version);
    let mut wrong_magic = frame(78, Request::AllocPd);
    wrong_magic[0] = b'X';
    raw_case(&mut s, "frame with a wrong magic", wrong_magic);
    let mut trailing = frame(79, Request::AllocPd);
    trailing.extend_from_slice(&[0; 5]);
    raw_case(&mut s, "frame with trailing bytes", trailing);
    let mut truncated = frame(
        80,
        Request::RegMr(MrReg {
            pd: PdHandle(1),
            arena: ArenaHandle(1),
            offset: 0,
            len: 1,
            va: 0,
            zero_based: true,
            access: AccessFlags(0),
        }),
    );
    truncated.truncate(truncated.len() - 3);
    raw_case(&mut s, "truncated body", truncated);
    let mut unknown_variant = frame(81, Request::AllocPd);
    let n = unknown_variant.len();
    unknown_variant[n - 1] = 200;
    raw_case(&mut s, "unknown request variant", unknown_variant);
    let mut huge = b"IWVP\x01\x00\x00\x00".to_vec();
    huge.resize(MAX_MESSAGE_BYTES + 4096, 0xAB);
    raw_case(&mut s, "datagram over 64 KiB", huge);

    // --- Hello out of order and of another version.
    {
        let c = Channel::connect(&d.socket).expect("connect");
        c.set_recv_timeout(Some(REPLY_TIMEOUT)).unwrap();
        c.send(
            &ClientMsg {
                seq: 1,
                request: Request::AllocPd,
            },
            &[],
        )
        .unwrap();
        let got = match c.recv::<ServerMsg>() {
            Ok((ServerMsg::Reply { result, .. }, _)) => Ok(result),
            other => Err(format!("{other:?}")),
        };
        s.expect_err("request before Hello", got, &[NotReady, BadMessage]);
    }
    {
        let c = Channel::connect(&d.socket).expect("connect");
        c.set_recv_timeout(Some(REPLY_TIMEOUT)).unwrap();
        c.send(
            &ClientMsg {
                seq: 1,
                request: Request::Hello {
                    version: PROTOCOL_VERSION + 1,
                    name: "future".into(),
                },
            },
            &[],
        )
        .unwrap();
        let got = match c.recv::<ServerMsg>() {
            Ok((ServerMsg::Reply { result, .. }, _)) => Ok(result),
            other => Err(format!("{other:?}")),
        };
        s.expect_err("Hello of version 2", got, &[VersionMismatch]);
    }
    {
        let mut c = RawClient::connect(&d.socket, "twice").expect("connect");
        let got = c.call(Request::Hello {
            version: PROTOCOL_VERSION,
            name: "again".into(),
        });
        s.expect_err("second Hello", got, &[NotReady, BadMessage]);
    }

    // --- A user the policy does not admit (nobody, uid 65534).
    {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        // A copy nobody may execute (the target directory may not be reachable).
        let dir = std::env::temp_dir().join(format!("apps-unpriv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join("apps-unprivileged");
        std::fs::copy(env!("CARGO_BIN_EXE_apps-unprivileged"), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = std::process::Command::new(&bin)
            .uid(65534)
            .gid(65534)
            .arg(&d.socket)
            .output()
            .expect("run apps-unprivileged");
        s.cases += 1;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let _ = std::fs::remove_dir_all(&dir);
        if out.status.success() && text.contains("PermissionDenied") {
            eprintln!("ok   unprivileged user: {}", text.trim());
        } else {
            s.fail(
                "unprivileged user",
                format!("expected PermissionDenied: {}", text.trim()),
            );
        }
    }

    // --- Nothing else touched: the victim's objects, the daemon.
    std::thread::sleep(Duration::from_millis(200));
    let after = admin.client_totals(v.c.welcome.client_id).unwrap();
    if after != Some(victim_totals) {
        s.fail(
            "victim intact",
            format!("victim totals {victim_totals:?} became {after:?}"),
        );
    }
    let info = v.c.call(Request::QueryMr(v.mr));
    match info {
        Ok(Ok(Response::MrInfo(i))) if i == v.mr_info => {}
        other => s.fail(
            "victim MR intact",
            format!("{:?} became {other:?}", v.mr_info),
        ),
    }
    match v.c.call(Request::ResizeCq {
        cq: v.cq,
        depth: 128,
    }) {
        Ok(Ok(Response::Cq(_))) => {}
        other => s.fail("victim CQ usable", format!("{other:?}")),
    }
    d.wait_objects_freed(&[v.c.welcome.client_id], Duration::from_secs(10));
    if !admin.clients().unwrap().iter().all(|c| c.id != aid) {
        s.fail(
            "attacker gone",
            "the attacker is still listed after it closed".into(),
        );
    }
    assert!(v.c.call(Request::Bye).is_ok(), "victim Bye");
    drop(v);
    d.wait_objects_freed(&[], Duration::from_secs(10));
    eprintln!("{} cases, {} failed", s.cases, s.failures.len());
    assert!(
        s.failures.is_empty(),
        "{} of {} cases failed:\n{}",
        s.failures.len(),
        s.cases,
        s.failures.join("\n")
    );
}
