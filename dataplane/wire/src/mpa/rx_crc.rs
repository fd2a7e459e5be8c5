//! The CRC check of a received FPDU, run in pieces so that a payload can be placed in the
//! pass that checks it.
//!
//! An FPDU that arrives whole (one TCP segment) used to be read twice on receive: once by
//! the CRC, once by the copy into the destination. [`RxCrc`] lets the receiver check the
//! CRC while it places: the octets before a placed piece go through the CRC alone, the
//! piece through a copy that computes the CRC of what it copies
//! (`iwarp_types::Memory::write_crc32c`), the rest (pad) at [`RxCrc::check`]. The CRC is
//! always that of the FPDU's own octets, in order, so a piece that cannot be placed in
//! order is simply copied and the check reads it later.
//!
//! The rule that goes with it (the receiver's, not this module's): before acting on the
//! ULPDU in any way other than placing payload into memory the peer is allowed to write,
//! the receiver calls [`RxCrc::check`]; a mismatch then is a CRC error as if it had been
//! found first (Terminate 0x2002, nothing delivered). Linux siw places the same way (its
//! receive copies into the target buffer and CRCs the source after).

use super::{Fpdu, CRC_LEN};
use crate::crc::crc32c_append;

/// Shortest piece [`RxCrc::before`] lets through: below it a copy that computes the CRC
/// is a copy and then a CRC anyway (`iwarp_crc_copy`), and one CRC over the whole FPDU at
/// the check costs less than three calls (before, through, after the piece). The same
/// bound as the transmit side's fused rendering (`iwarp_mpa`).
pub const FUSED_MIN_LEN: usize = iwarp_crc_copy::WIDE_MIN_LEN;

/// A received FPDU's CRC: pending until checked, computed in order over its octets.
#[derive(Debug)]
pub struct RxCrc<'a> {
    /// ULPDU_Length, ULPDU and pad (the CRC's input); empty once nothing is pending.
    covered: &'a [u8],
    /// The CRC field's value.
    want: u32,
    /// Octets of `covered` the running CRC has taken so far.
    done: usize,
    /// The running CRC of `covered[..done]`.
    acc: u32,
}

