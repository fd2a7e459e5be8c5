//! The STag of zero (verbs 7.2.1, 8.1.3.2.1): privileged local access by "physical
//! address" without registration.
//!
//! This engine has no physical memory of its own: a "physical address" names a byte of a
//! caller arena directly. The tagged offset of an SGE whose STag is 0 carries the arena
//! ([`RegionId`]) in its top 24 bits and the byte offset inside the arena in its low 40
//! bits ([`stag0_addr`]). The rules:
//!
//! - only on QPs with the privileged attribute (STag 0 and Fast-Register enabled); on any
//!   other QP the WR completes with `InvalidStag` (a protection error);
//! - no PD check; Local Read and Local Write are granted, nothing else;
//! - never remote: inbound tagged segments, Read Request sources, Send with Invalidate
//!   and every verb naming index 0 are refused (index 0 is never allocated, see
//!   `stag.rs`); an RDMA Read WR using it (either address) or an RDMA Write WR with it as
//!   the data sink completes in error (`tx.rs`);
//! - the range must lie inside the arena (`BaseBounds`) and must not wrap (`WrapError`).

use super::Placement;
use iwarp_types::{Memory, RegionId, Sge, WcStatus};

/// Bits of a STag-0 address that hold the byte offset inside the arena.
pub const STAG0_OFFSET_BITS: u32 = 40;

/// Largest arena offset a STag-0 address can carry.
pub const STAG0_MAX_OFFSET: u64 = (1 << STAG0_OFFSET_BITS) - 1;

/// The STag-0 "physical address" of byte `offset` of arena `region`, or `None` if the
/// region id does not fit 24 bits or the offset 40 bits.
pub fn stag0_addr(region: RegionId, offset: u64) -> Option<u64> {
    if region.0 >= 1 << 24 || offset > STAG0_MAX_OFFSET {
        return None;
    }
    Some((u64::from(region.0) << STAG0_OFFSET_BITS) | offset)
}

/// The arena byte a STag-0 address names.
pub fn stag0_placement(addr: u64) -> Placement {
    Placement {
        region: RegionId((addr >> STAG0_OFFSET_BITS) as u32),
        offset: addr & STAG0_MAX_OFFSET,
    }
}

/// Validates a local SGE whose STag is 0 on a QP that has (`privileged`) or lacks STag 0.
/// `arenas` gives the arena lengths; without it nothing can be checked and the access is
/// refused.
pub fn resolve_stag0(
    sge: &Sge,
    privileged: bool,
    arenas: Option<&dyn Memory>,
) -> Result<Placement, WcStatus> {
    if sge.length == 0 {
        return Ok(Placement::EMPTY);
    }
    if !privileged {
        return Err(WcStatus::InvalidStag);
    }
    let p = stag0_placement(sge.addr);
    let end = p
        .offset
        .checked_add(u64::from(sge.length))
        .filter(|e| *e <= STAG0_MAX_OFFSET + 1)
        .ok_or(WcStatus::WrapError)?;
    let arena = arenas
        .and_then(|m| m.region_len(p.region))
        .ok_or(WcStatus::BaseBounds)?;
    if end > arena {
        return Err(WcStatus::BaseBounds);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::{Stag, VecMemory};

    fn sge(addr: u64, length: u32) -> Sge {
        Sge {
            addr,
            length,
            lkey: Stag::ZERO,
        }
    }

    #[test]
    fn address_layout() {
        assert_eq!(stag0_addr(RegionId(3), 0x10), Some(0x0000_0300_0000_0010));
        assert_eq!(
            stag0_placement(0x0000_0300_0000_0010),
            Placement {
                region: RegionId(3),
                offset: 0x10
            }
        );
        assert_eq!(stag0_addr(RegionId(1 << 24), 0), None);
        assert_eq!(stag0_addr(RegionId(0), 1 << 40), None);
        let top = stag0_addr(RegionId(0xff_ffff), STAG0_MAX_OFFSET).unwrap();
        assert_eq!(top, u64::MAX);
        assert_eq!(stag0_placement(top).region, RegionId(0xff_ffff));
    }

    #[test]
    fn checks() {
        let mut m = VecMemory::new();
        m.add_arena(16);
        let r = m.add_arena(64);
        let at = |o| stag0_addr(r, o).unwrap();
        let mem: Option<&dyn Memory> = Some(&m);
        assert_eq!(
            resolve_stag0(&sge(at(8), 56), true, mem),
            Ok(Placement {
                region: r,
                offset: 8
            })
        );
        assert_eq!(
            resolve_stag0(&sge(at(8), 56), false, mem),
            Err(WcStatus::InvalidStag),
            "non-privileged QP: protection error"
        );
        assert_eq!(
            resolve_stag0(&sge(at(9), 56), true, mem),
            Err(WcStatus::BaseBounds)
        );
        assert_eq!(
            resolve_stag0(&sge(stag0_addr(RegionId(7), 0).unwrap(), 1), true, mem),
            Err(WcStatus::BaseBounds),
            "no such arena"
        );
        assert_eq!(
            resolve_stag0(&sge(at(STAG0_MAX_OFFSET), 2), true, mem),
            Err(WcStatus::WrapError)
        );
        assert_eq!(
            resolve_stag0(&sge(at(0), 1), true, None),
            Err(WcStatus::BaseBounds)
        );
        assert_eq!(
            resolve_stag0(&sge(u64::MAX, 0), false, None),
            Ok(Placement::EMPTY),
            "zero length: nothing checked"
        );
    }
}
