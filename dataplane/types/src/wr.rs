//! Work requests (verbs section 8 and 9.3.1) and QP states (verbs section 6.2).

use crate::{Access, RegionId, Stag};

/// Maximum scatter/gather elements per work request (Send, Receive and RDMA Write).
pub const MAX_SGE: usize = 6;

/// A scatter/gather element: `length` bytes at tagged offset `addr` of the memory region
/// named by `lkey`. `addr` is a virtual address for VA-based regions and an offset for
/// zero-based ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Tagged offset of the first byte.
    pub addr: u64,
    /// Length in bytes; zero-length SGEs are not validated.
    pub length: u32,
    /// Local STag of the region.
    pub lkey: Stag,
}

/// A bounded scatter/gather list (no allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SgList {
    len: u8,
    sges: [Sge; MAX_SGE],
}

impl SgList {
    /// The empty list.
    pub const fn new() -> SgList {
        SgList {
            len: 0,
            sges: [Sge {
                addr: 0,
                length: 0,
                lkey: Stag(0),
            }; MAX_SGE],
        }
    }

    /// A list of one element.
    pub fn single(sge: Sge) -> SgList {
        let mut l = SgList::new();
        l.push(sge).expect("one element always fits");
        l
    }

    /// Builds a list from a slice; `None` if it has more than [`MAX_SGE`] elements.
    pub fn from_slice(sges: &[Sge]) -> Option<SgList> {
        if sges.len() > MAX_SGE {
            return None;
        }
        let mut l = SgList::new();
        l.sges[..sges.len()].copy_from_slice(sges);
        l.len = sges.len() as u8;
        Some(l)
    }

    /// Empties the list in place (every element back to zero, as in [`SgList::new`]).
    pub fn clear(&mut self) {
        *self = SgList::new();
    }

    /// Appends an element; gives it back if the list is full.
    pub fn push(&mut self, sge: Sge) -> Result<(), Sge> {
        if self.len as usize >= MAX_SGE {
            return Err(sge);
        }
        self.sges[self.len as usize] = sge;
        self.len += 1;
        Ok(())
    }

    /// The elements.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..self.len as usize]
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True if there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of the element lengths (u64: cannot overflow with six u32 lengths).
    pub fn total_len(&self) -> u64 {
        self.as_slice().iter().map(|s| s.length as u64).sum()
    }
}

/// Flags of a send-queue work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags(pub u32);

impl SendFlags {
    /// No flag: unsignaled, no fence.
    pub const NONE: SendFlags = SendFlags(0);
    /// Generate a work completion on success (errors always complete).
    pub const SIGNALED: SendFlags = SendFlags(1 << 0);
    /// Read Fence: wait for all prior RDMA Read-type WRs to complete first.
    pub const READ_FENCE: SendFlags = SendFlags(1 << 1);
    /// Local Fence (Invalidate Local STag): wait for all prior WRs to complete first.
    pub const LOCAL_FENCE: SendFlags = SendFlags(1 << 2);

    /// All of `other` is set.
    pub const fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, rhs: SendFlags) -> SendFlags {
        SendFlags(self.0 | rhs.0)
    }
}

/// The operation of a send-queue work request (verbs section 9.3.1.1, figure 27).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// RDMAP Send; source = the SGL.
    Send,
    /// Send with Solicited Event.
    SendSe,
    /// Send with Invalidate of the peer's `inv_stag`.
    SendInv {
        /// STag the peer invalidates.
        inv_stag: Stag,
    },
    /// Send with Solicited Event and Invalidate.
    SendSeInv {
        /// STag the peer invalidates.
        inv_stag: Stag,
    },
    /// RDMA Write of the SGL to (`rkey`, `remote_to`).
    Write {
        /// Tagged offset at the data sink.
        remote_to: u64,
        /// STag at the data sink.
        rkey: Stag,
    },
    /// RDMA Read of `sgl[0].length` bytes from (`rkey`, `remote_to`) into `sgl[0]`, the
    /// only local address. With `invalidate_local`, `sgl[0].lkey` is invalidated once the
    /// Read Response has been placed (RDMA Read with Invalidate Local STag).
    Read {
        /// Tagged offset at the data source.
        remote_to: u64,
        /// STag at the data source.
        rkey: Stag,
        /// Invalidate the local sink STag on completion.
        invalidate_local: bool,
    },
    /// Bind memory window `mw` (its index; the key is the new key) to `[to, to+len)` of
    /// region `mr`, granting `access` (remote read and/or write).
    Bind {
        /// The window STag with its new key.
        mw: Stag,
        /// The region the window is bound in.
        mr: Stag,
        /// Tagged offset, in the region's address space, of the window's first byte.
        to: u64,
        /// Window length in bytes.
        len: u64,
        /// Remote rights granted.
        access: Access,
        /// The window is zero-based (its first byte has tagged offset 0).
        zero_based: bool,
    },
    /// Fast-Register an STag previously allocated in the Invalid state: it becomes a
    /// valid region of `len` bytes at `region_offset` of caller memory `region`.
    FastReg {
        /// STag index to register, with its new key.
        stag: Stag,
        /// Caller memory arena holding the region.
        region: RegionId,
        /// Offset of the first byte inside the arena.
        region_offset: u64,
        /// Length in bytes.
        len: u64,
        /// Virtual address of the first byte (VA-based) — ignored when `zero_based`.
        va: u64,
        /// Rights.
        access: Access,
        /// Zero-based tagged offsets.
        zero_based: bool,
    },
    /// Invalidate Local STag (region or window).
    LocalInv {
        /// The STag to invalidate.
        stag: Stag,
    },
}

/// A send-queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Source (Send, Write) or sink (Read: exactly one element) of the data.
    pub sgl: SgList,
    /// Signaled, fences.
    pub flags: SendFlags,
}

impl SendWr {
    /// A Send without data, `wr_id` 0, unsignaled: the value a WR is decoded or written
    /// into before it is filled in.
    pub const EMPTY: SendWr = SendWr {
        wr_id: 0,
        op: SendOp::Send,
        sgl: SgList::new(),
        flags: SendFlags::NONE,
    };
}

/// A receive-queue (or SRQ) work request. Always signaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where an incoming Send is placed.
    pub sgl: SgList,
}

/// The five QP states of the verbs specification (section 6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created, not associated with a connection; WRs may be posted, not processed.
    Idle,
    /// Ready to send: associated with an LLP stream in RDMA mode.
    Rts,
    /// An error-free close is in progress.
    Closing,
    /// A Terminate was sent or received; the stream is being torn down.
    Terminate,
    /// All outstanding WRs are flushed.
    Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglist_bounds() {
        let sge = Sge {
            addr: 1,
            length: u32::MAX,
            lkey: Stag(7),
        };
        let mut l = SgList::new();
        for _ in 0..MAX_SGE {
            l.push(sge).unwrap();
        }
        assert!(l.push(sge).is_err());
        assert_eq!(l.total_len(), MAX_SGE as u64 * u32::MAX as u64);
        assert!(SgList::from_slice(&[sge; MAX_SGE + 1]).is_none());
        assert_eq!(SgList::from_slice(&[sge; 2]).unwrap().len(), 2);
    }
}
