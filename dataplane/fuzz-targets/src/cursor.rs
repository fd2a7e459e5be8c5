//! A reader over fuzzer bytes that never fails: past the end it yields zeros and empty
//! slices, so a target can always draw the values it needs.

/// Draws integers and slices from the front of the fuzzer's input.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`.
    pub const fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data }
    }

    /// Bytes not drawn yet.
    pub const fn remaining(&self) -> usize {
        self.data.len()
    }

    /// True when everything was drawn.
    pub const fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One byte (zero at the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// A boolean from the low bit of one byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    /// Big-endian 16 bits (missing bytes read as zero).
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// Big-endian 32 bits (missing bytes read as zero).
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Big-endian 64 bits (missing bytes read as zero).
    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// A value in `0..n` (`0` when `n` is zero), from 16 bits.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// Sets up to `max` bytes of `bytes`, at places and to values drawn from the input
    /// (a valid message with a few bytes changed).
    pub fn change_bytes(&mut self, bytes: &mut [u8], max: u8) {
        for _ in 0..self.u8() % max.saturating_add(1) {
            let i = self.below(bytes.len());
            if let Some(b) = bytes.get_mut(i) {
                *b = self.u8();
            }
        }
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A length-prefixed slice: 16-bit length, capped at `max`, then that many bytes.
    pub fn chunk(&mut self, max: usize) -> &'a [u8] {
        let n = usize::from(self.u16()).min(max);
        self.take(n)
    }

    /// Everything not drawn yet.
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_in_order_and_zero_fills_past_the_end() {
        let mut c = Cursor::new(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07]);
        assert_eq!(c.u8(), 0x01);
        assert_eq!(c.u16(), 0x0203);
        assert_eq!(c.take(2), &[0x04, 0x05]);
        assert_eq!(c.remaining(), 2);
        assert_eq!(c.u32(), 0x0607_0000);
        assert!(c.is_empty());
        assert_eq!(c.u64(), 0);
        assert_eq!(c.take(5), &[] as &[u8]);
        assert_eq!(c.below(0), 0);
    }

    #[test]
    fn chunk_is_length_prefixed_and_capped() {
        let mut c = Cursor::new(&[0x00, 0x03, b'a', b'b', b'c', 0xff, 0xff, b'x', b'y']);
        assert_eq!(c.chunk(10), b"abc");
        assert_eq!(c.chunk(1), b"x");
        assert_eq!(c.rest(), b"y");
        assert!(c.is_empty());
    }
}
