//! The COLATE per-flow scenario matrix (issue 19, W12): trace pairs made by the generator on
//! delay, loss and load settings nobody tuned COLATE for, pushed through COLATE exactly as the
//! two points would (each point puts a packet in the epoch of its own timestamp), and every
//! flow with at least [`MIN_PACKETS`] packets in an epoch queried with its sent count (what the
//! LDS census supplies) and checked against the truth of that flow and epoch (`same_epoch`: the
//! flow's packets both points put in the epoch, which is what the cells can hold):
//!
//! - every such flow gets a count mean or a stated reason, and ≥ 95 % get a mean;
//! - every query uses the default latency floor, derived from the data (`Segment::new`), never
//!   the scenario's clock offset; the floor used is at or below the smallest latency of its
//!   group, and no mean is below min(0, offset), the floor of what the clocks can show;
//! - the per-flow error bound from the estimator's own standard error (sampling of cells,
//!   foreign noise, tick rounding; `Segment::counts_view`), 10·se, holds for at least 99 % of
//!   the flows, i.e. for the p99 flow (Chebyshev: at most 1/10² of any distribution lies beyond
//!   10 standard deviations, so this holds whatever the noise's shape if se is right);
//! - the 95 % intervals cover the truth for at least 95 % of the flows (less three binomial
//!   standard deviations);
//! - flows flagged `reliable` (95 % half-width ≤ 25 % of the estimate) are within 25 % for at
//!   least 95 % of them (less three binomial standard deviations).
//!
//! The old estimator (counts agreeing = same packets, an interval from foreign noise only, no
//! floor) fails the floor, p99 and coverage checks; the old default floor of 0 fails the
//! coverage and floor checks of the negative clock offsets. Queues at ρ ≥ 0.6 keep their
//! coverage with m = 64 or longer groups, and at ρ ≈ 0.8 with m derived from the load an
//! operator measures (`[synopses.colate] max_delay_us`, `max_flow_pps`: the `sized` scenarios;
//! `WIRELAT_COLATE_MATRIX_UNSIZED=1` keeps m = 20 there and fails); the table also says, for the
//! flows without a mean, how many of their own packets reached one point only. Sizes are kept small for CI (a few seconds);
//! `WIRELAT_COLATE_MATRIX_SCALE` multiplies the packet rate (and so the flows) for the larger
//! table in BENCHMARKS.md, through the same code. `WIRELAT_COLATE_MATRIX_SEED` shifts every
//! scenario's seed (default 0): the same checks on other traces (the queue scenarios' ρ check
//! may then fail by design: the closed-loop traffic sets the utilisation).
//!
//! `WIRELAT_SIZE_FACTOR` (issue 24, W17; default 1) multiplies every scenario's counters
//! (rounded up to a prime), the sized scenarios' sizing input included. The error bound, the
//! intervals and the reliable flag come from the estimator's own standard error, which
//! accounts for the crowding of a smaller vector, so they are checked at any size; ≥ 95 % of
//! flows with a mean is the default sizing's promise, so at another factor a miss is marked
//! with its measured value instead of failing. Digests are compared at factor 1 only;
//! `scripts/size-curve.sh` collects the headline.

mod check;
#[path = "../common/mod.rs"]
mod common;
#[path = "../golden/mod.rs"]
mod golden;
mod run;
mod scenarios;

use check::*;
use run::*;
use scenarios::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::config::next_prime;
use wirelat_dataplane::synopsis::colate::coverage::ColateConfigKeys;
use wirelat_dataplane::synopsis::colate::query::FlowLatencyReport;
use wirelat_dataplane::synopsis::colate::{Colate, ColateConfig, CounterEpoch, QueryOptions, Segment};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::parse::{invariant_digest, parse};
use wirelat_trace::segment::{DelaySpec, PathClass, QueueModel, SegmentConfig};
use wirelat_trace::traffic::TrafficConfig;
use wirelat_trace::{Direction, Point, Tap};

/// Flows with fewer packets sent in an epoch are not checked (the threshold).
const MIN_PACKETS: u64 = 10;
/// The per-flow error bound in standard errors: by Chebyshev's inequality at most 1/k² = 1 % of
/// the flows exceed k·se whatever the noise's shape, if the standard error is right, so the
/// p99 flow must meet it.
const BOUND_SE: f64 = 10.0;
/// Level of the intervals checked for coverage.
const COVER_LEVEL: f64 = 0.95;

