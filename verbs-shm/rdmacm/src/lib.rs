//! `librdmacm.so.1` of rdma-core's ABI for iwarpd (issue 12, docs/DROPIN.md): entry points
//! only. Every symbol of rdma-core 44's librdmacm jumps to its implementation in iwarpd's
//! `libibverbs.so.1` (crate iwarp-ibverbs, `iwarp_rdma_*`), where the verbs objects the
//! connection manager works on live; what is not implemented there fails with
//! `EOPNOTSUPP` (build.rs).

/// Sets `errno` to `EOPNOTSUPP` (the stubs).
fn unsupported() {
    // SAFETY: `__errno_location` returns the calling thread's errno, always valid.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
}

mod entries {
    include!(concat!(env!("OUT_DIR"), "/entries.rs"));
}
