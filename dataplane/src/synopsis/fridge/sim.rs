//! Seeded request/response traces for the fridge's tests and paper reproduction (spec §5.2,
//! §6.2, §6.5), and runners that feed a trace through a fridge set or a naive baseline and
//! collect exact samples.
//!
//! - The paper's synthetic trace: requests at a constant 1 M/s, 40 % answered, delays
//!   log-uniform on (1 ms, T) (spec P13), 0.5 M pairs. *Literal*: 1.25 M requests and every
//!   response, also those after the last request. *Steady*: the request stream continues for T
//!   more and only responses before the last request are in the trace (spec P12).
//! - The real-trace-like substitute: Poisson requests at 535 k/s, 13 % answered, log-normal
//!   delays in ms with μ = 3.209, σ = 1.302 (mean 57.8 ms, p99 ≈ 512 ms).
//!
//! Ground truth = every pair whose response is in the trace. Pairing ids are unique
//! (a bijection of the request index). Test and reproduction support: no I/O.

use super::accum::{FridgeCounters, KindCounters};
use super::bins::LogBins;
use super::combine::{CombinedHistogram, FridgeModel, bin_weights, combine, histograms_from_samples};
use super::config::{Combination, FridgeSpec, WeightMode};
use super::set::{FridgeSet, ResponseOutcome, Sample};
use crate::packet::Role;
use crate::synopsis::ConfigError;
use crate::synopsis::hash::{derive, mix64};
use rand::Rng;
use rand_distr::{Distribution, Exp};

/// One packet of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Timestamp, ns.
    pub ts_ns: u64,
    /// Pairing id.
    pub id: u64,
    /// Request or response.
    pub role: Role,
}

/// A generated trace and its ground truth.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Packets in timestamp order.
    pub events: Vec<TraceEvent>,
    /// Delays (ns) of the pairs whose response is in the trace.
    pub truth_ns: Vec<u64>,
    /// Requests in the trace.
    pub requests: u64,
}

impl Trace {
    /// The truth as f64 ns, for [`super::distribution::WeightedSamples::unit`].
    pub fn truth_f64(&self) -> impl Iterator<Item = f64> + '_ {
        self.truth_ns.iter().map(|d| *d as f64)
    }
}

/// Request arrival process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// Evenly spaced.
    Constant,
    /// Poisson.
    Poisson,
}

/// Delay distribution of answered requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delays {
    /// log2(delay) uniform between log2(min) and log2(max).
    LogUniform {
        /// Lower bound, ns.
        min_ns: f64,
        /// Upper bound, ns.
        max_ns: f64,
    },
    /// ln(delay in ms) ~ N(mu, sigma²).
    LogNormalMs {
        /// Mean of ln(ms).
        mu: f64,
        /// Std-dev of ln(ms).
        sigma: f64,
    },
}

/// Which responses a trace keeps (spec P12).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Horizon {
    /// All responses, also after the last request.
    Literal,
    /// Only responses before the last request.
    Steady,
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceSpec {
    /// Requests per second.
    pub rate_per_s: f64,
    /// Number of requests.
    pub requests: u64,
    /// Fraction of requests that get a response.
    pub answered: f64,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Delay distribution.
    pub delays: Delays,
    /// Which responses are kept.
    pub horizon: Horizon,
}

impl TraceSpec {
    /// The paper's synthetic trace with delays log-uniform on (1 ms, `max_delay_ms`).
    pub fn paper_synthetic(max_delay_ms: f64, horizon: Horizon) -> Self {
        let base = 1_250_000u64;
        let requests = match horizon {
            Horizon::Literal => base,
            // The stream goes on for T more, so the pairs of the first 1.25 s all complete.
            Horizon::Steady => base + (max_delay_ms * 1e3) as u64,
        };
        Self {
            rate_per_s: 1e6,
            requests,
            answered: 0.4,
            arrivals: Arrivals::Constant,
            delays: Delays::LogUniform { min_ns: 1e6, max_ns: max_delay_ms * 1e6 },
            horizon,
        }
    }

    /// The real-trace-like substitute over `duration_s` seconds (steady horizon).
    pub fn real_like(duration_s: f64) -> Self {
        let rate = 535e3;
        Self {
            rate_per_s: rate,
            requests: (rate * duration_s) as u64,
            answered: 0.13,
            arrivals: Arrivals::Poisson,
            delays: Delays::LogNormalMs { mu: 3.209, sigma: 1.302 },
            horizon: Horizon::Steady,
        }
    }

