//! The fridge's control side: its summary carries the epoch's distributions, publishing adds the
//! epoch to the point's whole-run fridge, and the peer estimates each point's group on its own.

use serde::Serialize;
use tracing::warn;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::fridge::{self, FridgeReport, FridgeSynopsis};

use super::{ControlSide, PeerSide, PublishAt, SynopsisSummary};
use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};
use crate::sink::MeasuredBoth;

/// The fridge's summary of one harvested epoch (both directions) and its distributions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FridgeHarvest {
    /// Packets measured per direction.
    pub measured: MeasuredBoth,
    /// Exchanges of kinds that are not measured.
    pub ignored_exchanges: u64,
    /// The epoch's estimates.
    pub report: Box<FridgeReport>,
}

impl ControlSide for FridgeSynopsis {
    type Harvest = FridgeHarvest;

    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError> {
        let report = fridge::estimate(s);
        match &mut p.whole_run_fridge {
            None => p.whole_run_fridge = Some(s.clone()),
            Some(run) => {
                if let Err(e) = run.merge(s) {
                    // Cannot happen: every epoch comes from one configuration.
                    warn!(error = %e, "the whole-run fridge cannot take this epoch");
                }
            }
        }
        let harvest = FridgeHarvest {
            measured: at.measured,
            ignored_exchanges: s.ignored_exchanges(),
            report: Box::new(report),
        };
        p.deliver(at, s, SynopsisSummary::Fridge(harvest));
        Ok(())
    }
}

impl PeerSide for FridgeSynopsis {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        match call.point() {
            Some(point) => {
                let out = e.fridge(&call.g, point, call.group);
                e.finish(call.g, call.emit, out, &call.keys);
            }
            None => e.ack_all(&call.keys),
        }
    }
}
