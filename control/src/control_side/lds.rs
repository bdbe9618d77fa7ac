//! LDS's control side: its summary counts flows and lost cells, and the peer estimates the pair
//! of one epoch (keeping its flow census for COLATE's group of the same window).

use serde::Serialize;
use wirelat_dataplane::synopsis::lds::Lds;

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};
use crate::report::line::LdsLoss;
use wirelat_dataplane::synopsis::lds::estimator::LdsSummary;

/// LDS's summary of one harvested epoch of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsHarvest {
    /// "forward" or "reverse".
    pub direction: &'static str,
    /// Packets the direction measured.
    pub measured: u64,
    /// Flows in its flow log.
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
