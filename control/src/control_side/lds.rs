//! LDS's control side: its summary counts flows and lost cells, and the peer estimates the pair
//! of one epoch (keeping its flow census for COLATE's group of the same window).

use serde::Serialize;
use wirelat_dataplane::synopsis::lds::Lds;

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::config::SegmentInfo;
use crate::peer::engine::{Engine, GroupCall};
use crate::peer::estimate::{
    FlowEncaps, Latest, Outcome, Pair, SegmentContext, SegmentEstimate, Sides, outcome_of, segment_sides,
};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{FlowLine, FlowResult, LdsLoss, Line, SegmentLine, SegmentResult};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::lds;
use wirelat_dataplane::synopsis::lds::estimator::LdsSummary;
use wirelat_records::{FlowId, FlowRecord, SegmentRecord};

/// LDS's summary of one harvested epoch of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsHarvest {
    /// "forward" or "reverse".
    pub direction: &'static str,
    /// Packets the direction measured.
    pub measured: u64,
    /// Flows in its flow log: entries of the workers' gathered lists, so a flow RSS moved to
    /// another worker within the epoch counts once per worker ([`lds::FlowSet::gather`]).
    pub flows: usize,
    /// Packets of flows the log could not record.
    pub unrecorded_packets: u64,
    /// Cells whose counters overflowed.
    pub overflowed_cells: usize,
}

/// LDS's keys of a `segment` record: its weighted packet counts and epoch summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsSegment {
    /// Weighted packet counts and loss rate.
    pub loss: LdsLoss,
    /// The estimator's epoch summary.
    pub summary: Box<LdsSummary>,
}

impl SegmentKeys for LdsSegment {
    /// Weighted counts give no lost packets: its epochs count as loss unknown.
    fn sent_lost(&self) -> (u64, Option<u64>) {
        (0, None)
    }
}

impl ControlSide for Lds {
    type Harvest = LdsHarvest;

    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError> {
        let harvest = LdsHarvest {
            direction: at.direction_name(),
            measured: at.measured_here(),
            flows: s.flows().len(),
            unrecorded_packets: s.flows().unrecorded_packets(),
            overflowed_cells: s.overflowed_cells(),
        };
        p.deliver(at, s, SynopsisSummary::Lds(harvest));
        Ok(())
    }
}

impl TwoPointSide for Lds {
    type SegmentKeys = LdsSegment;
}

impl PeerSide for Lds {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        let Some((seg, up, down)) = call.segment(e) else { return e.ack_all(&call.keys) };
        e.lds(call.g, &seg, up, down, call.sides, call.emit, call.keys);
    }
}

impl SegmentEstimate for Lds {
    type Evidence<'e> = Pair<'e, Lds>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: Pair<'_, Lds>) -> Outcome {
        lds_group(cx.seg, cx.first, e.up, e.down, cx.top_flows, cx.sides)
    }
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
