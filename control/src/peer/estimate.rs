//! From decoded epoch synopses to records: decoding with the collector's configuration, then
//! the synopses' own estimators, then the scorer's record shapes with the peer's extra keys.
//! Pure functions: no I/O, no network (RDA's look-ups happen in [`super::rda`]).
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
use crate::control_side::{LdaSegment, LdsSegment, RdaSegment};
use crate::report::line::{
    ColateSummary, EpochSummary, FlowLine, FlowResult, FridgeLine, LdaLoss, LdsLoss, Line, RdaDuplicates,
    RdaLoss, RdaProcess, RdaReconciliation, RdaReportLine, SegmentLine, SegmentResult, SegmentSides, Side,
};
use crate::synopses::SynopsesConfig;
use std::collections::HashMap;
use wirelat_dataplane::packet::{Encap, ExchangeKind, FlowKey};
use wirelat_dataplane::synopsis::colate::{self, Colate, CounterEpoch, LatencyFloor, QueryOptions, Segment};
use wirelat_dataplane::synopsis::estimate::{Estimate, Measured, NoEstimate};
use wirelat_dataplane::synopsis::fridge::{self, FridgeSynopsis};
use wirelat_dataplane::synopsis::lda::{self, Lda};
use wirelat_dataplane::synopsis::lds::{self, FlowEntry, Lds};
use wirelat_dataplane::synopsis::rda::{Rda, RdaReport};
use wirelat_dataplane::synopsis::{Registered, Synopsis, SynopsisKind};
use wirelat_records::Point;
use wirelat_records::{FlowEncap, FlowId, FlowRecord, FridgeRecord, QuantilePoint, SegmentRecord};

/// A decoded epoch synopsis (one variant per synopsis of the registry).
pub use wirelat_dataplane::synopsis::AnySynopsis as Decoded;

/// Decodes `bytes` as a `kind` synopsis of the collector's configuration (the fingerprint in
/// the encoding is checked against it).
pub fn decode(cfg: &SynopsesConfig, kind: SynopsisKind, bytes: &[u8]) -> Result<Decoded, String> {
    Decoded::decode(cfg, kind, bytes).map_err(|e| e.to_string())
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
    /// ([`NoEstimate::reason`], or the group's own: "config_mismatch", "malformed", ...).
    pub estimate: &'static str,
    /// The fridge's quantiles per exchange kind (the metrics' gauges), as in its records.
    pub quantiles: Vec<(ExchangeKind, Vec<QuantilePoint>)>,
}

fn outcome_of(m: &Measured<Estimate>) -> &'static str {
    match m {
        Ok(_) => "ok",
        Err(e) => e.reason(),
    }
}

/// The keys every segment-scoped record carries.
fn segment_sides(seg: &SegmentInfo, sides: Sides<'_>) -> SegmentSides {
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

impl SegmentEstimate for Lda {
    type Evidence<'e> = Pair<'e, Lda>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: Pair<'_, Lda>) -> Outcome {
        lda_group(cx.seg, cx.first, e.up, e.down, cx.sides)
    }
}

impl SegmentEstimate for Lds {
    type Evidence<'e> = Pair<'e, Lds>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: Pair<'_, Lds>) -> Outcome {
        lds_group(cx.seg, cx.first, e.up, e.down, cx.top_flows, cx.sides)
    }
}

/// RDA's evidence: a finished reconciliation.
#[derive(Clone, Debug)]
pub struct Reconciled<'e> {
    /// The report (an unavailable one when the look-ups failed).
    pub report: &'e RdaReport,
    /// How the ids were reconciled (online look-ups or late binding).
    pub process: Option<RdaProcess>,
    /// Why the look-ups did not complete: then there is no estimate.
    pub failure: Option<&'e str>,
}

impl SegmentEstimate for Rda {
    type Evidence<'e> = Reconciled<'e>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: Reconciled<'_>) -> Outcome {
        rda_group(cx.seg, cx.first, e.report, cx.sides, e.process, e.failure)
    }
}

