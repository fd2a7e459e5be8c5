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

/// Every tool starts alike: versions, system data, MTU, the data connection between two
/// zero dests.
const PRELUDE: [Step; 7] = [
    Version,
    PageSize,
    CacheLine,
    Mtu,
    ZeroDest,
    ConnectData,
    ZeroDest,
];

/// A tool's script: [`PRELUDE`], `dests` dests, the test, then `after`.
#[derive(Clone, Copy, Debug)]
pub struct Script {
    dests: usize,
    after: &'static [Step],
}

impl Script {
    /// The steps in order.
    pub fn steps(self) -> impl Iterator<Item = Step> {
        PRELUDE
            .into_iter()
            .chain(std::iter::repeat_n(Dest, self.dests))
            .chain([Run])
            .chain(self.after.iter().copied())
    }
}

/// The client's script of `test`.
pub fn script(test: Test) -> Script {
    match test {
        // The WRITE and READ bandwidth tools: one dest fewer before the test; after it a
        // dest, the report fields and the closing dest (the server prints the client's
        // report).
        Test::WriteBw | Test::ReadBw => Script {
            dests: 3,
            after: &[Dest, Reports, Dest],
        },
        // `ib_write_lat`: no closing round (both sides disconnect right after the test).
        Test::WriteLat => Script {
            dests: 4,
            after: &[],
        },
        Test::SendBw | Test::SendLat | Test::ReadLat => Script {
            dests: 4,
            after: &[Dest],
        },
    }
}

/// Channel rounds of a script (what the server counts).
#[cfg(test)]
pub fn rounds(s: Script) -> usize {
    s.steps()
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
        assert_eq!(script(Test::WriteLat).steps().last(), Some(Run));
        for t in [Test::SendBw, Test::WriteBw, Test::SendLat] {
            let s: Vec<Step> = script(t).steps().collect();
            let dests = s.iter().filter(|x| **x == Dest).count();
            assert_eq!(dests, 5, "{t:?}");
            let run = s.iter().position(|x| *x == Run).unwrap();
            let data = s.iter().position(|x| *x == ConnectData).unwrap();
            assert!(data < run && s[..data].contains(&ZeroDest));
            assert_eq!(*s.last().unwrap(), Dest, "the closing round");
        }
    }
}
