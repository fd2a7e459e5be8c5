//! Connection management (librdmacm-like): event channels, CM ids, listen, connect,
//! accept, reject, disconnect, events.

use std::ffi::{c_int, c_void};
use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use iwarp_verbs::{Addr, CmEvent, CmEventInfo, ConnParam, ConnectError, ListenAddr};

use crate::error::{guard, guard_new, guard_value, CResult, Failure, IWV_EBUSY};
use crate::handles::{
    iwv_cm_id, iwv_context, iwv_event_channel, iwv_pd, iwv_qp, lock, obj, obj_mut, take,
    wait_event, HandleMap,
};
use crate::qp::create_with;
use crate::types::{iwv_addr, iwv_cm_event, iwv_conn_param, iwv_qp_init_attr};

/// An event handed to the application: the C struct first, then what it points to.
#[repr(C)]
struct EventBox {
    event: iwv_cm_event,
    private_data: Vec<u8>,
}

fn addr_to(a: Addr) -> iwv_addr {
    iwv_addr {
        ip: a.ip,
        port: a.port,
        reserved: 0,
    }
}

/// `(status, mpa_code)` of a connect error (`enum iwv_connect_error`).
fn connect_error(e: ConnectError) -> (i32, u32) {
    match e {
        ConnectError::Refused => (1, 0),
        ConnectError::Reset => (2, 0),
        ConnectError::Timeout => (3, 0),
        ConnectError::Unreachable => (4, 0),
        ConnectError::Mpa(c) => (5, c as u32),
        ConnectError::Aborted => (6, 0),
    }
}

/// A connection parameter from its C form (NULL: defaults).
///
/// # Safety
///
/// `p` is NULL or readable, its `private_data` NULL or `private_data_len` readable bytes.
unsafe fn conn_param(p: *const iwv_conn_param) -> CResult<ConnParam> {
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return Ok(ConnParam::default());
    };
    let len = p.private_data_len as usize;
    if len > iwarp_verbs::proto::MAX_PRIVATE_DATA {
        return Err(Failure::invalid(format!(
            "{len} bytes of private data, at most {}",
            iwarp_verbs::proto::MAX_PRIVATE_DATA
        )));
    }
    // SAFETY: the caller's contract (checked for NULL when `len` > 0).
    let data = unsafe { bytes(p.private_data, len, "private_data") }?;
    Ok(ConnParam {
        private_data: data.to_vec(),
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
    })
}

/// `len` bytes at `p` (NULL allowed when `len` is 0).
///
/// # Safety
///
/// `p` is NULL or points to `len` readable bytes.
unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> CResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_event_channel(ctx: *mut iwv_context) -> *mut iwv_event_channel {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        Ok(iwv_event_channel {
            channel: c.ctx.create_cm_event_channel()?,
            ids: Arc::new(HandleMap::default()),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_event_channel_fd(channel: *mut iwv_event_channel) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let ch = unsafe { obj(channel, "channel") }?;
        Ok(ch.channel.as_fd().as_raw_fd())
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_event_channel(channel: *mut iwv_event_channel) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let ch = unsafe { obj(channel, "channel") }?;
        if !ch.ids.is_empty() {
            return Err(Failure::new(IWV_EBUSY, "CM ids of the channel still exist"));
        }
        // SAFETY: a handle of `iwv_create_event_channel`, destroyed once.
        drop(unsafe { take(channel, "channel") }?);
        Ok(0)
    })
}

/// Boxes a CM id handle and enters it in its channel's map.
fn new_id(id: iwarp_verbs::CmId, context: usize, ids: &Arc<HandleMap>) -> *mut iwv_cm_id {
    let handle = id.handle().0;
    let p = Box::into_raw(Box::new(iwv_cm_id {
        id,
        context,
        ids: ids.clone(),
    }));
    ids.insert(handle, p as usize, context);
    p
}

