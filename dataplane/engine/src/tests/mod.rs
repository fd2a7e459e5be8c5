//! Engine tests: single-engine behaviour on literal frames, and two engines wired back to
//! back by a tiny in-test loop.

mod b2b;
mod close;
mod crc_placement;
mod exhaustion;
mod harness;
mod memory;
mod neighbour;
mod nudge;
mod receive_pass;
mod reject_fin;
mod responder;
mod scale;
mod single;
mod transmit_pass;
