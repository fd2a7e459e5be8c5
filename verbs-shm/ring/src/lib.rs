//! Shared-memory rings between a verbs client process and the dataplane core that owns
//! its QP (issue 4, scope item 2).
//!
//! A ring is a single-producer / single-consumer queue of fixed-size slots living in a
//! memory mapping (memfd or hugetlbfs) shared by two processes:
//!
//! | ring      | producer          | consumer          | slot                      |
//! |-----------|-------------------|-------------------|---------------------------|
//! | SQ        | client            | dataplane core    | [`SEND_SLOT_SIZE`] bytes  |
//! | RQ, SRQ   | client            | dataplane core    | [`RECV_SLOT_SIZE`] bytes  |
//! | CQ        | dataplane core    | client            | [`CQE_SLOT_SIZE`] bytes   |
//!
//! The layout of the mapping is one `#[repr(C)]` ABI definition ([`RingHeader`], then the
//! slots) with a magic number and a version. The doorbell is the producer index: the
//! producer writes the slot, then publishes the index with a `Release` store; the
//! consumer polls it with an `Acquire` load. No system call on either side.
//!
//! The other side of a ring may be malicious. The code never trusts it:
//! - each side keeps its own index privately and only *publishes* it; the other side's
//!   index is read, checked against the capacity (`0 <= produced - consumed <= entries`)
//!   and a violation is a [`RingError::Corrupt`], never an out-of-range access;
//! - a slot is copied out of shared memory word by word before it is decoded, and the
//!   decoders ([`decode_send_wr`], [`decode_recv_wr`], [`decode_cqe`]) validate every
//!   field: a malformed or torn slot is an error, never undefined behaviour or a panic;
//! - the geometry (entries, slot size) is checked once at attach time against the
//!   caller's own [`RingLayout`] and never re-read from shared memory.
//!
//! All shared-memory accesses are atomic (indices `Acquire`/`Release`, slot words
//! `Relaxed`), so concurrent writes by the other process are not data races. The index
//! protocol is model-checked with `loom` (`RUSTFLAGS="--cfg loom" cargo test -p
//! iwarp-shm-ring --release --test loom`), which builds this same code over loom's
//! atomics.

mod abi;
mod area;
mod cqe_slot;
mod error;
mod recv_slot;
mod region;
mod ring;
mod send_slot;
mod sgl;

pub use abi::{RingHeader, RingKind, RingLayout, CACHE_LINE, RING_MAGIC, RING_VERSION};
pub use area::{
    AreaView, ClientPage, CqControl, DoorbellBlock, DoorbellIter, DoorbellSet, RingHeap,
    AREA_MAGIC, AREA_VERSION, ARM_NEXT, ARM_OFF, ARM_SOLICITED, CLIENT_PAGE_BYTES,
    CQ_CONTROL_BYTES, CQ_CONTROL_OFFSET, DAEMON_GONE, DAEMON_RUNNING, DOORBELL_BITS,
    DOORBELL_BLOCK_BYTES, DOORBELL_OFFSET, DOORBELL_WORDS, MAX_CORES, MAX_CQS_PER_CLIENT,
    RING_AREA_BYTES, RING_HEAP_OFFSET,
};
pub use cqe_slot::{decode_cqe, encode_cqe, CqeSlot, CQE_SLOT_SIZE};
pub use error::{LayoutError, RingError, SlotError, WrDecodeError};
pub use recv_slot::{decode_recv_wr, encode_recv_wr, RecvSlot, RECV_SLOT_SIZE};
pub use region::Region;
pub use ring::{Consumer, Producer};
pub use send_slot::{
    decode_send_wr, decode_send_wr_into, encode_send_wr, SendSlot, WrOpcode, SEND_SLOT_SIZE,
};
pub use sgl::SgeSlot;
