//! Starting a daemon: the checks of the configuration against this host (before DPDK
//! starts), then EAL, ports, cores, the apps on them, the control thread and the
//! observers (telemetry, the stats socket, metrics, the service manager).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

use iwarp_config::{Config, LoadgenArgs, NicInfo, Seeds};
use iwarp_dpdk::{memif, Eal, EalArgs, MemoryMode};
use iwarp_loadgen::{Arena, ClientSpec, ServerConfig};
use iwarp_runtime::control::AppBox;
use iwarp_runtime::{
    control_channel, Capture, Core, CoreConfig, CoreLinks, CoreStats, ForwardMesh, PortSetup,
    Snapshot, SystemClock,
};
use iwarp_shm_mem::{RegionTable, ShmMemory};
use iwarp_shm_service::ServiceHandle;
use tracing::{info, warn};

use super::host::{host_checks, memory_mode, memory_text, numa_check, owned_sockets, STOP_SIGNALS};
use super::{
    client_arena_offset, fail, slice_bytes, watch::CaptureWatch, CoreHandle, Daemon, Failure,
    SERVER_ARENA, SERVER_BUFFERS,
};
use crate::apps::{AppResult, Deferred, Kind, Shared};
use crate::capture::DaemonCapture;
use crate::link::{LinkWatch, Links};
use crate::loadgen::ClientRun;
use crate::lock::InstanceLock;
use crate::metrics::{MetricsListener, MetricsServer};
use crate::ports::{open_port, OpenPort};
use crate::stats::StatsServer;

/// How long a core may take to answer the start of an app.
const START_APP_TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// What the configuration asks of this host, checked before DPDK starts: the signal
/// handlers, the load generator's arguments, the CPUs, the instance lock (and the stale
/// sockets of a killed predecessor), the metrics address.
pub(super) struct Checked {
    signal: Arc<AtomicUsize>,
    client_spec: Option<(ClientSpec, Vec<ClientSpec>)>,
    online: Vec<u32>,
    cpus: Vec<u32>,
    lock: InstanceLock,
    metrics_listener: Option<MetricsListener>,
}

impl Checked {
    pub(super) fn new(cfg: &Config, loadgen: Option<&LoadgenArgs>) -> Result<Checked, Failure> {
        // SIGPIPE is ignored (Rust's runtime does that: a peer that went away is a write
        // error, not a death).
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in STOP_SIGNALS {
            signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
                .map_err(|e| fail(format!("cannot install the signal handler: {e}")))?;
        }
        let client_spec = loadgen
            .map(|a| crate::loadgen::client_spec(a, cfg))
            .transpose()
            .map_err(|message| Failure { message, code: 2 })?;
        let online = iwarp_config::daemon::online_cpus();
        let cpus = host_checks(cfg, &online).map_err(|message| Failure { message, code: 2 })?;
        // One daemon per name; what a killed predecessor of this name left goes now.
        let lock = crate::lock::acquire(Path::new(crate::lock::LOCK_DIR), &cfg.daemon.name)
            .map_err(fail)?;
        tracing::debug!("holding {}", lock.path().display());
        for (path, key) in owned_sockets(cfg) {
            if crate::lock::remove_stale_socket(Path::new(&path), &key).map_err(fail)?
                == crate::lock::Stale::Removed
            {
                info!("{key}: removed the stale socket {path} (left by a daemon that did not stop in order)");
            }
        }
        // Bound now, served once the cores run: an address in use stops the start here.
        let metrics_listener = match cfg.daemon.metrics_addr() {
            Some(addr) => Some(MetricsListener::bind(addr).map_err(fail)?),
            None => None,
        };
        Ok(Checked {
            signal,
            client_spec,
            online,
            cpus,
            lock,
            metrics_listener,
        })
    }
}

