//! Protection domains, memory regions and windows, and the client's arenas.
use iwarp_engine::Engine;
use iwarp_types::Memory;

use super::R;
use crate::request::{ServiceError, ServiceReply, ServiceRequest};
use crate::service::ShmService;

impl ShmService {
    /// The memory requests (`execute` routes them here).
    pub(super) fn exec_mr<M: Memory>(
        &mut self,
        engine: &mut Engine,
        mem: &mut M,
        req: ServiceRequest,
    ) -> R {
        use ServiceRequest as Q;
        match req {
            Q::AllocPd { client } => {
                self.client(client)?;
                let pd = engine.rnic_mut().alloc_pd()?;
                self.client(client)?.pds.push(pd);
                Ok(ServiceReply::Pd(pd))
            }
            Q::DeallocPd { client, pd } => {
                self.own_pd(client, pd)?;
                engine.rnic_mut().dealloc_pd(pd)?;
                self.client(client)?.pds.retain(|p| *p != pd);
                Ok(ServiceReply::Done)
            }
            Q::RegMr { client, attr, at } => {
                self.own_pd(client, attr.pd)?;
                self.own_region(client, &attr)?;
                let len = mem.region_len(attr.region);
                let stag = match at {
                    Some(s) => engine.rnic_mut().reg_mr_at(s, &attr, len)?,
                    None => engine.rnic_mut().reg_mr(&attr, len)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::ReregMr { client, stag, attr } => {
                self.own_stag(client, stag)?;
                self.own_pd(client, attr.pd)?;
                self.own_region(client, &attr)?;
                let len = mem.region_len(attr.region);
                let new = engine.rnic_mut().rereg_mr(stag, &attr, len)?;
                let c = self.client(client)?;
                c.stags.retain(|s| s.0 >> 8 != stag.0 >> 8);
                c.stags.push(new);
                Ok(ServiceReply::Stag(new))
            }
            Q::AllocMr {
                client,
                pd,
                max_len,
                remote_access_flag,
                at,
            } => {
                self.own_pd(client, pd)?;
                let r = engine.rnic_mut();
                let stag = match at {
                    Some(s) => r.alloc_mr_stag_at(s, pd, max_len, remote_access_flag)?,
                    None => r.alloc_mr_stag(pd, max_len, remote_access_flag)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::QueryMr { client, stag } => {
                self.own_stag(client, stag)?;
                Ok(ServiceReply::MrInfo(engine.rnic().query_mr(stag)?))
            }
            Q::DeallocStag { client, stag } => {
                self.own_stag(client, stag)?;
                engine.rnic_mut().dealloc_stag(stag)?;
                self.client(client)?
                    .stags
                    .retain(|s| s.0 >> 8 != stag.0 >> 8);
                Ok(ServiceReply::Done)
            }
            Q::AllocMw {
                client,
                pd,
                kind,
                at,
            } => {
                self.own_pd(client, pd)?;
                let stag = match at {
                    Some(s) => engine.rnic_mut().alloc_mw_at(s, pd, kind)?,
                    None => engine.rnic_mut().alloc_mw(pd, kind)?,
                };
                self.client(client)?.stags.push(stag);
                Ok(ServiceReply::Stag(stag))
            }
            Q::BindMwType1 { client, pd, bind } => {
                self.own_pd(client, pd)?;
                self.own_stag(client, bind.mw)?;
                self.own_stag(client, bind.mr)?;
                engine.rnic_mut().bind_mw_type1(pd, &bind)?;
                Ok(ServiceReply::Done)
            }
            Q::AddArena {
                client,
                arena,
                region,
            } => {
                let c = self.client(client)?;
                if c.arenas.len() >= crate::tables::ARENAS_MAX && !c.arenas.contains_key(&arena) {
                    return Err(ServiceError::TableFull);
                }
                c.arenas.insert(arena, region);
                Ok(ServiceReply::Done)
            }
            Q::RemoveArena { client, arena } => {
                self.client(client)?.arenas.remove(&arena);
                Ok(ServiceReply::Done)
            }
            _ => Err(ServiceError::Invalid("not a memory request")),
        }
    }
}
