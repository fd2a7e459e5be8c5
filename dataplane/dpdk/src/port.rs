//! Ethernet ports: probing by PCI address or vdev string, device information,
//! configuration (queues, MTU, checksum offloads, RSS), start/stop, link, MAC, stats.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iwarp_dpdk_sys as sys;

use crate::devargs::{
    self, is_pci_address, plan_mtu, port_name, reta_table, symmetric_rss_key, vdev_driver,
};
use crate::eal::{Eal, EalInner};
use crate::error::{call_error, rte_errno, strerror, DpdkError};
use crate::memif;
use crate::mempool::Mempool;
use crate::queue::PortQueue;

pub use crate::portinfo::{DeviceInfo, LinkStatus, PortConfig, PortSetup, PortStats};
use crate::portinfo::{RX_IPV4_CKSUM, RX_TCP_CKSUM, TX_IPV4_CKSUM, TX_TCP_CKSUM};

pub(crate) struct PortInner {
    pub(crate) port_id: u16,
    pub(crate) info: DeviceInfo,
    device: *mut sys::rte_device,
    started: AtomicBool,
    pub(crate) queue_taken: Vec<AtomicBool>,
    pub(crate) setup: Option<PortSetup>,
    _pools: Vec<Mempool>,
    _eal: Arc<EalInner>,
}

// SAFETY: the port id and device pointer are only used with thread-safe ethdev control
// calls, serialised by &mut Port or by the last drop.
unsafe impl Send for PortInner {}
// SAFETY: as above; shared access only reads plain data or calls read-only ethdev APIs.
unsafe impl Sync for PortInner {}

impl Drop for PortInner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone, so no PortQueue polls the port; the EAL is
        // alive (we hold it). Stop, close and unplug are each done once.
        unsafe {
            if self.started.load(Ordering::SeqCst) {
                sys::rte_eth_dev_stop(self.port_id);
            }
            sys::rte_eth_dev_close(self.port_id);
            if !self.device.is_null() {
                sys::rte_dev_remove(self.device);
            }
        }
        // A memif port's close sends its peer a DISCONNECT that the interrupt thread
        // handles; when the peer is a port of this process, that must be over before
        // the peer is closed here too (or the EAL cleaned up).
        crate::eal::interrupt_barrier();
    }
}

/// An Ethernet port. Dropping it (and its last [`PortQueue`]) stops, closes and unplugs it.
pub struct Port {
    inner: Arc<PortInner>,
    device: String,
}

