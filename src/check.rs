//! `wirelat check`: scores a run's JSON-lines records against a trace pair's `truth.json` with
//! the trace crate's scorer, prints a per-synopsis error table, and checks the given bounds.
//!
//! Bounds come from `--bounds FILE` (JSON `{"lda": {"mean_rel_err_max": 0.05}}`, or the same
//! as TOML tables `[lda]` when the file ends in `.toml`) and from repeated
//! `--bound lda.mean_rel_err_max=0.05`, which override the file. Unknown synopses and unknown
//! bound names are usage errors: a misspelt bound would otherwise never be checked. For the
//! same reason a bounded synopsis of which no record was scored fails (`<name>.records`): its
//! error summaries would be zero and every bound would hold vacuously.
//!
//! `--perfect` scores the records a perfect run would emit (segment records for LDA and RDA,
//! flow records for LDS and COLATE, fridge quantiles per point and kind): zero error by
//! construction, so it checks the scorer, the truth file and the bounds end to end.
//!
//! Exit codes: 0 every bound holds (or none was given), 1 a bound failed, 2 bad usage or an
//! unreadable/malformed truth, records or bounds file. Nothing here needs DPDK.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_trace::record;
use wirelat_trace::score::{self, Basis, Bounds, Report, ScoreOptions, Summary, SynopsisBounds};
use wirelat_trace::truth::Truth;

use crate::Failure;

/// Which truth statistics a record is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BasisArg {
    /// Packets both points put in the same epoch (what LDA, LDS and RDA measure).
    #[default]
    SameEpoch,
    /// Every delivered packet of the sending epoch.
    Sent,
}

/// Arguments of `wirelat check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The trace pair's ground truth (written by `wirelat gen-trace`).
    #[arg(long, value_name = "truth.json")]
    pub truth: PathBuf,
    /// The run's JSON lines (`-` reads standard input). Lines that are not scoring records are
    /// skipped and counted.
    #[arg(long, value_name = "FILE.jsonl", required_unless_present = "perfect", conflicts_with = "perfect")]
    pub records: Option<PathBuf>,
    /// Score the records a perfect run would emit instead (a self-check of scorer and bounds).
    #[arg(long)]
    pub perfect: bool,
    /// Bounds per synopsis: JSON, or TOML if the name ends in .toml.
    #[arg(long, value_name = "FILE")]
    pub bounds: Option<PathBuf>,
    /// One bound, SYNOPSIS.NAME=VALUE (repeatable; overrides --bounds), e.g.
    /// lda.mean_rel_err_max=0.05. Names: mean_rel_err_max, mean_rel_err_median,
    /// std_rel_err_max, std_rel_err_median, mean_coverage_min, flow_mean_rel_err_median,
    /// flow_mean_rel_err_p90, flow_std_rel_err_median, fridge_log2_err_max, min_records.
    #[arg(long = "bound", value_name = "SYNOPSIS.NAME=VALUE")]
    pub bound: Vec<String>,
    /// Truth basis of segment and flow records.
    #[arg(long, value_enum, default_value_t)]
    pub basis: BasisArg,
    /// Flows with fewer true packets in the record's epochs are not scored.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_flow_packets: u64,
    /// Print the whole report as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also print every scored epoch and fridge quantile.
    #[arg(long, short)]
    pub verbose: bool,
}

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(e.to_string())
}

