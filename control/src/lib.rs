//! wirelat's control plane: everything that runs per epoch, never per packet.
//!
//! It never sees a packet: it works on the synopsis buffers the workers hand over.

pub mod epoch;
