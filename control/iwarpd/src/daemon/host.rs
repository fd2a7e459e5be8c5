//! What the daemon asks of its host: online CPUs and accounts, the stop signals, NUMA
//! placement, the socket files it owns, hugepages.

use iwarp_config::{Config, HugepageMode};
use iwarp_dpdk::MemoryMode;
use tracing::warn;

use super::{fail, Failure};

/// The checks of the configuration against this machine that need no device (what
/// `check-config` runs too): the CPUs of `[cores]` are online (`online`), the accounts
/// of `[control]` exist. Returns the dataplane CPUs.
pub fn host_checks(cfg: &Config, online: &[u32]) -> Result<Vec<u32>, String> {
    let cpus = cfg
        .cores
        .dataplane_cpus(online)
        .map_err(|e| e.to_string())?;
    if cfg.control.enabled {
        let c = &cfg.control;
        iwarp_control::Policy::resolve(
            &iwarp_control::AccountDb::system(),
            &c.allow_users,
            &c.allow_groups,
            &c.admin_users,
        )
        .map_err(|e| format!("config error: {e}"))?;
    }
    Ok(cpus)
}

/// The signals that stop the daemon in order (docs/DAEMON.md): exit status 0, final
/// counters printed, clients and peers told, socket files removed.
pub(super) const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

pub(super) fn signal_name(sig: usize) -> &'static str {
    match sig as i32 {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGHUP => "SIGHUP",
        signal_hook::consts::SIGQUIT => "SIGQUIT",
        _ => "a signal",
    }
}

/// Warns when a dataplane core is on another NUMA node than port `i`'s NIC (`socket`,
/// -1 when the device reports none, as vdevs do): its frames and mbufs then cross the
/// interconnect on every packet.
pub(super) fn numa_check(i: usize, socket: i32, cpus: &[usize]) {
    if socket < 0 {
        return;
    }
    let sys = std::path::Path::new("/sys");
    for &cpu in cpus {
        if let Some(node) = crate::devices::cpu_node(sys, cpu) {
            if node != socket {
                warn!(
                    "port {i}: its NIC is on NUMA node {socket} but dataplane CPU {cpu} is on node {node}: \
                     every frame crosses nodes; pick cores of node {socket} (cores.dataplane, \
                     /sys/devices/system/node/node{socket}/cpulist)"
                );
            }
        }
    }
}

/// The socket files daemon `cfg` creates, each with the key that names it: the stats
/// socket, the verbs socket, and the files of memif server ports with
/// `socket-abstract=no` (an abstract memif socket has no file).
pub(super) fn owned_sockets(cfg: &Config) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(p) = cfg.daemon.stats_socket_path() {
        v.push((p, "daemon.stats_socket".to_string()));
    }
    if cfg.control.enabled {
        v.push((
            cfg.control.socket_path(&cfg.daemon.name),
            "control.socket".to_string(),
        ));
    }
    for (i, p) in cfg.ports.iter().enumerate() {
        let (_, device) = p.device.eal_arg();
        if let Some((socket, false)) = iwarp_dpdk::devargs::memif_server_socket(&device) {
            v.push((socket, format!("port[{i}].device")));
        }
    }
    v
}

pub(super) fn memory_mode(cfg: &Config, cores: usize) -> Result<MemoryMode, Failure> {
    let mb = cfg.eal.no_huge_memory_mb;
    // Pages the mbuf pools need, with room for the EAL's own allocations.
    let mbuf_bytes: u64 = cfg
        .ports
        .iter()
        .map(|p| u64::from(p.mbufs) * cores as u64 * (u64::from(p.frame_len_max()) + 256 + 128))
        .sum();
    let threshold = (mbuf_bytes >> 21) + 64;
    match cfg.eal.hugepages {
        HugepageMode::Off => Ok(MemoryMode::NoHuge { memory_mb: mb }),
        HugepageMode::Auto => {
            let m = MemoryMode::detect(threshold, mb);
            if matches!(m, MemoryMode::NoHuge { .. }) {
                warn!(
                    "fewer than {threshold} free 2 MiB hugepages: running without hugepages (--no-huge, {mb} MB); reserve them with `echo 512 > /proc/sys/vm/nr_hugepages`"
                );
            }
            Ok(m)
        }
        HugepageMode::Required => match MemoryMode::detect(threshold, mb) {
            MemoryMode::NoHuge { .. } => Err(fail(format!(
                "eal.hugepages = \"required\", but fewer than {threshold} free 2 MiB hugepages are reserved: `echo 512 > /proc/sys/vm/nr_hugepages`, or set eal.hugepages = \"auto\""
            ))),
            m => Ok(m),
        },
    }
}

pub(super) fn memory_text(m: &MemoryMode) -> String {
    match m {
        MemoryMode::Hugepages => "hugepages".to_string(),
        MemoryMode::NoHuge { memory_mb } => format!("no hugepages ({memory_mb} MB)"),
    }
}
