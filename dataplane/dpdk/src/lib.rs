//! Safe wrappers over DPDK 22.11 (through `iwarp-dpdk-sys`): the EAL and its command
//! line, mempools, Ethernet ports, port queue pairs implementing
//! [`iwarp_runtime::FrameIo`], and launching work on lcores. No iWARP knowledge here.
//!
//! Lifetimes are enforced by reference counting: mempools and ports keep the EAL alive,
//! ports keep their rx mempools alive, queues keep their port and tx pool alive; the
//! EAL is cleaned up after the last of them. A port cannot be stopped or reconfigured
//! while queues of it exist.

pub mod args;
pub mod devargs;
pub mod eal;
pub mod error;
pub mod memif;
pub mod mempool;
pub mod offload;
pub mod port;
pub mod portinfo;
pub mod queue;
pub mod telemetry;

pub use args::{EalArgs, MemoryMode};
pub use eal::Eal;
pub use error::DpdkError;
pub use mempool::Mempool;
pub use port::{DeviceInfo, LinkStatus, Port, PortConfig, PortSetup, PortStats};
pub use queue::{PortQueue, QueueCounters};
