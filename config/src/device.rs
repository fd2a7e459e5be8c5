//! The `device` of a port: a PCI address or a DPDK virtual device string.
//!
//! Parsing checks what DPDK would only report at start-up (or not at all): the PCI
//! address syntax, the vdev driver prefix, the `key=value` syntax of the arguments, the
//! argument names each driver of DPDK 22.11 accepts, and the values a few of them take.

use core::fmt;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

/// A PCI address `DDDD:BB:DD.F` (domain, bus, device, function).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PciAddr {
    /// PCI domain (16 bits as DPDK prints it; 0 on most machines).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number (0..=31).
    pub device: u8,
    /// Function number (0..=7).
    pub function: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciAddr {
    type Err = String;

    /// Parses `DDDD:BB:DD.F` or the short form `BB:DD.F` (domain 0), hexadecimal.
    fn from_str(s: &str) -> Result<PciAddr, String> {
        let bad = || format!("`{s}` is not a PCI address (DDDD:BB:DD.F, hexadecimal)");
        let (rest, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] if d.len() == 4 => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex = |t: &str, digits: usize| -> Result<u32, String> {
            if t.is_empty() || t.len() > digits || !t.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(t, 16).map_err(|_| bad())
        };
        let domain = hex(domain, 4)?;
        let bus = hex(bus, 2)?;
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f {
            return Err(format!("`{s}`: PCI device number must be at most 1f"));
        }
        if function > 7 {
            return Err(format!("`{s}`: PCI function number must be at most 7"));
        }
        Ok(PciAddr {
            domain: domain as u16,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

/// The DPDK virtual device drivers iwarpd knows (see `shared/notes/dpdk.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VdevDriver {
    /// `net_memif`: shared-memory packet interface between two processes on one host.
    Memif,
    /// `net_af_packet`: a Linux interface through a packet socket.
    AfPacket,
    /// `net_af_xdp`: a Linux interface through an AF_XDP socket (no jumbo frames on veth).
    AfXdp,
    /// `net_tap`: a Linux tap interface the driver creates (no jumbo frames).
    Tap,
    /// `net_ring`: an in-process loopback over a ring (one process only).
    Ring,
}

impl VdevDriver {
    /// Every driver, in the order the help text lists them.
    pub const ALL: [VdevDriver; 5] = [
        VdevDriver::Memif,
        VdevDriver::AfPacket,
        VdevDriver::AfXdp,
        VdevDriver::Tap,
        VdevDriver::Ring,
    ];

    /// The prefix of the device name, e.g. `net_memif`.
    pub const fn prefix(self) -> &'static str {
        match self {
            VdevDriver::Memif => "net_memif",
            VdevDriver::AfPacket => "net_af_packet",
            VdevDriver::AfXdp => "net_af_xdp",
            VdevDriver::Tap => "net_tap",
            VdevDriver::Ring => "net_ring",
        }
    }

    /// The argument names the DPDK 22.11 driver accepts.
    pub const fn known_args(self) -> &'static [&'static str] {
        match self {
            VdevDriver::Memif => &[
                "id",
                "role",
                "bsize",
                "rsize",
                "socket",
                "socket-abstract",
                "mac",
                "secret",
                "zero-copy",
            ],
            VdevDriver::AfPacket => &[
                "iface",
                "qpairs",
                "blocksz",
                "framesz",
                "framecnt",
                "qdisc_bypass",
            ],
            VdevDriver::AfXdp => &[
                "iface",
                "start_queue",
                "queue_count",
                "shared_umem",
                "xdp_prog",
                "busy_budget",
                "force_copy",
            ],
            VdevDriver::Tap => &["iface", "mac", "remote", "persist"],
            VdevDriver::Ring => &["nodeaction"],
        }
    }

    /// Arguments that must be present.
    const fn required_args(self) -> &'static [&'static str] {
        match self {
            VdevDriver::AfPacket | VdevDriver::AfXdp => &["iface"],
            _ => &[],
        }
    }

    /// Arguments whose value must be a decimal integer.
    const fn integer_args(self) -> &'static [&'static str] {
        match self {
            VdevDriver::Memif => &["id", "bsize", "rsize"],
            VdevDriver::AfPacket => &["qpairs", "blocksz", "framesz", "framecnt", "qdisc_bypass"],
            VdevDriver::AfXdp => &[
                "start_queue",
                "queue_count",
                "shared_umem",
                "busy_budget",
                "force_copy",
            ],
            _ => &[],
        }
    }
}