/// COLATE's evidence: each point's windows summed into one counter epoch, the LDS census of
/// the same windows (`None` when there is none) and how to query.
#[derive(Clone, Copy, Debug)]
pub struct ColateEvidence<'e> {
    /// The upstream point's counters over the group's windows.
    pub upstream: &'e CounterEpoch,
    /// The downstream point's counters over the group's windows.
    pub downstream: &'e CounterEpoch,
    /// The flows to query, with their packets at the sender and encapsulations.
    pub census: Option<&'e [(FlowEntry, u64, FlowEncap)]>,
    /// How to query each flow.
    pub query: &'e ColateQuery,
}

impl SegmentEstimate for Colate {
    type Evidence<'e> = ColateEvidence<'e>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: ColateEvidence<'_>) -> Outcome {
        colate_group(
            cx.seg,
            cx.first,
            cx.last,
            e.upstream,
            e.downstream,
            e.census,
            cx.top_flows,
            e.query,
            cx.sides,
        )
    }
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

impl PointEstimate for FridgeSynopsis {
    fn estimate_point(cx: &PointContext, merged: &FridgeSynopsis) -> Outcome {
        fridge_group(cx.point, cx.point_id, cx.first, cx.last, merged)
    }
}

/// LDA: one segment record.
fn lda_group(seg: &SegmentInfo, epoch: u64, up: &Lda, down: &Lda, sides: Sides<'_>) -> Outcome {
    let (mean, sd, latest, estimate, result) = match lda::estimate(up, down) {
        Ok(r) => {
            let loss = LdaLoss {
                sent: r.sent_packets,
                received: r.received_packets,
                lost: r.lost_packets,
                receiver_excess: r.receiver_excess,
                rate: r.loss_rate.as_ref().ok().map(|e| e.value),
            };
            let latest = Latest {
                mean_ns: r.mean_delay.as_ref().ok().map(|e| e.value),
                std_dev_ns: r.std_dev.as_ref().ok().map(|e| e.value),
                loss_rate: r.loss_rate.as_ref().ok().map(|e| e.value),
                samples: Some(r.samples),
            };
            let (mean, sd, estimate) =
                (r.mean_delay.clone().ok(), r.std_dev.clone().ok(), outcome_of(&r.mean_delay));
            (mean, sd, Some(latest), estimate, SegmentResult::Lda(LdaSegment { loss, report: Box::new(r) }))
        }
        Err(e) => (None, None, None, "config_mismatch", SegmentResult::Error { error: e.to_string() }),
    };
    let line = Line::Segment(SegmentLine {
        record: SegmentRecord {
            synopsis: SynopsisKind::Lda,
            direction: seg.direction,
            epoch,
            mean_ns: mean,
            std_dev_ns: sd,
        },
        sides: segment_sides(seg, sides),
        result,
        missing: None,
    });
    Outcome { lines: vec![line], latest, estimate, ..Outcome::default() }
}

