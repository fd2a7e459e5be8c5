//! Completion channels and completion queues.

use std::ffi::{c_int, c_void, CStr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use iwarp_verbs::{Cqe, WcStatus, EMPTY_CQE};

use crate::error::{guard, guard_new, guard_value, Failure, IWV_EBUSY};
use crate::handles::{
    iwv_comp_channel, iwv_context, iwv_cq, lock, obj, obj_mut, take, wait_event, HandleMap,
};
use crate::types::iwv_wc;

/// `IWV_WC_WITH_INV`.
const WC_WITH_INV: u32 = 1 << 0;
/// `IWV_WC_SOLICITED`.
const WC_SOLICITED: u32 = 1 << 1;
/// Completions converted per batch of a poll (a stack buffer).
const POLL_BATCH: usize = 32;

/// The C form of a completion.
pub(crate) fn wc_from(c: &Cqe) -> iwv_wc {
    let mut flags = 0;
    if c.invalidated.is_some() {
        flags |= WC_WITH_INV;
    }
    if c.solicited {
        flags |= WC_SOLICITED;
    }
    iwv_wc {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode: c.opcode as u32,
        byte_len: c.byte_len,
        qp_num: c.qp.0,
        wc_flags: flags,
        invalidated_stag: c.invalidated.map_or(0, |s| s.0),
    }
}

/// The enum name of a completion status.
pub(crate) fn status_name(status: u32) -> &'static CStr {
    use WcStatus::*;
    let Some(s) = u8::try_from(status).ok().and_then(WcStatus::from_u8) else {
        return c"IWV_WC_UNKNOWN";
    };
    match s {
        Success => c"IWV_WC_SUCCESS",
        Flushed => c"IWV_WC_FLUSHED",
        InvalidWqe => c"IWV_WC_INVALID_WQE",
        LocalQpCatastrophic => c"IWV_WC_LOCAL_QP_CATASTROPHIC",
        RemoteTermination => c"IWV_WC_REMOTE_TERMINATION",
        InvalidStag => c"IWV_WC_INVALID_STAG",
        BaseBounds => c"IWV_WC_BASE_BOUNDS",
        AccessViolation => c"IWV_WC_ACCESS_VIOLATION",
        InvalidPd => c"IWV_WC_INVALID_PD",
        WrapError => c"IWV_WC_WRAP_ERROR",
        InvalidateStagInvalid => c"IWV_WC_INVALIDATE_STAG_INVALID",
        ZeroOrd => c"IWV_WC_ZERO_ORD",
        QpNotPrivileged => c"IWV_WC_QP_NOT_PRIVILEGED",
        StagNotInvalid => c"IWV_WC_STAG_NOT_INVALID",
        InvalidLength => c"IWV_WC_INVALID_LENGTH",
        InvalidAccessRights => c"IWV_WC_INVALID_ACCESS_RIGHTS",
        InvalidRegion => c"IWV_WC_INVALID_REGION",
        InvalidWindow => c"IWV_WC_INVALID_WINDOW",
        InvalidVa => c"IWV_WC_INVALID_VA",
        MwBindError => c"IWV_WC_MW_BIND_ERROR",
        RemoteAccessError => c"IWV_WC_REMOTE_ACCESS_ERROR",
        RemoteOperationError => c"IWV_WC_REMOTE_OPERATION_ERROR",
    }
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_comp_channel(ctx: *mut iwv_context) -> *mut iwv_comp_channel {
    guard_new(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(ctx, "ctx") }?;
        Ok(iwv_comp_channel {
            channel: c.ctx.create_comp_channel()?,
            cqs: Arc::new(HandleMap::default()),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_comp_channel_fd(channel: *mut iwv_comp_channel) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let ch = unsafe { obj(channel, "channel") }?;
        Ok(ch.channel.as_fd().as_raw_fd())
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_comp_channel(channel: *mut iwv_comp_channel) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let ch = unsafe { obj(channel, "channel") }?;
        if !ch.cqs.is_empty() {
            return Err(Failure::new(
                IWV_EBUSY,
                "CQs are still attached to the channel",
            ));
        }
        // SAFETY: a handle of `iwv_create_comp_channel`, destroyed once.
        drop(unsafe { take(channel, "channel") }?);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_get_cq_event(
    channel: *mut iwv_comp_channel,
    cq: *mut *mut iwv_cq,
    cq_context: *mut *mut c_void,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and writable out-pointers, or NULL (header contract).
        let (ch, cq_out) = unsafe { (obj(channel, "channel")?, obj_mut(cq, "cq")?) };
        let handle = if timeout_ms < 0 {
            ch.channel.get_cq_event()?
        } else {
            wait_event(ch.channel.as_fd(), timeout_ms, || {
                ch.channel.try_get_cq_event()
            })?
        };
        let (ptr, context) = ch.cqs.get(handle.0).unwrap_or((0, 0));
        *cq_out = ptr as *mut iwv_cq;
        // SAFETY: writable out-pointer or NULL (header contract).
        if let Ok(out) = unsafe { obj_mut(cq_context, "cq_context") } {
            *out = context as *mut c_void;
        }
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_ack_cq_events(cq: *mut iwv_cq, nevents: u32) {
    guard_value((), || {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(cq, "cq") }?;
        if let Some((ch, _)) = &c.channel {
            ch.ack_cq_events(nevents);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_create_cq(
    ctx: *mut iwv_context,
    depth: u32,
    cq_context: *mut c_void,
    channel: *mut iwv_comp_channel,
) -> *mut iwv_cq {
    let p = guard_new(|| {
        // SAFETY: live handles or NULL (header contract; the channel may be NULL).
        let c = unsafe { obj(ctx, "ctx") }?;
        // SAFETY: as above.
        let ch = unsafe { channel.as_ref() };
        let cq = c.ctx.create_cq(depth, ch.map(|ch| &ch.channel))?;
        Ok(iwv_cq {
            handle: cq.handle().0,
            depth: AtomicU32::new(cq.depth()),
            cq: Mutex::new(cq),
            channel: ch.map(|ch| (ch.channel.clone(), ch.cqs.clone())),
        })
    });
    // SAFETY: `p` is NULL or the CQ just created.
    if let Some(cq) = unsafe { p.as_ref() } {
        if let Some((_, map)) = &cq.channel {
            map.insert(cq.handle, p as usize, cq_context as usize);
        }
    }
    p
}

#[no_mangle]
pub unsafe extern "C" fn iwv_resize_cq(cq: *mut iwv_cq, depth: u32) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(cq, "cq") }?;
        let mut q = lock(&c.cq);
        q.resize(depth)?;
        c.depth.store(q.depth(), Ordering::Relaxed);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_destroy_cq(cq: *mut iwv_cq) -> c_int {
    guard(|| {
        // SAFETY: a handle of `iwv_create_cq`, destroyed once (header contract).
        let c = unsafe { take(cq, "cq") }?;
        if let Some((_, map)) = &c.channel {
            map.remove(c.handle);
        }
        drop(c);
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_cq_depth(cq: *mut iwv_cq) -> u32 {
    guard_value(0, || {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(cq, "cq") }?;
        Ok(c.depth.load(Ordering::Relaxed))
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_cq_handle(cq: *mut iwv_cq) -> u32 {
    // SAFETY: live handle or NULL (header contract).
    guard_value(0, || Ok(unsafe { obj(cq, "cq") }?.handle))
}

#[no_mangle]
pub unsafe extern "C" fn iwv_poll_cq(
    cq: *mut iwv_cq,
    num_entries: c_int,
    wc: *mut iwv_wc,
) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(cq, "cq") }?;
        let want = usize::try_from(num_entries)
            .map_err(|_| Failure::invalid(format!("num_entries {num_entries}")))?;
        if want == 0 {
            return Ok(0);
        }
        if wc.is_null() {
            return Err(Failure::null("wc"));
        }
        // SAFETY: `wc` points to `num_entries` writable completions (header contract).
        let out = unsafe { std::slice::from_raw_parts_mut(wc, want) };
        let mut q = lock(&c.cq);
        let mut buf = [EMPTY_CQE; POLL_BATCH];
        let mut got = 0;
        while got < want {
            let n = (want - got).min(POLL_BATCH);
            let k = q.poll(&mut buf[..n])?;
            for (o, cqe) in out[got..].iter_mut().zip(&buf[..k]) {
                *o = wc_from(cqe);
            }
            got += k;
            if k < n {
                break;
            }
        }
        Ok(got as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn iwv_req_notify_cq(cq: *mut iwv_cq, solicited_only: c_int) -> c_int {
    guard(|| {
        // SAFETY: live handle or NULL (header contract).
        let c = unsafe { obj(cq, "cq") }?;
        lock(&c.cq).req_notify(solicited_only != 0)?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{QpId, Stag, WcOpcode};

    #[test]
    fn completions_convert() {
        let c = Cqe {
            wr_id: 0xdead_beef_0000_0001,
            status: WcStatus::RemoteAccessError,
            opcode: WcOpcode::SendSeInv,
            byte_len: 4096,
            qp: QpId(77),
            invalidated: Some(Stag(0x1234_56ab)),
            solicited: true,
        };
        let w = wc_from(&c);
        assert_eq!(w.wr_id, 0xdead_beef_0000_0001);
        assert_eq!(w.status, 20);
        assert_eq!(w.opcode, 3);
        assert_eq!(w.byte_len, 4096);
        assert_eq!(w.qp_num, 77);
        assert_eq!(w.wc_flags, WC_WITH_INV | WC_SOLICITED);
        assert_eq!(w.invalidated_stag, 0x1234_56ab);
        assert_eq!(wc_from(&EMPTY_CQE).wc_flags, 0);
    }

    #[test]
    fn status_names() {
        assert_eq!(status_name(0), c"IWV_WC_SUCCESS");
        assert_eq!(status_name(21), c"IWV_WC_REMOTE_OPERATION_ERROR");
        assert_eq!(status_name(22), c"IWV_WC_UNKNOWN");
        assert_eq!(status_name(u32::MAX), c"IWV_WC_UNKNOWN");
    }

    #[test]
    fn poll_rejects_bad_arguments() {
        // SAFETY: NULL is allowed.
        let r = unsafe { iwv_poll_cq(std::ptr::null_mut(), 4, std::ptr::null_mut()) };
        assert_eq!(r, -crate::error::IWV_EFAULT);
    }
}
