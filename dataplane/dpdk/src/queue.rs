//! One rx queue and one tx queue of a port, used by one core: the DPDK [`FrameIo`].
//!
//! Receive bursts into a fixed array and frees the mbufs in bulk; multi-segment frames
//! are gathered into a per-queue scratch buffer (or dropped and counted when larger than
//! it). Transmit takes its buffers from the pool in bulk into a small stash (an offer that
//! sends nothing keeps its buffer, so it costs nothing), and batches frames up to a bound;
//! what the device does not take stays queued.

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use iwarp_dpdk_sys as sys;
use iwarp_runtime::{ChecksumCounters, FrameIo, PortCaps, TxOutcome};

use crate::mempool::Mempool;
use crate::offload;
use crate::port::{link_of, LinkStatus, PortInner};

/// Most frames one receive burst takes.
pub const RX_BURST_MAX: usize = 64;
/// Frames queued before [`PortQueue::tx_frame`] hands a batch to the device by itself.
pub const TX_BURST: usize = 32;
/// Most frames held for transmission (device back-pressure included).
pub const TX_BATCH_MAX: usize = 256;
/// Transmit buffers taken from the pool at once (one pool call per this many frames).
pub const TX_ALLOC_BULK: usize = 32;

/// Per-queue counters, plain fields read by the owning core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames delivered to `on_frame`.
    pub rx_frames: u64,
    /// Bytes delivered to `on_frame`.
    pub rx_bytes: u64,
    /// Frames the device took for transmission.
    pub tx_frames: u64,
    /// Bytes the device took for transmission.
    pub tx_bytes: u64,
    /// Flushes where the device took fewer frames than offered.
    pub tx_backpressure: u64,
    /// Multi-segment frames gathered into the scratch buffer.
    pub rx_multiseg_gathered: u64,
    /// Multi-segment frames dropped (larger than the scratch buffer).
    pub rx_multiseg_drops: u64,
    /// Frames dropped because a checksum was bad.
    pub rx_bad_checksum: u64,
    /// Frames whose TCP checksum the device verified (or vouched for).
    pub rx_checksum_verified: u64,
    /// Frames sent with their TCP checksum left to the device.
    pub tx_checksum_offloaded: u64,
    /// Transmit buffers that could not be allocated.
    pub alloc_failures: u64,
    /// Transmit offers whose `fill` returned a length beyond the buffer (discarded).
    pub tx_invalid: u64,
}

/// One queue pair of a started port, for one core. Created by [`crate::Port::queue`];
/// can move to a worker lcore (`Send`), not be shared.
pub struct PortQueue {
    port: Arc<PortInner>,
    pool: Mempool,
    port_id: u16,
    queue_id: u16,
    guard_slot: c_int,
    caps: PortCaps,
    /// With checksum offload: the device computes (on transmit) IPv4 header checksums
    /// too; else this queue sums the header.
    tx_ipv4_by_device: bool,
    rx: [*mut sys::rte_mbuf; RX_BURST_MAX],
    tx: Box<[*mut sys::rte_mbuf; TX_BATCH_MAX]>,
    tx_lens: Box<[u32; TX_BATCH_MAX]>,
    tx_count: usize,
    /// Free transmit buffers taken from the pool in bulk; the last one is offered next.
    stash: [*mut sys::rte_mbuf; TX_ALLOC_BULK],
    stash_len: usize,
    scratch: Box<[u8]>,
    /// Counters of this queue.
    pub counters: QueueCounters,
}

// SAFETY: the mbuf pointers are owned by this queue alone; the mempool is MT-safe; the
// rx/tx queue index is reserved for this handle (queue_taken), so moving it to another
// thread keeps DPDK's one-thread-per-queue rule. It is not Sync.
unsafe impl Send for PortQueue {}

const RX_IP_BAD: u64 = sys::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64;
const RX_IP_GOOD: u64 = sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
const RX_L4_BAD: u64 = sys::RTE_MBUF_F_RX_L4_CKSUM_BAD as u64;
const RX_L4_GOOD: u64 = sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64;
const RX_IP_MASK: u64 = sys::RTE_MBUF_F_RX_IP_CKSUM_MASK as u64;
const RX_L4_MASK: u64 = sys::RTE_MBUF_F_RX_L4_CKSUM_MASK as u64;

