//! Tests against a fake daemon on a socketpair: it speaks the protocol, creates a ring
//! area and rings like the control thread does, and plays the dataplane core (takes
//! doorbells, pops WRs, pushes completions).

#[cfg(feature = "tokio")]
mod asynch;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use iwarp_shm_ring::{decode_send_wr, DoorbellSet, SEND_SLOT_SIZE};
use iwarp_shm_socket::{
    Addr, AsyncEventMsg, AsyncKind, CmEvent, CmIdHandle, Event, EventResourceRef,
};
use iwarp_types::{Access, Cqe, QpId, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag};
use iwarp_types::{WcOpcode, WcStatus};

use crate::*;
use iwarp_testkit::fake_daemon::{self, FakeDaemon};

/// A fake daemon with `cores` cores on a socketpair, and a context connected to it.
fn start(cores: u32) -> (FakeDaemon, Context) {
    let (client, server) = iwarp_shm_socket::Channel::pair().unwrap();
    let d = FakeDaemon::on_channel(server, cores);
    (d, Context::from_channel(client).unwrap())
}

fn readable(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).unwrap() > 0
}

fn cqe(wr_id: u64, qp: u32) -> Cqe {
    Cqe {
        wr_id,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        qp: QpId(qp),
        invalidated: None,
        solicited: false,
    }
}

fn send_wr(wr_id: u64) -> SendWr {
    SendWr {
        wr_id,
        op: SendOp::Write {
            remote_to: 0x1000,
            rkey: Stag::new(5, 1),
        },
        sgl: SgList::single(Sge {
            addr: 0x2000,
            length: 64,
            lkey: Stag::new(3, 7),
        }),
        flags: SendFlags::SIGNALED,
    }
}

/// A bound on what happens at once (a thread wakes, an event is routed): generous, for a
/// loaded test machine; a hang still fails.
const AT_ONCE: Duration = Duration::from_secs(10);

#[test]
fn welcome_maps_the_ring_area() {
    let (d, ctx) = start(2);
    assert_eq!(ctx.cores(), 2);
    assert_eq!(ctx.client_id(), fake_daemon::CLIENT_ID);
    assert_eq!(ctx.device_attr().vendor, "fake vendor");
    assert!(!ctx.is_daemon_gone());
    assert_eq!(ctx.query_device().unwrap().vendor, "fake vendor");
    drop(ctx);
    // Dropping the context says goodbye.
    assert!(d.saw_bye());
}

#[test]
fn post_send_rings_the_doorbell_and_poll_reads_every_core() {
    let (d, ctx) = start(2);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(8, None).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(&cq, &cq)).unwrap();
    assert_eq!(qp.core(), 1);
    for i in 0..3 {
        qp.post_send(&send_wr(100 + i)).unwrap();
    }
    // The core sees the doorbell bit of the SQ and the three WRs, in order.
    let mut set = DoorbellSet::new();
    assert!(d.take_doorbells(1, &mut set));
    assert!(set.contains(d.sq_bit(qp.qp_num())));
    assert!(!d.take_doorbells(0, &mut DoorbellSet::new()));
    for i in 0..3 {
        let slot = d.pop_sq_slot(qp.qp_num()).expect("a WR");
        let mut b = [0u8; SEND_SLOT_SIZE];
        b.copy_from_slice(&slot);
        assert_eq!(decode_send_wr(&b).unwrap(), send_wr(100 + i));
    }
    // Receives go to the RQ with their own bit.
    qp.post_recv(&RecvWr {
        wr_id: 9,
        sgl: SgList::new(),
    })
    .unwrap();
    let mut set = DoorbellSet::new();
    d.take_doorbells(1, &mut set);
    assert!(set.contains(d.sq_bit(qp.qp_num()) + 1));
    // Completions from both cores' sub-rings, round robin.
    let q = qp.qp_num();
    d.push_cqe(cq.handle().0, 0, &cqe(1, q));
    d.push_cqe(cq.handle().0, 0, &cqe(2, q));
    d.push_cqe(cq.handle().0, 1, &cqe(3, q));
    let mut wc = [EMPTY_CQE; 2];
    assert_eq!(cq.poll(&mut wc).unwrap(), 2);
    assert_eq!((wc[0].wr_id, wc[1].wr_id), (1, 3));
    assert_eq!(wc[0].qp, QpId(q));
    assert_eq!(cq.poll(&mut wc).unwrap(), 1);
    assert_eq!(wc[0].wr_id, 2);
    assert_eq!(cq.poll(&mut wc).unwrap(), 0);
}

