//! Reproduction of the RDA paper's comparison (Fu, Barlet-Ros, Li, Figs. 7/8; spec rda.md
//! §7.4 recipe, §7.6 reference numbers): a DC-sized synthetic trace (2,041,744 sender packets
//! over 60 s, Weibull shape 0.6 scale 33,230 ns), d/2 lost and d/2 boundary stragglers, and
//! at equal memory (120,000 B) RDA (k = 2, m = 2,500) against LDA (7,500 buckets, one bank,
//! no sampling) and an ideal FineComb (5,000 buckets, oracle removal of stragglers, buckets
//! holding a lost packet discarded). Then decoding alone for k = 1..4 at equal memory, with and
//! without the peeling guards, and the late-binding mode.
//!
//! Run: `cargo run --release -p wirelat-dataplane --no-default-features --example rda_repro`
//! Options: `--packets N` (default 2041744), `--seeds S` (seeds for d ≤ 2,000; half above),
//! `--quick` (200,000 packets, 3 seeds), `--only compare|decode|late` (one section),
//! `--max-d D` (compare only d ≤ D),
//! `--absolute` (timestamps as Unix-epoch ns instead of
//! ns since the window start; the spec's reference simulation used window-relative ones).

use std::time::Instant;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::hash::{derive, reduce};
use wirelat_dataplane::synopsis::rda::sim::{Seen, Trace, TraceSpec, generate};
use wirelat_dataplane::synopsis::rda::{
    Binding, LocalCache, PeelGuards, Rda, RdaConfig, Side, late, reconcile,
};

/// A one-bank LDA-style aggregator (⟨Σ timestamps, count⟩ per bucket), the private baseline
/// of this reproduction: LDA uses it on all packets, the ideal FineComb on the receiver's
/// packets minus the stragglers (the oracle), so that only buckets with a lost packet differ.
struct SingleBank {
    ts: Vec<u64>,
    cnt: Vec<u64>,
    seed: u64,
}

impl SingleBank {
    fn new(buckets: usize, seed: u64) -> Self {
        Self { ts: vec![0; buckets], cnt: vec![0; buckets], seed }
    }
    fn insert(&mut self, id: u64, ts: u64) {
        let i = reduce(derive(id, self.seed), self.ts.len() as u64) as usize;
        self.ts[i] = self.ts[i].wrapping_add(ts);
        self.cnt[i] += 1;
    }
    /// (mean, std-dev) from sender `a` and receiver `b`: useful buckets have equal counts;
    /// σ from adjacent pairs (2j, 2j+1) with equal collapsed counts, σ² = F − μ² clamped.
    fn estimate(a: &Self, b: &Self) -> (Option<f64>, Option<f64>) {
        let (mut num, mut den) = (0i128, 0i128);
        for i in 0..a.ts.len() {
            if a.cnt[i] == b.cnt[i] && a.cnt[i] > 0 {
                num += b.ts[i].wrapping_sub(a.ts[i]) as i64 as i128;
                den += a.cnt[i] as i128;
            }
        }
        if den == 0 {
            return (None, None);
        }
        let mean = num as f64 / den as f64;
        let (mut sq, mut c) = (0f64, 0u64);
        for j in 0..a.ts.len() / 2 {
            let (p, q) = (2 * j, 2 * j + 1);
            let (ca, cb) = (a.cnt[p] + a.cnt[q], b.cnt[p] + b.cnt[q]);
            if ca == cb && ca > 0 {
                let ad = a.ts[p].wrapping_sub(a.ts[q]);
                let bd = b.ts[p].wrapping_sub(b.ts[q]);
                let diff = bd.wrapping_sub(ad) as i64 as f64;
                sq += diff * diff;
                c += ca;
            }
        }
        let sd = (c > 0).then(|| (sq / c as f64 - mean * mean).max(0.0).sqrt());
        (Some(mean), sd)
    }
}