impl PortQueue {
    pub(crate) fn new(
        port: Arc<PortInner>,
        queue_id: u16,
        pool: Mempool,
        caps: PortCaps,
    ) -> PortQueue {
        let guard_slot = if port.info.driver == "net_memif" {
            // SAFETY: takes a free slot index or returns -1; no other precondition.
            unsafe { sys::shim_guard_slot_acquire() }
        } else {
            -1
        };
        let port_id = port.port_id;
        let tx_ipv4_by_device = port
            .setup
            .as_ref()
            .is_some_and(|s| s.tx_ipv4_checksum_offload);
        PortQueue {
            tx_ipv4_by_device,
            port,
            pool,
            port_id,
            queue_id,
            guard_slot,
            caps,
            rx: [std::ptr::null_mut(); RX_BURST_MAX],
            tx: Box::new([std::ptr::null_mut(); TX_BATCH_MAX]),
            tx_lens: Box::new([0; TX_BATCH_MAX]),
            tx_count: 0,
            stash: [std::ptr::null_mut(); TX_ALLOC_BULK],
            stash_len: 0,
            scratch: vec![0u8; caps.frame_len_max].into_boxed_slice(),
            counters: QueueCounters::default(),
        }
    }

    /// The queue index (rx and tx).
    pub fn queue_id(&self) -> u16 {
        self.queue_id
    }

    /// The port's link state, without waiting (a control-path call; not per frame).
    pub fn link(&self) -> LinkStatus {
        link_of(self.port_id)
    }

    /// True if bursts go through the memif peer-loss guard.
    pub fn guarded(&self) -> bool {
        self.guard_slot >= 0
    }

    /// Frames held for transmission.
    pub fn tx_pending(&self) -> usize {
        self.tx_count
    }

    /// Frees the frames held for transmission (e.g. after the link went down, so they
    /// do not reach the next peer); returns how many were dropped.
    pub fn tx_drop_pending(&mut self) -> usize {
        let n = self.tx_count;
        if n > 0 {
            // SAFETY: the first n entries are mbufs we own that the device never took.
            unsafe { sys::shim_pktmbuf_free_bulk(self.tx.as_mut_ptr(), n as u32) };
        }
        self.tx_count = 0;
        n
    }

    fn burst_rx(&mut self, n: u16) -> usize {
        let pkts = self.rx.as_mut_ptr();
        // SAFETY: this handle owns rx queue `queue_id` of a started port (the port is
        // kept alive by self.port and cannot be stopped while we exist); pkts has room
        // for n <= RX_BURST_MAX pointers; the guard slot, if any, is ours.
        let got = unsafe {
            if self.guard_slot >= 0 {
                sys::shim_rx_burst_guarded(self.guard_slot, self.port_id, self.queue_id, pkts, n)
            } else {
                sys::shim_rx_burst(self.port_id, self.queue_id, pkts, n)
            }
        };
        usize::from(got)
    }

    /// The bytes of received mbuf `m`: its data for one segment, else gathered into the
    /// scratch buffer; None if it does not fit there.
    fn frame_of(&mut self, m: *mut sys::rte_mbuf) -> Option<&[u8]> {
        // SAFETY: m is a valid mbuf the PMD handed us and we have not freed yet.
        let head = unsafe { &*m };
        if head.nb_segs == 1 {
            // SAFETY: a single segment's data lies at buf_addr + data_off for data_len bytes.
            return Some(unsafe {
                std::slice::from_raw_parts(
                    head.buf_addr.cast::<u8>().add(usize::from(head.data_off)),
                    usize::from(head.data_len),
                )
            });
        }
        let total = head.pkt_len as usize;
        if total > self.scratch.len() {
            self.counters.rx_multiseg_drops += 1;
            return None;
        }
        let mut at = 0;
        let mut seg = m;
        while !seg.is_null() && at < total {
            // SAFETY: seg is a segment of the chain (valid until the chain is freed).
            let s = unsafe { &*seg };
            let len = usize::from(s.data_len).min(total - at);
            // SAFETY: the segment's data is len bytes at buf_addr + data_off.
            let data = unsafe {
                std::slice::from_raw_parts(
                    s.buf_addr.cast::<u8>().add(usize::from(s.data_off)),
                    len,
                )
            };
            self.scratch[at..at + len].copy_from_slice(data);
            at += len;
            seg = s.next;
        }
        self.counters.rx_multiseg_gathered += 1;
        Some(&self.scratch[..at])
    }

