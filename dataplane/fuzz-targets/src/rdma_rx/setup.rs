//! The QP under test: one RNIC, one arena with guard gaps, regions of every kind of right,
//! a bound window, posted receives and an outstanding RDMA Read.

use iwarp_rdma::mem::{MrAttr, MwBind, MwType};
use iwarp_rdma::{LlpParams, LlpRole, QpAttr, Rnic, RnicConfig, RnicLimits, RtrKind};
use iwarp_types::{
    Access, ConnId, CqId, QpId, RecvWr, RegionId, SendFlags, SendOp, SendWr, SgList, Sge, SrqId,
    Stag, VecMemory,
};

use crate::cursor::Cursor;

/// Arena size.
pub(super) const ARENA_LEN: usize = 48 * 1024;

/// VA of the first byte of arena offset 0 for VA-based regions.
pub(super) const VA_BASE: u64 = 0x7f00_0000_0000;

/// Length of each posted receive buffer.
pub(super) const RECV_LEN: u32 = 512;
/// Receives posted at set-up.
pub(super) const RECVS: u64 = 8;
/// Length of the outstanding RDMA Read.
pub(super) const READ_LEN: u32 = 1024;

/// A registered range of the arena.
#[derive(Clone, Copy, Debug)]
pub(super) struct Region {
    pub stag: Stag,
    pub off: u64,
    pub len: u64,
    /// Tagged offset of the first byte.
    pub base_to: u64,
    /// Remote writes or local writes (receives, Read sinks) may land here.
    pub writable: bool,
}

/// Everything the target needs about the QP under test.
pub(super) struct Setup {
    pub rnic: Rnic,
    pub mem: VecMemory,
    pub arena: RegionId,
    pub qp: QpId,
    pub cq: CqId,
    pub srq: Option<SrqId>,
    /// Remote-writable region (VA-based), remote-read-only region (zero-based), local-only
    /// region (receives and Read sink), and a window on the first.
    pub regions: Vec<Region>,
    /// STags the fuzzer can pick by index: the regions, the window, and invalid ones.
    pub stags: Vec<Stag>,
    pub max_ulpdu: usize,
    /// wr_ids of the receives posted (each completes at most once).
    pub recv_ids: Vec<u64>,
    /// wr_ids of the send-queue WRs posted.
    pub send_ids: Vec<u64>,
}

const RW: Access = Access(
    Access::LOCAL_READ.0 | Access::LOCAL_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0,
);

