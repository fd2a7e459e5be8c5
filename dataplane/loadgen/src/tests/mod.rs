//! Client and server driven through the `App` trait over two engines in virtual time.

mod harness;
mod scenarios;
