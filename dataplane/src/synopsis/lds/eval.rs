//! Evaluation helpers shared by the seeded tests and the `lds_repro` example: replay a
//! [`Trace`] through a sender and a receiver sketch, estimate every flow of the ground truth,
//! and summarise relative errors the way the paper does (medians and 95th percentiles per
//! flow-size bin and per population; a missing estimate counts as error 1, spec P15).
//!
//! Offline analysis code: allocates freely, never used on the data path.

use super::config::{EstimatorConfig, LdsConfig};
use super::estimator::Estimator;
use super::sketch::Lds;
use super::trace::Trace;
use crate::synopsis::{ConfigError, Observation, Synopsis};

/// Flow-size bins of spec §11.3 / paper Fig. 10 (inclusive packet counts).
pub const SIZE_BINS: [(u32, u32); 7] =
    [(1, 9), (10, 49), (50, 99), (100, 499), (500, 999), (1000, 9999), (10_000, u32::MAX)];

/// Label of a size bin ("500–999", "≥ 10000").
pub fn bin_label(bin: (u32, u32)) -> String {
    if bin.1 == u32::MAX { format!("≥ {}", bin.0) } else { format!("{}–{}", bin.0, bin.1) }
}

/// The two points' sketches of one replay.
pub struct Replay {
    /// Upstream point: every packet at its send time.
    pub sender: Lds,
    /// Downstream point: delivered packets at their receive time.
    pub receiver: Lds,
}

/// Which point of the segment a sketch is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Upstream: every packet, at its send time.
    Sender,
    /// Downstream: delivered packets, at their receive time.
    Receiver,
}

/// Feeds `trace` through one point with `cfg` via [`Synopsis::update`] (weights from the
/// config's policy) or, when `weights` is given, via [`Lds::update_raw`] with `weights[flow]`
/// (experiments that assign weights at random, spec §11.5; no flow log then). At the receiver,
/// packets with `lost[i]` are skipped.
pub fn build_point(
    trace: &Trace,
    cfg: &LdsConfig,
    point: Point,
    lost: Option<&[bool]>,
    weights: Option<&[u32]>,
) -> Result<Lds, ConfigError> {
    let mut lds = Lds::new(cfg)?;
    for (i, p) in trace.packets.iter().enumerate() {
        let Some(f) = trace.flows.get(p.flow as usize) else { continue };
        let ts_ns = match point {
            Point::Sender => p.send_ns,
            Point::Receiver if lost.and_then(|l| l.get(i)).copied().unwrap_or(false) => continue,
            Point::Receiver => p.recv_ns(),
        };
        match weights.and_then(|w| w.get(p.flow as usize)) {
            Some(&w) => lds.update_raw(f.flow_hash, p.identity, ts_ns, w),
            None => {
                let obs = Observation {
                    ts_ns,
                    flow: &f.key,
                    flow_hash: f.flow_hash,
                    identity: p.identity,
                    exchange: None,
                    encap: crate::packet::Encap::NONE,
                };
                lds.update(&mut (), &obs);
            }
        }
    }
    Ok(lds)
}

/// Both points of one replay (see [`build_point`]).
pub fn replay(trace: &Trace, cfg: &LdsConfig, lost: Option<&[bool]>) -> Result<Replay, ConfigError> {
    replay_weighted(trace, cfg, lost, None)
}

/// Both points with explicit per-flow weights (see [`build_point`]).
pub fn replay_weighted(
    trace: &Trace,
    cfg: &LdsConfig,
    lost: Option<&[bool]>,
    weights: Option<&[u32]>,
) -> Result<Replay, ConfigError> {
    Ok(Replay {
        sender: build_point(trace, cfg, Point::Sender, lost, weights)?,
        receiver: build_point(trace, cfg, Point::Receiver, lost, weights)?,
    })
}

/// One flow's outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowOutcome {
    /// Index of the flow in [`Trace::flows`].
    pub flow: u32,
    /// Packets sent.
    pub size: u32,
    /// True mean delay over delivered packets, ns.
    pub truth: f64,
    /// The estimate, ns (`None`: no estimate).
    pub estimate: Option<f64>,
}

impl FlowOutcome {
    /// |d̂ − d| / d, or 1 for a missing estimate (spec P15).
    pub fn relative_error(&self) -> f64 {
        match self.estimate {
            Some(e) if self.truth > 0.0 => (e - self.truth).abs() / self.truth,
            _ => 1.0,
        }
    }
}

