//! wirelat's control plane: everything that runs per epoch, never per packet.

pub mod colate_archive;
