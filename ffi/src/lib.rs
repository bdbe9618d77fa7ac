//! Raw bindings to the system DPDK.