impl Setup {
    /// Builds the QP from the configuration bytes of the input: shared receive queue or
    /// not, IRD/ORD, MPA role and RTR duty, inbound operations enabled, segment size.
    pub(super) fn new(c: &mut Cursor<'_>) -> Option<Setup> {
        let k = c.u8();
        let limits = RnicLimits {
            max_qps: 2,
            max_sq_wr: 16,
            max_rq_wr: 16,
            max_pds: 2,
            max_cqs: 2,
            max_cqe: 64,
            max_srqs: 1,
            max_srq_wr: 16,
            max_stags: 16,
            max_async_events: 16,
            max_cq_events: 16,
            ..RnicLimits::default()
        };
        let mut rnic = Rnic::new(RnicConfig {
            limits,
            seed: 0x5eed_0000 | u64::from(k >> 6),
        });
        let mut mem = VecMemory::new();
        let arena = mem.add_arena(ARENA_LEN);
        crate::arena::fill(mem.arena_mut(arena));
        let pd = rnic.alloc_pd().ok()?;
        let (cq, _) = rnic.create_cq(64).ok()?;
        let srq = if k & 1 != 0 {
            Some(rnic.create_srq(pd, 16, 2, 0).ok()?.0)
        } else {
            None
        };
        let ird = u32::from(k >> 1 & 3) + 1;
        let ord = u32::from(k >> 3 & 1) + 1;
        let attr = QpAttr {
            srq,
            sq_depth: 16,
            rq_depth: 16,
            max_send_sge: 2,
            max_recv_sge: 2,
            ord,
            ird,
            inbound_read: k & 0x10 == 0,
            inbound_write: k & 0x20 == 0,
            bind_enabled: true,
            ..QpAttr::new(pd, cq)
        };
        let (qp, _) = rnic.create_qp(&attr).ok()?;
        let mut regions = Vec::new();
        let mut reg = |rnic: &mut Rnic, off: u64, len: u64, access: Access, zb: bool, w: bool| {
            let stag = rnic
                .reg_mr(
                    &MrAttr {
                        pd,
                        region: arena,
                        region_offset: off,
                        len,
                        va: VA_BASE + off,
                        zero_based: zb,
                        access,
                        key: 0x11,
                        remote_access_flag: true,
                    },
                    Some(ARENA_LEN as u64),
                )
                .ok()?;
            regions.push(Region {
                stag,
                off,
                len,
                base_to: if zb { 0 } else { VA_BASE + off },
                writable: w,
            });
            Some(stag)
        };
        // Guard gaps of 4 KiB between regions stay untouched.
        let w = reg(
            &mut rnic,
            4096,
            8192,
            RW.union(Access::MW_BIND),
            false,
            true,
        )?;
        let r = reg(
            &mut rnic,
            16384,
            4096,
            Access::LOCAL_READ.union(Access::REMOTE_READ),
            true,
            false,
        )?;
        let local = Access::LOCAL_READ.union(Access::LOCAL_WRITE);
        let l = reg(&mut rnic, 24576, 8192, local, false, true)?;
        let mw = rnic.alloc_mw(pd, MwType::Type1).ok()?;
        let bind = MwBind {
            mw,
            mr: w,
            to: VA_BASE + 4096 + 1024,
            len: 2048,
            access: Access::REMOTE_WRITE.union(Access::REMOTE_READ),
            zero_based: true,
        };
        rnic.bind_mw_type1(pd, &bind).ok()?;
        let stags = vec![w, r, l, mw, Stag(0), Stag(w.0 ^ 0x01), Stag(0xdead_be00)];
        let mut s = Setup {
            rnic,
            mem,
            arena,
            qp,
            cq,
            srq,
            regions,
            stags,
            max_ulpdu: 64 + usize::from(c.u8()) * 8,
            recv_ids: Vec::new(),
            send_ids: Vec::new(),
        };
        for i in 0..RECVS {
            s.post_recv(100 + i, l, VA_BASE + 24576 + i * u64::from(RECV_LEN));
        }
        let role = if k & 0x40 != 0 {
            LlpRole::Responder
        } else {
            LlpRole::Initiator
        };
        let rtr = (k & 0x80 != 0).then_some(RtrKind::Write);
        let p = LlpParams {
            ird,
            ord,
            role,
            rtr,
        };
        s.rnic.qp_establish(qp, ConnId(7), p).ok()?;
        // An outstanding RDMA Read (its Read Request is sent by the first drain), so that
        // Read Responses are expected; the sink is the last 1 KiB of the local region.
        let read = SendWr {
            wr_id: 200,
            op: SendOp::Read {
                remote_to: 0x1000,
                rkey: Stag(0x1234_5600),
                invalidate_local: false,
            },
            sgl: SgList::single(Sge {
                addr: VA_BASE + 24576 + 8192 - u64::from(READ_LEN),
                length: READ_LEN,
                lkey: l,
            }),
            flags: SendFlags::SIGNALED,
        };
        if s.rnic.post_send(qp, &read).is_ok() {
            s.send_ids.push(200);
        }
        Some(s)
    }

    /// Posts a receive of [`RECV_LEN`] octets at `va` of the local region (on the SRQ if any).
    pub(super) fn post_recv(&mut self, wr_id: u64, lkey: Stag, va: u64) {
        let wr = RecvWr {
            wr_id,
            sgl: SgList::single(Sge {
                addr: va,
                length: RECV_LEN,
                lkey,
            }),
        };
        let r = match self.srq {
            Some(srq) => self.rnic.post_srq_recv(srq, &wr),
            None => self.rnic.post_recv(self.qp, &wr),
        };
        if r.is_ok() {
            self.recv_ids.push(wr_id);
        }
    }
}
