//! [`ShmService`]: the App (placeholder while the ring serving is written).

use std::sync::Arc;

use crate::handle::{ServiceHandle, Shared};

/// Chooses local ports for active opens: `(remote_ip, remote_port, local_port)` → true if
/// the return traffic of that 4-tuple is steered to this core.
pub type PortFilter = Arc<dyn Fn(core::net::Ipv4Addr, u16, u16) -> bool + Send + Sync>;

/// Limits of one service.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Clients attached at most.
    pub max_clients: usize,
}

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig { max_clients: 64 }
    }
}

/// The per-core service.
pub struct ShmService {
    shared: Arc<Shared>,
    core: usize,
}

/// A channel to the service of core `core` with queues of `capacity` entries.
pub fn service_channel(core: usize, capacity: usize) -> (ServiceHandle, ShmService) {
    let shared = Arc::new(Shared::new(capacity));
    (
        ServiceHandle::new(shared.clone(), core),
        ShmService { shared, core },
    )
}
