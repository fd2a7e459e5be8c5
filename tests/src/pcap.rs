//! Capture of the frames the simulated links carry, as a classic pcap file
//! (LINKTYPE_ETHERNET, nanosecond timestamps) readable by tcpdump, Wireshark and tshark.

use std::io::{self, Write};

use iwarp_types::Instant;

/// Magic number of a nanosecond-resolution pcap file.
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;
/// Largest frame we capture whole.
const SNAPLEN: u32 = 262_144;

/// Writes frames with their virtual-time timestamps into any writer.
#[derive(Debug)]
pub struct PcapSink<W: Write> {
    out: W,
    frames: u64,
}

impl<W: Write> PcapSink<W> {
    /// Writes the file header.
    pub fn new(mut out: W) -> io::Result<PcapSink<W>> {
        let mut hdr = [0u8; 24];
        hdr[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_le_bytes());
        hdr[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs: zero.
        hdr[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        hdr[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&hdr)?;
        Ok(PcapSink { out, frames: 0 })
    }

    /// Appends one frame seen at `at`.
    pub fn write_frame(&mut self, at: Instant, frame: &[u8]) -> io::Result<()> {
        let secs = at.as_nanos() / 1_000_000_000;
        let nanos = at.as_nanos() % 1_000_000_000;
        let caplen = frame.len().min(SNAPLEN as usize);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(secs as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&(nanos as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&frame[..caplen])?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout() {
        let mut sink = PcapSink::new(Vec::new()).unwrap();
        sink.write_frame(Instant(1_000_000_123), &[0xaa, 0xbb, 0xcc])
            .unwrap();
        assert_eq!(sink.frames(), 1);
        let bytes = sink.finish().unwrap();
        assert_eq!(
            bytes,
            [
                0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x04, 0x00,
                1, 0, 0, 0, // file header
                1, 0, 0, 0, 123, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, // record header
                0xaa, 0xbb, 0xcc,
            ]
        );
    }
}
