//! What the generated stubs do (build.rs): rdma-core symbols this library does not
//! implement fail with `EOPNOTSUPP`, as a provider without the verb does.

use crate::debug::debug;
use crate::errno::set_errno;

/// Sets `errno` to `EOPNOTSUPP` and returns it (stubs of `int` functions return it; those
/// of pointer functions return NULL, those of `-1` functions -1).
pub(crate) fn unsupported(name: &str) -> libc::c_int {
    debug!("{name}: not supported by iwarpd's libibverbs");
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

/// A `void` function this library does not implement (provider registration and the like).
pub(crate) fn ignored(name: &str) {
    debug!("{name}: ignored by iwarpd's libibverbs");
}
