//! Admin answers for people (tables) and for programs (JSON).

use iwarp_shm_socket::{ClientInfo, CounterSet, DaemonStatus, ObjectInfo, ObjectTotals, PortAttr};
use serde_json::{json, Map, Value};

use crate::table::Table;

/// `1h02m03s`, `4m05s`, `7s`.
pub fn duration(s: u64) -> String {
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// Bytes in binary units: `512 B`, `16.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

fn ip(a: [u8; 4]) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn totals_line(t: &ObjectTotals) -> String {
    format!(
        "pds {} cqs {} qps {} srqs {} mrs {} mws {} cm_ids {} arenas {} ({})",
        t.pds,
        t.cqs,
        t.qps,
        t.srqs,
        t.mrs,
        t.mws,
        t.cm_ids,
        t.arenas,
        bytes(t.arena_bytes)
    )
}

fn port_line(p: &PortAttr) -> String {
    let speed = if p.speed_mbps == 0 {
        "speed unknown".to_string()
    } else {
        format!("{} Mbit/s", p.speed_mbps)
    };
    format!(
        "port {}: {}/{} mac {} mtu {} link {} {} ({})",
        p.index,
        ip(p.ip),
        p.prefix_len,
        mac(p.mac),
        p.mtu,
        if p.link_up { "up" } else { "down" },
        speed,
        p.device
    )
}

/// `iwarpctl status`.
pub fn status_text(s: &DaemonStatus) -> String {
    let mut out = format!(
        "iwarpd {} {}, pid {}, up {}\ncores {}; clients {} ({} since start, {} tearing down)\n",
        s.name,
        s.version,
        s.pid,
        duration(s.uptime_s),
        s.cores,
        s.clients,
        s.clients_total,
        s.clients_tearing_down
    );
    for p in &s.ports {
        out.push_str(&port_line(p));
        out.push('\n');
    }
    out.push_str(&format!("objects: {}\n", totals_line(&s.totals)));
    out
}

/// `iwarpctl clients`.
pub fn clients_text(c: &[ClientInfo]) -> String {
    let mut t = Table::new(&[
        "ID",
        "NAME",
        "PID",
        "UID",
        "GID",
        "CONNECTED",
        "PDS",
        "CQS",
        "QPS",
        "MRS",
        "CM_IDS",
        "ARENA",
    ]);
    for c in c {
        let x = &c.totals;
        t.row(vec![
            c.id.to_string(),
            c.name.clone(),
            c.pid.to_string(),
            c.uid.to_string(),
            c.gid.to_string(),
            duration(c.connected_s),
            x.pds.to_string(),
            x.cqs.to_string(),
            x.qps.to_string(),
            (x.mrs + x.mws).to_string(),
            x.cm_ids.to_string(),
            bytes(x.arena_bytes),
        ]);
    }
    t.render()
}

/// `iwarpctl qps|cqs|mrs`: the objects of `kinds`, in the daemon's order.
pub fn objects_text(o: &[ObjectInfo], kinds: &[&str]) -> String {
    let mut t = Table::new(&["CLIENT", "KIND", "HANDLE", "CORE", "STATE", "DETAIL"]);
    for o in o.iter().filter(|o| kinds.contains(&o.kind.as_str())) {
        let detail = o
            .detail
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        t.row(vec![
            o.client.to_string(),
            o.kind.clone(),
            format!("{:#x}", o.handle),
            o.core.map_or_else(|| "-".to_string(), |c| c.to_string()),
            o.state.clone(),
            detail,
        ]);
    }
    t.render()
}

/// `iwarpctl counters`: one row per counter, one column per core, then the sum.
pub fn counters_text(sets: &[CounterSet]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in sets {
        for (n, _) in &s.values {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let headers: Vec<String> = std::iter::once("COUNTER".to_string())
        .chain(sets.iter().map(|s| {
            s.core
                .map_or_else(|| "TOTAL".to_string(), |c| format!("CORE{c}"))
        }))
        .collect();
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&header_refs);
    for n in names {
        let mut row = vec![n.to_string()];
        for s in sets {
            let v = s.values.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
            row.push(v.map_or_else(|| "-".to_string(), |v| v.to_string()));
        }
        t.row(row);
    }
    t.render()
}

fn totals_json(t: &ObjectTotals) -> Value {
    json!({
        "pds": t.pds, "cqs": t.cqs, "qps": t.qps, "srqs": t.srqs, "mrs": t.mrs, "mws": t.mws,
        "cm_ids": t.cm_ids, "arenas": t.arenas, "arena_bytes": t.arena_bytes,
    })
}

fn port_json(p: &PortAttr) -> Value {
    json!({
        "index": p.index, "ip": ip(p.ip), "prefix_len": p.prefix_len, "mac": mac(p.mac),
        "mtu": p.mtu, "device": p.device, "link_up": p.link_up, "speed_mbps": p.speed_mbps,
    })
}

/// `iwarpctl ports`: one block per port.
pub fn ports_text(ports: &[PortAttr]) -> String {
    let mut out = String::new();
    for p in ports {
        out.push_str(&port_line(p));
        out.push('\n');
        let yes_no = |b: bool| if b { "on" } else { "off" };
        out.push_str(&format!(
            "  driver {}; queue pairs {} in use (device offers rx {} tx {})\n",
            if p.driver.is_empty() { "?" } else { &p.driver },
            p.queues,
            p.max_rx_queues,
            p.max_tx_queues
        ));
        out.push_str(&format!(
            "  checksum offload: rx {} tx {}\n",
            yes_no(p.rx_checksum),
            yes_no(p.tx_checksum)
        ));
        let none = |s: &str| {
            if s.is_empty() {
                "none".to_string()
            } else {
                s.to_string()
            }
        };
        out.push_str(&format!("  rx offloads: {}\n", none(&p.rx_offloads)));
        out.push_str(&format!("  tx offloads: {}\n", none(&p.tx_offloads)));
        out.push_str(&format!(
            "  rss: {} (capability: {})\n",
            yes_no(p.rss),
            none(&p.rss_capa)
        ));
        out.push_str(&format!(
            "  link changes: {} up, {} down\n",
            p.link_ups, p.link_downs
        ));
    }
    out
}

/// `iwarpctl ports --json`.
pub fn ports_json(ports: &[PortAttr]) -> Value {
    Value::Array(
        ports
            .iter()
            .map(|p| {
                let mut v = port_json(p);
                if let Value::Object(m) = &mut v {
                    for (k, x) in [
                        ("driver", json!(p.driver)),
                        ("queues", json!(p.queues)),
                        ("max_rx_queues", json!(p.max_rx_queues)),
                        ("max_tx_queues", json!(p.max_tx_queues)),
                        ("rx_offloads", json!(p.rx_offloads)),
                        ("tx_offloads", json!(p.tx_offloads)),
                        ("rx_checksum", json!(p.rx_checksum)),
                        ("tx_checksum", json!(p.tx_checksum)),
                        ("rss", json!(p.rss)),
                        ("rss_capa", json!(p.rss_capa)),
                        ("link_ups", json!(p.link_ups)),
                        ("link_downs", json!(p.link_downs)),
                    ] {
                        m.insert(k.to_string(), x);
                    }
                }
                v
            })
            .collect(),
    )
}

/// `iwarpctl status --json`.
pub fn status_json(s: &DaemonStatus) -> Value {
    json!({
        "name": s.name, "version": s.version, "pid": s.pid, "uptime_s": s.uptime_s,
        "cores": s.cores, "ports": s.ports.iter().map(port_json).collect::<Vec<_>>(),
        "clients": s.clients, "clients_total": s.clients_total,
        "clients_tearing_down": s.clients_tearing_down, "totals": totals_json(&s.totals),
    })
}

/// `iwarpctl clients --json`.
pub fn clients_json(c: &[ClientInfo]) -> Value {
    Value::Array(
        c.iter()
            .map(|c| {
                json!({
                    "id": c.id, "name": c.name, "pid": c.pid, "uid": c.uid, "gid": c.gid,
                    "connected_s": c.connected_s, "totals": totals_json(&c.totals),
                })
            })
            .collect(),
    )
}

/// `iwarpctl qps|cqs|mrs --json`: details as an object (later duplicates win).
pub fn objects_json(o: &[ObjectInfo], kinds: &[&str]) -> Value {
    Value::Array(
        o.iter()
            .filter(|o| kinds.contains(&o.kind.as_str()))
            .map(|o| {
                let detail: Map<String, Value> = o
                    .detail
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                json!({
                    "client": o.client, "kind": o.kind, "handle": o.handle, "core": o.core,
                    "state": o.state, "detail": detail,
                })
            })
            .collect(),
    )
}

/// One interval of `counters --watch`.
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    /// Seconds from the first reading to this one.
    pub since_start_s: f64,
    /// Seconds since the previous reading.
    pub length_s: f64,
}

/// The summed counters of a reading (the set without a core), as (name, value).
fn total(sets: &[CounterSet]) -> &[(String, u64)] {
    sets.iter()
        .find(|s| s.core.is_none())
        .map_or(&[], |s| s.values.as_slice())
}

/// The counters that moved between two readings: name, value now, change (a gauge may go
/// down), change per second.
fn moved(prev: &[CounterSet], cur: &[CounterSet], length_s: f64) -> Vec<(String, u64, i128, f64)> {
    let before = total(prev);
    total(cur)
        .iter()
        .filter_map(|(name, now)| {
            let was = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, v)| *v);
            let delta = i128::from(*now) - i128::from(was);
            let rate = if length_s > 0.0 {
                delta as f64 / length_s
            } else {
                0.0
            };
            (delta != 0).then(|| (name.clone(), *now, delta, rate))
        })
        .collect()
}

