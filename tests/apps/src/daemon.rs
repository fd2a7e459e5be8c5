//! Two `iwarpd` joined by memif, as child processes, killed when dropped.
//!
//! Daemon A is the memif server at 198.18.0.1 on CPU 1, daemon B the memif client at
//! 198.18.0.2 on CPU 0 (one dataplane core each: the CI machine has two). Names are unique
//! per test and process, so memif and verbs sockets never collide.
//!
//! A daemon killed with SIGKILL (by a test, or when its [`Daemon`] is dropped) cannot
//! remove its socket files: the drop removes them (the verbs socket, the stats socket),
//! and the daemon's log unless the test failed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iwarp_shm_socket::{default_socket_path, Addr, ObjectTotals};

use crate::admin::{is_zero, RawClient};
use crate::system::{workspace_bin, workspace_root};

/// How long a daemon may take to come up (EAL init with or without hugepages).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// One running daemon.
pub struct Daemon {
    /// Its name (`--name`).
    pub name: String,
    /// Its verbs socket.
    pub socket: PathBuf,
    /// Its port's address.
    pub ip: [u8; 4],
    child: Option<Child>,
    log: PathBuf,
    spawn_args: (String, String, String),
    /// `--set` overrides beyond the harness's own.
    sets: Vec<String>,
    /// The files are another `Daemon`'s now (restart): leave them on drop.
    files_handed_over: bool,
}