impl Daemon {
    /// Starts everything, in order: EAL, ports, link state, cores (with their memory),
    /// the capture file, the load generator's servers, the verbs services and the control
    /// thread, the observers.
    pub(super) fn start(
        cfg: Config,
        loadgen: Option<LoadgenArgs>,
        checked: Checked,
    ) -> Result<Daemon, Failure> {
        let Checked {
            signal,
            client_spec,
            online,
            cpus,
            lock,
            metrics_listener,
        } = checked;
        let n = cpus.len();
        let memory = memory_mode(&cfg, n)?;
        let (eal, dataplane_cpus) = init_eal(&cfg, &cpus, &online, memory)?;
        let mut ports = open_ports(&eal, &cfg, n, &dataplane_cpus)?;
        // Link state: read by the control loop at a bounded rate, published for the stats
        // socket, QueryPort and iwarpctl.
        let links = Arc::new(Links::new(ports.len()));
        let mut link_watch = LinkWatch::new();
        link_watch.poll(&links, &mut |i| {
            let l = ports[i].port.link();
            (l.up, l.speed_mbps)
        });
        let frame_len = ports
            .iter()
            .map(|p| p.setup.frame_len_max)
            .max()
            .unwrap_or(1514);
        // The capture rings are always there (an operator may start a capture at run
        // time): no buffer longer than the largest frame the ports carry.
        let capture = DaemonCapture::new(
            n,
            cfg.capture.ring_slots as usize,
            (cfg.capture.snaplen as usize).min(frame_len),
            ports.len(),
        );
        let server_cfg = server_config(&cfg);
        let server_slice = slice_bytes(server_cfg.map_or(0, |s| s.required_arena_bytes()));
        let client_total = client_spec.as_ref().map_or(0, |(_, per_core)| {
            client_arena_offset(per_core, per_core.len())
        });
        // One region table for every core: the load generator's heap arenas (a slice per
        // core) first, then the verbs clients' arenas.
        let heap = [server_slice * n as u64, client_total.max(1)]
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
        let mem = ShmMemory::with_heap_arenas(&heap)
            .map_err(|e| fail(format!("load generator memory: {e}")))?;
        let regions = Arc::clone(mem.table());
        let core_stop = Arc::new(AtomicBool::new(false));
        let seeds = Seeds::from_config(&cfg).map_err(|e| fail(format!("seeds: {e}")))?;
        let mesh = ForwardMesh::new(n, 1024, frame_len);
        let mut cores = Vec::with_capacity(n);
        for core in 0..n {
            let rings = capture.rings();
            let h = launch_core(
                &eal,
                &cfg,
                core,
                &mut ports,
                seeds,
                &mesh,
                rings,
                mem.clone(),
                &core_stop,
            )?;
            cores.push(h);
        }
        start_capture_file(&cfg, &capture)?;
        let servers = match &server_cfg {
            Some(sc) => start_loadgen_servers(sc, server_slice, &mut cores)?,
            None => Vec::new(),
        };
        let control_stop = Arc::new(AtomicBool::new(false));
        let control_thread = if cfg.control.enabled {
            let sources = ControlSources {
                regions,
                links: Arc::clone(&links),
                capture: capture.source(),
                stop: Arc::clone(&control_stop),
            };
            Some(start_verbs(&cfg, &mut cores, &ports, sources)?)
        } else {
            drop(regions);
            None
        };
        let loadgen_metrics = Arc::new(crate::metrics_loadgen::LoadgenMetrics::default());
        let (stats_server, metrics_server) = start_observers(
            &cfg,
            &cores,
            &ports,
            &links,
            metrics_listener,
            &loadgen_metrics,
        )?;
        info!(
            "running: {n} dataplane core(s) on CPU {:?}, {}",
            cpus,
            memory_text(&memory)
        );
        let service = crate::notify::Service::ready(
            &format!("running: {n} dataplane core(s)"),
            cores.iter().map(|c| Arc::clone(&c.stats)).collect(),
        );
        let client = match (client_spec, &loadgen) {
            (Some((spec, per_core)), Some(a)) => Some(ClientRun::new(
                spec,
                per_core,
                a.json.clone(),
                (a.interval > 0).then(|| StdDuration::from_secs(u64::from(a.interval))),
                loadgen_metrics,
            )),
            _ => None,
        };
        Ok(Daemon {
            cfg,
            signal,
            core_stop,
            control_stop,
            control_thread,
            links,
            link_watch,
            capture,
            capture_watch: CaptureWatch::new(),
            servers,
            client,
            stats_server,
            metrics_server,
            service,
            cores,
            ports,
            eal,
            lock,
        })
    }
}

