//! `[[port]]`: one NIC or virtual device, its address and how frames are handled.

use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::device::{Device, VdevDriver};
use crate::error::{ensure, ConfigError};

/// Most ports one daemon drives.
pub const PORTS_MAX: usize = 8;
/// Ethernet header length, added to the IP MTU to get the frame length.
const ETH_HEADER_LEN: u32 = 14;
/// memif's default buffer size (`bsize`).
const MEMIF_BSIZE_DEFAULT: u64 = 2048;
/// af_packet's default ring frame size (`framesz`).
const AF_PACKET_FRAMESZ_DEFAULT: u64 = 2048;
/// Room for the TPACKET_V2 header and `sockaddr_ll` in front of each af_packet frame.
const AF_PACKET_FRAME_OVERHEAD: u32 = 64;
/// Largest MTU af_xdp offers on veth (driver `max_mtu`).
const AF_XDP_MTU_MAX: u32 = 3542;
/// Largest MTU the tap driver accepts (`max_rx_pktlen` 1522).
const TAP_MTU_MAX: u32 = 1500;

/// An Ethernet address, written `02:00:00:00:00:01` in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<MacAddr, String> {
        let bad = || format!("`{s}` is not an Ethernet address (xx:xx:xx:xx:xx:xx)");
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

impl TryFrom<String> for MacAddr {
    type Error = String;
    fn try_from(s: String) -> Result<MacAddr, String> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

/// Who computes and verifies IPv4 and TCP checksums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChecksumMode {
    /// The NIC if it offers IPv4 and TCP checksum offload in both directions, else
    /// software (default).
    #[default]
    Auto,
    /// The NIC; start-up fails if the port does not offer it.
    Offload,
    /// Always in software.
    Software,
    /// Neither computed nor verified. Only for a memif link between two iwarpd on one
    /// host, where frames cannot be corrupted in flight; the MPA CRC still protects
    /// every FPDU's payload. Frames leave with checksum fields unset: never use it on a
    /// link a kernel or a real NIC sees.
    TrustLink,
}

/// How received frames reach the core that owns their connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Steering {
    /// RSS (and rte_flow) when the port offers it and there is more than one dataplane
    /// core, else software dispatch (default).
    #[default]
    Auto,
    /// RSS; start-up fails if the port does not offer it.
    Rss,
    /// One receive queue; the core that polls it passes frames to their owners.
    Software,
}

/// `[[port]]`: one port and the IPv4 interface on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSection {
    /// A PCI address (`0000:03:00.0`) or a vdev string (`net_memif0,role=server,socket=/run/x`,
    /// `net_af_packet0,iface=veth0`, `net_af_xdp0,iface=veth0`, `net_tap0,iface=tap0`, `net_ring0`).
    pub device: Device,
    /// Our IPv4 address on this port.
    #[serde(default = "PortSection::default_ipv4")]
    pub ipv4: Ipv4Addr,
    /// Length of the on-link prefix.
    #[serde(default = "PortSection::default_prefix_len")]
    pub prefix_len: u8,
    /// Next hop for off-link destinations (on-link); absent: off-link is unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU in bytes (576..=9000; above 1500 needs a port that carries jumbo frames).
    #[serde(default = "PortSection::default_mtu")]
    pub mtu: u32,
    /// Our Ethernet address; absent: the port's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Receive descriptors per queue (a power of two, 64..=16384).
    #[serde(default = "PortSection::default_desc")]
    pub rx_desc: u16,
    /// Transmit descriptors per queue (a power of two, 64..=16384).
    #[serde(default = "PortSection::default_desc")]
    pub tx_desc: u16,
    /// Frames per receive and transmit burst (1..=512, at most the descriptor counts).
    #[serde(default = "PortSection::default_burst")]
    pub burst: u16,
    /// Checksums: `auto`, `offload`, `software` or `trust-link` (memif between two iwarpd only).
    #[serde(default)]
    pub checksum: ChecksumMode,
    /// Receive steering: `auto`, `rss` or `software`.
    #[serde(default)]
    pub steering: Steering,
    /// Packet buffers (mbufs) per dataplane core for this port.
    #[serde(default = "PortSection::default_mbufs")]
    pub mbufs: u32,
}

