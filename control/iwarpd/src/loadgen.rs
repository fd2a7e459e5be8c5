//! `iwarpd loadgen`: the client side of the load generator, run by the control thread:
//! wait for the ports, start one client per dataplane core with its share of the QPs
//! (each opening connections whose return traffic lands on it), collect the reports, print
//! the merged result.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use iwarp_config::{Config, LoadgenArgs, LoadgenOp};
use iwarp_loadgen::{Arena, ClientSpec, Op, Report};
use iwarp_runtime::control::AppBox;
use iwarp_runtime::{ControlHandle, Op as CoreOp};
use iwarp_shm_mem::ShmMemory;
use iwarp_types::Duration;

use crate::apps::{AppResult, Deferred, Kind, Progress, Shared};
use crate::daemon::Failure;
use crate::loadgen_interval::{Interval, IntervalClock};
use crate::metrics_loadgen::{LoadgenMetrics, LoadgenSample};
use crate::ports::OpenPort;
use tracing::info;

/// Builds the whole run's spec and each core's share (`qps` split, disjoint QP indices).
pub fn client_spec(a: &LoadgenArgs, cfg: &Config) -> Result<(ClientSpec, Vec<ClientSpec>), String> {
    a.validate(cfg).map_err(|e| e.to_string())?;
    let op = match a.op {
        LoadgenOp::Write => Op::Write,
        LoadgenOp::Read => Op::Read,
        LoadgenOp::Send => Op::Send,
        LoadgenOp::Connect => Op::Connect,
    };
    let size = u32::try_from(a.size.0).map_err(|_| "--size: too large".to_string())?;
    let spec = ClientSpec {
        peer: *a.peer.ip(),
        port: a.peer.port(),
        op,
        size: if op == Op::Connect { 0 } else { size },
        qps: a.qps,
        depth: a.depth,
        buffers: a.buffers,
        verify: a.verify,
        warmup: Duration::from_secs(u64::from(a.warmup_seconds)),
        duration: Duration::from_secs(u64::from(a.seconds)),
        signal_every: if a.verify { 1 } else { (a.depth / 4).max(1) },
        ..ClientSpec::default()
    };
    let n = cfg.cores.dataplane.len().max(1) as u32;
    let mut per_core = Vec::with_capacity(n as usize);
    let mut base = 0;
    for i in 0..n {
        let qps = a.qps / n + u32::from(i < a.qps % n);
        per_core.push(ClientSpec {
            qps,
            qp_index_base: base,
            ..spec
        });
        base += qps;
    }
    Ok((spec, per_core))
}

/// Resident set size of this process in bytes (0 if unknown).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

enum State {
    WaitLink,
    Running(Vec<Shared>),
}

/// A load generator run in progress.
pub struct ClientRun {
    spec: ClientSpec,
    per_core: Vec<ClientSpec>,
    json: Option<PathBuf>,
    state: State,
    report: Option<Report>,
    rss_peak: u64,
    rss_start: u64,
    /// The interval lines (none when `--interval 0`).
    clock: Option<IntervalClock>,
    /// Where the figures so far go for the metrics endpoint, and when they last went.
    metrics: Arc<LoadgenMetrics>,
    metrics_at: Option<StdInstant>,
}

impl ClientRun {
    /// A run of `spec`, split as `per_core`, writing JSON to `json` if given, printing a
    /// line every `interval` (None: no lines), publishing its figures to `metrics`.
    pub fn new(
        spec: ClientSpec,
        per_core: Vec<ClientSpec>,
        json: Option<PathBuf>,
        interval: Option<StdDuration>,
        metrics: Arc<LoadgenMetrics>,
    ) -> ClientRun {
        let warmup_s = spec.warmup.as_millis() as f64 / 1000.0;
        ClientRun {
            clock: interval.map(|every| IntervalClock::new(every, per_core.len(), warmup_s)),
            spec,
            per_core,
            json,
            state: State::WaitLink,
            report: None,
            rss_peak: 0,
            rss_start: 0,
            metrics,
            metrics_at: None,
        }
    }

