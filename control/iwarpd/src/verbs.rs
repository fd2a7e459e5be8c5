//! The verbs plane of the daemon (docs/APPS.md): one `ShmService` app per dataplane core
//! and the control server (`iwarp-control`) on its own thread, serving the verbs socket.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use iwarp_config::{Config, QpPlacement};
use iwarp_control::{ControlConfig, ControlServer};
use iwarp_dpdk::portinfo::{rss_text, rx_offload_names, tx_offload_names};
use iwarp_runtime::{CoreStats, Placement, PlacementPolicy};
use iwarp_shm_mem::RegionTable;
use iwarp_shm_service::{
    service_channel_with, PortFilter, ServiceConfig, ServiceHandle, ShmService,
};
use iwarp_shm_socket::{DeviceAttr, PortAttr};

use crate::ports::OpenPort;

/// Requests, replies and notices queued between the control thread and one core.
const SERVICE_QUEUE: usize = 1024;

/// The control server's configuration from `[control]`.
pub fn control_config(cfg: &Config) -> ControlConfig {
    let c = &cfg.control;
    ControlConfig {
        socket: c.socket_path(&cfg.daemon.name).into(),
        allow_users: c.allow_users.clone(),
        allow_groups: c.allow_groups.clone(),
        admin_users: c.admin_users.clone(),
        max_clients: c.max_clients as usize,
        hello_timeout: std::time::Duration::from_millis(c.hello_timeout_ms),
        max_conns_per_uid: c.max_conns_per_uid as usize,
        max_pending: c.max_pending as usize,
        max_arena_bytes: c.max_arena_mb << 20,
        max_objects: c.max_objects,
        max_qps: c.max_qps,
        p2p: cfg.mpa.p2p,
        name: cfg.daemon.name.clone(),
        shutdown_grace: std::time::Duration::from_millis(cfg.daemon.shutdown_grace_ms),
        ..ControlConfig::default()
    }
}

/// Index of the service of `core` driving port `port` (its doorbell block and CQ
/// sub-ring in every client's ring area): the services of port 0 are `0..cores`, those
/// of port 1 follow, ...
pub fn service_index(cores: usize, core: usize, port: usize) -> usize {
    port * cores + core
}

/// The service of core `core` on port `port` (index `service`), whose active opens take
/// local ports steered back to the core.
pub fn service(
    cfg: &Config,
    core: usize,
    port: usize,
    service: usize,
    ports: &[OpenPort],
) -> (ServiceHandle, ShmService) {
    let port_filter: Option<PortFilter> = ports.get(port).map(|p| {
        let steering = p.steering.clone();
        let me = p.local_ip;
        let f: PortFilter = Arc::new(move |ip: core::net::Ipv4Addr, rport: u16, lport: u16| {
            steering.owner(ip.octets(), me, rport, lport) == core
        });
        f
    });
    let sc = ServiceConfig {
        max_clients: cfg.control.max_clients as usize,
        port_filter,
        ..ServiceConfig::default()
    };
    service_channel_with(service, SERVICE_QUEUE, sc)
}

fn device(cfg: &Config, cores: usize) -> DeviceAttr {
    let l = &cfg.limits;
    let c = &cfg.control;
    DeviceAttr {
        vendor: "iwarpd software iWARP".into(),
        daemon: cfg.daemon.name.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        ports: cfg.ports.len() as u32,
        cores: cores as u32,
        max_qp: l.max_qps.min(c.max_objects).min(c.max_qps),
        max_qp_wr: l.max_sq_wr.min(l.max_rq_wr),
        max_sge: l.max_sge,
        max_cq: l.max_cqs.min(c.max_objects),
        max_cqe: l.max_cqe,
        max_mr: l.max_mrs.min(c.max_objects),
        max_mr_size: c.max_arena_mb << 20,
        max_pd: l.max_pds.min(c.max_objects),
        max_srq: l.max_srqs.min(c.max_objects),
        max_srq_wr: l.max_srq_wr,
        max_ird: l.max_ird,
        max_ord: l.max_ord,
        max_arena_bytes: c.max_arena_mb << 20,
        max_private_data: cfg.mpa.private_data_max,
        memory_windows: true,
        srq: true,
    }
}

