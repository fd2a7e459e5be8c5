//! Shared memory of verbs clients: sealed memfd arenas mapped by the daemon and the client, and ShmMemory, the engine's view of them