/// Where a port's frames go: a NIC by PCI address, or a DPDK virtual device.
///
/// In the file it is one string: `0000:03:00.0`, or `net_memif0,role=server,socket=/x`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Device {
    /// A PCI device (passed to EAL as `-a <addr>`).
    Pci(PciAddr),
    /// A virtual device (passed to EAL as `--vdev=<name>,<args>`).
    Vdev(Vdev),
}

/// A DPDK virtual device: `name[,key=value]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vdev {
    /// The driver, from the name's prefix.
    pub driver: VdevDriver,
    /// The device name, e.g. `net_memif0` (unique in one process).
    pub name: String,
    /// The `key=value` arguments, in the order written.
    pub args: Vec<(String, String)>,
}

impl Vdev {
    /// The value of argument `key`, if given.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of integer argument `key`, if given (parsing was checked).
    pub fn int_arg(&self, key: &str) -> Option<u64> {
        self.arg(key).and_then(|v| v.parse().ok())
    }
}

impl Device {
    /// The default device of a daemon: a memif server whose socket is named after it
    /// (an abstract socket: no file is created, the path is only a name).
    pub fn default_memif(daemon_name: &str) -> Device {
        Device::Vdev(Vdev {
            driver: VdevDriver::Memif,
            name: "net_memif0".to_string(),
            args: vec![
                ("role".to_string(), "server".to_string()),
                (
                    "socket".to_string(),
                    format!("/run/iwarpd/{daemon_name}.memif"),
                ),
            ],
        })
    }

    /// The socket a memif server port listens on, with whether it is abstract (memif's
    /// defaults: role server, socket `/run/memif.sock`, abstract). `None` for anything
    /// but a memif server.
    pub fn memif_server_socket(&self) -> Option<(String, bool)> {
        let v = self.vdev().filter(|v| v.driver == VdevDriver::Memif)?;
        if v.arg("role").unwrap_or("server") != "server" {
            return None;
        }
        let socket = v.arg("socket").unwrap_or("/run/memif.sock").to_string();
        Some((socket, v.arg("socket-abstract").unwrap_or("yes") != "no"))
    }

    /// Whether this is a memif client in zero-copy mode (`zero-copy=yes`): its buffers are
    /// the shared ring's, so its EAL needs `--single-file-segments` (one memory file per
    /// segment list to share; DPDK refuses zero-copy without it).
    pub fn memif_zero_copy(&self) -> bool {
        self.vdev()
            .is_some_and(|v| v.driver == VdevDriver::Memif && v.arg("zero-copy") == Some("yes"))
    }

    /// The virtual device, if this is one.
    pub fn vdev(&self) -> Option<&Vdev> {
        match self {
            Device::Vdev(v) => Some(v),
            Device::Pci(_) => None,
        }
    }

    /// The vdev driver, or `None` for a PCI device.
    pub fn driver(&self) -> Option<VdevDriver> {
        self.vdev().map(|v| v.driver)
    }

    /// The EAL argument that attaches this device: `-a` value or `--vdev` value.
    pub fn eal_arg(&self) -> (&'static str, String) {
        match self {
            Device::Pci(p) => ("-a", p.to_string()),
            Device::Vdev(_) => ("--vdev", self.to_string()),
        }
    }

    /// The name DPDK knows the port by (`rte_eth_dev_get_port_by_name`).
    pub fn dpdk_name(&self) -> String {
        match self {
            Device::Pci(p) => p.to_string(),
            Device::Vdev(v) => v.name.clone(),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Pci(p) => p.fmt(f),
            Device::Vdev(v) => {
                f.write_str(&v.name)?;
                for (k, val) in &v.args {
                    write!(f, ",{k}={val}")?;
                }
                Ok(())
            }
        }
    }
}