fn port_attrs(cfg: &Config, ports: &[OpenPort]) -> Vec<PortAttr> {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let link = p.port.link();
            let info = p.port.info();
            PortAttr {
                index: i as u32,
                ip: p.local_ip,
                prefix_len: cfg.ports[i].prefix_len,
                mac: p.port.mac(),
                mtu: cfg.ports[i].mtu,
                device: cfg.ports[i].device.dpdk_name().to_string(),
                link_up: link.up,
                speed_mbps: link.speed_mbps,
                link_ups: 0,
                link_downs: 0,
                driver: info.driver.clone(),
                queues: p.setup.queues,
                max_rx_queues: info.max_rx_queues,
                max_tx_queues: info.max_tx_queues,
                rx_offloads: rx_offload_names(info.rx_offload_capa).join(" "),
                tx_offloads: tx_offload_names(info.tx_offload_capa).join(" "),
                rx_checksum: p.setup.rx_checksum_offload,
                tx_checksum: p.setup.tx_checksum_offload,
                rss_capa: rss_text(info.rss_offloads, info.reta_size),
                rss: p.setup.rss,
            }
        })
        .collect()
}

/// The control server, bound to its socket, running on its own thread until `stop`.
#[allow(clippy::too_many_arguments)]
pub fn start(
    cfg: &Config,
    handles: Vec<ServiceHandle>,
    service_ports: Vec<usize>,
    regions: Arc<RegionTable>,
    ports: &[OpenPort],
    stats: Vec<Arc<CoreStats>>,
    links: Arc<crate::link::Links>,
    capture: iwarp_control::CaptureSource,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, String> {
    let n = handles.len();
    let policy = match cfg.cores.qp_placement {
        QpPlacement::LeastLoaded => PlacementPolicy::LeastLoaded,
        QpPlacement::RoundRobin => PlacementPolicy::RoundRobin,
        QpPlacement::Hash => PlacementPolicy::Hash,
    };
    let counter_stats = stats.clone();
    let mut server = ControlServer::new(
        control_config(cfg),
        handles,
        regions,
        device(cfg, n),
        port_attrs(cfg, ports),
        Some(Placement::new(policy, stats)),
    )?;
    server.set_counters(Box::new(move || dataplane_counters(&counter_stats)));
    server.set_service_ports(service_ports)?;
    server.set_links(Box::new(move |i| {
        links.get(i).map(|v| (v.up, v.speed_mbps, v.ups, v.downs))
    }));
    server.set_capture(capture);
    server.bind()?;
    std::thread::Builder::new()
        .name("iwarpd-control".into())
        .spawn(move || {
            let _root = crate::log::root().entered();
            server.run(&stop)
        })
        .map_err(|e| format!("cannot start the control thread: {e}"))
}

/// The dataplane's counters for `Admin(Counters)` (`iwarpctl counters`, and
/// `Context::counters` of the client library): each core's loop counters and its ports'
/// counters summed (TCP, MPA, drops by reason), then the sum over cores (`core: None`).
/// The same snapshots `iwarpd stats` and the metrics endpoint read.
pub(crate) fn dataplane_counters(stats: &[Arc<CoreStats>]) -> Vec<iwarp_shm_socket::CounterSet> {
    let snaps: Vec<_> = stats.iter().map(|c| c.snapshot()).collect();
    let set =
        |core: Option<u32>, s: &iwarp_runtime::counters::Snapshot| iwarp_shm_socket::CounterSet {
            core,
            values: s.named_values(),
        };
    let mut out: Vec<_> = snaps
        .iter()
        .enumerate()
        .map(|(i, s)| set(Some(i as u32), s))
        .collect();
    out.push(set(None, &iwarp_runtime::counters::Snapshot::sum(&snaps)));
    out
}
