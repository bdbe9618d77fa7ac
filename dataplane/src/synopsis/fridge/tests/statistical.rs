//! Seeded statistical tests against ground truth at CI size (spec §3.4, §4.5, §6.5). Every
//! tolerance is written next to its formula. The paper-size runs live in the
//! `fridge_repro` example.

use super::super::combine::{CombinedHistogram, bin_weights, combine};
use super::super::distribution::WeightedSamples;
use super::super::metrics::quantile_errors;
use super::super::report::models;
use super::super::sim::{Horizon, Trace, TraceSpec, run_fridge, run_lazy, run_overwrite};
use super::*;

/// Standard errors allowed per bin (spec §6.5: "allow ±4 standard errors").
const Z_ALLOWED: f64 = 4.0;
/// Bins need this many true pairs before they are checked (so Σc(c−1) is a usable variance).
const MIN_TRUE_PAIRS: f64 = 500.0;

/// Pooled per-bin estimate, its variance and the truth over several seeds.
struct Pooled {
    mass: Vec<f64>,
    variance: Vec<f64>,
    naive: Vec<f64>,
    samples: Vec<u64>,
    truth: Vec<f64>,
}

impl Pooled {
    fn new(n: usize) -> Self {
        Self {
            mass: vec![0.0; n],
            variance: vec![0.0; n],
            naive: vec![0.0; n],
            samples: vec![0; n],
            truth: vec![0.0; n],
        }
    }

    /// Largest |f̂ − f|/√V̂ over bins with enough truth, and the number of such bins.
    fn worst_z(&self) -> (f64, usize) {
        let mut worst = 0.0f64;
        let mut n = 0;
        for b in 0..self.mass.len() {
            if self.truth[b] < MIN_TRUE_PAIRS || self.variance[b] <= 0.0 {
                continue;
            }
            n += 1;
            worst = worst.max((self.mass[b] - self.truth[b]).abs() / self.variance[b].sqrt());
        }
        (worst, n)
    }

    /// The same for the survivorship-biased estimate samples/p (standard error √samples/p,
    /// Poisson).
    fn naive_worst_z(&self, p: f64) -> f64 {
        (0..self.mass.len())
            .filter(|&b| self.truth[b] >= MIN_TRUE_PAIRS && self.samples[b] > 0)
            .map(|b| (self.naive[b] - self.truth[b]).abs() / ((self.samples[b] as f64).sqrt() / p))
            .fold(0.0, f64::max)
    }

    /// Ratio f̂/f of the bin with the worst ratio among bins with enough truth.
    fn ratios(&self) -> Vec<f64> {
        (0..self.mass.len())
            .filter(|&b| self.truth[b] >= MIN_TRUE_PAIRS)
            .map(|b| self.mass[b] / self.truth[b])
            .collect()
    }
}

/// Runs each trace through a fresh synopsis (hash seed varied per run) via `update`, combines
/// per bin with `comb`, and pools the runs.
fn pooled_through_synopsis(cfg: &FridgeConfig, traces: &[Trace]) -> Pooled {
    let flow = crate::packet::FlowKey::default();
    let bins = LogBins::new(&cfg.histogram);
    let mut pooled = Pooled::new(bins.len());
    let kind = cfg.kinds[0].kind;
    for (i, trace) in traces.iter().enumerate() {
        let cfg = FridgeConfig { seed: 1000 + i as u64, ..cfg.clone() };
        let mut syn = FridgeSynopsis::new(&cfg).unwrap();
        let mut carry = FridgeSynopsis::new_carry(&cfg);
        for e in &trace.events {
            let ob = Observation {
                ts_ns: e.ts_ns,
                flow: &flow,
                flow_hash: 0,
                identity: 0,
                exchange: Some(crate::packet::Exchange { kind, role: e.role, id: e.id }),
                encap: crate::packet::Encap::NONE,
            };
            syn.update(&mut carry, &ob);
        }
        let epoch = syn.kind(kind).unwrap();
        let hists: Vec<&[BinStats]> = (0..epoch.fridge_count()).map(|k| epoch.hist(0, k)).collect();
        let w = bin_weights(&cfg.combination, &bins, &models(&cfg.kinds[0], cfg.weight, epoch), &hists);
        let c: CombinedHistogram = combine(&w, &hists);
        let p0 = cfg.kinds[0].fridges[0].entry_probability;
        for b in 0..bins.len() {
            pooled.mass[b] += c.mass[b];
            pooled.variance[b] += c.variance[b];
            pooled.samples[b] += c.samples[b];
            pooled.naive[b] += c.samples[b] as f64 / p0;
        }
        for d in &trace.truth_ns {
            pooled.truth[bins.bin_of(*d)] += 1.0;
        }
    }
    pooled
}