    /// Generates the trace for `seed`.
    pub fn generate(&self, seed: u64) -> Trace {
        let mut rng = crate::sim::rng(seed);
        let id_key = derive(seed, 0x1d);
        let gap = Exp::new(self.rate_per_s.max(1e-9)).ok();
        let lognormal = if let Delays::LogNormalMs { mu, sigma } = self.delays {
            crate::sim::DelayModel::LogNormal { mu, sigma }.sampler()
        } else {
            None
        };
        let mut events = Vec::with_capacity((self.requests as f64 * (1.0 + self.answered)) as usize + 16);
        let mut pending = Vec::with_capacity((self.requests as f64 * self.answered) as usize + 16);
        let mut t = 0.0f64;
        let spacing_ns = 1e9 / self.rate_per_s;
        for i in 0..self.requests {
            let ts = t.round() as u64;
            let id = mix64(i ^ id_key);
            events.push(TraceEvent { ts_ns: ts, id, role: Role::Request });
            if rng.random::<f64>() < self.answered {
                let d_ns = match self.delays {
                    Delays::LogUniform { min_ns, max_ns } => {
                        let u: f64 = rng.random();
                        min_ns * (max_ns / min_ns).powf(u)
                    }
                    Delays::LogNormalMs { .. } => lognormal.map_or(0.0, |s| s.sample(&mut rng)) * 1e6,
                };
                let d = (d_ns.round() as u64).max(1);
                pending.push((ts + d, id, d));
            }
            t += match (self.arrivals, gap) {
                (Arrivals::Poisson, Some(g)) => g.sample(&mut rng) * 1e9,
                _ => spacing_ns,
            };
        }
        let last_request = events.last().map_or(0, |e| e.ts_ns);
        let mut truth_ns = Vec::with_capacity(pending.len());
        for (ts, id, d) in pending {
            if self.horizon == Horizon::Steady && ts > last_request {
                continue;
            }
            truth_ns.push(d);
            events.push(TraceEvent { ts_ns: ts, id, role: Role::Response });
        }
        events.sort_unstable_by_key(|e| (e.ts_ns, e.role == Role::Response, e.id));
        Trace { events, truth_ns, requests: self.requests }
    }
}

/// The exact outcome of running a fridge set over a trace.
#[derive(Clone, Debug)]
pub struct FridgeRun {
    /// Every matched response.
    pub samples: Vec<Sample>,
    /// The set's fridges.
    pub specs: Vec<FridgeSpec>,
    /// Weight form used.
    pub mode: WeightMode,
    /// Counters as the synopsis would hold them over the whole trace.
    pub counters: KindCounters,
    /// Per-fridge counters.
    pub fridges: Vec<FridgeCounters>,
}

/// Feeds `trace` through a fresh fridge set of `specs`.
pub fn run_fridge(
    trace: &Trace,
    specs: &[FridgeSpec],
    mode: WeightMode,
    seed: u64,
) -> Result<FridgeRun, ConfigError> {
    let mut set = FridgeSet::new(specs, seed, mode)?;
    let mut samples = Vec::new();
    let mut counters = KindCounters::default();
    let mut fridges = vec![FridgeCounters::default(); specs.len()];
    for e in &trace.events {
        match e.role {
            Role::Request => {
                let (out, gap) = set.on_request(e.id, e.ts_ns);
                counters.requests += 1;
                counters.request_gap_ns += gap;
                if let super::set::RequestOutcome::Inserted { fridge, .. } = out
                    && let Some(f) = fridges.get_mut(usize::from(fridge))
                {
                    f.insertions += 1;
                }
            }
            Role::Response => {
                counters.responses += 1;
                if let ResponseOutcome::Matched(s) = set.on_response(e.id, e.ts_ns) {
                    counters.samples += 1;
                    samples.push(s);
                }
            }
        }
    }
    Ok(FridgeRun { samples, specs: specs.to_vec(), mode, counters, fridges })
}

impl FridgeRun {
    /// The model of each fridge from the run's counters.
    pub fn models(&self) -> Vec<FridgeModel> {
        self.specs
            .iter()
            .zip(&self.fridges)
            .map(|(s, f)| FridgeModel::from_counters(s, self.mode, &self.counters, f))
            .collect()
    }

