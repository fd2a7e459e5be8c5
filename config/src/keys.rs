//! Every key of the file, documented once. `iwarpd config-keys` (and `--help-config`)
//! prints this table with each key's default taken from [`Config::default`], and the
//! loader uses it to reject unknown keys by name with a suggestion.

use std::fmt::Write as _;

use crate::error::ConfigError;
use crate::Config;

/// One key of the file.
#[derive(Clone, Copy, Debug)]
pub struct KeyDoc {
    /// Dotted path; `port[]` stands for every `[[port]]` entry.
    pub key: &'static str,
    /// What it means, with units and accepted values.
    pub doc: &'static str,
    /// A value in TOML syntax, for keys that are unset or empty by default.
    pub example: Option<&'static str>,
}

const fn k(key: &'static str, doc: &'static str) -> KeyDoc {
    KeyDoc {
        key,
        doc,
        example: None,
    }
}

const fn e(key: &'static str, doc: &'static str, example: &'static str) -> KeyDoc {
    KeyDoc {
        key,
        doc,
        example: Some(example),
    }
}

/// The sections, in file order, with what they hold.
pub const SECTIONS: &[(&str, &str)] = &[
    (
        "daemon",
        "identity of this daemon, logging, statistics, shutdown",
    ),
    ("eal", "how DPDK's environment starts (hugepages or not)"),
    (
        "cores",
        "which CPUs run the dataplane and control threads; QP placement",
    ),
    (
        "port",
        "[[port]], one or more: a NIC or virtual device and the IPv4 interface on it",
    ),
    (
        "limits",
        "bounds of each engine (one engine per port per dataplane core); all preallocated",
    ),
    ("ip", "IPv4 and ARP"),
    (
        "mpa",
        "MPA defaults of every connection (RFC 5044, RFC 6581)",
    ),
    ("tcp", "TCP tunables of every connection"),
    ("capture", "pcap capture of what the ports send and receive"),
    (
        "loadgen",
        "server side of the built-in load generator (the client is `iwarpd loadgen`)",
    ),
    (
        "control",
        "the verbs socket applications use (docs/APPS.md): access policy and per-client limits",
    ),
];

