//! The typed lines of the peer's records file: the scorer's record ([`wirelat_records`]) of
//! each line together with the keys only the peer writes (segment ids, which sides arrived,
//! loss, the estimators' reports, errors). The estimators build these values, the metrics read
//! them ([`crate::report::delay::DelayMetrics::observe_records`]), and only the records sink
//! ([`crate::report::records::RecordSink::emit`]) turns them into JSON.
//!
//! # Key order
//! serde_json is built without `preserve_order`, so a `serde_json::Value` object is a sorted
//! map and the records file has always had its keys sorted, at every depth (the nested reports
//! too). The sink keeps that by serialising each line through a `Value` ([`Line::to_json`])
//! rather than writing the structs in field order: the field order here is free, and no
//! estimator report has to list its fields alphabetically. It costs one map per line, once per
//! group and epoch, never per packet.
//!
//! Which keys are present and which are `null` follows the lines as they were written before
//! these types existed (the golden digests of `tests/demo.rs` and the trace matrices pin it):
//! an `Option` field here is a key written as `null` when empty unless it says
//! `skip_serializing_if`.

use serde::{Serialize, Serializer};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::colate::query::{FloorUsed, FlowLatencyReport};
use wirelat_dataplane::synopsis::estimate::{Estimate, Measured, NoEstimate};
use wirelat_dataplane::synopsis::fridge::report::{KindReport, PlainMeasured};
use wirelat_dataplane::synopsis::lds::estimator::CellUse;
use wirelat_dataplane::synopsis::rda::sizing::DifferenceEstimate;
use wirelat_records::{Direction, FlowRecord, FridgeRecord, RECORD_VERSION, SegmentRecord};

/// One line of the records file, tagged by `"record"` like [`wirelat_records::Record`] (the
/// scorer reads the same names; `epoch_summary` lines are the peer's own and it skips them).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Line {
    /// The header naming the schema version.
    Run {
        /// [`RECORD_VERSION`].
        version: u32,
    },
    /// A segment direction's delay in one epoch (LDA, RDA, LDS).
    Segment(SegmentLine),
    /// One flow's delay (LDS, COLATE).
    Flow(FlowLine),
    /// The fridge's quantiles at one point.
    FridgeQuantiles(FridgeLine),
    /// COLATE's summary of a group, or a group that could not be estimated at all.
    EpochSummary(EpochSummary),
}

impl Line {
    /// The header line of this build's schema.
    pub fn run() -> Self {
        Line::Run { version: RECORD_VERSION }
    }

    /// The line as a JSON object with sorted keys (module docs: key order). `null` if it could
    /// not be serialised, which these types never are (no maps with non-string keys).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// A `segment` record and the peer's keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentLine {
    /// The scorer's record.
    #[serde(flatten)]
    pub record: SegmentRecord,
    /// Which segment and which of its sides arrived.
    #[serde(flatten)]
    pub sides: SegmentSides,
    /// What the estimator said beyond the record.
    #[serde(flatten)]
    pub result: SegmentResult,
    /// The points whose RDA timestamp caches were missing (`"timestamp_cache:point P"`); absent
    /// when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<String>>,
}

/// The keys every segment-scoped line of a two-point group carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentSides {
    /// Segment id.
    pub segment: u32,
    /// Upstream point id.
    pub upstream: u32,
    /// Downstream point id.
    pub downstream: u32,
    /// Both points' epochs complete (no worker skipped them), and for RDA every point's
    /// timestamp cache answered.
    pub complete: bool,
    /// Which side had no synopsis (no packets there).
    pub absent: Vec<Side>,
}

/// A side of a segment: its upstream or downstream point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The upstream point (the sender).
    Upstream,
    /// The downstream point (the receiver).
    Downstream,
}

impl Side {
    /// "upstream" or "downstream", as records and metrics labels write it.
    pub fn name(self) -> &'static str {
        match self {
            Side::Upstream => "upstream",
            Side::Downstream => "downstream",
        }
    }
}

pub use crate::control_side::SegmentResult;

/// LDA's loss keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdaLoss {
    /// Packets the upstream point counted.
    pub sent: u64,
    /// Packets the downstream point counted.
    pub received: u64,
    /// sent − received, `null` when the receiver counted more.
    pub lost: Option<u64>,
    /// Packets the receiver counted beyond the sender.
    pub receiver_excess: u64,
    /// Loss rate, `null` without an estimate.
    pub rate: Option<f64>,
}

