//! The seam between a dataplane core and one queue pair of a port.

/// What a port queue pair offers; read once at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortCaps {
    /// The port's Ethernet address.
    pub mac: [u8; 6],
    /// Largest frame (Ethernet header included, FCS excluded) the port sends and receives.
    pub frame_len_max: usize,
    /// The port computes IPv4 and TCP checksums of frames we send (the engine leaves them).
    pub tx_checksum_offload: bool,
    /// The port verifies IPv4 and TCP checksums of frames we receive and drops bad ones.
    pub rx_checksum_offload: bool,
}

/// What the port did about checksums so far (cumulative), when it offloads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChecksumCounters {
    /// Frames received whose TCP checksum the device verified (or vouched for: a frame
    /// from a local sender whose checksum was never computed).
    pub rx_verified: u64,
    /// Frames received with a bad IPv4 or TCP checksum (found by the device or by the
    /// shell's software check of what the device did not verify): dropped.
    pub rx_bad: u64,
    /// Frames sent with their TCP checksum left to the device.
    pub tx_offloaded: u64,
}

/// What happened to a transmit offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    /// A frame of this many bytes was queued for the device.
    Queued(usize),
    /// `fill` had nothing to send (returned 0); the buffer is kept for the next offer.
    Empty,
    /// No buffer could be had (pool empty or the batch is full): call
    /// [`FrameIo::tx_flush`] and try again later.
    NoBuffer,
}

/// One receive queue and one transmit queue of a port, used by one core only.
///
/// Implementations own their buffers (DPDK mbufs, preallocated memory); no call may
/// allocate, lock or make a system call on the fast path.
pub trait FrameIo {
    /// Receives up to `max` frames and calls `on_frame` with the bytes of each (valid only
    /// during the call; the buffer is released afterwards). Returns the number of frames.
    /// The burst is the frames the device had when the call began: none that arrives
    /// during the `on_frame` calls is in it (the core's `App::before_frames` relies on
    /// it).
    fn rx_burst(&mut self, max: usize, on_frame: &mut dyn FnMut(&[u8])) -> usize;

    /// Offers a transmit buffer of [`PortCaps::frame_len_max`] bytes to `fill`, which
    /// writes one frame at its start and returns the frame's length, or 0 if it has
    /// nothing to send. Queued frames go out at the next [`FrameIo::tx_flush`] (or when the
    /// implementation's batch is full).
    fn tx_frame(&mut self, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> TxOutcome;

    /// Hands the queued frames to the device. Returns how many are still queued because
    /// the device pushed back (they go out at a later flush; none is dropped silently).
    fn tx_flush(&mut self) -> usize;

    /// The port's capabilities.
    fn caps(&self) -> PortCaps;

    /// The checksum work of the device so far (zero for a port that offloads none).
    fn checksum_counters(&self) -> ChecksumCounters {
        ChecksumCounters::default()
    }
}
