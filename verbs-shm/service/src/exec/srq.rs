//! Shared receive queues.
use iwarp_engine::Engine;
use iwarp_shm_ring::{RingKind, RECV_SLOT_SIZE};

use super::{consumer, R};
use crate::request::{ServiceError, ServiceReply, ServiceRequest};
use crate::service::ShmService;
use crate::tables::{Bell, SrqEntry};

impl ShmService {
    /// The SRQ requests (`execute` routes them here).
    pub(super) fn exec_srq(&mut self, engine: &mut Engine, req: ServiceRequest) -> R {
        use ServiceRequest as Q;
        match req {
            Q::CreateSrq {
                client,
                srq,
                pd,
                max_wr,
                max_sge,
                limit,
                ring,
            } => {
                self.own_pd(client, pd)?;
                if !self.client(client)?.bell_free(ring.doorbell) {
                    return Err(ServiceError::Invalid("doorbell bit out of range or in use"));
                }
                if self.srqs.len() >= self.cfg.max_objects {
                    return Err(ServiceError::TableFull);
                }
                let cons = consumer(&ring.ring, RingKind::SharedRecv, RECV_SLOT_SIZE)?;
                let (id, w, g) = engine.rnic_mut().create_srq(pd, max_wr, max_sge, limit)?;
                self.client(client)?.set_bell(ring.doorbell, Bell::Srq(id));
                self.srqs.insert(
                    id,
                    SrqEntry {
                        client,
                        handle: srq,
                        ring: cons,
                        bit: ring.doorbell,
                        err_cq: None,
                        pending: false,
                        broken: false,
                    },
                );
                self.reserve_lists();
                Ok(ServiceReply::Srq {
                    srq: id,
                    max_wr: w,
                    max_sge: g,
                })
            }
            Q::ModifySrq {
                client,
                srq,
                modify,
            } => {
                self.own_srq(client, srq)?;
                Ok(ServiceReply::SrqMaxWr(
                    engine.rnic_mut().modify_srq(srq, modify)?,
                ))
            }
            Q::QuerySrq { client, srq } => {
                self.own_srq(client, srq)?;
                Ok(ServiceReply::SrqAttr(engine.rnic().query_srq(srq)?))
            }
            Q::DestroySrq { client, srq } => {
                self.own_srq(client, srq)?;
                engine.rnic_mut().destroy_srq(srq)?;
                if let Some(s) = self.srqs.remove(&srq) {
                    self.client(client)?.set_bell(s.bit, Bell::None);
                }
                Ok(ServiceReply::Done)
            }
            _ => Err(ServiceError::Invalid("not a SRQ request")),
        }
    }
}
