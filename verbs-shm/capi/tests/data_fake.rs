//! Work requests, completions and notifications through the C API against a fake iwarpd
//! (tests/fake): ring slots as the C caller wrote them, completions as the daemon pushed
//! them.

mod fake;

use std::ffi::{c_void, CStr};
use std::ptr::null_mut;

use fake::util::*;
use fake::FakeDaemon;
use iwarp_shm_socket::{QpHandle, QpModifyReq, QpStateValue, Request};
use iwarp_types::{Access, Cqe, QpId, SendOp, Stag, WcOpcode, WcStatus};
use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::types::*;
use iwarp_verbs_capi::*;

#[test]
fn work_requests_completions_and_notifications() {
    let fake = FakeDaemon::listen("data");
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
        // One WR alone (the fast path): posted, or refused with *bad_wr = it.
        let mut one = blank_send(50, 99);
        bad = null_mut();
        assert_eq!(iwv_post_send(qp, &mut one, &mut bad), -IWV_EINVAL);
        assert_eq!(bad, &mut one as *mut _);
        let mut four: Vec<_> = (51..55).map(|i| blank_send(i, 0)).collect();
        for w in four.iter_mut() {
            assert_eq!(iwv_post_send(qp, w, null_mut()), 0);
        }
        bad = null_mut();
        assert_eq!(iwv_post_send(qp, &mut one, &mut bad), -IWV_EINVAL);
        one.opcode = 0;
        assert_eq!(iwv_post_send(qp, &mut one, &mut bad), -IWV_EQUEUEFULL);
        assert_eq!(bad, &mut one as *mut _);
        let ids: Vec<_> = std::iter::from_fn(|| fake.pop_sq(n))
            .map(|w| w.wr_id)
            .collect();
        assert_eq!(ids, [51, 52, 53, 54]);

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
                0,
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
        assert!(!fake.fire_and_wake(h, 0), "fired without being armed");
        assert_eq!(iwv_req_notify_cq(cq, 0), 0);
        assert!(fake.fire_and_wake(h, 0));
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