fn traces(spec: &TraceSpec, seeds: u64) -> Vec<Trace> {
    (0..seeds).map(|s| spec.generate(77 + s)).collect()
}

/// The well-provisioned regime of spec §6.5: 1 M requests/s, log-uniform 1–64 ms, steady
/// stream; M = 2¹², p = 2⁻⁴ gives a lifetime M/p = 65 536 requests ≥ λ·t_max/2 = 32 000.
fn well_provisioned() -> Vec<Trace> {
    let spec = TraceSpec { requests: 200_000, ..TraceSpec::paper_synthetic(64.0, Horizon::Steady) };
    traces(&spec, 20)
}

#[test]
fn single_fridge_is_unbiased_per_log_bin_under_both_weight_forms() {
    let traces = well_provisioned();
    for mode in [WeightMode::Insertions, WeightMode::Offered] {
        // The spec's 4 bins per octave: per-bin counts large enough for the bias check's power.
        let cfg = FridgeConfig {
            weight: mode,
            histogram: HistogramConfig { bins_per_octave: 4, ..HistogramConfig::default() },
            ..FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 12, 1.0 / 16.0)])
        };
        let pooled = pooled_through_synopsis(&cfg, &traces);
        // |f̂(b) − f(b)| ≤ 4·√(Σc(c − 1)) in every bin with ≥ 500 true pairs (spec §3.5: Σc(c−1)
        // is unbiased for Var f̂(b) = Σ_{pairs in b}(1/q − 1)).
        let (z, bins) = pooled.worst_z();
        assert!(bins >= 20, "{mode:?}: only {bins} bins checked");
        assert!(z <= Z_ALLOWED, "{mode:?}: worst bin is {z:.2} standard errors off");
        // The check has power: the survivorship-biased estimate (samples/p, no survival
        // correction) fails it badly, since survival at 64 ms is e^(−64 000·p/M) ≈ 0.38.
        assert!(pooled.naive_worst_z(1.0 / 16.0) > 10.0 * Z_ALLOWED, "{mode:?}: the test cannot tell bias");
    }
}

#[test]
fn two_fridges_with_model_weights_are_unbiased_per_bin() {
    // Steady stream, two fridges of 2¹¹ slots with lifetimes 2¹¹/2⁻² = 8 ms and 2¹¹/2⁻⁵ = 65 ms.
    let traces = well_provisioned();
    let cfg =
        FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 11, 0.25), spec(1 << 11, 1.0 / 32.0)]);
    let pooled = pooled_through_synopsis(&cfg, &traces);
    // Model weights are fixed before the samples: Var f̂(b) = Σ_k w_k²·Var f̂_k(b), estimated by
    // Σ_k w_k²·Σc(c − 1); allow 4 standard errors per bin.
    let (z, bins) = pooled.worst_z();
    assert!(bins >= 20 && z <= Z_ALLOWED, "worst bin {z:.2} SE over {bins} bins");
}

