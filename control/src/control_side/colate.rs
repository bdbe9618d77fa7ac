//! COLATE's control side: publishing adds each window to the direction's counter epoch (closed
//! ones are archived), and the peer estimates a group of windows with the LDS census of the
//! same windows. It writes `flow` records, not `segment` ones.

use serde::Serialize;
use wirelat_dataplane::synopsis::colate::Colate;

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};

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
    /// Counter epochs this window closed.
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
