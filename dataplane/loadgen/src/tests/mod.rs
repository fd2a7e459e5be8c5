//! Client and server driven through the `App` trait over two engines in virtual time.

mod close;
mod harness;
mod scenarios;