/// The C event of `info`; a connection request's new id becomes a new handle.
fn event_from(ch: &iwv_event_channel, info: CmEventInfo) -> Box<EventBox> {
    let (id_ptr, id_context) = ch.ids.get(info.id.0).unwrap_or((0, 0));
    let mut ev = iwv_cm_event {
        id: id_ptr as *mut iwv_cm_id,
        listen_id: std::ptr::null_mut(),
        event: 0,
        status: 0,
        private_data: std::ptr::null(),
        private_data_len: 0,
        qp_num: 0,
        remote: iwv_addr::default(),
        local: iwv_addr::default(),
        ird: 0,
        ord: 0,
        mpa_code: 0,
        reserved: 0,
    };
    let data = match info.event {
        CmEvent::ConnectRequest {
            remote,
            local,
            private_data,
            ird,
            ord,
            ..
        } => {
            ev.listen_id = ev.id;
            ev.id = match info.request {
                Some(new) => new_id(new, id_context, &ch.ids),
                None => std::ptr::null_mut(),
            };
            ev.remote = addr_to(remote);
            ev.local = addr_to(local);
            ev.ird = ird;
            ev.ord = ord;
            private_data
        }
        CmEvent::Established { private_data, qp } => {
            ev.event = 1;
            ev.qp_num = qp.0;
            private_data
        }
        CmEvent::Rejected { private_data } => {
            ev.event = 2;
            private_data
        }
        CmEvent::ConnectError(e) => {
            ev.event = 3;
            (ev.status, ev.mpa_code) = connect_error(e);
            Vec::new()
        }
        CmEvent::Disconnected => {
            ev.event = 4;
            Vec::new()
        }
        CmEvent::DeviceRemoval => {
            ev.event = 5;
            Vec::new()
        }
    };
    let mut b = Box::new(EventBox {
        event: ev,
        private_data: data,
    });
    b.event.private_data_len = b.private_data.len() as u32;
    if !b.private_data.is_empty() {
        b.event.private_data = b.private_data.as_ptr() as *const c_void;
    }
    b
}