/// Every key, in file order.
pub const KEYS: &[KeyDoc] = &[
    k("daemon.name", "Name of this daemon: DPDK file prefix, default stats and memif socket names, log lines. Letters, digits, `-`, `_`; at most 32. Two daemons on one host need distinct names."),
    k("daemon.log_level", "error | warn | info | debug | trace."),
    k("daemon.log_format", "Log lines on stderr: text (time, level, daemon, message, fields) | json (one JSON object per line)."),
    e("daemon.stats_socket", "Unix socket for `iwarpd stats`. Unset: /run/iwarpd/<name>.sock; \"\": no socket.", "\"/run/iwarpd/a.sock\""),
    k("daemon.stats_interval_ms", "Print counters every this many ms while running (0: only at exit)."),
    e("daemon.metrics_listen", "IP:PORT serving the counters as OpenMetrics text at GET /metrics (Prometheus). Unset: no endpoint.", "\"127.0.0.1:9464\""),
    k("daemon.shutdown_grace_ms", "On SIGINT/SIGTERM, how long QPs may take to flush and close before ports stop anyway, ms."),
    k("eal.hugepages", "auto: hugepages (--in-memory) if reserved, else --no-huge with a warning | required: fail without them | off: never."),
    k("eal.no_huge_memory_mb", "DPDK memory in no-huge mode, MiB (-m)."),
    k("eal.telemetry", "DPDK telemetry socket (/var/run/dpdk/<name>/dpdk_telemetry.v2) with iwarpd's counters: /iwarp/counters, /iwarp/core,N, /iwarp/port,N (dpdk-telemetry.py -f <name>). false: --no-telemetry."),
    e("eal.extra_args", "More EAL arguments, after iwarpd's own. May not repeat what iwarpd sets (-l, --file-prefix, --vdev, -a, -m, --no-huge, --in-memory...).", "[\"--log-level=pmd.net.memif:debug\"]"),
    e("cores.dataplane", "CPUs running one busy-polling dataplane core each. Empty: one core on the last online CPU.", "[1]"),
    e("cores.control", "CPUs the control thread may use (not dataplane CPUs). Empty: the online CPUs without a dataplane core (all of them if every one has one).", "[0]"),
    k("cores.qp_placement", "How QPs are spread over dataplane cores: least-loaded | round-robin | hash (of the 4-tuple)."),
    k("port[].device", "PCI address (0000:03:00.0) or vdev string: net_memif<N>,role=server|client,socket=/path[,bsize=N] | net_af_packet<N>,iface=IF[,framesz=N,...] | net_af_xdp<N>,iface=IF[,start_queue=N,queue_count=N] | net_tap<N>[,iface=IF] | net_ring<N>. Required in every [[port]]. Default port: net_memif0,role=server,socket=/run/iwarpd/<name>.memif (abstract socket, no file)."),
    k("port[].ipv4", "Our IPv4 address on this port."),
    k("port[].prefix_len", "On-link prefix length (0..=32)."),
    e("port[].gateway", "Next hop for off-link destinations; must be on-link. Unset: off-link destinations are unreachable.", "\"198.18.0.254\""),
    k("port[].mtu", "IP MTU, 576..=9000. Above 1500 the port must carry jumbo frames: memif needs bsize >= MTU+14, af_packet framesz >= MTU+78; af_xdp stops at 3542, tap at 1500."),
    e("port[].mac", "Our Ethernet address. Unset: the port's own.", "\"02:00:00:00:00:01\""),
    k("port[].rx_desc", "Receive descriptors per queue; power of two, 64..=16384."),
    k("port[].tx_desc", "Transmit descriptors per queue; power of two, 64..=16384."),
    k("port[].burst", "Frames per receive burst of a dataplane core, 1..=512 (small bursts let both ends of a link work at once)."),
    k("port[].checksum", "IPv4/TCP checksums: auto (NIC if offered, else software) | offload (NIC, required) | software | trust-link (neither computed nor verified: only for memif between two iwarpd on one host; the MPA CRC still protects payloads)."),
    k("port[].steering", "How frames reach their core: auto (RSS when offered and >1 core, else software) | rss (required) | software (one queue, dispatched)."),
    k("port[].mbufs", "Packet buffers per dataplane core for this port (at least rx_desc + tx_desc + 2 bursts)."),
    k("limits.max_qps", "QPs per engine."),
    k("limits.max_conns", "TCP connections per engine, TIME-WAIT included (>= max_qps)."),
    k("limits.max_cqs", "Completion queues per engine."),
    k("limits.max_cqe", "Entries of one CQ (CQ depth)."),
    k("limits.max_mrs", "Memory regions per engine (regions and windows share max_mrs + max_mws STags)."),
    k("limits.max_mws", "Memory windows per engine."),
    k("limits.max_pds", "Protection domains per engine."),
    k("limits.max_srqs", "Shared receive queues per engine."),
    k("limits.max_srq_wr", "Outstanding WRs of one SRQ."),
    k("limits.max_sq_wr", "Outstanding WRs of one send queue (SQ depth)."),
    k("limits.max_rq_wr", "Outstanding WRs of one receive queue (RQ depth)."),
    k("limits.max_sge", "Scatter/gather elements per WR (at most 6)."),
    k("limits.max_ird", "Inbound RDMA Reads outstanding per QP (IRD, at most 16383)."),
    k("limits.max_ord", "Outbound RDMA Reads outstanding per QP (ORD, at most 16383)."),
    k("limits.max_listeners", "Listening ports per engine."),
    k("limits.backlog_max", "Largest backlog of one listener."),
    k("limits.ephemeral_port_min", "Lowest local port of active opens (>= 1024)."),
    k("limits.ephemeral_port_max", "Highest local port of active opens (range of at least 64)."),
    k("limits.event_queue_len", "Engine events queued between two polls."),
    k("limits.max_async_events", "Asynchronous verbs events queued (overflow counted)."),
    k("limits.max_cq_events", "CQ notifications queued (overflow counted)."),
    k("limits.max_cehs", "Completion event handler ids."),
    k("limits.ctrl_tx_frames", "Control frames (ARP, ICMP, RST) queued for transmission."),
    k("limits.tx_turn_segs_max", "Segments a connection sends in one transmit turn at most before the next ready connection's (1..=1024): longer turns cost less per segment, shorter ones interleave busy connections more finely. One while connections wait for an FPDU ring."),
    e("limits.stag_seed", "STag randomisation seed, 16 hex digits (every engine of the daemon derives the same one: MRs are replicated on all). Unset: random at start.", "\"0123456789abcdef\""),
    k("ip.ttl", "TTL of the IPv4 packets we send."),
    k("ip.arp_cache_entries", "ARP cache entries per engine."),
    k("ip.arp_entry_timeout_ms", "Lifetime of a resolved ARP entry, ms."),
    k("ip.arp_retry_ms", "Interval between ARP requests while resolving, ms."),
    k("ip.arp_retries_max", "ARP requests before a destination is unreachable."),
    k("ip.arp_pending_frames", "Frames held (all next hops) while resolving."),
    k("ip.arp_pending_per_hop", "Frames held per next hop (<= arp_pending_frames)."),
    k("mpa.revision", "MPA revision: 1 (RFC 5044) or 2 (RFC 6581)."),
    k("mpa.crc", "CRC: request (ask; used on every connection) | off (use only if the peer asks) | forbid (refuse a peer that asks; interop tests)."),
    k("mpa.markers", "Markers in the stream we receive: off (insert if the peer asks) | request | refuse (as Linux siw)."),
    k("mpa.p2p", "Initiators ask for peer-to-peer mode and send a ready-to-receive message first (revision 2)."),
    k("mpa.rtr", "RTR types: offered by initiators (write, read) and accepted by responders (write, read, send)."),
    k("mpa.ird", "IRD an initiator offers (<= limits.max_ird)."),
    k("mpa.ord", "ORD an initiator offers (<= limits.max_ord)."),
    k("mpa.private_data_max", "Largest handshake private data, bytes (<= 512)."),
    k("mpa.handshake_timeout_ms", "Wait for the peer's Request or Reply, ms: from the SYN for a passive open, from the TCP connection for an active one (whose connect is bounded by tcp.syn_retries before that)."),
    k("mpa.fpdu_stall_timeout_ms", "How long an FPDU whose first bytes arrived may go without another byte before the stream is declared lost (Terminate 0x2001: a corrupted length, or a peer whose retransmissions fail), ms; 0 = never. Default two of Linux's largest RTO intervals."),
    k("mpa.tx_queue_len", "FPDUs queued or unacknowledged per connection."),
    k("mpa.tx_ulpdu_max_bytes", "Largest ULPDU we send (FPDUs follow the MSS)."),
    k("mpa.rx_ulpdu_max_bytes", "Largest inbound ULPDU (<= 65535); longer gets a Terminate. 9216 covers MTU 9000."),
    k("mpa.responder_waits_for_first_fpdu", "A responder sends no FPDU before it received one (RFC 5044 7.1.2)."),
    k("mpa.place_before_crc", "Place a whole FPDU's payload (Write, Read Response, Send; >= 256 bytes) in the pass that computes its CRC, then check it before anything else happens: one pass over received bytes, as Linux siw. A CRC error then leaves the placed bytes where the (maybe corrupted) header pointed, inside memory the peer may write. Default false: nothing is placed before its CRC verified."),
    k("mpa.initiator_nudge_ms", "Initiator: ms until a zero-length RDMA Write nudges a responder that has sent nothing (siw; then x4, x16, x64). 0 = off."),
    k("mpa.pool_rings", "FPDU rings the engine lends at once (connections with FPDUs in flight); others wait for one, first come first served, and while they wait a holder queues at most 64 FPDUs per turn."),
    k("mpa.pool_staging", "Receive staging buffers lent at once (connections inside an FPDU that straddles segments)."),
    k("tcp.congestion", "cubic | newreno."),
    k("tcp.rto_ms_initial", "Initial retransmission timeout, ms."),
    k("tcp.rto_ms_min", "Minimum RTO, ms."),
    k("tcp.rto_ms_max", "Maximum RTO, ms."),
    k("tcp.mss_bytes", "Cap on the MSS (536..=8960); the port's MTU lowers it further."),
    k("tcp.rcv_wnd_bytes", "Receive window advertised, bytes."),
    k("tcp.wscale", "Window scale shift offered (0..=14)."),
    k("tcp.sack", "Offer and accept SACK."),
    k("tcp.timestamps", "Offer and accept timestamps."),
    k("tcp.ts_tick_us", "Timestamp clock tick, us."),
    k("tcp.delayed_ack_us", "Delayed ACK timer, us (0: ACK at once)."),
    k("tcp.max_retries", "Consecutive RTOs before a connection is lost."),
    k("tcp.syn_retries", "SYN retransmissions before a connection attempt fails."),
    k("tcp.keepalive", "Send keepalive probes on idle connections."),
    k("tcp.keepalive_idle_ms", "Idle time before the first probe, ms."),
    k("tcp.keepalive_interval_ms", "Time between unanswered probes, ms (>= 1000)."),
    k("tcp.keepalive_count", "Unanswered probes before the connection is lost."),
    k("tcp.ooo_max_bytes", "Out-of-order bytes held per connection (allocated on loss only)."),
    k("tcp.ooo_max_ranges", "Out-of-order ranges held per connection."),
    k("tcp.sack_max_ranges", "SACKed ranges the sender keeps."),
    k("tcp.max_inflight_segments", "Data segments in flight per connection."),
    k("tcp.initial_cwnd_segments", "Initial congestion window, segments."),
    k("tcp.msl_ms", "Maximum segment lifetime, ms (TIME-WAIT is twice this)."),
    k("tcp.challenge_acks_per_s", "Per connection, challenge ACKs (RFC 5961) and ACKs answering out-of-window data per second at most."),
    k("tcp.invalid_ack_interval_ms", "Least time between ACKs answering unacceptable segments, ms (0: no limit)."),
    k("tcp.buffer_release_ms", "Idle loss-recovery buffers are released after this, ms."),
    k("tcp.close_timeout_ms", "A close iwarpd started may take this long before the connection is reset, ms."),
    k("tcp.no_connection_rsts_per_s", "RSTs per second at most, per dataplane core, answering segments for no connection (the rest are dropped and counted: tcp_rsts_rate_limited)."),
    k("tcp.relisten_grace_ms", "After a listener is removed, SYNs for its port are dropped, not refused, this long (0: refused at once), ms."),
    e("tcp.isn_secret", "RFC 6528 ISN secret, 32 hex digits. Unset: random at start.", "\"000102030405060708090a0b0c0d0e0f\""),
    e("capture.path", "pcap file of what the ports send and receive. Empty: no capture.", "\"/tmp/iwarpd.pcap\""),
    k("capture.snaplen", "Bytes kept per frame (64..=65535)."),
    k("capture.ring_slots", "Frames buffered between the cores and the writer (power of two); overflow is counted."),
    e("capture.ports", "Port indices captured. Empty: all.", "[0]"),
    k("loadgen.listen_port", "TCP port of the load generator server (0: off)."),
    k("loadgen.verify", "Check every received byte against the agreed pattern."),
    k("loadgen.buffer_bytes", "Registered buffer per QP, bytes: the largest message a client may use."),
    k("loadgen.recv_depth", "Receives posted per QP for SEND traffic (<= limits.max_rq_wr)."),
    k("control.enabled", "Serve the verbs socket (applications linking iwarp-verbs, iwarpctl)."),
    e("control.socket", "Unix SOCK_SEQPACKET socket of the verbs clients, created mode 0666 (access is checked per connection). Unset: /run/iwarpd/<name>.verbs.", "\"/run/iwarpd/a.verbs\""),
    e("control.allow_users", "Users admitted besides root: names or numeric uids, as strings.", "[\"alice\", \"1000\"]"),
    e("control.allow_groups", "Groups whose members (primary or supplementary) are admitted: names or numeric gids.", "[\"rdma\"]"),
    e("control.admin_users", "Users besides root allowed administration requests (iwarpctl listings of other clients).", "[\"ops\"]"),
    k("control.max_clients", "Clients connected at once (1..=4096); one more is refused with DaemonFull (\"iwarpd is full\")."),
    k("control.hello_timeout_ms", "A connection that has not said Hello within this many ms (1..=600000) is answered NotReady and closed."),
    k("control.max_conns_per_uid", "Connections, welcomed or not yet, one user may hold (1..=4096); root and admin_users are exempt. Past it the user's oldest connection without Hello is closed, or if all are welcomed the new one is refused with LimitReached."),
    k("control.max_pending", "Connections that have not said Hello yet, all users together (1..=4096). When full, a new connection closes the oldest such connection of its own user, else of the user holding the most: a flood from one user never closes another user's."),
    k("control.max_arena_mb", "Arena memory one client may hold, MiB."),
    k("control.max_objects", "Objects of each kind (PDs, CQs, QPs, SRQs, MRs, MWs, CM ids, arenas, channels) one client may hold."),
    k("control.max_qps", "QPs one client may hold (at most control.max_objects counts too); keep it below limits.max_qps so that one client cannot take a core's every QP."),
];

