//! What a port reports and how it is configured: device information, the port
//! configuration and its result, link state and counters. Plain data.

use std::fmt;

use iwarp_dpdk_sys as sys;

/// What a device reports about itself (`rte_eth_dev_info_get`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ethdev name (`net_memif0`, `0000:3b:00.0`).
    pub name: String,
    /// The driver (`net_memif`, `net_ice`, ...).
    pub driver: String,
    /// Receive queues the device offers.
    pub max_rx_queues: u16,
    /// Transmit queues the device offers.
    pub max_tx_queues: u16,
    /// Largest frame ethdev lets the device receive.
    pub max_rx_pktlen: u32,
    /// Smallest MTU.
    pub min_mtu: u16,
    /// Largest MTU.
    pub max_mtu: u16,
    /// `RTE_ETH_RX_OFFLOAD_*` bits.
    pub rx_offload_capa: u64,
    /// `RTE_ETH_TX_OFFLOAD_*` bits.
    pub tx_offload_capa: u64,
    /// `RTE_ETH_RSS_*` flow types the device can hash (0: no RSS).
    pub rss_offloads: u64,
    /// Redirection table entries.
    pub reta_size: u16,
    /// RSS key length in bytes (0: default 40).
    pub hash_key_size: u8,
    /// Most rx descriptors per queue.
    pub rx_desc_max: u16,
    /// Most tx descriptors per queue.
    pub tx_desc_max: u16,
    /// NUMA socket (-1 unknown).
    pub socket: i32,
}

pub(crate) const RX_TCP_CKSUM: u64 = sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM as u64;
pub(crate) const RX_IPV4_CKSUM: u64 = sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM as u64;
pub(crate) const TX_TCP_CKSUM: u64 = sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM as u64;
pub(crate) const TX_IPV4_CKSUM: u64 = sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM as u64;

/// `RTE_ETH_RX_OFFLOAD_*` bits and their names (as DPDK's `rte_eth_dev_rx_offload_name`,
/// lower case).
const RX_OFFLOAD_NAMES: &[(u32, &str)] = &[
    (sys::RTE_ETH_RX_OFFLOAD_VLAN_STRIP, "vlan_strip"),
    (sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM, "ipv4_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_UDP_CKSUM, "udp_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM, "tcp_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_TCP_LRO, "tcp_lro"),
    (sys::RTE_ETH_RX_OFFLOAD_QINQ_STRIP, "qinq_strip"),
    (sys::RTE_ETH_RX_OFFLOAD_OUTER_IPV4_CKSUM, "outer_ipv4_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_MACSEC_STRIP, "macsec_strip"),
    (sys::RTE_ETH_RX_OFFLOAD_VLAN_FILTER, "vlan_filter"),
    (sys::RTE_ETH_RX_OFFLOAD_VLAN_EXTEND, "vlan_extend"),
    (sys::RTE_ETH_RX_OFFLOAD_SCATTER, "scatter"),
    (sys::RTE_ETH_RX_OFFLOAD_TIMESTAMP, "timestamp"),
    (sys::RTE_ETH_RX_OFFLOAD_SECURITY, "security"),
    (sys::RTE_ETH_RX_OFFLOAD_KEEP_CRC, "keep_crc"),
    (sys::RTE_ETH_RX_OFFLOAD_SCTP_CKSUM, "sctp_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_OUTER_UDP_CKSUM, "outer_udp_cksum"),
    (sys::RTE_ETH_RX_OFFLOAD_RSS_HASH, "rss_hash"),
    (sys::RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT, "buffer_split"),
];

/// `RTE_ETH_TX_OFFLOAD_*` bits and their names.
const TX_OFFLOAD_NAMES: &[(u32, &str)] = &[
    (sys::RTE_ETH_TX_OFFLOAD_VLAN_INSERT, "vlan_insert"),
    (sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, "ipv4_cksum"),
    (sys::RTE_ETH_TX_OFFLOAD_UDP_CKSUM, "udp_cksum"),
    (sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM, "tcp_cksum"),
    (sys::RTE_ETH_TX_OFFLOAD_SCTP_CKSUM, "sctp_cksum"),
    (sys::RTE_ETH_TX_OFFLOAD_TCP_TSO, "tcp_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_UDP_TSO, "udp_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_OUTER_IPV4_CKSUM, "outer_ipv4_cksum"),
    (sys::RTE_ETH_TX_OFFLOAD_QINQ_INSERT, "qinq_insert"),
    (sys::RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO, "vxlan_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_GRE_TNL_TSO, "gre_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_IPIP_TNL_TSO, "ipip_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_GENEVE_TNL_TSO, "geneve_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_MACSEC_INSERT, "macsec_insert"),
    (sys::RTE_ETH_TX_OFFLOAD_MT_LOCKFREE, "mt_lockfree"),
    (sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS, "multi_segs"),
    (sys::RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE, "mbuf_fast_free"),
    (sys::RTE_ETH_TX_OFFLOAD_SECURITY, "security"),
    (sys::RTE_ETH_TX_OFFLOAD_UDP_TNL_TSO, "udp_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_IP_TNL_TSO, "ip_tnl_tso"),
    (sys::RTE_ETH_TX_OFFLOAD_OUTER_UDP_CKSUM, "outer_udp_cksum"),
    (
        sys::RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP,
        "send_on_timestamp",
    ),
];

/// The RSS flow types iwarpd cares about, and their names.
const RSS_NAMES: &[(u64, &str)] = &[
    (sys::RTE_ETH_RSS_IPV4 as u64, "ipv4"),
    (sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP as u64, "ipv4-tcp"),
];

fn names(bits: u64, table: &'static [(u32, &'static str)]) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut rest = bits;
    for &(bit, name) in table {
        if bits & u64::from(bit) != 0 {
            out.push(name);
            rest &= !u64::from(bit);
        }
    }
    if rest != 0 {
        out.push("other");
    }
    out
}

/// Names of `RTE_ETH_RX_OFFLOAD_*` bits (`"other"` for bits without a name here).
pub fn rx_offload_names(bits: u64) -> Vec<&'static str> {
    names(bits, RX_OFFLOAD_NAMES)
}