    fn checksum_ok(&mut self, m: *mut sys::rte_mbuf, frame: &[u8]) -> bool {
        if !self.caps.rx_checksum_offload {
            return true;
        }
        // SAFETY: valid mbuf (see frame_of).
        let ol = unsafe { (*m).ol_flags };
        let (ip, l4) = (ol & RX_IP_MASK, ol & RX_L4_MASK);
        if ip == RX_IP_BAD || l4 == RX_L4_BAD {
            return false;
        }
        // GOOD: verified; NONE (both bits): not computed, but the data is intact (a
        // local sender that left its checksum to a device that never ran).
        let ip_done = ip == RX_IP_GOOD || ip == RX_IP_MASK;
        let l4_done = l4 == RX_L4_GOOD || l4 == RX_L4_MASK;
        if l4_done {
            self.counters.rx_checksum_verified += 1;
        }
        // What the device did not verify is checked here, as the engine will not.
        match (ip_done, l4_done) {
            (true, true) => true,
            (false, true) => offload::ipv4_header_ok(frame),
            _ => offload::checksums_ok(frame),
        }
    }

    /// The next free transmit buffer (kept until a frame is queued in it), refilling
    /// the stash in bulk, or one at a time when the pool runs low; None if the pool is
    /// empty.
    fn spare(&mut self) -> Option<*mut sys::rte_mbuf> {
        if self.stash_len == 0 {
            let pool = self.pool.as_ptr();
            // SAFETY: valid pool; the stash has room for TX_ALLOC_BULK pointers, which
            // are all written on success and none on failure.
            let ok = unsafe {
                sys::shim_pktmbuf_alloc_bulk(
                    pool,
                    self.stash.as_mut_ptr(),
                    TX_ALLOC_BULK as std::ffi::c_uint,
                )
            } == 0;
            if ok {
                self.stash_len = TX_ALLOC_BULK;
            } else {
                // SAFETY: valid pool; returns a reset mbuf or NULL.
                let m = unsafe { sys::shim_pktmbuf_alloc(pool) };
                if m.is_null() {
                    self.counters.alloc_failures += 1;
                    return None;
                }
                self.stash[0] = m;
                self.stash_len = 1;
            }
        }
        Some(self.stash[self.stash_len - 1])
    }
}

impl FrameIo for PortQueue {
    fn rx_burst(&mut self, max: usize, on_frame: &mut dyn FnMut(&[u8])) -> usize {
        let n = max.min(RX_BURST_MAX) as u16;
        if n == 0 {
            return 0;
        }
        let got = self.burst_rx(n);
        let mut delivered = 0;
        for i in 0..got {
            let m = self.rx[i];
            let Some(frame) = self.frame_of(m) else {
                continue;
            };
            // Copy out the slice bounds to end the borrow of self before checksum_ok.
            let (ptr, len) = (frame.as_ptr(), frame.len());
            // SAFETY: ptr/len describe either the mbuf data (alive until the bulk free
            // below) or self.scratch, which is not written until the next frame_of.
            let frame = unsafe { std::slice::from_raw_parts(ptr, len) };
            if !self.checksum_ok(m, frame) {
                self.counters.rx_bad_checksum += 1;
                continue;
            }
            on_frame(frame);
            delivered += 1;
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += len as u64;
        }
        if got > 0 {
            // SAFETY: the first `got` entries are mbufs we own; none is used after this.
            unsafe { sys::shim_pktmbuf_free_bulk(self.rx.as_mut_ptr(), got as u32) };
        }
        delivered
    }

