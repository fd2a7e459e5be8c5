//! Seeds of the engine's keyed functions: the RFC 6528 ISN secret and the STag seed.
//! Random at start unless the file fixes them (for reproducible runs).

use core::fmt;
use core::str::FromStr;
use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::Config;

fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], String> {
    let bad = || format!("`{s}` must be exactly {} hexadecimal digits", 2 * N);
    if s.len() != 2 * N || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// A 128-bit secret written as 32 hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Hex128(pub [u8; 16]);

/// A 64-bit seed written as 16 hexadecimal digits (TOML integers stop at 2^63).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Hex64(pub u64);

impl fmt::Debug for Hex128 {
    /// Secrets are not printed in debug output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hex128(..)")
    }
}

impl fmt::Display for Hex128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Display for Hex64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for Hex128 {
    type Err = String;
    fn from_str(s: &str) -> Result<Hex128, String> {
        parse_hex::<16>(s).map(Hex128)
    }
}

impl FromStr for Hex64 {
    type Err = String;
    fn from_str(s: &str) -> Result<Hex64, String> {
        parse_hex::<8>(s).map(|b| Hex64(u64::from_be_bytes(b)))
    }
}

impl TryFrom<String> for Hex128 {
    type Error = String;
    fn try_from(s: String) -> Result<Hex128, String> {
        s.parse()
    }
}

impl TryFrom<String> for Hex64 {
    type Error = String;
    fn try_from(s: String) -> Result<Hex64, String> {
        s.parse()
    }
}

impl From<Hex128> for String {
    fn from(h: Hex128) -> String {
        h.to_string()
    }
}

impl From<Hex64> for String {
    fn from(h: Hex64) -> String {
        h.to_string()
    }
}

/// The daemon's secrets, drawn once at start-up and handed to every engine (every
/// engine derives the same STag seed from `stag_seed`, see [`Config::engine_config`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Seeds {
    /// Secret of the RFC 6528 ISN generator.
    pub isn_secret: [u8; 16],
    /// Seed of the STag index randomisation.
    pub stag_seed: u64,
}

impl fmt::Debug for Seeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seeds(..)")
    }
}

impl Seeds {
    /// Seeds for `config`: `tcp.isn_secret` and `limits.stag_seed` if given, the rest
    /// from the operating system's random source (`/dev/urandom`).
    pub fn from_config(config: &Config) -> std::io::Result<Seeds> {
        let mut random = [0u8; 24];
        if config.tcp.isn_secret.is_none() || config.limits.stag_seed.is_none() {
            std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
        }
        let mut isn = [0u8; 16];
        isn.copy_from_slice(&random[..16]);
        let mut stag = [0u8; 8];
        stag.copy_from_slice(&random[16..]);
        Ok(Seeds {
            isn_secret: config.tcp.isn_secret.map_or(isn, |h| h.0),
            stag_seed: config
                .limits
                .stag_seed
                .map_or(u64::from_le_bytes(stag), |h| h.0),
        })
    }

    /// Fixed seeds (tests, reproducible benchmarks).
    pub const fn fixed(isn_secret: [u8; 16], stag_seed: u64) -> Seeds {
        Seeds {
            isn_secret,
            stag_seed,
        }
    }
}

/// SplitMix64 finaliser: the engines' STag seed, so that a configured `stag_seed` is
/// not used as it stands.
pub(crate) fn mix(seed: u64) -> u64 {
    let mut z = seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let h: Hex128 = "000102030405060708090a0b0c0d0e0f".parse().unwrap();
        assert_eq!(h.0[15], 15);
        assert_eq!(h.to_string(), "000102030405060708090a0b0c0d0e0f");
        assert_eq!(format!("{h:?}"), "Hex128(..)");
        let s: Hex64 = "5eed5eed5eed5eed".parse().unwrap();
        assert_eq!(s.0, 0x5eed_5eed_5eed_5eed);
        assert_eq!(s.to_string(), "5eed5eed5eed5eed");
        for bad in ["", "00", "5eed5eed5eed5eedx", "zzzzzzzzzzzzzzzz"] {
            assert!(bad.parse::<Hex64>().is_err(), "{bad}");
        }
        assert!("0g0102030405060708090a0b0c0d0e0f"
            .parse::<Hex128>()
            .is_err());
    }

    #[test]
    fn seeds_come_from_the_file_or_are_random() {
        let mut c = Config::default();
        let a = Seeds::from_config(&c).unwrap();
        let b = Seeds::from_config(&c).unwrap();
        assert_ne!(a.isn_secret, b.isn_secret, "random at start");
        c.tcp.isn_secret = Some(Hex128([7; 16]));
        c.limits.stag_seed = Some(Hex64(42));
        let s = Seeds::from_config(&c).unwrap();
        assert_eq!(s, Seeds::fixed([7; 16], 42));
        assert_eq!(format!("{s:?}"), "Seeds(..)");
    }

    #[test]
    fn mix_is_a_function_of_the_seed() {
        assert_ne!(mix(1), mix(2));
        assert_ne!(mix(1), 1);
        assert_eq!(mix(9), mix(9));
    }
}