#[test]
fn full_sq_is_queue_full_and_batches_ring_once() {
    let (d, ctx) = start(1);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, None).unwrap();
    let mut attr = QpInitAttr::new(&cq, &cq);
    attr.cap.max_send_wr = 4;
    let mut qp = pd.create_qp(&attr).unwrap();
    let wrs: Vec<SendWr> = (0..6).map(send_wr).collect();
    assert_eq!(qp.post_send_batch(&wrs).unwrap(), 4);
    assert!(matches!(qp.post_send(&send_wr(9)), Err(Error::QueueFull)));
    assert!(matches!(qp.post_send_batch(&wrs), Err(Error::QueueFull)));
    assert!(d.pop_sq_slot(qp.qp_num()).is_some());
    qp.post_send(&send_wr(10)).unwrap();
    assert_eq!(qp.send_queue_free().unwrap(), 0);
}

#[test]
fn resize_follows_the_moved_marker() {
    let (d, ctx) = start(1);
    let mut cq = ctx.create_cq(4, None).unwrap();
    d.push_cqe(cq.handle().0, 0, &cqe(1, 7));
    cq.resize(64).unwrap();
    assert_eq!(cq.depth(), 64);
    // The daemon ends the old ring with a marker, then fills the new one.
    d.push_cqe(cq.handle().0, 0, &cqe(2, 7));
    let mut wc = [EMPTY_CQE; 4];
    assert_eq!(cq.poll(&mut wc).unwrap(), 2);
    assert_eq!((wc[0].wr_id, wc[1].wr_id), (1, 2));
}

#[test]
fn notification_reaches_the_completion_channel() {
    let (d, ctx) = start(2);
    let ch = ctx.create_comp_channel().unwrap();
    let cq = ctx.create_cq(8, Some(&ch)).unwrap();
    let other = ctx.create_cq(8, Some(&ch)).unwrap();
    assert!(matches!(ch.try_get_cq_event(), Err(Error::WouldBlock)));
    cq.req_notify(false).unwrap();
    other.req_notify(true).unwrap();
    assert_eq!(d.arm_state(cq.handle().0), 1);
    assert_eq!(d.arm_state(other.handle().0), 2);
    // The core fires both; the control thread writes the channel's eventfd.
    assert!(d.fire(cq.handle().0, false));
    assert!(d.fire(other.handle().0, true));
    d.wake_channel(0);
    assert!(readable(ch.as_fd()));
    let a = ch.get_cq_event().unwrap();
    assert!(
        readable(ch.as_fd()),
        "stays readable while another CQ is pending"
    );
    let b = ch.try_get_cq_event().unwrap();
    let mut got = [a, b];
    got.sort();
    let mut want = [cq.handle(), other.handle()];
    want.sort();
    assert_eq!(got, want);
    assert!(matches!(ch.try_get_cq_event(), Err(Error::WouldBlock)));
    assert_eq!(ch.unacked_events(), 2);
    ch.ack_cq_events(2);
    assert_eq!(ch.unacked_events(), 0);
    assert_eq!(cq.events(), 1);
}

