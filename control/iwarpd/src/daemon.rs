//! The daemon: EAL, ports, one `Core` per dataplane lcore, and the control thread that
//! serves the stats socket, starts the load generator and runs the shutdown.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use iwarp_config::{Config, HugepageMode, LoadgenArgs, NicInfo, Seeds};
use iwarp_dpdk::{memif, Eal, EalArgs, MemoryMode};
use iwarp_loadgen::{Arena, ClientSpec, ServerConfig};
use iwarp_runtime::control::AppBox;
use iwarp_runtime::{
    control_channel, Capture, Core, CoreConfig, CoreLinks, CoreStats, ForwardMesh, PortSetup,
    Snapshot, SystemClock,
};
use iwarp_shm_mem::ShmMemory;
use iwarp_shm_service::ServiceHandle;
use iwarp_types::RegionId;

use crate::apps::{AppResult, Deferred, Kind, Shared};
use crate::loadgen::ClientRun;
use crate::ports::{open_port, OpenPort};
use crate::stats::StatsServer;
use tracing::{error, info, warn};

/// Arena of the load generator server in each core's memory.
const SERVER_ARENA: RegionId = RegionId(0);
/// Arena of the load generator client in each core's memory.
pub const CLIENT_ARENA: RegionId = RegionId(1);
/// Target buffers of a load generator server per core.
const SERVER_BUFFERS: u32 = 64;
/// Bytes of one core's slice of a heap arena (page aligned, at least one page).
fn slice_bytes(len: u64) -> u64 {
    len.max(1).next_multiple_of(4096)
}

/// Offset of core `core`'s load generator client arena in [`CLIENT_ARENA`].
pub fn client_arena_offset(per_core: &[ClientSpec], core: usize) -> u64 {
    per_core[..core]
        .iter()
        .map(|s| slice_bytes(s.required_arena_bytes()))
        .sum()
}

/// How long a port may take to come up before the load generator gives up.
const LINK_WAIT: StdDuration = StdDuration::from_secs(15);

/// Why the daemon stopped with a failure (its message is printed once, as is).
#[derive(Debug)]
pub struct Failure {
    /// The message.
    pub message: String,
    /// The exit status.
    pub code: u8,
}

fn fail(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: 1,
    }
}

/// Per core, what the control thread keeps.
struct CoreHandle {
    lcore: u32,
    control: iwarp_runtime::ControlHandle<ShmMemory>,
    stats: Arc<CoreStats>,
    result: Arc<Mutex<Option<Result<Snapshot, String>>>>,
}

