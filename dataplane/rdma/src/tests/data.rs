//! Data transfer between two RNICs: Send types, RDMA Write, RDMA Read; 0 bytes, 1 byte,
//! multi-segment up to 1 MiB; completions after acknowledgement / placement.

use iwarp_types::{Access, SendFlags, SendOp, SgList, Sge, Stag, WcOpcode, WcStatus};

use super::pair::*;

const MIB: u32 = 1 << 20;

fn send_and_check(op: SendOp, len: u32, max_ulpdu: usize) {
    let mut p = Pair::with(Opts {
        max_ulpdu,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(u64::from(len.max(1)), ALL);
    let (sb, vb) = p.b.reg(u64::from(len.max(1)), ALL);
    p.a.fill_pattern(va, len as usize, 7);
    p.b.post_recv(11, sb, vb, len.max(1));
    p.a.post(1, op, sgl(sa, va, len), SIG);
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let ca = p.a.cqes();
    assert_eq!(ca.len(), 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::Success));
    let cb = p.b.cqes();
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].wr_id, 11);
    assert_eq!(cb[0].status, WcStatus::Success);
    assert_eq!(cb[0].opcode, WcOpcode::Recv);
    assert_eq!(cb[0].byte_len, len);
    assert_eq!(cb[0].qp, p.b.qp);
    assert_eq!(p.b.bytes(vb, len as usize), p.a.bytes(va, len as usize));
    let segs = (len as usize).div_ceil(max_ulpdu - 18).max(1);
    assert_eq!(p.moved, segs);
}

#[test]
fn send_zero_one_and_multi_segment() {
    send_and_check(SendOp::Send, 0, 1024);
    send_and_check(SendOp::Send, 1, 1024);
    send_and_check(SendOp::Send, 1006, 1024); // exactly one full segment
    send_and_check(SendOp::Send, 1007, 1024); // one byte into a second
    send_and_check(SendOp::Send, 100_000, 1460);
}

#[test]
fn send_one_mib() {
    send_and_check(SendOp::Send, MIB, 8192);
}

#[test]
fn send_se_reports_solicited_and_wakes_solicited_waiter() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(64, ALL);
    let (sb, vb) = p.b.reg(64, ALL);
    p.b.post_recv(1, sb, vb, 64);
    p.b.post_recv(2, sb, vb, 64);
    p.b.rnic.req_notify_cq(p.b.cq, true).unwrap();
    p.a.post(1, SendOp::Send, sgl(sa, va, 8), SendFlags::NONE);
    p.run();
    assert_eq!(
        p.b.rnic.poll_cq_event(),
        None,
        "a plain Send does not wake a solicited waiter"
    );
    p.a.post(2, SendOp::SendSe, sgl(sa, va, 8), SendFlags::NONE);
    p.run();
    assert_eq!(p.b.rnic.poll_cq_event(), Some(p.b.cq));
    let c = p.b.cqes();
    assert!(!c[0].solicited);
    assert!(c[1].solicited);
    assert!(
        p.a.cqes().is_empty(),
        "unsignaled successes give no completion"
    );
}

