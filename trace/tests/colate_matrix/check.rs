//! One flow's checks: its COLATE mean within the estimator's bounds and intervals.

use super::*;

#[allow(clippy::too_many_arguments)]
pub(super) fn check_flow(
    sc: &Scenario,
    k: u64,
    t: &FlowEpochTruth,
    q: &FlowLatencyReport,
    floor_ns: i64,
    tally: &mut Tally,
    fail: &mut impl FnMut(String),
) {
    tally.checked += 1;
    tally.lossy += usize::from(t.lost > 0);
    if let Ok(p) = &q.mean_ns {
        tally.paper_rel.push((p.value - t.mean_ns).abs() / t.mean_ns.abs());
        tally.paper_negative += usize::from(p.value < floor_ns as f64);
    }
    let e = match &q.mean_counts_ns {
        Ok(e) => e,
        Err(why) => {
            if why.to_string().is_empty() || q.unreliable_reason.is_none() {
                fail(format!("epoch {k} flow {:#x}: no mean and no reason", t.hash));
            }
            let why = why.to_string();
            let short = if why.starts_with("only ") { "fewer than m/2 usable cells" } else { why.as_str() };
            *tally.reasons.entry(short.to_owned()).or_default() += 1;
            tally.one_sided_none.push(t.one_sided as f64);
            return;
        }
    };
    tally.estimated += 1;
    tally.one_sided_mean.push(t.one_sided as f64);
    if e.value < floor_ns as f64 {
        tally.below_floor += 1;
        fail(format!("epoch {k} flow {:#x}: mean {} ns below the floor {floor_ns}", t.hash, e.value));
    }
    if !q.reliable && q.unreliable_reason.is_none() {
        fail(format!("epoch {k} flow {:#x}: unreliable without a reason", t.hash));
    }
    let err = (e.value - t.mean_ns).abs();
    let rel = err / t.mean_ns.abs().max(sc.tick_ns as f64);
    tally.rel.push(rel);
    if t.lost == 0 {
        tally.rel_lossless.push(rel);
    }
    if let Some(i) = e.interval {
        tally.covered += usize::from(i.low <= t.mean_ns && t.mean_ns <= i.high);
    }
    if let Some(se) = q.mean_counts_std_error_ns {
        tally.within_bound += usize::from(err <= BOUND_SE * se);
    }
    if q.reliable {
        tally.reliable += 1;
        tally.reliable_within += usize::from(err <= opts_reliable_half_width() * e.value.abs());
    }
    if let Ok(sd) = &q.std_dev_counts_ns
        && t.std_dev_ns > 0.0
    {
        tally.sd_rel.push((sd.value - t.std_dev_ns).abs() / t.std_dev_ns);
    }
}

pub(super) fn opts_reliable_half_width() -> f64 {
    QueryOptions::default().reliable_half_width
}

/// p̂ ≥ p − 3·√(p(1 − p)/n): the share a check needs so it fails by chance only once in ~700.
pub(super) fn at_least(hits: usize, of: usize, p: f64) -> bool {
    of == 0 || hits as f64 / of as f64 >= p - 3.0 * (p * (1.0 - p) / of as f64).sqrt()
}
