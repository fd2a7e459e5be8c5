//! perftest's channel script as its client plays it (perftest 4.5+0.17, "6.06", with `-R`),
//! read off captures of `ib_*_{bw,lat} -R` between siw and `iwarp-perftest` (whose server
//! answers every message in kind, so the client's sequence is the whole script). Each step
//! but [`Step::ConnectData`] and [`Step::Run`] is one round: the client sends, the server
//! answers with a message of the same length.

use super::session::Test;

/// One step of the client's side of a perftest run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The version string (16 bytes).
    Version,
    /// The page size (`cycle_buffer`, 4 bytes, big-endian).
    PageSize,
    /// The cache line size (4 bytes, big-endian).
    CacheLine,
    /// The MTU as a decimal string (2 bytes).
    Mtu,
    /// An all-zero `pingpong_dest` (around the data connection's set-up).
    ZeroDest,
    /// This side's `pingpong_dest`; the answer is the server's.
    Dest,
    /// Connect the data connection (no channel round).
    ConnectData,
    /// The test itself (no channel round).
    Run,
    /// The five bandwidth report fields (8 bytes each).
    Reports,
}

use Step::*;

/// Before the test, every tool: versions, system data, MTU, the data connection between
/// two zero dests, then the dests.
const SEND_BW: &[Step] = &[
    Version,
    PageSize,
    CacheLine,
    Mtu,
    ZeroDest,
    ConnectData,
    ZeroDest,
    Dest,
    Dest,
    Dest,
    Dest,
    Run,
    Dest,
];
/// The WRITE and READ bandwidth tools: one dest fewer before the test; after it a dest,
/// the report fields and the last dest (the server prints the client's report).
const ONE_SIDED_BW: &[Step] = &[
    Version,
    PageSize,
    CacheLine,
    Mtu,
    ZeroDest,
    ConnectData,
    ZeroDest,
    Dest,
    Dest,
    Dest,
    Run,
    Dest,
    Reports,
    Dest,
];
/// The latency tools.
const LAT: &[Step] = &[
    Version,
    PageSize,
    CacheLine,
    Mtu,
    ZeroDest,
    ConnectData,
    ZeroDest,
    Dest,
    Dest,
    Dest,
    Dest,
    Run,
    Dest,
];

/// `ib_write_lat`: no closing round (both sides disconnect right after the test).
const WRITE_LAT: &[Step] = &[
    Version,
    PageSize,
    CacheLine,
    Mtu,
    ZeroDest,
    ConnectData,
    ZeroDest,
    Dest,
    Dest,
    Dest,
    Dest,
    Run,
];

/// The client's script of `test`.
pub fn script(test: Test) -> &'static [Step] {
    match test {
        Test::SendBw => SEND_BW,
        Test::WriteBw | Test::ReadBw => ONE_SIDED_BW,
        Test::WriteLat => WRITE_LAT,
        Test::SendLat | Test::ReadLat => LAT,
    }
}

/// Channel rounds of a script (what the server counts).
#[cfg(test)]
pub fn rounds(s: &[Step]) -> usize {
    s.iter()
        .map(|st| match st {
            ConnectData | Run => 0,
            Reports => 5,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_match_what_the_server_saw_from_siws_tools() {
        // iwarp-perftest's server reports against ib_*_{bw,lat} -R on siw: send_bw 11
        // rounds (5 dests), write_bw and read_bw 16 (5 dests and 5 report fields),
        // send_lat and read_lat 11 (5 dests), write_lat 10 (4 dests, no closing round).
        assert_eq!(rounds(script(Test::SendBw)), 11);
        assert_eq!(rounds(script(Test::WriteBw)), 16);
        assert_eq!(rounds(script(Test::ReadBw)), 16);
        for t in [Test::SendLat, Test::ReadLat] {
            assert_eq!(rounds(script(t)), 11);
        }
        assert_eq!(rounds(script(Test::WriteLat)), 10);
        assert_eq!(*script(Test::WriteLat).last().unwrap(), Run);
        for t in [Test::SendBw, Test::WriteBw, Test::SendLat] {
            let s = script(t);
            let dests = s.iter().filter(|x| **x == Dest).count();
            assert_eq!(dests, 5, "{t:?}");
            let run = s.iter().position(|x| *x == Run).unwrap();
            let data = s.iter().position(|x| *x == ConnectData).unwrap();
            assert!(data < run && s[..data].contains(&ZeroDest));
            assert_eq!(*s.last().unwrap(), Dest, "the closing round");
        }
    }
}