#[test]
fn send_gathers_several_sges_into_several_receive_sges() {
    let mut p = Pair::with(Opts {
        max_ulpdu: 100,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(4096, ALL);
    let (sb, vb) = p.b.reg(4096, ALL);
    p.a.fill_pattern(va, 4096, 3);
    let src = SgList::from_slice(&[
        Sge {
            addr: va,
            length: 10,
            lkey: sa,
        },
        Sge {
            addr: va + 1000,
            length: 0,
            lkey: Stag(0xdead_beef),
        }, // never validated
        Sge {
            addr: va + 2000,
            length: 300,
            lkey: sa,
        },
    ])
    .unwrap();
    let dst = SgList::from_slice(&[
        Sge {
            addr: vb + 100,
            length: 7,
            lkey: sb,
        },
        Sge {
            addr: vb + 500,
            length: 400,
            lkey: sb,
        },
    ])
    .unwrap();
    p.b.rnic
        .post_recv(p.b.qp, &iwarp_types::RecvWr { wr_id: 9, sgl: dst })
        .unwrap();
    p.a.post(1, SendOp::Send, src, SIG);
    p.run();
    assert!(p.errors.is_empty());
    let mut want = p.a.bytes(va, 10).to_vec();
    want.extend_from_slice(p.a.bytes(va + 2000, 300));
    let mut got = p.b.bytes(vb + 100, 7).to_vec();
    got.extend_from_slice(p.b.bytes(vb + 500, 303));
    assert_eq!(got, want);
    assert_eq!(p.b.cqes()[0].byte_len, 310);
}

fn write_and_check(len: u32, max_ulpdu: usize) {
    let mut p = Pair::with(Opts {
        max_ulpdu,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(u64::from(len.max(1)), ALL);
    let (sb, vb) = p.b.reg(u64::from(len.max(1)) + 16, ALL);
    p.a.fill_pattern(va, len as usize, 9);
    p.a.post(
        5,
        SendOp::Write {
            remote_to: vb + 16,
            rkey: sb,
        },
        sgl(sa, va, len),
        SIG,
    );
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let c = p.a.cqes();
    assert_eq!((c.len(), c[0].wr_id, c[0].opcode), (1, 5, WcOpcode::Write));
    assert_eq!(
        p.b.bytes(vb + 16, len as usize),
        p.a.bytes(va, len as usize)
    );
    assert!(p.b.cqes().is_empty(), "a Write consumes no receive");
    assert_eq!((len as usize).div_ceil(max_ulpdu - 14).max(1), p.moved);
}

#[test]
fn write_sizes() {
    write_and_check(0, 1024);
    write_and_check(1, 1024);
    write_and_check(5000, 1024);
    write_and_check(MIB, 9000);
}

#[test]
fn send_completes_only_when_acknowledged() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(3000, ALL);
    let (sb, vb) = p.b.reg(3000, ALL);
    p.b.post_recv(1, sb, vb, 3000);
    p.a.post(1, SendOp::Send, sgl(sa, va, 3000), SIG);
    let mut descs = Vec::new();
    while let Some((d, len)) = p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &p.a.mem) {
        let mut buf = vec![0; len];
        p.a.rnic.fill_ulpdu(p.a.qp, &d, &p.a.mem, &mut buf);
        p.b.inject(&buf).unwrap();
        descs.push(d);
    }
    assert_eq!(descs.len(), 3);
    assert!(p.a.cqes().is_empty(), "nothing acknowledged yet");
    p.a.rnic.qp_ulpdu_acked(p.a.qp, &descs[0]);
    p.a.rnic.qp_ulpdu_acked(p.a.qp, &descs[1]);
    assert!(p.a.cqes().is_empty());
    p.a.rnic.qp_ulpdu_acked(p.a.qp, &descs[2]);
    assert_eq!(p.a.cqes().len(), 1);
    assert_eq!(p.b.cqes()[0].byte_len, 3000);
}

fn read_and_check(len: u32, max_ulpdu: usize, invalidate_local: bool) {
    let mut p = Pair::with(Opts {
        max_ulpdu,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(u64::from(len.max(1)), ALL);
    let (sb, vb) = p.b.reg(u64::from(len.max(1)), ALL);
    p.b.fill_pattern(vb, len as usize, 21);
    let op = SendOp::Read {
        remote_to: vb,
        rkey: sb,
        invalidate_local,
    };
    p.a.post(3, op, sgl(sa, va, len), SIG);
    p.run();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let c = p.a.cqes();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, WcStatus::Success);
    let want = if invalidate_local {
        WcOpcode::ReadInv
    } else {
        WcOpcode::Read
    };
    assert_eq!(c[0].opcode, want);
    assert_eq!(p.a.bytes(va, len as usize), p.b.bytes(vb, len as usize));
    let state = p.a.rnic.query_mr(sa).unwrap().state;
    assert_eq!(state == crate::mem::StagState::Invalid, invalidate_local);
}

#[test]
fn read_sizes() {
    read_and_check(0, 1024, false);
    read_and_check(1, 1024, false);
    read_and_check(4000, 1024, false);
    read_and_check(MIB, 9000, false);
}

#[test]
fn read_with_invalidate_local() {
    read_and_check(100, 1024, true);
}

#[test]
fn zero_length_read_needs_no_valid_stag() {
    let mut p = Pair::new();
    let op = SendOp::Read {
        remote_to: 0xffff_ffff_ffff_fff0,
        rkey: Stag(0x1234_5678),
        invalidate_local: false,
    };
    p.a.post(3, op, sgl(Stag(0x77), 0, 0), SIG);
    p.run();
    assert!(p.errors.is_empty());
    assert_eq!(p.a.cqes()[0].status, WcStatus::Success);
}

#[test]
fn srq_receive_uses_srq_and_reports_consuming_qp() {
    let mut p = Pair::with(Opts {
        srq: true,
        ..Opts::default()
    });
    let (sa, va) = p.a.reg(100, ALL);
    let (sb, vb) = p.b.reg(100, ALL);
    p.a.fill_pattern(va, 100, 1);
    let srq = p.b.rnic.query_qp(p.b.qp).unwrap().attr.srq.unwrap();
    let wr = iwarp_types::RecvWr {
        wr_id: 77,
        sgl: sgl(sb, vb, 100),
    };
    assert_eq!(
        p.b.rnic.post_recv(p.b.qp, &wr),
        Err(iwarp_types::VerbError::RqAssociatedWithSrq)
    );
    p.b.rnic.post_srq_recv(srq, &wr).unwrap();
    p.a.post(1, SendOp::Send, sgl(sa, va, 100), SIG);
    p.run();
    assert!(p.errors.is_empty());
    let c = p.b.cqes();
    assert_eq!((c[0].wr_id, c[0].byte_len, c[0].qp), (77, 100, p.b.qp));
    assert_eq!(p.b.bytes(vb, 100), p.a.bytes(va, 100));
}

#[test]
fn bidirectional_traffic_and_counters() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(5000, ALL);
    let (sb, vb) = p.b.reg(5000, ALL);
    p.a.post_recv(1, sa, va, 5000);
    p.b.post_recv(1, sb, vb, 5000);
    p.a.post(1, SendOp::Send, sgl(sa, va, 2000), SIG);
    p.b.post(1, SendOp::Send, sgl(sb, vb + 2500, 2000), SIG);
    p.a.post(
        2,
        SendOp::Write {
            remote_to: vb + 4000,
            rkey: sb,
        },
        sgl(sa, va, 1000),
        SIG,
    );
    p.run();
    assert!(p.errors.is_empty());
    assert_eq!(p.a.cqes().len(), 3);
    assert_eq!(p.b.cqes().len(), 2);
    let ca = p.a.rnic.qp_counters(p.a.qp).unwrap();
    assert_eq!(ca.msgs_out[3], 1);
    assert_eq!(ca.bytes_out[3], 2000);
    assert_eq!(ca.msgs_out[0], 1);
    let cb = p.b.rnic.qp_counters(p.b.qp).unwrap();
    assert_eq!(cb.bytes_in[0], 1000);
    assert_eq!(cb.msgs_in[3], 1);
}

#[test]
fn local_sge_errors_complete_in_error_and_terminate() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(100, Access::LOCAL_WRITE);
    p.a.post(1, SendOp::Send, sgl(sa, va, 10), SendFlags::NONE);
    p.a.post(2, SendOp::Send, sgl(sa, va, 10), SendFlags::NONE);
    assert_eq!(
        p.a.sent_terminate(),
        Some(iwarp_types::TermCode::RDMAP_LOCAL_CATASTROPHIC)
    );
    let c = p.a.cqes();
    assert_eq!(c.len(), 1, "the failing unsignaled WR completes at once");
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::AccessViolation));
    p.a.rnic.qp_llp_event(p.a.qp, crate::LlpEvent::Closed);
    let c = p.a.cqes();
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 2, WcStatus::Flushed)
    );
    assert_eq!(
        p.a.rnic.query_qp(p.a.qp).unwrap().state,
        iwarp_types::QpState::Error
    );
}

