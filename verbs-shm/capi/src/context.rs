//! The device: `iwv_open`, `iwv_close`, queries, timeouts, asynchronous events, and the
//! error-reporting entry points.

use std::ffi::{c_char, c_int};
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::time::Duration;

use iwarp_verbs::{AsyncKind, Context, EventResourceRef};

use crate::error::{guard, guard_new, guard_value, last_code, last_message, strerror, Failure};
use crate::handles::{iwv_context, obj, obj_mut, str_arg, take, wait_event};
use crate::types::{copy_cstr, iwv_addr, iwv_async_event, iwv_device_attr, iwv_port_attr};

#[no_mangle]
pub extern "C" fn iwv_strerror(code: c_int) -> *const c_char {
    strerror(code).as_ptr()
}

#[no_mangle]
pub extern "C" fn iwv_last_error() -> c_int {
    last_code()
}

#[no_mangle]
pub extern "C" fn iwv_last_error_message() -> *const c_char {
    last_message()
}

#[no_mangle]
pub unsafe extern "C" fn iwv_open(name: *const c_char) -> *mut iwv_context {
    guard_new(|| {
        // SAFETY: `name` is NULL or a C string (header contract).
        let name = unsafe { str_arg(name, "name") }?.unwrap_or("iwarpd");
        Ok(iwv_context {
            ctx: Context::open(name)?,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_open_path(socket_path: *const c_char) -> *mut iwv_context {
    guard_new(|| {
        // SAFETY: `socket_path` is NULL or a C string (header contract).
        let path = unsafe { str_arg(socket_path, "socket_path") }?
            .ok_or_else(|| Failure::null("socket_path"))?;
        Ok(iwv_context {
            ctx: Context::open_path(Path::new(path))?,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_close(ctx: *mut iwv_context) -> c_int {
    guard(|| {
        // SAFETY: `ctx` came from `iwv_open` and is closed once (header contract).
        drop(unsafe { take(ctx, "ctx") }?);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_query_device(
    ctx: *mut iwv_context,
    attr: *mut iwv_device_attr,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable struct, or NULL (header contract).
        let (c, out) = unsafe { (obj(ctx, "ctx")?, obj_mut(attr, "attr")?) };
        let d = c.ctx.query_device()?;
        let mut a = iwv_device_attr {
            vendor: [0; 64],
            daemon: [0; 64],
            version: [0; 32],
            ports: d.ports,
            cores: d.cores,
            max_qp: d.max_qp,
            max_qp_wr: d.max_qp_wr,
            max_sge: d.max_sge,
            max_cq: d.max_cq,
            max_cqe: d.max_cqe,
            max_mr: d.max_mr,
            max_mr_size: d.max_mr_size,
            max_pd: d.max_pd,
            max_srq: d.max_srq,
            max_srq_wr: d.max_srq_wr,
            max_ird: d.max_ird,
            max_ord: d.max_ord,
            max_private_data: d.max_private_data,
            max_arena_bytes: d.max_arena_bytes,
            memory_windows: d.memory_windows as u8,
            srq: d.srq as u8,
            reserved: [0; 6],
        };
        copy_cstr(&mut a.vendor, &d.vendor);
        copy_cstr(&mut a.daemon, &d.daemon);
        copy_cstr(&mut a.version, &d.version);
        *out = a;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_query_port(
    ctx: *mut iwv_context,
    port: u32,
    attr: *mut iwv_port_attr,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable struct, or NULL (header contract).
        let (c, out) = unsafe { (obj(ctx, "ctx")?, obj_mut(attr, "attr")?) };
        let p = c.ctx.query_port(port)?;
        let mut a = iwv_port_attr {
            index: p.index,
            ip: p.ip,
            prefix_len: p.prefix_len,
            mac: p.mac,
            link_up: p.link_up as u8,
            mtu: p.mtu,
            speed_mbps: p.speed_mbps,
            device: [0; 64],
        };
        copy_cstr(&mut a.device, &p.device);
        *out = a;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_set_timeout(ctx: *mut iwv_context, timeout_ms: u32) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        c.ctx
            .set_timeout(Duration::from_millis(timeout_ms.max(1) as u64));
        Ok(0)
    })
}

/// `(event_type, code)` of an asynchronous event kind (`enum iwv_async_event_type`).
pub(crate) fn async_kind(k: AsyncKind) -> (u32, u32) {
    use AsyncKind::*;
    match k {
        LlpCloseComplete => (0, 0),
        TerminateReceived(c) => (1, c as u32),
        LlpConnectionReset => (2, 0),
        LlpConnectionLost => (3, 0),
        LlpIntegrityError(c) => (4, c as u32),
        RemoteOperationError(c) => (5, c as u32),
        ProtectionError(c) => (6, c as u32),
        BadClose => (7, 0),
        BadLlpClose => (8, 0),
        CqError => (9, 0),
        SrqError => (10, 0),
        LocalQpCatastrophic => (11, 0),
        CqOverflow => (12, 0),
        SrqLimitReached => (13, 0),
        QpRqLimitReached => (14, 0),
        QpErrorStateEntered => (15, 0),
    }
}

/// `(resource_type, handle)` of an event's resource (`enum iwv_resource_type`).
pub(crate) fn async_resource(r: EventResourceRef) -> (u32, u32) {
    match r {
        EventResourceRef::Qp(h) => (0, h.0),
        EventResourceRef::Cq(h) => (1, h.0),
        EventResourceRef::Srq(h) => (2, h.0),
        EventResourceRef::Device => (3, 0),
    }
}

#[no_mangle]
pub unsafe extern "C" fn iwv_get_async_event(
    ctx: *mut iwv_context,
    event: *mut iwv_async_event,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable struct, or NULL (header contract).
        let (c, out) = unsafe { (obj(ctx, "ctx")?, obj_mut(event, "event")?) };
        let ev = if timeout_ms < 0 {
            c.ctx.get_async_event()?
        } else {
            wait_event(c.ctx.async_fd(), timeout_ms, || c.ctx.try_get_async_event())?
        };
        let (event_type, code) = async_kind(ev.kind);
        let (resource_type, handle) = async_resource(ev.resource);
        *out = iwv_async_event {
            event_type,
            resource_type,
            handle,
            code,
        };
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_async_fd(ctx: *mut iwv_context) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        Ok(c.ctx.async_fd().as_raw_fd() as RawFd)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_addr_init(
    addr: *mut iwv_addr,
    ipv4: *const c_char,
    port: u16,
) -> c_int {
    guard(|| {
        // SAFETY: writable struct and C string, or NULL (header contract).
        let (out, ip) = unsafe { (obj_mut(addr, "addr")?, str_arg(ipv4, "ipv4")?) };
        let ip: std::net::Ipv4Addr = match ip {
            None => std::net::Ipv4Addr::UNSPECIFIED,
            Some(s) => s
                .parse()
                .map_err(|_| Failure::invalid(format!("{s:?} is not a dotted IPv4 address")))?,
        };
        *out = iwv_addr {
            ip: ip.octets(),
            port,
            reserved: 0,
        };
        Ok(0)
    })
}

#[no_mangle]
pub extern "C" fn iwv_wc_status_str(status: u32) -> *const c_char {
    guard_value(c"unknown status".as_ptr(), || {
        Ok(crate::cq::status_name(status).as_ptr())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{IWV_EFAULT, IWV_EINVAL};

    #[test]
    fn addr_init_parses() {
        let mut a = iwv_addr::default();
        // SAFETY: valid pointers.
        let ok = unsafe { iwv_addr_init(&mut a, c"10.1.2.3".as_ptr(), 4791) };
        assert_eq!(ok, 0);
        assert_eq!(a.ip, [10, 1, 2, 3]);
        assert_eq!(a.port, 4791);
        // SAFETY: valid pointers; NULL ip is allowed.
        assert_eq!(unsafe { iwv_addr_init(&mut a, std::ptr::null(), 7) }, 0);
        assert_eq!(a.ip, [0; 4]);
        // SAFETY: valid pointers.
        let bad = unsafe { iwv_addr_init(&mut a, c"10.1.2".as_ptr(), 7) };
        assert_eq!(bad, -IWV_EINVAL);
        // SAFETY: NULL is allowed.
        let null = unsafe { iwv_addr_init(std::ptr::null_mut(), std::ptr::null(), 7) };
        assert_eq!(null, -IWV_EFAULT);
    }

    #[test]
    fn open_without_daemon_fails_cleanly() {
        // SAFETY: a valid C string.
        let c = unsafe { iwv_open_path(c"/nonexistent/iwarpd.verbs".as_ptr()) };
        assert!(c.is_null());
        assert!(iwv_last_error() < 0);
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { iwv_close(std::ptr::null_mut()) }, -IWV_EFAULT);
        // SAFETY: NULL is allowed.
        let r = unsafe { iwv_query_device(std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!(r, -IWV_EFAULT);
    }

    #[test]
    fn async_kinds_match_the_header() {
        assert_eq!(
            async_kind(AsyncKind::TerminateReceived(0x1234)),
            (1, 0x1234)
        );
        assert_eq!(async_kind(AsyncKind::QpErrorStateEntered), (15, 0));
        assert_eq!(async_resource(EventResourceRef::Device), (3, 0));
    }
}
