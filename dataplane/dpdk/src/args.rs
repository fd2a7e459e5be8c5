//! The EAL command line: memory mode (hugepages or the `--no-huge` fallback) and the argv
//! builder (lcores, devices, file prefix, telemetry, logging). Pure logic, no DPDK calls.

use std::path::Path;

/// Where the sysfs count of free 2 MiB hugepages lives.
pub const FREE_HUGEPAGES_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";

/// How the EAL gets its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryMode {
    /// Hugepages without a hugetlbfs mount: `--in-memory --iova-mode=va`.
    Hugepages,
    /// No hugepages: `--no-huge -m <memory_mb> --no-shconf` (slower, pinned to 4 KiB
    /// pages; the caller should print a warning).
    NoHuge {
        /// Memory for the EAL in MiB.
        memory_mb: u32,
    },
}

impl MemoryMode {
    /// Chooses [`MemoryMode::Hugepages`] when at least `threshold_pages` free 2 MiB
    /// hugepages are reserved, else [`MemoryMode::NoHuge`] with `nohuge_memory_mb`.
    pub fn detect(threshold_pages: u64, nohuge_memory_mb: u32) -> MemoryMode {
        let free = std::fs::read_to_string(Path::new(FREE_HUGEPAGES_2M)).ok();
        Self::choose(free.as_deref(), threshold_pages, nohuge_memory_mb)
    }

    /// The decision of [`MemoryMode::detect`], given the sysfs file's content (None when
    /// unreadable).
    pub fn choose(
        free_pages_text: Option<&str>,
        threshold_pages: u64,
        nohuge_memory_mb: u32,
    ) -> MemoryMode {
        let free = free_pages_text
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if threshold_pages > 0 && free >= threshold_pages {
            MemoryMode::Hugepages
        } else {
            MemoryMode::NoHuge {
                memory_mb: nohuge_memory_mb,
            }
        }
    }

    /// The EAL flags of this mode.
    pub fn eal_flags(&self) -> Vec<String> {
        match self {
            MemoryMode::Hugepages => vec!["--in-memory".into(), "--iova-mode=va".into()],
            MemoryMode::NoHuge { memory_mb } => {
                vec![
                    "--no-huge".into(),
                    "-m".into(),
                    memory_mb.to_string(),
                    "--no-shconf".into(),
                ]
            }
        }
    }
}

/// The pieces of an EAL command line. [`EalArgs::build`] turns them into the argv given to
/// [`crate::Eal::init`].
///
/// Lcore layout: lcore 0 is the main lcore (control thread) and floats over every CPU in
/// `main_cpus`; dataplane lcore `i + 1` is pinned to `dataplane_cpus[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EalArgs {
    /// argv\[0\].
    pub program: String,
    /// CPUs the main lcore may run on (usually all of them).
    pub main_cpus: Vec<usize>,
    /// One CPU per dataplane lcore.
    pub dataplane_cpus: Vec<usize>,
    /// Memory flags.
    pub memory: MemoryMode,
    /// PCI devices to use (`-a <addr>`); none means `--no-pci`.
    pub pci: Vec<String>,
    /// Virtual devices (`--vdev=<string>`); ports can also be probed later.
    pub vdevs: Vec<String>,
    /// `--file-prefix` (runtime directory name); distinct per process on one machine.
    pub file_prefix: String,
    /// Keep the telemetry socket thread (off: `--no-telemetry`).
    pub telemetry: bool,
    /// `--log-level` values, e.g. `"notice"` or `"pmd.net.memif:debug"`.
    pub log_levels: Vec<String>,
    /// Further flags, appended as given.
    pub extra: Vec<String>,
}

impl EalArgs {
    /// Defaults: main lcore on every online CPU, no dataplane lcore, the given memory mode,
    /// no PCI, telemetry off, log level `notice`.
    pub fn new(program: &str, file_prefix: &str, memory: MemoryMode) -> EalArgs {
        EalArgs {
            program: program.to_owned(),
            main_cpus: (0..online_cpus()).collect(),
            dataplane_cpus: Vec::new(),
            memory,
            pci: Vec::new(),
            vdevs: Vec::new(),
            file_prefix: file_prefix.to_owned(),
            telemetry: false,
            log_levels: vec!["notice".to_owned()],
            extra: Vec::new(),
        }
    }

    /// The argv (program name first).
    pub fn build(&self) -> Vec<String> {
        let mut argv = vec![self.program.clone()];
        let mut lcores = format!("0@({})", cpu_set(&self.main_cpus));
        for (i, cpu) in self.dataplane_cpus.iter().enumerate() {
            lcores.push_str(&format!(",{}@{}", i + 1, cpu));
        }
        argv.push(format!("--lcores={lcores}"));
        argv.push("--main-lcore=0".into());
        if self.pci.is_empty() {
            argv.push("--no-pci".into());
        } else {
            for addr in &self.pci {
                argv.push("-a".into());
                argv.push(addr.clone());
            }
        }
        for vdev in &self.vdevs {
            argv.push(format!("--vdev={vdev}"));
        }
        // A PCI device's DMA addresses are the EAL's IOVAs: VA only works behind an IOMMU
        // (vfio-pci with one); with uio_pci_generic or vfio's no-IOMMU mode they must be
        // physical. DPDK picks the right one from the bound driver when not forced.
        let pci = !self.pci.is_empty();
        argv.extend(
            self.memory
                .eal_flags()
                .into_iter()
                .filter(|f| !(pci && f == "--iova-mode=va")),
        );
        argv.push(format!("--file-prefix={}", self.file_prefix));
        if !self.telemetry {
            argv.push("--no-telemetry".into());
        }
        for level in &self.log_levels {
            argv.push(format!("--log-level={level}"));
        }
        argv.extend(self.extra.iter().cloned());
        argv
    }