impl From<Device> for String {
    fn from(d: Device) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for Device {
    type Error = String;

    fn try_from(s: String) -> Result<Device, String> {
        s.parse()
    }
}

impl FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Device, String> {
        if s.is_empty() {
            return Err("empty device: give a PCI address or a vdev string".to_string());
        }
        if s.starts_with("net_") {
            return parse_vdev(s).map(Device::Vdev);
        }
        s.parse::<PciAddr>().map(Device::Pci).map_err(|e| {
            let drivers: Vec<&str> = VdevDriver::ALL.iter().map(|d| d.prefix()).collect();
            format!(
                "{e}, or a vdev string starting with one of {}",
                drivers.join(", ")
            )
        })
    }
}

fn parse_vdev(s: &str) -> Result<Vdev, String> {
    let mut parts = s.split(',');
    let name = parts.next().unwrap_or_default();
    // The longest prefix wins (none of ours is a prefix of another, but be exact).
    let driver = VdevDriver::ALL
        .iter()
        .copied()
        .filter(|d| name.starts_with(d.prefix()))
        .max_by_key(|d| d.prefix().len())
        .ok_or_else(|| {
            let drivers: Vec<&str> = VdevDriver::ALL.iter().map(|d| d.prefix()).collect();
            format!(
                "unknown vdev driver in `{name}`: expected one of {}",
                drivers.join(", ")
            )
        })?;
    let suffix = &name[driver.prefix().len()..];
    if !suffix
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_')
    {
        return Err(format!(
            "vdev name `{name}`: after `{}` only letters, digits and `_` may follow",
            driver.prefix()
        ));
    }
    if name.len() > 63 {
        return Err(format!("vdev name `{name}` is longer than 63 characters"));
    }
    let mut args: Vec<(String, String)> = Vec::new();
    for part in parts {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            format!("vdev argument `{part}` is not key=value (arguments are separated by `,`)")
        })?;
        let key_ok = !k.is_empty()
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
        if !key_ok {
            return Err(format!("vdev argument `{part}`: bad key `{k}`"));
        }
        if v.is_empty() || v.bytes().any(|c| c.is_ascii_whitespace() || c == b'=') {
            return Err(format!(
                "vdev argument `{part}`: the value must be non-empty, without spaces or `=`"
            ));
        }
        if !driver.known_args().contains(&k) {
            return Err(format!(
                "{} does not take `{k}`; its arguments are: {}",
                driver.prefix(),
                driver.known_args().join(", ")
            ));
        }
        if args.iter().any(|(seen, _)| seen == k) {
            return Err(format!("vdev argument `{k}` is given twice"));
        }
        if driver.integer_args().contains(&k) && v.parse::<u64>().is_err() {
            return Err(format!(
                "vdev argument `{k}={v}`: must be a decimal integer"
            ));
        }
        check_value(driver, k, v)?;
        args.push((k.to_string(), v.to_string()));
    }
    let arg = |key: &str| args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    if driver == VdevDriver::Memif
        && arg("zero-copy") == Some("yes")
        && arg("role").unwrap_or("server") != "client"
    {
        // DPDK 22.11's memif takes zero-copy only on the client: the client's own buffers
        // become the shared ring's buffers, which the server copies into and out of.
        return Err(
            "vdev argument `zero-copy=yes`: only a memif client (`role=client`) can be zero-copy"
                .to_string(),
        );
    }
    for req in driver.required_args() {
        if !args.iter().any(|(k, _)| k == req) {
            return Err(format!("{} needs `{req}=...`", driver.prefix()));
        }
    }
    Ok(Vdev {
        driver,
        name: name.to_string(),
        args,
    })
}