impl<'a> RxCrc<'a> {
    /// Nothing pending: the CRC was checked (or is not in use).
    #[inline]
    pub const fn checked() -> RxCrc<'a> {
        RxCrc {
            covered: &[],
            want: 0,
            done: 0,
            acc: 0,
        }
    }

    /// The pending CRC of `fpdu`, which must hold the whole FPDU ([`Fpdu::check_len`]).
    pub fn pending(fpdu: &Fpdu<&'a [u8]>) -> RxCrc<'a> {
        let b: &'a [u8] = fpdu.buffer;
        let end = fpdu.total_len() - CRC_LEN;
        RxCrc {
            covered: &b[..end],
            want: fpdu.crc_field(),
            done: 0,
            acc: 0,
        }
    }

    /// True while the CRC is not checked.
    #[inline]
    pub fn is_pending(&self) -> bool {
        !self.covered.is_empty()
    }

    /// The running CRC up to `piece`, if the CRC is pending, `piece` is at least
    /// [`FUSED_MIN_LEN`] octets and lies in the FPDU at or after what it has taken: the
    /// caller then copies `piece` computing the CRC on from this value and reports it with
    /// [`RxCrc::covered`]. `None`: copy `piece` plainly (the check reads it from the FPDU
    /// later).
    pub fn before(&mut self, piece: &[u8]) -> Option<u32> {
        if !self.is_pending() || piece.len() < FUSED_MIN_LEN {
            return None;
        }
        let start = (piece.as_ptr() as usize).wrapping_sub(self.covered.as_ptr() as usize);
        let end = start.checked_add(piece.len())?;
        if start < self.done || end > self.covered.len() {
            return None;
        }
        self.acc = crc32c_append(self.acc, &self.covered[self.done..start]);
        self.done = start;
        Some(self.acc)
    }

    /// `piece` (just given to [`RxCrc::before`]) was copied and `acc` is the CRC continued
    /// over it.
    #[inline]
    pub fn covered(&mut self, piece: &[u8], acc: u32) {
        if self.is_pending() {
            self.done = (self.done + piece.len()).min(self.covered.len());
            self.acc = acc;
        }
    }

    /// Checks the CRC over what it has not taken yet: true if it matches or nothing was
    /// pending. Afterwards nothing is pending.
    #[inline]
    pub fn check(&mut self) -> bool {
        if !self.is_pending() {
            return true;
        }
        let crc = crc32c_append(self.acc, &self.covered[self.done..]);
        let ok = crc == self.want;
        *self = RxCrc::checked();
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::fpdu_len;

    /// A CRC'd FPDU around `ulpdu`.
    fn fpdu_of(ulpdu: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; fpdu_len(ulpdu.len())];
        let mut f = Fpdu::new_unchecked(&mut b[..]);
        f.set_ulpdu_len(ulpdu.len() as u16);
        f.ulpdu_mut().copy_from_slice(ulpdu);
        f.finish(true);
        b
    }

    /// Places `pieces` (ranges of the ULPDU) in order through `before`/`covered` with a
    /// CRC-computing copy, then checks.
    fn place_and_check(fpdu: &[u8], pieces: &[(usize, usize)]) -> (bool, Vec<u8>) {
        let f = Fpdu::new_checked(fpdu).unwrap();
        let ulpdu = f.ulpdu();
        let mut out = vec![0u8; ulpdu.len()];
        let mut crc = RxCrc::pending(&f);
        for &(s, e) in pieces {
            let piece = &ulpdu[s..e];
            match crc.before(piece) {
                Some(acc) => {
                    out[s..e].copy_from_slice(piece);
                    crc.covered(piece, crc32c_append(acc, piece));
                }
                None => out[s..e].copy_from_slice(piece),
            }
        }
        assert!(crc.is_pending());
        let ok = crc.check();
        assert!(!crc.is_pending() && crc.check(), "checked twice");
        (ok, out)
    }

    #[test]
    fn in_order_pieces_out_of_order_pieces_and_none_agree_with_the_whole_check() {
        let ulpdu: Vec<u8> = (0..1001u32).map(|i| (i * 37 + 11) as u8).collect();
        let good = fpdu_of(&ulpdu);
        assert!(Fpdu::new_checked(&good[..]).unwrap().verify_crc());
        let cases: &[&[(usize, usize)]] = &[
            &[],
            &[(14, 1001)],
            &[(0, 1001)],
            &[(14, 500), (500, 1001)],
            &[(14, 500), (600, 1001)],
            // Out of order: the second piece is copied plainly, the check reads it.
            &[(600, 1001), (14, 500)],
            &[(14, 20), (14, 20)],
            &[(1001, 1001)],
        ];
        for pieces in cases {
            let (ok, out) = place_and_check(&good, pieces);
            assert!(ok, "{pieces:?}");
            for &(s, e) in pieces.iter() {
                assert_eq!(out[s..e], ulpdu[s..e]);
            }
        }
        // Any flipped bit, wherever it is (length excepted: that is another FPDU), fails.
        for pos in [2, 10, 15, 400, 1002, good.len() - 5, good.len() - 1] {
            let mut bad = good.clone();
            bad[pos] ^= 0x10;
            for pieces in cases {
                assert!(!place_and_check(&bad, pieces).0, "bit at {pos}, {pieces:?}");
            }
        }
    }

    #[test]
    fn foreign_pieces_and_a_checked_crc_take_no_part() {
        let ulpdu = [7u8; 64];
        let good = fpdu_of(&ulpdu);
        let f = Fpdu::new_checked(&good[..]).unwrap();
        let mut crc = RxCrc::pending(&f);
        let elsewhere = [7u8; 64];
        assert_eq!(crc.before(&elsewhere), None);
        assert_eq!(crc.before(&good[..]), None, "runs into the CRC field");
        assert!(crc.check());
        let mut none = RxCrc::checked();
        assert_eq!(none.before(f.ulpdu()), None);
        none.covered(f.ulpdu(), 5);
        assert!(!none.is_pending() && none.check());
    }
}
