//! [`Config::validate`]: every rule of the file, each error naming its key.

use crate::error::{ensure, ConfigError};
use crate::port::PORTS_MAX;
use crate::seeds::Seeds;
use crate::{Config, NicInfo};

impl Config {
    /// Checks every key and the rules between keys; the error names the first offending
    /// key. Also builds each port's engine configuration and runs the engine's own
    /// check on it (with [`NicInfo::PLACEHOLDER`]), so a configuration that passes here
    /// gives engines that start. Machine facts (which CPUs are online, whether the port
    /// offers checksum offload) are checked at start-up by
    /// [`crate::CoresSection::dataplane_cpus`] and [`Config::engine_config`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.daemon.validate()?;
        self.eal.validate()?;
        self.cores.validate()?;
        ensure(
            !self.ports.is_empty(),
            "port",
            "at least one [[port]] is needed",
        )?;
        ensure(
            self.ports.len() <= PORTS_MAX,
            "port",
            format!("at most {PORTS_MAX} ports"),
        )?;
        for (i, p) in self.ports.iter().enumerate() {
            p.validate(i)?;
            for (j, q) in self.ports[..i].iter().enumerate() {
                ensure(
                    p.device.dpdk_name() != q.device.dpdk_name(),
                    format!("port[{i}].device"),
                    format!("`{}` is also port[{j}]'s device", p.device.dpdk_name()),
                )?;
                let server = p.device.memif_server_socket();
                ensure(
                    server.is_none() || server != q.device.memif_server_socket(),
                    format!("port[{i}].device"),
                    format!(
                        "memif server socket `{}` is also port[{j}]'s: a socket has one server (make one of them role=client)",
                        server.as_ref().map_or("", |s| s.0.as_str())
                    ),
                )?;
                ensure(
                    p.ipv4 != q.ipv4,
                    format!("port[{i}].ipv4"),
                    format!("{} is also port[{j}]'s address", p.ipv4),
                )?;
            }
        }
        self.limits.validate()?;
        self.ip.validate()?;
        self.mpa
            .validate(self.limits.max_ird, self.limits.max_ord)?;
        self.tcp.validate()?;
        self.capture.validate(self.ports.len())?;
        self.loadgen.validate(self.limits.max_rq_wr)?;
        self.control.validate(&self.daemon.name)?;
        if self.loadgen.listen_port != 0 {
            let eph = self.limits.ephemeral_port_min..=self.limits.ephemeral_port_max;
            ensure(
                !eph.contains(&self.loadgen.listen_port),
                "loadgen.listen_port",
                format!(
                    "{} is inside the ephemeral range {}..={} (active opens could take it)",
                    self.loadgen.listen_port,
                    eph.start(),
                    eph.end()
                ),
            )?;
        }
        let seeds = Seeds::fixed([0; 16], 0);
        for i in 0..self.ports.len() {
            self.engine_config(i, 0, seeds, &NicInfo::PLACEHOLDER)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::device::Device;
    use crate::port::PortSection;
    use crate::Config;

    fn err(f: impl FnOnce(&mut Config)) -> String {
        let mut c = Config::default();
        f(&mut c);
        c.validate().unwrap_err().field
    }

    #[test]
    fn defaults_validate() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn each_section_is_checked() {
        assert_eq!(err(|c| c.daemon.name.clear()), "daemon.name");
        assert_eq!(
            err(|c| c.eal.no_huge_memory_mb = 0),
            "eal.no_huge_memory_mb"
        );
        assert_eq!(err(|c| c.cores.dataplane = vec![1, 1]), "cores.dataplane");
        assert_eq!(err(|c| c.ports[0].mtu = 20), "port[0].mtu");
        assert_eq!(err(|c| c.limits.max_qps = 0), "limits.max_qps");
        assert_eq!(err(|c| c.ip.ttl = 0), "ip.ttl");
        assert_eq!(err(|c| c.mpa.revision = 0), "mpa.revision");
        assert_eq!(err(|c| c.tcp.wscale = 20), "tcp.wscale");
        assert_eq!(err(|c| c.capture.snaplen = 0), "capture.snaplen");
        assert_eq!(err(|c| c.loadgen.buffer_bytes = 0), "loadgen.buffer_bytes");
        assert_eq!(err(|c| c.control.max_clients = 0), "control.max_clients");
    }

    #[test]
    fn rules_between_keys() {
        assert_eq!(err(|c| c.ports.clear()), "port");
        let ring = |n: u32| PortSection::new(format!("net_ring{n}").parse::<Device>().unwrap());
        assert_eq!(err(|c| c.ports = (0..9).map(ring).collect()), "port");
        assert_eq!(
            err(|c| {
                let mut p = ring(0);
                p.device = c.ports[0].device.clone();
                p.ipv4 = "198.18.5.1".parse().unwrap();
                c.ports.push(p);
            }),
            "port[1].device"
        );
        assert_eq!(err(|c| c.ports.push(ring(1))), "port[1].ipv4");
        // Two memif servers on one socket (issue 17 item 7: start-up blamed "another
        // process"); a server and a client of one socket (perf-loopback) are fine.
        let memif = |s: &str| {
            let mut p = PortSection::new(s.parse::<Device>().unwrap());
            p.ipv4 = "198.18.9.1".parse().unwrap();
            p
        };
        assert_eq!(
            err(|c| c.ports.push(memif(
                "net_memif1,role=server,socket=/run/iwarpd/iwarpd.memif"
            ))),
            "port[1].device"
        );
        let mut c = Config::default();
        c.ports.push(memif(
            "net_memif1,role=client,socket=/run/iwarpd/iwarpd.memif",
        ));
        c.validate().unwrap();
        let mut c = Config::default();
        c.ports.push(memif(
            "net_memif1,role=server,socket=/run/iwarpd/other.memif",
        ));
        c.validate().unwrap();
        assert_eq!(err(|c| c.mpa.ird = 32), "mpa.ird");
        assert_eq!(err(|c| c.capture.ports = vec![1]), "capture.ports[0]");
        assert_eq!(err(|c| c.loadgen.recv_depth = 2000), "loadgen.recv_depth");
        assert_eq!(
            err(|c| c.loadgen.listen_port = 50000),
            "loadgen.listen_port"
        );
        let mut c = Config::default();
        c.loadgen.listen_port = 7000;
        let mut p = ring(1);
        p.ipv4 = "198.18.1.1".parse().unwrap();
        c.ports.push(p);
        c.validate().unwrap();
    }
}