/// RDA: one segment record from a finished reconciliation (`failure` when the look-ups did not
/// complete: then there is no estimate).
fn rda_group(
    seg: &SegmentInfo,
    epoch: u64,
    report: &RdaReport,
    sides: Sides<'_>,
    process: Option<RdaProcess>,
    failure: Option<&str>,
) -> Outcome {
    let rec = &report.reconciliation;
    let (mean, sd) = match failure {
        None => (report.mean_ns.clone(), report.std_dev_ns.clone()),
        Some(f) => {
            let e = Err(NoEstimate::Other { detail: format!("timestamp look-ups failed: {f}") });
            (e.clone(), e)
        }
    };
    let sent = report.sender_packets.max(0) as u64;
    // Only a complete decode lists every lost packet; otherwise the decoded ones are a partial
    // count, so the record gives null with the reason and the report's bounds instead.
    let lost = (rec.complete && failure.is_none()).then_some(rec.lost.len() as u64);
    let rate = lost.filter(|_| sent > 0).map(|l| l as f64 / sent as f64);
    let (low, high) = report.lost_bounds;
    let reason = match (failure, rec.complete) {
        (Some(f), _) => Some(format!("timestamp look-ups failed: {f}")),
        (None, false) => Some(format!(
            "decode incomplete ({} undecoded at least, {} residual buckets): {} lost packets decoded, \
             the loss lies in [{low}, {high}]",
            rec.undecoded_lower_bound,
            rec.residual_buckets,
            rec.lost.len()
        )),
        (None, true) => None,
    };
    let loss = RdaLoss {
        sent,
        received: report.receiver_packets,
        lost,
        lost_bounds: [low, high],
        rate_bounds: (sent > 0).then(|| [low as f64 / sent as f64, high as f64 / sent as f64]),
        reordered: rec.reordered.len(),
        rate,
        reason,
        // Ids seen more than once at a point are in no estimate (nor in sent/received): per
        // point, the distinct ids and the packets left out; and the one-sided ids this
        // explained (not counted as lost or reordered).
        duplicates: RdaDuplicates {
            sender_ids: report.duplicates.sender_ids,
            sender_packets: report.duplicates.sender_packets,
            receiver_ids: report.duplicates.receiver_ids,
            receiver_packets: report.duplicates.receiver_packets,
            one_sided: rec.excluded_duplicates.len(),
        },
    };
    let report_line = RdaReportLine {
        mean_ns: mean.clone(),
        std_dev_ns: sd.clone(),
        bucket_moment_std_dev_ns: report.bucket_moment_std_dev_ns.clone(),
        collapsed_std_dev_ns: report.collapsed_std_dev_ns.clone(),
        variance_ns2: report.variance_ns2,
        variance_clamped: report.variance_clamped,
        useful_weight: report.useful_weight,
        useful_buckets: report.useful_buckets,
        total_buckets: report.total_buckets,
        collapsed_pairs: report.collapsed_pairs,
        sender_packets: report.sender_packets,
        receiver_packets: report.receiver_packets,
        reconciliation: RdaReconciliation {
            complete: rec.complete,
            lost: rec.lost.len(),
            reordered: rec.reordered.len(),
            unconfirmed: rec.unconfirmed.len(),
            excluded_duplicates: rec.excluded_duplicates.len(),
            decoded: rec.decoded,
            undecoded_lower_bound: rec.undecoded_lower_bound,
            residual_buckets: rec.residual_buckets,
            rejected_candidates: rec.rejected_candidates,
            repeated_candidates: rec.repeated_candidates,
            pops: rec.pops,
            iteration_cap_hit: rec.iteration_cap_hit,
        },
        process,
    };
    let latest = Latest {
        mean_ns: mean.as_ref().ok().map(|e| e.value),
        std_dev_ns: sd.as_ref().ok().map(|e| e.value),
        loss_rate: rate,
        samples: mean.as_ref().ok().map(|e| e.samples),
    };
    let estimate = outcome_of(&mean);
    let line = Line::Segment(SegmentLine {
        record: SegmentRecord {
            synopsis: SynopsisKind::Rda,
            direction: seg.direction,
            epoch,
            mean_ns: mean.ok(),
            std_dev_ns: sd.ok(),
        },
        sides: segment_sides(seg, sides),
        result: SegmentResult::Rda(RdaSegment { loss: Box::new(loss), report: Box::new(report_line) }),
        missing: None,
    });
    Outcome { lines: vec![line], latest: Some(latest), estimate, ..Outcome::default() }
}