fn rel(est: Option<f64>, truth: f64) -> Option<f64> {
    est.map(|e| (e - truth).abs() / truth.abs())
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn fmt(x: Option<f64>) -> String {
    match x {
        None => "n/a".into(),
        Some(0.0) => "0".into(),
        Some(v) if (0.01..1000.0).contains(&v) => format!("{v:.3}"),
        Some(v) => format!("{v:.1e}"),
    }
}

#[derive(Default)]
struct Row {
    full: usize,
    runs: usize,
    frac: Vec<f64>,
    rda_mean: Vec<f64>,
    rda_sd: Vec<f64>,
    fc_mean: Vec<f64>,
    fc_sd: Vec<f64>,
    lda_mean: Vec<f64>,
    lda_sd: Vec<f64>,
}

fn feed(r: &mut Rda, pkts: &[Seen]) {
    r.reset();
    for p in pkts {
        r.update_raw(p.id, 0, p.ts_ns);
    }
}

/// One run of the end-to-end comparison.
fn compare(t: &Trace, d: usize, seed: u64, a: &mut Rda, b: &mut Rda, row: &mut Row) {
    let (mu, sd) = (t.truth.mean_ns(), t.truth.std_dev_ns());
    feed(a, &t.sender);
    feed(b, &t.receiver);
    let r = wirelat_dataplane::synopsis::rda::estimate(
        a,
        b,
        LocalCache { side: Side::Sender, cache: a.cache() },
        b.cache(),
        &PeelGuards::default(),
    );
    row.runs += 1;
    row.full += r.reconciliation.complete as usize;
    row.frac.push(if d == 0 { 1.0 } else { r.reconciliation.decoded as f64 / d as f64 });
    row.rda_mean.extend(rel(r.mean_ns.as_ref().ok().map(|e| e.value), mu));
    row.rda_sd.extend(rel(r.std_dev_ns.as_ref().ok().map(|e| e.value), sd));
    if r.reconciliation.complete {
        // The claim under test: complete ⇒ bit-exact mean.
        assert_eq!(r.mean_ns.as_ref().map(|e| e.value).ok(), Some(mu), "d = {d}, seed {seed}");
    }

    let bank_seed = derive(seed, 0x1da);
    let (mut la, mut lb) = (SingleBank::new(7_500, bank_seed), SingleBank::new(7_500, bank_seed));
    let (mut fa, mut fb) = (SingleBank::new(5_000, bank_seed), SingleBank::new(5_000, bank_seed));
    for p in &t.sender {
        la.insert(p.id, p.ts_ns);
        fa.insert(p.id, p.ts_ns);
    }
    let reordered: std::collections::HashSet<u64> = t.reordered.iter().copied().collect();
    for p in &t.receiver {
        lb.insert(p.id, p.ts_ns);
        if !reordered.contains(&p.id) {
            fb.insert(p.id, p.ts_ns);
        }
    }
    let (lm, ls) = SingleBank::estimate(&la, &lb);
    let (fm, fs) = SingleBank::estimate(&fa, &fb);
    row.lda_mean.extend(rel(lm, mu));
    row.lda_sd.extend(rel(ls, sd));
    row.fc_mean.extend(rel(fm, mu));
    row.fc_sd.extend(rel(fs, sd));
}

/// Decoding only: equal total memory (5,000 buckets), k banks; returns (mean decoded
/// fraction, full successes, rejected + repeated candidates, cap hits).
fn decode_only(d: usize, k: u32, seeds: u64, guards: &PeelGuards) -> (f64, usize, u64, usize) {
    let m = 5_000 / k;
    let cfg = RdaConfig::online(k, m, 4 * d as u64 + 4_096);
    let (mut frac, mut full, mut rej, mut caps) = (0.0, 0, 0, 0);
    for seed in 0..seeds {
        // Shared packets cancel in the subtraction: 1,000 of them stand for the rest.
        let t = generate(&TraceSpec::paper(1_000 + d / 2, d, 90_000 + seed)).expect("valid trace");
        let (mut a, mut b) = (Rda::new(&cfg).expect("cfg"), Rda::new(&cfg).expect("cfg"));
        feed(&mut a, &t.sender);
        feed(&mut b, &t.receiver);
        let r = reconcile(
            a.banks().expect("online"),
            b.banks().expect("online"),
            LocalCache { side: Side::Sender, cache: a.cache() },
            b.cache(),
            guards,
        );
        let rec = &r.reconciliation;
        frac += rec.decoded.min(d as u64) as f64 / d as f64;
        full += rec.complete as usize;
        rej += rec.rejected_candidates + rec.repeated_candidates;
        caps += rec.iteration_cap_hit as usize;
    }
    (frac / seeds as f64, full, rej, caps)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| -> Option<u64> {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
    };
    let quick = args.iter().any(|a| a == "--quick");
    let packets = arg("--packets").unwrap_or(if quick { 200_000 } else { 2_041_744 }) as usize;
    let seeds: u64 = arg("--seeds").unwrap_or(if quick { 3 } else { 10 });
    let start_ns = if args.iter().any(|a| a == "--absolute") { 1_700_000_000_000_000_000 } else { 0 };
    let started = Instant::now();
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let run = |section: &str| only.as_deref().is_none_or(|o| o == section);

    if run("compare") {
        let max_d = arg("--max-d").unwrap_or(u64::MAX) as usize;
        compare_section(packets, seeds, start_ns, max_d);
    }
    if run("decode") {
        decode_section();
    }
    if run("late") {
        late_section(packets, start_ns);
    }
    eprintln!("total {:.1} s", started.elapsed().as_secs_f64());
}

fn spec_at(start_ns: u64, packets: usize, d: usize, seed: u64) -> TraceSpec {
    TraceSpec { start_ns, ..TraceSpec::paper(packets, d, seed) }
}

fn compare_section(packets: usize, seeds: u64, start_ns: u64, max_d: usize) {
    let spec = |packets: usize, d: usize, seed: u64| spec_at(start_ns, packets, d, seed);
    println!(
        "## RDA vs LDA vs FineComb-ideal at 120,000 B ({packets} sender packets, Weibull 0.6, scale 33,230 ns)"
    );
    println!();
    println!(
        "Timestamps start at {start_ns} ns (0: window-relative, as in the spec's reference simulation)."
    );
    println!();
    println!(
        "Relative errors (0 = bit-exact). RDA k = 2, m = 2,500; LDA 7,500 buckets; FC-ideal 5,000 buckets."
    );
    println!("Seeds: {seeds} for d ≤ 2,000, {} above.", (seeds / 2).max(1));
    println!();
    println!(
        "| d | RDA full decodes | RDA decoded fraction (mean) | RDA mean err, median / mean | RDA σ err (median) | FC-ideal mean err (median) | FC-ideal σ err (median) | LDA mean err (median) | LDA σ err (median) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let cfg = RdaConfig::online(2, 2_500, packets as u64 + 20_000);
    let mut a = Rda::new(&cfg).expect("valid config");
    let mut b = Rda::new(&cfg).expect("valid config");
    // σ errors for d ≤ 2,500: (per-d medians, all runs) for RDA and FC-ideal.
    let (mut rda_sd, mut fc_sd) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for d in [0usize, 500, 1000, 1500, 2000, 2500, 3000, 4000, 6000, 8000, 10000]
        .into_iter()
        .filter(|&d| d <= max_d)
    {
        let n_seeds = if d <= 2000 { seeds } else { (seeds / 2).max(1) };
        let mut row = Row::default();
        for s in 0..n_seeds {
            let seed = 1_000 * d as u64 + s;
            let t = generate(&spec(packets, d, seed)).expect("valid trace");
            compare(&t, d, seed, &mut a, &mut b, &mut row);
        }
        if d <= 2500 {
            rda_sd.0.extend(median(&row.rda_sd));
            rda_sd.1.extend_from_slice(&row.rda_sd);
            fc_sd.0.extend(median(&row.fc_sd));
            fc_sd.1.extend_from_slice(&row.fc_sd);
        }
        println!(
            "| {d} | {}/{} | {:.4} | {} / {} | {} | {} | {} | {} | {} |",
            row.full,
            row.runs,
            mean(&row.frac).unwrap_or(0.0),
            fmt(median(&row.rda_mean)),
            fmt(mean(&row.rda_mean)),
            fmt(median(&row.rda_sd)),
            fmt(median(&row.fc_mean)),
            fmt(median(&row.fc_sd)),
            fmt(median(&row.lda_mean)),
            fmt(median(&row.lda_sd)),
        );
    }
    println!();
    let geo = |v: &[f64]| {
        (!v.is_empty()).then(|| (v.iter().map(|x| x.max(1e-300).ln()).sum::<f64>() / v.len() as f64).exp())
    };
    println!(
        "σ error pooled over d ≤ 2,500: geometric mean of per-d medians RDA {} vs FC-ideal {}; median of all runs RDA {} vs FC-ideal {}.",
        fmt(geo(&rda_sd.0)),
        fmt(geo(&fc_sd.0)),
        fmt(median(&rda_sd.1)),
        fmt(median(&fc_sd.1)),
    );
    println!();
}
fn decode_section() {
    println!("## Decoding only at 5,000 buckets in total, 20 seeds, lost = reordered = d/2");
    println!();
    println!("Decoded fraction (mean over seeds), full successes, candidates refused by the guards.");
    println!("Last column: k = 2 with every guard off but the iteration cap (Algorithm 1 as printed).");
    println!();
    println!("| d | k = 1 | k = 2 | k = 3 | k = 4 | k = 2 unguarded (cap hits) |");
    println!("|---|---|---|---|---|---|");
    for d in [500usize, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 5000] {
        let mut line = format!("| {d} |");
        for k in 1..=4u32 {
            let (f, full, rej, _) = decode_only(d, k, 20, &PeelGuards::default());
            line += &format!(" {f:.4} ({full}/20; {rej}) |");
        }
        let (f, full, _, caps) = decode_only(d, 2, 20, &PeelGuards::unguarded());
        line += &format!(" {f:.4} ({full}/20; {caps} cap hits) |");
        println!("{line}");
    }
    println!();
}

fn late_section(packets: usize, start_ns: u64) {
    let spec = |packets: usize, d: usize, seed: u64| spec_at(start_ns, packets, d, seed);
    println!("## Late binding (k = 2, m = max(1,024, ⌈3·d̂⌉), retries with 2m, 6 attempts), one seed per d");
    println!();
    println!(
        "| K (signature) | d | d̂ (MinHash) | m per attempt | complete | mean err | bytes of banks shipped |"
    );
    println!("|---|---|---|---|---|---|---|");
    for signature_len in [256u32, 4096 /* the default */] {
        let binding = match Binding::late() {
            Binding::LateBinding {
                min_buckets_per_bank, max_buckets_per_bank, slack, max_attempts, ..
            } => Binding::LateBinding {
                min_buckets_per_bank,
                max_buckets_per_bank,
                slack,
                max_attempts,
                signature_len,
            },
            online => online,
        };
        let lcfg = RdaConfig { binding, ..RdaConfig::late_binding(2, packets as u64 + 60_000) };
        let mut la = Rda::new(&lcfg).expect("valid config");
        let mut lb = Rda::new(&lcfg).expect("valid config");
        for d in [0usize, 500, 2000, 10000, 50000] {
            let t = generate(&spec(packets, d, 77_000 + d as u64)).expect("valid trace");
            feed(&mut la, &t.sender);
            feed(&mut lb, &t.receiver);
            let out = late::run_local(&la, &lb, Side::Sender, &PeelGuards::default());
            let ms: Vec<String> = out.attempts.iter().map(|x| x.buckets_per_bank.to_string()).collect();
            let bytes: u64 = out.attempts.iter().map(|x| x.bank_bytes).sum();
            println!(
                "| {signature_len} | {d} | {:.0} | {} | {} | {} | {bytes} |",
                out.sizing.estimate.difference,
                ms.join(" → "),
                out.report.reconciliation.complete,
                fmt(rel(out.report.mean_ns.as_ref().ok().map(|e| e.value), t.truth.mean_ns())),
            );
        }
    }
    println!();
}