fn read_info(port_id: u16, name: &str) -> Result<(DeviceInfo, *mut sys::rte_device), DpdkError> {
    let mut raw = sys::rte_eth_dev_info::default();
    // SAFETY: valid port id; raw is a properly sized out-parameter.
    let ret = unsafe { sys::rte_eth_dev_info_get(port_id, &mut raw) };
    if ret != 0 {
        return Err(call_error("rte_eth_dev_info_get", name, ret));
    }
    let driver = if raw.driver_name.is_null() {
        String::new()
    } else {
        // SAFETY: non-null, NUL-terminated static driver name.
        unsafe { CStr::from_ptr(raw.driver_name) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: valid port id.
    let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
    let info = DeviceInfo {
        name: name.to_owned(),
        driver,
        max_rx_queues: raw.max_rx_queues,
        max_tx_queues: raw.max_tx_queues,
        max_rx_pktlen: raw.max_rx_pktlen,
        min_mtu: raw.min_mtu,
        max_mtu: raw.max_mtu,
        rx_offload_capa: raw.rx_offload_capa,
        tx_offload_capa: raw.tx_offload_capa,
        rss_offloads: raw.flow_type_rss_offloads,
        reta_size: raw.reta_size,
        hash_key_size: raw.hash_key_size,
        rx_desc_max: raw.rx_desc_lim.nb_max,
        tx_desc_max: raw.tx_desc_lim.nb_max,
        socket,
    };
    Ok((info, raw.device))
}

fn lookup_port(name: &str) -> Option<u16> {
    let c = CString::new(name).ok()?;
    let mut id = 0u16;
    // SAFETY: valid C string and out-parameter.
    let ret = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
    (ret == 0).then_some(id)
}

/// True if the driver exists in this DPDK installation (a plugin file of that name).
fn driver_installed(driver: &str) -> bool {
    let lib = format!("librte_{}.so", driver.replacen("eth_", "net_", 1));
    [
        "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0",
        "/usr/lib/dpdk/pmds-23.0",
        "/usr/local/lib/x86_64-linux-gnu/dpdk/pmds-23.0",
    ]
    .iter()
    .any(|dir| std::path::Path::new(dir).join(&lib).exists())
}

impl Port {
    /// Opens the device given as a PCI address (`0000:3b:00.0`) or a vdev string
    /// (`net_memif0,role=server,socket=/run/a.sock`): probes it unless the EAL already
    /// did (`-a`/`--vdev`), then finds its port.
    pub fn open(eal: &Eal, device: &str) -> Result<Port, DpdkError> {
        let name = port_name(device);
        let c_dev = CString::new(device).map_err(|_| DpdkError::InvalidArgument {
            what: "device",
            value: device.to_owned(),
        })?;
        let port_id = match lookup_port(&name) {
            Some(id) => id,
            None => {
                // SAFETY: EAL initialised (we hold it); c_dev is a valid C string.
                let ret = unsafe { sys::rte_dev_probe(c_dev.as_ptr()) };
                if ret != 0 {
                    return Err(Self::explain_probe_failure(device, ret));
                }
                lookup_port(&name).ok_or_else(|| DpdkError::DeviceNotFound {
                    device: device.to_owned(),
                    reason: format!("probed, but no Ethernet port named {name} appeared"),
                })?
            }
        };
        let (info, dev_ptr) = read_info(port_id, &name)?;
        if info.max_rx_queues == 0 || info.max_tx_queues == 0 {
            return Err(DpdkError::NoQueues {
                port: name,
                detail: format!(
                    "the device offers rx {} tx {}",
                    info.max_rx_queues, info.max_tx_queues
                ),
            });
        }
        Ok(Port {
            inner: Arc::new(PortInner {
                port_id,
                info,
                device: dev_ptr,
                started: AtomicBool::new(false),
                queue_taken: Vec::new(),
                setup: None,
                _pools: Vec::new(),
                _eal: eal.inner.clone(),
            }),
            device: device.to_owned(),
        })
    }

    fn explain_probe_failure(device: &str, ret: i32) -> DpdkError {
        let name = port_name(device);
        if is_pci_address(&name) {
            if let Some(hint) = devargs::pci_binding_hint(std::path::Path::new("/sys"), &name) {
                return DpdkError::DeviceNotFound {
                    device: device.to_owned(),
                    reason: format!("{}; {hint}", strerror(ret)),
                };
            }
        } else {
            if let Some((socket, abstract_)) = devargs::memif_server_socket(device) {
                if memif::socket_busy(&socket, abstract_) {
                    return DpdkError::MemifSocketInUse { socket };
                }
            }
            let driver = vdev_driver(device);
            if !driver_installed(&driver) {
                return DpdkError::UnknownDriver {
                    device: device.to_owned(),
                    driver,
                };
            }
        }
        DpdkError::DeviceNotFound {
            device: device.to_owned(),
            reason: strerror(ret),
        }
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.inner.port_id
    }

    /// The device string this port was opened with.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// What the device reports.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The configuration result, once configured.
    pub fn setup(&self) -> Option<PortSetup> {
        self.inner.setup
    }

    fn exclusive(&mut self, what: &str) -> Result<&mut PortInner, DpdkError> {
        Arc::get_mut(&mut self.inner).ok_or_else(|| DpdkError::Busy {
            what: format!(
                "port {}: cannot {what} while its queues are in use",
                self.device
            ),
        })
    }

    /// Configures queues, MTU, offloads and RSS; rx queues take buffers from `pool`.
    /// The port must be stopped and have no live queues.
    pub fn configure(&mut self, cfg: &PortConfig, pool: &Mempool) -> Result<PortSetup, DpdkError> {
        let device = self.device.clone();
        let inner = self.exclusive("configure")?;
        if inner.started.load(Ordering::SeqCst) {
            return Err(DpdkError::State {
                what: format!("port {device} must be stopped to configure"),
            });
        }
        let info = inner.info.clone();
        let name = info.name.clone();
        if cfg.rx_queues == 0 || cfg.tx_queues == 0 {
            return Err(DpdkError::NoQueues {
                port: name,
                detail: format!(
                    "the configuration asks for rx {} tx {}",
                    cfg.rx_queues, cfg.tx_queues
                ),
            });
        }
        for (field, value, limit) in [
            ("rx_queues", cfg.rx_queues, info.max_rx_queues),
            ("tx_queues", cfg.tx_queues, info.max_tx_queues),
            ("rx_desc", cfg.rx_desc, info.rx_desc_max),
            ("tx_desc", cfg.tx_desc, info.tx_desc_max),
        ] {
            if value > limit && limit > 0 {
                return Err(DpdkError::Limit {
                    port: name,
                    field,
                    value: u64::from(value),
                    limit: u64::from(limit),
                });
            }
        }
        let (ethdev_mtu, frame_len_max) = plan_mtu(&info, &device, cfg.mtu, pool.frame_room())?;
        let tx_cksum = cfg.tx_checksum_offload && info.tx_checksum();
        let rx_cksum = cfg.rx_checksum_offload && info.rx_checksum();
        let rss = cfg.rss && cfg.rx_queues > 1 && info.rss();

        let mut conf = sys::rte_eth_conf::default();
        conf.rxmode.mtu = u32::from(ethdev_mtu);
        let tx_ipv4 = tx_cksum && info.tx_ipv4_checksum();
        let rx_ipv4 = rx_cksum && info.rx_ipv4_checksum();
        if tx_cksum {
            conf.txmode.offloads = TX_TCP_CKSUM | if tx_ipv4 { TX_IPV4_CKSUM } else { 0 };
        }
        if rx_cksum {
            conf.rxmode.offloads = RX_TCP_CKSUM | if rx_ipv4 { RX_IPV4_CKSUM } else { 0 };
        }
        let key_len = if info.hash_key_size == 0 {
            40
        } else {
            usize::from(info.hash_key_size)
        };
        let mut key = symmetric_rss_key(key_len);
        if rss {
            conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
            conf.rx_adv_conf.rss_conf.rss_key_len = key_len as u8;
            let wanted = (sys::RTE_ETH_RSS_IPV4 | sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP) as u64;
            conf.rx_adv_conf.rss_conf.rss_hf = wanted & info.rss_offloads;
        }
        let port_id = inner.port_id;
        // SAFETY: stopped port, valid id; conf (and the key it points to) outlive the call.
        let ret =
            unsafe { sys::rte_eth_dev_configure(port_id, cfg.rx_queues, cfg.tx_queues, &conf) };
        if ret != 0 {
            return Err(call_error("rte_eth_dev_configure", &name, ret));
        }
        let socket = if info.socket < 0 {
            sys::SOCKET_ID_ANY
        } else {
            info.socket
        };
        for q in 0..cfg.rx_queues {
            // SAFETY: configured port, q < rx_queues, pool valid and kept alive by the
            // port (pushed into _pools below) for as long as the queue exists.
            let ret = unsafe {
                sys::rte_eth_rx_queue_setup(
                    port_id,
                    q,
                    cfg.rx_desc,
                    socket as u32,
                    std::ptr::null(),
                    pool.as_ptr(),
                )
            };
            if ret != 0 {
                return Err(call_error(
                    "rte_eth_rx_queue_setup",
                    format!("{name} queue {q}"),
                    ret,
                ));
            }
        }
        for q in 0..cfg.tx_queues {
            // SAFETY: configured port, q < tx_queues; NULL means the default txconf.
            let ret = unsafe {
                sys::rte_eth_tx_queue_setup(
                    port_id,
                    q,
                    cfg.tx_desc,
                    socket as u32,
                    std::ptr::null(),
                )
            };
            if ret != 0 {
                return Err(call_error(
                    "rte_eth_tx_queue_setup",
                    format!("{name} queue {q}"),
                    ret,
                ));
            }
        }
        if rss {
            let table = reta_table(info.reta_size, cfg.rx_queues);
            let mut groups: Vec<sys::rte_eth_rss_reta_entry64> = table
                .chunks(sys::RTE_ETH_RETA_GROUP_SIZE as usize)
                .map(|chunk| {
                    let mut g = sys::rte_eth_rss_reta_entry64::default();
                    for (i, q) in chunk.iter().enumerate() {
                        g.mask |= 1u64 << i;
                        g.reta[i] = *q;
                    }
                    g
                })
                .collect();
            // SAFETY: groups covers reta_size entries, as the call expects.
            let ret = unsafe {
                sys::rte_eth_dev_rss_reta_update(port_id, groups.as_mut_ptr(), info.reta_size)
            };
            if ret != 0 {
                return Err(call_error("rte_eth_dev_rss_reta_update", &name, ret));
            }
        }
        let queues = cfg.rx_queues.min(cfg.tx_queues);
        let setup = PortSetup {
            frame_len_max,
            ethdev_mtu,
            tx_checksum_offload: tx_cksum,
            rx_checksum_offload: rx_cksum,
            tx_ipv4_checksum_offload: tx_ipv4,
            rx_ipv4_checksum_offload: rx_ipv4,
            rss,
            queues,
        };
        inner._pools.push(pool.clone());
        inner.queue_taken = (0..queues).map(|_| AtomicBool::new(false)).collect();
        inner.setup = Some(setup);
        if cfg.promiscuous {
            // SAFETY: valid, configured port.
            let ret = unsafe { sys::rte_eth_promiscuous_enable(port_id) };
            if ret != 0 && ret != -libc::ENOTSUP {
                return Err(call_error("rte_eth_promiscuous_enable", &name, ret));
            }
        }
        Ok(setup)
    }

    /// Starts the configured port.
    pub fn start(&mut self) -> Result<(), DpdkError> {
        let device = self.device.clone();
        let inner = self.exclusive("start")?;
        if inner.setup.is_none() {
            return Err(DpdkError::State {
                what: format!("port {device} must be configured before start"),
            });
        }
        if inner.started.load(Ordering::SeqCst) {
            return Ok(());
        }
        // SAFETY: configured port with all queues set up.
        let ret = unsafe { sys::rte_eth_dev_start(inner.port_id) };
        if ret != 0 {
            return Err(call_error("rte_eth_dev_start", device, ret));
        }
        inner.started.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Stops the port. Fails while [`PortQueue`]s of it are alive (they may be polling).
    pub fn stop(&mut self) -> Result<(), DpdkError> {
        let device = self.device.clone();
        let inner = self.exclusive("stop")?;
        if inner.started.swap(false, Ordering::SeqCst) {
            // SAFETY: no queue handle exists, so nothing polls the port.
            let ret = unsafe { sys::rte_eth_dev_stop(inner.port_id) };
            if ret != 0 {
                return Err(call_error("rte_eth_dev_stop", device, ret));
            }
        }
        Ok(())
    }

    /// Takes queue pair `queue_id` (rx and tx queue of that index) for one core. The port
    /// must be started; each index can be held by one [`PortQueue`] at a time.
    pub fn queue(&mut self, queue_id: u16, tx_pool: &Mempool) -> Result<PortQueue, DpdkError> {
        let Some(setup) = self.inner.setup else {
            return Err(DpdkError::State {
                what: format!("port {} is not configured", self.device),
            });
        };
        if !self.inner.started.load(Ordering::SeqCst) {
            return Err(DpdkError::State {
                what: format!("port {} is not started", self.device),
            });
        }
        let Some(flag) = self.inner.queue_taken.get(usize::from(queue_id)) else {
            return Err(DpdkError::NoQueues {
                port: self.inner.info.name.clone(),
                detail: format!("queue {queue_id} requested, {} configured", setup.queues),
            });
        };
        if flag.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::Busy {
                what: format!("port {} queue {queue_id} is already taken", self.device),
            });
        }
        let caps = iwarp_runtime::PortCaps {
            mac: self.mac(),
            frame_len_max: setup.frame_len_max,
            tx_checksum_offload: setup.tx_checksum_offload,
            rx_checksum_offload: setup.rx_checksum_offload,
        };
        Ok(PortQueue::new(
            self.inner.clone(),
            queue_id,
            tx_pool.clone(),
            caps,
        ))
    }

    /// Link state, without waiting.
    pub fn link(&self) -> LinkStatus {
        link_of(self.inner.port_id)
    }

    /// The port's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: valid port id and out-parameter.
        let ret = unsafe { sys::rte_eth_macaddr_get(self.inner.port_id, &mut addr) };
        if ret != 0 {
            return [0; 6];
        }
        addr.addr_bytes
    }

    /// Turns promiscuous mode on or off (ports that cannot report `ENOTSUP`, ignored).
    pub fn set_promiscuous(&self, on: bool) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe {
            if on {
                sys::rte_eth_promiscuous_enable(self.inner.port_id)
            } else {
                sys::rte_eth_promiscuous_disable(self.inner.port_id)
            }
        };
        if ret != 0 && ret != -libc::ENOTSUP {
            return Err(call_error(
                "rte_eth_promiscuous_enable/disable",
                &self.device,
                ret,
            ));
        }
        Ok(())
    }

    /// The basic counters.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port id and out-parameter.
        let ret = unsafe { sys::rte_eth_stats_get(self.inner.port_id, &mut s) };
        if ret != 0 {
            return Err(call_error("rte_eth_stats_get", &self.device, ret));
        }
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// One extended counter by name (e.g. `rx_good_packets`).
    pub fn xstat(&self, name: &str) -> Result<u64, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError::InvalidArgument {
            what: "xstat name",
            value: name.to_owned(),
        })?;
        let mut id = 0u64;
        // SAFETY: valid port id, C string and out-parameter.
        let ret =
            unsafe { sys::rte_eth_xstats_get_id_by_name(self.inner.port_id, c.as_ptr(), &mut id) };
        if ret != 0 {
            return Err(DpdkError::Call {
                call: "rte_eth_xstats_get_id_by_name",
                on: format!("{} ({name})", self.device),
                reason: strerror(ret),
            });
        }
        let mut value = 0u64;
        // SAFETY: one id in, one value out.
        let ret = unsafe { sys::rte_eth_xstats_get_by_id(self.inner.port_id, &id, &mut value, 1) };
        if ret != 1 {
            return Err(call_error(
                "rte_eth_xstats_get_by_id",
                &self.device,
                if ret < 0 { ret } else { -rte_errno().max(1) },
            ));
        }
        Ok(value)
    }
}

pub(crate) fn link_of(port_id: u16) -> LinkStatus {
    let mut link = sys::rte_eth_link::default();
    // SAFETY: valid port id and out-parameter; the nowait variant does not block.
    let ret = unsafe { sys::rte_eth_link_get_nowait(port_id, &mut link) };
    if ret != 0 {
        return LinkStatus {
            up: false,
            speed_mbps: 0,
            full_duplex: false,
        };
    }
    LinkStatus {
        up: u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP,
        // RTE_ETH_SPEED_NUM_UNKNOWN (u32::MAX, e.g. virtio-net) reads as 0, unknown.
        speed_mbps: if link.link_speed == u32::MAX {
            0
        } else {
            link.link_speed
        },
        full_duplex: u32::from(link.link_duplex()) == sys::RTE_ETH_LINK_FULL_DUPLEX,
    }
}
