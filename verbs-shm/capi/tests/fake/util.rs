//! C-side helpers of the fake-daemon tests.

use std::ffi::{c_void, CStr, CString};
use std::ptr::null_mut;

use iwarp_verbs_capi::types::*;
use iwarp_verbs_capi::*;

use super::FakeDaemon;

pub fn open(fake: &FakeDaemon) -> *mut iwv_context {
    let path = CString::new(fake.socket.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    let ctx = unsafe { iwv_open_path(path.as_ptr()) };
    assert!(!ctx.is_null(), "open: {}", last_message());
    ctx
}

pub fn last_message() -> String {
    // SAFETY: the library's per-thread message, NUL-terminated.
    unsafe { CStr::from_ptr(iwv_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

pub fn cstr(b: &[u8]) -> &str {
    CStr::from_bytes_until_nul(b).unwrap().to_str().unwrap()
}

pub fn blank_send(wr_id: u64, opcode: u32) -> iwv_send_wr {
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

pub fn qp_init(cq: *mut iwv_cq, depth: u32) -> iwv_qp_init_attr {
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
