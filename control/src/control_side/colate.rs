//! COLATE's control side: publishing adds each window to the direction's counter epoch (closed
//! ones are archived), and the peer estimates a group of windows with the LDS census of the
//! same windows. It writes `flow` records, not `segment` ones.

use serde::Serialize;
use wirelat_dataplane::synopsis::colate::Colate;

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::config::SegmentInfo;
use crate::peer::engine::{Engine, GroupCall};
use crate::peer::estimate::{Outcome, SegmentContext, SegmentEstimate, Sides};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{ColateSummary, EpochSummary, FlowLine, FlowResult, Line};
use wirelat_dataplane::synopsis::colate::{self, CounterEpoch, LatencyFloor, QueryOptions, Segment};
use wirelat_dataplane::synopsis::lds::FlowEntry;
use wirelat_dataplane::synopsis::{Synopsis, SynopsisKind};
use wirelat_records::{FlowEncap, FlowId, FlowRecord};

/// COLATE's summary of one harvested window of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColateHarvest {
    /// "forward" or "reverse".
    pub direction: &'static str,
    /// Packets the direction measured.
    pub measured: u64,
    /// Packets in the window.
    pub packets: u64,
    /// Σ ticks, as a decimal string (it may exceed what JSON numbers hold exactly).
    pub total_ticks: String,
    /// A counter wrapped.
    pub counters_wrapped: bool,
    /// Counter epochs this window closed (always 0 without `[output] colate_archive`: counter
    /// epochs are built only to be archived).
    pub closed_counter_epochs: u64,
}

/// The [`TwoPointSide::SegmentKeys`] of a synopsis that writes no `segment` record: no value
/// exists.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum NoSegmentLine {}

impl SegmentKeys for NoSegmentLine {
    fn sent_lost(&self) -> (u64, Option<u64>) {
        match *self {}
    }
}

impl ControlSide for Colate {
    type Harvest = ColateHarvest;

    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError> {
        let closed = match at.direction {
            Some(d) => p.add_colate_window(d, at.epoch, s),
            None => Ok(0),
        };
        let harvest = ColateHarvest {
            direction: at.direction_name(),
            measured: at.measured_here(),
            packets: s.packets(),
            total_ticks: s.total_ticks().to_string(),
            counters_wrapped: s.counters_wrapped(),
            closed_counter_epochs: closed.as_ref().map_or(0, |n| *n),
        };
        // The window goes out even when archiving failed; the error is reported after.
        p.deliver(at, s, SynopsisSummary::Colate(harvest));
        closed.map(|_| ())
    }
}

impl TwoPointSide for Colate {
    type SegmentKeys = NoSegmentLine;
}

impl PeerSide for Colate {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        let Some((seg, _, _)) = call.segment(e) else { return e.ack_all(&call.keys) };
        let (out, released) = e.colate(&call.g, &seg, call.group, call.sides, call.emit);
        // The LDS synopses whose census this group used go with it, after the commit: a crash
        // before it leaves them to be resent with the census.
        let mut keys = call.keys;
        keys.extend(released);
        e.finish(call.g, call.emit, out, &keys);
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