/// Checks the values of the arguments that take a fixed set of words.
fn check_value(driver: VdevDriver, k: &str, v: &str) -> Result<(), String> {
    let one_of = |allowed: &[&str]| {
        if allowed.contains(&v) {
            Ok(())
        } else {
            Err(format!(
                "vdev argument `{k}={v}`: must be one of {}",
                allowed.join(", ")
            ))
        }
    };
    match (driver, k) {
        (VdevDriver::Memif, "role") => one_of(&["server", "client"]),
        (VdevDriver::Memif, "socket-abstract" | "zero-copy") => one_of(&["yes", "no"]),
        (VdevDriver::AfPacket, "qdisc_bypass") => one_of(&["0", "1"]),
        (VdevDriver::Memif, "socket") if !v.starts_with('/') => Err(format!(
            "vdev argument `socket={v}`: must be an absolute path"
        )),
        (VdevDriver::Memif, "socket") if v.len() > 107 => Err(format!(
            "vdev argument `socket={v}`: longer than a unix socket path may be (107 bytes)"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses() {
        let d: Device = "0000:03:00.0".parse().unwrap();
        assert_eq!(d.to_string(), "0000:03:00.0");
        assert_eq!(d.eal_arg(), ("-a", "0000:03:00.0".to_string()));
        let d: Device = "af:1f.7".parse().unwrap();
        assert_eq!(d.to_string(), "0000:af:1f.7");
        for bad in [
            "0000:03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "03.00.0",
            "g0:00.0",
            "00000:03:00.0",
        ] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
    }

    #[test]
    fn vdev_strings_round_trip() {
        for s in [
            "net_memif0,role=server,socket=/run/x.sock",
            "net_memif1,role=client,socket=/tmp/a,bsize=10240",
            "net_af_packet0,iface=veth0,framesz=16384,blocksz=16384",
            "net_af_xdp0,iface=vfa,start_queue=0,queue_count=1",
            "net_tap0,iface=dtapA",
            "net_tap0",
            "net_ring0",
        ] {
            let d: Device = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
            assert!(d.vdev().is_some());
        }
        let d: Device = "net_memif0,role=client,bsize=10240".parse().unwrap();
        let v = d.vdev().unwrap();
        assert_eq!(v.driver, VdevDriver::Memif);
        assert_eq!(v.arg("role"), Some("client"));
        assert_eq!(v.int_arg("bsize"), Some(10240));
        assert_eq!(d.dpdk_name(), "net_memif0");
        assert!(!d.memif_zero_copy());
        let zc: Device = "net_memif1,role=client,zero-copy=yes".parse().unwrap();
        assert!(zc.memif_zero_copy());
        let no: Device = "net_memif1,role=client,zero-copy=no".parse().unwrap();
        assert!(!no.memif_zero_copy() && !Device::default_memif("x").memif_zero_copy());
    }

    #[test]
    fn bad_vdev_strings_say_why() {
        let err = |s: &str| s.parse::<Device>().unwrap_err();
        assert!(err("net_foo0").contains("unknown vdev driver"));
        assert!(err("net_memif0,role").contains("key=value"));
        assert!(err("net_memif0,role=").contains("non-empty"));
        assert!(err("net_memif0,rol=server").contains("does not take `rol`"));
        assert!(err("net_memif0,role=master").contains("server, client"));
        assert!(err("net_memif0,role=server,role=client").contains("twice"));
        assert!(err("net_memif0,bsize=big").contains("integer"));
        assert!(err("net_memif0,socket=relative").contains("absolute"));
        assert!(err("net_memif0,zero-copy=yes").contains("only a memif client"));
        assert!(err("net_memif0,role=server,zero-copy=yes").contains("only a memif client"));
        assert!(err("net_memif0,zero-copy=on").contains("yes, no"));
        assert!(err("net_af_packet0").contains("iface"));
        assert!(err("net_af_xdp0,start_queue=0").contains("iface"));
        assert!(err("net_memif-0").contains("only letters"));
        assert!(err("").contains("empty"));
        assert!(err("eth0").contains("PCI address"));
    }

    #[test]
    fn default_memif_is_named_after_the_daemon() {
        let d = Device::default_memif("alpha");
        assert_eq!(
            d.to_string(),
            "net_memif0,role=server,socket=/run/iwarpd/alpha.memif"
        );
        assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
    }
}
