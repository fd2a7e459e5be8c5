//! The RDMA Read Request header (RFC 5040 section 4.4, figure 6): the 28 octets after the
//! untagged DDP header of QN 1.
//!
//! ```text
//!   SinkSTag(4) SinkTO(8) RDMARDSZ(4) SrcSTag(4) SrcTO(8)
//! ```

use core::fmt;

use iwarp_types::Stag;

use crate::ddp::{be32, be64};

/// Length of the RDMA Read Request header.
pub const READ_REQUEST_LEN: usize = rr_field::SRC_TO.end;

mod rr_field {
    pub type Field = core::ops::Range<usize>;

    pub const SINK_STAG: Field = 0..4;
    pub const SINK_TO: Field = 4..12;
    pub const SIZE: Field = 12..16;
    pub const SRC_STAG: Field = 16..20;
    pub const SRC_TO: Field = 20..28;
}

/// A view of an RDMA Read Request header (the 28 octets after the untagged DDP header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReadRequest<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> ReadRequest<T> {
        ReadRequest { buffer }
    }

    /// Wraps untrusted bytes.
    pub fn new_checked(buffer: T) -> crate::Result<ReadRequest<T>> {
        let v = ReadRequest::new_unchecked(buffer);
        v.check_len()?;
        Ok(v)
    }

    /// At least 28 bytes.
    pub fn check_len(&self) -> crate::Result<()> {
        if self.buffer.as_ref().len() < READ_REQUEST_LEN {
            Err(crate::WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Data Sink STag.
    pub fn sink_stag(&self) -> Stag {
        Stag(be32(&self.buffer.as_ref()[rr_field::SINK_STAG]))
    }

    /// Data Sink Tagged Offset.
    pub fn sink_to(&self) -> u64 {
        be64(&self.buffer.as_ref()[rr_field::SINK_TO])
    }

    /// RDMA Read Message Size.
    pub fn size(&self) -> u32 {
        be32(&self.buffer.as_ref()[rr_field::SIZE])
    }

    /// Data Source STag.
    pub fn src_stag(&self) -> Stag {
        Stag(be32(&self.buffer.as_ref()[rr_field::SRC_STAG]))
    }

    /// Data Source Tagged Offset.
    pub fn src_to(&self) -> u64 {
        be64(&self.buffer.as_ref()[rr_field::SRC_TO])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ReadRequest<T> {
    /// Sets the Data Sink STag.
    pub fn set_sink_stag(&mut self, v: Stag) {
        self.buffer.as_mut()[rr_field::SINK_STAG].copy_from_slice(&v.0.to_be_bytes());
    }

    /// Sets the Data Sink Tagged Offset.
    pub fn set_sink_to(&mut self, v: u64) {
        self.buffer.as_mut()[rr_field::SINK_TO].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the RDMA Read Message Size.
    pub fn set_size(&mut self, v: u32) {
        self.buffer.as_mut()[rr_field::SIZE].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the Data Source STag.
    pub fn set_src_stag(&mut self, v: Stag) {
        self.buffer.as_mut()[rr_field::SRC_STAG].copy_from_slice(&v.0.to_be_bytes());
    }

    /// Sets the Data Source Tagged Offset.
    pub fn set_src_to(&mut self, v: u64) {
        self.buffer.as_mut()[rr_field::SRC_TO].copy_from_slice(&v.to_be_bytes());
    }
}

/// The fields of an RDMA Read Request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequestRepr {
    /// Data Sink STag (copied into the Read Response without interpretation).
    pub sink_stag: Stag,
    /// Data Sink Tagged Offset.
    pub sink_to: u64,
    /// RDMA Read Message Size in octets.
    pub size: u32,
    /// Data Source STag.
    pub src_stag: Stag,
    /// Data Source Tagged Offset.
    pub src_to: u64,
}

impl ReadRequestRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(v: &ReadRequest<&T>) -> crate::Result<Self> {
        v.check_len()?;
        Ok(ReadRequestRepr {
            sink_stag: v.sink_stag(),
            sink_to: v.sink_to(),
            size: v.size(),
            src_stag: v.src_stag(),
            src_to: v.src_to(),
        })
    }

    /// Parses the first 28 of untrusted bytes.
    pub fn parse_bytes(bytes: &[u8]) -> crate::Result<Self> {
        ReadRequestRepr::parse(&ReadRequest::new_checked(bytes)?)
    }

    /// 28.
    pub const fn buffer_len(&self) -> usize {
        READ_REQUEST_LEN
    }

    /// Writes the header into the first 28 bytes of the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut ReadRequest<T>) {
        v.set_sink_stag(self.sink_stag);
        v.set_sink_to(self.sink_to);
        v.set_size(self.size);
        v.set_src_stag(self.src_stag);
        v.set_src_to(self.src_to);
    }

    /// The header after `done` octets were already sent (RFC 5040 section 4.8: sink and
    /// source TO advanced, size reduced), for a Terminate's Terminated RDMA header.
    /// Offsets wrap (the peer chose them); the size saturates at zero.
    pub const fn advanced(&self, done: u32) -> ReadRequestRepr {
        ReadRequestRepr {
            sink_stag: self.sink_stag,
            sink_to: self.sink_to.wrapping_add(done as u64),
            size: self.size.saturating_sub(done),
            src_stag: self.src_stag,
            src_to: self.src_to.wrapping_add(done as u64),
        }
    }
}

impl fmt::Display for ReadRequestRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ReadReq sink={:#010x}@{:#x} size={} src={:#010x}@{:#x}",
            self.sink_stag.0, self.sink_to, self.size, self.src_stag.0, self.src_to
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmap::test_vectors::{rr, READ_REQ};

    #[test]
    fn read_request_trio() {
        let v = ReadRequest::new_checked(&READ_REQ[18..]).unwrap();
        assert_eq!(v.sink_stag(), Stag(0xd49b_6e00));
        assert_eq!(v.sink_to(), 0x55f0_3337_e000);
        assert_eq!(v.size(), 65536);
        assert_eq!(v.src_stag(), Stag(0xa7d7_b400));
        assert_eq!(v.src_to(), 0x5623_1c02_3000);
        assert_eq!(ReadRequestRepr::parse(&v).unwrap(), rr());

        let mut buf = [0xa5u8; 28];
        rr().emit(&mut ReadRequest::new_unchecked(&mut buf));
        assert_eq!(buf, READ_REQ[18..]);

        assert_eq!(
            ReadRequest::new_checked(&READ_REQ[18..45]).unwrap_err(),
            crate::WireError::Truncated
        );
    }

    #[test]
    fn read_request_advanced() {
        let a = rr().advanced(2048);
        assert_eq!(a.sink_to, 0x55f0_3337_e800);
        assert_eq!(a.src_to, 0x5623_1c02_3800);
        assert_eq!(a.size, 65536 - 2048);
        assert_eq!(a.sink_stag, rr().sink_stag);
        let w = ReadRequestRepr {
            sink_to: u64::MAX,
            size: 1,
            ..rr()
        }
        .advanced(4);
        assert_eq!((w.sink_to, w.size), (3, 0));
    }
}
