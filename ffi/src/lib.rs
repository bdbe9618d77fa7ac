//! Raw bindings to the system DPDK (>= 22.11), generated at build time by bindgen from the
//! installed headers (see `build.rs`).
//!
//! Holds nothing but declarations: `static inline` fast-path functions are reachable through
//! bindgen's generated C wrappers (same names, `__extern` suffix), and `rte_errno` through
//! [`wirelat_rte_errno`]. Only `wirelat-dataplane`'s `dpdk` module may use this crate; it must
//! never grow safe wrappers or logic of its own.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
#![allow(clippy::all, unnecessary_transmutes, unsafe_op_in_unsafe_fn)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