/// Runs `wirelat check`.
pub fn run(args: &CheckArgs) -> Result<(), Failure> {
    let truth = Truth::read(&args.truth).map_err(|e| usage(format!("truth file: {e}")))?;
    let bounds = load_bounds(args.bounds.as_deref(), &args.bound)?;
    let basis = match args.basis {
        BasisArg::SameEpoch => Basis::SameEpoch,
        BasisArg::Sent => Basis::Sent,
    };
    let (records, skipped) = if args.perfect {
        (perfect_records(&truth, basis), 0)
    } else {
        let path = args.records.as_deref().ok_or_else(|| usage("give --records FILE or --perfect"))?;
        let (text, label) = read_records_text(path)?;
        let parsed = record::parse_lines(&text, &label).map_err(|e| usage(format!("records: {e}")))?;
        (parsed.records, parsed.skipped)
    };
    let opts = ScoreOptions { basis, min_flow_packets: args.min_flow_packets.max(1) };
    let mut report = score::score(&truth, &records, &opts, &bounds);
    require_records(&mut report, &bounds);
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Failure::Runtime(e.into()))?;
        println!("{text}");
    } else {
        print!("{}", render_table(&report, skipped, bounds.is_empty()));
        if args.verbose {
            print!("{}", report.render_text());
        }
    }
    verdict(&report)
}

/// Ok when every bound held; otherwise a runtime failure (exit 1) saying how many did not.
pub fn verdict(report: &Report) -> Result<(), Failure> {
    if report.pass {
        Ok(())
    } else {
        let failed = report.checks.iter().filter(|c| !c.pass).count();
        Err(Failure::Runtime(anyhow::anyhow!(
            "accuracy check failed: {failed} of {} bounds exceeded",
            report.checks.len()
        )))
    }
}

/// Records of `synopsis` that were scored: segment epochs, flows, fridge records.
fn scored(report: &Report, synopsis: SynopsisKind) -> usize {
    let segments: usize =
        report.segment.iter().filter(|g| g.synopsis == synopsis).map(|g| g.epochs.len()).sum();
    let flows: usize = report.flow.iter().filter(|f| f.synopsis == synopsis).map(|f| f.scored).sum();
    let fridge = if synopsis == SynopsisKind::Fridge { report.fridge.len() } else { 0 };
    segments + flows + fridge
}

/// A bound on a synopsis with nothing scored would hold vacuously (an error summary of no
/// records is zero): such a synopsis fails with a `<name>.records` check instead.
pub fn require_records(report: &mut Report, bounds: &Bounds) {
    for name in bounds.keys() {
        let Some(kind) = score::synopsis_named(name) else { continue };
        if scored(report, kind) == 0 {
            report.checks.push(score::Check {
                name: format!("{name}.records (bounded, none scored)"),
                value: 0.0,
                bound: 1.0,
                pass: false,
            });
            report.pass = false;
        }
    }
}

/// The records a perfect run would emit for every synopsis.
pub fn perfect_records(truth: &Truth, basis: Basis) -> Vec<record::Record> {
    score::truth_as_records(
        truth,
        basis,
        &[SynopsisKind::Lda, SynopsisKind::Rda],
        &[SynopsisKind::Lds, SynopsisKind::Colate],
    )
}

fn read_records_text(path: &Path) -> Result<(String, String), Failure> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| usage(format!("reading standard input: {e}")))?;
        return Ok((text, "<stdin>".into()));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read records {}: {e}", path.display())))?;
    Ok((text, path.display().to_string()))
}

