//! wirelat's control plane: everything that runs per epoch, never per packet.
//!
//! It never sees a packet: it works on the synopsis buffers the workers hand over.
//!
//! - [`config`]: the TOML configuration, its defaults, validation and the EAL arguments.
//! - [`epoch`]: harvesting epochs from the workers and merging their shards.
//! - [`colate_archive`]: COLATE's closed counter epochs on disk, queryable by flow and points.
//! - [`sink`]: what the control thread hands on per harvested epoch.
//! - [`synopses`]: the `[synopses.*]` tables: which synopses run, with which configurations.

pub mod auth;
pub mod colate_archive;
pub mod config;
pub mod conn;
pub mod epoch;
pub mod peer;
pub mod report;
pub mod ship;
pub mod sim_point;
pub mod sink;
pub mod synopses;
pub mod wire;
