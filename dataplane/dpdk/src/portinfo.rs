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

pub(crate) const RX_CKSUM: u64 =
    (sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM) as u64;
pub(crate) const TX_CKSUM: u64 =
    (sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM) as u64;

impl DeviceInfo {
    /// The device computes IPv4 and TCP checksums on transmit.
    pub fn tx_checksum(&self) -> bool {
        self.tx_offload_capa & TX_CKSUM == TX_CKSUM
    }
    /// The device verifies IPv4 and TCP checksums on receive.
    pub fn rx_checksum(&self) -> bool {
        self.rx_offload_capa & RX_CKSUM == RX_CKSUM
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
            "  rx offloads {:#x} (checksum {}), tx offloads {:#x} (checksum {})",
            self.rx_offload_capa,
            self.rx_checksum(),
            self.tx_offload_capa,
            self.tx_checksum()
        )?;
        write!(
            f,
            "  rss flow types {:#x}, reta {}, key {} bytes",
            self.rss_offloads, self.reta_size, self.hash_key_size
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
    /// TX checksum offload is on.
    pub tx_checksum_offload: bool,
    /// RX checksum offload is on.
    pub rx_checksum_offload: bool,
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
