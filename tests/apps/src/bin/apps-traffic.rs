//! A client process that moves verified traffic: it connects to the crash test's server
//! (`apps-traffic SOCKET SERVER_IP:PORT TAG`), which accepts with its target buffer
//! (VA, rkey, length) in the private data, then loops: RDMA Write of 4 KiB of a pattern
//! into the server's buffer, RDMA Read back, compare. Prints `ready id=<client id>` once
//! connected, `ok <n>` now and then; on any error `ERROR: ...` and exit 1. It stops when
//! its stdin closes (`done <n>`, exit 0); the crash test kills the others with SIGKILL.

use std::io::{BufRead, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp_apps::side::{empty_cqe, pattern};
use iwarp_verbs::*;

const CHUNK: usize = 4096;

fn fail(msg: String) -> ! {
    println!("ERROR: {msg}");
    let _ = std::io::stdout().flush();
    std::process::exit(1);
}

fn complete(cq: &mut Cq, wr_id: u64, opcode: WcOpcode) -> std::result::Result<(), String> {
    let mut wc = [empty_cqe(); 1];
    // Generous: the machine's two CPUs also run both daemons' polling cores.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match cq.poll(&mut wc) {
            Ok(1) => break,
            Ok(_) if Instant::now() > end => {
                return Err(format!("no completion of {wr_id} in 30 s"))
            }
            // Lets the daemons' cores run when they share this CPU.
            Ok(_) => std::thread::yield_now(),
            Err(e) => return Err(format!("poll: {e}")),
        }
    }
    let c = wc[0];
    if (c.wr_id, c.opcode, c.status) != (wr_id, opcode, WcStatus::Success) {
        return Err(format!(
            "completion {c:?}, expected {wr_id} {opcode:?} Success"
        ));
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        fail("usage: apps-traffic SOCKET SERVER_IP:PORT TAG".into());
    }
    let server: SocketAddrV4 = args[2]
        .parse()
        .unwrap_or_else(|e| fail(format!("server: {e}")));
    let tag: u32 = args[3]
        .parse()
        .unwrap_or_else(|e| fail(format!("tag: {e}")));
    let ctx = Context::open_path(std::path::Path::new(&args[1]))
        .unwrap_or_else(|e| fail(format!("open: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut cq = ctx
        .create_cq(64, None)
        .unwrap_or_else(|e| fail(format!("create_cq: {e}")));
    let mut arena = ctx
        .alloc_arena(2 * CHUNK)
        .unwrap_or_else(|e| fail(format!("alloc_arena: {e}")));
    let mr = pd
        // Remote Write only because the engine checks a Read's sink for it (reported).
        .reg_mr(
            &arena,
            0,
            2 * CHUNK,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let mut attr = QpInitAttr::new(&cq, &cq);
    attr.sq_sig_all = true;
    let mut qp = pd
        .create_qp(&attr)
        .unwrap_or_else(|e| fail(format!("create_qp: {e}")));
    let cm = ctx
        .create_cm_event_channel()
        .unwrap_or_else(|e| fail(format!("cm channel: {e}")));
    let id = cm
        .create_id()
        .unwrap_or_else(|e| fail(format!("create_id: {e}")));
    let param = ConnParam {
        private_data: tag.to_le_bytes().to_vec(),
        ..ConnParam::default()
    };
    id.connect(&qp, server, &param)
        .unwrap_or_else(|e| fail(format!("connect: {e}")));
    let (va, rkey, len) = match cm.get_event_timeout(Duration::from_secs(30)) {
        Ok(CmEventInfo {
            event: CmEvent::Established {
                private_data: p, ..
            },
            ..
        }) if p.len() == 16 => (
            u64::from_le_bytes(p[0..8].try_into().unwrap()),
            Stag(u32::from_le_bytes(p[8..12].try_into().unwrap())),
            u32::from_le_bytes(p[12..16].try_into().unwrap()) as u64,
        ),
        other => fail(format!(
            "expected Established with 16 bytes of private data: {other:?}"
        )),
    };
    println!("ready id={}", ctx.client_id());
    let _ = std::io::stdout().flush();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for _ in std::io::stdin().lock().lines() {}
            stop.store(true, Ordering::Release);
        });
    }
    let mut n: u64 = 0;
    while !stop.load(Ordering::Acquire) {
        let seed = (n % 251) as u8;
        let off = (n * CHUNK as u64) % len;
        pattern(&mut arena.as_mut_slice()[..CHUNK], seed);
        let sge = mr.sge(0, CHUNK as u32).unwrap();
        let w = SendWr {
            wr_id: 2 * n,
            op: SendOp::Write {
                remote_to: va + off,
                rkey,
            },
            sgl: SgList::single(sge),
            flags: SendFlags::SIGNALED,
        };
        qp.post_send(&w)
            .unwrap_or_else(|e| fail(format!("post Write: {e}")));
        if let Err(e) = complete(&mut cq, 2 * n, WcOpcode::Write) {
            fail(format!("{e}; QP {:?}", qp.query()));
        }
        let sge = mr.sge(CHUNK as u64, CHUNK as u32).unwrap();
        let r = SendWr {
            wr_id: 2 * n + 1,
            op: SendOp::Read {
                remote_to: va + off,
                rkey,
                invalidate_local: false,
            },
            sgl: SgList::single(sge),
            flags: SendFlags::SIGNALED,
        };
        qp.post_send(&r)
            .unwrap_or_else(|e| fail(format!("post Read: {e}")));
        if let Err(e) = complete(&mut cq, 2 * n + 1, WcOpcode::Read) {
            fail(format!("{e}; QP {:?}", qp.query()));
        }
        let s = arena.as_slice();
        if s[..CHUNK] != s[CHUNK..] {
            fail(format!(
                "iteration {n}: the Read did not return what was written"
            ));
        }
        n += 1;
        if n.is_multiple_of(500) {
            println!("ok {n}");
            let _ = std::io::stdout().flush();
        }
    }
    let _ = id.disconnect();
    println!("done {n}");
}