/// LDS: a segment record (aggregate mean) and the top-N flows of the receiver's log.
fn lds_group(seg: &SegmentInfo, epoch: u64, up: &Lds, down: &Lds, top: usize, sides: Sides<'_>) -> Outcome {
    let segment_line = |mean_ns, result| {
        Line::Segment(SegmentLine {
            record: SegmentRecord {
                synopsis: SynopsisKind::Lds,
                direction: seg.direction,
                epoch,
                mean_ns,
                std_dev_ns: None,
            },
            sides: segment_sides(seg, sides),
            result,
            missing: None,
        })
    };
    let report = match lds::report(up, down, down.flows(), Some(top)) {
        Ok(r) => r,
        Err(e) => {
            let line = segment_line(None, SegmentResult::Error { error: e.to_string() });
            return Outcome {
                lines: vec![line],
                latest: None,
                estimate: "config_mismatch",
                ..Outcome::default()
            };
        }
    };
    let s = &report.summary;
    let (sent, received) = (s.weighted_packets_sent, s.weighted_packets_received);
    let rate = (sent > 0).then(|| sent.saturating_sub(received) as f64 / sent as f64);
    let latest = Latest {
        mean_ns: s.aggregate_mean_delay_ns.as_ref().ok().map(|e| e.value),
        std_dev_ns: None,
        loss_rate: rate,
        samples: s.aggregate_mean_delay_ns.as_ref().ok().map(|e| e.samples),
    };
    let estimate = outcome_of(&s.aggregate_mean_delay_ns);
    let mut lines = vec![segment_line(
        s.aggregate_mean_delay_ns.clone().ok(),
        SegmentResult::Lds(LdsSegment {
            loss: LdsLoss { sent, received, rate },
            summary: Box::new(s.clone()),
        }),
    )];
    let encaps = FlowEncaps::new(up, down);
    for f in &report.flows {
        lines.push(Line::Flow(FlowLine {
            record: FlowRecord {
                synopsis: SynopsisKind::Lds,
                direction: seg.direction,
                epoch_first: epoch,
                epoch_last: epoch,
                flow: FlowId::from(f.flow),
                encap: encaps.of(&f.flow),
                mean_ns: f.mean_delay_ns.clone().ok(),
                std_dev_ns: None,
            },
            segment: seg.id,
            packets: f.packets,
            result: FlowResult::Lds {
                lost_packets_bound: f.lost_packets_bound,
                cells: f.cells,
                mean_error: f.mean_delay_ns.as_ref().err().cloned(),
            },
        }));
    }
    Outcome { lines, latest: Some(latest), estimate, ..Outcome::default() }
}

/// Each flow's encapsulation at the two points of a segment, from their LDS flow logs.
struct FlowEncaps {
    up: HashMap<FlowKey, Encap>,
    down: HashMap<FlowKey, Encap>,
}

impl FlowEncaps {
    fn new(up: &Lds, down: &Lds) -> Self {
        let index = |l: &Lds| l.flows().entries().iter().map(|e| (e.key, e.encap)).collect();
        Self { up: index(up), down: index(down) }
    }

