//! The peer's outputs: JSON-lines records ([`line`]: their typed form) with crash-safe,
//! idempotent emission ([`records`]),
//! and the counters and latest estimates behind a Prometheus text endpoint ([`metrics`]), served
//! by a small reusable HTTP endpoint ([`http`]).
//! Nothing here estimates; it only writes what the engine hands over.

pub mod delay;
pub mod http;
pub mod line;
pub mod metrics;
pub mod point;
pub mod records;
