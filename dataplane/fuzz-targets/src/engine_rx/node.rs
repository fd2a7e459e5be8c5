//! One engine of the pair: its memory (guarded regions), its QP, and the helpers to drain
//! it and move legitimate data.

use core::net::Ipv4Addr;

use iwarp_engine::{Engine, EngineConfig, Event};
use iwarp_mpa::MpaConfig;
use iwarp_rdma::mem::MrAttr;
use iwarp_rdma::{QpAttr, RnicConfig, RnicLimits};
use iwarp_tcp::TcpConfig;
use iwarp_types::{Access, CqId, Cqe, Instant, QpId, RegionId, SgList, Sge, Stag, VecMemory};
use iwarp_wire::l2l4::EthernetFrame;

/// Arena of each node: receive buffers, a remote-writable region, a remote-readable
/// region, then a guard nobody may write.
pub(super) const ARENA_LEN: usize = 128 * 1024;
/// Receive buffers: `[0, RECV_AREA)`, local write only.
pub(super) const RECV_AREA: u64 = 32 * 1024;
/// Remote-writable region `[RECV_AREA, WRITABLE_END)` (also the source of what we send).
pub(super) const WRITABLE_END: u64 = 64 * 1024;
/// Remote-readable region `[WRITABLE_END, READABLE_END)`; the rest is a guard.
pub(super) const READABLE_END: u64 = 96 * 1024;
/// Largest frame.
pub(super) const FRAME_MAX: usize = 1514;
/// Length of each posted receive.
pub(super) const RECV_LEN: u32 = 4096;

/// The receive window each node advertises: 64 KiB (no scaling), so that the final
/// transfer's window flush (`flush_window`, more than a window of Writes) stays short
/// (with the default 1 MiB, a 30-minute run on a loaded machine made 33,528 executions).
pub(super) const RCV_WND: u32 = 65_535;

/// The configuration of node `last` (10.0.0.`last`), with small tables.
pub(super) fn config(last: u8) -> EngineConfig {
    EngineConfig {
        mac: [0x02, 0, 0, 0, 0, last],
        ipv4: Ipv4Addr::new(10, 0, 0, last),
        isn_secret: [last; 16],
        stag_seed: u64::from(last) * 0x9e37,
        tcp: TcpConfig {
            max_retries: 6,
            rcv_wnd_bytes: RCV_WND,
            ..TcpConfig::default()
        },
        mpa: MpaConfig {
            tx_queue_len: 64,
            rx_ulpdu_max_bytes: 4096,
            ..MpaConfig::default()
        },
        rnic: RnicConfig {
            limits: RnicLimits {
                max_qps: 4,
                max_sq_wr: 32,
                max_rq_wr: 32,
                max_pds: 2,
                max_cqs: 2,
                max_cqe: 256,
                max_srqs: 1,
                max_srq_wr: 32,
                max_stags: 16,
                max_async_events: 32,
                max_cq_events: 32,
                ..RnicLimits::default()
            },
            seed: 0,
        },
        max_conns: 8,
        max_listeners: 2,
        backlog_max: 4,
        arp_cache_entries: 8,
        arp_pending_frames: 8,
        arp_pending_per_hop: 4,
        ctrl_tx_frames: 16,
        event_queue_len: 64,
        ..EngineConfig::default()
    }
}

/// One engine, its memory and its verbs objects.
pub(super) struct Node {
    pub eng: Engine,
    pub mem: VecMemory,
    pub arena: RegionId,
    pub cq: CqId,
    pub qp: QpId,
    /// Local region over the receive buffers.
    pub local: Stag,
    /// Remote-writable region (VA = arena offset).
    pub writable: Stag,
    /// Remote-readable region.
    pub readable: Stag,
    pub events: Vec<Event>,
    /// Frames written by `poll_transmit`, not yet moved.
    pub out: Vec<Vec<u8>>,
    pub next_recv: u64,
    /// Receive buffer (arena offset) of each posted receive, by wr_id.
    pub recv_at: Vec<(u64, u64)>,
}

