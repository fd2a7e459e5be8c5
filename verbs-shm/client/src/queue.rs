//! A client-to-core work ring (SQ, RQ, SRQ): encode, push, ring the doorbell. No system
//! call, no allocation, no lock.

use iwarp_shm_ring::{
    encode_recv_wr, encode_send_wr, DoorbellBlock, Producer, RingError, RingLayout,
};
use iwarp_shm_socket::RingRef;
use iwarp_types::{RecvWr, SendWr};

use crate::context::CtxInner;
use crate::{Error, Result};

/// The producing end of a work ring and its doorbell.
#[derive(Debug)]
pub(crate) struct WorkQueue {
    producer: Producer,
    doorbell: DoorbellBlock,
    bit: u32,
}

fn ring_error(e: RingError) -> Error {
    match e {
        RingError::Full => Error::QueueFull,
        e => Error::protocol(format!("work ring: {e}")),
    }
}

impl WorkQueue {
    /// Attaches to the ring `r` of `layout` in the ring area, rung at bit `bit` of
    /// core `core`'s doorbell block.
    pub(crate) fn attach(
        ctx: &CtxInner,
        r: &RingRef,
        layout: RingLayout,
        core: u32,
        bit: u32,
    ) -> Result<WorkQueue> {
        let region = ctx
            .area
            .ring_region(r.offset, layout)
            .map_err(|e| Error::protocol(format!("work ring at {}: {e}", r.offset)))?;
        let producer = Producer::attach(region, layout)
            .map_err(|e| Error::protocol(format!("work ring: {e}")))?;
        let doorbell = ctx
            .area
            .doorbell(core)
            .ok_or_else(|| Error::protocol(format!("no doorbell block for core {core}")))?;
        if bit >= iwarp_shm_ring::DOORBELL_BITS {
            return Err(Error::protocol(format!("doorbell bit {bit}")));
        }
        Ok(WorkQueue {
            producer,
            doorbell,
            bit,
        })
    }

    fn push(&mut self, slot: &[u8]) -> Result<()> {
        self.producer.push(slot).map_err(ring_error)
    }

    fn ring(&self) {
        // `bit` was checked at attach: cannot fail.
        self.doorbell.ring(self.bit);
    }

    /// Posts one send WR.
    pub(crate) fn post_send(&mut self, wr: &SendWr) -> Result<()> {
        self.push(&encode_send_wr(wr))?;
        self.ring();
        Ok(())
    }

    /// Posts send WRs in order until the ring is full; rings the doorbell once. Returns
    /// how many were posted ([`Error::QueueFull`] if none fit).
    pub(crate) fn post_send_batch(&mut self, wrs: &[SendWr]) -> Result<usize> {
        let mut n = 0;
        for wr in wrs {
            match self.push(&encode_send_wr(wr)) {
                Ok(()) => n += 1,
                Err(Error::QueueFull) if n > 0 => break,
                Err(e) => return Err(e),
            }
        }
        if n > 0 {
            self.ring();
        }
        Ok(n)
    }

    /// Posts one receive WR.
    pub(crate) fn post_recv(&mut self, wr: &RecvWr) -> Result<()> {
        self.push(&encode_recv_wr(wr))?;
        self.ring();
        Ok(())
    }

    /// Free slots (re-reads the consumer index).
    pub(crate) fn free(&mut self) -> Result<u32> {
        self.producer.free().map_err(ring_error)
    }
}
