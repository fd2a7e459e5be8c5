//! The `#[repr(C)]` structures of `include/iwarp_verbs.h`, field for field, with their
//! sizes asserted at compile time (the header asserts the same numbers) and their
//! offsets compared with the C compiler's in `tests/c_abi.rs`.

#![allow(non_camel_case_types)]

use std::ffi::c_void;
use std::mem::size_of;

use crate::handles::{iwv_arena, iwv_cm_id, iwv_cq, iwv_srq};

/// `struct iwv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_device_attr {
    pub vendor: [u8; 64],
    pub daemon: [u8; 64],
    pub version: [u8; 32],
    pub ports: u32,
    pub cores: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_mr_size: u64,
    pub max_pd: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_ird: u32,
    pub max_ord: u32,
    pub max_private_data: u32,
    pub max_arena_bytes: u64,
    pub memory_windows: u8,
    pub srq: u8,
    pub reserved: [u8; 6],
}

/// `struct iwv_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_port_attr {
    pub index: u32,
    pub ip: [u8; 4],
    pub prefix_len: u8,
    pub mac: [u8; 6],
    pub link_up: u8,
    pub mtu: u32,
    pub speed_mbps: u32,
    pub device: [u8; 64],
}

/// `struct iwv_async_event`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_async_event {
    pub event_type: u32,
    pub resource_type: u32,
    pub handle: u32,
    pub code: u32,
}

/// `struct iwv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub byte_len: u32,
    pub qp_num: u32,
    pub wc_flags: u32,
    pub invalidated_stag: u32,
}

/// `struct iwv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `iwv_send_wr.rdma`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct iwv_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
    pub reserved: u32,
}

/// `iwv_send_wr.fast_reg`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_fast_reg {
    pub arena: *mut iwv_arena,
    pub offset: u64,
    pub length: u64,
    pub stag: u32,
    pub access: u32,
    pub zero_based: u32,
    pub reserved: u32,
}

/// `iwv_send_wr.bind`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct iwv_bind {
    pub mw_stag: u32,
    pub mr_lkey: u32,
    pub addr: u64,
    pub length: u64,
    pub access: u32,
    pub zero_based: u32,
}

/// `struct iwv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_send_wr {
    pub wr_id: u64,
    pub next: *mut iwv_send_wr,
    pub sg_list: *mut iwv_sge,
    pub num_sge: u32,
    pub opcode: u32,
    pub send_flags: u32,
    pub invalidate_stag: u32,
    pub rdma: iwv_rdma,
    pub fast_reg: iwv_fast_reg,
    pub bind: iwv_bind,
}

/// `struct iwv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_recv_wr {
    pub wr_id: u64,
    pub next: *mut iwv_recv_wr,
    pub sg_list: *mut iwv_sge,
    pub num_sge: u32,
    pub reserved: u32,
}

/// `struct iwv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
}

/// `struct iwv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_qp_init_attr {
    pub send_cq: *mut iwv_cq,
    pub recv_cq: *mut iwv_cq,
    pub srq: *mut iwv_srq,
    pub cap: iwv_qp_cap,
    pub sq_sig_all: u32,
    pub ord: u32,
    pub ird: u32,
    pub remote_read: u32,
    pub remote_write: u32,
    pub bind_enabled: u32,
    pub qp_context: *mut c_void,
}

/// `struct iwv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_qp_attr {
    pub qp_state: u32,
    pub ord: u32,
    pub ird: u32,
    pub cap: iwv_qp_cap,
    pub rq_limit: u32,
    pub qp_num: u32,
    pub core: u32,
    pub connected: u32,
    pub terminate_sent: i32,
    pub terminate_received: i32,
    pub reserved: u32,
}

/// `struct iwv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub armed: u32,
}

/// `struct iwv_addr` (port in host byte order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct iwv_addr {
    pub ip: [u8; 4],
    pub port: u16,
    pub reserved: u16,
}

/// `struct iwv_conn_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u32,
    pub responder_resources: u32,
    pub initiator_depth: u32,
    pub reserved: u32,
}

/// `struct iwv_cm_event`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iwv_cm_event {
    pub id: *mut iwv_cm_id,
    pub listen_id: *mut iwv_cm_id,
    pub event: u32,
    pub status: i32,
    pub private_data: *const c_void,
    pub private_data_len: u32,
    pub qp_num: u32,
    pub remote: iwv_addr,
    pub local: iwv_addr,
    pub ird: u32,
    pub ord: u32,
    pub mpa_code: u32,
    pub reserved: u32,
}

// The numbers of the header's `IWV_STATIC_ASSERT`s (64-bit targets).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<iwv_device_attr>() == 240);
    assert!(size_of::<iwv_port_attr>() == 88);
    assert!(size_of::<iwv_async_event>() == 16);
    assert!(size_of::<iwv_wc>() == 32);
    assert!(size_of::<iwv_sge>() == 16);
    assert!(size_of::<iwv_send_wr>() == 128);
    assert!(size_of::<iwv_recv_wr>() == 32);
    assert!(size_of::<iwv_qp_cap>() == 16);
    assert!(size_of::<iwv_qp_init_attr>() == 72);
    assert!(size_of::<iwv_qp_attr>() == 56);
    assert!(size_of::<iwv_srq_attr>() == 16);
    assert!(size_of::<iwv_addr>() == 8);
    assert!(size_of::<iwv_conn_param>() == 24);
    assert!(size_of::<iwv_cm_event>() == 72);
};

/// Copies `s` into a fixed C string field, truncated, NUL-terminated.
pub(crate) fn copy_cstr(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
    for b in &mut dst[n..] {
        *b = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cstr_truncates_and_terminates() {
        let mut b = [0xffu8; 4];
        copy_cstr(&mut b, "abcdef");
        assert_eq!(&b, b"abc\0");
        copy_cstr(&mut b, "x");
        assert_eq!(&b, b"x\0\0\0");
    }
}
