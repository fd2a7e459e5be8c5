//! Completion queues: the client's CQ ring as the engine CQ's sink.
use iwarp_engine::Engine;
use iwarp_shm_ring::{Producer, RingKind, CQE_SLOT_SIZE};
use iwarp_types::VerbError;

use super::{layout, R};
use crate::cq::RingSink;
use crate::request::{ServiceError, ServiceReply, ServiceRequest};
use crate::service::ShmService;
use crate::tables::CqEntry;

impl ShmService {
    /// The CQ requests (`execute` routes them here).
    pub(super) fn exec_cq(&mut self, engine: &mut Engine, req: ServiceRequest) -> R {
        use ServiceRequest as Q;
        match req {
            Q::CreateCq {
                client,
                cq,
                depth,
                ring,
                control,
            } => {
                self.client(client)?;
                if self.cqs.len() >= self.cfg.max_objects {
                    return Err(ServiceError::TableFull);
                }
                let lay = layout(RingKind::Completion, ring.entries, CQE_SLOT_SIZE)?;
                let producer = Producer::attach(ring.region.clone(), lay)?;
                // The sub-ring is the engine CQ: it must hold `depth` completions.
                if RingSink::capacity(ring.entries) < depth as usize {
                    return Err(ServiceError::Invalid(
                        "CQ ring smaller than depth + 1 entries",
                    ));
                }
                let sink = Box::new(RingSink::new(producer, control));
                let (id, got) = engine.rnic_mut().create_cq_with_sink(depth, sink)?;
                self.cqs.insert(
                    id,
                    CqEntry {
                        client,
                        handle: cq,
                        pending: false,
                        wake_pending: false,
                    },
                );
                self.reserve_lists();
                Ok(ServiceReply::Cq { cq: id, depth: got })
            }
            Q::ResizeCq {
                client,
                cq,
                depth,
                ring,
            } => {
                self.own_cq(client, cq)?;
                let lay = layout(RingKind::Completion, ring.entries, CQE_SLOT_SIZE)?;
                let producer = Producer::attach(ring.region.clone(), lay)?;
                if depth > engine.rnic().limits().max_cqe {
                    return Err(ServiceError::Verb(VerbError::CqTooLarge));
                }
                let got = RingSink::capacity(ring.entries);
                if got < depth as usize {
                    return Err(ServiceError::Invalid(
                        "CQ ring smaller than depth + 1 entries",
                    ));
                }
                // Completions already in the old sub-ring stay there, read before the
                // marker: nothing to shrink.
                let sink = engine
                    .rnic_mut()
                    .cq_sink_mut::<RingSink>(cq)
                    .ok_or(ServiceError::Invalid("CQ without a ring"))?;
                sink.move_to(producer);
                Ok(ServiceReply::Cq {
                    cq,
                    depth: got.min(u32::MAX as usize) as u32,
                })
            }
            Q::DestroyCq { client, cq } => {
                self.own_cq(client, cq)?;
                self.destroy_engine_cq(engine, cq, client)?;
                self.cqs.remove(&cq);
                self.cq_pending.retain(|c| *c != cq);
                Ok(ServiceReply::Done)
            }
            _ => Err(ServiceError::Invalid("not a CQ request")),
        }
    }
}