/// Runs the daemon until a signal (or, with `loadgen`, until the run is over).
pub fn run(cfg: Config, loadgen: Option<LoadgenArgs>) -> Result<(), Failure> {
    // The signal that asks for the orderly shutdown (0: none yet). SIGPIPE is ignored
    // (Rust's runtime does that: a peer that went away is a write error, not a death).
    let signal = Arc::new(AtomicUsize::new(0));
    // The cores stop after the control thread has torn its clients down.
    let core_stop = Arc::new(AtomicBool::new(false));
    let control_stop = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .map_err(|e| fail(format!("cannot install the signal handler: {e}")))?;
    }
    // Everything the command line asks for is checked before DPDK starts.
    let client_spec = loadgen
        .as_ref()
        .map(|a| crate::loadgen::client_spec(a, &cfg))
        .transpose()
        .map_err(|message| Failure { message, code: 2 })?;
    let online = iwarp_config::daemon::online_cpus();
    let cpus = host_checks(&cfg, &online).map_err(|message| Failure { message, code: 2 })?;
    let n = cpus.len();
    // One daemon per name; what a killed predecessor of this name left goes now.
    let lock = crate::lock::acquire(
        std::path::Path::new(crate::lock::LOCK_DIR),
        &cfg.daemon.name,
    )
    .map_err(fail)?;
    tracing::debug!("holding {}", lock.path().display());
    for (path, key) in owned_sockets(&cfg) {
        if crate::lock::remove_stale_socket(std::path::Path::new(&path), &key).map_err(fail)?
            == crate::lock::Stale::Removed
        {
            info!("{key}: removed the stale socket {path} (left by a daemon that did not stop in order)");
        }
    }
    // Bound now, served once the cores run: an address in use stops the start here.
    let metrics_listener = match cfg.daemon.metrics_addr() {
        Some(addr) => Some(crate::metrics::MetricsListener::bind(addr).map_err(fail)?),
        None => None,
    };
    let memory = memory_mode(&cfg, n)?;
    let mut args = EalArgs::new("iwarpd", &cfg.daemon.name, memory);
    args.dataplane_cpus = cpus.iter().map(|&c| c as usize).collect();
    args.main_cpus = if cfg.cores.control.is_empty() {
        online.iter().map(|&c| c as usize).collect()
    } else {
        cfg.cores.control.iter().map(|&c| c as usize).collect()
    };
    for p in &cfg.ports {
        match p.device.eal_arg() {
            ("-a", pci) => args.pci.push(pci),
            (_, vdev) => args.vdevs.push(vdev),
        }
    }
    args.extra = cfg.eal.extra_args.clone();
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
    let mut ports = Vec::with_capacity(cfg.ports.len());
    for i in 0..cfg.ports.len() {
        let p = open_port(&eal, &cfg, i, n).map_err(fail)?;
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
        numa_check(i, info.socket, &args.dataplane_cpus);
        ports.push(p);
    }
    // Link state: read by the control loop below at a bounded rate, published for the
    // stats socket, QueryPort and iwarpctl.
    let links = Arc::new(crate::link::Links::new(ports.len()));
    let mut link_watch = crate::link::LinkWatch::new();
    link_watch.poll(&links, &mut |i| {
        let l = ports[i].port.link();
        (l.up, l.speed_mbps)
    });
    let seeds = Seeds::from_config(&cfg).map_err(|e| fail(format!("seeds: {e}")))?;
    let frame_len = ports
        .iter()
        .map(|p| p.setup.frame_len_max)
        .max()
        .unwrap_or(1514);
    // The capture rings are always there (an operator may start a capture at run time):
    // no buffer longer than the largest frame the ports carry.
    let capture = crate::capture::DaemonCapture::new(
        n,
        cfg.capture.ring_slots as usize,
        (cfg.capture.snaplen as usize).min(frame_len),
        ports.len(),
    );
    let mesh = ForwardMesh::new(n, 1024, frame_len);
    let server_cfg = server_config(&cfg);
    // One region table for every core: the load generator's heap arenas (a slice per
    // core) first, then the verbs clients' arenas.
    let server_slice = slice_bytes(server_cfg.map_or(0, |s| s.required_arena_bytes()));
    let client_total = client_spec.as_ref().map_or(0, |(_, per_core)| {
        client_arena_offset(per_core, per_core.len())
    });
    let heap = [server_slice * n as u64, client_total.max(1)]
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
    let mem = ShmMemory::with_heap_arenas(&heap)
        .map_err(|e| fail(format!("load generator memory: {e}")))?;
    let regions = Arc::clone(mem.table());
    let mut cores = Vec::with_capacity(n);
    for core in 0..n {
        let h = launch_core(
            &eal,
            &cfg,
            core,
            &mut ports,
            seeds,
            &mesh,
            capture.rings(),
            mem.clone(),
            &core_stop,
        )?;
        cores.push(h);
    }
    if cfg.capture.enabled() {
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
    }
    let mut servers: Vec<Shared> = Vec::new();
    if let Some(sc) = &server_cfg {
        for (i, c) in cores.iter_mut().enumerate() {
            let shared: Shared = Arc::new(Mutex::new(AppResult::default()));
            let arena = Arena {
                region: SERVER_ARENA,
                offset: server_slice * i as u64,
                len: sc.required_arena_bytes(),
            };
            let app = Deferred::new(Kind::Server(*sc), arena, Arc::clone(&shared));
            c.control
                .call(
                    0,
                    iwarp_runtime::Op::StartApp(AppBox(Box::new(app))),
                    StdDuration::from_secs(5),
                )
                .map_err(|e| {
                    fail(format!(
                        "core {i}: cannot start the load generator server: {e:?}"
                    ))
                })?;
            servers.push(shared);
        }
        info!("load generator server listening on port {}", sc.port);
    }
    let control_thread = if cfg.control.enabled {
        // One service per (core, port), indexed by `verbs::service_index`.
        let nports = ports.len().max(1);
        let mut slots: Vec<Option<ServiceHandle>> = (0..n * nports).map(|_| None).collect();
        let mut service_ports = vec![0; n * nports];
        for (i, c) in cores.iter_mut().enumerate() {
            for port in 0..nports {
                let index = crate::verbs::service_index(n, i, port);
                let (handle, svc) = crate::verbs::service(&cfg, i, port, index, &ports);
                c.control
                    .call(
                        port,
                        iwarp_runtime::Op::StartApp(AppBox(Box::new(svc))),
                        StdDuration::from_secs(5),
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
            &cfg,
            handles,
            service_ports,
            regions,
            &ports,
            stats,
            Arc::clone(&links),
            capture.source(),
            Arc::clone(&control_stop),
        )
        .map_err(fail)?;
        info!("verbs socket {}", cfg.control.socket_path(&cfg.daemon.name));
        Some(t)
    } else {
        drop(regions);
        None
    };
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
    let loadgen_metrics = Arc::new(crate::metrics_loadgen::LoadgenMetrics::default());
    let metrics_server = match metrics_listener {
        Some(listener) => {
            let sources = crate::metrics::Sources {
                cores: cores.iter().map(|c| Arc::clone(&c.stats)).collect(),
                port_ids: ports.iter().map(|p| p.port.port_id()).collect(),
                links: Arc::clone(&links),
                loadgen: Arc::clone(&loadgen_metrics),
            };
            let m = listener.start(sources).map_err(fail)?;
            info!("metrics at http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    info!(
        "running: {n} dataplane core(s) on CPU {:?}, {}",
        cpus,
        memory_text(&memory)
    );
    let service = crate::notify::Service::ready(
        &format!("running: {n} dataplane core(s)"),
        cores.iter().map(|c| Arc::clone(&c.stats)).collect(),
    );
    let mut client = match (client_spec, &loadgen) {
        (Some((spec, per_core)), Some(a)) => Some(ClientRun::new(
            spec,
            per_core,
            a.json.clone(),
            (a.interval > 0).then(|| StdDuration::from_secs(u64::from(a.interval))),
            Arc::clone(&loadgen_metrics),
        )),
        _ => None,
    };
    let mut capture_watch = CaptureWatch::new();
    let mut outcome = Ok(());
    let mut last_print = StdInstant::now();
    let started = StdInstant::now();
    let rss_start = crate::loadgen::rss_bytes();
    loop {
        let sig = signal.load(Ordering::Relaxed);
        if sig != 0 {
            info!("stopping on {}", signal_name(sig));
            break;
        }
        link_watch.poll(&links, &mut |i| {
            let l = ports[i].port.link();
            (l.up, l.speed_mbps)
        });
        if capture.rings().enabled() {
            capture_watch.poll(&cores);
        }
        if let Some(s) = &stats_server {
            s.serve(&mut |json| render_stats(&cores, &servers, &links, json));
        }
        if let Some(gone) = cores
            .iter()
            .position(|c| c.result.lock().map(|r| r.is_some()).unwrap_or(true))
        {
            let msg = match cores[gone].result.lock().ok().and_then(|r| r.clone()) {
                Some(Err(e)) => e,
                _ => "stopped".to_string(),
            };
            outcome = Err(fail(format!("dataplane core {gone} ended: {msg}")));
            break;
        }
        if let Some(run) = &mut client {
            let links_up = ports.iter().all(|p| p.port.link().up);
            match run.step(
                &mut cores.iter_mut().map(|c| &mut c.control).collect::<Vec<_>>(),
                &ports,
                links_up,
                started,
                LINK_WAIT,
                rss_start,
            ) {
                Ok(true) => {
                    outcome = run.finish();
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if cfg.daemon.stats_interval_ms > 0
            && last_print.elapsed() >= StdDuration::from_millis(cfg.daemon.stats_interval_ms)
        {
            last_print = StdInstant::now();
            let s = Snapshot::sum(
                cores
                    .iter()
                    .map(|c| c.stats.snapshot())
                    .collect::<Vec<_>>()
                    .iter(),
            );
            info!("counters:\n{s}");
        }
        std::thread::sleep(StdDuration::from_millis(5));
    }
    // Orderly shutdown: the control thread tells its clients and tears them down while
    // the cores still run; then the cores see the flag, close their QPs (FIN) within the
    // grace period, and return their final counters.
    service.stopping();
    control_stop.store(true, Ordering::Relaxed);
    if let Some(t) = control_thread {
        if t.join().is_err() {
            error!("the control thread panicked");
        }
    }
    core_stop.store(true, Ordering::Relaxed);
    let mut finals = Vec::with_capacity(n);
    for (i, c) in cores.iter().enumerate() {
        let rc = eal.wait(c.lcore);
        match c.result.lock().ok().and_then(|mut r| r.take()) {
            Some(Ok(s)) => finals.push(s),
            Some(Err(e)) => error!("core {i}: {e}"),
            None => error!("core {i} returned {rc} without a result"),
        }
    }
    let drops: u64 = finals.iter().map(|s| s.core.capture_drops).sum();
    capture_watch.report(drops);
    match capture.stop() {
        Ok(Some(s)) => info!(
            frames = s.frames,
            capture_drops = drops,
            "capture: {} frame(s) written, {drops} not captured (ring full)",
            s.frames
        ),
        Ok(None) => {}
        Err(e) => error!("capture: {e}"),
    }
    let total = Snapshot::sum(finals.iter());
    eprintln!("{total}");
    eprint!("{}", links.render());
    for (i, p) in ports.iter().enumerate() {
        if let Ok(s) = p.port.stats() {
            info!(
                "port {i}: ipackets {} opackets {} ibytes {} obytes {} imissed {} ierrors {} oerrors {} rx_nombuf {}, mbufs in use {}",
                s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors, s.rx_nombuf,
                p.pool.in_use()
            );
        }
    }
    for s in &servers {
        if let Ok(r) = s.lock() {
            if let Some(rep) = &r.server {
                info!("load generator server:\n{rep}");
            }
        }
    }
    drop(stats_server);
    drop(metrics_server);
    drop(cores);
    drop(ports);
    drop(eal);
    remove_eal_runtime_dir(&cfg.daemon.name);
    // memif socket files (socket-abstract=no) the closed ports left; the stats and verbs
    // sockets are gone already (their owners removed them).
    for (path, key) in owned_sockets(&cfg) {
        if let Err(e) = crate::lock::remove_stale_socket(std::path::Path::new(&path), &key) {
            warn!("{e}");
        }
    }
    drop(lock);
    outcome
}

/// What the EAL leaves in its runtime directory (`/var/run/dpdk/<file prefix>`, the
/// prefix being the daemon's name): the telemetry socket. Removed at an orderly exit, the
/// directory too once empty (a killed daemon leaves them; the next start reuses them).
fn remove_eal_runtime_dir(name: &str) {
    let dir = std::path::Path::new("/var/run/dpdk").join(name);
    let _ = std::fs::remove_file(dir.join("dpdk_telemetry.v2"));
    let _ = std::fs::remove_dir(&dir);
}

/// How often the capture drop counters are read while capturing.
const CAPTURE_POLL: StdDuration = StdDuration::from_secs(1);

/// Reads the cores' `capture_drops` at most every [`CAPTURE_POLL`] (the counters the
/// cores publish; nothing on a core) and logs a warning when it grew.
struct CaptureWatch {
    next: StdInstant,
    reported: u64,
}

impl CaptureWatch {
    fn new() -> CaptureWatch {
        CaptureWatch {
            next: StdInstant::now() + CAPTURE_POLL,
            reported: 0,
        }
    }

    fn poll(&mut self, cores: &[CoreHandle]) {
        let now = StdInstant::now();
        if now < self.next {
            return;
        }
        self.next = now + CAPTURE_POLL;
        let drops = cores
            .iter()
            .map(|c| c.stats.snapshot().core.capture_drops)
            .sum();
        self.report(drops);
    }

    /// Logs the drops past those reported (`total`: the sum over the cores).
    fn report(&mut self, total: u64) {
        if total > self.reported {
            let new = total - self.reported;
            self.reported = total;
            warn!(
                capture_drops = total,
                new,
                "capture: {new} frame(s) not captured, the ring was full ({total} in all; capture.ring_slots)"
            );
        }
    }
}

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
pub const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

fn signal_name(sig: usize) -> &'static str {
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
fn numa_check(i: usize, socket: i32, cpus: &[usize]) {
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
fn owned_sockets(cfg: &Config) -> Vec<(String, String)> {
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

fn memory_mode(cfg: &Config, cores: usize) -> Result<MemoryMode, Failure> {
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

fn memory_text(m: &MemoryMode) -> String {
    match m {
        MemoryMode::Hugepages => "hugepages".to_string(),
        MemoryMode::NoHuge { memory_mb } => format!("no hugepages ({memory_mb} MB)"),
    }
}

fn render_stats(
    cores: &[CoreHandle],
    servers: &[Shared],
    links: &crate::link::Links,
    json: bool,
) -> String {
    let per: Vec<Snapshot> = cores.iter().map(|c| c.stats.snapshot()).collect();
    let total = Snapshot::sum(per.iter());
    let reports: Vec<iwarp_loadgen::ServerReport> = servers
        .iter()
        .filter_map(|s| s.lock().ok().and_then(|r| r.server))
        .collect();
    if json {
        stats_json(&total, &per, &reports, links)
    } else {
        let mut s = format!("total ({} cores)\n{total}\n{}", per.len(), links.render());
        for (i, c) in per.iter().enumerate() {
            s.push_str(&format!("core {i}\n{c}\n"));
        }
        for (i, r) in reports.iter().enumerate() {
            s.push_str(&format!("load generator server, core {i}\n{r}\n"));
        }
        s
    }
}

/// `iwarpd stats --json`: `{"total":{..},"cores":[..],"loadgen_server":[..],"links":[..]}`
/// and a newline. The counters' objects are the runtime's own JSON (`Snapshot::to_json`).
fn stats_json(
    total: &Snapshot,
    per: &[Snapshot],
    reports: &[iwarp_loadgen::ServerReport],
    links: &crate::link::Links,
) -> String {
    use serde_json::value::RawValue;

    #[derive(serde::Serialize)]
    struct Stats<'a> {
        total: Box<RawValue>,
        cores: Vec<Box<RawValue>>,
        loadgen_server: &'a [iwarp_loadgen::ServerReport],
        links: Vec<crate::link::LinkJson>,
    }
    let raw = |s: &Snapshot| {
        RawValue::from_string(s.to_json())
            .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"))
    };
    let stats = Stats {
        total: raw(total),
        cores: per.iter().map(raw).collect(),
        loadgen_server: reports,
        links: links.json_items(),
    };
    let mut s = serde_json::to_string(&stats).unwrap_or_default();
    s.push('\n');
    s
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
