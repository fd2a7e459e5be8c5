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

/// The responder (which never sent an FPDU) closed; its FIN was lost, and the initiator's
/// nudge (a zero-length RDMA Write, engine nudge.rs) reached it in Closing before the
/// retransmitted FIN reached the initiator: the responder called it a Bad Close.
#[test]
fn seed_0b82b770adb821af_nudge_crosses_a_lost_fin() {
    replay(0x0b82_b770_adb8_21af);
}

/// The same race as `seed_0b82b770adb821af_nudge_crosses_a_lost_fin`.
#[test]
fn seed_e00b054ffad084ed_nudge_crosses_a_lost_fin() {
    replay(0xe00b_054f_fad0_84ed);
}

/// The same race as `seed_0b82b770adb821af_nudge_crosses_a_lost_fin`.
#[test]
fn seed_1cc61bf3419810a5_nudge_crosses_a_lost_fin() {
    replay(0x1cc6_1bf3_4198_10a5);
}

/// Four SYNs in a row were lost (4 % loss). MPA's handshake deadline (10 s) ran from
/// connect() and ended the attempt before TCP's own SYN schedule (syn_retries 6) could
/// send the fifth SYN: "connect failed: ConnectFailed { reason: Timeout }".
#[test]
fn seed_ef6cf539b285e1da_four_lost_syns() {
    replay(0xef6c_f539_b285_e1da);
}

/// The MPA Request was lost three times in a row (4.9 % loss) after TCP's RTO had backed
/// off to 2 s in the SYN phase (the first SYN waited for a lost ARP request: Karn, no RTT
/// sample): the 10 s MPA handshake deadline expired on both sides ("ConnectFailed
/// { Timeout }"). Legal engine behaviour (siw's MPA timeout is 10 s too); the randomized
/// runs now use a 60 s deadline (`suite::RUN_MPA_HANDSHAKE_TIMEOUT`).
#[test]
fn seed_2cb3a6bde936027f_three_lost_mpa_requests() {
    replay(0x2cb3_a6bd_e936_027f);
}
