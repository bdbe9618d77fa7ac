//! Which reason leaves LDS flows of ≥ 10 packets without a mean, per configuration and loss: a
//! diagnosis for issue 19's coverage target, not a guarantee. Prints a Markdown table (the one in
//! BENCHMARKS.md, "W12 · LDS") and panics if any flow has neither a mean nor a reason.
//!
//! Run: `cargo run --release --no-default-features -p wirelat-dataplane --example lds_coverage`

use wirelat_dataplane::sim::LossModel;
use wirelat_dataplane::synopsis::lds::eval::replay;
use wirelat_dataplane::synopsis::lds::trace::{Trace, TraceConfig};
use wirelat_dataplane::synopsis::lds::{Estimator, LdsConfig, NoFlowEstimate};

fn main() {
    println!(
        "| flows | loss | rows × width | k | flows ≥ 10 pkts | estimated | too few | loss | collision | overflow |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for flows in [2_000u32, 20_000] {
        let tc = TraceConfig { flows, duration_ns: 10_000_000_000, ..TraceConfig::s1(7) };
        let trace = Trace::generate(&tc).unwrap();
        for (name, model) in [
            ("0", LossModel::None),
            ("1 % uniform", LossModel::Uniform { rate: 0.01 }),
            ("5 % uniform", LossModel::Uniform { rate: 0.05 }),
        ] {
            let lost = trace.losses(model, 3);
            for (width, k) in [(flows, 1u32), (flows, 4), (4 * flows, 4), (flows, 16), (flows, 64)] {
                let cfg = LdsConfig { vlda_len: k, ..LdsConfig::new(4, width) };
                let rep = replay(&trace, &cfg, Some(&lost)).unwrap();
                let est = Estimator::new(&rep.sender, &rep.receiver).unwrap();
                let mut row = [0u64; 6];
                for f in trace.flows.iter().filter(|f| f.packets >= 10) {
                    let e = est.flow(&f.key, f.flow_hash);
                    row[0] += 1;
                    let slot = match (e.mean_delay_ns.is_ok(), e.cells.no_estimate_reason) {
                        (true, None) => 1,
                        (false, Some(NoFlowEstimate::TooFewPackets)) => 2,
                        (false, Some(NoFlowEstimate::LossInEveryCell)) => 3,
                        (false, Some(NoFlowEstimate::Collision)) => 4,
                        (false, Some(NoFlowEstimate::Overflow)) => 5,
                        other => panic!("a flow without a mean and without a reason: {other:?}"),
                    };
                    row[slot] += 1;
                }
                let pct = |x: u64| 100.0 * x as f64 / row[0].max(1) as f64;
                println!(
                    "| {flows} | {name} | 4 × {width} | {k} | {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % |",
                    row[0],
                    pct(row[1]),
                    pct(row[2]),
                    pct(row[3]),
                    pct(row[4]),
                    pct(row[5])
                );
            }
        }
    }
}
