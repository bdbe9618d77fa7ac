//! What scoring produces: the scores per segment, flow and fridge record, the bound checks,
//! and the report that holds them with its text rendering.

use super::*;

/// One scored segment epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochScore {
    /// Epoch.
    pub epoch: u64,
    /// The true statistics used.
    pub truth: Stats,
    /// Estimated mean.
    pub mean_ns: Option<f64>,
    /// Relative error of the mean.
    pub mean_rel_err: Option<f64>,
    /// Whether the mean's interval contains the truth (None without interval).
    pub mean_covered: Option<bool>,
    /// Estimated std-dev.
    pub std_dev_ns: Option<f64>,
    /// Relative error of the std-dev.
    pub std_rel_err: Option<f64>,
}

/// Scores of one synopsis on one direction's segment records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentScore {
    /// Synopsis.
    pub synopsis: SynopsisKind,
    /// Direction.
    pub direction: Direction,
    /// Per scored epoch, ascending.
    pub epochs: Vec<EpochScore>,
    /// Records whose epoch has no truth (or no packets).
    pub unmatched: usize,
    /// Relative errors of the mean.
    pub mean_rel_err: Summary,
    /// Relative errors of the std-dev.
    pub std_rel_err: Summary,
    /// Fraction of mean intervals that contain the truth (None if no intervals).
    pub mean_coverage: Option<f64>,
}

/// Scores of one synopsis on one direction's flow records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowScore {
    /// Synopsis.
    pub synopsis: SynopsisKind,
    /// Direction.
    pub direction: Direction,
    /// Flows scored.
    pub scored: usize,
    /// Records without usable truth.
    pub unmatched: usize,
    /// Records without a mean estimate.
    pub no_estimate: usize,
    /// Relative errors of the mean.
    pub mean_rel_err: Summary,
    /// Relative errors of the std-dev.
    pub std_rel_err: Summary,
    /// Mean relative errors by flow size (delivered packets): "1-9", "10-99", "100-999", "1000+".
    pub mean_rel_err_by_size: Vec<(String, Summary)>,
}

/// One scored quantile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantileScore {
    /// Probability.
    pub q: f64,
    /// Estimated delay, ns.
    pub estimate_ns: f64,
    /// True delay, ns.
    pub truth_ns: f64,
    /// |log2(estimate / truth)|.
    pub log2_err: f64,
}

/// Scores of one fridge record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FridgeScore {
    /// Point.
    pub point: Point,
    /// Exchange kind.
    pub kind: ExchangeKind,
    /// Epoch range.
    pub epoch_first: u64,
    /// Epoch range end (inclusive).
    pub epoch_last: u64,
    /// True samples in range.
    pub truth_samples: usize,
    /// Per quantile.
    pub quantiles: Vec<QuantileScore>,
    /// Max log2 error.
    pub max_log2_err: f64,
}

/// One bound check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked (`lda.mean_rel_err_max`, ...).
    pub name: String,
    /// Measured value.
    pub value: f64,
    /// The bound (an upper bound, except for `*_min` checks).
    pub bound: f64,
    /// Whether it holds.
    pub pass: bool,
}

/// The whole scoring report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Segment scores per (synopsis, direction).
    pub segment: Vec<SegmentScore>,
    /// Flow scores per (synopsis, direction).
    pub flow: Vec<FlowScore>,
    /// Fridge scores per record.
    pub fridge: Vec<FridgeScore>,
    /// Bound checks.
    pub checks: Vec<Check>,
    /// All checks pass.
    pub pass: bool,
}

impl Report {
    /// A compact human-readable rendering.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for g in &self.segment {
            let _ = writeln!(
                s,
                "{} {}: {} epochs ({} unmatched); mean rel.err median {:.4} max {:.4}; std rel.err median {:.4} max {:.4}{}",
                g.synopsis.name(),
                g.direction.name(),
                g.epochs.len(),
                g.unmatched,
                g.mean_rel_err.median,
                g.mean_rel_err.max,
                g.std_rel_err.median,
                g.std_rel_err.max,
                g.mean_coverage.map(|c| format!("; coverage {c:.3}")).unwrap_or_default()
            );
            for e in &g.epochs {
                let _ = writeln!(
                    s,
                    "  epoch {:>12}  true mean {:>12.1} est {:>12}  true sd {:>12.1} est {:>12}",
                    e.epoch,
                    e.truth.mean_ns,
                    e.mean_ns.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                    e.truth.std_dev_ns,
                    e.std_dev_ns.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                );
            }
        }
        for f in &self.flow {
            let _ = writeln!(
                s,
                "{} {}: {} flows ({} unmatched, {} without estimate); mean rel.err median {:.4} p90 {:.4} max {:.4}",
                f.synopsis.name(),
                f.direction.name(),
                f.scored,
                f.unmatched,
                f.no_estimate,
                f.mean_rel_err.median,
                f.mean_rel_err.p90,
                f.mean_rel_err.max
            );
            for (bin, sm) in &f.mean_rel_err_by_size {
                let _ =
                    writeln!(s, "  size {bin:>8}: {} flows, median {:.4} p90 {:.4}", sm.n, sm.median, sm.p90);
            }
        }
        for f in &self.fridge {
            let _ = writeln!(
                s,
                "fridge {} {:?} epochs {}..={}: {} true samples, max |log2 err| {:.4}",
                f.point.name(),
                f.kind,
                f.epoch_first,
                f.epoch_last,
                f.truth_samples,
                f.max_log2_err
            );
            for q in &f.quantiles {
                let _ = writeln!(
                    s,
                    "  q {:.3}: est {:>12.0} ns  true {:>12.0} ns  |log2| {:.4}",
                    q.q, q.estimate_ns, q.truth_ns, q.log2_err
                );
            }
        }
        for c in &self.checks {
            let _ = writeln!(
                s,
                "check {:<40} {:>10.5} vs {:>10.5}  {}",
                c.name,
                c.value,
                c.bound,
                if c.pass { "PASS" } else { "FAIL" }
            );
        }
        let _ = writeln!(s, "{}", if self.pass { "PASS" } else { "FAIL" });
        s
    }
}
