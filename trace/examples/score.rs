//! Scores a run's JSON-lines records against a ground-truth file (until `wirelat check` wires
//! this into the CLI). Exits with status 1 when a bound fails.
//!
//! ```text
//! cargo run -p wirelat-trace --example score -- --truth /tmp/pair/truth.json --records run.jsonl \
//!     --bounds bounds.json
//! cargo run -p wirelat-trace --example score -- --truth /tmp/pair/truth.json --perfect  # self-check
//! ```

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_trace::record;
use wirelat_trace::score::{self, Basis, Bounds, ScoreOptions};
use wirelat_trace::truth::Truth;

#[derive(Parser)]
#[command(about = "Score a run's records against ground truth")]
struct Args {
    /// truth.json of the trace pair.
    #[arg(long)]
    truth: PathBuf,
    /// The run's JSON lines.
    #[arg(long, conflicts_with = "perfect")]
    records: Option<PathBuf>,
    /// Score the records a perfect run would emit (checks the scorer end to end).
    #[arg(long)]
    perfect: bool,
    /// Bounds as JSON: {"lda": {"mean_rel_err_max": 0.05}, ...}.
    #[arg(long)]
    bounds: Option<PathBuf>,
    /// Truth basis: same_epoch (default) or sent.
    #[arg(long, default_value = "same_epoch")]
    basis: String,
    /// Flows with fewer packets are not scored.
    #[arg(long, default_value_t = 1)]
    min_flow_packets: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let truth = Truth::read(&a.truth)?;
    let basis = match a.basis.as_str() {
        "same_epoch" => Basis::SameEpoch,
        "sent" => Basis::Sent,
        b => anyhow::bail!("basis {b:?}: expected same_epoch or sent"),
    };
    let records = if a.perfect {
        score::truth_as_records(&truth, basis, &[SynopsisKind::Lda, SynopsisKind::Rda], &[SynopsisKind::Lds])
    } else {
        let p = a.records.as_ref().context("give --records or --perfect")?;
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let parsed = record::parse_lines(&text, &p.display().to_string())?;
        if parsed.skipped > 0 {
            eprintln!("skipped {} lines that are not scoring records", parsed.skipped);
        }
        parsed.records
    };
    let bounds: Bounds = match &a.bounds {
        Some(p) => serde_json::from_str(&std::fs::read_to_string(p)?)
            .with_context(|| format!("parsing {}", p.display()))?,
        None => Bounds::new(),
    };
    let opts = ScoreOptions { basis, min_flow_packets: a.min_flow_packets };
    let report = score::score(&truth, &records, &opts, &bounds);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if !report.pass {
        std::process::exit(1);
    }
    Ok(())
}
