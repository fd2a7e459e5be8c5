//! Connection management and asynchronous events through the C API against a fake
//! iwarpd (tests/fake), and a daemon that dies under a C caller.

mod fake;

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

use fake::util::*;
use fake::FakeDaemon;
use iwarp_shm_socket::{
    Addr, AsyncEventMsg, AsyncKind, CmEvent, CmIdHandle, ConnParam, ConnectError, Event,
    EventResourceRef, QpHandle, Request,
};
use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::types::*;
use iwarp_verbs_capi::*;

#[test]
fn connection_manager_events() {
    let fake = FakeDaemon::listen("cm");
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
    let fake = FakeDaemon::listen("gone");
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
