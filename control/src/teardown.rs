//! Teardown of a client (Bye, socket closed, killed, daemon shutdown), in the order of
//! docs/APPS.md: `DetachClient` on every core (QPs aborted, SRQs, CQs, MWs, MRs, PDs
//! and listeners freed there), a `Fence` round trip on every core, then the client's
//! arenas leave the region table and are unmapped; its eventfds and ring area close
//! with it.

use std::time::Duration;

use iwarp_shm_service::ServiceRequest;

use crate::client::Client;
use crate::link::CoreLink;
use crate::server::Ctx;

/// How much longer than one request a detach may take (it frees everything).
const DETACH_FACTOR: u32 = 5;

/// `DetachClient` on every core where the client is attached.
pub(crate) fn detach_all<C: CoreLink>(ctx: &mut Ctx<C>, c: &mut Client) -> bool {
    let t: Duration = ctx.cfg.core_timeout * DETACH_FACTOR;
    let mut ok = true;
    for core in 0..c.attached.len() {
        if c.attached[core] {
            ok &= ctx
                .call_raw(core, ServiceRequest::DetachClient { client: c.id }, t)
                .is_ok();
            c.attached[core] = false;
        }
    }
    ok
}

/// Frees everything of `c` and drops it.
pub(crate) fn teardown<C: CoreLink>(ctx: &mut Ctx<C>, mut c: Client) {
    detach_all(ctx, &mut c);
    let arenas: Vec<_> = c
        .arenas
        .handles()
        .into_iter()
        .filter_map(|h| c.arenas.remove(h))
        .collect();
    if !arenas.is_empty() {
        if ctx.fence_all() {
            for a in &arenas {
                ctx.regions.remove(a.region);
            }
        } else {
            // A core did not answer: it may still hold a reference. The regions leave
            // the table once a later fence succeeds (every request before it, the
            // detach included, was handled).
            ctx.stats.arenas_pending += arenas.len() as u64;
            ctx.pending_regions
                .extend(arenas.into_iter().map(|a| (a.region, a.mapping)));
        }
    }
    ctx.stats.teardowns += 1;
    drop(c);
}
