//! The file mapped onto the engine's structs (`iwarp_engine::EngineConfig` and the
//! TCP, MPA and RNIC configurations inside it).

use iwarp_engine::EngineConfig;
use iwarp_rdma::RnicConfig;

use crate::error::ConfigError;
use crate::seeds::{mix, Seeds};
use crate::Config;

/// What the daemon learned from a started port, needed to finish its engine's
/// configuration (`iwarp_runtime::PortCaps` carries the same facts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicInfo {
    /// The port's own Ethernet address (used unless `port[].mac` overrides it).
    pub mac: [u8; 6],
    /// The port computes IPv4/TCP checksums of frames we send.
    pub tx_checksum_offload: bool,
    /// The port verifies IPv4/TCP checksums of frames we receive.
    pub rx_checksum_offload: bool,
}

impl NicInfo {
    /// A port offering everything, with a locally administered address: what
    /// [`Config::validate`] checks the engine configuration against before any port exists.
    pub const PLACEHOLDER: NicInfo = NicInfo {
        mac: [0x02, 0, 0, 0, 0, 0x01],
        tx_checksum_offload: true,
        rx_checksum_offload: true,
    };
}

/// The file key an `EngineConfig` field comes from, for port `port`.
fn file_key(port: usize, engine_field: &str) -> String {
    let key = match engine_field {
        "mac" | "ipv4" | "prefix_len" | "gateway" | "mtu" => {
            return format!("port[{port}].{engine_field}");
        }
        "ip_ttl" => "ip.ttl",
        "mpa_pool_rings" => "mpa.pool_rings",
        "mpa_pool_staging" => "mpa.pool_staging",
        "llp_close_timeout_ms" => "tcp.close_timeout_ms",
        "initiator_nudge_ms" => "mpa.initiator_nudge_ms",
        f if f.starts_with("arp_") => return format!("ip.{f}"),
        f => return format!("limits.{f}"),
    };
    key.to_string()
}

impl Config {
    /// The engine configuration of port `port` on dataplane core `core`: addresses and
    /// MTU from `[[port]]`, bounds from `[limits]` and `[ip]`, `[tcp]`, `[mpa]`, the
    /// checksum mode resolved against `nic`, the ISN secret from `seeds`, and a STag
    /// seed derived from `seeds.stag_seed` alone: the same on every engine of the daemon
    /// (every core and every port), because the shared-memory verbs replicate each MR
    /// and window on every engine under the STag the first engine allocated
    /// (`Rnic::reg_mr_at`), and only identical allocators never collide. A seed per port
    /// made the replica on a second port land, now and then, on a slot another MR held
    /// there: `RegMr` failed with `InsufficientResources` (docs/APPS.md, Placement).
    /// The engine's own `EngineConfig::validate` is run; its error names the file key.
    pub fn engine_config(
        &self,
        port: usize,
        _core: usize,
        seeds: Seeds,
        nic: &NicInfo,
    ) -> Result<EngineConfig, ConfigError> {
        let p = self.ports.get(port).ok_or_else(|| {
            ConfigError::new(
                "port",
                format!(
                    "port {port} does not exist ({} configured)",
                    self.ports.len()
                ),
            )
        })?;
        let checksum_offload =
            p.checksum_offload(port, nic.tx_checksum_offload, nic.rx_checksum_offload)?;
        let stag_seed = mix(seeds.stag_seed);
        let l = &self.limits;
        let ip = &self.ip;
        // The struct update keeps this building while the engine grows fields the file
        // does not set yet (they keep the engine's defaults).
        #[allow(clippy::needless_update)]
        let cfg = EngineConfig {
            mac: p.mac.map_or(nic.mac, |m| m.0),
            ipv4: p.ipv4,
            prefix_len: p.prefix_len,
            gateway: p.gateway,
            mtu: p.mtu as usize,
            ip_ttl: ip.ttl,
            tcp: self.tcp.tcp_config(checksum_offload),
            mpa: self.mpa.mpa_config(),
            rnic: RnicConfig {
                limits: l.rnic_limits(),
                seed: stag_seed,
            },
            max_conns: l.max_conns as usize,
            max_listeners: l.max_listeners as usize,
            backlog_max: l.backlog_max as usize,
            ephemeral_port_min: l.ephemeral_port_min,
            ephemeral_port_max: l.ephemeral_port_max,
            arp_cache_entries: ip.arp_cache_entries as usize,
            arp_entry_timeout_ms: ip.arp_entry_timeout_ms,
            arp_retry_ms: ip.arp_retry_ms,
            arp_retries_max: ip.arp_retries_max,
            arp_pending_frames: ip.arp_pending_frames as usize,
            arp_pending_per_hop: ip.arp_pending_per_hop as usize,
            ctrl_tx_frames: l.ctrl_tx_frames as usize,
            tx_turn_segs_max: l.tx_turn_segs_max,
            event_queue_len: l.event_queue_len as usize,
            llp_close_timeout_ms: self.tcp.close_timeout_ms,
            relisten_grace_ms: self.tcp.relisten_grace_ms,
            no_connection_rsts_per_s: self.tcp.no_connection_rsts_per_s,
            initiator_nudge_ms: self.mpa.initiator_nudge_ms,
            isn_secret: seeds.isn_secret,
            stag_seed,
            checksum_offload,
            mpa_pool_rings: self.mpa.pool_rings as usize,
            mpa_pool_staging: self.mpa.pool_staging as usize,
            ..EngineConfig::default()
        };
        cfg.validate()
            .map_err(|e| ConfigError::new(file_key(port, e.field), e.reason))?;
        Ok(cfg)
    }