    fn tx_frame(&mut self, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> TxOutcome {
        if self.tx_count >= TX_BATCH_MAX {
            self.tx_flush();
            if self.tx_count >= TX_BATCH_MAX {
                return TxOutcome::NoBuffer;
            }
        }
        let Some(m) = self.spare() else {
            return TxOutcome::NoBuffer;
        };
        // SAFETY: m is our freshly allocated (or unused spare) mbuf: one segment, no data.
        let (data, room) = unsafe {
            let room = usize::from(sys::shim_pktmbuf_tailroom(m)).min(self.caps.frame_len_max);
            (sys::shim_pktmbuf_mtod(m).cast::<u8>(), room)
        };
        // SAFETY: `room` bytes from the data start lie inside the mbuf's buffer, which
        // only this queue references.
        let buf = unsafe { std::slice::from_raw_parts_mut(data, room) };
        let len = fill(buf);
        if len == 0 {
            return TxOutcome::Empty;
        }
        if len > room {
            self.counters.tx_invalid += 1;
            return TxOutcome::Empty;
        }
        if self.caps.tx_checksum_offload {
            if let Some(off) = offload::prepare_tx(&mut buf[..len], self.tx_ipv4_by_device) {
                if off.ol_flags & sys::RTE_MBUF_F_TX_TCP_CKSUM != 0 {
                    self.counters.tx_checksum_offloaded += 1;
                }
                // SAFETY: valid mbuf we own; sets plain header fields.
                unsafe {
                    sys::shim_mbuf_set_tx_offload(
                        m,
                        off.ol_flags,
                        off.l2_len,
                        off.l3_len,
                        off.l4_len,
                    )
                };
            }
        }
        // SAFETY: valid mbuf we own; len <= tailroom, so data_len/pkt_len stay in bounds.
        unsafe {
            (*m).data_len = len as u16;
            (*m).pkt_len = len as u32;
        }
        self.stash_len -= 1;
        self.tx[self.tx_count] = m;
        self.tx_lens[self.tx_count] = len as u32;
        self.tx_count += 1;
        if self.tx_count >= TX_BURST {
            self.tx_flush();
        }
        TxOutcome::Queued(len)
    }

    fn tx_flush(&mut self) -> usize {
        if self.tx_count == 0 {
            return 0;
        }
        let n = self.tx_count as u16;
        let pkts = self.tx.as_mut_ptr();
        // SAFETY: this handle owns tx queue `queue_id` of a started port; the first n
        // entries are complete mbufs we own; the device takes ownership of those it sends.
        let sent = usize::from(unsafe {
            if self.guard_slot >= 0 {
                sys::shim_tx_burst_guarded(self.guard_slot, self.port_id, self.queue_id, pkts, n)
            } else {
                sys::shim_tx_burst(self.port_id, self.queue_id, pkts, n)
            }
        });
        let bytes: u64 = self.tx_lens[..sent].iter().map(|&l| u64::from(l)).sum();
        self.counters.tx_frames += sent as u64;
        self.counters.tx_bytes += bytes;
        if sent < self.tx_count {
            self.counters.tx_backpressure += 1;
            self.tx.copy_within(sent..self.tx_count, 0);
            self.tx_lens.copy_within(sent..self.tx_count, 0);
        }
        self.tx_count -= sent;
        self.tx_count
    }

    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn checksum_counters(&self) -> ChecksumCounters {
        ChecksumCounters {
            rx_verified: self.counters.rx_checksum_verified,
            rx_bad: self.counters.rx_bad_checksum,
            tx_offloaded: self.counters.tx_checksum_offloaded,
        }
    }
}

impl Drop for PortQueue {
    fn drop(&mut self) {
        // SAFETY: the pending and stashed mbufs are ours and never handed to the device.
        unsafe {
            if self.tx_count > 0 {
                sys::shim_pktmbuf_free_bulk(self.tx.as_mut_ptr(), self.tx_count as u32);
            }
            if self.stash_len > 0 {
                sys::shim_pktmbuf_free_bulk(self.stash.as_mut_ptr(), self.stash_len as u32);
            }
            if self.guard_slot >= 0 {
                sys::shim_guard_slot_release(self.guard_slot);
            }
        }
        if let Some(flag) = self.port.queue_taken.get(usize::from(self.queue_id)) {
            flag.store(false, Ordering::SeqCst);
        }
    }
}
