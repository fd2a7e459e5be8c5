//! Link state of the ports, watched from the control thread: each port's
//! `rte_eth_link_get_nowait` is read at most every [`LINK_POLL`] (never per packet, never
//! on a dataplane core); a change is logged with its time and counted, and the state is
//! published where the stats socket, `QueryPort` and `iwarpctl status` read it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the link of every port is read.
pub const LINK_POLL: Duration = Duration::from_millis(100);

/// One port's published link state.
#[derive(Debug, Default)]
pub struct PortLink {
    up: AtomicBool,
    speed_mbps: AtomicU32,
    ups: AtomicU64,
    downs: AtomicU64,
}

/// A port's link as read: (up, speed in Mbit/s, changes to up, changes to down).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkView {
    /// Link up.
    pub up: bool,
    /// Speed, Mbit/s (0 when unknown or down).
    pub speed_mbps: u32,
    /// Changes to up since start (the first up included).
    pub ups: u64,
    /// Changes to down since start.
    pub downs: u64,
}

/// The link states of every port.
#[derive(Debug)]
pub struct Links {
    ports: Vec<PortLink>,
}

impl Links {
    /// `ports` ports, all down.
    pub fn new(ports: usize) -> Links {
        Links {
            ports: (0..ports).map(|_| PortLink::default()).collect(),
        }
    }

    /// Port `i`'s state (`None` for no such port).
    pub fn get(&self, i: usize) -> Option<LinkView> {
        self.ports.get(i).map(|p| LinkView {
            up: p.up.load(Ordering::Relaxed),
            speed_mbps: p.speed_mbps.load(Ordering::Relaxed),
            ups: p.ups.load(Ordering::Relaxed),
            downs: p.downs.load(Ordering::Relaxed),
        })
    }

    /// Records port `i`'s link as just read; returns the change, if it is one.
    pub fn record(&self, i: usize, up: bool, speed_mbps: u32) -> Option<LinkView> {
        let p = self.ports.get(i)?;
        p.speed_mbps
            .store(if up { speed_mbps } else { 0 }, Ordering::Relaxed);
        if p.up.swap(up, Ordering::Relaxed) == up {
            return None;
        }
        if up {
            p.ups.fetch_add(1, Ordering::Relaxed);
        } else {
            p.downs.fetch_add(1, Ordering::Relaxed);
        }
        self.get(i)
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// The table the stats socket prints.
    pub fn render(&self) -> String {
        let mut s = String::from("links\n");
        for i in 0..self.len() {
            if let Some(v) = self.get(i) {
                s.push_str(&format!(
                    "  port {i}: {} {} Mbit/s, link_ups {} link_downs {}\n",
                    if v.up { "up" } else { "down" },
                    v.speed_mbps,
                    v.ups,
                    v.downs
                ));
            }
        }
        s
    }

    /// The items of the JSON array the stats socket answers (`"links":[...]`).
    pub fn json_items(&self) -> Vec<LinkJson> {
        (0..self.len())
            .filter_map(|i| {
                self.get(i).map(|v| LinkJson {
                    port: i,
                    link_up: v.up,
                    speed_mbps: v.speed_mbps,
                    link_ups: v.ups,
                    link_downs: v.downs,
                })
            })
            .collect()
    }
}

/// One port in the stats socket's `links` array.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct LinkJson {
    /// The port's index.
    pub port: usize,
    /// Link up.
    pub link_up: bool,
    /// Speed (0 when down), Mbit/s.
    pub speed_mbps: u32,
    /// Changes to up since start (the first up included).
    pub link_ups: u64,
    /// Changes to down since start.
    pub link_downs: u64,
}

/// Reads the links at most every [`LINK_POLL`]; logs changes.
#[derive(Debug)]
pub struct LinkWatch {
    next: Instant,
}

impl LinkWatch {
    /// A watch that reads at its first [`LinkWatch::poll`].
    pub fn new() -> LinkWatch {
        LinkWatch {
            next: Instant::now(),
        }
    }

    /// If due, reads every port's link with `read(i) -> (up, speed)` and records it in
    /// `links`, logging each change.
    pub fn poll(&mut self, links: &Links, read: &mut dyn FnMut(usize) -> (bool, u32)) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + LINK_POLL;
        for i in 0..links.len() {
            let (up, speed) = read(i);
            if let Some(v) = links.record(i, up, speed) {
                if v.up {
                    tracing::info!(
                        port = i,
                        speed_mbps = v.speed_mbps,
                        link_ups = v.ups,
                        link_downs = v.downs,
                        "port {i}: link up ({} Mbit/s; link_ups {}, link_downs {})",
                        v.speed_mbps,
                        v.ups,
                        v.downs
                    );
                } else {
                    tracing::warn!(
                        port = i,
                        link_ups = v.ups,
                        link_downs = v.downs,
                        "port {i}: link down (link_ups {}, link_downs {}): its connections end by the TCP timers (tcp.max_retries, tcp.rto_ms_max, tcp.keepalive*) unless the link returns",
                        v.ups,
                        v.downs
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_counted_once_and_rendered() {
        let l = Links::new(2);
        assert_eq!(l.get(0), Some(LinkView::default()));
        assert!(
            l.record(0, false, 0).is_none(),
            "down at start is no change"
        );
        let v = l.record(0, true, 10_000).expect("up");
        assert_eq!((v.up, v.speed_mbps, v.ups, v.downs), (true, 10_000, 1, 0));
        assert!(l.record(0, true, 10_000).is_none());
        let v = l.record(0, false, 10_000).expect("down");
        assert_eq!((v.up, v.speed_mbps, v.ups, v.downs), (false, 0, 1, 1));
        assert!(l.record(5, true, 1).is_none());
        assert!(l
            .render()
            .contains("port 0: down 0 Mbit/s, link_ups 1 link_downs 1"));
        assert!(serde_json::to_string(&l.json_items()).unwrap().starts_with(
            "[{\"port\":0,\"link_up\":false,\"speed_mbps\":0,\"link_ups\":1,\"link_downs\":1}"
        ));
    }

    #[test]
    fn the_watch_reads_at_a_bounded_rate() {
        let l = Links::new(1);
        let mut w = LinkWatch::new();
        let mut reads = 0;
        for _ in 0..1000 {
            w.poll(&l, &mut |_| {
                reads += 1;
                (true, 1)
            });
        }
        assert_eq!(reads, 1, "1000 polls within LINK_POLL read once");
        assert!(l.get(0).expect("port").up);
    }
}
