//! Every C entry point against a fake iwarpd (tests/fake): what the C caller asks is what
//! the daemon receives (requests, ring slots), and what the daemon answers is what the C
//! caller gets (structs, completions, events, error codes).

mod fake;

use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};

use fake::FakeDaemon;
use iwarp_types::{Access, Cqe, QpId, SendOp, Stag, WcOpcode, WcStatus};
use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::types::*;
use iwarp_verbs_capi::*;
use iwarp_verbs_proto::{
    Addr, AsyncEventMsg, AsyncKind, CmEvent, CmIdHandle, ConnParam, ConnectError, Event,
    EventResourceRef, QpHandle, QpModifyReq, QpStateValue, Request,
};

fn open(fake: &FakeDaemon) -> *mut iwv_context {
    let path = CString::new(fake.socket.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    let ctx = unsafe { iwv_open_path(path.as_ptr()) };
    assert!(!ctx.is_null(), "open: {}", last_message());
    ctx
}

fn last_message() -> String {
    // SAFETY: the library's per-thread message, NUL-terminated.
    unsafe { CStr::from_ptr(iwv_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn cstr(b: &[u8]) -> &str {
    CStr::from_bytes_until_nul(b).unwrap().to_str().unwrap()
}

fn blank_send(wr_id: u64, opcode: u32) -> iwv_send_wr {
    iwv_send_wr {
        wr_id,
        next: null_mut(),
        sg_list: null_mut(),
        num_sge: 0,
        opcode,
        send_flags: 0,
        invalidate_stag: 0,
        rdma: iwv_rdma::default(),
        fast_reg: iwv_fast_reg {
            arena: null_mut(),
            offset: 0,
            length: 0,
            stag: 0,
            access: 0,
            zero_based: 0,
            reserved: 0,
        },
        bind: iwv_bind::default(),
    }
}

fn qp_init(cq: *mut iwv_cq, depth: u32) -> iwv_qp_init_attr {
    iwv_qp_init_attr {
        send_cq: cq,
        recv_cq: cq,
        srq: null_mut(),
        cap: iwv_qp_cap {
            max_send_wr: depth,
            max_recv_wr: depth,
            max_send_sge: 2,
            max_recv_sge: 2,
        },
        sq_sig_all: 0,
        ord: 0,
        ird: 0,
        remote_read: 1,
        remote_write: 0,
        bind_enabled: 0,
        qp_context: 0x5eed as *mut c_void,
    }
}

#[test]
fn device_and_memory_verbs() {
    let fake = FakeDaemon::start("memory");
    let ctx = open(&fake);
    // SAFETY: every pointer below is a live handle of this test or a local.
    unsafe {
        let mut d = std::mem::zeroed::<iwv_device_attr>();
        assert_eq!(iwv_query_device(ctx, &mut d), 0);
        assert_eq!(cstr(&d.vendor), "fake vendor");
        assert_eq!(cstr(&d.daemon), "fake-iwarpd");
        assert_eq!((d.max_qp, d.max_private_data, d.srq), (16, 512, 1));
        let mut p = std::mem::zeroed::<iwv_port_attr>();
        assert_eq!(iwv_query_port(ctx, 0, &mut p), 0);
        assert_eq!(
            (p.ip, p.mac, p.mtu, p.link_up),
            ([198, 18, 0, 1], [2, 0, 0, 0, 0, 1], 1500, 1)
        );
        assert_eq!(cstr(&p.device), "net_memif0");
        assert_eq!(iwv_query_port(ctx, 3, &mut p), -IWV_ENOENT);
        assert!(
            last_message().contains("no such port"),
            "{}",
            last_message()
        );

        let pd = iwv_alloc_pd(ctx);
        let arena = iwv_alloc_arena(ctx, 10_000, 0);
        assert!(!pd.is_null() && !arena.is_null());
        assert_eq!(iwv_arena_len(arena), 12_288);
        let base = iwv_arena_addr(arena) as *mut u8;
        base.add(4096).copy_from(b"from C".as_ptr(), 6);
        assert_eq!(
            fake.arena_bytes(iwv_arena_handle(arena), 4096, 6),
            b"from C"
        );

        let access = 0x2 | 0x4; // LOCAL_WRITE | REMOTE_READ
        let mr = iwv_reg_mr(pd, arena, 4096, 100, access);
        assert!(!mr.is_null(), "{}", last_message());
        assert_eq!(iwv_mr_addr(mr), base as u64 + 4096);
        assert_eq!(iwv_mr_length(mr), 100);
        assert_eq!(iwv_mr_lkey(mr), iwv_mr_rkey(mr));
        let Some(Request::RegMr(reg)) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(
            (reg.offset, reg.len, reg.zero_based, reg.access.0),
            (4096, 100, false, access)
        );
        assert_eq!(reg.va, base as u64 + 4096);
        let zb = iwv_reg_mr(pd, arena, 0, 10, 0x2 | 0x20);
        assert_eq!(iwv_mr_addr(zb), 0);
        assert!(iwv_reg_mr(pd, arena, 12_000, 1000, 0x2).is_null());
        assert_eq!(iwv_last_error(), -IWV_EINVAL);
        assert!(iwv_reg_mr(pd, arena, 0, 10, 0x80).is_null());
        assert_eq!(iwv_last_error(), -IWV_EINVAL);

        let key = iwv_mr_lkey(mr);
        assert_eq!(iwv_rereg_mr(mr, 4, null_mut(), 0, 0, 0x2), 0);
        assert_eq!(iwv_mr_lkey(mr), key + 1);
        assert_eq!(iwv_rereg_mr(mr, 1, arena, 0, 64, 0), 0);
        assert_eq!((iwv_mr_addr(mr), iwv_mr_length(mr)), (base as u64, 64));
        assert_eq!(iwv_rereg_mr(mr, 0, arena, 0, 64, 0), -IWV_EINVAL);

        let frmr = iwv_alloc_mr(pd, 4);
        assert_eq!(iwv_mr_length(frmr), 4 * 4096);
        assert_eq!(iwv_rereg_mr(frmr, 4, null_mut(), 0, 0, 0), -IWV_EINVAL);
        let mw = iwv_alloc_mw(pd, 1);
        assert!(!mw.is_null());
        assert!(iwv_alloc_mw(pd, 3).is_null());
        assert_eq!(iwv_bind_mw(mw, mr, base as u64, 32, 0x4, 0), 0);
        let Some(Request::BindMw(b)) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(
            (b.mw.0, b.mr.0, b.va, b.len, b.access.0),
            (iwv_mw_rkey(mw), iwv_mr_lkey(mr), base as u64, 32, 0x4)
        );

        let before = fake.requests().len();
        assert_eq!(iwv_dealloc_mw(mw), 0);
        assert_eq!(iwv_dereg_mr(frmr), 0);
        assert_eq!(iwv_dereg_mr(zb), 0);
        assert_eq!(iwv_dereg_mr(mr), 0);
        assert_eq!(iwv_free_arena(arena), 0);
        assert_eq!(iwv_dealloc_pd(pd), 0);
        let after = fake.requests();
        let kinds: Vec<_> = after[before..].iter().map(|r| format!("{r:?}")).collect();
        assert!(kinds[0].starts_with("DeallocMw"), "{kinds:?}");
        assert_eq!(
            kinds.iter().filter(|k| k.starts_with("DeregMr")).count(),
            3,
            "{kinds:?}"
        );
        assert!(
            kinds.iter().any(|k| k.starts_with("FreeArena")),
            "{kinds:?}"
        );
        assert!(
            kinds.iter().any(|k| k.starts_with("DeallocPd")),
            "{kinds:?}"
        );
        assert_eq!(iwv_close(ctx), 0);
    }
}

#[test]
fn work_requests_completions_and_notifications() {
    let fake = FakeDaemon::start("data");
    let ctx = open(&fake);
    // SAFETY: every pointer below is a live handle of this test or a local.
    unsafe {
        let pd = iwv_alloc_pd(ctx);
        let arena = iwv_alloc_arena(ctx, 8192, 0);
        let ch = iwv_create_comp_channel(ctx);
        let cq_ctx = 0xc0ffee as *mut c_void;
        let cq = iwv_create_cq(ctx, 16, cq_ctx, ch);
        assert!(!cq.is_null(), "{}", last_message());
        assert_eq!(iwv_cq_depth(cq), 16);
        let qp = iwv_create_qp(pd, &qp_init(cq, 4));
        assert!(!qp.is_null(), "{}", last_message());
        assert_eq!(iwv_qp_context(qp), 0x5eed as *mut c_void);
        let n = iwv_qp_num(qp);

        // A list of three WRs: SEND with SE and two SGEs, RDMA WRITE, FAST_REG.
        let mut sges = [
            iwv_sge {
                addr: 0x1000,
                length: 10,
                lkey: 0x100,
            },
            iwv_sge {
                addr: 0x2000,
                length: 20,
                lkey: 0x200,
            },
        ];
        let mut w = [blank_send(1, 0), blank_send(2, 2), blank_send(3, 6)];
        w[0].sg_list = sges.as_mut_ptr();
        w[0].num_sge = 2;
        w[0].send_flags = 1 | 8;
        w[1].sg_list = sges.as_mut_ptr();
        w[1].num_sge = 1;
        w[1].rdma = iwv_rdma {
            remote_addr: 0xabc0,
            rkey: 0x77,
            reserved: 0,
        };
        w[2].fast_reg = iwv_fast_reg {
            arena,
            offset: 4096,
            length: 100,
            stag: 0x3005,
            access: 0x8,
            zero_based: 0,
            reserved: 0,
        };
        let p = w.as_mut_ptr();
        (*p).next = p.add(1);
        (*p.add(1)).next = p.add(2);
        let mut bad = null_mut();
        assert_eq!(iwv_post_send(qp, p, &mut bad), 0, "{}", last_message());
        let s0 = fake.pop_sq(n).unwrap();
        assert_eq!(
            (s0.wr_id, s0.op, s0.flags.0, s0.sgl.len()),
            (1, SendOp::SendSe, 1, 2)
        );
        assert_eq!(s0.sgl.as_slice()[1].addr, 0x2000);
        assert_eq!(s0.sgl.as_slice()[1].lkey, Stag(0x200));
        let s1 = fake.pop_sq(n).unwrap();
        assert_eq!(
            s1.op,
            SendOp::Write {
                remote_to: 0xabc0,
                rkey: Stag(0x77)
            }
        );
        let s2 = fake.pop_sq(n).unwrap();
        let SendOp::FastReg {
            stag,
            region,
            region_offset,
            len,
            va,
            access,
            zero_based,
        } = s2.op
        else {
            panic!("{s2:?}")
        };
        assert_eq!(
            (stag, region.0, region_offset, len),
            (Stag(0x3005), iwv_arena_handle(arena), 4096, 100)
        );
        assert_eq!(
            (va, access, zero_based),
            (
                iwv_arena_addr(arena) as u64 + 4096,
                Access::REMOTE_WRITE,
                false
            )
        );
        assert!(fake.pop_sq(n).is_none());

        // Six WRs into a queue of four: four posted, *bad_wr is the fifth.
        let mut six: Vec<_> = (10..16).map(|i| blank_send(i, 0)).collect();
        let p = six.as_mut_ptr();
        for i in 0..5 {
            (*p.add(i)).next = p.add(i + 1);
        }
        assert_eq!(iwv_post_send(qp, p, &mut bad), -IWV_EQUEUEFULL);
        assert_eq!(bad, p.add(4));
        let ids: Vec<_> = std::iter::from_fn(|| fake.pop_sq(n))
            .map(|w| w.wr_id)
            .collect();
        assert_eq!(ids, [10, 11, 12, 13]);
        // A bad WR in the middle: the ones before it are posted.
        let mut two = [blank_send(20, 0), blank_send(21, 99)];
        let p = two.as_mut_ptr();
        (*p).next = p.add(1);
        assert_eq!(iwv_post_send(qp, p, &mut bad), -IWV_EINVAL);
        assert_eq!(bad, p.add(1));
        assert_eq!(fake.pop_sq(n).unwrap().wr_id, 20);

        let mut rwr = [
            iwv_recv_wr {
                wr_id: 30,
                next: null_mut(),
                sg_list: sges.as_mut_ptr(),
                num_sge: 2,
                reserved: 0,
            },
            iwv_recv_wr {
                wr_id: 31,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: 0,
                reserved: 0,
            },
        ];
        let rp = rwr.as_mut_ptr();
        (*rp).next = rp.add(1);
        let mut rbad = null_mut();
        assert_eq!(iwv_post_recv(qp, rp, &mut rbad), 0);
        let r0 = fake.pop_rq(n).unwrap();
        assert_eq!((r0.wr_id, r0.sgl.len(), r0.sgl.total_len()), (30, 2, 30));
        assert_eq!(fake.pop_rq(n).unwrap().wr_id, 31);

        // Completions, converted.
        let h = iwv_cq_handle(cq);
        for i in 0..3u64 {
            fake.push_cqe(
                h,
                &Cqe {
                    wr_id: 100 + i,
                    status: if i == 2 {
                        WcStatus::Flushed
                    } else {
                        WcStatus::Success
                    },
                    opcode: WcOpcode::Recv,
                    byte_len: 7 * i as u32,
                    qp: QpId(n),
                    invalidated: (i == 1).then_some(Stag(0x4242)),
                    solicited: i == 1,
                },
            );
        }
        let mut wc = [iwv_wc::default(); 4];
        assert_eq!(iwv_poll_cq(cq, 2, wc.as_mut_ptr()), 2);
        assert_eq!(iwv_poll_cq(cq, 4, wc.as_mut_ptr().add(2)), 1);
        assert_eq!(iwv_poll_cq(cq, 4, wc.as_mut_ptr()), 0);
        assert_eq!(
            (wc[1].wr_id, wc[1].opcode, wc[1].byte_len, wc[1].qp_num),
            (101, 10, 7, n)
        );
        assert_eq!((wc[1].wc_flags, wc[1].invalidated_stag), (3, 0x4242));
        assert_eq!((wc[2].wr_id, wc[2].status), (102, 1));
        assert_eq!(
            CStr::from_ptr(iwv_wc_status_str(wc[2].status)),
            c"IWV_WC_FLUSHED"
        );
        assert_eq!(iwv_poll_cq(cq, -1, wc.as_mut_ptr()), -IWV_EINVAL);

        // Notification: armed, fired, delivered with the CQ and its context.
        let (mut got, mut got_ctx) = (null_mut(), null_mut());
        assert_eq!(iwv_get_cq_event(ch, &mut got, &mut got_ctx, 0), -IWV_EAGAIN);
        assert!(!fake.fire(h), "fired without being armed");
        assert_eq!(iwv_req_notify_cq(cq, 0), 0);
        assert!(fake.fire(h));
        assert_eq!(iwv_get_cq_event(ch, &mut got, &mut got_ctx, 1000), 0);
        assert_eq!((got, got_ctx), (cq, cq_ctx));
        iwv_ack_cq_events(cq, 1);
        assert_eq!(
            iwv_get_cq_event(ch, &mut got, &mut got_ctx, 20),
            -IWV_ETIMEDOUT
        );
        assert_eq!(iwv_destroy_comp_channel(ch), -IWV_EBUSY);

        // Modify and query.
        let attr = iwv_qp_attr {
            qp_state: 4,
            ord: 3,
            ..Default::default()
        };
        assert_eq!(iwv_modify_qp(qp, &attr, 1 | 2), 0);
        let Some(Request::ModifyQp { qp: q, modify }) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(q, QpHandle(n));
        assert_eq!(
            modify,
            QpModifyReq {
                state: Some(QpStateValue::Error),
                ord: Some(3),
                ..Default::default()
            }
        );
        assert_eq!(iwv_modify_qp(qp, &attr, 1 << 9), -IWV_EINVAL);
        let mut qa = iwv_qp_attr::default();
        assert_eq!(iwv_query_qp(qp, &mut qa), 0);
        assert_eq!(
            (qa.qp_state, qa.ord, qa.ird, qa.connected, qa.qp_num),
            (1, 4, 5, 1, n)
        );
        assert_eq!((qa.terminate_sent, qa.terminate_received), (-1, 0x0102));

        assert_eq!(iwv_destroy_qp(qp), 0);
        assert_eq!(iwv_destroy_cq(cq), 0);
        assert_eq!(iwv_destroy_comp_channel(ch), 0);
        assert_eq!(iwv_free_arena(arena), 0);
        assert_eq!(iwv_dealloc_pd(pd), 0);
        assert_eq!(iwv_close(ctx), 0);
    }
}

#[test]
fn connection_manager_events() {
    let fake = FakeDaemon::start("cm");
    let ctx = open(&fake);
    // SAFETY: every pointer below is a live handle of this test or a local.
    unsafe {
        let pd = iwv_alloc_pd(ctx);
        let cq = iwv_create_cq(ctx, 8, null_mut(), null_mut());
        let ch = iwv_create_event_channel(ctx);
        let listen_ctx = 0x1157 as *mut c_void;
        let listener = iwv_create_id(ch, listen_ctx);
        assert!(!listener.is_null(), "{}", last_message());
        assert_eq!(iwv_cm_id_context(listener), listen_ctx);
        let mut addr = iwv_addr::default();
        assert_eq!(iwv_addr_init(&mut addr, null(), 1), 0);
        assert_eq!(iwv_listen(listener, &addr, 8), -IWV_EADDRINUSE);
        assert_eq!(iwv_addr_init(&mut addr, c"198.18.0.1".as_ptr(), 4791), 0);
        assert_eq!(iwv_listen(listener, &addr, 8), 0);
        let Some(Request::Listen {
            id: lid,
            addr: a,
            backlog,
        }) = fake.requests().last().cloned()
        else {
            panic!()
        };
        assert_eq!(
            (a, backlog),
            (
                Addr {
                    ip: [198, 18, 0, 1],
                    port: 4791
                },
                8
            )
        );

        let mut ev = null_mut();
        assert_eq!(iwv_get_cm_event(ch, &mut ev, 0), -IWV_EAGAIN);
        fake.send_event(Event::Cm {
            id: lid,
            event: CmEvent::ConnectRequest {
                id: CmIdHandle(900),
                remote: Addr {
                    ip: [198, 18, 0, 2],
                    port: 40000,
                },
                local: Addr {
                    ip: [198, 18, 0, 1],
                    port: 4791,
                },
                private_data: b"hello".to_vec(),
                ird: 3,
                ord: 2,
            },
        });
        assert_eq!(iwv_get_cm_event(ch, &mut ev, 2000), 0, "{}", last_message());
        let e = &*ev;
        assert_eq!((e.event, e.listen_id, e.ird, e.ord), (0, listener, 3, 2));
        assert_eq!((e.remote.ip, e.remote.port), ([198, 18, 0, 2], 40000));
        let data =
            std::slice::from_raw_parts(e.private_data as *const u8, e.private_data_len as usize);
        assert_eq!(data, b"hello");
        let req = e.id;
        assert!(!req.is_null() && req != listener);
        assert_eq!(
            iwv_cm_id_context(req),
            listen_ctx,
            "a request inherits the listener's context"
        );
        assert_eq!(iwv_ack_cm_event(ev), 0);

        let qp = iwv_cm_create_qp(req, pd, &qp_init(cq, 8));
        assert!(!qp.is_null(), "{}", last_message());
        let Some(Request::CreateQp(c)) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(c.for_cm_id, Some(CmIdHandle(900)));
        assert_eq!(
            (c.remote_read, c.remote_write, c.ord, c.ird),
            (true, false, 8, 8)
        );
        let reply = *b"welcome";
        let param = iwv_conn_param {
            private_data: reply.as_ptr() as *const c_void,
            private_data_len: 7,
            responder_resources: 2,
            initiator_depth: 1,
            reserved: 0,
        };
        assert_eq!(iwv_accept(req, qp, &param), 0);
        let Some(Request::Accept {
            id,
            qp: q,
            param: p,
        }) = fake.requests().last().cloned()
        else {
            panic!()
        };
        assert_eq!((id, q), (CmIdHandle(900), QpHandle(iwv_qp_num(qp))));
        assert_eq!(
            p,
            ConnParam {
                private_data: b"welcome".to_vec(),
                responder_resources: 2,
                initiator_depth: 1
            }
        );

        fake.send_event(Event::Cm {
            id: CmIdHandle(900),
            event: CmEvent::Established {
                private_data: vec![],
                qp: QpHandle(iwv_qp_num(qp)),
            },
        });
        fake.send_event(Event::Cm {
            id: CmIdHandle(900),
            event: CmEvent::ConnectError(ConnectError::Mpa(9)),
        });
        assert_eq!(iwv_get_cm_event(ch, &mut ev, 2000), 0);
        assert_eq!(
            ((*ev).event, (*ev).id, (*ev).qp_num),
            (1, req, iwv_qp_num(qp))
        );
        assert!((*ev).private_data.is_null());
        assert_eq!(iwv_ack_cm_event(ev), 0);
        assert_eq!(iwv_get_cm_event(ch, &mut ev, -1), 0);
        assert_eq!(((*ev).event, (*ev).status, (*ev).mpa_code), (3, 5, 9));
        assert_eq!(iwv_ack_cm_event(ev), 0);
        assert_eq!(iwv_get_cm_event(ch, &mut ev, 30), -IWV_ETIMEDOUT);

        assert_eq!(iwv_reject(req, b"no".as_ptr() as *const c_void, 2), 0);
        assert_eq!(iwv_reject(req, null(), 2), -IWV_EFAULT);
        assert_eq!(iwv_disconnect(req), 0);
        assert_eq!(iwv_destroy_event_channel(ch), -IWV_EBUSY);
        assert_eq!(iwv_destroy_qp(qp), 0);
        assert_eq!(iwv_destroy_id(req), 0);
        assert_eq!(iwv_destroy_id(listener), 0);
        let destroyed: Vec<_> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::DestroyCmId(h) => Some(h),
                _ => None,
            })
            .collect();
        assert_eq!(destroyed, [CmIdHandle(900), lid]);
        assert_eq!(iwv_destroy_event_channel(ch), 0);
        assert_eq!(iwv_destroy_cq(cq), 0);
        assert_eq!(iwv_dealloc_pd(pd), 0);
        assert_eq!(iwv_close(ctx), 0);
    }
}

#[test]
fn async_events_and_a_daemon_that_dies() {
    let fake = FakeDaemon::start("gone");
    let ctx = open(&fake);
    // SAFETY: every pointer below is a live handle of this test or a local.
    unsafe {
        let cq = iwv_create_cq(ctx, 8, null_mut(), null_mut());
        let mut ev = iwv_async_event::default();
        assert_eq!(iwv_get_async_event(ctx, &mut ev, 0), -IWV_EAGAIN);
        fake.send_event(Event::Async(AsyncEventMsg {
            resource: EventResourceRef::Qp(QpHandle(5)),
            kind: AsyncKind::TerminateReceived(0x0203),
        }));
        assert_eq!(iwv_get_async_event(ctx, &mut ev, 2000), 0);
        assert_eq!(
            ev,
            iwv_async_event {
                event_type: 1,
                resource_type: 0,
                handle: 5,
                code: 0x0203
            }
        );
        assert!(iwv_async_fd(ctx) >= 0);

        fake.kill();
        // Never a hang: every wait and call answers DAEMONGONE.
        assert_eq!(iwv_get_async_event(ctx, &mut ev, -1), -IWV_EDAEMONGONE);
        let mut wc = [iwv_wc::default(); 1];
        assert_eq!(iwv_poll_cq(cq, 1, wc.as_mut_ptr()), -IWV_EDAEMONGONE);
        assert!(iwv_alloc_pd(ctx).is_null());
        assert_eq!(iwv_last_error(), -IWV_EDAEMONGONE);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(IWV_EDAEMONGONE)
        );
        assert!(CStr::from_ptr(iwv_strerror(-IWV_EDAEMONGONE))
            .to_str()
            .unwrap()
            .contains("gone"));
        assert_eq!(iwv_destroy_cq(cq), 0);
        assert_eq!(iwv_close(ctx), 0);
    }
}
