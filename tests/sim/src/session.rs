//! A representative session for captures: MPA revision 2 with CRC, a Send, an RDMA
//! Write, an RDMA Read, a Terminate (an RDMA Write to an invalid STag on a second QP) and
//! a graceful close, every frame written to a pcap. Used by `scripts/sim-pcap.sh` (through
//! the `sim-pcap` binary) and by the capture test.

use std::io::Write;

use iwarp_engine::Event;
use iwarp_mpa::CrcPolicy;
use iwarp_types::{
    AsyncEventKind, Duration, QpState, RecvWr, SendFlags, SendOp, SendWr, Stag, TermCode, WcOpcode,
    WcStatus,
};

use crate::host::{connect, make_side, sim_of_hosts, ConnectSpec, Host, Side};
use crate::link::LinkConfig;
use crate::sim::Sim;

/// What the session did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionSummary {
    /// Frames captured.
    pub frames: u64,
    /// Virtual time at the end, nanoseconds.
    pub end_ns: u64,
}

fn sw(wr_id: u64, op: SendOp, side: &Side, offset: u64, len: u32) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl: side.sgl(offset, len),
        flags: SendFlags::SIGNALED,
    }
}

fn wait_cqe(sim: &mut Sim<Host>, side: &Side, what: &str) -> Result<iwarp_types::Cqe, String> {
    sim.try_run_until(Duration::from_secs(10), |s| {
        s.node(side.host).cqe_count(side.cq) > 0
    })
    .map_err(|h| format!("{what}: {h}"))?;
    let c = sim.node_mut(side.host).take_cqes(side.cq).remove(0);
    if c.status != WcStatus::Success {
        return Err(format!("{what}: {c:?}"));
    }
    Ok(c)
}

/// Runs the session with `seed`, capturing into `out`.
pub fn representative_session(seed: u64, out: Box<dyn Write>) -> Result<SessionSummary, String> {
    let mut sim = sim_of_hosts(2, LinkConfig::default(), seed, |_, cfg| {
        cfg.mpa.revision = 2;
        cfg.mpa.crc = CrcPolicy::Request;
    });
    sim.capture_to(out).map_err(|e| format!("capture: {e}"))?;
    let a = make_side(&mut sim, 0, 1 << 20, None, |_| {});
    let b = make_side(&mut sim, 1, 1 << 20, None, |_| {});
    connect(&mut sim, 0, a.qp, 1, b.qp, &ConnectSpec::default());
    let mut data = vec![0u8; 64 * 1024];
    sim.rng().fill_bytes(&mut data);
    sim.node_mut(0).arena_mut(a.region)[..data.len()].copy_from_slice(&data);

    // Send (the initiator speaks first), then Write, then Read back.
    let recv = RecvWr {
        wr_id: 1,
        sgl: b.sgl(0, 4096),
    };
    sim.node_mut(1)
        .post_recv(b.qp, &recv)
        .map_err(|e| e.to_string())?;
    sim.node_mut(0)
        .post_send(a.qp, &sw(1, SendOp::Send, &a, 0, 1000))
        .map_err(|e| e.to_string())?;
    wait_cqe(&mut sim, &a, "send")?;
    let c = wait_cqe(&mut sim, &b, "receive")?;
    if c.opcode != WcOpcode::Recv
        || c.byte_len != 1000
        || sim.node(1).arena(b.region)[..1000] != data[..1000]
    {
        return Err(format!("receive: {c:?} or data differ"));
    }
    let write = SendOp::Write {
        remote_to: 0x1_0000,
        rkey: b.mr,
    };
    sim.node_mut(0)
        .post_send(a.qp, &sw(2, write, &a, 0, 20_000))
        .map_err(|e| e.to_string())?;
    wait_cqe(&mut sim, &a, "write")?;
    if sim.node(1).arena(b.region)[0x1_0000..0x1_0000 + 20_000] != data[..20_000] {
        return Err("write: data differ".into());
    }
    let read = SendOp::Read {
        remote_to: 0x1_0000,
        rkey: b.mr,
        invalidate_local: false,
    };
    sim.node_mut(0)
        .post_send(a.qp, &sw(3, read, &a, 0x8_0000, 20_000))
        .map_err(|e| e.to_string())?;
    wait_cqe(&mut sim, &a, "read")?;
    if sim.node(0).arena(a.region)[0x8_0000..0x8_0000 + 20_000] != data[..20_000] {
        return Err("read: data differ".into());
    }

    // A second connection; a Write to an STag that does not exist: Terminate.
    let a2 = make_side(&mut sim, 0, 64 * 1024, None, |_| {});
    let b2 = make_side(&mut sim, 1, 64 * 1024, None, |_| {});
    connect(
        &mut sim,
        0,
        a2.qp,
        1,
        b2.qp,
        &ConnectSpec {
            port: 4792,
            ..ConnectSpec::default()
        },
    );
    sim.node_mut(1)
        .post_recv(
            b2.qp,
            &RecvWr {
                wr_id: 5,
                sgl: b2.sgl(0, 64),
            },
        )
        .map_err(|e| e.to_string())?;
    sim.node_mut(0)
        .post_send(a2.qp, &sw(5, SendOp::Send, &a2, 0, 64))
        .map_err(|e| e.to_string())?;
    wait_cqe(&mut sim, &b2, "second receive")?;
    wait_cqe(&mut sim, &a2, "second send")?;
    let bad = SendOp::Write {
        remote_to: 0,
        rkey: Stag(b2.mr.0 ^ 0x0100),
    };
    sim.node_mut(0)
        .post_send(a2.qp, &sw(4, bad, &a2, 0, 100))
        .map_err(|e| e.to_string())?;
    let want = AsyncEventKind::TerminateReceived(TermCode::DDP_TAGGED_INVALID_STAG);
    sim.try_run_until(Duration::from_secs(10), |s| {
        s.events(0)
            .iter()
            .any(|e| matches!(e, Event::Async(ev) if ev.kind == want))
    })
    .map_err(|h| format!("terminate: {h}; events {:?}", sim.events(0)))?;

    // Graceful close of the first connection.
    let now = sim.now();
    sim.node_mut(0)
        .engine
        .disconnect(now, a.qp)
        .map_err(|e| e.to_string())?;
    sim.try_run_until(Duration::from_secs(120), |s| {
        s.node(0).qp_state(a.qp) == QpState::Idle && s.node(1).qp_state(b.qp) == QpState::Idle
    })
    .map_err(|h| format!("close: {h}"))?;
    let _ = sim.run_until_quiet(Duration::from_millis(10), Duration::from_secs(120));
    let end_ns = sim.now().as_nanos();
    let frames = sim.finish_capture().map_err(|e| format!("capture: {e}"))?;
    Ok(SessionSummary { frames, end_ns })
}
