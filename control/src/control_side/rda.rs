//! RDA's control side: publishing retains the epoch's timestamp cache for the peer's look-ups,
//! and the peer hands a ready group to its reconciliation worker (the records come back as an
//! event).

use serde::Serialize;
use wirelat_dataplane::synopsis::rda::{Rda, RdaCounters};

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{RdaLoss, RdaReportLine};

/// RDA's summary of one harvested epoch of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RdaHarvest {
    /// "forward" or "reverse".
    pub direction: &'static str,
    /// Packets the direction measured.
    pub measured: u64,
    /// The synopsis's counters.
    pub counters: RdaCounters,
}

/// RDA's keys of a `segment` record: its loss (with bounds when the decode is partial) and
/// report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RdaSegment {
    /// Packet counts and loss.
    pub loss: Box<RdaLoss>,
    /// The estimator's report and how the reconciliation went.
    pub report: Box<RdaReportLine>,
}

impl SegmentKeys for RdaSegment {
    fn sent_lost(&self) -> (u64, Option<u64>) {
        (self.loss.sent, self.loss.lost)
    }
}

impl ControlSide for Rda {
    type Harvest = RdaHarvest;

    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError> {
        let harvest = RdaHarvest {
            direction: at.direction_name(),
            measured: at.measured_here(),
            counters: *s.counters(),
        };
        // Encode first: a late-binding value's signature comes from the cache. Retain the cache
        // before the epoch goes out: a network sink sends at once, and the peer may ask for this
        // epoch's timestamps as soon as it has both points' copies — a look-up that found no
        // cache left the reconciliation incomplete (seen in the end-to-end demo: "no_cache": 1,
        // mean off by 0.2 %).
        let msg = p.message(at, &*s, SynopsisSummary::Rda(harvest));
        // The sinks copy the pairs they keep; the table stays in the accumulator, whose reset
        // clears it for the next epoch. (Moving it out cost a fresh 32-MiB table per epoch and
        // direction: page faults that were a quarter of `offline`'s time.)
        s.settle();
        p.retain_rda_cache(at, s.cache());
        p.send(&msg);
        Ok(())
    }
}

impl TwoPointSide for Rda {
    type SegmentKeys = RdaSegment;
}

impl PeerSide for Rda {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        let Some((seg, up, down)) = call.segment(e) else { return e.ack_all(&call.keys) };
        e.start_rda(call.g, seg, up, down, call.complete, call.absent, call.emit, call.keys);
    }
}