/// RDA's loss keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RdaLoss {
    /// Packets the sender counted (duplicates aside).
    pub sent: u64,
    /// Packets the receiver counted (duplicates aside).
    pub received: i64,
    /// Lost packets, only from a complete decode (`null` otherwise, with `reason`).
    pub lost: Option<u64>,
    /// Bounds on the lost packets.
    pub lost_bounds: [u64; 2],
    /// The bounds as rates of `sent` (`null` when nothing was sent).
    pub rate_bounds: Option<[f64; 2]>,
    /// Packets reordered.
    pub reordered: usize,
    /// Loss rate, `null` when `lost` is.
    pub rate: Option<f64>,
    /// Why `lost` is `null`.
    pub reason: Option<String>,
    /// Ids seen more than once at a point (in no estimate, nor in sent/received).
    pub duplicates: RdaDuplicates,
}

/// RDA's duplicate ids per point, and the one-sided ids they explained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdaDuplicates {
    /// Distinct duplicated ids at the sender.
    pub sender_ids: u64,
    /// Packets of them left out at the sender.
    pub sender_packets: u64,
    /// Distinct duplicated ids at the receiver.
    pub receiver_ids: u64,
    /// Packets of them left out at the receiver.
    pub receiver_packets: u64,
    /// One-sided ids explained by duplicates (not counted as lost or reordered).
    pub one_sided: usize,
}

/// RDA's `report` key.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RdaReportLine {
    /// Mean delay (as measured, with the reason when there is none).
    pub mean_ns: Measured<Estimate>,
    /// The chosen std-dev.
    pub std_dev_ns: Measured<Estimate>,
    /// The bucket-moment std-dev.
    pub bucket_moment_std_dev_ns: Measured<Estimate>,
    /// The collapsed-bucket (paper) std-dev.
    pub collapsed_std_dev_ns: Measured<Estimate>,
    /// Variance, ns².
    pub variance_ns2: Option<f64>,
    /// The variance was clamped to 0.
    pub variance_clamped: bool,
    /// Packets in useful buckets.
    pub useful_weight: u64,
    /// Useful buckets.
    pub useful_buckets: u64,
    /// All buckets.
    pub total_buckets: u64,
    /// Collapsed bucket pairs.
    pub collapsed_pairs: u64,
    /// Sender packet count.
    pub sender_packets: i64,
    /// Receiver packet count.
    pub receiver_packets: i64,
    /// How the reconciliation went.
    pub reconciliation: RdaReconciliation,
    /// How the look-ups went (`null` when none were made).
    pub process: Option<RdaProcess>,
}

/// The counts of an RDA reconciliation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdaReconciliation {
    /// Every lost packet was decoded.
    pub complete: bool,
    /// Lost packets decoded.
    pub lost: usize,
    /// Reordered packets.
    pub reordered: usize,
    /// Decoded ids not confirmed.
    pub unconfirmed: usize,
    /// One-sided ids excluded as duplicates.
    pub excluded_duplicates: usize,
    /// Ids decoded.
    pub decoded: u64,
    /// At least this many ids were not decoded.
    pub undecoded_lower_bound: u64,
    /// Buckets left non-empty.
    pub residual_buckets: u64,
    /// Candidates rejected.
    pub rejected_candidates: u64,
    /// Candidates seen again.
    pub repeated_candidates: u64,
    /// Peeling pops.
    pub pops: u64,
    /// The iteration cap stopped the peeling.
    pub iteration_cap_hit: bool,
}

/// How an RDA reconciliation's timestamp look-ups went.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum RdaProcess {
    /// Online RDA: one reconciliation of the shipped banks.
    Online {
        /// Look-up rounds.
        rounds: u64,
        /// Look-up requests made.
        lookup_requests: u64,
        /// Ids looked up.
        ids_looked_up: u64,
        /// Requests answered without a cache.
        no_cache: u64,
    },
    /// Late binding: banks bound at the points, retried larger while the decode is partial.
    LateBinding {
        /// The estimated set difference the first size came from.
        difference_estimate: DifferenceEstimate,
        /// Each attempt.
        attempts: Vec<RdaAttempt>,
        /// Look-up rounds.
        rounds: u64,
        /// Look-up requests made.
        lookup_requests: u64,
        /// Ids looked up.
        ids_looked_up: u64,
        /// Requests answered without a cache.
        no_cache: u64,
    },
}

