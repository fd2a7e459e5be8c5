//! Work requests from their C form (`struct iwv_send_wr`, `struct iwv_recv_wr`) to the
//! library's, every field checked.

use iwarp_types::{Access, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag, MAX_SGE};

use crate::error::{CResult, Failure};
use crate::handles::obj;
use crate::memory::access_arg;
use crate::types::{iwv_recv_wr, iwv_send_wr, iwv_sge};

pub(crate) const WR_SEND: u32 = 0;
pub(crate) const WR_SEND_WITH_INV: u32 = 1;
pub(crate) const WR_RDMA_WRITE: u32 = 2;
pub(crate) const WR_RDMA_READ: u32 = 3;
pub(crate) const WR_RDMA_READ_WITH_INV: u32 = 4;
pub(crate) const WR_LOCAL_INV: u32 = 5;
pub(crate) const WR_FAST_REG: u32 = 6;
pub(crate) const WR_BIND_MW: u32 = 7;

pub(crate) const SEND_SIGNALED: u32 = 1 << 0;
pub(crate) const SEND_READ_FENCE: u32 = 1 << 1;
pub(crate) const SEND_LOCAL_FENCE: u32 = 1 << 2;
pub(crate) const SEND_SOLICITED: u32 = 1 << 3;

/// The SGL of a WR.
///
/// # Safety
///
/// `sg_list` is NULL or points to `num_sge` readable SGEs.
unsafe fn sgl(sg_list: *const iwv_sge, num_sge: u32) -> CResult<SgList> {
    if num_sge as usize > MAX_SGE {
        return Err(Failure::invalid(format!(
            "{num_sge} SGEs, at most {MAX_SGE}"
        )));
    }
    if num_sge == 0 {
        return Ok(SgList::new());
    }
    if sg_list.is_null() {
        return Err(Failure::null("sg_list"));
    }
    // SAFETY: the caller's contract; `num_sge` <= MAX_SGE.
    let c = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
    let mut l = SgList::new();
    for s in c {
        l.push(Sge {
            addr: s.addr,
            length: s.length,
            lkey: Stag(s.lkey),
        })
        .map_err(|_| Failure::invalid("too many SGEs"))?;
    }
    Ok(l)
}

/// A send WR from its C form (its `next` is not followed).
///
/// # Safety
///
/// `wr.sg_list` is NULL or points to `wr.num_sge` SGEs; `wr.fast_reg.arena` is NULL or
/// a live arena handle.
pub(crate) unsafe fn send_wr(wr: &iwv_send_wr) -> CResult<SendWr> {
    let known = SEND_SIGNALED | SEND_READ_FENCE | SEND_LOCAL_FENCE | SEND_SOLICITED;
    if wr.send_flags & !known != 0 {
        return Err(Failure::invalid(format!(
            "unknown send flags {:#x}",
            wr.send_flags & !known
        )));
    }
    let solicited = wr.send_flags & SEND_SOLICITED != 0;
    if solicited && !matches!(wr.opcode, WR_SEND | WR_SEND_WITH_INV) {
        return Err(Failure::invalid("IWV_SEND_SOLICITED is for sends only"));
    }
    let op = match wr.opcode {
        WR_SEND if solicited => SendOp::SendSe,
        WR_SEND => SendOp::Send,
        WR_SEND_WITH_INV => {
            let inv_stag = Stag(wr.invalidate_stag);
            if solicited {
                SendOp::SendSeInv { inv_stag }
            } else {
                SendOp::SendInv { inv_stag }
            }
        }
        WR_RDMA_WRITE => SendOp::Write {
            remote_to: wr.rdma.remote_addr,
            rkey: Stag(wr.rdma.rkey),
        },
        WR_RDMA_READ | WR_RDMA_READ_WITH_INV => SendOp::Read {
            remote_to: wr.rdma.remote_addr,
            rkey: Stag(wr.rdma.rkey),
            invalidate_local: wr.opcode == WR_RDMA_READ_WITH_INV,
        },
        WR_LOCAL_INV => SendOp::LocalInv {
            stag: Stag(wr.invalidate_stag),
        },
        WR_FAST_REG => {
            let f = &wr.fast_reg;
            // SAFETY: the caller's contract: NULL or a live arena.
            let arena = unsafe { obj(f.arena, "fast_reg.arena") }?;
            let offset = usize::try_from(f.offset)
                .map_err(|_| Failure::invalid("fast_reg.offset too large"))?;
            let len = usize::try_from(f.length)
                .map_err(|_| Failure::invalid("fast_reg.length too large"))?;
            let access = access_arg(f.access, true)?;
            arena
                .arena
                .fast_reg_op(Stag(f.stag), offset, len, access, f.zero_based != 0)?
        }
        WR_BIND_MW => {
            let b = &wr.bind;
            SendOp::Bind {
                mw: Stag(b.mw_stag),
                mr: Stag(b.mr_lkey),
                to: b.addr,
                len: b.length,
                access: Access(access_arg(b.access, false)?.0),
                zero_based: b.zero_based != 0,
            }
        }
        op => return Err(Failure::invalid(format!("send opcode {op}"))),
    };
    Ok(SendWr {
        wr_id: wr.wr_id,
        op,
        // SAFETY: the caller's contract.
        sgl: unsafe { sgl(wr.sg_list, wr.num_sge) }?,
        flags: SendFlags(wr.send_flags & (SEND_SIGNALED | SEND_READ_FENCE | SEND_LOCAL_FENCE)),
    })
}