#[test]
fn at_the_end_of_traffic_model_weights_stay_unbiased_and_plug_in_ivw_does_not() {
    // Spec §4.5: requests stop and responses keep coming for up to 1 s. Pairs answered in the
    // lull see few insertions, so the short-lifetime fridge reports them with small c and small
    // Σc²; plug-in IVW then trusts it and underestimates the long-delay bins.
    let spec_t = TraceSpec {
        requests: 300_000,
        delays: sim::Delays::LogUniform { min_ns: 1e6, max_ns: 1024e6 },
        ..TraceSpec::paper_synthetic(1024.0, Horizon::Literal)
    };
    let traces = traces(&spec_t, 12);
    let fridges = vec![spec(2048, 0.5), spec(2048, 1.0 / 128.0)];
    let model = FridgeConfig::single_kind(ExchangeKind::Dns, fridges.clone());
    let pooled = pooled_through_synopsis(&model, &traces);
    let (z, bins) = pooled.worst_z();
    assert!(bins >= 30 && z <= Z_ALLOWED, "model weights: worst bin {z:.2} SE over {bins} bins");
    let ivw = FridgeConfig {
        combination: Combination::IvwPlugin { bins_per_octave: 4 },
        ..FridgeConfig::single_kind(ExchangeKind::Dns, fridges)
    };
    let pooled = pooled_through_synopsis(&ivw, &traces);
    // The spec's simulation found ratios f̂/f of 0.05–0.35 in the highest bins; require that
    // the worst bin is below one half (model weights: within 4 SE, i.e. ≈ 1).
    let worst = pooled.ratios().into_iter().fold(f64::INFINITY, f64::min);
    assert!(worst < 0.5, "plug-in IVW did not show the end-of-traffic bias: worst ratio {worst:.2}");
}

#[test]
fn naive_overwrite_follows_its_analytic_bias() {
    // Spec §6.5 oracle: with λ = 10⁶/s and p = 1 the reported delays have density
    // ∝ f(t)·(1 − 1/M)^(λt). For log-uniform delays on (1 ms, 64 ms), M = 2¹², the predicted
    // quantiles (0.5, 0.95, 0.99) are 2.15, 7.95, 12.95 ms.
    let m = 4096.0f64;
    let decay_per_ms = -(-1.0 / m).ln_1p() * 1e3; // (1 − 1/M)^(λ·t) with λ = 1000/ms
    let (u0, u1) = (0.0f64, 64f64.ln());
    let steps = 200_000;
    let h = |u: f64| (-decay_per_ms * u.exp()).exp(); // density in u = ln(t/ms), unnormalised
    let du = (u1 - u0) / steps as f64;
    let mut cum = vec![0.0; steps + 1];
    for i in 0..steps {
        let u = u0 + (i as f64 + 0.5) * du;
        cum[i + 1] = cum[i] + h(u) * du;
    }
    let z = cum[steps];
    let predict = |q: f64| -> (f64, f64) {
        let i = cum.partition_point(|c| *c < q * z).min(steps);
        let u = u0 + i as f64 * du;
        (u.exp(), h(u) / z)
    };
    for (q, spec_ms) in [(0.5, 2.15), (0.95, 7.95), (0.99, 12.95)] {
        assert!((predict(q).0 / spec_ms).log2().abs() < 0.01, "oracle {q}: {} vs {spec_ms}", predict(q).0);
    }
    let spec_t = TraceSpec { requests: 300_000, ..TraceSpec::paper_synthetic(64.0, Horizon::Steady) };
    let mut reported = Vec::new();
    for s in 0..3 {
        reported.extend(run_overwrite(&spec_t.generate(500 + s), 4096, s));
    }
    let est = WeightedSamples::unit(reported.iter().copied()).unwrap();
    let n = reported.len() as f64;
    for q in [0.5, 0.95, 0.99] {
        let (t_ms, dens_u) = predict(q);
        let got_ms = super::super::distribution::Quantiles::quantile(&est, q) / 1e6;
        // Sample-quantile standard error in log2 units: √(q(1−q)/n) / (h(u_q)·ln 2), with h the
        // normalised density of u = ln t; allow 4 of them.
        let se = (q * (1.0 - q) / n).sqrt() / (dens_u * std::f64::consts::LN_2);
        assert!(
            (got_ms / t_ms).log2().abs() <= Z_ALLOWED * se,
            "q {q}: {got_ms:.3} ms vs {t_ms:.3} ms (se {se:.4})"
        );
    }
}

