//! Packet buffer pools (`rte_pktmbuf_pool_create`).

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

use iwarp_dpdk_sys as sys;

use crate::eal::{Eal, EalInner};
use crate::error::{call_error, DpdkError};

pub(crate) struct MempoolInner {
    pub(crate) ptr: NonNull<sys::rte_mempool>,
    name: String,
    data_room: u16,
    _eal: Arc<EalInner>,
}

// SAFETY: an rte_mempool is multi-producer/multi-consumer safe; the pointer is only
// freed when the last handle drops.
unsafe impl Send for MempoolInner {}
// SAFETY: as above; all operations through the pointer are thread-safe DPDK calls.
unsafe impl Sync for MempoolInner {}

impl Drop for MempoolInner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: no port queue (each holds a handle) and no
        // PortQueue still uses the pool; the EAL is alive (we hold it).
        unsafe { sys::rte_mempool_free(self.ptr.as_ptr()) };
    }
}

/// A pool of packet buffers. Cloning shares the pool; it is freed with the last clone
/// (ports and queues that use it hold one).
#[derive(Clone)]
pub struct Mempool {
    pub(crate) inner: Arc<MempoolInner>,
}

impl Mempool {
    /// Creates a pool of `n_mbufs` buffers of `data_room` bytes each (headroom of
    /// `RTE_PKTMBUF_HEADROOM` = 128 included) with a per-lcore cache of `cache`, on NUMA
    /// `socket` (`-1` for any).
    pub fn new(
        eal: &Eal,
        name: &str,
        n_mbufs: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Mempool, DpdkError> {
        let c_name = CString::new(name).map_err(|_| DpdkError::InvalidArgument {
            what: "mempool name",
            value: name.to_owned(),
        })?;
        if u32::from(data_room) <= sys::RTE_PKTMBUF_HEADROOM {
            return Err(DpdkError::Limit {
                port: format!("mempool {name}"),
                field: "data_room (must exceed the 128-byte headroom)",
                value: u64::from(data_room),
                limit: u64::from(sys::RTE_PKTMBUF_HEADROOM),
            });
        }
        // SAFETY: EAL initialised (we hold it); name is a valid C string copied by DPDK.
        let ptr = unsafe {
            sys::rte_pktmbuf_pool_create(c_name.as_ptr(), n_mbufs, cache, 0, data_room, socket)
        };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| call_error("rte_pktmbuf_pool_create", format!("mempool {name}"), 0))?;
        Ok(Mempool {
            inner: Arc::new(MempoolInner {
                ptr,
                name: name.to_owned(),
                data_room,
                _eal: eal.inner.clone(),
            }),
        })
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Bytes per buffer, headroom included.
    pub fn data_room(&self) -> u16 {
        self.inner.data_room
    }

    /// The largest frame one buffer holds (data room less headroom).
    pub fn frame_room(&self) -> usize {
        usize::from(self.inner.data_room).saturating_sub(sys::RTE_PKTMBUF_HEADROOM as usize)
    }

    /// Buffers free in the pool now (caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: valid pool pointer; the call only reads counters.
        unsafe { sys::rte_mempool_avail_count(self.inner.ptr.as_ptr()) }
    }

    /// Buffers in use now.
    pub fn in_use(&self) -> u32 {
        // SAFETY: valid pool pointer; the call only reads counters.
        unsafe { sys::rte_mempool_in_use_count(self.inner.ptr.as_ptr()) }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.inner.ptr.as_ptr()
    }
}