/// The EAL, on the dataplane CPUs (`cpus`) and the control CPUs. Returns it and the
/// dataplane CPUs as the EAL numbers them.
fn init_eal(
    cfg: &Config,
    cpus: &[u32],
    online: &[u32],
    memory: MemoryMode,
) -> Result<(Eal, Vec<usize>), Failure> {
    let mut args = EalArgs::new("iwarpd", &cfg.daemon.name, memory);
    args.dataplane_cpus = cpus.iter().map(|&c| c as usize).collect();
    args.main_cpus = cfg
        .cores
        .control_cpus(cpus, online)
        .into_iter()
        .map(|c| c as usize)
        .collect();
    for p in &cfg.ports {
        match p.device.eal_arg() {
            ("-a", pci) => args.pci.push(pci),
            (_, vdev) => args.vdevs.push(vdev),
        }
    }
    args.extra = cfg.eal_extra_args();
    args.telemetry = cfg.eal.telemetry;
    if !tracing::enabled!(tracing::Level::DEBUG) {
        args.log_levels = vec!["*:warning".into()];
    }
    let argv = args.build();
    tracing::debug!("EAL: {}", argv.join(" "));
    let eal = Eal::init(&argv).map_err(|e| fail(format!("DPDK EAL: {e}")))?;
    if cfg
        .ports
        .iter()
        .any(|p| p.device.dpdk_name().starts_with("net_memif"))
        && !memif::guard_active()
    {
        warn!("the memif peer-loss guard is not active: a memif peer that exits may crash this daemon");
    }
    Ok((eal, args.dataplane_cpus))
}

/// Opens every port of `[[port]]` with a queue pair per core, and logs what it offers.
fn open_ports(
    eal: &Eal,
    cfg: &Config,
    cores: usize,
    dataplane_cpus: &[usize],
) -> Result<Vec<OpenPort>, Failure> {
    let mut ports = Vec::with_capacity(cfg.ports.len());
    for i in 0..cfg.ports.len() {
        let p = open_port(eal, cfg, i, cores).map_err(fail)?;
        let info = p.port.info();
        info!(
            "port {i}: {} driver {} mac {} frames up to {} B, checksum offload tx {} rx {}{}, {} queue pair(s) of rx {} tx {}{}",
            cfg.ports[i].device.dpdk_name(),
            info.driver,
            iwarp_config::MacAddr(p.port.mac()),
            p.setup.frame_len_max,
            p.setup.tx_checksum_offload,
            p.setup.rx_checksum_offload,
            ipv4_checksum_note(&p.setup),
            p.setup.queues,
            info.max_rx_queues,
            info.max_tx_queues,
            if p.setup.rss { ", RSS" } else { "" }
        );
        info!(
            "port {i}: offloads rx [{}] tx [{}]; RSS capability: {}",
            iwarp_dpdk::portinfo::rx_offload_names(info.rx_offload_capa).join(" "),
            iwarp_dpdk::portinfo::tx_offload_names(info.tx_offload_capa).join(" "),
            iwarp_dpdk::portinfo::rss_text(info.rss_offloads, info.reta_size)
        );
        numa_check(i, info.socket, dataplane_cpus);
        ports.push(p);
    }
    Ok(ports)
}

/// `[capture]` with a path: the capture starts with the daemon.
fn start_capture_file(cfg: &Config, capture: &DaemonCapture) -> Result<(), Failure> {
    if !cfg.capture.enabled() {
        return Ok(());
    }
    let f = std::fs::File::create(&cfg.capture.path).map_err(|e| {
        fail(format!(
            "capture.path: cannot create {}: {e}",
            cfg.capture.path
        ))
    })?;
    let ports: Vec<u16> = cfg
        .capture
        .ports
        .iter()
        .map(|&p| u16::try_from(p).unwrap_or(u16::MAX))
        .collect();
    capture
        .start(
            std::io::BufWriter::new(f),
            &ports,
            Some(cfg.capture.snaplen),
        )
        .map_err(|e| fail(format!("capture.path: {e}")))?;
    Ok(())
}