#[no_mangle]
pub unsafe extern "C" fn iwv_get_cm_event(
    channel: *mut iwv_event_channel,
    event: *mut *mut iwv_cm_event,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable out-pointer, or NULL (header contract).
        let (ch, out) = unsafe { (obj(channel, "channel")?, obj_mut(event, "event")?) };
        let info = if timeout_ms < 0 {
            ch.channel.get_event()?
        } else {
            wait_event(ch.channel.as_fd(), timeout_ms, || {
                ch.channel.try_get_event()
            })?
        };
        let b = Box::into_raw(event_from(ch, info));
        // `event` is the first field of the `#[repr(C)]` box: same address.
        *out = b as *mut iwv_cm_event;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_ack_cm_event(event: *mut iwv_cm_event) -> c_int {
    guard(|| {
        // SAFETY: an event of `iwv_get_cm_event` (the first field of an `EventBox`),
        // acknowledged once (header contract).
        drop(unsafe { take(event as *mut EventBox, "event") }?);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_id(
    channel: *mut iwv_event_channel,
    context: *mut c_void,
) -> *mut iwv_cm_id {
    guard_value(std::ptr::null_mut(), || {
        // SAFETY: live handle or NULL (header contract).
        let ch = unsafe { obj(channel, "channel") }?;
        let id = ch.channel.create_id()?;
        Ok(new_id(id, context as usize, &ch.ids))
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_cm_id_context(id: *mut iwv_cm_id) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || {
        // SAFETY: live handle or NULL (header contract).
        Ok(unsafe { obj(id, "id") }?.context as *mut c_void)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_id(id: *mut iwv_cm_id) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_create_id` or a request's, destroyed once.
        let i = unsafe { take(id, "id") }?;
        i.ids.remove(i.id.handle().0);
        i.id.destroy()?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_listen(
    id: *mut iwv_cm_id,
    addr: *const iwv_addr,
    backlog: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and readable struct, or NULL (header contract).
        let (i, a) = unsafe { (obj(id, "id")?, obj(addr, "addr")?) };
        let backlog = u32::try_from(backlog).unwrap_or(0);
        i.id.listen(
            ListenAddr(Addr {
                ip: a.ip,
                port: a.port,
            }),
            backlog,
        )?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_connect(
    id: *mut iwv_cm_id,
    qp: *mut iwv_qp,
    remote: *const iwv_addr,
    param: *const iwv_conn_param,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and readable structs, or NULL (header contract).
        let (i, q, r) = unsafe { (obj(id, "id")?, obj(qp, "qp")?, obj(remote, "remote")?) };
        // SAFETY: as above.
        let param = unsafe { conn_param(param) }?;
        let remote = SocketAddrV4::new(r.ip.into(), r.port);
        i.id.connect(&lock(&q.qp), remote, &param)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_cm_create_qp(
    id: *mut iwv_cm_id,
    pd: *mut iwv_pd,
    attr: *const iwv_qp_init_attr,
) -> *mut iwv_qp {
    guard_new(|| {
        // SAFETY: live handles or NULL (header contract).
        let (i, p) = unsafe { (obj(id, "id")?, obj(pd, "pd")?) };
        // SAFETY: header contract on `attr` and the handles in it.
        unsafe { create_with(attr, |init| i.id.create_qp(&p.pd, init)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_accept(
    id: *mut iwv_cm_id,
    qp: *mut iwv_qp,
    param: *const iwv_conn_param,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and readable struct, or NULL (header contract).
        let (i, q) = unsafe { (obj(id, "id")?, obj(qp, "qp")?) };
        // SAFETY: as above.
        let param = unsafe { conn_param(param) }?;
        i.id.accept(&lock(&q.qp), &param)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_reject(
    id: *mut iwv_cm_id,
    private_data: *const c_void,
    private_data_len: u32,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let i = unsafe { obj(id, "id") }?;
        // SAFETY: NULL or `private_data_len` readable bytes (header contract).
        let data = unsafe { bytes(private_data, private_data_len as usize, "private_data") }?;
        i.id.reject(data)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_disconnect(id: *mut iwv_cm_id) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        unsafe { obj(id, "id") }?.id.disconnect()?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{IWV_EFAULT, IWV_EINVAL};

    #[test]
    fn conn_params_are_checked() {
        // SAFETY: NULL is allowed.
        let none = unsafe { conn_param(std::ptr::null()) }.unwrap();
        assert_eq!(none, ConnParam::default());
        let data = [7u8; 600];
        let mut p = iwv_conn_param {
            private_data: data.as_ptr() as *const c_void,
            private_data_len: 513,
            responder_resources: 4,
            initiator_depth: 2,
            reserved: 0,
        };
        // SAFETY: `data` has 600 readable bytes.
        assert_eq!(unsafe { conn_param(&p) }.unwrap_err().code, IWV_EINVAL);
        p.private_data_len = 3;
        // SAFETY: as above.
        let c = unsafe { conn_param(&p) }.unwrap();
        assert_eq!(c.private_data, vec![7, 7, 7]);
        assert_eq!((c.responder_resources, c.initiator_depth), (4, 2));
        p.private_data = std::ptr::null();
        // SAFETY: NULL data is checked.
        assert_eq!(unsafe { conn_param(&p) }.unwrap_err().code, IWV_EFAULT);
    }

    #[test]
    fn connect_errors_match_the_header() {
        assert_eq!(connect_error(ConnectError::Mpa(0x42)), (5, 0x42));
        assert_eq!(connect_error(ConnectError::Aborted), (6, 0));
    }

    #[test]
    fn null_arguments() {
        // SAFETY: NULL is allowed everywhere.
        unsafe {
            assert!(iwv_create_id(std::ptr::null_mut(), std::ptr::null_mut()).is_null());
            assert_eq!(iwv_ack_cm_event(std::ptr::null_mut()), -IWV_EFAULT);
            assert_eq!(iwv_disconnect(std::ptr::null_mut()), -IWV_EFAULT);
            let mut ev = std::ptr::null_mut();
            assert_eq!(
                iwv_get_cm_event(std::ptr::null_mut(), &mut ev, 0),
                -IWV_EFAULT
            );
        }
    }
}