/// One interval of `counters --watch` for a terminal: a time line, then a table of the
/// summed counters that moved (value, change, per second).
pub fn counters_delta_text(prev: &[CounterSet], cur: &[CounterSet], i: Interval) -> String {
    let rows = moved(prev, cur, i.length_s);
    let mut s = format!(
        "[{:>8.1} s] {} counter(s) moved in {:.1} s\n",
        i.since_start_s,
        rows.len(),
        i.length_s
    );
    if !rows.is_empty() {
        let mut t = Table::new(&["COUNTER", "VALUE", "CHANGE", "PER_S"]);
        for (name, now, delta, rate) in rows {
            t.row(vec![
                name,
                now.to_string(),
                format!("{delta:+}"),
                format!("{rate:.1}"),
            ]);
        }
        s.push_str(&t.render());
    }
    s
}

/// One interval of `counters --watch --json`: one object (printed on one line).
pub fn counters_delta_json(prev: &[CounterSet], cur: &[CounterSet], i: Interval) -> Value {
    let rows = moved(prev, cur, i.length_s);
    let total: Map<String, Value> = total(cur)
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(*v)))
        .collect();
    let change: Map<String, Value> = rows
        .iter()
        .map(|(k, _, d, _)| {
            (
                k.clone(),
                Value::from(i64::try_from(*d).unwrap_or(i64::MAX)),
            )
        })
        .collect();
    let per_s: Map<String, Value> = rows
        .iter()
        .map(|(k, _, _, r)| (k.clone(), json!(r)))
        .collect();
    json!({
        "t_s": i.since_start_s,
        "interval_s": i.length_s,
        "total": total,
        "change": change,
        "per_s": per_s,
    })
}

