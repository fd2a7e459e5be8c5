//! Device strings (PCI addresses and vdev strings such as `net_memif0,role=server,...`)
//! and the pure decisions of port set-up: port names, the MTU plan, the RSS key and RETA.

use crate::error::DpdkError;
use crate::port::DeviceInfo;

/// Ethernet header (no VLAN tag, no FCS).
pub const ETHER_HDR_LEN: usize = 14;

/// True for `0000:00:04.0` or `00:04.0`.
pub fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let (bus_dev_fn, domain) = match parts.as_slice() {
        [bus, devfn] => ((*bus, *devfn), None),
        [domain, bus, devfn] => ((*bus, *devfn), Some(*domain)),
        _ => return false,
    };
    let hex = |t: &str, n: usize| t.len() == n && t.chars().all(|c| c.is_ascii_hexdigit());
    let Some((dev, func)) = bus_dev_fn.1.split_once('.') else {
        return false;
    };
    domain.is_none_or(|d| hex(d, 4))
        && hex(bus_dev_fn.0, 2)
        && hex(dev, 2)
        && func.len() == 1
        && matches!(func.as_bytes()[0], b'0'..=b'7')
}

/// The ethdev name DPDK gives the device: the vdev name before the first comma, or the
/// PCI address with its domain (`0000:` added when missing).
pub fn port_name(device: &str) -> String {
    let name = device.split(',').next().unwrap_or(device).trim();
    if is_pci_address(name) && name.matches(':').count() == 1 {
        format!("0000:{name}")
    } else {
        name.to_owned()
    }
}

/// The driver a vdev name selects: the name without its trailing instance number
/// (`net_memif0` → `net_memif`).
pub fn vdev_driver(device: &str) -> String {
    port_name(device)
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .to_owned()
}

/// The value of `key=` in a vdev string.
pub fn devarg<'a>(device: &'a str, key: &str) -> Option<&'a str> {
    device
        .split(',')
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
}

/// The memif server socket a vdev string listens on: (name, abstract). None unless the
/// device is a memif in the server role (the default role).
pub fn memif_server_socket(device: &str) -> Option<(String, bool)> {
    let driver = vdev_driver(device);
    if driver != "net_memif" && driver != "eth_memif" {
        return None;
    }
    if devarg(device, "role").unwrap_or("server") != "server" {
        return None;
    }
    let socket = devarg(device, "socket")
        .unwrap_or("/run/memif.sock")
        .to_owned();
    let abstract_ = devarg(device, "socket-abstract").unwrap_or("yes") != "no";
    Some((socket, abstract_))
}

/// Drivers whose datapath carries frames larger than their ethdev MTU limit (1500) when
/// their buffers are large enough: memif (`bsize=`) and af_packet (`framesz=`).
/// Returns the largest frame the buffers hold.
pub fn buffer_frame_limit(info: &DeviceInfo, device: &str) -> Option<usize> {
    let parse = |key: &str, default: usize| {
        devarg(device, key)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    match info.driver.as_str() {
        "net_memif" => Some(parse("bsize", 2048)),
        // The tpacket v2 header takes 32 bytes of each frame slot.
        "net_af_packet" => Some(parse("framesz", 2048).saturating_sub(32)),
        _ => None,
    }
}

/// The MTU the port allows through ethdev (`rte_eth_dev_configure` checks
/// `mtu + overhead <= max_rx_pktlen`).
pub fn port_mtu_limit(info: &DeviceInfo) -> u32 {
    let overhead = if info.max_mtu != u16::MAX && info.max_rx_pktlen > u32::from(info.max_mtu) {
        info.max_rx_pktlen - u32::from(info.max_mtu)
    } else {
        18
    };
    info.max_rx_pktlen
        .saturating_sub(overhead)
        .min(u32::from(info.max_mtu))
}

/// The MTU decision: (MTU given to ethdev, largest frame the queues carry).
///
/// `rx_frame_room` is the largest frame one rx buffer holds. An MTU above the port's
/// ethdev limit is an error naming both, except on memif/af_packet, whose datapath
/// carries it when their buffers are large enough: ethdev keeps its limit and the frame
/// limit comes from the buffer size.
pub fn plan_mtu(
    info: &DeviceInfo,
    device: &str,
    mtu: u16,
    rx_frame_room: usize,
) -> Result<(u16, usize), DpdkError> {
    let frame = usize::from(mtu) + ETHER_HDR_LEN;
    if frame > rx_frame_room {
        return Err(DpdkError::Limit {
            port: info.name.clone(),
            field: "mtu (a frame must fit one buffer of the rx mempool)",
            value: u64::from(mtu),
            limit: rx_frame_room.saturating_sub(ETHER_HDR_LEN) as u64,
        });
    }
    let limit = port_mtu_limit(info);
    if u32::from(mtu) <= limit {
        return Ok((mtu, frame));
    }
    match buffer_frame_limit(info, device) {
        Some(buffer) if frame <= buffer => Ok((limit.min(1500) as u16, frame)),
        Some(buffer) => Err(DpdkError::Limit {
            port: info.name.clone(),
            field: if info.driver == "net_memif" {
                "mtu (raise bsize= on both memif ends)"
            } else {
                "mtu (raise framesz=)"
            },
            value: u64::from(mtu),
            limit: buffer.saturating_sub(ETHER_HDR_LEN) as u64,
        }),
        None => Err(DpdkError::Limit {
            port: info.name.clone(),
            field: "mtu",
            value: u64::from(mtu),
            limit: u64::from(limit),
        }),
    }
}

/// The symmetric Toeplitz key: 0x6d5a repeated (traffic in both directions of a TCP
/// connection hashes to the same queue).
pub fn symmetric_rss_key(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| if i % 2 == 0 { 0x6d } else { 0x5a })
        .collect()
}