/// The bound names [`SynopsisBounds`] knows (its serialised field names).
fn known_bound_names() -> Vec<String> {
    match serde_json::to_value(SynopsisBounds::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Bounds from a file and `--bound` overrides, with every synopsis and bound name checked.
pub fn load_bounds(file: Option<&Path>, overrides: &[String]) -> Result<Bounds, Failure> {
    type Raw = BTreeMap<String, BTreeMap<String, serde_json::Value>>;
    let mut raw: Raw = match file {
        None => Raw::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read bounds {}: {e}", path.display())))?;
            if path.extension().is_some_and(|e| e == "toml") {
                toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?
            } else {
                serde_json::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?
            }
        }
    };
    for o in overrides {
        let (key, value) =
            o.split_once('=').ok_or_else(|| usage(format!("--bound {o}: expected SYNOPSIS.NAME=VALUE")))?;
        let (synopsis, name) = key
            .trim()
            .split_once('.')
            .ok_or_else(|| usage(format!("--bound {o}: expected SYNOPSIS.NAME=VALUE")))?;
        let value = value.trim();
        let number = if name == "min_records" {
            value.parse::<u64>().ok().map(serde_json::Value::from)
        } else {
            value.parse::<f64>().ok().filter(|x| x.is_finite()).map(serde_json::Value::from)
        }
        .ok_or_else(|| usage(format!("--bound {o}: {value:?} is not a valid number for {name}")))?;
        raw.entry(synopsis.to_owned()).or_default().insert(name.to_owned(), number);
    }
    let known = known_bound_names();
    let mut bounds = Bounds::new();
    for (synopsis, table) in raw {
        if score::synopsis_named(&synopsis).is_none() {
            return Err(usage(format!(
                "bounds: unknown synopsis `{synopsis}` (fridge, lda, lds, rda, colate)"
            )));
        }
        if let Some(bad) = table.keys().find(|k| !known.contains(k)) {
            return Err(usage(format!(
                "bounds: unknown bound `{synopsis}.{bad}` (known: {})",
                known.join(", ")
            )));
        }
        let value = serde_json::Value::Object(table.into_iter().collect());
        let b: SynopsisBounds =
            serde_json::from_value(value).map_err(|e| usage(format!("bounds for {synopsis}: {e}")))?;
        bounds.insert(synopsis, b);
    }
    Ok(bounds)
}

fn fmt_err(x: f64) -> String {
    format!("{x:.4}")
}

/// Six decimals, or three significant digits for tiny non-zero values (bounds like 1e-9).
fn fmt_value(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-3 { format!("{x:.3e}") } else { format!("{x:.6}") }
}

fn summary_cells(s: &Summary) -> [String; 3] {
    if s.n == 0 {
        ["-".into(), "-".into(), "-".into()]
    } else {
        [fmt_err(s.median), fmt_err(s.p90), fmt_err(s.max)]
    }
}

/// The per-synopsis table: one row per (synopsis, scope), then the checks and the verdict.
pub fn render_table(report: &Report, skipped: usize, no_bounds: bool) -> String {
    let mut rows: Vec<[String; 10]> = vec![[
        "synopsis".into(),
        "scope".into(),
        "scored".into(),
        "unmatched".into(),
        "mean err p50".into(),
        "p90".into(),
        "max".into(),
        "sd err p50".into(),
        "max".into(),
        "ci cover".into(),
    ]];
    for g in &report.segment {
        let [m50, m90, mmax] = summary_cells(&g.mean_rel_err);
        let [s50, _, smax] = summary_cells(&g.std_rel_err);
        rows.push([
            g.synopsis.name().into(),
            format!("{} epochs", g.direction.name()),
            g.epochs.len().to_string(),
            g.unmatched.to_string(),
            m50,
            m90,
            mmax,
            s50,
            smax,
            g.mean_coverage.map_or("-".into(), |c| format!("{c:.3}")),
        ]);
    }
    for f in &report.flow {
        let [m50, m90, mmax] = summary_cells(&f.mean_rel_err);
        let [s50, _, smax] = summary_cells(&f.std_rel_err);
        rows.push([
            f.synopsis.name().into(),
            format!("{} flows", f.direction.name()),
            f.scored.to_string(),
            (f.unmatched + f.no_estimate).to_string(),
            m50,
            m90,
            mmax,
            s50,
            smax,
            "-".into(),
        ]);
    }
    let mut s = String::new();
    if rows.len() > 1 {
        s.push_str("relative errors |estimate - truth| / truth:\n");
        s.push_str(&columns(&rows));
    }
    if !report.fridge.is_empty() {
        s.push_str("fridge quantiles, error |log2(estimate / truth)|:\n");
        let mut frows: Vec<[String; 10]> = Vec::new();
        frows.push([
            "point".into(),
            "kind".into(),
            "epochs".into(),
            "true samples".into(),
            "quantiles".into(),
            "max err".into(),
            "p50 est ns".into(),
            "p50 true ns".into(),
            "p99 est ns".into(),
            "p99 true ns".into(),
        ]);
        for f in &report.fridge {
            let at = |q: f64| f.quantiles.iter().find(|x| (x.q - q).abs() < 1e-9);
            let est = |q: f64| at(q).map_or("-".into(), |x| format!("{:.0}", x.estimate_ns));
            let tru = |q: f64| at(q).map_or("-".into(), |x| format!("{:.0}", x.truth_ns));
            frows.push([
                f.point.name().into(),
                serde_json::to_value(f.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                format!("{}..={}", f.epoch_first, f.epoch_last),
                f.truth_samples.to_string(),
                f.quantiles.len().to_string(),
                fmt_err(f.max_log2_err),
                est(0.5),
                tru(0.5),
                est(0.99),
                tru(0.99),
            ]);
        }
        s.push_str(&columns(&frows));
    }
    if rows.len() == 1 && report.fridge.is_empty() {
        s.push_str("no scoring records matched the truth\n");
    }
    if skipped > 0 {
        let _ = writeln!(s, "{skipped} input lines were not scoring records (skipped)");
    }
    if no_bounds {
        s.push_str("no bounds given: nothing to check\n");
    }
    for c in &report.checks {
        let at_least =
            c.name.ends_with("_min") || c.name.ends_with("min_records") || c.name.contains(".records");
        let op = if at_least { ">=" } else { "<=" };
        let _ = writeln!(
            s,
            "check {:<34} {:>12} {op} {:<12} {}",
            c.name,
            fmt_value(c.value),
            fmt_value(c.bound),
            if c.pass { "PASS" } else { "FAIL" }
        );
    }
    let _ = writeln!(s, "{}", if report.pass { "PASS" } else { "FAIL" });
    s
}

/// Left-aligned text columns separated by two spaces.
fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        s.push_str("  ");
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_from_flags_are_checked_by_name() {
        let b = load_bounds(None, &["lda.mean_rel_err_max=0.05".into(), "fridge.min_records=4".into()])
            .unwrap_or_else(|_| panic!("valid bounds"));
        assert_eq!(b["lda"].mean_rel_err_max, Some(0.05));
        assert_eq!(b["fridge"].min_records, Some(4));
        for bad in [
            "lda.mean_err=0.1",
            "ldx.mean_rel_err_max=0.1",
            "lda.mean_rel_err_max=x",
            "lda=0.1",
            "lda.min_records=1.5",
        ] {
            assert!(matches!(load_bounds(None, &[bad.into()]), Err(Failure::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn bounds_files_in_json_and_toml_agree() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let json = dir.path().join("b.json");
        let toml_path = dir.path().join("b.toml");
        std::fs::write(&json, r#"{"rda": {"mean_rel_err_max": 1e-6, "min_records": 3}}"#).unwrap_or_default();
        std::fs::write(&toml_path, "[rda]\nmean_rel_err_max = 1e-6\nmin_records = 3\n").unwrap_or_default();
        let a = load_bounds(Some(&json), &[]).unwrap_or_else(|_| panic!("json"));
        let b = load_bounds(Some(&toml_path), &[]).unwrap_or_else(|_| panic!("toml"));
        assert_eq!(a, b);
        assert_eq!(a["rda"].min_records, Some(3));
        // A flag overrides the file.
        let c = load_bounds(Some(&toml_path), &["rda.mean_rel_err_max=0.5".into()])
            .unwrap_or_else(|_| panic!("c"));
        assert_eq!(c["rda"].mean_rel_err_max, Some(0.5));
        std::fs::write(&toml_path, "[rda]\nmean_rel_err = 1\n").unwrap_or_default();
        assert!(matches!(load_bounds(Some(&toml_path), &[]), Err(Failure::Usage(_))));
    }
}