/// E_max of weighted pairs pooled over runs, against the pooled truth.
fn e_max(pairs: Vec<(f64, f64)>, truth: &WeightedSamples) -> f64 {
    WeightedSamples::new(pairs).map_or(f64::INFINITY, |w| quantile_errors(&w, truth).e_max)
}

#[test]
fn orderings_on_the_real_like_trace() {
    // Spec §6.5 R3, shortened: the real-trace-like synthetic (Poisson 535 k/s, 13 % answered,
    // log-normal delays, p99 ≈ 512 ms), 10 seeds pooled, best settings on small grids around the
    // lifetime rule p = M/(λ·512 ms).
    let spec_t = TraceSpec::real_like(1.5);
    let traces = traces(&spec_t, 10);
    let truth = WeightedSamples::unit(traces.iter().flat_map(|t| t.truth_f64())).unwrap();
    let bins = LogBins::new(&HistogramConfig::default());
    let pow2 = |e: i32| 2f64.powi(e);

    let single = |m: u32, p: f64| -> f64 {
        let mut pairs = Vec::new();
        for (i, t) in traces.iter().enumerate() {
            let run = run_fridge(t, &[spec(m, p)], WeightMode::Insertions, i as u64).unwrap();
            pairs.extend(run.weighted_samples(&Combination::ModelWeights, &bins));
        }
        e_max(pairs, &truth)
    };
    let best_single = |m: u32, p_rule: i32| -> f64 {
        (p_rule - 2..=p_rule + 2).map(|e| single(m, pow2(e))).fold(f64::INFINITY, f64::min)
    };
    // M/(λ·0.512 s): 2⁸ → 2⁻¹⁰, 2¹⁰ → 2⁻⁸.
    let single_small = best_single(1 << 8, -10);
    let single_1k = best_single(1 << 10, -8);

    // Two fridges of M/2, combined with the default model weights: the long one near the rule
    // for M/2 slots, the short one 16–256× more likely (spec §4.4).
    let two = |m: u32, pairs: &[(i32, i32)]| -> f64 {
        let mut best = f64::INFINITY;
        for &(e_short, e_long) in pairs {
            let fr = [spec(m / 2, pow2(e_short)), spec(m / 2, pow2(e_long))];
            let mut pairs = Vec::new();
            for (i, t) in traces.iter().enumerate() {
                let run = run_fridge(t, &fr, WeightMode::Insertions, i as u64).unwrap();
                pairs.extend(run.weighted_samples(&Combination::ModelWeights, &bins));
            }
            best = best.min(e_max(pairs, &truth));
        }
        best
    };
    let mut grid_small = Vec::new();
    for e_long in [-12, -11, -10] {
        for ratio in [4, 6, 8] {
            grid_small.push((e_long + ratio, e_long));
        }
    }
    let two_small = two(1 << 8, &grid_small);
    let two_1k = two(1 << 10, &[(-4, -8), (-3, -7), (-2, -6)]);

    // Naive overwrite and lazy expiry (1 and 4 stages, best T_exp over 2⁵…2¹¹ ms) at 4·2¹⁰.
    let pooled = |f: &dyn Fn(&Trace, u64) -> Vec<f64>| -> f64 {
        let d: Vec<f64> = traces.iter().enumerate().flat_map(|(i, t)| f(t, i as u64)).collect();
        WeightedSamples::unit(d).map_or(f64::INFINITY, |w| quantile_errors(&w, &truth).e_max)
    };
    let overwrite_1k = pooled(&|t, s| run_overwrite(t, 1 << 10, s));
    let mut lazy_4k = f64::INFINITY;
    for stages in [1, 4] {
        for e in 5..=11 {
            let t_exp = (1u64 << e) * 1_000_000;
            lazy_4k = lazy_4k.min(pooled(&|t, s| run_lazy(t, 1 << 12, stages, t_exp, s)));
        }
    }

    let best_1k = single_1k.min(two_1k);
    let report = format!(
        "single 2^8 {single_small:.3}, two 2^8 {two_small:.3}, single 2^10 {single_1k:.3}, \
         two 2^10 {two_1k:.3}, overwrite 2^10 {overwrite_1k:.3}, lazy 2^12 {lazy_4k:.3}"
    );
    eprintln!("{report}");
    // Spec §6.5: naive overwrite ≫ everything, at least 10×.
    assert!(overwrite_1k >= 10.0 * best_1k.max(single_1k), "{report}");
    // Spec §6.5: two fridges ≤ 1.2 × single fridge at the smallest M.
    assert!(two_small <= 1.2 * single_small, "{report}");
    // Spec §6.5: best fridge (single or two) at M ≤ 1.2 × best lazy-naive at 4M, for M ≥ 2¹⁰.
    assert!(best_1k <= 1.2 * lazy_4k, "{report}");
}

