//! The packet layer: what every synopsis consumes per packet.
//!
//! Pure Rust over byte slices: no DPDK, no allocation, and no panic on any input.

pub mod class;
pub mod classify;
pub mod config;
pub mod dns;
pub mod encap;
pub mod ethernet;
pub mod exchange;
mod field;
pub mod flow;
pub mod icmp;
pub mod identity;
pub mod inspect;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
pub mod sample;
pub mod synth;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use class::{PacketCounters, SkipReason};
pub use config::PacketConfig;
pub use encap::{Encap, EncapConfig, EncapKind};
pub use exchange::{Exchange, ExchangeKind, Role};
pub use flow::FlowKey;
pub use inspect::{Inspection, Measurement, inspect, measure};