/// `iwarpctl counters --json`: `{"cores": [{"core": 0, "values": {..}}, ..], "total": {..}}`.
pub fn counters_json(sets: &[CounterSet]) -> Value {
    let values = |s: &CounterSet| -> Map<String, Value> {
        s.values
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(*v)))
            .collect()
    };
    let cores: Vec<Value> = sets
        .iter()
        .filter_map(|s| s.core.map(|c| json!({ "core": c, "values": values(s) })))
        .collect();
    let total = sets
        .iter()
        .find(|s| s.core.is_none())
        .map(|s| Value::Object(values(s)));
    json!({ "cores": cores, "total": total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn ports_show_the_device_driver_queues_offloads_and_rss() {
        let mut p = fixture::port();
        p.device = "0000:00:05.0".into();
        p.driver = "net_virtio".into();
        p.queues = 2;
        p.max_rx_queues = 2;
        p.max_tx_queues = 2;
        p.rx_offloads = "udp_cksum tcp_cksum".into();
        p.rss = true;
        p.rss_capa = "ipv4 ipv4-tcp reta 128".into();
        p.link_ups = 2;
        p.link_downs = 1;
        let t = ports_text(&[p.clone()]);
        assert!(t.contains("(0000:00:05.0)"), "{t}");
        assert!(
            t.contains("driver net_virtio; queue pairs 2 in use (device offers rx 2 tx 2)"),
            "{t}"
        );
        assert!(t.contains("rx offloads: udp_cksum tcp_cksum"), "{t}");
        assert!(t.contains("tx offloads: none"), "{t}");
        assert!(
            t.contains("rss: on (capability: ipv4 ipv4-tcp reta 128)"),
            "{t}"
        );
        assert!(t.contains("link changes: 2 up, 1 down"), "{t}");
        let j = ports_json(&[p]);
        assert_eq!(j[0]["driver"], "net_virtio");
        assert_eq!(j[0]["link_downs"], 1);
        assert_eq!(j[0]["rss"], true);
    }

    #[test]
    fn counters_watch_shows_what_moved_and_its_rate() {
        let set = |core, vals: &[(&str, u64)]| CounterSet {
            core,
            values: vals.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        let prev = vec![
            set(Some(0), &[("rx_frames", 10)]),
            set(None, &[("rx_frames", 10), ("conns_live", 3), ("drops", 5)]),
        ];
        let cur = vec![
            set(Some(0), &[("rx_frames", 30)]),
            set(
                None,
                &[
                    ("rx_frames", 30),
                    ("conns_live", 1),
                    ("drops", 5),
                    ("new", 4),
                ],
            ),
        ];
        let i = Interval {
            since_start_s: 4.0,
            length_s: 2.0,
        };
        let t = counters_delta_text(&prev, &cur, i);
        assert!(
            t.starts_with("[     4.0 s] 3 counter(s) moved in 2.0 s"),
            "{t}"
        );
        assert!(
            t.contains("rx_frames") && t.contains("+20") && t.contains("10.0"),
            "{t}"
        );
        assert!(t.contains("conns_live") && t.contains("-2"), "{t}");
        assert!(!t.contains("drops"), "unchanged counters are left out: {t}");
        let j = counters_delta_json(&prev, &cur, i);
        assert_eq!(j["change"]["rx_frames"], 20);
        assert_eq!(j["change"]["conns_live"], -2);
        assert_eq!(j["change"]["new"], 4);
        assert_eq!(j["per_s"]["rx_frames"], 10.0);
        assert_eq!(j["total"]["drops"], 5);
        assert!(j["change"].get("drops").is_none());
        let none = counters_delta_text(&cur, &cur, i);
        assert_eq!(none, "[     4.0 s] 0 counter(s) moved in 2.0 s\n");
    }

    #[test]
    fn units() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(245), "4m05s");
        assert_eq!(duration(3723), "1h02m03s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(16 << 20), "16.0 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn status_as_text_and_json() {
        let s = fixture::status();
        assert_eq!(
            status_text(&s),
            "iwarpd memif-a 0.1.0, pid 4242, up 1h02m03s\n\
             cores 1; clients 2 (5 since start, 0 tearing down)\n\
             port 0: 198.18.0.1/24 mac 02:00:00:00:00:0a mtu 9000 link up 10000 Mbit/s (net_memif0,role=server)\n\
             objects: pds 1 cqs 2 qps 3 srqs 0 mrs 4 mws 1 cm_ids 4 arenas 1 (16.0 MiB)\n"
        );
        let j = status_json(&s);
        assert_eq!(j["ports"][0]["ip"], "198.18.0.1");
        assert_eq!(j["ports"][0]["mac"], "02:00:00:00:00:0a");
        assert_eq!(j["totals"]["arena_bytes"], 16u64 << 20);
        assert_eq!(j["uptime_s"], 3723);
    }

    #[test]
    fn clients_as_text_and_json() {
        let c = fixture::clients();
        assert_eq!(
            clients_text(&c),
            "ID  NAME        PID   UID   GID  CONNECTED  PDS  CQS  QPS  MRS  CM_IDS  ARENA\n \
             1  iwarp-perf  100     0     0  1m01s        1    2    3    5       4  16.0 MiB\n \
             7  iwarpctl    101  1000  1000  0s           0    0    0    0       0  0 B\n"
        );
        let j = clients_json(&c);
        assert_eq!(j[1]["name"], "iwarpctl");
        assert_eq!(j[0]["totals"]["qps"], 3);
    }

    #[test]
    fn objects_filtered_by_kind() {
        let o = fixture::objects();
        assert_eq!(
            objects_text(&o, &["qp"]),
            "CLIENT  KIND  HANDLE   CORE  STATE  DETAIL\n     \
             1  qp    0x10001     0  RTS    sq_posted=12 peer=198.18.0.2:7471\n"
        );
        assert_eq!(
            objects_text(&o, &["srq"]),
            "CLIENT  KIND  HANDLE  CORE  STATE  DETAIL\n"
        );
        let j = objects_json(&o, &["mr", "mw"]);
        assert_eq!(j.as_array().unwrap().len(), 1);
        assert_eq!(j[0]["handle"], 0x0001_2a05);
        assert_eq!(j[0]["core"], Value::Null);
        let j = objects_json(&o, &["qp"]);
        assert_eq!(j[0]["detail"]["peer"], "198.18.0.2:7471");
    }

    #[test]
    fn counters_per_core_and_total() {
        let c = fixture::counters();
        assert_eq!(
            counters_text(&c),
            "COUNTER    CORE0  CORE1  TOTAL\n\
             rx_frames     10      1     11\n\
             tx_frames     20      2     22\n\
             drops          -      3      3\n"
        );
        let j = counters_json(&c);
        assert_eq!(j["cores"][1]["values"]["drops"], 3);
        assert_eq!(j["total"]["tx_frames"], 22);
        assert_eq!(j["cores"].as_array().unwrap().len(), 2);
    }
}
