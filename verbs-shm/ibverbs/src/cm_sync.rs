//! Synchronous CM ids and moving ids between channels, as librdmacm: an id made without
//! a channel (`rdma_create_id(NULL, ...)`, `rdma_create_ep`) has a channel of its own;
//! `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`, `rdma_accept` and
//! `rdma_disconnect` on it wait for their event on that channel, keep it in `id->event`
//! (acked by the next such call or by `rdma_destroy_id`) and fail with the event's status.
//! A synchronous listener's connection requests are synchronous too, each moved to a
//! channel of its own when it arrives (`rdma_get_request` returns them).

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::cm_channel::{
    iwarp_rdma_ack_cm_event, iwarp_rdma_create_event_channel, iwarp_rdma_destroy_event_channel,
    iwarp_rdma_get_cm_event, IwEventChannel, MAX_IDS,
};
use crate::cm_id::{last_errno, IwCmId};
use crate::errno::{errno_of, set_errno};
use crate::object::from_raw;
use crate::sys;

/// A new channel for one synchronous id, or the errno (set) of why not.
pub(crate) fn own_channel() -> Result<&'static IwEventChannel, c_int> {
    let ch = iwarp_rdma_create_event_channel();
    match from_raw::<IwEventChannel>(ch) {
        // SAFETY: made just now; lives until its id is destroyed or moved away.
        Some(c) => Ok(unsafe { &*(c as *const IwEventChannel) }),
        None => Err(-1),
    }
}

/// Acks the event a synchronous id keeps in `id->event`, if any.
pub(crate) fn ack_sync_event(i: &IwCmId) {
    let raw = i.raw();
    // SAFETY: the application's id; `event` is ours to keep for a synchronous id.
    let ev = unsafe { std::mem::replace(&mut (*raw).event, std::ptr::null_mut()) };
    if !ev.is_null() {
        iwarp_rdma_ack_cm_event(ev);
    }
}

/// librdmacm's `ucma_complete`: for a synchronous id, waits for the next event on its
/// channel and keeps it in `id->event`; 0, or -1 with `errno` from the event's status
/// (`ECONNREFUSED` for a reject). An asynchronous id: 0 at once (its event follows on
/// its channel).
pub(crate) fn complete(i: &IwCmId) -> c_int {
    if !i.is_sync() {
        return 0;
    }
    ack_sync_event(i);
    let mut ev: *mut sys::rdma_cm_event = std::ptr::null_mut();
    // SAFETY: our channel and a local output pointer.
    if unsafe { iwarp_rdma_get_cm_event(i.chan().raw(), &mut ev) } != 0 {
        return -1;
    }
    // SAFETY: the event just returned; the application's id.
    let (kind, status) = unsafe {
        (*i.raw()).event = ev;
        ((*ev).event, (*ev).status)
    };
    if status == 0 {
        return 0;
    }
    set_errno(if kind == sys::RDMA_CM_EVENT_REJECTED {
        libc::ECONNREFUSED
    } else {
        status.abs()
    });
    -1
}

/// Moves id `i` to channel `to` (`rdma_migrate_id`): its later events and those not yet
/// read arrive there. Both channels must be of the same device. `Err(errno)`.
pub(crate) fn migrate(i: &IwCmId, to: &'static IwEventChannel) -> Result<(), c_int> {
    let from = i.chan();
    if std::ptr::eq(from, to) {
        return Ok(());
    }
    if from.ctx != to.ctx {
        return Err(libc::EINVAL);
    }
    let handle = i.client.handle().0;
    let me = i as *const IwCmId as usize;
    // Known on the new channel first: its events are converted there as soon as routed.
    {
        let mut s = to.lock();
        if s.ids.len() >= MAX_IDS {
            return Err(libc::ENOMEM);
        }
        s.ids.push((handle, me));
    }
    if let Err(e) = i.client.migrate(&to.client) {
        to.lock().ids.retain(|(h, _)| *h != handle);
        return Err(errno_of(&e));
    }
    i.set_chan(to);
    let made = from.take_made(me);
    from.lock().ids.retain(|(h, _)| *h != handle);
    for m in made {
        // The new channel's queue has room for what another channel's held, unless the
        // application filled it meanwhile: then, as any full queue, the event is lost
        // and counted by no one; it cannot happen for a synchronous id's own channel.
        let _ = to.push_made(m);
    }
    Ok(())
}

/// Makes id `i` synchronous on a channel of its own (a synchronous listener's request).
/// `Err(errno)` (set).
pub(crate) fn make_sync(i: &IwCmId) -> Result<(), c_int> {
    let c = own_channel()?;
    if let Err(n) = migrate(i, c) {
        iwarp_rdma_destroy_event_channel(c.raw());
        set_errno(n);
        return Err(n);
    }
    i.sync.store(true, Ordering::Release);
    Ok(())
}

/// `int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)`:
/// the id's events go to `channel` from now on; with `channel` NULL, to a channel of its
/// own and the id becomes synchronous (not for an id that is synchronous already:
/// `EINVAL`). A synchronous id's old channel and kept event go.
#[no_mangle]
pub unsafe extern "C" fn iwarp_rdma_migrate_id(
    id: *mut sys::rdma_cm_id,
    ch: *mut sys::rdma_event_channel,
) -> c_int {
    const WHAT: &str = "rdma_migrate_id";
    let i = match crate::cm_id::id_of(WHAT, id) {
        Ok(i) => i,
        Err(n) => return n,
    };
    let was_sync = i.is_sync();
    let old = i.chan();
    let (to, sync) = if ch.is_null() {
        if was_sync {
            return crate::cm_id::err(WHAT, libc::EINVAL, "the id is synchronous already");
        }
        match own_channel() {
            Ok(c) => (c, true),
            Err(n) => return n,
        }
    } else {
        match from_raw::<IwEventChannel>(ch) {
            // SAFETY: channels live while they have ids; the application keeps it.
            Some(c) => (unsafe { &*(c as *const IwEventChannel) }, false),
            None => return crate::cm_id::err(WHAT, libc::EINVAL, "not a channel of this library"),
        }
    };
    if let Err(n) = migrate(i, to) {
        if sync {
            let e = last_errno();
            iwarp_rdma_destroy_event_channel(to.raw());
            set_errno(e);
        }
        return crate::cm_id::err(WHAT, n, "cannot move the id");
    }
    if was_sync && !std::ptr::eq(old, to) {
        ack_sync_event(i);
        // Its own channel, which has no id left.
        iwarp_rdma_destroy_event_channel(old.raw());
    }
    i.sync.store(sync, Ordering::Release);
    0
}