    fn of(&self, key: &FlowKey) -> FlowEncap {
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

/// Sums one point's COLATE windows into one counter epoch covering `first..=last`.
pub fn colate_epoch(
    cfg: &colate::ColateConfig,
    point: u32,
    first: u64,
    last: u64,
    windows: &[&Colate],
) -> Result<CounterEpoch, String> {
    let mut data = Colate::new(cfg).map_err(|e| e.to_string())?;
    for w in windows {
        data.merge(w).map_err(|e| e.to_string())?;
    }
    let flags = if data.counters_wrapped() { colate::epoch::flags::COUNTER_WRAPPED } else { 0 };
    Ok(CounterEpoch {
        point,
        seq: first,
        first_window: first,
        last_window: last,
        windows: windows.len() as u64,
        flags,
        data,
    })
}

/// How a COLATE group queries its flows.
#[derive(Clone, Copy, Debug)]
pub struct ColateQuery {
    /// The per-flow query options.
    pub opts: QueryOptions,
    /// `[colate] latency_floor_ns` when given, else derived from the group's own cells (see
    /// [`LatencyFloor`]).
    pub latency_floor: LatencyFloor,
}

/// COLATE: a summary record and the top-N flows of the census (by packets). Each flow record
/// carries `reliable` and, when it is not, `reason` (also when it has no mean), and
/// `loss_seen`: whether packets of the flow's cells reached S and not R in these windows
/// (the flow's own or a foreign packet: lost or in flight).
#[allow(clippy::too_many_arguments)]
fn colate_group(
    seg: &SegmentInfo,
    first: u64,
    last: u64,
    s: &CounterEpoch,
    r: &CounterEpoch,
    census: Option<&[(FlowEntry, u64, FlowEncap)]>,
    top: usize,
    query: &ColateQuery,
    sides: Sides<'_>,
) -> Outcome {
    let opts = &query.opts;
    let mut flows: Vec<(FlowEntry, u64, FlowEncap)> = census.map(<[_]>::to_vec).unwrap_or_default();
    flows.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.key.cmp(&b.0.key)));
    let known = flows.len();
    flows.truncate(top);
    let mut lines = Vec::new();
    let mut error = None;
    let mut floor = None;
    match Segment::with_latency_floor(vec![s], vec![r], query.latency_floor) {
        Ok(segment) => {
            floor = Some(segment.latency_floor());
            let counts = segment.config().packet_counts;
            for (entry, packets, encap) in &flows {
                let q = segment.query(entry.flow_hash, *packets, opts);
                let (mean, sd) = if counts {
                    (q.mean_counts_ns.clone(), q.std_dev_counts_ns.clone())
                } else {
                    (q.mean_ns.clone(), q.std_dev_paper_ns.clone())
                };
                let loss_seen = q.diagnostics.flow_packets_missing_at_r.map(|n| n > 0);
                lines.push(Line::Flow(FlowLine {
                    record: FlowRecord {
                        synopsis: SynopsisKind::Colate,
                        direction: seg.direction,
                        epoch_first: first,
                        epoch_last: last,
                        flow: FlowId::from(entry.key),
                        encap: *encap,
                        mean_ns: mean.ok(),
                        std_dev_ns: sd.ok(),
                    },
                    segment: seg.id,
                    packets: *packets,
                    result: FlowResult::Colate {
                        reliable: q.reliable,
                        reason: q.unreliable_reason.clone(),
                        loss_seen,
                        report: Box::new(q),
                    },
                }));
            }
        }
        Err(e) => error = Some(e.to_string()),
    }
    let estimate = if error.is_some() { "config_mismatch" } else { "ok" };
    let summary = ColateSummary {
        synopsis: SynopsisKind::Colate,
        segment: seg.id,
        direction: seg.direction,
        epoch_first: first,
        epoch_last: last,
        complete: sides.complete,
        absent: sides.absent.to_vec(),
        packets_upstream: s.data.packets(),
        packets_downstream: r.data.packets(),
        flags: s.flags | r.flags,
        flow_source: if census.is_some() { "lds" } else { "none" },
        flows_known: known,
        flows_reported: lines.len(),
        latency_floor: floor,
        error,
    };
    lines.insert(0, Line::EpochSummary(EpochSummary::Colate(Box::new(summary))));
    Outcome { lines, latest: None, estimate, ..Outcome::default() }
}

/// Fridge: one `fridge_quantiles` record per exchange kind of one point.
fn fridge_group(point: Point, point_id: u32, first: u64, last: u64, syn: &FridgeSynopsis) -> Outcome {
    let report = fridge::estimate(syn);
    let estimate = if report.kinds.iter().any(|k| k.all.p50_ns.is_ok()) { "ok" } else { "no_samples" };
    let (mut lines, mut by_kind) = (Vec::new(), Vec::new());
    for k in report.kinds {
        let d = &k.all;
        let quantiles: Vec<QuantilePoint> =
            [(0.5, &d.p50_ns), (0.9, &d.p90_ns), (0.95, &d.p95_ns), (0.99, &d.p99_ns)]
                .into_iter()
                .filter_map(|(q, e)| e.as_ref().ok().map(|e| QuantilePoint { q, delay_ns: e.value }))
                .collect();
        by_kind.push((k.kind, quantiles.clone()));
        lines.push(Line::FridgeQuantiles(FridgeLine {
            record: FridgeRecord { point, kind: k.kind, epoch_first: first, epoch_last: last, quantiles },
            point_id,
            samples: k.all.samples,
            estimated_pairs: k.all.estimated_pairs.clone(),
            report: Box::new(k),
        }));
    }
    Outcome { lines, latest: None, estimate, quantiles: by_kind }
}
