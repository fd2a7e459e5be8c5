//! Opens a port from a device string and prints what it reports.
//!
//! `portcheck <vdev string | PCI address> [--huge]`, e.g.
//! `portcheck net_memif0,role=server,socket=/run/a.sock` or `portcheck 0000:3b:00.0`.
//! Uses hugepages when reserved (`--in-memory`), else `--no-huge -m 256`.

use iwarp_dpdk::{Eal, EalArgs, MemoryMode, Port};

fn main() {
    let mut argv = std::env::args().skip(1);
    let Some(device) = argv.next() else {
        eprintln!("usage: portcheck <vdev string | PCI address>");
        std::process::exit(2);
    };
    let memory = MemoryMode::detect(64, 256);
    if let MemoryMode::NoHuge { memory_mb } = memory {
        eprintln!("warning: no free hugepages; running with --no-huge -m {memory_mb}");
    }
    let mut args = EalArgs::new(
        "portcheck",
        &format!("portcheck-{}", std::process::id()),
        memory,
    );
    args.main_cpus = vec![0];
    if devargs_is_pci(&device) {
        args.pci.push(device.clone());
    }
    args.log_levels = vec!["error".into()];
    let eal = match Eal::init(&args.build()) {
        Ok(eal) => eal,
        Err(e) => {
            eprintln!("portcheck: {e}");
            std::process::exit(1);
        }
    };
    match Port::open(&eal, &device) {
        Ok(port) => {
            println!("{}", port.info());
            let mac = port.mac();
            println!(
                "  mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, link {:?}",
                mac[0],
                mac[1],
                mac[2],
                mac[3],
                mac[4],
                mac[5],
                port.link()
            );
        }
        Err(e) => {
            eprintln!("portcheck: {e}");
            std::process::exit(1);
        }
    }
}

fn devargs_is_pci(device: &str) -> bool {
    iwarp_dpdk::devargs::is_pci_address(&iwarp_dpdk::devargs::port_name(device))
}
