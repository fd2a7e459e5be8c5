//! Randomized runs that once failed, replayed by name (issue 17). Each seed reproduces
//! its run bit for bit (see `iwarp_sim::rng`); the comment says what went wrong.

use iwarp_sim::rng::SeedGuard;
use iwarp_sim::suite;

fn replay(seed: u64) {
    let _g = SeedGuard::new(seed, "seeds");
    if let Err(e) = suite::run_seed(seed) {
        panic!("run 0x{seed:016x} failed: {e}");
    }
}

/// Peer-to-peer with the Read RTR; the RTR's Read Response was lost and the initiator
/// disconnected while the RTR Read was still in its ORQ. The retransmitted Response
/// emptied the ORQ without starting the pending close: no FIN was ever sent, and the
/// close never finished ("simulation went idle at t=181 s").
#[test]
fn seed_8647c85e4a86d9bd_disconnect_waiting_for_the_read_rtr() {
    replay(0x8647_c85e_4a86_d9bd);
}