    /// Exact weighted samples (delay ns, ω) under `comb`, with combination weights computed on
    /// `bins`.
    pub fn weighted_samples(&self, comb: &Combination, bins: &LogBins) -> Vec<(f64, f64)> {
        let hists = histograms_from_samples(&self.samples, self.specs.len(), bins);
        let refs: Vec<&[_]> = hists.iter().map(|h| h.as_slice()).collect();
        let w = bin_weights(comb, bins, &self.models(), &refs);
        self.samples
            .iter()
            .filter_map(|s| w.sample_weight(s, bins).map(|om| (s.delay_ns as f64, om)))
            .collect()
    }

    /// The combined histogram the synopsis path would report.
    pub fn combined_histogram(&self, comb: &Combination, bins: &LogBins) -> CombinedHistogram {
        let hists = histograms_from_samples(&self.samples, self.specs.len(), bins);
        let refs: Vec<&[_]> = hists.iter().map(|h| h.as_slice()).collect();
        let w = bin_weights(comb, bins, &self.models(), &refs);
        combine(&w, &refs)
    }
}

/// Delays reported by the always-overwrite baseline.
pub fn run_overwrite(trace: &Trace, slots: u32, seed: u64) -> Vec<f64> {
    let mut n = super::baseline::NaiveOverwrite::new(slots, seed);
    let mut out = Vec::new();
    for e in &trace.events {
        match e.role {
            Role::Request => n.on_request(e.id, e.ts_ns),
            Role::Response => out.extend(n.on_response(e.id, e.ts_ns).map(|d| d as f64)),
        }
    }
    out
}

/// Delays reported by the lazy-expiry baseline.
pub fn run_lazy(trace: &Trace, slots: u32, stages: u32, t_exp_ns: u64, seed: u64) -> Vec<f64> {
    let mut n = super::baseline::LazyExpiry::new(slots, stages, t_exp_ns, seed);
    let mut out = Vec::new();
    for e in &trace.events {
        match e.role {
            Role::Request => {
                n.on_request(e.id, e.ts_ns);
            }
            Role::Response => out.extend(n.on_response(e.id, e.ts_ns).map(|d| d as f64)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_trace_shape() {
        let spec = TraceSpec { requests: 100_000, ..TraceSpec::paper_synthetic(64.0, Horizon::Literal) };
        let t = spec.generate(1);
        // 40 % answered: binomial sd √(n·0.24) ≈ 155; allow 5 sd.
        assert!((t.truth_ns.len() as f64 - 40_000.0).abs() < 5.0 * 155.0);
        assert_eq!(t.events.len(), 100_000 + t.truth_ns.len());
        assert!(t.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        assert!(t.truth_ns.iter().all(|d| (1_000_000..=64_000_000).contains(d)));
        // log2(delay/ms) ~ U(0, 6): the median is 2³ ms; sd of the sample median of a
        // uniform exponent ≈ 6/(2√n) ≈ 0.015 in log2 units; allow 5 sd.
        let mut d = t.truth_ns.clone();
        d.sort_unstable();
        let med = d[d.len() / 2] as f64 / 1e6;
        assert!((med.log2() - 3.0).abs() < 0.075, "median {med} ms");
        // Steady: nothing after the last request.
        let s =
            TraceSpec { requests: 100_000, ..TraceSpec::paper_synthetic(64.0, Horizon::Steady) }.generate(1);
        let last_req = s.events.iter().filter(|e| e.role == Role::Request).map(|e| e.ts_ns).max().unwrap();
        assert!(s.events.iter().all(|e| e.ts_ns <= last_req));
    }

    #[test]
    fn real_like_moments() {
        // Literal horizon so no long delay is cut off at the end.
        let t = TraceSpec { horizon: Horizon::Literal, ..TraceSpec::real_like(0.5) }.generate(2);
        // Mean of the log-normal: e^(μ + σ²/2) = 57.8 ms; sd of the sample mean ≈
        // sd/√n with sd = 57.8·√(e^(σ²) − 1) ≈ 122 ms and n ≈ 34.8 k: 0.65 ms; allow 5 sd.
        let n = t.truth_ns.len() as f64;
        let mean_ms = t.truth_ns.iter().sum::<u64>() as f64 / n / 1e6;
        assert!((mean_ms - 57.8).abs() < 5.0 * 0.65, "mean {mean_ms}");
        assert!((t.requests as f64 - 267_500.0).abs() < 1.0);
    }
}