impl Daemon {
    fn spawn(
        name: &str,
        config: &str,
        cpu: &str,
        device: &str,
        ip: [u8; 4],
        sets: &[String],
    ) -> Daemon {
        let bin = workspace_bin("iwarpd", "iwarpd");
        let log = std::env::temp_dir().join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log).expect("daemon log file");
        let err_file = log_file.try_clone().expect("clone log file");
        let socket = default_socket_path(name);
        let _ = std::fs::remove_file(&socket);
        let ip_arg = format!("{}.{}.{}.{}/24", ip[0], ip[1], ip[2], ip[3]);
        let child = Command::new(bin)
            .current_dir(workspace_root())
            .args(["--config", config, "--name", name, "--core", cpu])
            .args(["--device", device, "--ip", &ip_arg, "--log-level", "warn"])
            .args([
                "--set",
                "loadgen.listen_port=0",
                "--set",
                "tcp.delayed_ack_us=0",
            ])
            .args(sets.iter().flat_map(|s| ["--set", s.as_str()]))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .expect("spawn iwarpd");
        Daemon {
            name: name.into(),
            socket,
            ip,
            child: Some(child),
            log,
            spawn_args: (config.into(), cpu.into(), device.into()),
            sets: sets.to_vec(),
            files_handed_over: false,
        }
    }

    /// The files a daemon of this name leaves when it is killed: its verbs socket, its
    /// stats socket (`/run/iwarpd/<name>.sock`) and its name lock (`<name>.lock`). The
    /// memif socket of the examples is abstract (no file).
    fn socket_files(&self) -> [PathBuf; 3] {
        let dir = Path::new(iwarp_shm_socket::DEFAULT_SOCKET_DIR);
        [
            self.socket.clone(),
            dir.join(format!("{}.sock", self.name)),
            dir.join(format!("{}.lock", self.name)),
        ]
    }

    /// SIGKILL (no teardown, no goodbye to clients or peers); waits for the process.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the daemon again under the same name, socket, port and CPU (after
    /// [`Daemon::stop`] or [`Daemon::kill`]) and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let (config, cpu, device) = self.spawn_args.clone();
        let mut d = Daemon::spawn(&self.name, &config, &cpu, &device, self.ip, &self.sets);
        d.wait_ready();
        self.child = d.child.take();
        d.files_handed_over = true;
    }

    /// The daemon's output so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the verbs socket answers a `Hello` and an admin `Status`.
    fn wait_ready(&mut self) {
        let end = Instant::now() + START_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < end {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(st)) = child.try_wait() {
                    panic!(
                        "daemon {} exited early ({st}):\n{}",
                        self.name,
                        self.log_text()
                    );
                }
            }
            if self.socket.exists() {
                match RawClient::connect(&self.socket, "apps-tests-probe")
                    .and_then(|mut c| c.status())
                {
                    Ok(_) => return,
                    Err(e) => last = e,
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "daemon {}: verbs socket {} not ready in {START_TIMEOUT:?} ({last}):\n{}",
            self.name,
            self.socket.display(),
            self.log_text()
        );
    }

    /// A new admin connection.
    pub fn admin(&self) -> RawClient {
        RawClient::connect(&self.socket, "apps-tests-admin")
            .unwrap_or_else(|e| panic!("admin connection to {}: {e}", self.name))
    }

    /// The address `port` of this daemon.
    pub fn addr(&self, port: u16) -> Addr {
        Addr { ip: self.ip, port }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Sum of the totals of every client (the admin connections hold nothing).
    pub fn totals(&self) -> ObjectTotals {
        self.admin()
            .status()
            .unwrap_or_else(|e| panic!("{}: Status: {e}", self.name))
            .totals
    }

    /// Polls the daemon until it holds no object of any client other than those in
    /// `keep` (client ids), or panics after `within`. Returns the time it took.
    pub fn wait_objects_freed(&self, keep: &[u32], within: Duration) -> Duration {
        let start = Instant::now();
        let mut admin = self.admin();
        loop {
            let clients = admin
                .clients()
                .unwrap_or_else(|e| panic!("{}: Clients: {e}", self.name));
            let status = admin
                .status()
                .unwrap_or_else(|e| panic!("{}: Status: {e}", self.name));
            let kept: Vec<_> = clients.iter().filter(|c| keep.contains(&c.id)).collect();
            let mut expected = ObjectTotals::default();
            for c in &kept {
                add(&mut expected, &c.totals);
            }
            let others_hold = clients
                .iter()
                .filter(|c| !keep.contains(&c.id))
                .any(|c| !is_zero(&c.totals));
            if status.totals == expected && !others_hold && status.clients_tearing_down == 0 {
                return start.elapsed();
            }
            if start.elapsed() > within {
                panic!(
                    "{}: objects still held {:?} after {within:?} (kept clients {:?} hold {expected:?}; \
                     tearing down {}; clients {clients:?})",
                    self.name, status.totals, keep, status.clients_tearing_down
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then SIGKILL after a grace period; waits for the process.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn add(sum: &mut ObjectTotals, t: &ObjectTotals) {
    sum.pds += t.pds;
    sum.cqs += t.cqs;
    sum.qps += t.qps;
    sum.srqs += t.srqs;
    sum.mrs += t.mrs;
    sum.mws += t.mws;
    sum.cm_ids += t.cm_ids;
    sum.arenas += t.arenas;
    sum.arena_bytes += t.arena_bytes;
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Killed (here or by the test): what it could not remove. The names are this
        // test process's own, so no other daemon holds them.
        if self.files_handed_over {
            return;
        }
        for f in self.socket_files() {
            let _ = std::fs::remove_file(f);
        }
        // The EAL's runtime directory (its telemetry socket) a killed daemon leaves.
        let eal_dir = Path::new("/var/run/dpdk").join(&self.name);
        let _ = std::fs::remove_file(eal_dir.join("dpdk_telemetry.v2"));
        let _ = std::fs::remove_dir(&eal_dir);
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Two daemons joined by memif.
pub struct DaemonPair {
    /// The memif server, 198.18.0.1.
    pub a: Daemon,
    /// The memif client, 198.18.0.2.
    pub b: Daemon,
}

impl DaemonPair {
    /// Starts both (A first: a memif client started before its server never connects)
    /// and waits until both verbs sockets answer and the link is up. `tag` (at most 8
    /// characters) makes the names unique per test.
    pub fn start(tag: &str) -> DaemonPair {
        DaemonPair::start_on(tag, "1", "0")
    }

    /// Like [`DaemonPair::start`] with dataplane CPU lists of A and B (e.g. `"0,1"` for
    /// two dataplane cores each; memif then carries one queue pair per core).
    pub fn start_on(tag: &str, a_cpus: &str, b_cpus: &str) -> DaemonPair {
        DaemonPair::start_with(tag, a_cpus, b_cpus, &[])
    }

    /// Like [`DaemonPair::start_on`] with `--set` overrides for daemon B.
    pub fn start_with(tag: &str, a_cpus: &str, b_cpus: &str, b_sets: &[&str]) -> DaemonPair {
        let b_sets: Vec<String> = b_sets.iter().map(|s| s.to_string()).collect();
        let id = std::process::id();
        let memif = format!("/run/iwarpd/ap-{tag}-{id}.memif");
        let a_dev = format!("net_memif0,role=server,socket={memif}");
        // B's port is zero-copy (its mbufs are the ring's buffers), as the benchmark
        // arrangements run it: every test of this harness moves its data through it.
        let b_dev = format!("net_memif0,role=client,socket={memif},zero-copy=yes");
        let mut a = Daemon::spawn(
            &format!("ap-{tag}-{id}-a"),
            "config/examples/memif-server.toml",
            a_cpus,
            &a_dev,
            [198, 18, 0, 1],
            &[],
        );
        a.wait_ready();
        let mut b = Daemon::spawn(
            &format!("ap-{tag}-{id}-b"),
            "config/examples/memif-client.toml",
            b_cpus,
            &b_dev,
            [198, 18, 0, 2],
            &b_sets,
        );
        b.wait_ready();
        let pair = DaemonPair { a, b };
        pair.wait_link_up();
        pair
    }

    /// Waits (at most 60 s: a loaded machine) until both daemons report their memif link
    /// up (the control server refreshes the ports' state as it changes); a connection made
    /// before that would fail on ARP for a reason no test means to check.
    fn wait_link_up(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        let mut admins = [self.a.admin(), self.b.admin()];
        while Instant::now() < end {
            if admins.iter_mut().all(|admin| {
                admin
                    .status()
                    .is_ok_and(|s| s.ports.iter().all(|p| p.link_up))
            }) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "the daemons' memif link did not come up in 60 s\n{}",
            self.logs()
        );
    }

    /// Both logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "--- {} ---\n{}\n--- {} ---\n{}",
            self.a.name,
            self.a.log_text(),
            self.b.name,
            self.b.log_text()
        )
    }
}

impl Daemon {
    /// One daemon alone (a memif server without peer): for tests of the control path.
    pub fn start_alone(tag: &str) -> Daemon {
        Daemon::start_alone_with(tag, &[])
    }

    /// Like [`Daemon::start_alone`] with `--set` overrides (`"control.max_clients=2"`).
    pub fn start_alone_with(tag: &str, sets: &[&str]) -> Daemon {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let id = std::process::id();
        let dev = format!("net_memif0,role=server,socket=/run/iwarpd/ap-{tag}-{id}.memif");
        let mut d = Daemon::spawn(
            &format!("ap-{tag}-{id}"),
            "config/examples/memif-server.toml",
            "1",
            &dev,
            [198, 18, 0, 1],
            &sets,
        );
        d.wait_ready();
        d
    }

    /// The verbs socket as a command-line argument for the helper binaries.
    pub fn socket_arg(&self) -> &Path {
        &self.socket
    }
}