/// Names of `RTE_ETH_TX_OFFLOAD_*` bits (`"other"` for bits without a name here).
pub fn tx_offload_names(bits: u64) -> Vec<&'static str> {
    names(bits, TX_OFFLOAD_NAMES)
}

/// The RSS capability in words: `"none"`, or the flow types iwarpd hashes on
/// (`ipv4 ipv4-tcp`) that the device offers, plus how many other types it has.
pub fn rss_text(rss_offloads: u64, reta_size: u16) -> String {
    if rss_offloads == 0 {
        return "none".to_owned();
    }
    let mut parts: Vec<String> = RSS_NAMES
        .iter()
        .filter(|(bit, _)| rss_offloads & bit != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect();
    let known: u64 = RSS_NAMES.iter().map(|(b, _)| b).fold(0, |a, b| a | b);
    let others = (rss_offloads & !known).count_ones();
    if others > 0 {
        parts.push(format!("+{others} flow types"));
    }
    parts.push(format!("reta {reta_size}"));
    parts.join(" ")
}

impl DeviceInfo {
    /// The device computes TCP checksums on transmit (the per-byte work; a device
    /// without IPv4 header checksums, as virtio-net, gets the 20-byte header summed by
    /// the queue in software).
    pub fn tx_checksum(&self) -> bool {
        self.tx_offload_capa & TX_TCP_CKSUM != 0
    }
    /// The device also computes IPv4 header checksums on transmit.
    pub fn tx_ipv4_checksum(&self) -> bool {
        self.tx_offload_capa & TX_IPV4_CKSUM != 0
    }
    /// The device verifies TCP checksums on receive (IPv4 headers it does not verify are
    /// checked by the queue in software).
    pub fn rx_checksum(&self) -> bool {
        self.rx_offload_capa & RX_TCP_CKSUM != 0
    }
    /// The device also verifies IPv4 header checksums on receive.
    pub fn rx_ipv4_checksum(&self) -> bool {
        self.rx_offload_capa & RX_IPV4_CKSUM != 0
    }
    /// The device spreads received flows over queues.
    pub fn rss(&self) -> bool {
        self.rss_offloads != 0 && self.reta_size > 0 && self.max_rx_queues > 1
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "port {} (driver {}, socket {})",
            self.name, self.driver, self.socket
        )?;
        writeln!(
            f,
            "  queues: rx {} tx {}; descriptors: rx {} tx {}",
            self.max_rx_queues, self.max_tx_queues, self.rx_desc_max, self.tx_desc_max
        )?;
        writeln!(
            f,
            "  mtu {}..={}, max_rx_pktlen {}",
            self.min_mtu, self.max_mtu, self.max_rx_pktlen
        )?;
        writeln!(
            f,
            "  rx offloads {:#x} [{}] (TCP checksum {}, IPv4 header checksum {})",
            self.rx_offload_capa,
            rx_offload_names(self.rx_offload_capa).join(" "),
            self.rx_checksum(),
            self.rx_ipv4_checksum(),
        )?;
        writeln!(
            f,
            "  tx offloads {:#x} [{}] (TCP checksum {}, IPv4 header checksum {})",
            self.tx_offload_capa,
            tx_offload_names(self.tx_offload_capa).join(" "),
            self.tx_checksum(),
            self.tx_ipv4_checksum()
        )?;
        write!(
            f,
            "  rss flow types {:#x} ({}), key {} bytes",
            self.rss_offloads,
            rss_text(self.rss_offloads, self.reta_size),
            self.hash_key_size
        )
    }
}

