//! COLATE reproduction on a synthetic trace (spec §7.7): the paper's three accuracy levels
//! (α, β) = (0.90, 0.10), (0.95, 0.05), (0.99, 0.01) at RAM budgets M ∈ {1, 10, 100} MiB, 1 sender
//! → 1 receiver through a FIFO/RED queue, recorded in 1 s runtime windows that the control-side
//! accumulator folds into T-closed counter epochs, queried per flow with the aligned selection.
//!
//! Prints, per (M, level): the sizing, the flows it targets, the achieved reliability of the mean
//! (Eq 3; and the count mean of the count extension), of the std-dev (paper estimator, exact
//! γ → ∞ and γ = 1000 pairings; count extension), and the storage in bits per packet.
//!
//! Run: `cargo run --release -p wirelat-dataplane --no-default-features --example colate_repro
//! [-- --flows 40000 --mean-packets 50 --seconds 60 --mib 1,10,100 --propagation-us 0 --seed 2014
//! --threshold T]`

use std::collections::HashMap;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::sizing::{self, Eq21Form, SizingRequest};
use wirelat_dataplane::synopsis::colate::trace::{self, FlowTruth, Trace, TraceConfig};
use wirelat_dataplane::synopsis::colate::{
    Colate, ColateConfig, CounterEpoch, EpochAccumulator, EpochMeta, QueryOptions, Repetitions, Segment,
    select_aligned,
};

const TICK_NS: u64 = 1_000;
const WINDOW_NS: u64 = 1_000_000_000;

