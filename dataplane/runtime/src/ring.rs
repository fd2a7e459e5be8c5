//! A bounded ring of preallocated frame buffers between two threads: buffers travel from
//! a free queue to a filled queue and back, so nothing is allocated after construction.
//! Used for the forward rings between cores and the capture rings.

use crossbeam_queue::ArrayQueue;
use iwarp_types::Instant;

/// One preallocated frame buffer with what travels with it.
#[derive(Debug)]
pub struct FrameBuf {
    /// The buffer (its length is the ring's buffer length).
    pub data: Box<[u8]>,
    /// Bytes of `data` in use.
    pub len: usize,
    /// Length of the original frame (more than `len` when cut to a snap length).
    pub orig_len: usize,
    /// Which port the frame belongs to (global port id).
    pub port: u16,
    /// A small tag (forward kind, capture direction).
    pub tag: u8,
    /// When the frame was seen.
    pub ts: Instant,
}

impl FrameBuf {
    /// The bytes in use.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len.min(self.data.len())]
    }
}

/// A bounded single-producer single-consumer ring of frame buffers (built on two
/// lock-free `ArrayQueue`s; each buffer is in exactly one of them or held by one side).
#[derive(Debug)]
pub struct FrameRing {
    free: ArrayQueue<FrameBuf>,
    filled: ArrayQueue<FrameBuf>,
    buf_len: usize,
}

impl FrameRing {
    /// A ring of `frames` buffers (at least 1) of `buf_len` bytes each, all allocated now.
    pub fn new(frames: usize, buf_len: usize) -> FrameRing {
        let frames = frames.max(1);
        let free = ArrayQueue::new(frames);
        for _ in 0..frames {
            let b = FrameBuf {
                data: vec![0u8; buf_len].into_boxed_slice(),
                len: 0,
                orig_len: 0,
                port: 0,
                tag: 0,
                ts: Instant::ZERO,
            };
            // Cannot fail: the queue has room for every buffer.
            let _ = free.push(b);
        }
        FrameRing {
            free,
            filled: ArrayQueue::new(frames),
            buf_len,
        }
    }

    /// Length of each buffer.
    pub fn buf_len(&self) -> usize {
        self.buf_len
    }

    /// Number of buffers.
    pub fn capacity(&self) -> usize {
        self.free.capacity()
    }

    /// Frames waiting for the consumer.
    pub fn pending(&self) -> usize {
        self.filled.len()
    }

    /// Producer: copies `frame` (cut to the buffer length) into a free buffer and queues
    /// it. False if no buffer was free (the ring is full): the frame is not queued.
    pub fn push_copy(&self, frame: &[u8], port: u16, tag: u8, ts: Instant) -> bool {
        let Some(mut b) = self.free.pop() else {
            return false;
        };
        let n = frame.len().min(b.data.len());
        b.data[..n].copy_from_slice(&frame[..n]);
        b.len = n;
        b.orig_len = frame.len();
        b.port = port;
        b.tag = tag;
        b.ts = ts;
        match self.filled.push(b) {
            Ok(()) => true,
            Err(b) => {
                // Cannot happen (as many slots as buffers); keep the buffer anyway.
                let _ = self.free.push(b);
                false
            }
        }
    }

    /// Consumer: the oldest queued frame. Give it back with [`FrameRing::recycle`].
    pub fn pop(&self) -> Option<FrameBuf> {
        self.filled.pop()
    }

    /// Consumer: returns a buffer taken with [`FrameRing::pop`].
    pub fn recycle(&self, b: FrameBuf) {
        let _ = self.free.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_recycled() {
        let r = FrameRing::new(2, 8);
        assert!(r.push_copy(b"abc", 1, 2, Instant(3)));
        assert!(r.push_copy(b"0123456789", 4, 0, Instant(5)));
        assert!(!r.push_copy(b"x", 0, 0, Instant::ZERO), "full");
        let a = r.pop().unwrap();
        assert_eq!(
            (a.bytes(), a.port, a.tag, a.ts),
            (&b"abc"[..], 1, 2, Instant(3))
        );
        let b = r.pop().unwrap();
        assert_eq!(
            (b.bytes(), b.orig_len),
            (&b"01234567"[..], 10),
            "cut to the buffer"
        );
        assert!(r.pop().is_none());
        r.recycle(a);
        assert!(r.push_copy(b"y", 0, 0, Instant::ZERO));
        assert!(!r.push_copy(b"z", 0, 0, Instant::ZERO));
        r.recycle(b);
        assert_eq!(r.capacity(), 2);
    }
}
