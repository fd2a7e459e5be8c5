//! Resource handles and the STag.

/// Protection domain identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PdId(pub u32);

/// Completion queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqId(pub u32);

/// Queue pair identifier (the verbs "QP ID"; also its handle inside one engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QpId(pub u32);

/// Shared receive queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SrqId(pub u32);

/// An LLP connection (TCP + MPA) inside one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// A caller-owned memory arena (a client's hugepage arena in the daemon, a `Vec<u8>` in
/// tests). Memory regions are carved out of regions; see [`crate::Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub u32);

/// Steering Tag: 24-bit index (most significant bits, chosen by the engine) and 8-bit
/// key (least significant bits, chosen by the consumer). Verbs spec section 7.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Stag(pub u32);

impl Stag {
    /// The STag of zero (privileged physical addressing only; never remotely valid).
    pub const ZERO: Stag = Stag(0);

    /// Builds an STag from its index (24 bits) and key.
    pub const fn new(index: u32, key: u8) -> Stag {
        Stag((index << 8) | key as u32)
    }

    /// The 24-bit STag index.
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The 8-bit STag key.
    pub const fn key(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// The same index with another key.
    pub const fn with_key(self, key: u8) -> Stag {
        Stag::new(self.index(), key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stag_split() {
        let s = Stag::new(0x12_3456, 0x78);
        assert_eq!(s.0, 0x1234_5678);
        assert_eq!(s.index(), 0x12_3456);
        assert_eq!(s.key(), 0x78);
        assert_eq!(s.with_key(0x9a).0, 0x1234_569a);
    }
}
