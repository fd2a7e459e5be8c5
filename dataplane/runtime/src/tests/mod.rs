//! Tests of the core loop: two sides joined by the memory link, single-threaded with a
//! manual clock and on threads with the real clock.

mod apps;
mod backpressure;
mod batches;
mod frames;
mod helpers;
mod shutdown;
mod single;
mod steering;
mod threads;