/// The redirection table: entry i → queue i % rx_queues.
pub fn reta_table(reta_size: u16, rx_queues: u16) -> Vec<u16> {
    (0..reta_size).map(|i| i % rx_queues.max(1)).collect()
}

/// Drivers DPDK can drive a PCI NIC through from user space (the bifurcated mlx5 PMD works
/// with the kernel's own mlx5_core instead).
const DPDK_PCI_DRIVERS: &[&str] = &["vfio-pci", "uio_pci_generic", "igb_uio"];

/// Why a PCI address could not be probed, from sysfs under `sys_root` (`/sys` normally):
/// no such device, bound to a kernel network driver (with the command that fixes it), or
/// nothing to say (`None`: bound to a DPDK-capable driver, or mlx5_core).
pub fn pci_binding_hint(sys_root: &std::path::Path, addr: &str) -> Option<String> {
    let dev = sys_root.join("bus/pci/devices").join(addr);
    if !dev.exists() {
        return Some(format!(
            "no PCI device {addr} on this machine (`lspci -D` lists the addresses)"
        ));
    }
    let driver = std::fs::read_link(dev.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    match driver.as_deref() {
        None => Some(format!(
            "{addr} is bound to no driver: bind it to vfio-pci (`modprobe vfio-pci; dpdk-devbind.py -b vfio-pci {addr}`; without an IOMMU: uio_pci_generic)"
        )),
        Some(d) if DPDK_PCI_DRIVERS.contains(&d) || d == "mlx5_core" => None,
        Some(d) => Some(format!(
            "{addr} is bound to the kernel driver {d}: take it down and bind it to vfio-pci (`dpdk-devbind.py -b vfio-pci {addr}`; ConnectX stays on mlx5_core)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_binding_hints_name_the_fix() {
        let root = std::env::temp_dir().join(format!("iwarp-sysfs-{}", std::process::id()));
        let devs = root.join("bus/pci/devices");
        let drivers = root.join("bus/pci/drivers");
        for (addr, drv) in [
            ("0000:00:05.0", Some("uio_pci_generic")),
            ("0000:00:06.0", Some("virtio-pci")),
            ("0000:00:07.0", None),
            ("0000:3b:00.0", Some("mlx5_core")),
        ] {
            let d = devs.join(addr);
            std::fs::create_dir_all(&d).unwrap();
            if let Some(drv) = drv {
                std::fs::create_dir_all(drivers.join(drv)).unwrap();
                let _ = std::fs::remove_file(d.join("driver"));
                std::os::unix::fs::symlink(drivers.join(drv), d.join("driver")).unwrap();
            }
        }
        assert_eq!(pci_binding_hint(&root, "0000:00:05.0"), None);
        assert_eq!(pci_binding_hint(&root, "0000:3b:00.0"), None);
        let h = pci_binding_hint(&root, "0000:00:06.0").unwrap();
        assert!(
            h.contains("kernel driver virtio-pci")
                && h.contains("dpdk-devbind.py -b vfio-pci 0000:00:06.0"),
            "{h}"
        );
        let h = pci_binding_hint(&root, "0000:00:07.0").unwrap();
        assert!(h.contains("bound to no driver"), "{h}");
        let h = pci_binding_hint(&root, "0000:00:08.0").unwrap();
        assert!(h.contains("no PCI device 0000:00:08.0"), "{h}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn info(driver: &str, max_rx_pktlen: u32, max_mtu: u16) -> DeviceInfo {
        DeviceInfo {
            name: format!("{driver}0"),
            driver: driver.to_owned(),
            max_rx_pktlen,
            max_mtu,
            ..DeviceInfo::default()
        }
    }

    #[test]
    fn pci_addresses_and_names() {
        assert!(is_pci_address("0000:00:04.0"));
        assert!(is_pci_address("3b:00.1"));
        assert!(!is_pci_address("net_memif0"));
        assert!(!is_pci_address("0000:00:04.8"));
        assert!(!is_pci_address("00:4.0"));
        assert_eq!(port_name("3b:00.1"), "0000:3b:00.1");
        assert_eq!(port_name("net_memif0,role=server,socket=/x"), "net_memif0");
        assert_eq!(vdev_driver("net_af_packet12,iface=v0"), "net_af_packet");
    }

    #[test]
    fn devargs_and_memif_sockets() {
        let d = "net_memif0,role=server,socket=/tmp/a.sock,bsize=10240";
        assert_eq!(devarg(d, "bsize"), Some("10240"));
        assert_eq!(devarg(d, "nope"), None);
        assert_eq!(memif_server_socket(d), Some(("/tmp/a.sock".into(), true)));
        assert_eq!(
            memif_server_socket("net_memif1"),
            Some(("/run/memif.sock".into(), true))
        );
        assert_eq!(
            memif_server_socket("net_memif0,socket=/a,socket-abstract=no"),
            Some(("/a".into(), false))
        );
        assert_eq!(
            memif_server_socket("net_memif0,role=client,socket=/a"),
            None
        );
        assert_eq!(memif_server_socket("net_tap0"), None);
    }

    #[test]
    fn mtu_within_the_port_limit_is_kept() {
        let nic = info("net_ice", 9728, 9702);
        assert_eq!(port_mtu_limit(&nic), 9702);
        assert_eq!(
            plan_mtu(&nic, "0000:3b:00.0", 9000, 16000).ok(),
            Some((9000, 9014))
        );
        let tap = info("net_tap", 1522, u16::MAX);
        assert_eq!(port_mtu_limit(&tap), 1504);
        assert_eq!(
            plan_mtu(&tap, "net_tap0", 1500, 2048 - 128).ok(),
            Some((1500, 1514))
        );
    }

    #[test]
    fn mtu_above_the_port_limit_names_value_and_limit() {
        let tap = info("net_tap", 1522, u16::MAX);
        let e = plan_mtu(&tap, "net_tap0", 9000, 16000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "port net_tap0: mtu 9000 exceeds the port's limit 1504"
        );
        let e = plan_mtu(&tap, "net_tap0", 1500, 1000).unwrap_err();
        assert!(e
            .to_string()
            .contains("mtu (a frame must fit one buffer of the rx mempool) 1500 exceeds"));
    }

    #[test]
    fn memif_and_af_packet_carry_jumbo_frames_when_their_buffers_do() {
        let memif = info("net_memif", 1518, u16::MAX);
        assert_eq!(
            plan_mtu(&memif, "net_memif0,bsize=10240", 9000, 10240).ok(),
            Some((1500, 9014))
        );
        let e = plan_mtu(&memif, "net_memif0", 9000, 10240).unwrap_err();
        assert!(e.to_string().contains("raise bsize="), "{e}");
        assert!(e.to_string().contains("limit 2034"), "{e}");
        let afp = info("net_af_packet", 1518, u16::MAX);
        assert_eq!(
            plan_mtu(&afp, "net_af_packet0,iface=v,framesz=16384", 9000, 16352).ok(),
            Some((1500, 9014))
        );
        assert!(plan_mtu(&afp, "net_af_packet0,iface=v", 9000, 16352).is_err());
    }

    #[test]
    fn rss_key_and_reta() {
        assert_eq!(symmetric_rss_key(4), [0x6d, 0x5a, 0x6d, 0x5a]);
        assert_eq!(symmetric_rss_key(40).len(), 40);
        assert_eq!(reta_table(8, 3), [0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(reta_table(4, 0), [0, 0, 0, 0]);
    }
}
