//! Two [`Rnic`]s joined directly: ULPDUs pulled from one side with `qp_next_ulpdu` /
//! `fill_ulpdu` are fed to the other's `qp_on_ulpdu` and acknowledged.

use iwarp_types::{
    Access, AsyncEvent, ConnId, CqId, Cqe, PdId, QpId, RecvWr, RegionId, SendFlags, SendOp, SendWr,
    SgList, Sge, Stag, TermCode, VecMemory,
};
use iwarp_wire::rdmap::{Body, Segment, TerminateRepr};

use crate::mem::MrAttr;
use crate::{LlpParams, LlpRole, QpAttr, Rnic, RnicConfig, RnicLimits};

/// Arena size of each side.
pub const ARENA: usize = 4 << 20;

/// Every right a region can have.
pub const ALL: Access = Access(
    Access::LOCAL_READ.0
        | Access::LOCAL_WRITE.0
        | Access::REMOTE_READ.0
        | Access::REMOTE_WRITE.0
        | Access::MW_BIND.0,
);

/// One end: an RNIC with one PD, one CQ, one QP and one arena.
pub struct Side {
    pub rnic: Rnic,
    pub mem: VecMemory,
    pub arena: RegionId,
    pub pd: PdId,
    pub cq: CqId,
    pub qp: QpId,
    /// Bump allocator in the arena.
    next: u64,
}

/// Options of a pair.
#[derive(Clone, Copy)]
pub struct Opts {
    pub ord: u32,
    pub ird: u32,
    pub sq_depth: u32,
    pub rq_depth: u32,
    pub max_ulpdu: usize,
    pub srq: bool,
    pub establish: bool,
    /// STag 0 and Fast-Register enabled on the QP.
    pub privileged: bool,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            ord: 4,
            ird: 4,
            sq_depth: 64,
            rq_depth: 64,
            max_ulpdu: 1024,
            srq: false,
            establish: true,
            privileged: true,
        }
    }
}

impl Side {
    pub fn new(seed: u64, o: &Opts) -> Side {
        let limits = RnicLimits {
            max_qps: 8,
            max_cqe: 4096,
            ..RnicLimits::default()
        };
        let mut rnic = Rnic::new(RnicConfig { limits, seed });
        let mut mem = VecMemory::new();
        let arena = mem.add_arena(ARENA);
        let pd = rnic.alloc_pd().unwrap();
        let (cq, _) = rnic.create_cq(4096).unwrap();
        let srq = o.srq.then(|| rnic.create_srq(pd, 64, 4, 0).unwrap().0);
        let attr = QpAttr {
            srq,
            sq_depth: o.sq_depth,
            rq_depth: o.rq_depth,
            max_send_sge: 6,
            max_recv_sge: 6,
            ord: o.ord,
            ird: o.ird,
            inbound_read: true,
            inbound_write: true,
            bind_enabled: true,
            privileged: o.privileged,
            fast_reg: o.privileged,
            ..QpAttr::new(pd, cq)
        };
        let (qp, _) = rnic.create_qp(&attr).unwrap();
        if o.establish {
            let p = LlpParams {
                ird: o.ird,
                ord: o.ord,
                role: LlpRole::Initiator,
                rtr: None,
            };
            rnic.qp_establish(qp, ConnId(1), p).unwrap();
        }
        Side {
            rnic,
            mem,
            arena,
            pd,
            cq,
            qp,
            next: 4096,
        }
    }

    /// Carves `len` bytes of the arena and registers them (VA = arena offset + 0x1_0000_0000)
    /// with `access`; returns the STag and the VA of the first byte.
    pub fn reg(&mut self, len: u64, access: Access) -> (Stag, u64) {
        let pd = self.pd;
        self.reg_in(pd, len, access)
    }

    /// [`Side::reg`] in protection domain `pd`.
    pub fn reg_in(&mut self, pd: PdId, len: u64, access: Access) -> (Stag, u64) {
        let off = self.next;
        self.next += (len + 4095) & !4095;
        let va = 0x1_0000_0000 + off;
        let attr = MrAttr {
            pd,
            region: self.arena,
            region_offset: off,
            len,
            va,
            zero_based: false,
            access,
            key: 0x5a,
            remote_access_flag: true,
        };
        let stag = self.rnic.reg_mr(&attr, Some(ARENA as u64)).unwrap();
        (stag, va)
    }

    /// Arena offset of VA `va` (as registered by [`Side::reg`]).
    pub fn off(va: u64) -> usize {
        (va - 0x1_0000_0000) as usize
    }

    /// Writes a pattern into the bytes at `va`.
    pub fn fill_pattern(&mut self, va: u64, len: usize, seed: u8) {
        let a = self.mem.arena_mut(self.arena);
        for (i, b) in a[Side::off(va)..Side::off(va) + len].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
    }

    /// The bytes at `va`.
    pub fn bytes(&self, va: u64, len: usize) -> &[u8] {
        &self.mem.arena(self.arena)[Side::off(va)..Side::off(va) + len]
    }

    pub fn post_recv(&mut self, wr_id: u64, stag: Stag, va: u64, len: u32) {
        let wr = RecvWr {
            wr_id,
            sgl: SgList::single(Sge {
                addr: va,
                length: len,
                lkey: stag,
            }),
        };
        self.rnic.post_recv(self.qp, &wr).unwrap();
    }

