//! The device, memory and SRQ entry points against a fake iwarpd (tests/fake): what the C
//! caller asks is what the daemon receives, what the daemon answers is what C gets.

mod fake;

use std::ffi::c_void;
use std::ptr::null_mut;

use fake::util::*;
use fake::FakeDaemon;
use iwarp_shm_socket::{QpHandle, Request, SrqHandle};
use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::types::*;
use iwarp_verbs_capi::*;

#[test]
fn device_and_memory_verbs() {
    let fake = FakeDaemon::listen("memory");
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
fn user_memory_is_registered_in_place() {
    let fake = FakeDaemon::listen("user");
    let ctx = open(&fake);
    let mut buf: Vec<u8> = (0..3 * 4096).map(|i| (i % 251) as u8).collect();
    let ptr = buf.as_mut_ptr();
    // SAFETY: live handles; `buf` is memory of this process that outlives the MR and no
    // other thread touches.
    unsafe {
        let pd = iwv_alloc_pd(ctx);
        let mr = iwv_reg_user_mr(pd, ptr.add(100) as *mut c_void, 5000, 0x2);
        assert!(!mr.is_null(), "{}", last_message());
        assert_eq!(iwv_mr_addr(mr), ptr as u64 + 100);
        assert_eq!(iwv_mr_length(mr), 5000);
        // Same address, same contents, and now shared with the daemon.
        assert!(buf.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        let Some(Request::RegMr(reg)) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(reg.va, ptr as u64 + 100);
        // The MR starts at `ptr + 100`, byte `reg.offset` of its arena (the arena, a
        // window of addresses, may begin below the buffer's first page).
        *ptr.add(200) = 0xee;
        let seen = fake.arena_bytes(reg.arena.0, reg.offset as usize + 100, 1);
        assert_eq!(seen, [0xee]);
        assert!(iwv_reg_user_mr(pd, null_mut(), 10, 0x2).is_null());
        assert_eq!(iwv_last_error(), -IWV_EFAULT);
        assert!(iwv_reg_user_mr(pd, ptr as *mut c_void, 10, 0x20).is_null());
        assert_eq!(iwv_last_error(), -IWV_EINVAL);
        assert_eq!(iwv_dereg_mr(mr), 0);
        assert_eq!(iwv_dealloc_pd(pd), 0);
        assert_eq!(iwv_close(ctx), 0);
    }
    drop(buf);
}

#[test]
fn shared_receive_queues() {
    let fake = FakeDaemon::listen("srq");
    let ctx = open(&fake);
    // SAFETY: every pointer below is a live handle of this test or a local.
    unsafe {
        let pd = iwv_alloc_pd(ctx);
        let cq = iwv_create_cq(ctx, 8, null_mut(), null_mut());
        let attr = iwv_srq_attr {
            max_wr: 8,
            max_sge: 2,
            srq_limit: 1,
            armed: 0,
        };
        let srq = iwv_create_srq(pd, &attr);
        assert!(!srq.is_null(), "{}", last_message());
        let h = iwv_srq_handle(srq);
        let mut sge = iwv_sge {
            addr: 0x10,
            length: 64,
            lkey: 0x500,
        };
        let mut wrs: Vec<_> = (0..3)
            .map(|i| iwv_recv_wr {
                wr_id: 40 + i,
                next: null_mut(),
                sg_list: &mut sge,
                num_sge: 1,
                reserved: 0,
            })
            .collect();
        let p = wrs.as_mut_ptr();
        (*p).next = p.add(1);
        (*p.add(1)).next = p.add(2);
        let mut bad = null_mut();
        assert_eq!(iwv_post_srq_recv(srq, p, &mut bad), 0);
        let got: Vec<_> = std::iter::from_fn(|| fake.pop_srq(h)).collect();
        assert_eq!(
            got.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            [40, 41, 42]
        );
        assert_eq!(got[0].sgl.as_slice()[0].lkey.0, 0x500);
        // Too many SGEs: refused, *bad_wr is the WR.
        (*p).num_sge = 7;
        (*p).next = null_mut();
        assert_eq!(iwv_post_srq_recv(srq, p, &mut bad), -IWV_EINVAL);
        assert_eq!(bad, p);

        let m = iwv_srq_attr {
            srq_limit: 3,
            ..Default::default()
        };
        assert_eq!(iwv_modify_srq(srq, &m, 2), 0);
        let Some(Request::ModifySrq {
            srq: s,
            max_wr,
            limit,
        }) = fake.requests().last().cloned()
        else {
            panic!()
        };
        assert_eq!((s, max_wr, limit), (SrqHandle(h), None, Some(3)));
        assert_eq!(iwv_modify_srq(srq, &m, 4), -IWV_EINVAL);
        let mut q = iwv_srq_attr::default();
        assert_eq!(iwv_query_srq(srq, &mut q), 0);
        assert_eq!(
            q,
            iwv_srq_attr {
                max_wr: 16,
                max_sge: 2,
                srq_limit: 3,
                armed: 1
            }
        );

        let mut init = qp_init(cq, 8);
        init.srq = srq;
        let qp = iwv_create_qp(pd, &init);
        assert!(!qp.is_null(), "{}", last_message());
        let Some(Request::CreateQp(c)) = fake.requests().last().cloned() else {
            panic!()
        };
        assert_eq!(c.srq, Some(SrqHandle(h)));
        assert_eq!(
            iwv_post_recv(qp, p, &mut bad),
            -IWV_EINVAL,
            "no RQ: post to the SRQ"
        );
        // The SRQ handle goes; the daemon's SRQ goes with the QP using it.
        assert_eq!(iwv_destroy_srq(srq), 0);
        let destroyed = |f: &FakeDaemon| f.requests().contains(&Request::DestroySrq(SrqHandle(h)));
        assert!(!destroyed(&fake));
        let n = iwv_qp_num(qp);
        assert_eq!(iwv_destroy_qp(qp), 0);
        assert!(destroyed(&fake));
        assert!(fake.requests().contains(&Request::DestroyQp(QpHandle(n))));
        assert_eq!(iwv_destroy_cq(cq), 0);
        assert_eq!(iwv_dealloc_pd(pd), 0);
        assert_eq!(iwv_close(ctx), 0);
    }
}