/// A load generator server on every core (port 0), each in its slice of the server
/// arena. Returns where each reports.
fn start_loadgen_servers(
    sc: &ServerConfig,
    slice: u64,
    cores: &mut [CoreHandle],
) -> Result<Vec<Shared>, Failure> {
    let mut servers = Vec::with_capacity(cores.len());
    for (i, c) in cores.iter_mut().enumerate() {
        let shared: Shared = Arc::new(Mutex::new(AppResult::default()));
        let arena = Arena {
            region: SERVER_ARENA,
            offset: slice * i as u64,
            len: sc.required_arena_bytes(),
        };
        let app = Deferred::new(Kind::Server(*sc), arena, Arc::clone(&shared));
        c.control
            .call(
                0,
                iwarp_runtime::Op::StartApp(AppBox(Box::new(app))),
                START_APP_TIMEOUT,
            )
            .map_err(|e| {
                fail(format!(
                    "core {i}: cannot start the load generator server: {e:?}"
                ))
            })?;
        servers.push(shared);
    }
    info!("load generator server listening on port {}", sc.port);
    Ok(servers)
}

/// What the control thread shares with the rest of the daemon.
struct ControlSources {
    regions: Arc<RegionTable>,
    links: Arc<Links>,
    capture: iwarp_control::CaptureSource,
    stop: Arc<AtomicBool>,
}

/// A verbs service on every (core, port), then the control thread that serves the
/// verbs socket.
fn start_verbs(
    cfg: &Config,
    cores: &mut [CoreHandle],
    ports: &[OpenPort],
    sources: ControlSources,
) -> Result<JoinHandle<()>, Failure> {
    let n = cores.len();
    // One service per (core, port), indexed by `verbs::service_index`.
    let nports = ports.len().max(1);
    let mut slots: Vec<Option<ServiceHandle>> = (0..n * nports).map(|_| None).collect();
    let mut service_ports = vec![0; n * nports];
    for (i, c) in cores.iter_mut().enumerate() {
        for port in 0..nports {
            let index = crate::verbs::service_index(n, i, port);
            let (handle, svc) = crate::verbs::service(cfg, i, port, index, ports);
            c.control
                .call(
                    port,
                    iwarp_runtime::Op::StartApp(AppBox(Box::new(svc))),
                    START_APP_TIMEOUT,
                )
                .map_err(|e| {
                    fail(format!(
                        "core {i}: cannot start the verbs service of port {port}: {e:?}"
                    ))
                })?;
            slots[index] = Some(handle);
            service_ports[index] = port;
        }
    }
    let handles: Vec<ServiceHandle> = slots.into_iter().flatten().collect();
    let stats = cores.iter().map(|c| Arc::clone(&c.stats)).collect();
    let t = crate::verbs::start(
        cfg,
        handles,
        service_ports,
        sources.regions,
        ports,
        stats,
        sources.links,
        sources.capture,
        sources.stop,
    )
    .map_err(fail)?;
    info!("verbs socket {}", cfg.control.socket_path(&cfg.daemon.name));
    Ok(t)
}

