//! `iwarpd list-devices`: the PCI Ethernet controllers of this machine as DPDK sees them
//! (issue 14 item 3), read from sysfs: address, vendor and device, the driver bound, the
//! NUMA node, the kernel interface if a kernel driver holds it, whether iwarpd can drive it
//! now, and the exact command that makes it drivable. Also the NUMA node of a CPU, for the
//! start-up warning when a dataplane core is not on its NIC's node.
//!
//! Plain sysfs reads rather than `hwloc2`: the few files needed (`class`, `vendor`,
//! `device`, `driver`, `numa_node`, `net/`, `cpuN/nodeM`) are stable kernel ABI, and
//! hwloc's PCI discovery would add a C library to the daemon for them.

use std::fs;
use std::path::{Path, PathBuf};

/// PCI vendor id of NVIDIA/Mellanox: its PMD (mlx5) runs beside the kernel driver.
const VENDOR_MELLANOX: &str = "0x15b3";

/// Drivers through which a DPDK PMD reaches a PCI device.
const USERSPACE_DRIVERS: [&str; 3] = ["vfio-pci", "uio_pci_generic", "igb_uio"];

/// One PCI network controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciNic {
    /// PCI address (`0000:3b:00.0`).
    pub address: String,
    /// `vendor:device` in hex (`8086:1592`).
    pub id: String,
    /// The driver bound now, if any.
    pub driver: Option<String>,
    /// NUMA node (-1: none reported).
    pub numa_node: i32,
    /// Kernel network interfaces of the device (when a kernel driver holds it).
    pub interfaces: Vec<String>,
}

impl PciNic {
    /// Whether iwarpd can open it now: bound to a userspace I/O driver, or an mlx5 NIC
    /// under its kernel driver (the bifurcated PMD).
    pub fn drivable(&self) -> bool {
        match self.driver.as_deref() {
            Some(d) if USERSPACE_DRIVERS.contains(&d) => true,
            Some("mlx5_core") => self.id.starts_with(&VENDOR_MELLANOX[2..]),
            _ => false,
        }
    }