#[test]
fn every_flow_of_every_scenario_is_within_the_estimators_bounds() {
    let mut failures = Vec::new();
    let factor = common::size_factor();
    let seed_shift = common::seed_shift("WIRELAT_COLATE_MATRIX_SEED");
    let mut checks = common::Checks::new(factor);
    let mut golden = golden::Golden::default();
    // Headline over every scenario: the worst scenario's share with a mean, within 10·se and
    // covered, the worst p99 error, and the largest vector's bytes (u64 cell and packet count).
    let (mut worst_mean, mut worst_within, mut worst_cover) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let (mut worst_p99, mut bytes, mut flow_epochs) = (0.0f64, 0u64, 0usize);
    let mut all_rel = Vec::new();
    println!(
        "| scenario | flows in trace / checked / flow-epochs (lossy) | with mean | reliable (within 25 %) | rel. error median / p99 / max (lossless p99) | within 10·se | 95 % coverage | σ̂ rel. error median / p99 | paper Eq 3: negative, p99 rel. error | derived floor: median (smallest latency, median) | no mean: why | own one-sided packets, median: no mean / mean | m (sized from: p99 delay, p99 flow rate → X, P) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // `WIRELAT_COLATE_MATRIX_ONLY=substring` runs the scenarios whose name contains it.
    let only = std::env::var("WIRELAT_COLATE_MATRIX_ONLY").unwrap_or_default();
    for (i, sc) in scenarios().iter().enumerate() {
        if !sc.name.contains(only.as_str()) {
            continue;
        }
        let mut t = run(sc, 1900 + seed_shift + i as u64, &mut failures);
        for line in t.golden.drain(..) {
            golden.push("colate_flow", format!("{} {line}", sc.name));
        }
        bytes = bytes.max(u64::from(counters(sc)) * 16);
        let n = t.checked;
        if t.checked > 0 {
            flow_epochs += n;
            worst_mean = worst_mean.min(t.estimated as f64 / n as f64);
            worst_within = worst_within.min(t.within_bound as f64 / t.estimated.max(1) as f64);
            worst_cover = worst_cover.min(t.covered as f64 / t.estimated.max(1) as f64);
            all_rel.extend(&t.rel);
        }
        if !at_least(t.estimated, n, 0.95) || t.estimated * 100 < n * 95 {
            checks.guarantee(format!(
                "{}: {} of {n} flow-epochs have a mean (< 95 %) with {} counters",
                sc.name,
                t.estimated,
                counters(sc)
            ));
        }
        let mut fail = |what: String| failures.push(format!("{}: {what}", sc.name));
        if t.flows < 50 {
            fail(format!(
                "only {} flows with ≥ {MIN_PACKETS} packets in an epoch: the scenario checks little",
                t.flows
            ));
        }
        // The p99 flow meets the bound: at most 1 % of the flows may miss it.
        if t.within_bound * 100 < t.estimated * 99 {
            fail(format!("{} of {} flows within {BOUND_SE}·se (< 99 %)", t.within_bound, t.estimated));
        }
        if !at_least(t.covered, t.estimated, COVER_LEVEL) {
            fail(format!("95 % intervals cover {} of {}", t.covered, t.estimated));
        }
        if !at_least(t.reliable_within, t.reliable, 0.95) {
            fail(format!("{} of {} reliable flows within 25 %", t.reliable_within, t.reliable));
        }
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        let lossless_p99 = quantile(&mut t.rel_lossless, 0.99);
        let (p99, max) = (quantile(&mut t.rel, 0.99), quantile(&mut t.rel, 1.0));
        if p99.is_finite() {
            worst_p99 = worst_p99.max(p99);
        }
        println!(
            "| {}{} | {} / {} / {n} ({}) | {:.1} % | {:.1} % ({:.1} %) | {:.2} % / {:.1} % / {:.1} % ({:.1} %) | {:.2} % | {:.1} % | {:.1} % / {:.0} % | {}, {:.0} % | {:.0} ns ({:.0} ns); {} of {} groups derived | {} | {} / {} | {}{} |",
            sc.name,
            t.rho.map(|r| format!(" (measured ρ {r:.2})")).unwrap_or_default(),
            t.trace_flows,
            t.flows,
            t.lossy,
            pct(t.estimated, n),
            pct(t.reliable, t.estimated),
            pct(t.reliable_within, t.reliable),
            100.0 * quantile(&mut t.rel, 0.5),
            100.0 * p99,
            100.0 * max,
            100.0 * lossless_p99,
            pct(t.within_bound, t.estimated),
            pct(t.covered, t.estimated),
            100.0 * quantile(&mut t.sd_rel, 0.5),
            100.0 * quantile(&mut t.sd_rel, 0.99),
            t.paper_negative,
            100.0 * quantile(&mut t.paper_rel, 0.99),
            quantile(&mut t.floors, 0.5),
            quantile(&mut t.smallest, 0.5),
            t.floor_derived,
            t.floors.len(),
            t.reasons.iter().map(|(r, c)| format!("{c} {r}")).collect::<Vec<_>>().join("; "),
            quantile(&mut t.one_sided_none, 0.5),
            quantile(&mut t.one_sided_mean, 0.5),
            t.cells,
            t.sizing
                .map(|(d, r, x, p)| format!(" ({:.1} ms, {r:.0}/s → X = {x}, P = {p:.3})", d / 1e6))
                .unwrap_or_default(),
        );
    }
    common::headline(
        "colate",
        "colate",
        factor,
        bytes,
        &[
            ("flow_epochs", flow_epochs.to_string()),
            ("with_mean_worst", format!("{worst_mean:.4}")),
            ("rel_err_p50", format!("{:.3e}", quantile(&mut all_rel, 0.5))),
            ("rel_err_p99_worst", format!("{worst_p99:.3e}")),
            ("within_10se_worst", format!("{worst_within:.4}")),
            ("ci95_coverage_worst", format!("{worst_cover:.4}")),
        ],
    );
    for f in failures {
        checks.fail(f);
    }
    checks.finish();
    // The estimates themselves, byte for byte, when no WIRELAT_COLATE_MATRIX_* knob changed the
    // matrix and the sizes are the default.
    if factor == 1.0 && std::env::vars().all(|(k, _)| !k.starts_with("WIRELAT_COLATE_MATRIX")) {
        golden.check(
            "colate_matrix",
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/colate_matrix.digest")),
        );
    }
}