/// A receive WR from its C form (its `next` is not followed).
///
/// # Safety
///
/// `wr.sg_list` is NULL or points to `wr.num_sge` SGEs.
pub(crate) unsafe fn recv_wr(wr: &iwv_recv_wr) -> CResult<RecvWr> {
    Ok(RecvWr {
        wr_id: wr.wr_id,
        // SAFETY: the caller's contract.
        sgl: unsafe { sgl(wr.sg_list, wr.num_sge) }?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{IWV_EFAULT, IWV_EINVAL};
    use crate::types::{iwv_bind, iwv_fast_reg, iwv_rdma};

    fn blank(opcode: u32) -> iwv_send_wr {
        iwv_send_wr {
            wr_id: 42,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode,
            send_flags: 0,
            invalidate_stag: 0,
            rdma: iwv_rdma::default(),
            fast_reg: iwv_fast_reg {
                arena: std::ptr::null_mut(),
                offset: 0,
                length: 0,
                stag: 0,
                access: 0,
                zero_based: 0,
                reserved: 0,
            },
            bind: iwv_bind::default(),
        }
    }

    #[test]
    fn opcodes_and_flags() {
        let mut sges = [iwv_sge {
            addr: 0x1000,
            length: 64,
            lkey: 0x0100_0007,
        }; 2];
        let mut w = blank(WR_SEND);
        w.sg_list = sges.as_mut_ptr();
        w.num_sge = 2;
        w.send_flags = SEND_SIGNALED | SEND_SOLICITED;
        // SAFETY: `sg_list` points to 2 SGEs.
        let s = unsafe { send_wr(&w) }.unwrap();
        assert_eq!(s.op, SendOp::SendSe);
        assert_eq!(s.flags, SendFlags::SIGNALED);
        assert_eq!(s.sgl.len(), 2);
        assert_eq!(s.sgl.as_slice()[1].lkey, Stag(0x0100_0007));
        assert_eq!(s.wr_id, 42);

        let mut w = blank(WR_SEND_WITH_INV);
        w.invalidate_stag = 0x200;
        // SAFETY: no SGE.
        let s = unsafe { send_wr(&w) }.unwrap();
        assert_eq!(
            s.op,
            SendOp::SendInv {
                inv_stag: Stag(0x200)
            }
        );

        let mut w = blank(WR_RDMA_READ_WITH_INV);
        w.rdma.remote_addr = 0xabc;
        w.rdma.rkey = 9;
        w.send_flags = SEND_READ_FENCE | SEND_LOCAL_FENCE;
        // SAFETY: no SGE.
        let s = unsafe { send_wr(&w) }.unwrap();
        assert_eq!(
            s.op,
            SendOp::Read {
                remote_to: 0xabc,
                rkey: Stag(9),
                invalidate_local: true
            }
        );
        assert_eq!(s.flags, SendFlags::READ_FENCE | SendFlags::LOCAL_FENCE);

        let mut w = blank(WR_BIND_MW);
        w.bind = iwv_bind {
            mw_stag: 0x301,
            mr_lkey: 0x400,
            addr: 8,
            length: 16,
            access: 0xc,
            zero_based: 1,
        };
        // SAFETY: no SGE.
        let s = unsafe { send_wr(&w) }.unwrap();
        assert_eq!(
            s.op,
            SendOp::Bind {
                mw: Stag(0x301),
                mr: Stag(0x400),
                to: 8,
                len: 16,
                access: Access(0xc),
                zero_based: true
            }
        );
    }

    #[test]
    fn bad_work_requests_are_refused() {
        let check = |w: &iwv_send_wr, code| {
            // SAFETY: the WRs below have no SGE pointer or a NULL one.
            let e = unsafe { send_wr(w) }.unwrap_err();
            assert_eq!(e.code, code, "{}", e.message);
        };
        check(&blank(99), IWV_EINVAL);
        let mut w = blank(WR_RDMA_WRITE);
        w.send_flags = SEND_SOLICITED;
        check(&w, IWV_EINVAL);
        let mut w = blank(WR_SEND);
        w.send_flags = 1 << 9;
        check(&w, IWV_EINVAL);
        let mut w = blank(WR_SEND);
        w.num_sge = MAX_SGE as u32 + 1;
        check(&w, IWV_EINVAL);
        let mut w = blank(WR_SEND);
        w.num_sge = 1;
        check(&w, IWV_EFAULT);
        check(&blank(WR_FAST_REG), IWV_EFAULT);
        let r = iwv_recv_wr {
            wr_id: 1,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            reserved: 0,
        };
        // SAFETY: no SGE.
        assert!(unsafe { recv_wr(&r) }.unwrap().sgl.is_empty());
    }
}
