//! Reproduces the LDS paper's evaluation (IMC 2011 §5) on the synthetic trace S1 of spec §11:
//! accuracy by flow-size bin for 1750×4, 17500×4 and 175000×4 cells (§11.3, paper Fig. 10),
//! the loss experiment with multi-bank and single-bank sketches (§11.4, paper Fig. 11) and the
//! weighting experiment (§11.5, paper Fig. 12). Prints markdown tables with the paper's and
//! the spec's [SIM] reference numbers next to ours.
//!
//! ```text
//! cargo run --release -p wirelat-dataplane --no-default-features --example lds_repro -- \
//!     [--seed N] [--flows N] [--parts sizes,loss,weights]
//! ```

use wirelat_dataplane::sim::LossModel;
use wirelat_dataplane::synopsis::lds::eval::{
    FlowOutcome, SIZE_BINS, bin_label, by_size_bin, global_mean_outcomes, outcomes, replay, replay_weighted,
    stats,
};
use wirelat_dataplane::synopsis::lds::trace::{Trace, TraceConfig};
use wirelat_dataplane::synopsis::lds::{Estimator, EstimatorConfig, LdsConfig, SelectionRule};

struct Args {
    seed: u64,
    flows: u32,
    parts: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a =
        Args { seed: 1, flows: 146_000, parts: vec!["sizes".into(), "loss".into(), "weights".into()] };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--flows" => a.flows = value()?.parse().map_err(|e| format!("--flows: {e}"))?,
            "--parts" => a.parts = value()?.split(',').map(str::to_owned).collect(),
            "-h" | "--help" => {
                return Err("usage: lds_repro [--seed N] [--flows N] [--parts sizes,loss,weights]".into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let cfg = TraceConfig { flows: args.flows, ..TraceConfig::s1(args.seed) };
    let Some(trace) = Trace::generate(&cfg) else {
        eprintln!("invalid trace parameters");
        std::process::exit(2);
    };
    // Widths scale with the flow count so n/C stays the paper's ≈ 2 at the reference size.
    let scale = f64::from(args.flows) / 146_000.0;
    let width = |w: u32| ((f64::from(w) * scale).round() as u32).max(1);
    println!(
        "# LDS reproduction on S1 (seed {}, {} flows, {} packets)\n",
        args.seed,
        trace.flows.len(),
        trace.packets.len()
    );
    if args.parts.iter().any(|p| p == "sizes") {
        sizes(&trace, &width);
    }
    if args.parts.iter().any(|p| p == "loss") {
        loss(&trace, &width, args.seed);
    }
    if args.parts.iter().any(|p| p == "weights") {
        weights(&trace, &width, args.seed);
    }
}

fn fmt_stats(o: &[FlowOutcome], keep: impl Fn(&FlowOutcome) -> bool) -> String {
    let s = stats(o, keep);
    format!("{:.4} / {:.4}", s.median, s.p95)
}

fn sizes(trace: &Trace, width: &dyn Fn(u32) -> u32) {
    println!("## Accuracy by flow size (R = 4, k = 1, p = 1, no loss; spec §11.3, paper Fig. 10)\n");
    println!("Median / p95 relative error.\n");
    let mut runs: Vec<(String, Vec<FlowOutcome>)> = Vec::new();
    for (w, alpha) in [(1_750, 0.1), (17_500, 0.1), (17_500, 0.0), (175_000, 0.1)] {
        let cfg = LdsConfig {
            estimator: EstimatorConfig { alpha, ..EstimatorConfig::default() },
            ..LdsConfig::new(4, width(w))
        };
        let Ok(rep) = replay(trace, &cfg, None) else { continue };
        // The receiver's flow log enumerates the flows the peer estimates: all of them here.
        let Ok(est) = Estimator::new(&rep.sender, &rep.receiver) else { continue };
        let listed = est.all(rep.receiver.flows());
        eprintln!(
            "{}×4 α={alpha}: flow log {} flows, {} unrecorded packets; {} of them estimated",
            width(w),
            rep.receiver.flows().len(),
            rep.receiver.flows().unrecorded_packets(),
            listed.iter().filter(|e| e.mean_delay_ns.is_ok()).count(),
        );
        let Ok(o) = outcomes(trace, &rep, None, cfg.estimator) else { continue };
        runs.push((format!("LDS {}×4, α = {alpha}", width(w)), o));
    }
    runs.push(("Global mean".into(), global_mean_outcomes(trace, None)));
    println!("| method | > 1000 pkts | > 100 pkts | all flows |");
    println!("|---|---|---|---|");
    for (name, o) in &runs {
        println!(
            "| {name} | {} | {} | {} |",
            fmt_stats(o, |f| f.size > 1000),
            fmt_stats(o, |f| f.size > 100),
            fmt_stats(o, |_| true)
        );
    }
    println!(
        "\nSpec [SIM] (α = 0.1): 1750×4 .0520/.127, .128/.240, .174/.337; 17500×4 .0053/.0186, .0204/.0917, \
              .126/.362; 175000×4 .0002/.0038, .0010/.0098, .0000/.042; α = 0 at 17500×4: > 1000 median .0018; \
              global mean .187/.203, .191/.222, .191/.347.\n"
    );
    print!("| bin | flows |");
    for (name, _) in &runs {
        print!(" {name} |");
    }
    println!(" [SIM] 17500×4 | [PAPER] 70,000 cells |");
    print!("|---|---|");
    for _ in &runs {
        print!("---|");
    }
    println!("---|---|");
    let sim = [".155/.389", ".100/.276", ".053/.163", ".026/.100", ".0121/.035", ".0060/.019", ".0007/.0035"];
    let paper = ["–", "–", "–", "–", ".012", ".004", ".0006"];
    let per_run: Vec<_> = runs.iter().map(|(_, o)| by_size_bin(o)).collect();
    for (i, bin) in SIZE_BINS.iter().enumerate() {
        print!("| {} | {} |", bin_label(*bin), per_run.first().map(|b| b[i].1.flows).unwrap_or(0));
        for b in &per_run {
            print!(" {:.4} / {:.4} |", b[i].1.median, b[i].1.p95);
        }
        println!(" {} | {} |", sim[i], paper[i]);
    }
    println!();
}

/// A sampling configuration and the selection rules evaluated on it.
type Bank = (&'static str, Vec<f64>, Vec<(&'static str, SelectionRule)>);

fn loss(trace: &Trace, width: &dyn Fn(u32) -> u32, seed: u64) {
    println!("## Loss (k = 5, R = 4, W = 87,500, α = 0.1, uniform loss; spec §11.4, paper Fig. 11)\n");
    println!("Coverage / median relative error, a missing estimate counted as error 1.\n");
    let w = width(87_500);
    let base = LdsConfig { vlda_len: 5, ..LdsConfig::new(4, w) };
    let banks: [Bank; 3] = [
        (
            "MB [.01,.1,.5,1]",
            vec![0.01, 0.1, 0.5, 1.0],
            vec![
                ("paper-literal", SelectionRule::PaperScaled),
                ("UCB c = 2", SelectionRule::Ucb { c: 2.0 }),
                ("highest-rate-first", SelectionRule::HighestRateFirst),
            ],
        ),
        ("SB p = 0.05", vec![0.05], vec![("", SelectionRule::PaperScaled)]),
        ("SB p = 1", vec![1.0], vec![("", SelectionRule::PaperScaled)]),
    ];
    let rates = [0.0, 0.001, 0.005, 0.01];
    let losses: Vec<Option<Vec<bool>>> = rates
        .iter()
        .map(|&r| (r > 0.0).then(|| trace.losses(LossModel::Uniform { rate: r }, seed ^ 0x1055)))
        .collect();
    println!("| config | loss 0 (≥ 1000) | 0.1% (≥ 1000) | 0.5% (≥ 1000) | 1% (≥ 1000) | 1% (> 100) |");
    println!("|---|---|---|---|---|---|");
    for (name, sampling, rules) in &banks {
        let cfg = LdsConfig { sampling: sampling.clone(), ..base.clone() };
        let mut rows: Vec<Vec<String>> = vec![Vec::new(); rules.len()];
        for lost in &losses {
            let Ok(rep) = replay(trace, &cfg, lost.as_deref()) else { continue };
            for (i, (_, rule)) in rules.iter().enumerate() {
                let opts = EstimatorConfig { selection: *rule, ..EstimatorConfig::default() };
                let Ok(o) = outcomes(trace, &rep, lost.as_deref(), opts) else { continue };
                let big = stats(&o, |f| f.size >= 1000);
                rows[i].push(format!("{:.3} / {:.4}", big.coverage, big.median));
                if lost.is_some() && rows[i].len() == 4 {
                    let mid = stats(&o, |f| f.size > 100);
                    rows[i].push(format!("{:.3} / {:.4}", mid.coverage, mid.median));
                }
            }
        }
        for ((rule_name, _), cells) in rules.iter().zip(rows) {
            let label = if rule_name.is_empty() { name.to_string() } else { format!("{name}, {rule_name}") };
            println!("| {label} | {} |", cells.join(" | "));
        }
    }
    println!(
        "\nSpec [SIM]: MB paper-literal 1.00/.0237, 1.00/.0230, .993/.0266, .988/.0288, .999/.0382; MB UCB \
         1.00/.0051, 1.00/.0058, .993/.0091, .988/.0139, .999/.0285; MB highest-rate-first 1.00/.0044, 1.00/.0048, \
         .993/.0075, .988/.0094, .999/.0286; SB p = 0.05 1.00/.0135, .997/.0145, .982/.0147, .960/.0156, .996/.0478; \
         SB p = 1 1.00/.0044, .879/.0064, .456/1.0, .174/1.0, .881/.0262.\n"
    );
}

fn weights(trace: &Trace, width: &dyn Fn(u32) -> u32, seed: u64) {
    use rand::Rng;
    println!(
        "## Weighting (R = 4, k = 1, α = 0.1; bronze/silver/gold = 90/9/1% of flows; spec §11.5, paper Fig. 12)\n"
    );
    println!("Median relative error, all flows (flows > 100 packets).\n");
    let mut rng = wirelat_dataplane::sim::rng(seed ^ 0x3e16);
    let class: Vec<usize> = trace
        .flows
        .iter()
        .map(|_| {
            let u = rng.random::<f64>();
            if u < 0.01 {
                2
            } else if u < 0.10 {
                1
            } else {
                0
            }
        })
        .collect();
    println!("| sketch | weights (b, s, g) | bronze | silver | gold |");
    println!("|---|---|---|---|---|");
    for w in [10_000, 25_000] {
        for ws in [[1u32, 1, 1], [1, 25, 100], [1, 10, 100], [1, 50, 2500]] {
            let cfg = LdsConfig::new(4, width(w));
            let per_flow: Vec<u32> = class.iter().map(|&c| ws[c]).collect();
            let Ok(rep) = replay_weighted(trace, &cfg, None, Some(&per_flow)) else { continue };
            let Ok(o) = outcomes(trace, &rep, None, cfg.estimator) else { continue };
            let cells: Vec<String> = (0..3)
                .map(|c| {
                    let in_class = |f: &FlowOutcome| class.get(f.flow as usize) == Some(&c);
                    let all = stats(&o, in_class);
                    let big = stats(&o, |f| in_class(f) && f.size > 100);
                    format!("{:.4} ({:.4})", all.median, big.median)
                })
                .collect();
            println!("| {}×4 | {}, {}, {} | {} |", width(w), ws[0], ws[1], ws[2], cells.join(" | "));
        }
    }
    println!(
        "\nSpec [SIM] 10000×4: (1,1,1) .148/.147/.145; (1,25,100) .154/.074/.033; (1,10,100) .153/.100/.029; \
         (1,50,2500) .155/.056/.0050. 25000×4: (1,1,1) .104/.103/.096; (1,25,100) .110/.023/.0091; \
         (1,10,100) .110/.041/.0088; (1,50,2500) .111/.0145/.0017.\n"
    );
}
