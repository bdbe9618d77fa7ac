//! wirelat's control plane: everything that runs per epoch, never per packet.
//!
//! - [`config`]: the TOML configuration, its defaults, validation and the EAL arguments.

pub mod config;
