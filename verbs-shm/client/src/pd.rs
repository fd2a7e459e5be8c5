//! [`Pd`]: protection domains (`ibv_alloc_pd`).

use std::sync::Arc;

use iwarp_shm_socket::{PdHandle, Request, Response};

use crate::context::{unexpected, CtxInner};
use crate::{Context, Result};

/// What a PD's users share; deallocates the PD when the last goes.
pub(crate) struct PdShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: PdHandle,
}

impl Drop for PdShared {
    fn drop(&mut self) {
        let _ = self.ctx.call(Request::DeallocPd(self.handle));
    }
}

/// A protection domain (one on every dataplane core, one handle). MRs, MWs, QPs and
/// SRQs are created from it and keep it alive; it is deallocated when it and all of
/// them are gone.
#[derive(Clone)]
pub struct Pd {
    pub(crate) shared: Arc<PdShared>,
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pd").field(&self.shared.handle).finish()
    }
}

impl Context {
    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<Pd> {
        match self.inner.call(Request::AllocPd)? {
            Response::Pd(handle) => Ok(Pd {
                shared: Arc::new(PdShared {
                    ctx: self.inner.clone(),
                    handle,
                }),
            }),
            r => Err(unexpected("AllocPd", &r)),
        }
    }
}

impl Pd {
    /// The daemon's handle.
    pub fn handle(&self) -> PdHandle {
        self.shared.handle
    }

    /// The context it belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.shared.ctx.clone(),
        }
    }
}
