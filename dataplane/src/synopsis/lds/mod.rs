//! LDS, the Lossy Difference Sketch (Sanjuàs-Cuxart, Duffield, Barlet-Ros, Kompella, IMC 2011;
//! spec `lds.md`): per-flow mean one-way delay between two points without per-flow state and
//! without timestamps in packets.
//!
//! Both points keep an identically configured R×W sketch of ⟨timestamp sum, count, XOR digest⟩
//! cells ([`cell`]). A packet of flow f updates, in every row r that samples it, the cell
//! h_r(f) + offset of the flow's *virtual LDA* (k contiguous, wrapping cells; see `addressing.rs`).
//! At the end of an epoch the sender's sketch goes to the estimating peer, which subtracts the
//! sums cell by cell and, for each flow, averages the cleanest usable cells ([`estimator`]).
//!
//! What the runtime does with it, per point and epoch:
//! 1. workers call [`Synopsis::update`](crate::synopsis::Synopsis::update) on their shard; the
//!    update also records the packet's flow key in the shard's bounded flow log
//!    ([`flows::FlowSet`]), because a sketch cannot list its keys;
//! 2. the control thread `merge`s the shards (cells add exactly; the flow logs are united),
//!    `encode`s and ships the result (cells, then the flow log), then `reset`s;
//! 3. the peer decodes the two points' sketches of the same segment and epoch and calls
//!    [`estimate_all`] with the receiver's flow log (or [`report`] for a summary plus the
//!    top N flows by packets; [`estimate_flow`] for one key and its flow hash). Sketches of
//!    different configurations give `Err(NoEstimate::ConfigMismatch)`, never numbers.
//!
//! Both points record flows, because they share one fingerprinted configuration (the log's
//! capacity included). The receiver's log is the one to estimate; the sender's also lists flows
//! that lost every packet. Each entry also names the encapsulation the flow arrived in at that
//! point (VLAN id, VNI, MPLS label, ...), which the records carry as a flow attribute. The log
//! makes the shipped epoch larger than the cells (27 bytes per IPv4 flow, 51 per IPv6 flow);
//! `flow_capacity = 0` at both points turns it off.
//!
//! Also here: the spec's sizing helper ([`sizing`]), the coverage sizing that derives k and W
//! from the expected load and loss ([`coverage`]), the Simple Delay Sketch used as a test
//! oracle ([`sds`]), the synthetic trace of spec §11 ([`trace`]) and the evaluation helpers
//! of the reproduction ([`eval`]).
//!
//! Departures from the paper, all from the spec: empty cells are never usable (P1); the window
//! loop visits exactly k cells (P2); the α test is `<=` with a strict option that always keeps
//! the minimum (P3); the digest comes from bits the offset and sampling do not use (P7); the
//! weighted count saturates and a saturated cell is unusable (P18).
//!
//! Synopsis code: no I/O, no logging, no allocation in `update`.

mod addressing;
pub mod cell;
pub mod config;
pub mod coverage;
pub mod estimator;
#[cfg(any(test, feature = "sim"))]
pub mod eval;
pub mod flows;
pub mod sds;
pub mod sizing;
pub mod sketch;
#[cfg(any(test, feature = "sim"))]
pub mod trace;
pub mod weights;

#[cfg(test)]
mod tests;

pub use cell::Cell;
pub use config::{EstimatorConfig, LdsConfig, LdsConfigKeys, OffsetMode, SelectionRule};
pub use coverage::{CoverageSizing, CoverageTarget, for_coverage};
pub use estimator::{
    CellUse, Estimator, FlowEstimate, LdsReport, LdsSummary, NoEstimateCounts, NoFlowEstimate, estimate_all,
    estimate_flow, report, sort_by_packets, top_by_packets,
};
pub use flows::{FlowEntry, FlowSet};
pub use sketch::{Lds, LocatedCells, MAX_LOCATED_ROWS};
pub use weights::{IpPrefix, PortRange, WeightPolicy, WeightRule};
