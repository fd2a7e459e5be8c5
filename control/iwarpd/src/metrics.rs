//! The metrics endpoint (`daemon.metrics_listen`): the counters of the stats socket as
//! OpenMetrics text at `GET /metrics`, for Prometheus.
//!
//! The numbers come from the same place as `iwarpd stats`: each core's published
//! [`CoreStats`] (atomics the core stores at most every stats interval) and the link
//! states the control loop publishes. A scrape reads them on this endpoint's own thread;
//! the cores do no work for it.
//!
//! The HTTP side is a few lines on `std::net` rather than an HTTP crate: it answers one
//! fixed resource to a scraper on a trusted network, and a server crate (hyper, tiny_http)
//! would bring a runtime or a thread pool and a large dependency tree for that. Bounds:
//! one connection at a time (a scraper waits in the kernel's accept queue), a request
//! head of at most [`REQUEST_HEAD_MAX`] bytes, [`IO_TIMEOUT`] for reading it and for
//! writing the answer, and the thread polls its stop flag every [`ACCEPT_POLL`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use iwarp_runtime::counters::{CorePlain, PortPlain, DROP_REASON_NAMES};
use iwarp_runtime::CoreStats;

use crate::link::Links;
use crate::metrics_loadgen::LoadgenMetrics;

/// Longest request head (request line and headers) read; longer gets 431.
pub const REQUEST_HEAD_MAX: usize = 8192;
/// How long a client may take to send its request or to take the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle server looks at its stop flag.
pub const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// The media type of the answer (OpenMetrics 1.0.0 text).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The media type of the Prometheus text format 0.0.4, answered to a client whose
/// `Accept` names `text/plain` and not OpenMetrics (older scrapers, `promtool check
/// metrics`, which lints this format).
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition formats served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0: a counter family `x` has samples `x_total`; ends with `# EOF`.
    OpenMetrics,
    /// Prometheus text 0.0.4: the counter family is named `x_total` like its samples.
    Text,
}

impl Format {
    /// The format for a request's `Accept` header value (`None`: no header):
    /// OpenMetrics unless the client asks for `text/plain` and not for OpenMetrics.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("text/plain") && !a.contains("application/openmetrics-text") => {
                Format::Text
            }
            _ => Format::OpenMetrics,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => CONTENT_TYPE,
            Format::Text => CONTENT_TYPE_TEXT,
        }
    }
}

/// Counters of [`CorePlain`] and [`PortPlain`] that are gauges (a level, not a count).
pub const GAUGES: &[&str] = &[
    "apps",
    "tx_pending",
    "conns_live",
    "qps_idle",
    "qps_rts",
    "qps_closing",
    "qps_terminate",
    "qps_error",
];

/// What a scrape reads.
#[derive(Debug)]
pub struct Sources {
    /// Each dataplane core's published counters, by core index.
    pub cores: Vec<Arc<CoreStats>>,
    /// The DPDK port id of each `[[port]]`, in configuration order (the `port` label is
    /// the configuration index, as in the link table).
    pub port_ids: Vec<u16>,
    /// Link states, by configuration index.
    pub links: Arc<Links>,
    /// The load generator's latest figures (`iwarpd loadgen`; empty otherwise).
    pub loadgen: Arc<LoadgenMetrics>,
}

/// The endpoint's socket, bound before DPDK starts (an address in use fails the start-up
/// before anything else is set up); [`MetricsListener::start`] serves it.
#[derive(Debug)]
pub struct MetricsListener {
    listener: TcpListener,
}

impl MetricsListener {
    /// Binds `addr` (errors name `daemon.metrics_listen`).
    pub fn bind(addr: SocketAddr) -> Result<MetricsListener, String> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| format!("daemon.metrics_listen: cannot listen on {addr}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("daemon.metrics_listen: {e}"))?;
        Ok(MetricsListener { listener })
    }

    /// Starts serving `sources` on a thread of its own.
    pub fn start(self, sources: Sources) -> Result<MetricsServer, String> {
        let listener = self.listener;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("daemon.metrics_listen: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("iwarpd-metrics".into())
            .spawn(move || serve(&listener, &sources, &stop2))
            .map_err(|e| format!("daemon.metrics_listen: cannot start its thread: {e}"))?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

/// The endpoint: a listening socket served by a thread of its own until dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving `sources`.
    #[cfg(test)]
    pub fn start(addr: SocketAddr, sources: Sources) -> Result<MetricsServer, String> {
        MetricsListener::bind(addr)?.start(sources)
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, sources: &Sources, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A client that misbehaves only loses its own answer.
                let _ = answer(stream, &mut |f| render(sources, f));
            }
            Err(_) => std::thread::sleep(ACCEPT_POLL),
        }
    }
}

