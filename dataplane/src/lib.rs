//! wirelat's data plane: everything that runs per packet.
//!
//! - [`packet`]: parsing, flow keys, packet identity and request/response classification over
//!   plain byte slices.
//! - [`synopsis`]: the five latency synopses (state, per-packet update, shard merge, encoding)
//!   and their estimators, as pure functions without I/O.
//! - `dpdk` (feature `dpdk`): the only safe wrapper over the `dpdk-sys` bindings.
//! - `worker` (feature `dpdk`): the poll-mode loop of the bump in the wire.
//!
//! Nothing in this crate logs, allocates or locks per packet.

// Unsafe code lives only behind the DPDK wrapper (dpdk/, and cpu.rs beside it), the
// architecture's rule that nothing else touches the bindings, enforced by the compiler; and in
// claim.rs, the disjoint claims through which workers write one shared RDA run and LDS list.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod claim;
pub mod clock;
pub mod counters;
#[path = "dpdk/cpu.rs"]
#[allow(unsafe_code)]
pub mod cpu;
pub mod direction;
#[cfg(feature = "dpdk")]
#[allow(unsafe_code)]
pub mod dpdk;
pub mod epoch;
#[cfg(feature = "dpdk")]
pub mod measuring;
pub mod packet;
pub mod pipeline;
// Seeded simulation (traffic, delay, loss) for tests, the papers' reproductions and the trace
// generator: not part of the appliance (feature `sim`).
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod stamp_delay;
pub mod synopsis;
#[cfg(feature = "dpdk")]
pub mod worker;
