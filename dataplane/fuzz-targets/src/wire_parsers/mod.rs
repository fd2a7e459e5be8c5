//! Target `wire_parsers`: every checked view of `iwarp-wire`. The first input byte picks the
//! parser, the rest is its input. Beyond "no panic", each parser checks that a view that
//! said "ok" has in-bounds accessors, and that parse → emit → parse gives the same repr.

mod ddp;
mod l2l4;
mod mpa;

/// The parsers, in the order of the selector byte (`data[0] % COUNT`).
const PARSERS: [fn(&[u8]); 11] = [
    ddp::ddp_packet,
    ddp::rdmap_segment,
    ddp::read_request,
    ddp::terminate,
    mpa::mpa_frame,
    mpa::fpdu,
    mpa::markers,
    l2l4::ipv4_frame,
    l2l4::arp,
    l2l4::icmp_echo,
    l2l4::pcap,
];

/// Number of parsers the selector byte chooses from.
pub const PARSER_COUNT: usize = PARSERS.len();

/// Selector byte of each parser (first byte of an input), for seed files.
pub mod selector {
    /// DDP header view and repr.
    pub const DDP: u8 = 0;
    /// Whole RDMAP segment (DDP + Read Request / Terminate / payload).
    pub const SEGMENT: u8 = 1;
    /// RDMA Read Request header.
    pub const READ_REQUEST: u8 = 2;
    /// Terminate header (RFC, siw and heuristic readings).
    pub const TERMINATE: u8 = 3;
    /// MPA Request/Reply frame and RFC 6581 data.
    pub const MPA_FRAME: u8 = 4;
    /// One FPDU.
    pub const FPDU: u8 = 5;
    /// Markers: view, strip and spread.
    pub const MARKERS: u8 = 6;
    /// Ethernet + IPv4 frame.
    pub const IPV4: u8 = 7;
    /// Ethernet + ARP.
    pub const ARP: u8 = 8;
    /// Ethernet + IPv4 + ICMP echo.
    pub const ICMP: u8 = 9;
    /// A pcap file.
    pub const PCAP: u8 = 10;
}

/// The body of the `wire_parsers` fuzz target.
pub fn wire_parsers(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    PARSERS[usize::from(sel) % PARSER_COUNT](rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_selector_accepts_empty_and_junk_input() {
        for sel in 0..=255u8 {
            wire_parsers(&[sel]);
            wire_parsers(&[sel, 0xff, 0x00, 0x41, 0x7f, 0x80, 0x01]);
            let mut long = vec![sel];
            long.extend((0..600u32).map(|i| (i * 37 % 251) as u8));
            wire_parsers(&long);
        }
        wire_parsers(&[]);
    }
}
