//! The packet layer: what every synopsis consumes per packet.
//!
//! Pure Rust over byte slices: no DPDK, no allocation, and no panic on any input.

pub mod exchange;
pub mod flow;

pub use exchange::{Exchange, ExchangeKind, Role};
pub use flow::FlowKey;
pub mod sample;
