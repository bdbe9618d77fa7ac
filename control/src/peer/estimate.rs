//! From decoded epoch synopses to records: decoding with the collector's configuration, and
//! the two estimate signatures ([`SegmentEstimate`], [`PointEstimate`]) with what they share
//! (the context, the [`Outcome`], the record keys every segment record carries). Each
//! synopsis implements its signature in its control-side module (`crate::control_side`): its
//! own estimator, then the scorer's record shapes with the peer's extra keys. Pure functions: no
//! I/O, no network (RDA's look-ups happen in [`super::rda`]).
//!
//! What each group yields (see README "Records"):
//! - LDA, RDA: one `segment` record (mean, std-dev with interval and samples, loss, report).
//! - LDS: one `segment` record with the aggregate mean of the epoch (the LDS summary's LDA over
//!   all flows) and one `flow` record for each of the top-N flows of the receiver's flow log.
//! - COLATE: one `epoch_summary` record and one `flow` record for each of the top-N flows of
//!   the LDS flow logs of the same windows (COLATE cannot list flows itself and needs each
//!   flow's packet count; LDS provides both).
//! - fridge: one `fridge_quantiles` record per exchange kind.

use super::config::SegmentInfo;
pub use crate::control_side::{ColateEvidence, ColateQuery, Reconciled, colate_epoch};
use crate::report::line::{Line, SegmentSides, Side};
use crate::synopses::SynopsesConfig;
use std::collections::HashMap;
use wirelat_dataplane::packet::{Encap, ExchangeKind, FlowKey};
use wirelat_dataplane::synopsis::estimate::{Estimate, Measured};
use wirelat_dataplane::synopsis::lds::{self, FlowEntry, Lds};
use wirelat_dataplane::synopsis::{Registered, SynopsisKind};
use wirelat_records::Point;
use wirelat_records::{FlowEncap, QuantilePoint};

/// A decoded epoch synopsis (one variant per synopsis of the registry).
pub use wirelat_dataplane::synopsis::AnySynopsis as Decoded;

/// Decodes `bytes` as a `kind` synopsis of the collector's configuration (the fingerprint in
/// the encoding is checked against it).
pub fn decode(cfg: &SynopsesConfig, kind: SynopsisKind, bytes: &[u8]) -> Result<Decoded, String> {
    Decoded::decode(cfg, kind, bytes).map_err(|e| e.to_string())
}

/// Bytes a decoded synopsis holds while its group waits, counted against `max_pending_bytes`:
/// its encoding's length, except for COLATE, whose body lists only its non-zero counters while
/// the decoded vector holds all of them.
pub fn held_bytes(encoded: usize, decoded: &Decoded) -> u64 {
    let held = match decoded {
        Decoded::Colate(c) => encoded.max(c.held_bytes()),
        _ => encoded,
    };
    held as u64
}

/// The latest numbers of a segment estimate, for the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latest {
    /// Mean delay, ns.
    pub mean_ns: Option<f64>,
    /// Std-dev, ns.
    pub std_dev_ns: Option<f64>,
    /// Loss rate.
    pub loss_rate: Option<f64>,
    /// Samples behind the mean.
    pub samples: Option<u64>,
}

/// The records of one group and what the metrics need.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The records, typed (the sink writes them as JSON).
    pub lines: Vec<Line>,
    /// Segment numbers, when the group has them.
    pub latest: Option<Latest>,
    /// The `outcome` label of the estimates metric: "ok", or the reason the mean is missing
    /// ([`NoEstimate::reason`](wirelat_dataplane::synopsis::estimate::NoEstimate::reason), or
    /// the group's own: "config_mismatch", "malformed", ...).
    pub estimate: &'static str,
    /// The fridge's quantiles per exchange kind (the metrics' gauges), as in its records.
    pub quantiles: Vec<(ExchangeKind, Vec<QuantilePoint>)>,
}

pub(crate) fn outcome_of(m: &Measured<Estimate>) -> &'static str {
    match m {
        Ok(_) => "ok",
        Err(e) => e.reason(),
    }
}

/// The keys every segment-scoped record carries.
pub(crate) fn segment_sides(seg: &SegmentInfo, sides: Sides<'_>) -> SegmentSides {
    SegmentSides {
        segment: seg.id,
        upstream: seg.upstream,
        downstream: seg.downstream,
        complete: sides.complete,
        absent: sides.absent.to_vec(),
    }
}

