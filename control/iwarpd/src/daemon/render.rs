//! The text and JSON of `iwarpd stats` (the stats socket).

use iwarp_runtime::Snapshot;

use crate::apps::Shared;

use super::CoreHandle;

pub(super) fn stats(
    cores: &[CoreHandle],
    servers: &[Shared],
    links: &crate::link::Links,
    json: bool,
) -> String {
    let per: Vec<Snapshot> = cores.iter().map(|c| c.stats.snapshot()).collect();
    let total = Snapshot::sum(per.iter());
    let reports: Vec<iwarp_loadgen::ServerReport> = servers
        .iter()
        .filter_map(|s| s.lock().ok().and_then(|r| r.server))
        .collect();
    if json {
        stats_json(&total, &per, &reports, links)
    } else {
        let mut s = format!("total ({} cores)\n{total}\n{}", per.len(), links.render());
        for (i, c) in per.iter().enumerate() {
            s.push_str(&format!("core {i}\n{c}\n"));
        }
        for (i, r) in reports.iter().enumerate() {
            s.push_str(&format!("load generator server, core {i}\n{r}\n"));
        }
        s
    }
}

/// `iwarpd stats --json`: `{"total":{..},"cores":[..],"loadgen_server":[..],"links":[..]}`
/// and a newline. The counters' objects are the runtime's own JSON (`Snapshot::to_json`).
fn stats_json(
    total: &Snapshot,
    per: &[Snapshot],
    reports: &[iwarp_loadgen::ServerReport],
    links: &crate::link::Links,
) -> String {
    use serde_json::value::RawValue;

    #[derive(serde::Serialize)]
    struct Stats<'a> {
        total: Box<RawValue>,
        cores: Vec<Box<RawValue>>,
        loadgen_server: &'a [iwarp_loadgen::ServerReport],
        links: Vec<crate::link::LinkJson>,
    }
    let raw = |s: &Snapshot| {
        RawValue::from_string(s.to_json())
            .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"))
    };
    let stats = Stats {
        total: raw(total),
        cores: per.iter().map(raw).collect(),
        loadgen_server: reports,
        links: links.json_items(),
    };
    let mut s = serde_json::to_string(&stats).unwrap_or_default();
    s.push('\n');
    s
}
