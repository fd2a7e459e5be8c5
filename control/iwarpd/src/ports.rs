//! Opening and configuring the ports of the configuration on DPDK: one queue pair per
//! dataplane core, the offloads the device offers, RSS where possible, and the steering
//! that matches how frames are spread.

use iwarp_config::{ChecksumMode, Config, Steering as PortSteering};
use iwarp_dpdk::{Eal, Mempool, Port, PortConfig, PortQueue, PortSetup};
use iwarp_runtime::steer::SYMMETRIC_RSS_KEY;
use iwarp_runtime::Steering;

/// RETA size used for software steering (both ends of a memif link must agree).
pub const SOFTWARE_RETA_SIZE: usize = 128;

/// One opened port with a queue pair per core.
pub struct OpenPort {
    /// The port (kept alive while its queues run).
    pub port: Port,
    /// Its receive pool.
    pub pool: Mempool,
    /// What configuration gave.
    pub setup: PortSetup,
    /// How frames are spread over the cores.
    pub steering: Steering,
    /// One queue pair per core, taken by the cores at launch.
    pub queues: Vec<Option<PortQueue>>,
    /// The port's IPv4 address.
    pub local_ip: [u8; 4],
}

/// Opens, configures and starts port `index` for `cores` dataplane cores.
pub fn open_port(eal: &Eal, cfg: &Config, index: usize, cores: usize) -> Result<OpenPort, String> {
    let p = &cfg.ports[index];
    let field = |k: &str| format!("port[{index}].{k}");
    let (_, device) = p.device.eal_arg();
    let mut port = Port::open(eal, &device).map_err(|e| format!("{}: {e}", field("device")))?;
    let info = port.info().clone();
    tracing::debug!("port {index}: {info}");
    let queues = u16::try_from(cores).map_err(|_| "too many dataplane cores".to_string())?;
    let frame_len = p.frame_len_max() as usize;
    // Headroom 128 + the largest frame + 64 bytes a PMD may count on top of the frame
    // (a VLAN tag, virtio-net's 12-byte header, which the virtio PMD takes from the same
    // buffer: without it an MTU 9000 virtio port refuses the pool), to a cache line.
    let data_room = (frame_len + 128 + 64).div_ceil(64) * 64;
    let data_room = u16::try_from(data_room.max(2176)).map_err(|_| {
        format!(
            "{}: frames of {frame_len} bytes do not fit an mbuf",
            field("mtu")
        )
    })?;
    let n_mbufs = p.mbufs.saturating_mul(cores as u32).max(1024);
    let pool = Mempool::new(eal, &format!("rx{index}"), n_mbufs, 256, data_room, -1)
        .map_err(|e| format!("{}: {e}", field("mbufs")))?;
    let want_offload = matches!(p.checksum, ChecksumMode::Auto | ChecksumMode::Offload);
    let want_rss = cores > 1 && !matches!(p.steering, PortSteering::Software);
    let pc = PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        mtu: u16::try_from(p.mtu).unwrap_or(u16::MAX),
        rx_desc: p.rx_desc,
        tx_desc: p.tx_desc,
        tx_checksum_offload: want_offload,
        rx_checksum_offload: want_offload,
        rss: want_rss,
        promiscuous: false,
    };
    let setup = port
        .configure(&pc, &pool)
        .map_err(|e| format!("{}: {e}", field("device")))?;
    if matches!(p.steering, PortSteering::Rss) && cores > 1 && !setup.rss {
        return Err(format!(
            "{}: `rss`, but {} offers no RSS (use `auto` or `software`)",
            field("steering"),
            p.device.dpdk_name()
        ));
    }
    // Resolve the checksum mode against what the port really does (an error names the key).
    p.checksum_offload(index, setup.tx_checksum_offload, setup.rx_checksum_offload)
        .map_err(|e| e.to_string())?;
    port.start()
        .map_err(|e| format!("{}: {e}", field("device")))?;
    let steering = if cores == 1 {
        Steering::single(0)
    } else {
        let reta = if setup.rss {
            usize::from(info.reta_size).max(1).next_power_of_two()
        } else {
            SOFTWARE_RETA_SIZE
        };
        Steering::new(&SYMMETRIC_RSS_KEY, reta, (0..cores).collect())
            .map_err(|e| format!("{}: {e:?}", field("steering")))?
    };
    let mut qs = Vec::with_capacity(cores);
    for q in 0..queues {
        qs.push(Some(
            port.queue(q, &pool)
                .map_err(|e| format!("{}: {e}", field("device")))?,
        ));
    }
    Ok(OpenPort {
        port,
        pool,
        setup,
        steering,
        queues: qs,
        local_ip: p.ipv4.octets(),
    })
}