/// DPDK telemetry, the stats socket and the metrics endpoint, as configured.
fn start_observers(
    cfg: &Config,
    cores: &[CoreHandle],
    ports: &[OpenPort],
    links: &Arc<Links>,
    metrics_listener: Option<MetricsListener>,
    loadgen: &Arc<crate::metrics_loadgen::LoadgenMetrics>,
) -> Result<(Option<StatsServer>, Option<MetricsServer>), Failure> {
    if cfg.eal.telemetry {
        crate::telemetry::register(
            cores.iter().map(|c| Arc::clone(&c.stats)).collect(),
            ports.iter().map(|p| p.port.port_id()).collect(),
        )
        .map_err(fail)?;
    }
    let stats_server = match cfg.daemon.stats_socket_path() {
        Some(p) => Some(StatsServer::bind(&PathBuf::from(p)).map_err(fail)?),
        None => None,
    };
    let metrics_server = match metrics_listener {
        Some(listener) => {
            let sources = crate::metrics::Sources {
                cores: cores.iter().map(|c| Arc::clone(&c.stats)).collect(),
                port_ids: ports.iter().map(|p| p.port.port_id()).collect(),
                links: Arc::clone(links),
                loadgen: Arc::clone(loadgen),
            };
            let m = listener.start(sources).map_err(fail)?;
            info!("metrics at http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    Ok((stats_server, metrics_server))
}

#[allow(clippy::too_many_arguments)]
fn launch_core(
    eal: &Eal,
    cfg: &Config,
    core: usize,
    ports: &mut [OpenPort],
    seeds: Seeds,
    mesh: &ForwardMesh,
    capture: &Capture,
    mem: ShmMemory,
    stop: &Arc<AtomicBool>,
) -> Result<CoreHandle, Failure> {
    let mut setups = Vec::with_capacity(ports.len());
    let mut port_ids = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter_mut().enumerate() {
        let q = p.queues[core]
            .take()
            .ok_or_else(|| fail(format!("port {i}: queue {core} missing")))?;
        let nic = NicInfo {
            mac: p.port.mac(),
            tx_checksum_offload: p.setup.tx_checksum_offload,
            rx_checksum_offload: p.setup.rx_checksum_offload,
        };
        let engine = cfg
            .engine_config(i, core, seeds, &nic)
            .map_err(|e| fail(e.to_string()))?;
        let port_id = p.port.port_id();
        port_ids.push(port_id);
        setups.push((port_id, engine, q, p.steering.clone()));
    }
    let stats = Arc::new(CoreStats::new(core, &port_ids));
    let (control, core_control) = control_channel::<ShmMemory>(core, 256, 8192);
    let forward = mesh.ends(core);
    let capture_end = capture.core_end(core);
    let burst = cfg
        .ports
        .iter()
        .map(|p| usize::from(p.burst))
        .max()
        .unwrap_or(64);
    let core_cfg = CoreConfig {
        index: core,
        rx_burst: burst.clamp(1, iwarp_dpdk::queue::RX_BURST_MAX),
        default_grace_ms: cfg.daemon.shutdown_grace_ms,
        ..CoreConfig::default()
    };
    let result: Arc<Mutex<Option<Result<Snapshot, String>>>> = Arc::new(Mutex::new(None));
    let (result2, stats2, stop2) = (Arc::clone(&result), Arc::clone(&stats), Arc::clone(stop));
    let lcore = EalArgs::dataplane_lcore(core);
    eal.launch(lcore, move || {
        let ports: Vec<PortSetup> = setups
            .into_iter()
            .map(|(port_id, engine, q, steering)| PortSetup {
                port_id,
                engine,
                io: Box::new(q),
                steering,
            })
            .collect();
        let links = CoreLinks {
            control: core_control,
            forward,
            capture: capture_end,
            stats: Some(stats2),
        };
        let r = match Core::new(core_cfg, mem, ports, links) {
            Ok(mut c) => Ok(c.run(&SystemClock::new(), &stop2)),
            Err(e) => Err(format!("cannot build the core: {e}")),
        };
        let rc = i32::from(r.is_err());
        if let Ok(mut slot) = result2.lock() {
            *slot = Some(r);
        }
        rc
    })
    .map_err(|e| fail(format!("cannot launch core {core}: {e}")))?;
    Ok(CoreHandle {
        lcore,
        control,
        stats,
        result,
    })
}

fn server_config(cfg: &Config) -> Option<ServerConfig> {
    let l = &cfg.loadgen;
    (l.listen_port != 0).then(|| ServerConfig {
        port: l.listen_port,
        backlog: cfg.limits.backlog_max as usize,
        max_conns: cfg.limits.max_qps,
        buffers: SERVER_BUFFERS,
        buffer_bytes: u64::from(l.buffer_bytes) + 4096,
        max_depth: l.recv_depth,
    })
}

/// Who does the IPv4 header checksum when the NIC does the TCP checksums (virtio-net
/// offers TCP checksums only: the port queue sums the 20-byte header itself).
fn ipv4_checksum_note(s: &iwarp_dpdk::PortSetup) -> String {
    if !s.tx_checksum_offload && !s.rx_checksum_offload {
        return String::new();
    }
    let who = |offload: bool, by_nic: bool| match (offload, by_nic) {
        (false, _) => "-",
        (true, true) => "NIC",
        (true, false) => "software",
    };
    format!(
        " (IPv4 header: tx {}, rx {})",
        who(s.tx_checksum_offload, s.tx_ipv4_checksum_offload),
        who(s.rx_checksum_offload, s.rx_ipv4_checksum_offload)
    )
}
