//! The demo's table: per synopsis and direction, what the peer estimated next to the ground
//! truth, with the error. Built from the scorer's report (which pairs every record with its
//! truth) and, for loss, from the records' `loss` objects.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_trace::score::{Report, rel_err};
use wirelat_trace::truth::{Stats, Truth};

/// One direction of one synopsis that reports per-epoch segment statistics (LDA, RDA, LDS's
/// aggregate): whole-run values over the epochs that were scored.
#[derive(Clone, Debug, Serialize)]
pub struct SegmentRow {
    /// Synopsis name.
    pub synopsis: String,
    /// forward or reverse.
    pub direction: String,
    /// Epochs scored.
    pub epochs: usize,
    /// True mean delay over those epochs' packets, ns.
    pub true_mean_ns: f64,
    /// Estimated mean: the epochs' estimates weighted by their true packet counts, ns.
    pub est_mean_ns: Option<f64>,
    /// |est − true| / true of the run's mean.
    pub mean_rel_err: Option<f64>,
    /// Median and max over epochs of the per-epoch relative error of the mean.
    pub epoch_mean_rel_err_median: f64,
    /// Largest per-epoch error.
    pub epoch_mean_rel_err_max: f64,
    /// True std-dev, averaged over epochs, ns.
    pub true_sd_ns: f64,
    /// Estimated std-dev, averaged over the epochs that have one, ns.
    pub est_sd_ns: Option<f64>,
    /// Median over epochs of the std-dev's relative error.
    pub epoch_sd_rel_err_median: Option<f64>,
    /// True loss rate of the direction.
    pub true_loss: f64,
    /// Loss rate from the records (lost / sent over the epochs), when the synopsis reports one.
    pub est_loss: Option<f64>,
}

/// One direction of a per-flow synopsis (LDS, COLATE).
#[derive(Clone, Debug, Serialize)]
pub struct FlowRow {
    /// Synopsis name.
    pub synopsis: String,
    /// forward or reverse.
    pub direction: String,
    /// Flows scored.
    pub flows: usize,
    /// Flows reported without an estimate.
    pub no_estimate: usize,
    /// Median per-flow relative error of the mean.
    pub mean_rel_err_median: f64,
    /// 90th percentile.
    pub mean_rel_err_p90: f64,
    /// Median per-flow relative error of the std-dev (when estimated).
    pub sd_rel_err_median: Option<f64>,
}

/// One point's fridge distribution of one exchange kind.
#[derive(Clone, Debug, Serialize)]
pub struct FridgeRow {
    /// a or b.
    pub point: String,
    /// tcp_handshake or dns.
    pub kind: String,
    /// True request→response samples.
    pub true_samples: usize,
    /// (q, estimate ns, truth ns, |log2 error|).
    pub quantiles: Vec<(f64, f64, f64, f64)>,
}

/// Everything the demo prints as its result table.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// LDA, RDA, LDS aggregate.
    pub segments: Vec<SegmentRow>,
    /// LDS, COLATE.
    pub flows: Vec<FlowRow>,
    /// Fridge.
    pub fridge: Vec<FridgeRow>,
}

/// (lost, sent) summed from the records' `loss` objects per (synopsis, direction).
fn record_losses(records: &str) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in records.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v.get("record").and_then(|r| r.as_str()) != Some("segment") {
            continue;
        }
        let (Some(syn), Some(dir), Some(loss)) =
            (v["synopsis"].as_str(), v["direction"].as_str(), v.get("loss").filter(|l| l.is_object()))
        else {
            continue;
        };
        let sent = loss["sent"].as_u64().unwrap_or(0);
        let lost = match loss["lost"].as_u64() {
            Some(l) => l,
            None => sent.saturating_sub(loss["received"].as_u64().unwrap_or(sent)),
        };
        let e = out.entry((syn.to_string(), dir.to_string())).or_insert((0, 0));
        e.0 += lost;
        e.1 += sent;
    }
    out
}

impl Summary {
    /// The table from a scored run.
    pub fn build(truth: &Truth, report: &Report, records: &str) -> Summary {
        let losses = record_losses(records);
        let segments = report
            .segment
            .iter()
            .map(|g| {
                let true_all = Stats::pool(g.epochs.iter().map(|e| &e.truth));
                let (mut wsum, mut w) = (0.0, 0.0);
                for e in &g.epochs {
                    if let Some(m) = e.mean_ns {
                        wsum += m * e.truth.count as f64;
                        w += e.truth.count as f64;
                    }
                }
                let est_mean = (w > 0.0).then(|| wsum / w);
                let sds: Vec<f64> = g.epochs.iter().filter_map(|e| e.std_dev_ns).collect();
                let true_sd = if g.epochs.is_empty() {
                    0.0
                } else {
                    g.epochs.iter().map(|e| e.truth.std_dev_ns).sum::<f64>() / g.epochs.len() as f64
                };
                let direction = truth.direction(g.direction);
                let true_loss = direction
                    .map(|d| if d.total.sent == 0 { 0.0 } else { d.total.lost as f64 / d.total.sent as f64 })
                    .unwrap_or(0.0);
                let est_loss = losses
                    .get(&(g.synopsis.name().to_string(), g.direction.name().to_string()))
                    .filter(|(_, sent)| *sent > 0)
                    .map(|(lost, sent)| *lost as f64 / *sent as f64);
                SegmentRow {
                    synopsis: g.synopsis.name().into(),
                    direction: g.direction.name().into(),
                    epochs: g.epochs.len(),
                    true_mean_ns: true_all.mean_ns,
                    est_mean_ns: est_mean,
                    mean_rel_err: est_mean.map(|m| rel_err(m, true_all.mean_ns)),
                    epoch_mean_rel_err_median: g.mean_rel_err.median,
                    epoch_mean_rel_err_max: g.mean_rel_err.max,
                    true_sd_ns: true_sd,
                    est_sd_ns: (!sds.is_empty()).then(|| sds.iter().sum::<f64>() / sds.len() as f64),
                    epoch_sd_rel_err_median: (g.std_rel_err.n > 0).then_some(g.std_rel_err.median),
                    true_loss,
                    est_loss,
                }
            })
            .collect();
        let flows = report
            .flow
            .iter()
            .map(|f| FlowRow {
                synopsis: f.synopsis.name().into(),
                direction: f.direction.name().into(),
                flows: f.scored,
                no_estimate: f.no_estimate,
                mean_rel_err_median: f.mean_rel_err.median,
                mean_rel_err_p90: f.mean_rel_err.p90,
                sd_rel_err_median: (f.std_rel_err.n > 0).then_some(f.std_rel_err.median),
            })
            .collect();
        let fridge = report
            .fridge
            .iter()
            .map(|f| FridgeRow {
                point: f.point.name().into(),
                kind: super::cdf::kind_name(&f.kind),
                true_samples: f.truth_samples,
                quantiles: f.quantiles.iter().map(|q| (q.q, q.estimate_ns, q.truth_ns, q.log2_err)).collect(),
            })
            .collect();
        Summary { segments, flows, fridge }
    }