/// `port[3].mtu` → `port[].mtu`.
fn normalise(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The documentation of `key` (`port[0].mtu` and `port[].mtu` alike).
pub fn lookup(key: &str) -> Option<&'static KeyDoc> {
    let n = normalise(key);
    KEYS.iter().find(|k| k.key == n)
}

/// The default of `key` as a TOML value, or `None` if it is unset by default.
fn default_value(defaults: &toml::Table, key: &str) -> Option<toml::Value> {
    let n = normalise(key);
    let (section, name) = n.split_once('.')?;
    let section = section.trim_end_matches("[]");
    let table = match defaults.get(section)? {
        toml::Value::Array(a) => a.first()?,
        v => v,
    };
    table.get(name).cloned()
}

fn default_table() -> toml::Table {
    toml::Table::try_from(Config::default()).unwrap_or_default()
}

/// True if the key (or array element, `eal.extra_args[0]`) holds a string.
pub(crate) fn holds_string(key: &str) -> bool {
    let n = normalise(key);
    let (base, element) = match n.strip_suffix("[]") {
        Some(b) => (b.to_string(), true),
        None => (n, false),
    };
    let Some(doc) = lookup(&base) else {
        return false;
    };
    let value = default_value(&default_table(), &base)
        .filter(|v| !matches!(v, toml::Value::Array(a) if a.is_empty()))
        .or_else(|| {
            doc.example
                .and_then(|ex| format!("v = {ex}").parse::<toml::Table>().ok()?.remove("v"))
        });
    match (value, element) {
        (Some(toml::Value::Array(a)), true) => a.first().is_some_and(toml::Value::is_str),
        (Some(v), false) => v.is_str(),
        _ => false,
    }
}