    /// One step of the control loop; true when the run is over.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        controls: &mut [&mut ControlHandle<ShmMemory>],
        ports: &[OpenPort],
        links_up: bool,
        started: StdInstant,
        link_wait: StdDuration,
        rss_start: u64,
    ) -> Result<bool, Failure> {
        match &self.state {
            State::WaitLink => {
                if !links_up {
                    if started.elapsed() > link_wait {
                        return Err(Failure {
                            message: format!(
                                "the port link did not come up within {} s (memif: is the server daemon running? it must start first)",
                                link_wait.as_secs()
                            ),
                            code: 1,
                        });
                    }
                    return Ok(false);
                }
                self.rss_start = rss_start;
                let mut shared = Vec::new();
                for (core, c) in controls.iter_mut().enumerate() {
                    let spec = self.per_core[core];
                    if spec.qps == 0 {
                        continue;
                    }
                    let s: Shared = Arc::new(Mutex::new(AppResult::default()));
                    let steering = ports[0].steering.clone();
                    let (peer, peer_port) = (spec.peer.octets(), spec.port);
                    let me = ports[0].local_ip;
                    let steer =
                        Box::new(move |p: u16| steering.owner(peer, me, peer_port, p) == core);
                    let arena = Arena {
                        region: crate::daemon::CLIENT_ARENA,
                        offset: crate::daemon::client_arena_offset(&self.per_core, core),
                        len: spec.required_arena_bytes(),
                    };
                    let app = Deferred::new(Kind::Client(spec, steer), arena, Arc::clone(&s));
                    c.call(
                        0,
                        CoreOp::StartApp(AppBox(Box::new(app))),
                        StdDuration::from_secs(5),
                    )
                    .map_err(|e| Failure {
                        message: format!("core {core}: cannot start the load generator: {e:?}"),
                        code: 1,
                    })?;
                    shared.push(s);
                }
                info!(
                    "load generator: {} {} B x {} QP(s), depth {}{}, {} s (+{} s warm-up) to {}:{}{}",
                    self.spec.op,
                    self.spec.size,
                    self.spec.qps,
                    self.spec.depth,
                    match self.spec.buffers {
                        0 => String::new(),
                        n => format!(" over {n} buffer(s) per QP"),
                    },
                    self.spec.duration.as_millis() / 1000,
                    self.spec.warmup.as_millis() / 1000,
                    self.spec.peer,
                    self.spec.port,
                    if self.spec.verify { ", verified" } else { "" }
                );
                self.state = State::Running(shared);
                Ok(false)
            }
            State::Running(shared) => {
                self.rss_peak = self.rss_peak.max(rss_bytes());
                if let Some(clock) = &mut self.clock {
                    if clock.due() {
                        let snaps: Vec<Option<Progress>> = shared
                            .iter()
                            .map(|s| s.lock().ok().and_then(|r| r.progress.clone()))
                            .collect();
                        if let Some(line) = clock.take(&snaps) {
                            println!("{line}");
                        }
                    }
                }
                if self
                    .metrics_at
                    .is_none_or(|t| t.elapsed() >= crate::metrics_loadgen::PUBLISH_INTERVAL)
                {
                    self.metrics_at = Some(StdInstant::now());
                    self.metrics.publish(progress_sample(shared));
                }
                let mut merged: Option<Report> = None;
                for s in shared {
                    let r = s.lock().map_err(|_| Failure {
                        message: "load generator state poisoned".into(),
                        code: 1,
                    })?;
                    if let Some(e) = &r.error {
                        return Err(Failure {
                            message: format!("load generator: {e}"),
                            code: 1,
                        });
                    }
                    match (&r.report, &mut merged) {
                        (None, _) => return Ok(false),
                        (Some(rep), None) => merged = Some(rep.clone()),
                        (Some(rep), Some(m)) => m.merge(rep),
                    }
                }
                self.report = merged;
                Ok(true)
            }
        }
    }

    /// Prints the merged report (and writes the JSON); a failure if any WR, connection or
    /// verification failed.
    pub fn finish(&mut self) -> Result<(), Failure> {
        let Some(r) = &self.report else {
            return Err(Failure {
                message: "load generator: no report".into(),
                code: 1,
            });
        };
        println!("{r}");
        if self.spec.op == Op::Connect && self.spec.qps > 0 {
            let grown = self.rss_peak.saturating_sub(self.rss_start);
            println!(
                "memory: peak RSS grew by {} KiB while {} QPs were connected: {} bytes per QP (engine, TCP, MPA and verbs state of this daemon)",
                grown / 1024,
                self.spec.qps,
                grown / u64::from(self.spec.qps)
            );
        }
        if let Some(path) = &self.json {
            let intervals: &[Interval] = self.clock.as_ref().map_or(&[], |c| c.intervals());
            let json = crate::loadgen_interval::report_json(r, intervals);
            std::fs::write(path, json).map_err(|e| Failure {
                message: format!("--json {}: {e}", path.display()),
                code: 1,
            })?;
        }
        let errors = r.errors.total();
        if errors > 0 {
            return Err(Failure {
                message: format!("load generator: {errors} error(s) (see the report)"),
                code: 3,
            });
        }
        Ok(())
    }
}

/// The cores' progress so far, merged (cores that published none yet are left out).
fn progress_sample(shared: &[Shared]) -> LoadgenSample {
    let mut sample = LoadgenSample::default();
    for s in shared {
        let Ok(r) = s.lock() else { continue };
        if let Some(p) = &r.progress {
            sample.messages += p.report.messages;
            sample.bytes += p.report.bytes;
            sample.latency.merge(&p.report.latency);
        }
    }
    sample
}
