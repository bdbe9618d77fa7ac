//! wirelat's control plane: everything that runs per epoch, never per packet.
//!
//! It never sees a packet: it works on the synopsis buffers the workers hand over.
//!
//! - [`config`]: the TOML configuration, its defaults, validation and the EAL arguments.
//! - [`epoch`]: harvesting epochs from the workers and merging their shards.
//! - [`colate_archive`]: COLATE's closed counter epochs on disk, queryable by flow and points.
//! - [`sink`]: what the control thread hands on per harvested epoch.
//! - [`control_side`]: each synopsis's control side (publishing, the peer's handling, its
//!   record keys), and the per-synopsis lists generated from the one list of synopses.
//! - [`publish`]: a merged epoch → one message per (synopsis, direction), RDA caches retained,
//!   COLATE windows accumulated and archived.
//! - [`local_sink`]: JSON lines and encoded-body dumps.
//! - [`synopses`]: the `[synopses.*]` tables: which synopses run, with which configurations.
//! - [`wire`]: the peer protocol's frames; [`auth`]: the pre-shared key and per-frame MACs;
//!   [`conn`]: the authenticated frame connection over TCP.
//! - [`ship`]: [`ship::NetworkSink`], the sink that queues, spills and ships epochs to the peer.
//! - [`peer`]: the peer that pairs the points' epochs and estimates (`wirelat collect`, or
//!   in-process); [`report`]: its JSON-lines records and Prometheus metrics.
//! - [`sim_point`]: simulated points for tests and demos of the shipping path.

// One unsafe call (glibc malloc_trim in the peer engine), allowed where it is made.
#![deny(unsafe_code)]

pub mod af_packet;
pub mod af_xdp;
pub mod auth;
pub mod colate_archive;
pub mod config;
pub mod conn;
pub mod control_side;
pub mod core_plan;
pub mod device_args;
pub mod epoch;
pub mod local_sink;
pub mod peer;
pub mod publish;
pub mod report;
pub mod ship;
#[cfg(feature = "sim")]
pub mod sim_point;
pub mod sink;
pub mod synopses;
pub mod wire;
