//! Verbs that make a QP send, wrapped so the engine notices the work without scanning:
//! each marks the QP's connection ready for `poll_transmit` (the doorbell).

use iwarp_rdma::QpModify;
use iwarp_types::{CqId, Cqe, QpId, RecvWr, SendWr, VerbError};

use crate::conn_table::slot_of;
use crate::engine::Engine;

impl Engine {
    /// Post Send (verbs 7.2) on `qp`, then rings its doorbell. Call `poll_transmit`
    /// afterwards.
    pub fn post_send(&mut self, qp: QpId, wr: &SendWr) -> Result<(), VerbError> {
        let r = self.core.rnic.post_send(qp, wr);
        self.qp_doorbell(qp);
        r
    }

    /// Post Receive (verbs 7.3) on `qp`, then rings its doorbell (a receive posted while
    /// Closing is flushed at once).
    pub fn post_recv(&mut self, qp: QpId, wr: &RecvWr) -> Result<(), VerbError> {
        let r = self.core.rnic.post_recv(qp, wr);
        self.qp_doorbell(qp);
        r
    }

    /// Modify QP (verbs 9.2.5.3), then rings its doorbell: a move to Closing, Terminate
    /// or Error makes the QP ask its connection for a FIN, a Terminate or an RST.
    pub fn modify_qp(&mut self, qp: QpId, m: &QpModify) -> Result<(), VerbError> {
        let r = self.core.rnic.modify_qp(qp, m);
        self.qp_doorbell(qp);
        r
    }

    /// A completion made outside the engine (a WR its owner refused before posting it)
    /// written into `cq`'s sink after every completion so far
    /// ([`iwarp_rdma::Rnic::push_completion`]); if the CQ has no room and the completion
    /// belongs to `qp`, `qp` goes to Terminate with a CQ error and its doorbell is rung.
    /// `Ok(false)` if the CQ overflowed.
    pub fn push_completion(
        &mut self,
        cq: CqId,
        cqe: Cqe,
        qp: Option<QpId>,
    ) -> Result<bool, VerbError> {
        let r = self.core.rnic.push_completion(cq, cqe, qp);
        if let (Ok(false), Some(qp)) = (r, qp) {
            self.qp_doorbell(qp);
        }
        r
    }

    /// Tells the engine `qp` may have work (after posting or modifying through
    /// [`Engine::rnic_mut`] directly): its connection, if any, is queued for
    /// `poll_transmit`. O(1).
    pub fn qp_doorbell(&mut self, qp: QpId) {
        if let Some(id) = self.core.qp_conns.get(&qp).copied() {
            self.core.ready.push(slot_of(id));
        }
    }
}