/// Estimates every flow of the ground truth that delivered a packet (spec P13/P14) with the
/// estimator settings `opts`.
pub fn outcomes(
    trace: &Trace,
    replay: &Replay,
    lost: Option<&[bool]>,
    opts: EstimatorConfig,
) -> Result<Vec<FlowOutcome>, ConfigError> {
    outcomes_of(trace, &replay.sender, &replay.receiver, lost, opts)
}

/// [`outcomes`] for a sender and a receiver sketch built separately.
pub fn outcomes_of(
    trace: &Trace,
    sender: &Lds,
    receiver: &Lds,
    lost: Option<&[bool]>,
    opts: EstimatorConfig,
) -> Result<Vec<FlowOutcome>, ConfigError> {
    let est = Estimator::new(sender, receiver)
        .map_err(|e| ConfigError::new(crate::synopsis::SynopsisKind::Lds, "replay", e.to_string()))?
        .with_options(opts)?;
    let truth = trace.true_means(lost);
    Ok(trace
        .flows
        .iter()
        .zip(truth)
        .enumerate()
        .filter_map(|(i, (f, t))| {
            let truth = t?;
            let estimate = est.flow(&f.key, f.flow_hash).mean_delay_ns.ok().map(|e| e.value);
            Some(FlowOutcome { flow: i as u32, size: f.packets, truth, estimate })
        })
        .collect())
}

/// Linear-interpolation quantile of sorted values (numpy's default), `q` in [0, 1]; 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let i = pos.floor() as usize;
            let j = (i + 1).min(n - 1);
            sorted[i] + (sorted[j] - sorted[i]) * (pos - i as f64)
        }
    }
}

/// Error statistics of a set of flows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    /// Flows in the set.
    pub flows: usize,
    /// Fraction with an estimate.
    pub coverage: f64,
    /// Median relative error (missing = 1).
    pub median: f64,
    /// 95th percentile of the relative error (missing = 1).
    pub p95: f64,
}

/// Statistics over the outcomes that satisfy `keep`.
pub fn stats(outcomes: &[FlowOutcome], keep: impl Fn(&FlowOutcome) -> bool) -> ErrorStats {
    let mut errs: Vec<f64> = outcomes.iter().filter(|o| keep(o)).map(FlowOutcome::relative_error).collect();
    errs.sort_by(f64::total_cmp);
    let covered = outcomes.iter().filter(|o| keep(o) && o.estimate.is_some()).count();
    ErrorStats {
        flows: errs.len(),
        coverage: if errs.is_empty() { 0.0 } else { covered as f64 / errs.len() as f64 },
        median: quantile(&errs, 0.5),
        p95: quantile(&errs, 0.95),
    }
}

/// Statistics per [`SIZE_BINS`] bin.
pub fn by_size_bin(outcomes: &[FlowOutcome]) -> Vec<((u32, u32), ErrorStats)> {
    SIZE_BINS.iter().map(|&(lo, hi)| ((lo, hi), stats(outcomes, |o| (lo..=hi).contains(&o.size)))).collect()
}

/// The global-mean baseline: every flow is estimated by the mean delay of all packets.
pub fn global_mean_outcomes(trace: &Trace, lost: Option<&[bool]>) -> Vec<FlowOutcome> {
    let g = trace.global_mean(lost);
    trace
        .flows
        .iter()
        .zip(trace.true_means(lost))
        .enumerate()
        .filter_map(|(i, (f, t))| {
            Some(FlowOutcome { flow: i as u32, size: f.packets, truth: t?, estimate: Some(g) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert!((quantile(&v, 0.95) - 3.85).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
    }

    #[test]
    fn missing_estimates_count_as_error_one() {
        let o = [
            FlowOutcome { flow: 0, size: 5, truth: 100.0, estimate: Some(110.0) },
            FlowOutcome { flow: 1, size: 5, truth: 100.0, estimate: None },
            FlowOutcome { flow: 2, size: 5000, truth: 100.0, estimate: Some(99.0) },
        ];
        let s = stats(&o, |f| f.size < 10);
        assert_eq!(s.flows, 2);
        assert_eq!(s.coverage, 0.5);
        assert!((s.median - 0.55).abs() < 1e-12);
        let bins = by_size_bin(&o);
        assert_eq!(bins[0].1.flows, 2);
        assert_eq!(bins[5].1.flows, 1);
        assert!((bins[5].1.median - 0.01).abs() < 1e-12);
        assert_eq!(bin_label(SIZE_BINS[6]), "≥ 10000");
        assert_eq!(bin_label(SIZE_BINS[4]), "500–999");
    }
}
