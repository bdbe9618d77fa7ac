//! The fridge's control side: its summary carries the epoch's distributions, publishing adds the
//! epoch to the point's whole-run fridge, and the peer estimates each point's group on its own.

use serde::Serialize;
use tracing::warn;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::fridge::{self, FridgeReport, FridgeSynopsis};

use super::{ControlSide, PeerSide, PublishAt, SynopsisSummary};
use crate::peer::engine::{Engine, GroupCall};
use crate::peer::estimate::{Outcome, PointContext, PointEstimate};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{FridgeLine, Line};
use crate::sink::MeasuredBoth;
use wirelat_records::{FridgeRecord, Point, QuantilePoint};

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

impl PointEstimate for FridgeSynopsis {
    fn estimate_point(cx: &PointContext, merged: &FridgeSynopsis) -> Outcome {
        fridge_group(cx.point, cx.point_id, cx.first, cx.last, merged)
    }
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