    /// Memory of one engine of port `port`: (bytes a busy connection holds at most,
    /// bytes all of the engine's connections hold at most), from the engine's own
    /// estimates (`EngineConfig::conn_bytes_estimate`, `EngineConfig::conns_bytes_max`).
    pub fn engine_memory(&self, port: usize) -> Result<(u64, u64), ConfigError> {
        let cfg = self.engine_config(port, 0, Seeds::fixed([0; 16], 0), &NicInfo::PLACEHOLDER)?;
        Ok((
            cfg.conn_bytes_estimate() as u64,
            cfg.conns_bytes_max() as u64,
        ))
    }
}

impl Config {
    /// A few lines describing the configuration, for `check-config` and the start-up log.
    pub fn summary(&self) -> String {
        let cores = if self.cores.dataplane.is_empty() {
            "the last CPU".to_string()
        } else {
            crate::format_cpu_list(&self.cores.dataplane)
        };
        let mut out = format!(
            "daemon {}: {} port(s), dataplane CPU(s) {cores}, QP placement {:?}, hugepages {:?}\n",
            self.daemon.name,
            self.ports.len(),
            self.cores.qp_placement,
            self.eal.hugepages,
        );
        for (i, p) in self.ports.iter().enumerate() {
            out.push_str(&format!(
                "port[{i}] {} {}/{} mtu {} checksum {:?}\n",
                p.device, p.ipv4, p.prefix_len, p.mtu, p.checksum
            ));
            if let Ok((conn, all)) = self.engine_memory(i) {
                out.push_str(&format!(
                    "  per engine: {} QPs, {} connections; a busy connection holds at most {} KiB, all connections at most {} MiB\n",
                    self.limits.max_qps,
                    self.limits.max_conns,
                    conn.div_ceil(1024),
                    all.div_ceil(1 << 20)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::ChecksumMode;
    use core::net::Ipv4Addr;

    const NIC: NicInfo = NicInfo {
        mac: [0x02, 0xaa, 0, 0, 0, 7],
        tx_checksum_offload: false,
        rx_checksum_offload: false,
    };

    #[test]
    fn the_default_maps_onto_a_valid_engine() {
        let c = Config::default();
        let seeds = Seeds::fixed([9; 16], 77);
        let e = c.engine_config(0, 0, seeds, &NIC).unwrap();
        assert_eq!(e.mac, NIC.mac);
        assert_eq!(e.ipv4, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(e.mtu, 1500);
        assert_eq!(e.isn_secret, [9; 16]);
        assert_eq!(e.max_conns, 2048);
        assert_eq!(e.rnic.limits.max_qps, 1024);
        assert_eq!(e.rnic.seed, e.stag_seed);
        assert!(!e.checksum_offload && !e.tcp.checksum_offload);
        assert_eq!(e.llp_close_timeout_ms, 60_000);
        assert_eq!(e.tx_turn_segs_max, iwarp_engine::TX_TURN_SEGS_MAX);
        let mut short_turns = c.clone();
        short_turns.limits.tx_turn_segs_max = 2;
        let s = short_turns.engine_config(0, 0, seeds, &NIC).unwrap();
        assert_eq!(s.tx_turn_segs_max, 2);
        let other_core = c.engine_config(0, 1, seeds, &NIC).unwrap();
        assert_eq!(
            other_core.stag_seed, e.stag_seed,
            "one STag space per daemon"
        );
        iwarp_engine::Engine::try_new(e).unwrap();
    }

    /// The shared-memory verbs register each MR on the first engine and replicate it on
    /// every other engine (each core of each port) under the same STag. With a seed per
    /// port the replica on port 1 sometimes found its slot held by another MR (the
    /// restart loop failed `RegMr` with `InsufficientResources` about once in 40 runs).
    #[test]
    fn every_port_and_core_replicates_every_stag_through_churn() {
        use iwarp_types::{Access, RegionId, Stag};
        let mut c = Config::default();
        let mut second = c.ports[0].clone();
        second.ipv4 = Ipv4Addr::new(198, 18, 1, 1);
        c.ports.push(second);
        let seeds = Seeds::fixed([1; 16], 0x0123_4567_89ab_cdef);
        let mut engines: Vec<iwarp_engine::Engine> = [(0, 0), (0, 1), (1, 0), (1, 1)]
            .iter()
            .map(|&(port, core)| {
                iwarp_engine::Engine::try_new(c.engine_config(port, core, seeds, &NIC).unwrap())
                    .unwrap()
            })
            .collect();
        let pds: Vec<_> = engines
            .iter_mut()
            .map(|e| e.rnic_mut().alloc_pd().unwrap())
            .collect();
        let attr = |pd| iwarp_rdma::mem::MrAttr {
            pd,
            region: RegionId(1),
            region_offset: 0,
            len: 64,
            va: 0,
            zero_based: false,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            key: 7,
            remote_access_flag: true,
        };
        let mut live: Vec<Stag> = Vec::new();
        let mut rng = 0x9e37_79b9_u64;
        for step in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let room = live.len() < 400;
            if room && (live.is_empty() || !rng.is_multiple_of(3)) {
                let stag = engines[0]
                    .rnic_mut()
                    .reg_mr(&attr(pds[0]), Some(64))
                    .unwrap();
                for (e, pd) in engines.iter_mut().zip(&pds).skip(1) {
                    assert_eq!(
                        e.rnic_mut().reg_mr_at(stag, &attr(*pd), Some(64)),
                        Ok(stag),
                        "step {step}: {} MRs live",
                        live.len()
                    );
                }
                live.push(stag);
            } else {
                let stag = live.swap_remove((rng >> 8) as usize % live.len());
                for e in &mut engines {
                    e.rnic_mut().dealloc_stag(stag).unwrap();
                }
            }
        }
    }

    #[test]
    fn port_settings_reach_the_engine() {
        let mut c = Config::default();
        c.ports[0].mac = Some("02:00:00:00:00:42".parse().unwrap());
        c.ports[0].checksum = ChecksumMode::TrustLink;
        c.ports[0].gateway = Some(Ipv4Addr::new(198, 18, 0, 254));
        c.ip.ttl = 9;
        let e = c
            .engine_config(0, 0, Seeds::fixed([0; 16], 0), &NIC)
            .unwrap();
        assert_eq!(e.mac, [2, 0, 0, 0, 0, 0x42]);
        assert!(e.checksum_offload && e.tcp.checksum_offload);
        assert_eq!(e.gateway, Some(Ipv4Addr::new(198, 18, 0, 254)));
        assert_eq!(e.ip_ttl, 9);
        let e = c
            .engine_config(1, 0, Seeds::fixed([0; 16], 0), &NIC)
            .unwrap_err();
        assert_eq!(e.field, "port");
        c.ports[0].checksum = ChecksumMode::Offload;
        let e = c
            .engine_config(0, 0, Seeds::fixed([0; 16], 0), &NIC)
            .unwrap_err();
        assert_eq!(e.field, "port[0].checksum");
    }

    #[test]
    fn engine_errors_are_translated_to_file_keys() {
        assert_eq!(file_key(2, "mtu"), "port[2].mtu");
        assert_eq!(file_key(0, "ip_ttl"), "ip.ttl");
        assert_eq!(file_key(0, "arp_retry_ms"), "ip.arp_retry_ms");
        assert_eq!(file_key(0, "llp_close_timeout_ms"), "tcp.close_timeout_ms");
        assert_eq!(file_key(0, "max_conns"), "limits.max_conns");
        let mut c = Config::default();
        c.ports[0].mtu = 100;
        let e = c
            .engine_config(0, 0, Seeds::fixed([0; 16], 0), &NIC)
            .unwrap_err();
        assert_eq!(e.field, "port[0].mtu");
    }

    #[test]
    fn summary_names_every_port() {
        let mut c = Config::default();
        c.ports
            .push(crate::PortSection::new("net_ring0".parse().unwrap()));
        let s = c.summary();
        assert!(s.contains("daemon iwarpd: 2 port(s)"), "{s}");
        assert!(s.contains("port[1] net_ring0"), "{s}");
        assert!(s.contains("MiB"), "{s}");
    }

    #[test]
    fn connection_memory_is_reported() {
        let c = Config::default();
        let (per_conn, all) = c.engine_memory(0).unwrap();
        assert!(per_conn > 48 * 1024, "{per_conn}");
        assert!(all > per_conn && all < 1 << 31, "{all}");
    }
}
