//! A bounded FIFO of whole Ethernet frames in one preallocated buffer: the control
//! frames (ARP, ICMP echo replies, RSTs) waiting for `poll_transmit`.

/// Bounded FIFO of frames, each at most `slot_len` bytes. Never allocates after `new`.
#[derive(Debug)]
pub struct FrameQueue {
    slot_len: usize,
    bytes: Vec<u8>,
    lens: Vec<usize>,
    head: usize,
    len: usize,
}

impl FrameQueue {
    /// A queue of `slots` frames of up to `slot_len` bytes.
    pub fn new(slots: usize, slot_len: usize) -> FrameQueue {
        FrameQueue {
            slot_len,
            bytes: vec![0; slots * slot_len],
            lens: vec![0; slots],
            head: 0,
            len: 0,
        }
    }

    /// Number of queued frames.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Builds a frame in place: `build` gets a `slot_len` buffer and returns the frame
    /// length (`None`: nothing queued). Returns `false` if the queue is full.
    pub fn push_with(&mut self, build: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        let cap = self.lens.len();
        if self.len == cap {
            return false;
        }
        let slot = (self.head + self.len) % cap;
        let start = slot * self.slot_len;
        let buf = &mut self.bytes[start..start + self.slot_len];
        match build(buf) {
            Some(n) if n <= self.slot_len => {
                self.lens[slot] = n;
                self.len += 1;
                true
            }
            _ => true,
        }
    }

    /// Copies the oldest frame into `out` and removes it. A frame longer than `out` is
    /// dropped (returns `Some(0)` so the caller can count it). `None` if empty.
    pub fn pop_into(&mut self, out: &mut [u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let slot = self.head;
        self.head = (self.head + 1) % self.lens.len();
        self.len -= 1;
        let n = self.lens[slot];
        let start = slot * self.slot_len;
        match out.get_mut(..n) {
            Some(dst) => {
                dst.copy_from_slice(&self.bytes[start..start + n]);
                Some(n)
            }
            None => Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_bounded() {
        let mut q = FrameQueue::new(2, 8);
        assert!(q.push_with(|b| {
            b[..3].copy_from_slice(&[1, 2, 3]);
            Some(3)
        }));
        assert!(q.push_with(|b| {
            b[0] = 9;
            Some(1)
        }));
        assert!(!q.push_with(|_| Some(1)), "third frame does not fit");
        assert_eq!(q.len(), 2);
        let mut out = [0u8; 8];
        assert_eq!(q.pop_into(&mut out), Some(3));
        assert_eq!(&out[..3], &[1, 2, 3]);
        assert!(q.push_with(|b| {
            b[..2].copy_from_slice(&[7, 7]);
            Some(2)
        }));
        assert_eq!(q.pop_into(&mut out), Some(1));
        assert_eq!(out[0], 9);
        let mut small = [0u8; 1];
        assert_eq!(
            q.pop_into(&mut small),
            Some(0),
            "too long for the buffer: dropped"
        );
        assert_eq!(q.pop_into(&mut out), None);
        assert!(q.push_with(|_| None), "builder declined: nothing queued");
        assert!(q.is_empty());
    }
}