/// Reads one request from `stream` and answers it (then the connection is closed).
fn answer(mut stream: TcpStream, render: &mut dyn FnMut(Format) -> String) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if head.len() > REQUEST_HEAD_MAX {
            break false;
        }
        match stream.read(&mut buf) {
            Ok(0) => break head.contains(&b'\n'),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e),
        }
    };
    let reply = if complete {
        respond(&head, render)
    } else {
        status(
            431,
            "Request Header Fields Too Large",
            "request head too long\n",
        )
    };
    stream.write_all(&reply)?;
    stream.flush()
}

/// The full answer to the request head `head`.
fn respond(head: &[u8], render: &mut dyn FnMut(Format) -> String) -> Vec<u8> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.lines();
    let line = lines.next().unwrap_or_default();
    let accept = lines.take_while(|l| !l.is_empty()).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("accept").then_some(v.trim())
    });
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return status(400, "Bad Request", "malformed request line\n");
    };
    if !version.starts_with("HTTP/1.") {
        return status(505, "HTTP Version Not Supported", "HTTP/1.x only\n");
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != "/metrics" {
        return status(404, "Not Found", "only /metrics is served here\n");
    }
    match method {
        "GET" | "HEAD" => {
            let format = Format::negotiate(accept);
            let body = render(format);
            let mut out = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                format.content_type(),
                body.len()
            )
            .into_bytes();
            if method == "GET" {
                out.extend_from_slice(body.as_bytes());
            }
            out
        }
        _ => {
            let mut r = status(405, "Method Not Allowed", "GET or HEAD only\n");
            // `Allow` belongs to a 405: put it among the headers.
            let at = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
            r.splice(at..at, b"\r\nAllow: GET, HEAD".iter().copied());
            r
        }
    }
}

fn status(code: u16, reason: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// `s` as an OpenMetrics label value (inside the quotes).
pub fn escape_label(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// `s` as OpenMetrics HELP text: one line, whitespace runs folded, `\` and newlines
/// escaped.
pub fn escape_help(s: &str) -> String {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    escape_label(&folded).replace("\\\"", "\"")
}

/// One metric family being written.
struct Family<'a> {
    out: &'a mut String,
    name: String,
    counter: bool,
}

impl Family<'_> {
    fn begin<'a>(
        out: &'a mut String,
        format: Format,
        name: &str,
        counter: bool,
        help: &str,
    ) -> Family<'a> {
        let name = format!("iwarpd_{name}");
        let (kind, family) = match (counter, format) {
            (false, _) => ("gauge", name.clone()),
            (true, Format::OpenMetrics) => ("counter", name.clone()),
            (true, Format::Text) => ("counter", format!("{name}_total")),
        };
        out.push_str(&format!(
            "# TYPE {family} {kind}\n# HELP {family} {}\n",
            escape_help(help)
        ));
        Family { out, name, counter }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: u64) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        let suffix = if self.counter { "_total" } else { "" };
        let labels = if l.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", l.join(","))
        };
        self.out
            .push_str(&format!("{}{suffix}{labels} {value}\n", self.name));
    }
}