    /// The lcore id of dataplane CPU index `i` (`i + 1`).
    pub fn dataplane_lcore(i: usize) -> u32 {
        u32::try_from(i + 1).unwrap_or(u32::MAX)
    }
}

/// Formats a CPU list compactly for `--lcores` (`0-3,6`).
fn cpu_set(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return "0".to_owned();
    }
    let mut parts = Vec::new();
    let mut start = sorted[0];
    let mut prev = start;
    for &c in &sorted[1..] {
        if c == prev + 1 {
            prev = c;
            continue;
        }
        parts.push(range_text(start, prev));
        start = c;
        prev = c;
    }
    parts.push(range_text(start, prev));
    parts.join(",")
}

fn range_text(a: usize, b: usize) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

/// Online CPUs of this machine (at least 1).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_mode_is_hugepages_only_at_or_above_the_threshold() {
        assert_eq!(
            MemoryMode::choose(Some("512\n"), 256, 512),
            MemoryMode::Hugepages
        );
        assert_eq!(
            MemoryMode::choose(Some("256"), 256, 512),
            MemoryMode::Hugepages
        );
        assert_eq!(
            MemoryMode::choose(Some("255"), 256, 512),
            MemoryMode::NoHuge { memory_mb: 512 }
        );
        assert_eq!(
            MemoryMode::choose(Some("0"), 256, 300),
            MemoryMode::NoHuge { memory_mb: 300 }
        );
        assert_eq!(
            MemoryMode::choose(None, 256, 512),
            MemoryMode::NoHuge { memory_mb: 512 }
        );
        assert_eq!(
            MemoryMode::choose(Some("garbage"), 1, 64),
            MemoryMode::NoHuge { memory_mb: 64 }
        );
    }

    #[test]
    fn memory_flags_match_the_notes() {
        assert_eq!(
            MemoryMode::Hugepages.eal_flags(),
            ["--in-memory", "--iova-mode=va"]
        );
        assert_eq!(
            MemoryMode::NoHuge { memory_mb: 256 }.eal_flags(),
            ["--no-huge", "-m", "256", "--no-shconf"]
        );
    }

    #[test]
    fn argv_floats_the_main_lcore_and_pins_dataplane_lcores() {
        let mut a = EalArgs::new("iwarpd", "hostA", MemoryMode::Hugepages);
        a.main_cpus = vec![0, 1, 2, 3];
        a.dataplane_cpus = vec![2, 3];
        a.vdevs = vec!["net_memif0,role=server,socket=/x".into()];
        let argv = a.build();
        assert_eq!(
            argv,
            [
                "iwarpd",
                "--lcores=0@(0-3),1@2,2@3",
                "--main-lcore=0",
                "--no-pci",
                "--vdev=net_memif0,role=server,socket=/x",
                "--in-memory",
                "--iova-mode=va",
                "--file-prefix=hostA",
                "--no-telemetry",
                "--log-level=notice",
            ]
        );
        assert_eq!(EalArgs::dataplane_lcore(1), 2);
    }

    #[test]
    fn argv_allows_pci_devices_and_keeps_telemetry_when_asked() {
        let mut a = EalArgs::new("x", "p", MemoryMode::NoHuge { memory_mb: 512 });
        a.main_cpus = vec![5, 0, 1, 3];
        a.pci = vec!["0000:00:04.0".into()];
        a.telemetry = true;
        a.log_levels = vec!["pmd.net.memif:debug".into()];
        a.extra = vec!["--single-file-segments".into()];
        let argv = a.build();
        assert_eq!(argv[1], "--lcores=0@(0-1,3,5)");
        assert!(!argv.contains(&"--no-pci".to_owned()));
        assert!(argv
            .windows(2)
            .any(|w| w[0] == "-a" && w[1] == "0000:00:04.0"));
        assert!(!argv.contains(&"--no-telemetry".to_owned()));
        assert!(argv.contains(&"--no-huge".to_owned()) && argv.contains(&"--no-shconf".to_owned()));
        a.memory = MemoryMode::Hugepages;
        let argv = a.build();
        assert!(argv.contains(&"--in-memory".to_owned()));
        assert!(
            !argv.iter().any(|f| f.starts_with("--iova-mode")),
            "PCI devices: the EAL chooses the IOVA mode from the bound driver"
        );
        assert_eq!(
            argv.last().map(String::as_str),
            Some("--single-file-segments")
        );
    }

    #[test]
    fn cpu_sets_are_compact() {
        assert_eq!(cpu_set(&[0]), "0");
        assert_eq!(cpu_set(&[1, 0]), "0-1");
        assert_eq!(cpu_set(&[0, 2, 4, 5, 6]), "0,2,4-6");
        assert_eq!(cpu_set(&[]), "0");
    }
}