#[test]
fn arenas_are_shared_with_the_daemon() {
    let (d, ctx) = start(1);
    let pd = ctx.alloc_pd().unwrap();
    let mut arena = ctx.alloc_arena(10_000).unwrap();
    assert!(arena.len() >= 10_000);
    assert!(!arena.is_hugepages());
    arena.as_mut_slice()[100] = 42;
    assert_eq!(d.arena_bytes(arena.handle().0, 100, 1)[0], 42);
    let mr = pd
        .reg_mr(&arena, 64, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    assert_eq!(mr.addr(), arena.as_ptr() as u64 + 64);
    assert_eq!(mr.len(), 4096);
    let reg = d.last_mr_reg().unwrap();
    assert_eq!(
        (reg.offset, reg.len, reg.va, reg.arena),
        (64, 4096, mr.addr(), arena.handle())
    );
    assert!(pd
        .reg_mr(&arena, arena.len() - 10, 11, Access::LOCAL_WRITE)
        .is_err());
    let sge = mr.sge(8, 16).unwrap();
    assert_eq!(
        (sge.addr, sge.length, sge.lkey),
        (mr.addr() + 8, 16, mr.lkey())
    );
    assert!(mr.sge(4090, 16).is_err());
    let frmr = pd.alloc_mr(4).unwrap();
    let wr = frmr
        .fast_reg_wr(5, 0x33, &arena, 4096, 8192, Access::REMOTE_READ)
        .unwrap();
    match wr.op {
        SendOp::FastReg {
            stag,
            region,
            region_offset,
            len,
            va,
            ..
        } => {
            assert_eq!(stag.key(), 0x33);
            assert_eq!(region.0, arena.handle().0);
            assert_eq!((region_offset, len, va), (4096, 8192, arena.addr(4096)));
        }
        op => panic!("{op:?}"),
    }
    assert!(frmr
        .fast_reg_wr(5, 0, &arena, 0, 5 * 4096, Access::NONE)
        .is_err());
    // MRs keep the arena: it is freed only after the last of them.
    let handle = arena.handle();
    drop(arena);
    assert!(!d.arena_freed(handle.0));
    drop(mr);
    assert!(d.arena_freed(handle.0));
}

#[test]
fn user_memory_is_remapped_and_imported() {
    let _serial = crate::remap::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (d, ctx) = start(1);
    let pd = ctx.alloc_pd().unwrap();
    let mut buf: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    let ptr = buf.as_mut_ptr();
    // SAFETY: our own buffer, no other thread; it outlives the MR.
    let mr = unsafe { pd.reg_user_mr(ptr, buf.len(), Access::LOCAL_WRITE) }.unwrap();
    assert_eq!(mr.addr(), ptr as u64);
    assert_eq!(buf.as_mut_ptr(), ptr);
    assert!(buf.iter().enumerate().all(|(i, &b)| b == i as u8));
    // The daemon's mapping of the imported memfd sees the buffer.
    let reg = d.last_mr_reg().unwrap();
    buf[0] = 0xee;
    assert_eq!(d.arena_bytes(reg.arena.0, reg.offset as usize, 1)[0], 0xee);
    drop(mr);
    assert!(d.arena_freed(reg.arena.0));
    // The buffer stays usable.
    buf[1] = 1;
    assert_eq!(buf[1], 1);
}

#[test]
fn timeout_when_the_daemon_does_not_answer() {
    let (d, ctx) = start(1);
    d.set_silent(true);
    ctx.set_timeout(Duration::from_millis(50));
    let t = Instant::now();
    assert!(matches!(ctx.alloc_pd(), Err(Error::Timeout)));
    assert!(t.elapsed() < AT_ONCE);
    d.set_silent(false);
    ctx.set_timeout(Duration::from_secs(5));
    ctx.alloc_pd().unwrap();
}

#[test]
fn daemon_gone_answers_everything_without_hanging() {
    let (d, ctx) = start(2);
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq(8, Some(&ch)).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(&cq, &cq)).unwrap();
    let cm = ctx.create_cm_event_channel().unwrap();
    let _id = cm.create_id().unwrap();
    d.set_silent(true);
    // Callers blocked on replies, on events and on the completion channel.
    let c2 = ctx.clone();
    let pending = std::thread::spawn(move || c2.query_port(0));
    let c3 = ctx.clone();
    let async_wait = std::thread::spawn(move || c3.get_async_event());
    let ch2 = ch.clone();
    let chan_wait = std::thread::spawn(move || ch2.get_cq_event());
    let cm_wait = std::thread::spawn(move || cm.get_event().map(|e| e.id));
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    d.kill();
    assert!(matches!(pending.join().unwrap(), Err(Error::DaemonGone)));
    assert!(matches!(async_wait.join().unwrap(), Err(Error::DaemonGone)));
    assert!(matches!(chan_wait.join().unwrap(), Err(Error::DaemonGone)));
    assert!(matches!(cm_wait.join().unwrap(), Err(Error::DaemonGone)));
    assert!(t.elapsed() < AT_ONCE, "{:?}", t.elapsed());
    assert!(ctx.is_daemon_gone());
    assert!(matches!(qp.post_send(&send_wr(1)), Err(Error::DaemonGone)));
    assert!(matches!(
        qp.post_recv(&RecvWr {
            wr_id: 1,
            sgl: SgList::new()
        }),
        Err(Error::DaemonGone)
    ));
    let mut wc = [EMPTY_CQE; 4];
    assert!(matches!(cq.poll(&mut wc), Err(Error::DaemonGone)));
    assert!(matches!(cq.req_notify(false), Err(Error::DaemonGone)));
    assert!(matches!(ctx.alloc_pd(), Err(Error::DaemonGone)));
    assert!(readable(ctx.async_fd()));
    assert!(readable(ch.as_fd()));
    // Drops after the daemon went do not hang either.
    let t = Instant::now();
    drop((qp, cq, pd, ch, ctx));
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn shutdown_event_or_daemon_state_mark_gone() {
    let (d, ctx) = start(1);
    let cq_ctx = ctx.clone();
    let mut cq = cq_ctx.create_cq(8, None).unwrap();
    d.send_event(Event::Shutdown);
    let t = Instant::now();
    while !ctx.is_daemon_gone() {
        assert!(t.elapsed() < AT_ONCE);
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut wc = [EMPTY_CQE; 1];
    assert!(matches!(cq.poll(&mut wc), Err(Error::DaemonGone)));
    assert_eq!(d.daemon_state(), iwarp_shm_ring::DAEMON_GONE);

    // An orderly shutdown seen only in the ring area.
    let (d, ctx) = start(1);
    let mut cq = ctx.create_cq(8, None).unwrap();
    d.set_daemon_state(iwarp_shm_ring::DAEMON_GONE);
    assert!(matches!(cq.poll(&mut wc), Err(Error::DaemonGone)));
    assert!(matches!(ctx.alloc_pd(), Err(Error::DaemonGone)));
}

#[test]
fn events_reach_their_queues() {
    let (d, ctx) = start(1);
    let cm = ctx.create_cm_event_channel().unwrap();
    let other = ctx.create_cm_event_channel().unwrap();
    let listener = cm.create_id().unwrap();
    listener.listen(4791u16, 8).unwrap();
    let active = other.create_id().unwrap();
    assert!(matches!(cm.try_get_event(), Err(Error::WouldBlock)));
    let new = CmIdHandle(77);
    let addr = Addr {
        ip: [10, 0, 0, 2],
        port: 5000,
    };
    d.send_event(Event::Cm {
        id: listener.handle(),
        event: CmEvent::ConnectRequest {
            id: new,
            remote: addr,
            local: addr,
            private_data: b"hi".to_vec(),
            ird: 1,
            ord: 1,
        },
    });
    let ev = cm.get_event_timeout(AT_ONCE).unwrap();
    assert_eq!(ev.id, listener.handle());
    let req = ev.request.expect("a CM id for the request");
    assert_eq!(req.handle(), new);
    // Events of the new id come to the listener's channel.
    d.send_event(Event::Cm {
        id: new,
        event: CmEvent::Disconnected,
    });
    assert!(matches!(
        cm.get_event_timeout(AT_ONCE).unwrap().event,
        CmEvent::Disconnected
    ));
    d.send_event(Event::Cm {
        id: active.handle(),
        event: CmEvent::DeviceRemoval,
    });
    let ev = other.get_event_timeout(AT_ONCE).unwrap();
    assert_eq!(ev.id, active.handle());
    assert!(ev.request.is_none());
    assert!(!readable(ctx.async_fd()));
    let a = AsyncEventMsg {
        resource: EventResourceRef::Device,
        kind: AsyncKind::CqOverflow,
    };
    d.send_event(Event::Async(a));
    assert_eq!(ctx.get_async_event_timeout(AT_ONCE).unwrap(), a);
    req.reject(b"no").unwrap();
    assert!(req.reject(&[0u8; 600]).is_err());
    drop(req);
    assert!(d.saw_destroy_cm_id(new.0));
}

/// `CmId::migrate` (`rdma_migrate_id`): the events queued for the id and not yet read
/// move to the new channel in order, later ones go there, other ids' events stay.
#[test]
fn a_migrated_id_takes_its_unread_events_along() {
    let (d, ctx) = start(1);
    let old = ctx.create_cm_event_channel().unwrap();
    let new = ctx.create_cm_event_channel().unwrap();
    let moving = old.create_id().unwrap();
    let staying = old.create_id().unwrap();
    for (id, event) in [
        (moving.handle(), CmEvent::Disconnected),
        (staying.handle(), CmEvent::Disconnected),
        (moving.handle(), CmEvent::DeviceRemoval),
    ] {
        d.send_event(Event::Cm { id, event });
    }
    // All three arrived (the last one on the old channel) before the move.
    let end = std::time::Instant::now() + AT_ONCE;
    while old.queue.lock_len() < 3 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    moving.migrate(&new).unwrap();
    moving.migrate(&new).unwrap(); // to its own channel: nothing to do
    d.send_event(Event::Cm {
        id: moving.handle(),
        event: CmEvent::Disconnected,
    });
    let got: Vec<CmEvent> = (0..3)
        .map(|_| new.get_event_timeout(AT_ONCE).unwrap())
        .inspect(|e| assert_eq!(e.id, moving.handle()))
        .map(|e| e.event)
        .collect();
    assert_eq!(
        got,
        [
            CmEvent::Disconnected,
            CmEvent::DeviceRemoval,
            CmEvent::Disconnected
        ]
    );
    let ev = old.try_get_event().unwrap();
    assert_eq!(ev.id, staying.handle());
    assert!(matches!(old.try_get_event(), Err(Error::WouldBlock)));
    assert!(!readable(old.as_fd()));
    // A channel of another context is refused.
    let (_d2, ctx2) = start(1);
    let foreign = ctx2.create_cm_event_channel().unwrap();
    assert!(matches!(
        moving.migrate(&foreign),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn open_path_without_daemon_names_the_path() {
    let e = Context::open_path(std::path::Path::new("/nonexistent/iwarpd.verbs")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/iwarpd.verbs"), "{e}");
}

/// A daemon that refuses the connection before reading anything (sequence number 0)
/// and closes.
fn refusing_daemon(code: iwarp_shm_socket::ErrorCode) -> iwarp_shm_socket::Channel {
    use iwarp_shm_socket::{Channel, ErrorReply, ServerMsg};
    let (client, daemon) = Channel::pair().unwrap();
    daemon
        .send(
            &ServerMsg::Reply {
                seq: 0,
                result: Err(ErrorReply::new(code, "control.max_clients (2) clients")),
            },
            &[],
        )
        .unwrap();
    drop(daemon);
    client
}

#[test]
fn a_full_daemon_is_full_not_gone() {
    use iwarp_shm_socket::ErrorCode;
    // The daemon closed before the Hello was sent: the send fails, the answer waits.
    let e = Context::from_channel(refusing_daemon(ErrorCode::DaemonFull)).unwrap_err();
    assert!(matches!(e, Error::DaemonFull(_)), "{e:?}");
    assert_eq!(e.code(), Some(ErrorCode::DaemonFull));
    let text = e.to_string();
    assert!(text.starts_with("iwarpd is full"), "{text}");
    assert!(!text.contains("gone"), "{text}");
    // Other refusals before Hello stay daemon refusals.
    let e = Context::from_channel(refusing_daemon(ErrorCode::PermissionDenied)).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e:?}");
    // A daemon that closes without a word is gone.
    let (client, daemon) = iwarp_shm_socket::Channel::pair().unwrap();
    drop(daemon);
    let e = Context::from_channel(client).unwrap_err();
    assert!(matches!(e, Error::DaemonGone), "{e:?}");
}