/// One late-binding attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RdaAttempt {
    /// Buckets per bank bound.
    pub buckets_per_bank: usize,
    /// The decode was complete.
    pub complete: bool,
    /// Ids decoded.
    pub decoded: u64,
}

/// LDS's loss keys (weighted packet counts).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsLoss {
    /// Weighted packets at the sender.
    pub sent: u64,
    /// Weighted packets at the receiver.
    pub received: u64,
    /// Loss rate, `null` when nothing was sent.
    pub rate: Option<f64>,
}

/// A `flow` record and the peer's keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowLine {
    /// The scorer's record.
    #[serde(flatten)]
    pub record: FlowRecord,
    /// Segment id.
    pub segment: u32,
    /// The flow's packets (LDS: at the sender, as its sketch counts them; COLATE: the census
    /// estimate it was queried with).
    pub packets: u64,
    /// What the synopsis said beyond the record.
    #[serde(flatten)]
    pub result: FlowResult,
}

/// A flow line's estimator output, per synopsis.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FlowResult {
    /// LDS.
    Lds {
        /// Bound on the flow's lost packets.
        lost_packets_bound: u64,
        /// How its cells fared.
        cells: CellUse,
        /// Why there is no mean (`null` when there is one).
        mean_error: Option<NoEstimate>,
    },
    /// COLATE.
    Colate {
        /// The query's reliability verdict.
        reliable: bool,
        /// Why it is not reliable (`null` when it is).
        reason: Option<String>,
        /// Whether packets of the flow's cells reached S and not R (`null`: unknown).
        loss_seen: Option<bool>,
        /// The query's report.
        report: Box<FlowLatencyReport>,
    },
}

/// A `fridge_quantiles` record and the peer's keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FridgeLine {
    /// The scorer's record.
    #[serde(flatten)]
    pub record: FridgeRecord,
    /// The point's id.
    pub point_id: u32,
    /// Samples behind the distribution.
    pub samples: u64,
    /// Estimated request/response pairs, in the fridge report's plain form.
    #[serde(serialize_with = "plain_measured")]
    pub estimated_pairs: Measured<Estimate>,
    /// The kind's full report (histogram, subsets, diagnostics).
    pub report: Box<KindReport>,
}

fn plain_measured<S: Serializer>(m: &Measured<Estimate>, s: S) -> Result<S::Ok, S::Error> {
    PlainMeasured(m).serialize(s)
}

/// An `epoch_summary` line.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EpochSummary {
    /// COLATE's group summary (before its flow lines).
    Colate(Box<ColateSummary>),
    /// A group that could not be estimated at all.
    Failed(GroupFailure),
}

/// COLATE's summary of one group of windows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColateSummary {
    /// Always COLATE.
    pub synopsis: SynopsisKind,
    /// Segment id.
    pub segment: u32,
    /// Segment direction.
    pub direction: Direction,
    /// First window.
    pub epoch_first: u64,
    /// Last window (inclusive).
    pub epoch_last: u64,
    /// Both points' windows complete.
    pub complete: bool,
    /// Which side had no synopsis.
    pub absent: Vec<Side>,
    /// Packets counted upstream.
    pub packets_upstream: u64,
    /// Packets counted downstream.
    pub packets_downstream: u64,
    /// The counter epochs' flags, or-ed.
    pub flags: u8,
    /// Where the flow list came from: "lds" or "none".
    pub flow_source: &'static str,
    /// Flows in the census.
    pub flows_known: usize,
    /// Flow lines that follow.
    pub flows_reported: usize,
    /// The latency floor the segment used (`null` when the segment could not be built).
    pub latency_floor: Option<FloorUsed>,
    /// Why the segment could not be built (`null` when it was).
    pub error: Option<String>,
}

/// A group that yielded no estimate at all: which group, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupFailure {
    /// The synopsis.
    pub synopsis: SynopsisKind,
    /// `"segment": id` or `"point_id": id`.
    #[serde(flatten)]
    pub scope: ScopeId,
    /// The segment's direction (`null` for a point's group).
    pub direction: Option<Direction>,
    /// First epoch.
    pub epoch_first: u64,
    /// Last epoch (inclusive).
    pub epoch_last: u64,
    /// Why.
    pub error: String,
}

/// The key naming a group's scope in a [`GroupFailure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeId {
    /// A segment's group.
    Segment(u32),
    /// A point's group (the fridge).
    PointId(u32),
}

#[cfg(test)]
mod tests;