    /// Synopses of which nothing was scored.
    pub fn missing(&self) -> Vec<&'static str> {
        SynopsisKind::ALL
            .into_iter()
            .filter(|k| {
                let n = k.name();
                let scored = self.segments.iter().any(|r| r.synopsis == n && r.epochs > 0)
                    || self.flows.iter().any(|r| r.synopsis == n && r.flows > 0)
                    || (n == "fridge" && self.fridge.iter().any(|r| !r.quantiles.is_empty()));
                !scored
            })
            .map(|k| k.name())
            .collect()
    }

    /// Every synopsis produced something that was scored.
    pub fn complete(&self) -> bool {
        self.missing().is_empty()
    }

    /// The human-readable table.
    pub fn render(&self) -> String {
        let us = |ns: f64| format!("{:.2} µs", ns / 1e3);
        let opt_us = |ns: Option<f64>| ns.map_or("-".to_string(), us);
        let pct = |x: f64| format!("{:.2} %", x * 100.0);
        let opt_pct = |x: Option<f64>| x.map_or("-".to_string(), pct);
        let mut s = String::new();
        let _ = writeln!(s, "\nOne-way delay between A and B, whole run (estimate vs ground truth):");
        let _ = writeln!(
            s,
            "  {:<7} {:<8} {:>6}  {:>11} {:>11} {:>8}  {:>9} {:>9}  {:>11} {:>11} {:>8}  {:>7} {:>7}",
            "synopsis",
            "dir",
            "epochs",
            "mean est",
            "mean true",
            "error",
            "ep.err50",
            "ep.errmax",
            "sd est",
            "sd true",
            "ep.err50",
            "loss est",
            "true"
        );
        for r in &self.segments {
            let _ = writeln!(
                s,
                "  {:<7} {:<8} {:>6}  {:>11} {:>11} {:>8}  {:>9} {:>9}  {:>11} {:>11} {:>8}  {:>7} {:>7}",
                r.synopsis,
                r.direction,
                r.epochs,
                opt_us(r.est_mean_ns),
                us(r.true_mean_ns),
                opt_pct(r.mean_rel_err),
                pct(r.epoch_mean_rel_err_median),
                pct(r.epoch_mean_rel_err_max),
                opt_us(r.est_sd_ns),
                us(r.true_sd_ns),
                opt_pct(r.epoch_sd_rel_err_median),
                opt_pct(r.est_loss),
                pct(r.true_loss),
            );
        }
        if !self.flows.is_empty() {
            let _ =
                writeln!(s, "\nPer-flow mean delay (error of each flow's estimate against its true mean):");
            let _ = writeln!(
                s,
                "  {:<7} {:<8} {:>6} {:>9}  {:>12} {:>12} {:>12}",
                "synopsis", "dir", "flows", "no est.", "err median", "err p90", "sd err med."
            );
            for r in &self.flows {
                let _ = writeln!(
                    s,
                    "  {:<7} {:<8} {:>6} {:>9}  {:>12} {:>12} {:>12}",
                    r.synopsis,
                    r.direction,
                    r.flows,
                    r.no_estimate,
                    pct(r.mean_rel_err_median),
                    pct(r.mean_rel_err_p90),
                    opt_pct(r.sd_rel_err_median)
                );
            }
        }
        if !self.fridge.is_empty() {
            let _ =
                writeln!(s, "\nRequest→response delay at each point (fridge quantiles, estimate / truth):");
            for r in &self.fridge {
                let qs: Vec<String> = r
                    .quantiles
                    .iter()
                    .map(|(q, e, t, _)| format!("p{:.0} {} / {}", q * 100.0, us(*e), us(*t)))
                    .collect();
                let worst = r.quantiles.iter().map(|q| q.3).fold(0.0, f64::max);
                let _ = writeln!(
                    s,
                    "  {} {:<13} {:>6} samples  {}  (max |log2 err| {:.3})",
                    r.point,
                    r.kind,
                    r.true_samples,
                    qs.join(", "),
                    worst
                );
            }
        }
        s
    }
}