impl Node {
    pub(super) fn new(last: u8) -> Option<Node> {
        let mut eng = Engine::try_new(config(last)).ok()?;
        let mut mem = VecMemory::new();
        let arena = mem.add_arena(ARENA_LEN);
        crate::arena::fill(mem.arena_mut(arena));
        let r = eng.rnic_mut();
        let pd = r.alloc_pd().ok()?;
        let (cq, _) = r.create_cq(256).ok()?;
        let (qp, _) = r
            .create_qp(&QpAttr {
                sq_depth: 32,
                rq_depth: 32,
                max_send_sge: 2,
                max_recv_sge: 2,
                ord: 4,
                ird: 4,
                inbound_read: true,
                inbound_write: true,
                ..QpAttr::new(pd, cq)
            })
            .ok()?;
        let mut reg = |off: u64, len: u64, access: Access| {
            r.reg_mr(
                &MrAttr {
                    pd,
                    region: arena,
                    region_offset: off,
                    len,
                    va: off,
                    zero_based: false,
                    access,
                    key: last,
                    remote_access_flag: true,
                },
                Some(ARENA_LEN as u64),
            )
            .ok()
        };
        let lrw = Access::LOCAL_READ.union(Access::LOCAL_WRITE);
        let local = reg(0, RECV_AREA, lrw)?;
        let writable = reg(
            RECV_AREA,
            WRITABLE_END - RECV_AREA,
            lrw.union(Access::REMOTE_WRITE),
        )?;
        let readable = reg(
            WRITABLE_END,
            READABLE_END - WRITABLE_END,
            Access::LOCAL_READ.union(Access::REMOTE_READ),
        )?;
        Some(Node {
            eng,
            mem,
            arena,
            cq,
            qp,
            local,
            writable,
            readable,
            events: Vec::new(),
            out: Vec::new(),
            next_recv: 0,
            recv_at: Vec::new(),
        })
    }

    /// Drains one transmit pass (bounded; connections keep their turns, as in the daemon)
    /// then `poll_event`. Every frame fits the buffer and is a whole Ethernet frame.
    pub(super) fn drain(&mut self, now: Instant) {
        let mut buf = [0u8; FRAME_MAX];
        let mut pass = self.eng.transmitter(now, &self.mem);
        for k in 0.. {
            let Some(n) = pass.next(&mut buf) else {
                break;
            };
            assert!(k < 10_000, "the transmit pass never ends");
            assert!((14..=FRAME_MAX).contains(&n), "frame of {n} bytes");
            assert!(EthernetFrame::new_checked(&buf[..n]).is_ok());
            self.out.push(buf[..n].to_vec());
        }
        drop(pass);
        for k in 0.. {
            let Some(e) = self.eng.poll_event() else {
                break;
            };
            assert!(k < 10_000, "poll_event never returns None");
            self.events.push(e);
        }
    }

    /// Posts a receive of [`RECV_LEN`] bytes (the receive buffers are used round-robin).
    pub(super) fn post_recv(&mut self, wr_id: u64) -> bool {
        let slot = self.next_recv % (RECV_AREA / u64::from(RECV_LEN));
        self.next_recv += 1;
        let addr = slot * u64::from(RECV_LEN);
        let wr = iwarp_types::RecvWr {
            wr_id,
            sgl: SgList::single(Sge {
                addr,
                length: RECV_LEN,
                lkey: self.local,
            }),
        };
        let ok = self.eng.post_recv(self.qp, &wr).is_ok();
        if ok {
            self.recv_at.push((wr_id, addr));
        }
        ok
    }

    /// Every completion queued.
    pub(super) fn completions(&mut self) -> Vec<Cqe> {
        let mut out = [Cqe::EMPTY; 32];
        let mut v = Vec::new();
        for _ in 0..64 {
            let n = self.eng.rnic_mut().poll_cq(self.cq, &mut out).unwrap_or(0);
            if n == 0 {
                break;
            }
            v.extend_from_slice(&out[..n]);
        }
        v
    }

    /// The QP is in RTS.
    pub(super) fn rts(&self) -> bool {
        self.eng
            .rnic()
            .query_qp(self.qp)
            .is_ok_and(|q| q.state == iwarp_types::QpState::Rts)
    }

    /// No byte outside the regions remote or local writes may reach changed.
    pub(super) fn check_memory(&self) {
        let a = self.mem.arena(self.arena);
        if let Some(i) = crate::arena::first_change(a, WRITABLE_END as usize, ARENA_LEN) {
            panic!("arena byte {i:#x} outside the writable regions changed");
        }
    }
}

// The wire sees a node as its engine and memory; transmitted frames pass through
// `out` (see `Node::drain`).
iwarp_testkit::engine_station!(Node, eng, mem, out);