impl PortSection {
    fn default_ipv4() -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, 1)
    }
    fn default_prefix_len() -> u8 {
        24
    }
    fn default_mtu() -> u32 {
        1500
    }
    fn default_desc() -> u16 {
        1024
    }
    fn default_burst() -> u16 {
        // Small bursts keep both ends of a connection busy at once: with 64 a core took a
        // whole window of ACKs in one turn and the peer waited (64 B WRITEs: 3.2 M/s at 64,
        // 5.4 M/s at 16; 64 KiB goodput 2-4% lower at 16).
        16
    }
    fn default_mbufs() -> u32 {
        8192
    }

    /// A port on `device` with every other key at its default.
    pub fn new(device: Device) -> PortSection {
        PortSection {
            device,
            ipv4: PortSection::default_ipv4(),
            prefix_len: PortSection::default_prefix_len(),
            gateway: None,
            mtu: PortSection::default_mtu(),
            mac: None,
            rx_desc: PortSection::default_desc(),
            tx_desc: PortSection::default_desc(),
            burst: PortSection::default_burst(),
            checksum: ChecksumMode::Auto,
            steering: Steering::Auto,
            mbufs: PortSection::default_mbufs(),
        }
    }

    /// Largest Ethernet frame of this port (header included, FCS excluded).
    pub fn frame_len_max(&self) -> u32 {
        self.mtu + ETH_HEADER_LEN
    }

    /// Resolves the checksum mode against what the port offers: true if the engine
    /// leaves IPv4/TCP checksums to the NIC (or to nobody, `trust-link`).
    /// `tx_offload`/`rx_offload`: the port computes / verifies IPv4 and TCP checksums.
    pub fn checksum_offload(
        &self,
        index: usize,
        tx_offload: bool,
        rx_offload: bool,
    ) -> Result<bool, ConfigError> {
        let both = tx_offload && rx_offload;
        match self.checksum {
            ChecksumMode::Auto => Ok(both),
            ChecksumMode::Software => Ok(false),
            ChecksumMode::TrustLink => Ok(true),
            ChecksumMode::Offload if both => Ok(true),
            ChecksumMode::Offload => Err(ConfigError::new(
                format!("port[{index}].checksum"),
                format!(
                    "`offload`, but {} does not offer TCP checksum offload in both directions (use `auto` or `software`)",
                    self.device.dpdk_name()
                ),
            )),
        }
    }

    /// Checks this port alone; `index` is its position in the file, `cores` the number
    /// of dataplane cores.
    pub(crate) fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let f = |key: &str| format!("port[{index}].{key}");
        let ip = self.ipv4;
        ensure(
            !ip.is_unspecified() && !ip.is_broadcast() && !ip.is_multicast() && !ip.is_loopback(),
            f("ipv4"),
            format!("{ip} is not a unicast host address"),
        )?;
        ensure(self.prefix_len <= 32, f("prefix_len"), "must be at most 32")?;
        if let Some(gw) = self.gateway {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(self.prefix_len))
                .unwrap_or(0);
            let on_link = u32::from(gw) & mask == u32::from(ip) & mask;
            ensure(
                on_link && gw != ip,
                f("gateway"),
                format!("{gw} must be another address on {ip}/{}", self.prefix_len),
            )?;
        }
        ensure(
            (iwarp_engine::config::MTU_MIN as u32..=iwarp_engine::config::MTU_MAX as u32)
                .contains(&self.mtu),
            f("mtu"),
            format!(
                "{} is outside {}..={}",
                self.mtu,
                iwarp_engine::config::MTU_MIN,
                iwarp_engine::config::MTU_MAX
            ),
        )?;
        if let Some(mac) = self.mac {
            ensure(
                mac.0[0] & 1 == 0 && mac.0 != [0; 6],
                f("mac"),
                format!("{mac} must be a unicast, non-zero address"),
            )?;
        }
        for (key, n) in [("rx_desc", self.rx_desc), ("tx_desc", self.tx_desc)] {
            ensure(
                n.is_power_of_two() && (64..=16384).contains(&n),
                f(key),
                format!("{n} must be a power of two in 64..=16384"),
            )?;
        }
        ensure(
            (1..=512).contains(&self.burst) && self.burst <= self.rx_desc.min(self.tx_desc),
            f("burst"),
            "must be in 1..=512 and at most rx_desc and tx_desc",
        )?;
        let mbufs_min =
            u32::from(self.rx_desc) + u32::from(self.tx_desc) + 2 * u32::from(self.burst);
        ensure(
            (mbufs_min..=1 << 22).contains(&self.mbufs),
            f("mbufs"),
            format!("must be in {mbufs_min}..=4194304 (rx_desc + tx_desc + 2 bursts at least)"),
        )?;
        let memif = self.device.driver() == Some(VdevDriver::Memif);
        ensure(
            self.checksum != ChecksumMode::TrustLink || memif,
            f("checksum"),
            "`trust-link` is only for a memif link between two iwarpd on one host",
        )?;
        self.validate_device_mtu(index)
    }

    /// What each driver can carry (see `shared/notes/dpdk.md`).
    fn validate_device_mtu(&self, index: usize) -> Result<(), ConfigError> {
        let field = format!("port[{index}].mtu");
        let frame = u64::from(self.frame_len_max());
        let Some(v) = self.device.vdev() else {
            return Ok(());
        };
        match v.driver {
            VdevDriver::Memif => {
                let bsize = v.int_arg("bsize").unwrap_or(MEMIF_BSIZE_DEFAULT);
                ensure(
                    frame <= bsize,
                    field,
                    format!("a {frame}-byte frame needs bsize >= {frame} in the memif device string on both sides (bsize is {bsize}; chained buffers lose frames)"),
                )
            }
            VdevDriver::AfPacket => {
                let framesz = v.int_arg("framesz").unwrap_or(AF_PACKET_FRAMESZ_DEFAULT);
                let need = frame + u64::from(AF_PACKET_FRAME_OVERHEAD);
                ensure(
                    need <= framesz,
                    field,
                    format!("a {frame}-byte frame needs framesz >= {need} (and blocksz >= framesz) in the af_packet device string (framesz is {framesz})"),
                )
            }
            VdevDriver::AfXdp => ensure(
                self.mtu <= AF_XDP_MTU_MAX,
                field,
                format!("af_xdp carries at most MTU {AF_XDP_MTU_MAX}"),
            ),
            VdevDriver::Tap => ensure(
                self.mtu <= TAP_MTU_MAX,
                field,
                format!("the tap driver carries at most MTU {TAP_MTU_MAX}"),
            ),
            VdevDriver::Ring => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memif() -> PortSection {
        PortSection::new(Device::default_memif("t"))
    }

    fn err(p: PortSection) -> String {
        p.validate(3).unwrap_err().field
    }

    #[test]
    fn mac_addresses() {
        let m: MacAddr = "02:00:00:0a:bc:FF".parse().unwrap();
        assert_eq!(m.0, [2, 0, 0, 0x0a, 0xbc, 0xff]);
        assert_eq!(m.to_string(), "02:00:00:0a:bc:ff");
        for bad in [
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "2:00:00:00:00:00",
            "zz:00:00:00:00:00",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn default_port_is_valid() {
        memif().validate(0).unwrap();
    }

    #[test]
    fn address_rules_name_their_field() {
        assert_eq!(
            err(PortSection {
                ipv4: Ipv4Addr::new(127, 0, 0, 1),
                ..memif()
            }),
            "port[3].ipv4"
        );
        assert_eq!(
            err(PortSection {
                ipv4: Ipv4Addr::UNSPECIFIED,
                ..memif()
            }),
            "port[3].ipv4"
        );
        assert_eq!(
            err(PortSection {
                ipv4: Ipv4Addr::new(224, 0, 0, 1),
                ..memif()
            }),
            "port[3].ipv4"
        );
        assert_eq!(
            err(PortSection {
                prefix_len: 33,
                ..memif()
            }),
            "port[3].prefix_len"
        );
        let gw = |g: [u8; 4]| PortSection {
            gateway: Some(Ipv4Addr::from(g)),
            ..memif()
        };
        gw([198, 18, 0, 254]).validate(0).unwrap();
        assert_eq!(err(gw([198, 19, 0, 1])), "port[3].gateway");
        assert_eq!(err(gw([198, 18, 0, 1])), "port[3].gateway");
        let p = PortSection {
            prefix_len: 0,
            gateway: Some(Ipv4Addr::new(9, 9, 9, 9)),
            ..memif()
        };
        p.validate(0).unwrap();
        assert_eq!(
            err(PortSection {
                mac: Some(MacAddr([1, 0, 0, 0, 0, 0])),
                ..memif()
            }),
            "port[3].mac"
        );
        assert_eq!(
            err(PortSection {
                mac: Some(MacAddr([0; 6])),
                ..memif()
            }),
            "port[3].mac"
        );
    }

    #[test]
    fn queue_rules_name_their_field() {
        assert_eq!(
            err(PortSection {
                mtu: 100,
                ..memif()
            }),
            "port[3].mtu"
        );
        assert_eq!(
            err(PortSection {
                mtu: 9001,
                ..memif()
            }),
            "port[3].mtu"
        );
        assert_eq!(
            err(PortSection {
                rx_desc: 1000,
                ..memif()
            }),
            "port[3].rx_desc"
        );
        assert_eq!(
            err(PortSection {
                tx_desc: 32,
                ..memif()
            }),
            "port[3].tx_desc"
        );
        assert_eq!(
            err(PortSection {
                burst: 0,
                ..memif()
            }),
            "port[3].burst"
        );
        assert_eq!(
            err(PortSection {
                burst: 128,
                rx_desc: 64,
                ..memif()
            }),
            "port[3].burst"
        );
        assert_eq!(
            err(PortSection {
                mbufs: 100,
                ..memif()
            }),
            "port[3].mbufs"
        );
    }

    #[test]
    fn driver_limits_name_the_mtu() {
        let jumbo = |dev: &str| PortSection {
            mtu: 9000,
            ..PortSection::new(dev.parse().unwrap())
        };
        let e = jumbo("net_memif0,role=server,socket=/x")
            .validate(0)
            .unwrap_err();
        assert_eq!(e.field, "port[0].mtu");
        assert!(e.message.contains("bsize >= 9014"), "{e}");
        jumbo("net_memif0,role=server,socket=/x,bsize=10240")
            .validate(0)
            .unwrap();
        assert_eq!(
            jumbo("net_af_packet0,iface=v")
                .validate(0)
                .unwrap_err()
                .field,
            "port[0].mtu"
        );
        jumbo("net_af_packet0,iface=v,framesz=16384,blocksz=16384")
            .validate(0)
            .unwrap();
        assert_eq!(
            jumbo("net_af_xdp0,iface=v").validate(0).unwrap_err().field,
            "port[0].mtu"
        );
        assert_eq!(
            jumbo("net_tap0").validate(0).unwrap_err().field,
            "port[0].mtu"
        );
        jumbo("net_ring0").validate(0).unwrap();
        jumbo("0000:03:00.0").validate(0).unwrap();
    }

    #[test]
    fn checksum_modes() {
        let pci = PortSection {
            checksum: ChecksumMode::TrustLink,
            ..PortSection::new("0000:03:00.0".parse().unwrap())
        };
        assert_eq!(err(pci), "port[3].checksum");
        let mut p = PortSection {
            checksum: ChecksumMode::TrustLink,
            ..memif()
        };
        p.validate(0).unwrap();
        assert!(p.checksum_offload(0, false, false).unwrap());
        p.checksum = ChecksumMode::Auto;
        assert!(!p.checksum_offload(0, true, false).unwrap());
        assert!(p.checksum_offload(0, true, true).unwrap());
        p.checksum = ChecksumMode::Software;
        assert!(!p.checksum_offload(0, true, true).unwrap());
        p.checksum = ChecksumMode::Offload;
        assert!(p.checksum_offload(0, true, true).unwrap());
        assert_eq!(
            p.checksum_offload(2, false, true).unwrap_err().field,
            "port[2].checksum"
        );
    }
}
