//! librdmacm's `rdma_getaddrinfo` / `rdma_freeaddrinfo` for IPv4 and the TCP port space.

use std::ffi::{c_char, c_int, CStr};
use std::net::{SocketAddr, ToSocketAddrs};

use crate::cm_id::sockaddr_in;
use crate::debug::debug;
use crate::errno::set_errno;
use crate::sys;

/// Addresses of a name looked at (the first IPv4 one is used).
const MAX_RESOLVED: usize = 64;

/// `int rdma_getaddrinfo(const char *node, const char *service, hints, **res)`: one
/// IPv4 address (the source with `RAI_PASSIVE`, else the destination). 0, or -1 and errno
/// (`EAFNOSUPPORT` for IPv6: an AF_INET6 hint, or a name with IPv6 addresses only).
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const sys::rdma_addrinfo,
    res: *mut *mut sys::rdma_addrinfo,
) -> c_int {
    // SAFETY: the caller's hints, or NULL.
    let h = unsafe { hints.as_ref() };
    let (flags, family) = h.map_or((0, libc::AF_UNSPEC), |h| (h.ai_flags, h.ai_family));
    // SAFETY: addresses in the caller's hints (each NULL or a socket address).
    let (hint_src, hint_dst) = unsafe {
        (
            h.and_then(|h| hint_addr(h.ai_src_addr)),
            h.and_then(|h| hint_addr(h.ai_dst_addr)),
        )
    };
    if res.is_null()
        || (node.is_null() && service.is_null() && hint_src.is_none() && hint_dst.is_none())
    {
        set_errno(libc::EINVAL);
        return -1;
    }
    if family != libc::AF_UNSPEC && family != libc::AF_INET {
        debug!("rdma_getaddrinfo: IPv4 only (iwarpd's iWARP runs over IPv4)");
        set_errno(libc::EAFNOSUPPORT);
        return -1;
    }
    let passive = flags & sys::RAI_PASSIVE as c_int != 0;
    // The address node/service name (as librdmacm: the source when passive, else the
    // destination); without them, the hints' addresses.
    let named = if node.is_null() && service.is_null() {
        None
    } else {
        // SAFETY: NUL-terminated strings or NULL from the caller.
        match unsafe { resolve(node, service) } {
            Ok(a) => Some(a),
            Err(n) => {
                set_errno(n);
                return -1;
            }
        }
    };
    let (src, dst) = match (named, passive) {
        (Some(a), true) => (Some(a), hint_dst),
        (Some(a), false) => (hint_src, Some(a)),
        (None, _) => (hint_src, hint_dst),
    };
    // SAFETY: calloc'd result and addresses, freed by rdma_freeaddrinfo.
    unsafe {
        let ai =
            libc::calloc(1, std::mem::size_of::<sys::rdma_addrinfo>()) as *mut sys::rdma_addrinfo;
        if ai.is_null() {
            set_errno(libc::ENOMEM);
            return -1;
        }
        (*ai).ai_flags = flags;
        (*ai).ai_family = libc::AF_INET;
        (*ai).ai_qp_type = sys::IBV_QPT_RC as c_int;
        (*ai).ai_port_space = sys::RDMA_PS_TCP as c_int;
        let len = std::mem::size_of::<libc::sockaddr_in>();
        for (a, is_src) in [(src, true), (dst, false)] {
            let Some(a) = a else { continue };
            let sa = libc::calloc(1, len) as *mut libc::sockaddr_in;
            if sa.is_null() {
                iwarp_rdma_freeaddrinfo(ai);
                set_errno(libc::ENOMEM);
                return -1;
            }
            *sa = a;
            if is_src {
                (*ai).ai_src_len = len as u32;
                (*ai).ai_src_addr = sa.cast();
            } else {
                (*ai).ai_dst_len = len as u32;
                (*ai).ai_dst_addr = sa.cast();
            }
        }
        *res = ai;
    }
    0
}

/// An IPv4 address of the hints (None: NULL or another family).
///
/// # Safety
///
/// `sa` is NULL or a readable socket address.
unsafe fn hint_addr(sa: *mut sys::sockaddr) -> Option<libc::sockaddr_in> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the family field of any socket address.
    if unsafe { (*sa).sa_family } as c_int != libc::AF_INET {
        return None;
    }
    // SAFETY: an AF_INET address is a sockaddr_in.
    Some(unsafe { *(sa as *const libc::sockaddr_in) })
}

/// The first IPv4 address of `node` (NULL: 0.0.0.0) and `service` (a port number, NULL:
/// 0), or the errno.
///
/// # Safety
///
/// `node` and `service` are NUL-terminated strings or NULL.
unsafe fn resolve(node: *const c_char, service: *const c_char) -> Result<libc::sockaddr_in, c_int> {
    // SAFETY: the caller's contract.
    let (node, service) = unsafe {
        (
            (!node.is_null()).then(|| CStr::from_ptr(node).to_string_lossy().into_owned()),
            (!service.is_null()).then(|| CStr::from_ptr(service).to_string_lossy().into_owned()),
        )
    };
    let port: u16 = match service.as_deref().map(str::parse) {
        None => 0,
        Some(Ok(p)) => p,
        Some(Err(_)) => return Err(libc::EINVAL),
    };
    let host = node.unwrap_or_else(|| "0.0.0.0".into());
    let addrs: Vec<SocketAddr> = match (host.as_str(), port).to_socket_addrs() {
        Ok(it) => it.take(MAX_RESOLVED).collect(),
        Err(e) => {
            debug!("rdma_getaddrinfo: {host}: {e}");
            return Err(libc::EADDRNOTAVAIL);
        }
    };
    let Some(SocketAddr::V4(a)) = addrs.iter().copied().find(SocketAddr::is_ipv4) else {
        // Only IPv6 addresses (or none): say which.
        debug!("rdma_getaddrinfo: {host}: no IPv4 address (iwarpd's iWARP runs over IPv4)");
        return Err(if addrs.is_empty() {
            libc::EADDRNOTAVAIL
        } else {
            libc::EAFNOSUPPORT
        });
    };
    Ok(sockaddr_in(iwarp_verbs::Addr {
        ip: a.ip().octets(),
        port: a.port(),
    }))
}

/// `void rdma_freeaddrinfo(struct rdma_addrinfo *res)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_freeaddrinfo(res: *mut sys::rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: a chain made by rdma_getaddrinfo.
        unsafe {
            let next = (*p).ai_next;
            libc::free((*p).ai_src_addr.cast());
            libc::free((*p).ai_dst_addr.cast());
            libc::free(p.cast());
            p = next;
        }
    }
}

/// `int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)`: rsockets are not supported,
/// so every descriptor is an ordinary one and this is `poll(2)` (rping waits on its CM
/// channel's fd with it).
#[no_mangle]
pub unsafe extern "C" fn iwarp_rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's pollfd array, passed through.
    unsafe { libc::poll(fds, nfds, timeout) }
}
