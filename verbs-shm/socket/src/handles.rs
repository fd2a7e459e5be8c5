//! Client-scoped handles. Each is an index into the owning client's table in the control
//! plane (slot and generation packed in a `u32`), meaningless to any other client.

use serde::{Deserialize, Serialize};

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u32);
    };
}

handle!(
    /// A protection domain.
    PdHandle
);
handle!(
    /// A completion queue.
    CqHandle
);
handle!(
    /// A queue pair. Its `u32` is also the QP number the client sees in completions
    /// (`CqeSlot::qp`) and the bit of the QP in its core's doorbell bitmap.
    QpHandle
);
handle!(
    /// A shared receive queue.
    SrqHandle
);
handle!(
    /// A completion channel (an eventfd the client passed).
    ChannelHandle
);
handle!(
    /// A connection-manager identifier (a listener, or a connection being set up or up).
    CmIdHandle
);
handle!(
    /// A memory arena shared with the daemon. Its `u32` is also what a Fast-Register WR
    /// puts in `SendSlot::aux_stag` (the region) with the offset in the arena.
    ArenaHandle
);

/// An STag as the wire carries it (24-bit index, 8-bit key): the lkey/rkey of an MR, an
/// MW or a fast-register MR. Unlike the handles it is not client-scoped (a peer sends it
/// back), but the control plane only accepts STags the client owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StagValue(pub u32);