/// The `_`-separated words of a key, sorted.
fn words(s: &str) -> Vec<&str> {
    let mut w: Vec<&str> = s.split('_').collect();
    w.sort_unstable();
    w
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_key(field: String, section: &str, name: &str) -> ConfigError {
    let prefix = format!("{section}.");
    let candidates = KEYS.iter().filter_map(|k| k.key.strip_prefix(&prefix));
    // Same words in another order (`rto_min_ms`) count as a near miss.
    let best = candidates
        .map(|c| {
            let d = if words(c) == words(name) {
                1
            } else {
                edit_distance(name, c)
            };
            (d, c)
        })
        .min()
        .filter(|(d, c)| *d <= 2.max(c.len() / 3));
    let message = match best {
        Some((_, c)) => format!("unknown key; did you mean `{c}`?"),
        None => format!(
            "unknown key in [{}]; `iwarpd config-keys` lists them",
            section.trim_end_matches("[]")
        ),
    };
    ConfigError::new(field, message)
}

/// Rejects any key the file does not have, naming it (`port[0].mtuu`) with the nearest
/// known key.
pub(crate) fn check_known(doc: &toml::Table) -> Result<(), ConfigError> {
    let names: Vec<&str> = SECTIONS.iter().map(|(s, _)| *s).collect();
    for (section, value) in doc {
        if !names.contains(&section.as_str()) {
            let hint = if value.is_table() || value.is_array() {
                format!("unknown section; sections are {}", names.join(", "))
            } else {
                "keys belong in a section such as [daemon]".to_string()
            };
            return Err(ConfigError::new(section.clone(), hint));
        }
        let check_table =
            |prefix: String, norm: &str, t: &toml::Table| -> Result<(), ConfigError> {
                for key in t.keys() {
                    if lookup(&format!("{norm}.{key}")).is_none() {
                        return Err(unknown_key(format!("{prefix}.{key}"), norm, key));
                    }
                }
                Ok(())
            };
        match (section.as_str(), value) {
            ("port", toml::Value::Array(entries)) => {
                for (i, entry) in entries.iter().enumerate() {
                    match entry {
                        toml::Value::Table(t) => check_table(format!("port[{i}]"), "port[]", t)?,
                        _ => {
                            return Err(ConfigError::new(
                                format!("port[{i}]"),
                                "must be a table, written [[port]]",
                            ))
                        }
                    }
                }
            }
            ("port", _) => {
                return Err(ConfigError::new(
                    "port",
                    "must be an array of tables, written [[port]]",
                ))
            }
            (_, toml::Value::Table(t)) => check_table(section.clone(), section, t)?,
            (_, _) => {
                return Err(ConfigError::new(
                    section.clone(),
                    format!("must be a table, written [{section}]"),
                ))
            }
        }
    }
    Ok(())
}

/// Every key with its default and documentation, grouped by section: the text of
/// `iwarpd config-keys` and `--help-config`.
pub fn render() -> String {
    let defaults = default_table();
    let mut out = String::from(
        "iwarpd configuration keys (TOML). Every key is optional; a file may hold any subset.\n\
         Override any key on the command line with --set KEY=VALUE (port.0.mtu=9000 or port[0].mtu=9000).\n",
    );
    for (section, what) in SECTIONS {
        let header = if *section == "port" {
            "[[port]]".to_string()
        } else {
            format!("[{section}]")
        };
        let _ = write!(out, "\n{header}  {what}\n");
        let prefix = if *section == "port" { "port[]." } else { "" };
        let prefix = if prefix.is_empty() {
            format!("{section}.")
        } else {
            prefix.to_string()
        };
        for key in KEYS.iter().filter(|k| k.key.starts_with(&prefix)) {
            let name = &key.key[prefix.len()..];
            let shown = match default_value(&defaults, key.key) {
                Some(v) => format!("{name} = {v}"),
                None => format!("{name}   (unset; e.g. {})", key.example.unwrap_or("?")),
            };
            let _ = writeln!(out, "  {shown}");
            let _ = writeln!(out, "      {}", key.doc);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every key the default configuration serialises.
    fn serialised_keys() -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (section, v) in default_table() {
            let (prefix, table) = match &v {
                toml::Value::Array(a) => ("port[]".to_string(), a[0].as_table().unwrap().clone()),
                toml::Value::Table(t) => (section.clone(), t.clone()),
                _ => panic!("{section}"),
            };
            for k in table.keys() {
                out.insert(format!("{prefix}.{k}"));
            }
        }
        out
    }

    #[test]
    fn the_table_documents_exactly_the_keys_of_the_file() {
        let documented: BTreeSet<String> = KEYS.iter().map(|k| k.key.to_string()).collect();
        assert_eq!(documented.len(), KEYS.len(), "a key is documented twice");
        let serialised = serialised_keys();
        for k in &serialised {
            assert!(documented.contains(k), "{k} is not documented");
        }
        // Documented keys missing from the default output are the unset optional ones:
        // each has an example, and the file accepts it.
        for k in documented.difference(&serialised) {
            let doc = lookup(k).unwrap();
            let ex = doc
                .example
                .unwrap_or_else(|| panic!("{k} needs an example"));
            let o = crate::Override::parse(&format!("{}={ex}", k.replace("[]", "[0]"))).unwrap();
            crate::Config::from_toml_with("", &[o]).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        for (s, _) in SECTIONS {
            assert!(KEYS.iter().any(|k| k.key.starts_with(s)), "{s} is empty");
        }
        for k in KEYS {
            assert!(!k.doc.is_empty(), "{}", k.key);
        }
    }

    #[test]
    fn render_lists_every_key_with_its_default() {
        let text = render();
        assert!(text.contains("[[port]]"));
        assert!(text.contains("  mtu = 1500\n"));
        assert!(text.contains("  name = \"iwarpd\"\n"));
        assert!(text.contains("gateway   (unset; e.g. \"198.18.0.254\")"));
        for k in KEYS {
            let name = k.key.rsplit('.').next().unwrap();
            assert!(text.contains(&format!("  {name} ")), "{}", k.key);
        }
    }

    #[test]
    fn unknown_keys_are_named_with_a_suggestion() {
        let check = |text: &str| check_known(&text.parse::<toml::Table>().unwrap()).unwrap_err();
        let e = check("[tcp]\nrto_min_ms = 5\n");
        assert_eq!(e.field, "tcp.rto_min_ms");
        assert!(e.message.contains("did you mean `rto_ms_min`"), "{e}");
        let e = check("[[port]]\ndevice = \"net_ring0\"\n[[port]]\ndevcie = \"x\"\n");
        assert_eq!(e.field, "port[1].devcie");
        assert!(e.message.contains("`device`"), "{e}");
        let e = check("[deamon]\nname = \"x\"\n");
        assert_eq!(e.field, "deamon");
        assert!(e.message.contains("unknown section"));
        let e = check("name = \"x\"\n");
        assert_eq!(e.field, "name");
        let e = check("[daemon]\nzzzzzzzzzz = 1\n");
        assert!(e.message.contains("config-keys"), "{e}");
        let e = check("daemon = 1\n");
        assert_eq!(e.field, "daemon");
        let e = check("port = [1]\n");
        assert_eq!(e.field, "port[0]");
    }

    #[test]
    fn string_keys_are_known() {
        assert!(holds_string("daemon.name"));
        assert!(holds_string("port[2].device"));
        assert!(holds_string("port[0].gateway"));
        assert!(holds_string("limits.stag_seed"));
        assert!(holds_string("eal.extra_args[0]"));
        assert!(!holds_string("port[0].mtu"));
        assert!(!holds_string("cores.dataplane[0]"));
        assert!(!holds_string("nope.x"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
