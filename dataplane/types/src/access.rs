//! Access rights of memory regions, memory windows and queue pairs (verbs section 7.4).

use core::ops::{BitAnd, BitOr, BitOrAssign};

/// A set of access rights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access(pub u32);

impl Access {
    /// No rights.
    pub const NONE: Access = Access(0);
    /// Local read (source of Send / RDMA Write).
    pub const LOCAL_READ: Access = Access(1 << 0);
    /// Local write (sink of Receive / RDMA Read).
    pub const LOCAL_WRITE: Access = Access(1 << 1);
    /// Remote read (source of an inbound RDMA Read Request).
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// Remote write (sink of inbound RDMA Write and RDMA Read Response).
    pub const REMOTE_WRITE: Access = Access(1 << 3);
    /// Memory windows may be bound to this region.
    pub const MW_BIND: Access = Access(1 << 4);

    /// All of `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Any bit of `other` is in `self`.
    pub const fn intersects(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }

    /// True if some remote right is present.
    pub const fn has_remote(self) -> bool {
        self.intersects(Access(Self::REMOTE_READ.0 | Self::REMOTE_WRITE.0))
    }

    /// Union.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for Access {
    type Output = Access;
    fn bitand(self, rhs: Access) -> Access {
        Access(self.0 & rhs.0)
    }
}
