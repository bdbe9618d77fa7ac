//! RDA's control side: publishing retains the epoch's timestamp cache for the peer's look-ups,
//! and the peer hands a ready group to its reconciliation worker (the records come back as an
//! event).

use serde::Serialize;
use wirelat_dataplane::synopsis::rda::{Rda, RdaCounters};

use super::{ControlSide, PeerSide, PublishAt, SegmentKeys, SynopsisSummary, TwoPointSide};
use crate::peer::config::SegmentInfo;
use crate::peer::engine::{Engine, GroupCall};
use crate::peer::estimate::{
    Latest, Outcome, SegmentContext, SegmentEstimate, Sides, outcome_of, segment_sides,
};
use crate::publish::{PublishError, Publisher};
use crate::report::line::{
    Line, RdaDuplicates, RdaLoss, RdaProcess, RdaReconciliation, RdaReportLine, SegmentLine, SegmentResult,
};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::estimate::NoEstimate;
use wirelat_dataplane::synopsis::rda::RdaReport;
use wirelat_records::SegmentRecord;

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
        // The merges only appended the workers' logs: file them first, since the counters, the
        // banks and the cache are final only then (`Rda::merge`).
        s.settle();
        let harvest = RdaHarvest {
            direction: at.direction_name(),
            measured: at.measured_here(),
            counters: *s.counters(),
        };
        p.note_rda_cache_full(at, &harvest.counters);
        // Encode first: a late-binding value's signature comes from the cache. Retain the cache
        // before the epoch goes out: a network sink sends at once, and the peer may ask for this
        // epoch's timestamps as soon as it has both points' copies — a look-up that found no
        // cache left the reconciliation incomplete (seen in the end-to-end demo: "no_cache": 1,
        // mean off by 0.2 %).
        let msg = p.message(at, &*s, SynopsisSummary::Rda(harvest));
        // A sorted run moves out only in trade for a spare buffer a released cache left, so the
        // next epoch files into memory already touched; otherwise the sinks copy the pairs they
        // keep and the cache stays in the accumulator, whose reset clears it. (Moving the cache
        // out for a fresh one cost a new 32-MiB table per epoch and direction: page faults that
        // were a quarter of `offline`'s time.)
        p.retain_rda_cache(at, s);
        p.send(&msg);
        p.recycle(msg);
        Ok(())
    }
}

impl TwoPointSide for Rda {
    type SegmentKeys = RdaSegment;
}

impl PeerSide for Rda {
    fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
        let Some((seg, up, down)) = call.segment(e) else { return e.ack_all(&call.keys) };
        e.start_rda(
            call.g,
            seg,
            up,
            down,
            call.sides.complete,
            call.sides.absent.to_vec(),
            call.emit,
            call.keys,
        );
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