/// The exposition of `sources` in `format` (OpenMetrics ends with `# EOF`).
pub fn render(sources: &Sources, format: Format) -> String {
    let snaps: Vec<_> = sources.cores.iter().map(|c| c.snapshot()).collect();
    let core_labels: Vec<String> = sources.cores.iter().map(|c| c.core.to_string()).collect();
    let port_label = |id: u16| {
        sources
            .port_ids
            .iter()
            .position(|p| *p == id)
            .map_or_else(|| format!("id{id}"), |i| i.to_string())
    };
    let mut out = String::with_capacity(64 * 1024);
    // Loop counters, per core.
    let core_values: Vec<Vec<u64>> = snaps.iter().map(|s| values_core(&s.core)).collect();
    for (i, name) in CorePlain::NAMES.iter().enumerate() {
        let mut f = Family::begin(
            &mut out,
            format,
            name,
            !GAUGES.contains(name),
            CorePlain::DOCS[i],
        );
        for (c, v) in core_values.iter().enumerate() {
            f.sample(&[("core", &core_labels[c])], v[i]);
        }
    }
    let mut f = Family::begin(
        &mut out,
        format,
        "qps",
        false,
        "QPs the core's engines hold, all ports (what QP placement reads).",
    );
    for (c, s) in sources.cores.iter().enumerate() {
        f.sample(&[("core", &core_labels[c])], s.qps.load(Ordering::Relaxed));
    }
    let mut f = Family::begin(
        &mut out,
        format,
        "stats_publications",
        true,
        "Times the core published its counters (they are at most one stats interval old).",
    );
    for (c, s) in sources.cores.iter().enumerate() {
        f.sample(
            &[("core", &core_labels[c])],
            s.publications.load(Ordering::Relaxed),
        );
    }
    // Port counters, per core and port.
    let rows: Vec<(usize, String, Vec<u64>, &[u64])> = snaps
        .iter()
        .enumerate()
        .flat_map(|(c, s)| {
            s.ports
                .iter()
                .map(move |(id, pc)| (c, *id, pc))
                .collect::<Vec<_>>()
        })
        .map(|(c, id, pc)| (c, port_label(id), values_port(&pc.c), &pc.drops[..]))
        .collect();
    for (i, name) in PortPlain::NAMES.iter().enumerate() {
        let mut f = Family::begin(
            &mut out,
            format,
            name,
            !GAUGES.contains(name),
            PortPlain::DOCS[i],
        );
        for (c, port, v, _) in &rows {
            f.sample(&[("core", &core_labels[*c]), ("port", port)], v[i]);
        }
    }
    let mut f = Family::begin(
        &mut out,
        format,
        "drops",
        true,
        "Frames the engine dropped, by reason.",
    );
    for (c, port, _, drops) in &rows {
        for (reason, v) in DROP_REASON_NAMES.iter().zip(drops.iter()) {
            f.sample(
                &[
                    ("core", &core_labels[*c]),
                    ("port", port),
                    ("reason", reason),
                ],
                *v,
            );
        }
    }
    // Links, per port.
    let links: Vec<_> = (0..sources.links.len())
        .filter_map(|i| sources.links.get(i).map(|v| (i.to_string(), v)))
        .collect();
    type LinkField = fn(&crate::link::LinkView) -> u64;
    let link_families: [(&str, bool, &str, LinkField); 4] = [
        ("link_up", false, "1 if the port's link is up.", |v| {
            u64::from(v.up)
        }),
        (
            "link_speed_mbps",
            false,
            "The port's link speed, Mbit/s (0 when down or unknown).",
            |v| u64::from(v.speed_mbps),
        ),
        (
            "link_ups",
            true,
            "Changes of the port's link to up since start (the first up included).",
            |v| v.ups,
        ),
        (
            "link_downs",
            true,
            "Changes of the port's link to down since start.",
            |v| v.downs,
        ),
    ];
    for (name, counter, help, field) in link_families {
        let mut f = Family::begin(&mut out, format, name, counter, help);
        for (port, v) in &links {
            f.sample(&[("port", port)], field(v));
        }
    }
    sources.loadgen.render(&mut out, format);
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn values_core(c: &CorePlain) -> Vec<u64> {
    let mut v = Vec::with_capacity(CorePlain::NAMES.len());
    c.for_each(|_, x| v.push(x));
    v
}

fn values_port(c: &PortPlain) -> Vec<u64> {
    let mut v = Vec::with_capacity(PortPlain::NAMES.len());
    c.for_each(|_, x| v.push(x));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_runtime::counters::PortCounters;

    fn sources() -> Sources {
        let s0 = CoreStats::new(0, &[3, 5]);
        let s1 = CoreStats::new(1, &[3, 5]);
        let mut p = PortCounters::default();
        p.c.frames_rx = 7;
        p.c.conns_live = 2;
        p.drops[0] = 4;
        let core = CorePlain {
            iterations: 11,
            apps: 1,
            ..CorePlain::default()
        };
        s0.publish(&core, &[p, PortCounters::default()], 2);
        s1.publish(&CorePlain::default(), &[PortCounters::default(), p], 0);
        let links = Links::new(2);
        links.record(0, true, 10_000);
        Sources {
            cores: vec![Arc::new(s0), Arc::new(s1)],
            port_ids: vec![3, 5],
            links: Arc::new(links),
            loadgen: Arc::default(),
        }
    }

    #[test]
    fn gauges_are_counter_names_and_families_are_unique() {
        for g in GAUGES {
            assert!(
                CorePlain::NAMES.contains(g) || PortPlain::NAMES.contains(g),
                "{g}"
            );
        }
        assert_eq!(CorePlain::DOCS.len(), CorePlain::NAMES.len());
        assert_eq!(PortPlain::DOCS.len(), PortPlain::NAMES.len());
        assert!(CorePlain::DOCS.iter().all(|d| !d.trim().is_empty()));
        let text = render(&sources(), Format::OpenMetrics);
        let mut seen = std::collections::BTreeSet::new();
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = l.split_whitespace().nth(2).unwrap();
            assert!(seen.insert(name.to_string()), "family {name} twice");
        }
    }

    #[test]
    fn render_writes_counters_gauges_and_links_with_labels() {
        let text = render(&sources(), Format::OpenMetrics);
        for line in [
            "# TYPE iwarpd_iterations counter",
            "iwarpd_iterations_total{core=\"0\"} 11",
            "iwarpd_iterations_total{core=\"1\"} 0",
            "# TYPE iwarpd_apps gauge",
            "iwarpd_apps{core=\"0\"} 1",
            "iwarpd_qps{core=\"0\"} 2",
            "# HELP iwarpd_frames_rx Frames received from the port queue.",
            "iwarpd_frames_rx_total{core=\"0\",port=\"0\"} 7",
            "iwarpd_frames_rx_total{core=\"1\",port=\"1\"} 7",
            "iwarpd_frames_rx_total{core=\"0\",port=\"1\"} 0",
            "# TYPE iwarpd_conns_live gauge",
            "iwarpd_conns_live{core=\"1\",port=\"1\"} 2",
            "iwarpd_drops_total{core=\"0\",port=\"0\",reason=\"eth_malformed\"} 4",
            "iwarpd_link_up{port=\"0\"} 1",
            "iwarpd_link_up{port=\"1\"} 0",
            "iwarpd_link_speed_mbps{port=\"0\"} 10000",
            "iwarpd_link_ups_total{port=\"0\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in:\n{text}"
            );
        }
        assert!(text.ends_with("\n# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
        // The 0.0.4 text names the counter family like its samples, and has no EOF.
        let old = render(&sources(), Format::Text);
        assert!(
            old.contains("# TYPE iwarpd_iterations_total counter\n# HELP iwarpd_iterations_total ")
        );
        assert!(old.contains("\n# TYPE iwarpd_apps gauge\n"));
        assert!(old.contains("\niwarpd_iterations_total{core=\"0\"} 11\n"));
        assert!(!old.contains("# EOF"));
    }

    #[test]
    fn escaping() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help("two\n  lines \\ \"q\""), "two lines \\\\ \"q\"");
    }

    fn ask(request: &[u8]) -> String {
        let r = respond(request, &mut |f| match f {
            Format::OpenMetrics => "x 1\n# EOF\n".to_string(),
            Format::Text => "x 2\n".to_string(),
        });
        String::from_utf8(r).unwrap()
    }

    #[test]
    fn http_answers() {
        let ok = ask(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")));
        assert!(ok.contains("Content-Length: 10\r\n"));
        assert!(ok.ends_with("\r\n\r\nx 1\n# EOF\n"));
        assert!(ask(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
        // What Prometheus sends: OpenMetrics preferred.
        let prom = ask(b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n");
        assert!(prom.ends_with("x 1\n# EOF\n"), "{prom}");
        assert!(ask(b"GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n").ends_with("# EOF\n"));
        let old = ask(b"GET /metrics HTTP/1.1\r\naccept:  text/plain\r\n\r\n");
        assert!(
            old.contains(&format!("Content-Type: {CONTENT_TYPE_TEXT}\r\n")),
            "{old}"
        );
        assert!(old.ends_with("\r\n\r\nx 2\n"), "{old}");
        let head = ask(b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"));
        assert!(ask(b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(ask(b"GET /metricsx HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        let post = ask(b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
        assert!(ask(b"\x00\xff\r\n\r\n").starts_with("HTTP/1.1 400 "));
        assert!(ask(b"GET /metrics SPDY/3\r\n\r\n").starts_with("HTTP/1.1 505 "));
    }

    #[test]
    fn the_server_answers_over_tcp_and_bounds_the_request_head() {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), sources()).unwrap();
        let addr = server.local_addr();
        let get = |req: &[u8]| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(req).unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        };
        let ok = get(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.contains("iwarpd_iterations_total{core=\"0\"} 11"));
        // Exactly one byte too many (all of it read: no reset from unread data).
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        long.resize(REQUEST_HEAD_MAX + 1, b'a');
        assert!(get(&long).starts_with("HTTP/1.1 431 "));
        // A second server on the same address is refused with the key's name.
        let e = MetricsServer::start(addr, sources()).unwrap_err();
        assert!(e.contains("daemon.metrics_listen"), "{e}");
        drop(server);
    }
}