    /// What to run to make it drivable, or `None` if it is.
    pub fn bind_command(&self) -> Option<String> {
        if self.drivable() {
            return None;
        }
        if self.id.starts_with(&VENDOR_MELLANOX[2..]) {
            return Some(
                "modprobe mlx5_core   # mlx5: the PMD runs beside the kernel driver".into(),
            );
        }
        let down = self
            .interfaces
            .iter()
            .map(|i| format!("ip link set {i} down && "))
            .collect::<String>();
        Some(format!(
            "{down}modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci {}",
            self.address
        ))
    }
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// The network controllers (PCI class 0x02) under `root` (`/sys` on a live system),
/// sorted by address. Unreadable entries are skipped.
pub fn list(root: &Path) -> Vec<PciNic> {
    let dir = root.join("bus/pci/devices");
    let Ok(rd) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<PciNic> = rd
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            let class = read_trim(&p.join("class"))?;
            if !class.starts_with("0x02") {
                return None;
            }
            let vendor = read_trim(&p.join("vendor"))?;
            let device = read_trim(&p.join("device"))?;
            let driver = fs::read_link(p.join("driver"))
                .ok()
                .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
            let numa_node = read_trim(&p.join("numa_node"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1);
            // `net/` of the device, or of its virtio child (`virtio0/net/`).
            let mut interfaces: Vec<String> = fs::read_dir(&p)
                .map(|r| {
                    r.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|c| {
                            c.file_name()
                                .is_some_and(|n| n.to_string_lossy().starts_with("virtio"))
                        })
                        .chain(std::iter::once(p.clone()))
                        .flat_map(|d| fs::read_dir(d.join("net")).into_iter().flatten())
                        .filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            interfaces.sort();
            Some(PciNic {
                address: e.file_name().to_string_lossy().into_owned(),
                id: format!(
                    "{}:{}",
                    vendor.trim_start_matches("0x"),
                    device.trim_start_matches("0x")
                ),
                driver,
                numa_node,
                interfaces,
            })
        })
        .collect();
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

/// The listing `iwarpd list-devices` prints.
pub fn render(nics: &[PciNic]) -> String {
    if nics.is_empty() {
        return "no PCI network controller found (vdev ports need none: net_memif, \
                net_af_packet, net_af_xdp, net_tap)\n"
            .into();
    }
    let mut s = String::new();
    for n in nics {
        let state = if n.drivable() {
            "iwarpd can drive it"
        } else {
            "not drivable yet"
        };
        s += &format!(
            "{}  {}  driver {}  numa {}  {}{}\n",
            n.address,
            n.id,
            n.driver.as_deref().unwrap_or("none"),
            n.numa_node,
            state,
            if n.interfaces.is_empty() {
                String::new()
            } else {
                format!("  (kernel interface {})", n.interfaces.join(", "))
            }
        );
        if let Some(cmd) = n.bind_command() {
            if !n.interfaces.is_empty() && !n.drivable() {
                s += "    the kernel uses it: binding it takes the interface away (not the one you log in by)\n";
            }
            s += &format!("    to use it: {cmd}\n");
        } else {
            s += &format!("    port.N.device = \"{}\"\n", n.address);
        }
    }
    s
}

/// The NUMA node of CPU `cpu` under `root` (`/sys`), from its `nodeN` link.
pub fn cpu_node(root: &Path, cpu: usize) -> Option<i32> {
    let dir: PathBuf = root.join(format!("devices/system/cpu/cpu{cpu}"));
    fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(
        root: &Path,
        addr: &str,
        class: &str,
        id: (&str, &str),
        driver: Option<&str>,
        numa: i32,
        ifs: &[&str],
    ) {
        let d = root.join("bus/pci/devices").join(addr);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("class"), format!("{class}\n")).unwrap();
        fs::write(d.join("vendor"), format!("{}\n", id.0)).unwrap();
        fs::write(d.join("device"), format!("{}\n", id.1)).unwrap();
        fs::write(d.join("numa_node"), format!("{numa}\n")).unwrap();
        if let Some(drv) = driver {
            let t = root.join("bus/pci/drivers").join(drv);
            fs::create_dir_all(&t).unwrap();
            std::os::unix::fs::symlink(&t, d.join("driver")).unwrap();
        }
        for i in ifs {
            fs::create_dir_all(d.join("net").join(i)).unwrap();
        }
    }

    #[test]
    fn lists_network_controllers_with_their_driver_node_and_bind_command() {
        let root = std::env::temp_dir().join(format!("iwarpd-sysfs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        dev(
            &root,
            "0000:3b:00.1",
            "0x020000",
            ("0x8086", "0x1592"),
            Some("ice"),
            1,
            &["ens1f1"],
        );
        dev(
            &root,
            "0000:3b:00.0",
            "0x020000",
            ("0x8086", "0x1592"),
            Some("vfio-pci"),
            1,
            &[],
        );
        dev(
            &root,
            "0000:5e:00.0",
            "0x020000",
            ("0x15b3", "0x101d"),
            Some("mlx5_core"),
            0,
            &["ens2"],
        );
        dev(
            &root,
            "0000:00:1f.2",
            "0x010601",
            ("0x8086", "0x2922"),
            Some("ahci"),
            -1,
            &[],
        );
        dev(
            &root,
            "0000:00:05.0",
            "0x020000",
            ("0x1af4", "0x1041"),
            None,
            -1,
            &[],
        );
        // A virtio NIC under its kernel driver: the interface is under its virtio child.
        fs::create_dir_all(root.join("bus/pci/devices/0000:00:06.0/virtio1/net/eth0")).unwrap();
        dev(
            &root,
            "0000:00:06.0",
            "0x020000",
            ("0x1af4", "0x1041"),
            Some("virtio-pci"),
            -1,
            &[],
        );
        let mut nics = list(&root);
        let virtio = nics.remove(1);
        assert_eq!(virtio.address, "0000:00:06.0");
        assert_eq!(virtio.interfaces, ["eth0"]);
        assert!(!virtio.drivable());
        assert!(render(std::slice::from_ref(&virtio)).contains("the kernel uses it"));
        let addrs: Vec<&str> = nics.iter().map(|n| n.address.as_str()).collect();
        assert_eq!(
            addrs,
            [
                "0000:00:05.0",
                "0000:3b:00.0",
                "0000:3b:00.1",
                "0000:5e:00.0"
            ],
            "the SATA controller is not a NIC"
        );
        assert!(!nics[0].drivable());
        assert_eq!(
            nics[0].bind_command().unwrap(),
            "modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci 0000:00:05.0"
        );
        assert!(nics[1].drivable());
        assert_eq!(nics[1].numa_node, 1);
        assert!(!nics[2].drivable());
        assert_eq!(nics[2].interfaces, ["ens1f1"]);
        assert_eq!(
            nics[2].bind_command().unwrap(),
            "ip link set ens1f1 down && modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci 0000:3b:00.1"
        );
        assert!(nics[3].drivable(), "mlx5 under its kernel driver");
        let text = render(&nics);
        assert!(
            text.contains("0000:3b:00.0  8086:1592  driver vfio-pci  numa 1  iwarpd can drive it"),
            "{text}"
        );
        assert!(text.contains("port.N.device = \"0000:3b:00.0\""), "{text}");
        let cpu = root.join("devices/system/cpu/cpu3/node1");
        fs::create_dir_all(&cpu).unwrap();
        assert_eq!(cpu_node(&root, 3), Some(1));
        assert_eq!(cpu_node(&root, 4), None);
        let _ = fs::remove_dir_all(&root);
        assert!(render(&[]).starts_with("no PCI network controller"));
    }
}
