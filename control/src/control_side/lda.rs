//! LDA's control side: its summary counts the epoch's packets, and the peer estimates the pair
//! of one epoch.

use serde::Serialize;
use wirelat_dataplane::synopsis::lda::{Lda, LdaReport};

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};
use crate::report::line::LdaLoss;

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
