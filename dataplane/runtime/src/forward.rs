//! Forward rings: a frame that reached the wrong core is copied into a bounded ring of
//! preallocated buffers from the receiving core to its owner. One ring per ordered pair
//! of cores; a full ring drops the frame (counted by the sender).

use std::sync::Arc;

use crate::ring::FrameRing;

/// Why a frame travels on a forward ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ForwardKind {
    /// A frame owned by the destination core.
    Owned = 0,
    /// A copy of an ARP frame handled by the receiving core (every core's ARP cache
    /// learns from it).
    ArpCopy = 1,
}

/// Every forward ring of a set of cores.
#[derive(Debug)]
pub struct ForwardMesh {
    /// `rings[src][dst]`; `None` on the diagonal.
    rings: Vec<Vec<Option<Arc<FrameRing>>>>,
}

/// One core's ends of the mesh: rings to every other core and from every other core.
#[derive(Debug, Default)]
pub struct ForwardEnds {
    /// `out[dst]`: frames this core sends to core `dst` (`None` for itself).
    pub out: Vec<Option<Arc<FrameRing>>>,
    /// Rings other cores send to this core on.
    pub inbound: Vec<Arc<FrameRing>>,
}

impl ForwardMesh {
    /// Rings between `cores` cores, each of `frames` buffers of `frame_len` bytes.
    pub fn new(cores: usize, frames: usize, frame_len: usize) -> ForwardMesh {
        let rings = (0..cores)
            .map(|src| {
                (0..cores)
                    .map(|dst| (src != dst).then(|| Arc::new(FrameRing::new(frames, frame_len))))
                    .collect()
            })
            .collect();
        ForwardMesh { rings }
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.rings.len()
    }

    /// Core `core`'s ends (empty if out of range).
    pub fn ends(&self, core: usize) -> ForwardEnds {
        let Some(row) = self.rings.get(core) else {
            return ForwardEnds::default();
        };
        let inbound = self
            .rings
            .iter()
            .filter_map(|r| r.get(core).and_then(Clone::clone))
            .collect();
        ForwardEnds {
            out: row.clone(),
            inbound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_types::Instant;

    #[test]
    fn mesh_connects_every_ordered_pair() {
        let m = ForwardMesh::new(3, 2, 64);
        let e0 = m.ends(0);
        let e2 = m.ends(2);
        assert!(e0.out[0].is_none());
        assert_eq!(e2.inbound.len(), 2);
        let to2 = e0.out[2].as_ref().unwrap();
        assert!(to2.push_copy(b"hi", 7, ForwardKind::Owned as u8, Instant::ZERO));
        let got: Vec<_> = e2.inbound.iter().filter_map(|r| r.pop()).collect();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].bytes(), got[0].port), (&b"hi"[..], 7));
        assert!(m.ends(9).out.is_empty());
    }
}
