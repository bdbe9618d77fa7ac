//! wirelat's trace generator and accuracy scorer (pure Rust, no DPDK).
//!
//! It writes the four pcaps a two-point deployment sees (points A and B, ports 0 and 1; see
//! [`topology`]) from synthetic traffic ([`traffic`]) or a base capture ([`base`]), pushing
//! every packet through a seeded model of the segment between the points ([`segment`]), and the
//! ground truth of what the synopses should estimate ([`truth`]). [`score`] compares a run's
//! JSON-lines records ([`record`]) with that truth.
//!
//! ```no_run
//! use wirelat_trace::{generate, segment, traffic};
//! use wirelat_dataplane::sim::{DelayModel, LossModel};
//! let seg = segment::SegmentConfig {
//!     delay: segment::DelaySpec::Iid(DelayModel::Weibull { shape: 0.6, mean: 50_000.0 }),
//!     loss: LossModel::Uniform { rate: 0.01 },
//!     fifo: false,
//!     reorder: None,
//!     paths: vec![],
//! };
//! let cfg = generate::GenConfig::synthetic(7, traffic::TrafficConfig::default(), seg);
//! let pair = generate::generate(&cfg)?;
//! pair.write_dir(std::path::Path::new("out"))?;
//! # Ok::<(), wirelat_trace::error::TraceError>(())
//! ```
//!
//! Nothing here is on a hot path; nothing panics on a malformed file or configuration.

#![forbid(unsafe_code)]

pub mod base;
pub mod error;
pub mod frame;
pub mod generate;
pub mod parse;
pub mod pcap_io;
pub mod record;
pub mod score;
pub mod segment;
pub mod spec;
pub mod topology;
pub mod traffic;
pub mod truth;

pub use error::{Result, TraceError};
pub use generate::{GenConfig, Source, TracePair, generate};
pub use topology::{Direction, DirectionTaps, Point, Tap};