struct Args {
    flows: u32,
    mean_packets: f64,
    seconds: u64,
    mib: Vec<u64>,
    seed: u64,
    propagation_us: u64,
    /// Overrides the sized T (ticks) to force several counter epochs in a short trace.
    threshold: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        flows: 40_000,
        mean_packets: 50.0,
        seconds: 60,
        mib: vec![1, 10, 100],
        seed: 2014,
        propagation_us: 0,
        threshold: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {v}: {e}");
        match flag.as_str() {
            "--flows" => a.flows = v.parse().map_err(|e| bad(&e))?,
            "--mean-packets" => a.mean_packets = v.parse().map_err(|e| bad(&e))?,
            "--seconds" => a.seconds = v.parse().map_err(|e| bad(&e))?,
            "--seed" => a.seed = v.parse().map_err(|e| bad(&e))?,
            "--propagation-us" => a.propagation_us = v.parse().map_err(|e| bad(&e))?,
            "--threshold" => a.threshold = Some(v.parse().map_err(|e| bad(&e))?),
            "--mib" => {
                a.mib = v.split(',').map(|x| x.parse().map_err(|e| bad(&e))).collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

/// Records one point's packets (time-ordered) window by window into counter epochs.
fn record(cfg: &ColateConfig, point: u32, pkts: &[(u64, u64, u64)]) -> Vec<CounterEpoch> {
    let mut acc = EpochAccumulator::new(cfg, point, 0).expect("sized config is valid");
    let mut shard = Colate::new(cfg).expect("sized config is valid");
    let mut epochs = Vec::new();
    let mut window = pkts.first().map_or(0, |p| p.2 / WINDOW_NS);
    for &(f, id, ts) in pkts {
        let k = ts / WINDOW_NS;
        while k > window {
            epochs.extend(acc.push_window(window, &shard).expect("windows in order"));
            shard.reset();
            window += 1;
        }
        shard.update_raw(f, id, ts);
    }
    epochs.extend(acc.push_window(window, &shard).expect("windows in order"));
    epochs.extend(acc.flush());
    epochs
}

/// Successes out of trials.
#[derive(Default, Clone, Copy)]
struct Rate {
    ok: u64,
    of: u64,
}

impl Rate {
    fn add(&mut self, ok: bool) {
        self.ok += ok as u64;
        self.of += 1;
    }
    fn pct(&self) -> String {
        if self.of == 0 { "-".into() } else { format!("{:.1}", 100.0 * self.ok as f64 / self.of as f64) }
    }
}

/// Flow classes: every targeted flow, and targeted flows with at least 100 / 1000 packets.
const CLASSES: [u64; 3] = [0, 100, 1000];

#[derive(Default, Clone, Copy)]
struct Tally {
    mean: [Rate; 3],
    mean_ci_covers: [Rate; 3],
    meets_beta: [Rate; 3],
    mean_when_flagged: [Rate; 3],
    count_mean: [Rate; 3],
    sd_paper: [Rate; 3],
    sd_gamma: [Rate; 3],
    sd_counts: [Rate; 3],
    sd_paper_5: [Rate; 3],
    sd_counts_5: [Rate; 3],
    clamped: [Rate; 3],
}

impl Tally {
    fn each(&mut self, packets: u64, f: impl Fn(&mut Tally, usize)) {
        for (c, &min) in CLASSES.iter().enumerate() {
            if packets >= min {
                f(self, c);
            }
        }
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("colate_repro: {e}");
            std::process::exit(2);
        }
    };
    let tcfg = TraceConfig {
        propagation_ns: args.propagation_us * 1_000,
        ..TraceConfig::new(args.seed, args.flows, args.seconds * 1_000_000_000, args.mean_packets)
    };
    let t0 = std::time::Instant::now();
    let tr: Trace = trace::generate(&tcfg);
    let truth: Vec<FlowTruth> = trace::truth(&tr, 0, TICK_NS);
    let delivered = tr.packets.iter().filter(|p| p.ts_r_ns.is_some()).count();
    let lat_max = tr.packets.iter().filter_map(|p| p.ts_r_ns.map(|r| r - p.ts_s_ns)).max().unwrap_or(0);
    let mean_lat = truth.iter().map(|f| f.sum_d).sum::<f64>() / delivered as f64;
    println!(
        "trace: seed {} · {} flows · {} packets ({} delivered, {} RED drops) · {} s · ρ = {} · propagation {} µs · tick {} ns · windows {} s",
        args.seed,
        args.flows,
        tr.packets.len(),
        delivered,
        tr.dropped,
        args.seconds,
        tcfg.utilisation,
        args.propagation_us,
        TICK_NS,
        WINDOW_NS / 1_000_000_000
    );
    let (mut ratio_sum, mut ratio_n) = (0.0, 0.0);
    for f in truth.iter().filter(|f| f.packets >= 100) {
        ratio_sum += f.mean() / f.std_dev().max(1e-9);
        ratio_n += 1.0;
    }
    println!(
        "latency: mean {:.1} ticks, max {} ns, mean μ/σ of flows ≥ 100 packets {:.2}; generated in {:.1?}",
        mean_lat,
        lat_max,
        ratio_sum / ratio_n,
        t0.elapsed()
    );
    let t_max = truth.iter().map(|f| f.t_s as f64).fold(0.0, f64::max);
    let mut ratios: Vec<f64> = truth
        .iter()
        .filter(|f| f.packets > 0)
        .map(|f| (f.t_r as f64 - f.t_s as f64) / (f.t_r as f64 + f.t_s as f64))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratio_med = ratios.get(ratios.len() / 2).copied().unwrap_or(1.0);
    println!(
        "t_max = {t_max:.4e} ticks; measured Eq 12 ratio (t_R − t_S)/(t_R + t_S): median {ratio_med:.3e}"
    );

    // Per-point packet streams in each point's time order (FIFO keeps the order at R too).
    let s_pkts: Vec<(u64, u64, u64)> = tr
        .packets
        .iter()
        .filter(|p| p.ts_r_ns.is_some())
        .map(|p| (tr.flow_hashes[p.flow as usize], p.identity, p.ts_s_ns))
        .collect();
    let mut r_pkts: Vec<(u64, u64, u64)> = tr
        .packets
        .iter()
        .filter_map(|p| p.ts_r_ns.map(|r| (tr.flow_hashes[p.flow as usize], p.identity, r)))
        .collect();
    r_pkts.sort_by_key(|p| p.2);

    let levels = [("low", 0.90, 0.10), ("medium", 0.95, 0.05), ("high", 0.99, 0.01)];
    let mut rows = Vec::new();
    for &mib in &args.mib {
        for &(name, alpha, beta) in &levels {
            let start = std::time::Instant::now();
            // Sizing: the smallest t_min the corrected Eq 22 accepts at B = β (ratio 1, the
            // paper's example); the measured ratio and the printed form are reported.
            let mut req = SizingRequest::new(mib * 8 * 1024 * 1024, alpha, beta, 1.0, t_max / 1e6, t_max);
            let mut sz = None;
            for _ in 0..200 {
                match sizing::solve(&req) {
                    Ok(s) => {
                        sz = Some(s);
                        break;
                    }
                    Err(_) => req.t_min_ticks *= 1.15,
                }
            }
            let Some(sz) = sz else {
                println!("M = {mib} MiB {name}: no feasible t_min ≤ t_max");
                continue;
            };
            let printed = sizing::solve(&SizingRequest { form: Eq21Form::Printed, ..req }).is_ok();
            let measured = sizing::solve(&SizingRequest { eq12_ratio: ratio_med, ..req }).is_ok();
            let t_min = req.t_min_ticks;
            println!(
                "\nM = {mib} MiB, {name} (α = {alpha}, β = {beta}): n = {}, m = {}, b = {}, T = {:.3e} ({:?}); \
                 t_min = {t_min:.3e} ticks; printed Eq 22 feasible: {printed}; with measured ratio: {measured}",
                sz.counters, sz.cells_per_flow, sz.counter_bits, sz.epoch_threshold_ticks as f64, sz.verdict
            );
            let mut cfg = sz.config(TICK_NS, 0, args.seed, true).expect("valid");
            if let Some(t) = args.threshold {
                cfg.epoch_threshold_ticks = t;
                println!("  T forced to {t:.3e} ticks", t = t as f64);
            }
            let cfg_paper = ColateConfig { packet_counts: false, ..cfg.clone() };
            // Storage of the paper variant (no counts) and of the count extension.
            let bits = |c: &ColateConfig| {
                let ep = record(c, 0, &s_pkts);
                let bytes: usize = ep.iter().map(|e| e.encode().len()).sum();
                let pk: u64 = ep.iter().map(|e| e.data.packets()).sum();
                (
                    8.0 * bytes as f64 / pk as f64,
                    ep.len(),
                    c.memory_bits() as f64 * ep.len() as f64 / pk as f64,
                )
            };
            let (bpp_paper, _, bpp_nominal) = bits(&cfg_paper);
            let (bpp_counts, _, _) = bits(&cfg);
            let eps = record(&cfg, 0, &s_pkts);
            let epr = record(&cfg, 1, &r_pkts);
            let ms: Vec<EpochMeta> = eps.iter().map(|e| e.meta()).collect();
            let mr: Vec<EpochMeta> = epr.iter().map(|e| e.meta()).collect();
            let lag = lat_max / TICK_NS + 1;
            let mut segments: HashMap<(Vec<usize>, Vec<usize>), Segment<'_>> = HashMap::new();
            let mut tally = Tally::default();
            let opts = QueryOptions {
                level: alpha,
                repetitions: Repetitions::Exact,
                beta: Some(beta),
                t_min_ticks: Some(t_min),
                ..QueryOptions::default()
            };
            let opts_gamma =
                QueryOptions { repetitions: Repetitions::Random { gamma: 1000, seed: 7 }, ..opts };
            for (fi, ft) in truth.iter().enumerate() {
                if ft.packets < 2 || (ft.t_s as f64) < t_min {
                    continue;
                }
                let (a, b) = (ft.first_s_ns / TICK_NS, ft.last_s_ns / TICK_NS);
                let Some(sel) = select_aligned(&ms, &mr, a, b, lag) else { continue };
                let key = (sel.s.clone(), sel.r.clone());
                let seg = segments.entry(key).or_insert_with(|| {
                    Segment::new(
                        sel.s.iter().map(|&i| &eps[i]).collect(),
                        sel.r.iter().map(|&i| &epr[i]).collect(),
                    )
                    .expect("same config")
                });
                let rep = seg.query(tr.flow_hashes[fi], ft.packets, &opts);
                let gamma = seg.query(tr.flow_hashes[fi], ft.packets, &opts_gamma);
                let (mu, sd) = (ft.mean() * TICK_NS as f64, ft.std_dev() * TICK_NS as f64);
                let within = |v: &Result<_, _>, truth: f64, b: f64| {
                    v.as_ref().is_ok_and(|e: &wirelat_dataplane::synopsis::estimate::Estimate| {
                        (e.value - truth).abs() <= b * truth
                    })
                };
                let covers = rep
                    .mean_ns
                    .as_ref()
                    .is_ok_and(|e| e.interval.is_some_and(|i| i.low <= mu && mu <= i.high));
                let flagged = rep.meets_beta == Some(true);
                tally.each(ft.packets, |t, c| {
                    t.mean[c].add(within(&rep.mean_ns, mu, beta));
                    t.mean_ci_covers[c].add(covers);
                    t.meets_beta[c].add(flagged);
                    if flagged {
                        t.mean_when_flagged[c].add(within(&rep.mean_ns, mu, beta));
                    }
                    t.count_mean[c].add(within(&rep.mean_counts_ns, mu, beta));
                    if sd > 0.0 {
                        t.sd_paper[c].add(within(&rep.std_dev_paper_ns, sd, beta));
                        t.sd_gamma[c].add(within(&gamma.std_dev_paper_ns, sd, beta));
                        t.sd_counts[c].add(within(&rep.std_dev_counts_ns, sd, beta));
                        t.sd_paper_5[c].add(within(&rep.std_dev_paper_ns, sd, 0.05));
                        t.sd_counts_5[c].add(within(&rep.std_dev_counts_ns, sd, 0.05));
                        t.clamped[c].add(rep.paper_variance_clamped);
                    }
                });
            }
            println!(
                "  epochs {} (S) / {} (R), query segments {}; bits/pkt {bpp_paper:.3} (with counts {bpp_counts:.3}; nominal n·b per epoch {bpp_nominal:.3}); {:.1?}",
                eps.len(),
                epr.len(),
                segments.len(),
                start.elapsed()
            );
            for (c, min) in CLASSES.iter().enumerate() {
                let t = &tally;
                println!(
                    "  p_f ≥ {min:>4}: flows {:>6}; mean ≤ β {}% (interval covers {}%; query says meets β for {}%, of which {}% do); \
                     count mean {}%; σ ≤ β: paper γ=∞ {}% / γ=1000 {}% (clamped {}%), counts {}%; σ ≤ 5%: paper {}%, counts {}%",
                    t.mean[c].of,
                    t.mean[c].pct(),
                    t.mean_ci_covers[c].pct(),
                    t.meets_beta[c].pct(),
                    t.mean_when_flagged[c].pct(),
                    t.count_mean[c].pct(),
                    t.sd_paper[c].pct(),
                    t.sd_gamma[c].pct(),
                    t.clamped[c].pct(),
                    t.sd_counts[c].pct(),
                    t.sd_paper_5[c].pct(),
                    t.sd_counts_5[c].pct()
                );
            }
            rows.push((mib, name, alpha, beta, sz, t_min, tally, bpp_paper, bpp_counts));
        }
    }
    println!(
        "\n| M | level (α, β) | n / m / b | t_min (ticks) | flows: all / ≥100 / ≥1000 pkts | mean ≤ β: all / ≥100 / ≥1000 | count mean ≤ β: ≥100 / ≥1000 | σ ≤ β, ≥1000 pkts: paper γ=∞ / γ=1000 / counts | σ ≤ 5 %, ≥1000 pkts: paper / counts | bits/pkt: paper / counts |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (mib, name, alpha, beta, sz, t_min, t, bp, bc) in &rows {
        println!(
            "| {mib} MiB | {name} ({alpha}, {beta}) | {} / {} / {} | {t_min:.2e} | {} / {} / {} | {} / {} / {} % | {} / {} % | {} / {} / {} % | {} / {} % | {bp:.2} / {bc:.2} |",
            sz.counters,
            sz.cells_per_flow,
            sz.counter_bits,
            t.mean[0].of,
            t.mean[1].of,
            t.mean[2].of,
            t.mean[0].pct(),
            t.mean[1].pct(),
            t.mean[2].pct(),
            t.count_mean[1].pct(),
            t.count_mean[2].pct(),
            t.sd_paper[2].pct(),
            t.sd_gamma[2].pct(),
            t.sd_counts[2].pct(),
            t.sd_paper_5[2].pct(),
            t.sd_counts_5[2].pct(),
        );
    }
}
