//! Initial sequence numbers per RFC 6528: `ISN = M + F(4-tuple, secret)`, with `M` a
//! 4-microsecond clock and `F` SipHash-2-4 keyed by a 128-bit secret.

use core::hash::Hasher;

use iwarp_types::Instant;
use siphasher::sip::SipHasher24;

use crate::segment::FourTuple;
use crate::seq::SeqNumber;

/// Generates RFC 6528 ISNs. The secret comes from the caller (no randomness inside).
#[derive(Clone, Debug)]
pub struct IsnGenerator {
    key: [u8; 16],
}

impl IsnGenerator {
    /// A generator keyed by `secret`.
    pub fn new(secret: [u8; 16]) -> IsnGenerator {
        IsnGenerator { key: secret }
    }

    /// The ISN for a connection on `tuple` opened at `now`.
    pub fn isn(&self, tuple: &FourTuple, now: Instant) -> SeqNumber {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(&tuple.local_ip);
        h.write(&tuple.local_port.to_be_bytes());
        h.write(&tuple.remote_ip);
        h.write(&tuple.remote_port.to_be_bytes());
        let f = h.finish() as u32;
        let m = (now.as_nanos() / 4_000) as u32;
        SeqNumber(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(port: u16) -> FourTuple {
        FourTuple {
            local_ip: [1, 2, 3, 4],
            local_port: port,
            remote_ip: [5, 6, 7, 8],
            remote_port: 9,
        }
    }

    #[test]
    fn advances_with_the_clock_and_differs_by_tuple_and_secret() {
        let g = IsnGenerator::new([7; 16]);
        let a = g.isn(&t(1), Instant(0));
        assert_eq!(g.isn(&t(1), Instant(4_000)), a + 1);
        assert_eq!(g.isn(&t(1), Instant(3_999)), a);
        assert_ne!(g.isn(&t(2), Instant(0)), a);
        assert_ne!(IsnGenerator::new([8; 16]).isn(&t(1), Instant(0)), a);
    }
}