#[test]
fn report_totals_and_threshold_fractions_match_the_truth() {
    // End to end through `estimate`: the estimated number of pairs and the fraction of pairs
    // above 2²⁵ ns (33.6 ms, a bin edge, so no interpolation enters) against the truth of each
    // of 10 well-provisioned runs. z = (estimate − truth)/sd with sd from the report's 95 %
    // interval (half-width / 1.96; delta method for the fraction, spec §3.5): every |z| ≤ 4,
    // and the mean z over the runs within ±4/√10.
    let threshold = 1u64 << 25;
    let cfg = FridgeConfig {
        report_thresholds_ns: vec![threshold],
        ..FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 12, 1.0 / 16.0)])
    };
    let spec_t = TraceSpec { requests: 200_000, ..TraceSpec::paper_synthetic(64.0, Horizon::Steady) };
    let flow = crate::packet::FlowKey::default();
    let (mut z_pairs, mut z_frac) = (Vec::new(), Vec::new());
    for s in 0..10u64 {
        let trace = spec_t.generate(4000 + s);
        let cfg = FridgeConfig { seed: 4000 + s, ..cfg.clone() };
        let mut syn = FridgeSynopsis::new(&cfg).unwrap();
        let mut carry = FridgeSynopsis::new_carry(&cfg);
        for e in &trace.events {
            let ob = Observation {
                ts_ns: e.ts_ns,
                flow: &flow,
                flow_hash: 0,
                identity: 0,
                exchange: Some(crate::packet::Exchange { kind: ExchangeKind::Dns, role: e.role, id: e.id }),
                encap: crate::packet::Encap::NONE,
            };
            syn.update(&mut carry, &ob);
        }
        let all = estimate(&syn).kinds.remove(0).all;
        let sd = |e: &crate::synopsis::estimate::Estimate| {
            let ci = e.interval.unwrap();
            (ci.high - ci.low) / (2.0 * 1.959_963_984_540_054)
        };
        let pairs = all.estimated_pairs.unwrap();
        z_pairs.push((pairs.value - trace.truth_ns.len() as f64) / sd(&pairs));
        let frac = all.above[0].fraction_above.clone().unwrap();
        let truth_frac =
            trace.truth_ns.iter().filter(|d| **d >= threshold).count() as f64 / trace.truth_ns.len() as f64;
        z_frac.push((frac.value - truth_frac) / sd(&frac));
    }
    for (name, z) in [("pairs", &z_pairs), ("fraction above", &z_frac)] {
        let worst = z.iter().fold(0.0f64, |a, b| a.max(b.abs()));
        let mean = z.iter().sum::<f64>() / z.len() as f64;
        assert!(worst <= Z_ALLOWED, "{name}: worst z {worst:.2} in {z:?}");
        assert!(mean.abs() <= Z_ALLOWED / (z.len() as f64).sqrt(), "{name}: mean z {mean:.2} in {z:?}");
    }
}