/// How to configure a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Receive queues (one per dataplane core).
    pub rx_queues: u16,
    /// Transmit queues.
    pub tx_queues: u16,
    /// IP MTU (frame = MTU + 14).
    pub mtu: u16,
    /// Descriptors per rx queue.
    pub rx_desc: u16,
    /// Descriptors per tx queue.
    pub tx_desc: u16,
    /// Ask for IPv4/TCP checksum on transmit (used only if the device offers it).
    pub tx_checksum_offload: bool,
    /// Ask for IPv4/TCP checksum verification on receive (used only if offered).
    pub rx_checksum_offload: bool,
    /// Spread flows over the rx queues (symmetric Toeplitz), if the device can.
    pub rss: bool,
    /// Receive frames for any MAC address.
    pub promiscuous: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            mtu: 1500,
            rx_desc: 1024,
            tx_desc: 1024,
            tx_checksum_offload: true,
            rx_checksum_offload: true,
            rss: true,
            promiscuous: false,
        }
    }
}

/// What a configured port ended up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortSetup {
    /// Largest frame (Ethernet header included) the queues send and receive.
    pub frame_len_max: usize,
    /// The MTU given to ethdev (lower than asked on memif/af_packet jumbo; see
    /// [`crate::devargs::plan_mtu`]).
    pub ethdev_mtu: u16,
    /// TX checksum offload is on (TCP checksums by the device).
    pub tx_checksum_offload: bool,
    /// RX checksum offload is on (TCP checksums verified by the device).
    pub rx_checksum_offload: bool,
    /// With TX offload: the device computes IPv4 header checksums too (else the queue
    /// does, in software).
    pub tx_ipv4_checksum_offload: bool,
    /// With RX offload: the device verifies IPv4 header checksums too (else the queue
    /// does, in software).
    pub rx_ipv4_checksum_offload: bool,
    /// RSS spreads flows over the rx queues.
    pub rss: bool,
    /// Queue pairs ([`Port::queue`](crate::Port::queue) indices are `0..queues`).
    pub queues: u16,
}

/// Link state, read without waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    /// Link is up.
    pub up: bool,
    /// Speed in Mbit/s (0 unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Basic port counters (`rte_eth_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received.
    pub ipackets: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames dropped by the device (rx queue full).
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Transmit errors.
    pub oerrors: u64,
    /// Receive buffer allocation failures.
    pub rx_nombuf: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_bits_are_named() {
        // What virtio-net offered in the nic-vm guests.
        assert_eq!(
            rx_offload_names(0x221d),
            [
                "vlan_strip",
                "udp_cksum",
                "tcp_cksum",
                "tcp_lro",
                "vlan_filter",
                "scatter"
            ]
        );
        assert_eq!(
            tx_offload_names(0x802d),
            [
                "vlan_insert",
                "udp_cksum",
                "tcp_cksum",
                "tcp_tso",
                "multi_segs"
            ]
        );
        assert_eq!(rx_offload_names(0), Vec::<&str>::new());
        assert_eq!(rx_offload_names(1 << 40), ["other"]);
        assert_eq!(tx_offload_names(0x2 | 1 << 50), ["ipv4_cksum", "other"]);
    }

    #[test]
    fn rss_capability_in_words() {
        assert_eq!(rss_text(0, 0), "none");
        let v4tcp = (sys::RTE_ETH_RSS_IPV4 | sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP) as u64;
        assert_eq!(rss_text(v4tcp, 128), "ipv4 ipv4-tcp reta 128");
        assert_eq!(
            rss_text(
                sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP as u64 | 1 << 40 | 1 << 41,
                64
            ),
            "ipv4-tcp +2 flow types reta 64"
        );
    }

    #[test]
    fn checksum_offload_needs_tcp_and_says_who_does_ipv4() {
        let mut d = DeviceInfo {
            rx_offload_capa: 0x2215,
            tx_offload_capa: 0x8025,
            ..DeviceInfo::default()
        };
        assert!(
            !d.rx_checksum() && !d.tx_checksum(),
            "no TCP checksum offered"
        );
        // virtio-net: TCP (and UDP) checksums, no IPv4 header checksum.
        d.rx_offload_capa |= 0x8;
        d.tx_offload_capa |= 0x8;
        assert!(d.rx_checksum() && d.tx_checksum());
        assert!(!d.rx_ipv4_checksum() && !d.tx_ipv4_checksum());
        d.rx_offload_capa |= 0x2;
        d.tx_offload_capa |= 0x2;
        assert!(d.rx_ipv4_checksum() && d.tx_ipv4_checksum());
    }
}