    pub fn post(&mut self, wr_id: u64, op: SendOp, sgl: SgList, flags: SendFlags) {
        let wr = SendWr {
            wr_id,
            op,
            sgl,
            flags,
        };
        self.rnic.post_send(self.qp, &wr).unwrap();
    }

    /// Every queued CQE.
    pub fn cqes(&mut self) -> Vec<Cqe> {
        let mut out = [Cqe::EMPTY; 64];
        let mut v = Vec::new();
        loop {
            let n = self.rnic.poll_cq(self.cq, &mut out).unwrap();
            if n == 0 {
                return v;
            }
            v.extend_from_slice(&out[..n]);
        }
    }

    /// Every queued async event.
    pub fn events(&mut self) -> Vec<AsyncEvent> {
        std::iter::from_fn(|| self.rnic.poll_async_event()).collect()
    }

    /// The next ULPDU this side sends, as bytes (acknowledged at once).
    pub fn take_ulpdu(&mut self, max: usize) -> Option<Vec<u8>> {
        let (d, len) = self.rnic.qp_next_ulpdu(self.qp, max, &self.mem)?;
        let mut buf = vec![0u8; len];
        self.rnic.fill_ulpdu(self.qp, &d, &self.mem, &mut buf);
        self.rnic.qp_ulpdu_acked(self.qp, &d);
        Some(buf)
    }

    /// Feeds crafted bytes to this side.
    pub fn inject(&mut self, ulpdu: &[u8]) -> Result<(), TermCode> {
        self.rnic.qp_on_ulpdu(self.qp, ulpdu, &mut self.mem)
    }

    /// The Terminate this side sends next (its code), if it sends one now.
    pub fn sent_terminate(&mut self) -> Option<TermCode> {
        self.sent_terminate_repr().map(|t| t.code)
    }

    /// The Terminate this side sends next, decoded.
    pub fn sent_terminate_repr(&mut self) -> Option<TerminateRepr> {
        let bytes = self.take_ulpdu(4096)?;
        match Segment::parse(&bytes).ok()?.body {
            Body::Terminate(t) => Some(t),
            _ => None,
        }
    }
}

/// Two sides joined back to back.
pub struct Pair {
    pub a: Side,
    pub b: Side,
    pub max_ulpdu: usize,
    /// Results of `qp_on_ulpdu` that were errors: (receiving side is b, code).
    pub errors: Vec<(bool, TermCode)>,
    /// ULPDUs moved.
    pub moved: usize,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with(Opts::default())
    }

    pub fn with(o: Opts) -> Pair {
        Pair {
            a: Side::new(1, &o),
            b: Side::new(2, &o),
            max_ulpdu: o.max_ulpdu,
            errors: Vec::new(),
            moved: 0,
        }
    }

    /// Moves one ULPDU from `a` to `b` (or back if `to_b` is false). False if none.
    pub fn step(&mut self, to_b: bool) -> bool {
        let (src, dst) = if to_b {
            (&mut self.a, &mut self.b)
        } else {
            (&mut self.b, &mut self.a)
        };
        let Some((d, len)) = src.rnic.qp_next_ulpdu(src.qp, self.max_ulpdu, &src.mem) else {
            return false;
        };
        assert!(
            len <= self.max_ulpdu,
            "segment {len} above {}",
            self.max_ulpdu
        );
        let mut buf = vec![0u8; len];
        src.rnic.fill_ulpdu(src.qp, &d, &src.mem, &mut buf);
        // Retransmission gives the same bytes.
        let mut again = vec![0xa5u8; len];
        src.rnic.fill_ulpdu(src.qp, &d, &src.mem, &mut again);
        assert_eq!(buf, again);
        // The CRC-computing fill (the engine's, when MPA CRC is on) gives the same bytes
        // and their CRC32c, continued from what came before.
        for head in [0u32, 0x1d2e_3f40] {
            let mut with_crc = vec![0x5au8; len];
            let c = src
                .rnic
                .fill_ulpdu_crc32c(src.qp, &d, &src.mem, &mut with_crc, head);
            assert_eq!(with_crc, buf);
            assert_eq!(c, iwarp_wire::crc::crc32c_append(head, &buf));
        }
        if let Err(code) = dst.rnic.qp_on_ulpdu(dst.qp, &buf, &mut dst.mem) {
            self.errors.push((to_b, code));
        }
        src.rnic.qp_ulpdu_acked(src.qp, &d);
        self.moved += 1;
        true
    }

    /// Moves ULPDUs both ways until neither side has anything to send (bounded).
    pub fn run(&mut self) {
        for _ in 0..100_000 {
            let x = self.step(true);
            let y = self.step(false);
            if !x && !y {
                return;
            }
        }
        panic!("pair did not go quiet");
    }
}

/// A one-element SGL.
pub fn sgl(stag: Stag, va: u64, len: u32) -> SgList {
    SgList::single(Sge {
        addr: va,
        length: len,
        lkey: stag,
    })
}

/// Signaled.
pub const SIG: SendFlags = SendFlags::SIGNALED;
