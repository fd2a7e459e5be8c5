//! Executing control commands on a core.

use iwarp_types::{Instant, Memory};

use crate::control::{
    AppBox, AppId, Command, ControlError, CqeBatch, Done, Op, Reply, CQE_BATCH_MAX,
};
use crate::core::{pending_is, AppSlot, Core, Pending};

impl<M: Memory> Core<M> {
    /// Executes up to the per-iteration bound of queued commands.
    pub(crate) fn run_commands(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while n < self.cfg.commands_per_iteration {
            let Some(cmd) = self.control.pop_command() else {
                break;
            };
            n += 1;
            let id = cmd.id;
            let result = self.exec(now, cmd);
            self.loop_counters.commands += 1;
            // Room for the reply was checked before the command was taken.
            let _ = self.control.push_reply(Reply {
                id,
                core: self.cfg.index,
                result,
            });
        }
        n
    }

    /// One command.
    fn exec(&mut self, now: Instant, cmd: Command<M>) -> Result<Done<M>, ControlError> {
        let pi = cmd.port;
        // Commands that do not need a port.
        match cmd.op {
            Op::Snapshot => {
                self.publish_with(now, true);
                return Ok(Done::Ok);
            }
            Op::Shutdown { grace_ms } => {
                self.begin_shutdown(now, grace_ms);
                return Ok(Done::Ok);
            }
            Op::StopApp(id) => {
                let slot = self
                    .apps
                    .iter_mut()
                    .find(|s| s.as_ref().is_some_and(|s| s.id == id))
                    .ok_or(ControlError::NoSuchApp)?;
                let s = slot.take().ok_or(ControlError::NoSuchApp)?;
                return Ok(Done::AppStopped(AppBox(s.app)));
            }
            _ => {}
        }
        if pi >= self.ports.len() {
            return Err(ControlError::NoSuchPort);
        }
        let shutting_down = self.shutdown.is_some();
        let me = self.cfg.index;
        let port = &mut self.ports[pi];
        let engine = &mut port.engine;
        Ok(match cmd.op {
            Op::AllocPd => Done::Pd(engine.rnic_mut().alloc_pd()?),
            Op::DeallocPd(pd) => {
                engine.rnic_mut().dealloc_pd(pd)?;
                Done::Ok
            }
            Op::CreateCq { depth } => {
                let (cq, d) = engine.rnic_mut().create_cq(depth)?;
                Done::Cq(cq, d)
            }
            Op::ResizeCq { cq, depth } => Done::CqDepth(engine.rnic_mut().resize_cq(cq, depth)?),
            Op::DestroyCq(cq) => {
                engine.rnic_mut().destroy_cq(cq)?;
                Done::Ok
            }
            Op::CreateQp(attr) => {
                if self.owned_qps.len() >= self.cfg.max_control_qps {
                    return Err(ControlError::TableFull);
                }
                let (qp, a) = engine.rnic_mut().create_qp(&attr)?;
                self.owned_qps.insert((pi, qp));
                Done::Qp(qp, a)
            }
            Op::ModifyQp { qp, modify } => {
                engine.modify_qp(qp, &modify)?;
                Done::Ok
            }
            Op::QueryQp(qp) => Done::QpInfo(engine.rnic().query_qp(qp)?),
            Op::DestroyQp(qp) => {
                engine.rnic_mut().destroy_qp(qp)?;
                self.owned_qps.remove(&(pi, qp));
                if let Some((_, owned)) = port.live.remove(&qp) {
                    if !owned {
                        self.app_live_qps = self.app_live_qps.saturating_sub(1);
                    }
                }
                self.pending
                    .retain(|p| !matches!(*p, Pending::Opening(i, _, q) if i == pi && q == qp));
                Done::Ok
            }
            Op::CreateSrq {
                pd,
                max_wr,
                max_sge,
                limit,
            } => {
                let (srq, wr, sge) = engine.rnic_mut().create_srq(pd, max_wr, max_sge, limit)?;
                Done::Srq(srq, wr, sge)
            }
            Op::ModifySrq { srq, modify } => {
                Done::SrqSize(engine.rnic_mut().modify_srq(srq, modify)?)
            }
            Op::DestroySrq(srq) => {
                engine.rnic_mut().destroy_srq(srq)?;
                Done::Ok
            }
            Op::RegMr(attr) => {
                let len = self
                    .mem
                    .region_len(attr.region)
                    .ok_or(ControlError::NoSuchRegion)?;
                Done::Stag(engine.rnic_mut().reg_mr(&attr, Some(len))?)
            }
            Op::DeregMr(stag) | Op::DeallocMw(stag) => {
                engine.rnic_mut().dealloc_stag(stag)?;
                Done::Ok
            }
            Op::AllocMw { pd, kind } => Done::Stag(engine.rnic_mut().alloc_mw(pd, kind)?),
            Op::Listen {
                port: tcp_port,
                backlog,
            } => {
                if shutting_down {
                    return Err(ControlError::ShuttingDown);
                }
                engine.listen(tcp_port, backlog)?;
                if !port.listening.contains(&tcp_port)
                    && port.listening.len() < port.listening.capacity()
                {
                    port.listening.push(tcp_port);
                }
                Done::Ok
            }
            Op::Unlisten(tcp_port) => {
                port.listening.retain(|p| *p != tcp_port);
                if !engine.unlisten(tcp_port) {
                    return Err(ControlError::Cm(iwarp_engine::CmError::InvalidState));
                }
                Done::Ok
            }
            Op::Connect { qp, remote, params } => {
                if shutting_down {
                    return Err(ControlError::ShuttingDown);
                }
                if self.pending.len() >= self.pending.capacity() {
                    return Err(ControlError::TableFull);
                }
                let (steer, local_ip) = (&port.steering, port.local_ip);
                let (rip, rport) = (remote.ip().octets(), remote.port());
                let local_port = engine
                    .choose_local_port(*remote.ip(), rport, |p| {
                        steer.owner(local_ip, rip, p, rport) == me
                    })
                    .ok_or(ControlError::NoSteeredPort)?;
                let conn = engine.connect_from(now, qp, local_port, *remote.ip(), rport, params)?;
                self.pending.push(Pending::Opening(pi, conn, qp));
                Done::Conn(conn, local_port)
            }
            Op::Accept { conn, qp, params } => {
                engine.accept(now, conn, qp, params)?;
                self.pending.retain(|p| !pending_is(p, pi, conn));
                // Room: the request's entry was just removed (or never counted).
                if self.pending.len() < self.pending.capacity() {
                    self.pending.push(Pending::Opening(pi, conn, qp));
                }
                Done::Ok
            }
            Op::Reject { conn, private_data } => {
                engine.reject(now, conn, private_data)?;
                self.pending.retain(|p| !pending_is(p, pi, conn));
                Done::Ok
            }
            Op::Disconnect(qp) => {
                engine.disconnect(now, qp)?;
                Done::Ok
            }
            Op::Abort(qp) => {
                engine.abort(now, qp)?;
                Done::Ok
            }
            Op::PostSend { qp, wr } => {
                engine.post_send(qp, &wr)?;
                Done::Ok
            }
            Op::PostRecv { qp, wr } => {
                engine.post_recv(qp, &wr)?;
                Done::Ok
            }
            Op::PollCq { cq, max } => {
                if max == 0 || max > CQE_BATCH_MAX {
                    return Err(ControlError::BadBatch);
                }
                let n = engine
                    .rnic_mut()
                    .poll_cq(cq, &mut self.cqe_scratch[..max])?;
                Done::Cqes(CqeBatch::from_slice(&self.cqe_scratch[..n]))
            }
            Op::ReqNotifyCq { cq, solicited_only } => {
                engine.rnic_mut().req_notify_cq(cq, solicited_only)?;
                Done::Ok
            }
            Op::StartApp(app) => {
                if shutting_down {
                    return Err(ControlError::ShuttingDown);
                }
                let slot = self
                    .apps
                    .iter_mut()
                    .find(|s| s.is_none())
                    .ok_or(ControlError::AppTableFull)?;
                let id = AppId(self.next_app_id);
                self.next_app_id = self.next_app_id.wrapping_add(1);
                *slot = Some(AppSlot {
                    id,
                    port: pi,
                    app: app.0,
                });
                Done::AppStarted(id)
            }
            Op::Snapshot | Op::Shutdown { .. } | Op::StopApp(_) => Done::Ok,
        })
    }
}
