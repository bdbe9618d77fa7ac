//! LDA's control side: its summary counts the epoch's packets, and the peer estimates the pair
//! of one epoch.

use serde::Serialize;
use wirelat_dataplane::synopsis::lda::{Lda, LdaReport};

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::config::SegmentInfo;
use crate::peer::engine::{Engine, GroupCall};
use crate::peer::estimate::{
    Latest, Outcome, Pair, SegmentContext, SegmentEstimate, Sides, outcome_of, segment_sides,
};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{LdaLoss, Line, SegmentLine, SegmentResult};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::lda;
use wirelat_records::SegmentRecord;

/// LDA's summary of one harvested epoch of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdaHarvest {
    /// "forward" or "reverse".
    pub direction: &'static str,
    /// Packets the direction measured.
    pub measured: u64,
    /// Packets in the synopsis.
    pub packets: u64,
}

/// LDA's keys of a `segment` record: its loss and full report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdaSegment {
    /// Packet counts and loss.
    pub loss: LdaLoss,
    /// The estimator's report.
    pub report: Box<LdaReport>,
}

impl SegmentKeys for LdaSegment {
    fn sent_lost(&self) -> (u64, Option<u64>) {
        (self.loss.sent, self.loss.lost)
    }
}

impl ControlSide for Lda {
    type Harvest = LdaHarvest;

    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError> {
        let harvest = LdaHarvest {
            direction: at.direction_name(),
            measured: at.measured_here(),
            packets: s.total_packets(),
        };
        p.deliver(at, s, SynopsisSummary::Lda(harvest));
        Ok(())
    }
}

impl TwoPointSide for Lda {
    type SegmentKeys = LdaSegment;
}

impl PeerSide for Lda {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        let Some((seg, up, down)) = call.segment(e) else { return e.ack_all(&call.keys) };
        let out = e.estimate_pair::<Lda>(&e.segment_context(&call.g, &seg, call.sides), up, down);
        e.finish(call.g, call.emit, out, &call.keys);
    }
}

impl SegmentEstimate for Lda {
    type Evidence<'e> = Pair<'e, Lda>;
    fn estimate_segment(cx: &SegmentContext<'_>, e: Pair<'_, Lda>) -> Outcome {
        lda_group(cx.seg, cx.first, e.up, e.down, cx.sides)
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
