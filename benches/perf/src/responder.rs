//! The server's part of every test, one non-blocking step at a time (so that in loopback
//! mode one thread drives both ends): echo SENDs (send_lat), answer WRITEs (write_lat),
//! return receive credits (send_bw); the READ and WRITE bandwidth tests need nothing.

use iwarp_verbs::{
    Arena, Cqe, RecvWr, SendFlags, SendOp, SendWr, SgList, Stag, WcOpcode, WcStatus,
};

use crate::args::Test;
use crate::setup::Endpoint;
use crate::PerfError;

/// Completions polled per call.
pub const POLL_BATCH: usize = 32;

/// Credits one credit message returns, for a receiver that posted `credits` receives.
pub fn credit_batch(credits: u32) -> u32 {
    (credits / 4).max(1)
}

/// An empty completion for poll buffers.
pub fn blank_cqe() -> Cqe {
    Cqe {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        qp: iwarp_verbs::QpId(0),
        invalidated: None,
        solicited: false,
    }
}

/// Checks a completion's status.
pub fn check(c: &Cqe, what: &str) -> Result<(), PerfError> {
    if c.status == WcStatus::Success {
        Ok(())
    } else {
        Err(PerfError::Run(format!(
            "{what}: completion {:?} of {:?} (wr_id {})",
            c.status, c.opcode, c.wr_id
        )))
    }
}

/// Reads byte `off` of the arena as the daemon may have just written it (never cached
/// across calls).
#[inline]
pub fn peek(arena: &Arena, off: usize) -> u8 {
    let s = std::hint::black_box(arena.as_slice());
    std::hint::black_box(s[off])
}

/// The server end of one size's connections.
pub struct Responder {
    test: Test,
    eps: Vec<Endpoint>,
    /// write_lat: the last value seen in each buffer's last byte.
    last: Vec<u8>,
    /// send_bw: receives consumed since the last credit message.
    consumed: Vec<u32>,
    wc: [Cqe; POLL_BATCH],
}

impl Responder {
    /// Serves `eps` (already established).
    pub fn new(eps: Vec<Endpoint>) -> Responder {
        let test = eps.first().map_or(Test::WriteBw, |e| e.remote.test);
        let n = eps.len();
        Responder {
            test,
            eps,
            last: vec![0; n],
            consumed: vec![0; n],
            wc: [blank_cqe(); POLL_BATCH],
        }
    }

    /// The endpoints (to watch for disconnects, and to close).
    pub fn endpoints(&mut self) -> &mut [Endpoint] {
        &mut self.eps
    }

    /// One step: bounded work on every endpoint.
    pub fn progress(&mut self, arena: &mut Arena) -> Result<(), PerfError> {
        for i in 0..self.eps.len() {
            if self.eps[i].disconnected {
                continue;
            }
            if self.test == Test::WriteLat {
                self.answer_write(i, arena)?;
            }
            let n = self.eps[i]
                .cq
                .poll(&mut self.wc)
                .map_err(|e| PerfError::verbs("poll_cq", e))?;
            for k in 0..n {
                let c = self.wc[k];
                check(&c, "server")?;
                if c.opcode == WcOpcode::Recv {
                    self.on_recv(i, &c)?;
                }
            }
        }
        Ok(())
    }

    /// write_lat: when the client's WRITE landed (the buffer's last byte changed), write
    /// the same value back.
    fn answer_write(&mut self, i: usize, arena: &mut Arena) -> Result<(), PerfError> {
        let ep = &mut self.eps[i];
        let size = ep.remote.size as usize;
        let last = ep.off + size - 1;
        let v = peek(arena, last);
        if v == self.last[i] {
            return Ok(());
        }
        self.last[i] = v;
        arena.as_mut_slice()[last] = v;
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Write {
                remote_to: ep.remote.buf_addr,
                rkey: Stag(ep.remote.rkey),
            },
            sgl: SgList::single(
                ep.mr
                    .sge(0, size as u32)
                    .map_err(|e| PerfError::verbs("sge", e))?,
            ),
            flags: SendFlags::SIGNALED,
        };
        ep.qp
            .post_send(&wr)
            .map_err(|e| PerfError::verbs("post_send", e))
    }

    fn on_recv(&mut self, i: usize, c: &Cqe) -> Result<(), PerfError> {
        let ep = &mut self.eps[i];
        let full = ep
            .mr
            .sge(0, ep.mr.len().min(u32::MAX as u64) as u32)
            .map_err(|e| PerfError::verbs("sge", e))?;
        ep.qp
            .post_recv(&RecvWr {
                wr_id: c.wr_id,
                sgl: SgList::single(full),
            })
            .map_err(|e| PerfError::verbs("post_recv", e))?;
        let reply_len = match self.test {
            Test::SendLat => c.byte_len.max(1),
            Test::SendBw => {
                self.consumed[i] += 1;
                let batch = credit_batch(ep.credits);
                if self.consumed[i] < batch {
                    return Ok(());
                }
                self.consumed[i] = 0;
                1
            }
            _ => return Ok(()),
        };
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Send,
            sgl: SgList::single(
                ep.mr
                    .sge(0, reply_len)
                    .map_err(|e| PerfError::verbs("sge", e))?,
            ),
            flags: SendFlags::SIGNALED,
        };
        ep.qp
            .post_send(&wr)
            .map_err(|e| PerfError::verbs("post_send", e))
    }
}