/// `VecMemory` that records the prefetch hints it is given.
struct PrefetchLog<'a> {
    mem: &'a iwarp_types::VecMemory,
    hints: std::cell::RefCell<Vec<(iwarp_types::RegionId, u64, usize)>>,
}

impl iwarp_types::Memory for PrefetchLog<'_> {
    fn region_len(&self, region: iwarp_types::RegionId) -> Option<u64> {
        self.mem.region_len(region)
    }
    fn read(
        &self,
        region: iwarp_types::RegionId,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), iwarp_types::MemoryFault> {
        self.mem.read(region, offset, out)
    }
    fn write(
        &mut self,
        _: iwarp_types::RegionId,
        _: u64,
        _: &[u8],
    ) -> Result<(), iwarp_types::MemoryFault> {
        Err(iwarp_types::MemoryFault)
    }
    fn prefetch(&self, region: iwarp_types::RegionId, offset: u64, len: usize) {
        self.hints.borrow_mut().push((region, offset, len));
    }
}

#[test]
fn a_starting_write_asks_memory_to_prefetch_each_source_sge_once() {
    let mut p = Pair::new();
    let (sa, va) = p.a.reg(8192, ALL);
    let (sb, vb) = p.b.reg(8192, ALL);
    let sges = [(va + 100, 3000u32), (va + 5000, 2000), (va + 7100, 0)];
    let list = SgList::from_slice(&sges.map(|(addr, length)| Sge {
        addr,
        length,
        lkey: sa,
    }))
    .unwrap();
    p.a.post(
        1,
        SendOp::Write {
            remote_to: vb,
            rkey: sb,
        },
        list,
        SIG,
    );
    let log = PrefetchLog {
        mem: &p.a.mem,
        hints: Default::default(),
    };
    let mut segs = 0;
    while let Some((d, len)) = p.a.rnic.qp_next_ulpdu(p.a.qp, 1024, &log) {
        let mut buf = vec![0u8; len];
        p.a.rnic.fill_ulpdu(p.a.qp, &d, &log, &mut buf);
        p.a.rnic.qp_ulpdu_acked(p.a.qp, &d);
        segs += 1;
    }
    assert_eq!(segs, 5000usize.div_ceil(1024 - 14));
    // Once per SGE when the WQE started (not per segment), at the arena offsets the
    // SGEs resolved to, with their lengths (the zero-length one asks for nothing).
    let want: Vec<_> = sges
        .iter()
        .filter(|&&(_, len)| len > 0)
        .map(|&(addr, len)| (p.a.arena, Side::off(addr) as u64, len as usize))
        .collect();
    assert_eq!(*log.hints.borrow(), want);
}
