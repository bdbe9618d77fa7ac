//! One epoch's checks: each estimator against the truth, within its own bounds.

use super::*;

#[allow(clippy::too_many_arguments)]
pub(super) fn check_epoch(
    e: &EpochTruth,
    direct: &Direct,
    repeats: bool,
    a: &PointSynopses,
    b: &PointSynopses,
    le: &mut Errors,
    re: &mut Errors,
    fail: &mut impl FnMut(bool, String),
    golden: &mut impl FnMut(&str, String),
) {
    let (Some(la), Some(lb)) = (a.lda.get(&e.epoch), b.lda.get(&e.epoch)) else { return };
    // Without repeats the generator's truth; with them, what the usable cells can hold.
    let truth = if repeats { &direct.equal } else { &e.same_epoch };
    let k = e.epoch;
    // ---- LDA ----
    let r = lda::estimate_with_confidence(la, lb, LEVEL).unwrap();
    golden("lda", format!("{k} {r:?}"));
    let sent_minus_received = i128::from(r.sent_packets) - i128::from(r.received_packets);
    match r.lost_packets {
        Some(l) if i128::from(l) != sent_minus_received => {
            fail(false, format!("epoch {k}: LDA lost {l} ≠ counters"))
        }
        None if sent_minus_received >= 0 => fail(false, format!("epoch {k}: LDA loss missing")),
        _ => {}
    }
    // The counters see the epoch's loss moved by its boundary crossings, and nothing else
    // (besides the injected copies, which they count as packets).
    let slack = i128::from(e.crossing_out + e.crossing_in);
    let copies = |p: usize, total: u64| i128::from(direct.packets[p]) - i128::from(total);
    let lost = i128::from(e.lost) + copies(0, e.sent) - copies(1, e.received);
    if let Some(l) = r.lost_packets
        && (i128::from(l) - lost).abs() > slack
    {
        fail(false, format!("epoch {k}: LDA lost {l}, truth {lost} ± {slack}"));
    }
    le.epochs += u64::from(truth.count >= 2);
    le.estimated += u64::from(truth.count >= 2 && r.mean_delay.is_ok());
    if truth.count >= 2
        && let Ok(d) = &r.mean_delay
    {
        le.mean.push(rel(d.value, truth.mean_ns));
        let ok = d.interval.is_some_and(|i| i.low <= truth.mean_ns && truth.mean_ns <= i.high);
        // A constant delay has σ = 0: the mean is then exact.
        let exact = truth.std_dev_ns == 0.0 && (d.value - truth.mean_ns).abs() < 1e-6;
        if !(ok || exact) {
            // The interval rests on σ̂ from the usable cells; below MIN_INTERVAL_GROUPS cells σ̂
            // itself has no interval, so a miss there is the table's size (too few clean cells
            // for the epoch's losses and crossings), a guarantee only the default sizes keep.
            let few = r.samples < MIN_INTERVAL_GROUPS;
            fail(few, format!("epoch {k}: LDA mean {d:?} vs {} (S = {})", truth.mean_ns, r.samples));
        }
        if let Ok(sd) = &r.std_dev {
            le.sd.push(rel(sd.value, truth.std_dev_ns));
            // Fewer than 30 usable cells: σ̂ has no interval (moment::MIN_INTERVAL_GROUPS).
            let covered = sd.interval.is_none_or(|i| i.low <= truth.std_dev_ns && truth.std_dev_ns <= i.high);
            if !(covered || truth.std_dev_ns == 0.0 && sd.value < 1.0) {
                fail(false, format!("epoch {k}: LDA σ̂ {sd:?} vs {}", truth.std_dev_ns));
            }
        }
        if let Ok(p) = &r.paper_std_dev {
            le.sd_paper.push(rel(p.value, truth.std_dev_ns));
        }
    }
    // ---- RDA ----
    let (Some(ra), Some(rb)) = (a.rda.get(&k), b.rda.get(&k)) else { return };
    re.epochs += 1;
    let rr = rda::estimate(
        ra,
        rb,
        LocalCache { side: Side::Sender, cache: ra.cache() },
        rb.cache(),
        &PeelGuards::default(),
    );
    golden("rda", format!("{k} {rr:?}"));
    // RDA's population: the ids each point saw exactly once in the epoch.
    let truth = &direct.once;
    // Sender-only ids of this epoch: lost, or received in another epoch.
    let sender_only = direct.sender_only;
    let (lo, hi) = rr.lost_bounds;
    if !(lo <= sender_only && sender_only <= hi) {
        fail(false, format!("epoch {k}: RDA lost bounds [{lo}, {hi}] miss {sender_only}"));
    }
    // Every excluded id and copy counted at its point.
    let dups = rr.duplicates;
    let counted = [(dups.sender_ids, dups.sender_packets), (dups.receiver_ids, dups.receiver_packets)];
    for (p, (ids, packets)) in counted.into_iter().enumerate() {
        if (ids, packets) != (direct.dup_ids[p], direct.dup_packets[p]) {
            fail(
                false,
                format!(
                    "epoch {k}: point {p} counted {ids} repeated ids / {packets} packets, truth {} / {}",
                    direct.dup_ids[p], direct.dup_packets[p]
                ),
            );
        }
    }
    if !rr.reconciliation.complete {
        // The default banks always decode the matrix's epochs; smaller ones may not.
        fail(
            true,
            format!("epoch {k}: RDA decode incomplete ({:?})", rr.reconciliation.undecoded_lower_bound),
        );
        return;
    }
    re.estimated += 1;
    let rec = &rr.reconciliation;
    if rec.lost.len() as u64 != sender_only || rec.excluded_duplicates.len() as u64 != direct.one_sided {
        fail(
            false,
            format!(
                "epoch {k}: RDA lost {} / one-sided repeats {}, truth {sender_only} / {}",
                rec.lost.len(),
                rec.excluded_duplicates.len(),
                direct.one_sided
            ),
        );
    }
    if truth.count == 0 {
        return;
    }
    match &rr.mean_ns {
        Ok(m) => {
            let exact = direct.once_sum as f64 / truth.count as f64;
            let err = rel(m.value, exact);
            re.mean.push(err);
            // Exact integer sums: only the final divisions can differ, in the last bits.
            if err > 1e-12 {
                fail(false, format!("epoch {k}: RDA mean {} vs {exact}", m.value));
            }
        }
        Err(x) => fail(false, format!("epoch {k}: RDA mean missing: {x:?}")),
    }
    if truth.count >= 2
        && let Ok(sd) = &rr.bucket_moment_std_dev_ns
    {
        re.sd.push(rel(sd.value, truth.std_dev_ns));
        // Recomputed at the test's level from the report's own numbers would need the buckets;
        // the reported 98 % interval is widened to 1 − 10⁻⁴ by the ratio of multipliers.
        let widen = (2.0 * (2.0 / (1.0 - LEVEL)).ln()).sqrt() / (2.0 * (2.0f64 / 0.02).ln()).sqrt();
        let covered = sd.interval.is_none_or(|i| {
            let (v2, lo2, hi2) = (sd.value * sd.value, i.low * i.low, i.high * i.high);
            let (lo, hi) = ((v2 - widen * (v2 - lo2)).max(0.0).sqrt(), (v2 + widen * (hi2 - v2)).sqrt());
            lo <= truth.std_dev_ns && truth.std_dev_ns <= hi
        });
        if !(covered || truth.std_dev_ns == 0.0 && sd.value < 1.0) {
            fail(false, format!("epoch {k}: RDA σ̂ {sd:?} vs {}", truth.std_dev_ns));
        }
        if let Ok(p) = &rr.collapsed_std_dev_ns {
            re.sd_paper.push(rel(p.value, truth.std_dev_ns));
        }
    }
}