/// How the two sides of a group arrived.
#[derive(Clone, Copy, Debug)]
pub struct Sides<'a> {
    /// Both points' epochs complete (no worker skipped them).
    pub complete: bool,
    /// Which side had no synopsis (no packets there).
    pub absent: &'a [Side],
}

/// What a segment group's estimate needs besides its evidence.
#[derive(Clone, Copy, Debug)]
pub struct SegmentContext<'a> {
    /// The segment.
    pub seg: &'a SegmentInfo,
    /// The group's first epoch.
    pub first: u64,
    /// The group's last epoch (`first` but for COLATE, whose group spans `[colate] windows`).
    pub last: u64,
    /// How the two sides arrived.
    pub sides: Sides<'a>,
    /// `[report] top_flows`: how many flows a per-flow synopsis reports.
    pub top_flows: usize,
}

/// The one estimate signature of a two-point synopsis at the peer: a segment group's records
/// from its context and its evidence. Estimates are pure: gathering the evidence (pairing the
/// points' synopses, RDA's timestamp look-ups, COLATE's windows and census) is the engine's.
///
/// The evidence is what the synopsis's math reads, so it is the one thing that differs:
/// - LDA, LDS: [`Pair`], the upstream and downstream synopses of one epoch (a point that had no
///   packets gives an empty synopsis of the collector's configuration). The engine estimates
///   these through [`Registered`] with no per-synopsis code but the dispatch arm;
/// - RDA: [`Reconciled`], the reconciliation the look-ups finished;
/// - COLATE: [`ColateEvidence`], both points' windows summed, and the LDS census.
pub trait SegmentEstimate: Registered {
    /// What the estimate reads.
    type Evidence<'e>;
    /// The group's records and metrics.
    fn estimate_segment(cx: &SegmentContext<'_>, evidence: Self::Evidence<'_>) -> Outcome;
}

/// The evidence of a synopsis estimated from one epoch's two synopses.
#[derive(Clone, Copy, Debug)]
pub struct Pair<'e, S> {
    /// The upstream point's synopsis.
    pub up: &'e S,
    /// The downstream point's synopsis.
    pub down: &'e S,
}

/// What a one-point group's estimate needs besides the point's synopsis.
#[derive(Clone, Copy, Debug)]
pub struct PointContext {
    /// The point's name.
    pub point: Point,
    /// The point's id.
    pub point_id: u32,
    /// The group's first epoch.
    pub first: u64,
    /// The group's last epoch (`[report] fridge_epochs` epochs after the first).
    pub last: u64,
}

/// The one estimate signature of a one-point synopsis at the peer: the records of a point's
/// group from its synopses of the group's epochs, merged.
pub trait PointEstimate: Registered {
    /// The group's records and metrics.
    fn estimate_point(cx: &PointContext, merged: &Self) -> Outcome;
}

/// Each flow's encapsulation at the two points of a segment, from their LDS flow logs.
pub(crate) struct FlowEncaps {
    up: HashMap<FlowKey, Encap>,
    down: HashMap<FlowKey, Encap>,
}

impl FlowEncaps {
    pub(crate) fn new(up: &Lds, down: &Lds) -> Self {
        let index = |l: &Lds| l.flows().entries().iter().map(|e| (e.key, e.encap)).collect();
        Self { up: index(up), down: index(down) }
    }

    pub(crate) fn of(&self, key: &FlowKey) -> FlowEncap {
        FlowEncap { upstream: self.up.get(key).copied(), downstream: self.down.get(key).copied() }
    }
}

/// The flows LDS saw in one window, with the packets its sketch estimates at the sender:
/// what the COLATE records of the same windows query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowCensus {
    /// (flow, estimated packets at the sender, its encapsulation at each point).
    pub flows: Vec<(FlowEntry, u64, FlowEncap)>,
}

/// The census of one LDS window: the union of both points' flow logs (the sender's lists
/// flows that lost every packet), each with its Count-Min packet estimate.
pub fn lds_census(up: &Lds, down: &Lds) -> FlowCensus {
    let mut set = down.flows().clone();
    set.merge(up.flows());
    let encaps = FlowEncaps::new(up, down);
    match lds::estimate_all(up, down, &set) {
        Ok(est) => FlowCensus {
            flows: set.entries().iter().zip(est).map(|(e, f)| (*e, f.packets, encaps.of(&e.key))).collect(),
        },
        Err(_) => FlowCensus::default(),
    }
}
