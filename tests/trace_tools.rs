//! `wirelat gen-trace` and `wirelat check` through the real binary (no DPDK needed): a seed
//! fixes every byte, flags are validated, a perfect record set passes tight bounds and a
//! perturbed one fails with exactly the error put in; exit codes 0 / 1 / 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use wirelat_trace::record::{self, Record};
use wirelat_trace::score::{self, Basis};
use wirelat_trace::truth::Truth;

const FILES: [&str; 5] = ["a_port0.pcap", "a_port1.pcap", "b_port0.pcap", "b_port1.pcap", "truth.json"];

/// A small trace: 300 ms at 3,000 packets/s with 1 % loss and a clock offset.
fn generate(out: &Path, extra: &[&str]) -> Output {
    wirelat()
        .args(["gen-trace", "--duration", "300ms", "--rate", "3000", "--loss", "uniform:0.01"])
        .args(["--clock-offset", "-2us", "--epoch", "50ms"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run wirelat")
}

fn check(args: &[&str]) -> Output {
    wirelat().arg("check").args(args).output().expect("run wirelat")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_seed_fixes_every_byte() {
    let dir = scratch();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    for (out, seed) in [(&a, "5"), (&b, "5"), (&c, "6")] {
        let o = generate(out, &["--seed", seed]);
        assert!(o.status.success(), "{}", describe(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("a_port0.pcap:"));
    }
    for f in FILES {
        let (x, y, z) = (std::fs::read(a.join(f)), std::fs::read(b.join(f)), std::fs::read(c.join(f)));
        let (x, y, z) = (x.expect("a"), y.expect("b"), z.expect("c"));
        assert!(!x.is_empty(), "{f} is empty");
        assert!(x == y, "{f}: same seed, different bytes");
        assert!(x != z, "{f}: different seeds, same bytes");
    }
    // The truth embeds the configuration: --config truth.json regenerates the same pair.
    let d = dir.path().join("d");
    let o = wirelat().args(["gen-trace", "--config"]).arg(a.join("truth.json")).arg("--out").arg(&d).output();
    let o = o.expect("run wirelat");
    assert!(o.status.success(), "{}", describe(&o));
    for f in FILES {
        assert!(std::fs::read(a.join(f)).ok() == std::fs::read(d.join(f)).ok(), "{f} not regenerated");
    }
    let t = Truth::read(&a.join("truth.json")).expect("truth");
    assert_eq!((t.seed, t.epoch_len_ns, t.clock_offset_ns), (5, 50_000_000, -2_000));
}

#[test]
fn flags_shape_the_configuration_and_bad_ones_exit_2() {
    let o = wirelat()
        .args(["gen-trace", "--print-config", "--source", "bundled", "--delay", "constant:40us"])
        .args(["--reverse-loss", "bursty:rate=0.02,burst=10", "--resolution", "us", "--time-scale", "2"])
        .output()
        .expect("run wirelat");
    assert!(o.status.success(), "{}", describe(&o));
    let cfg: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON config");
    assert_eq!(cfg["source"]["kind"], "base");
    assert_eq!(cfg["source"]["time_scale"], 2.0);
    assert_eq!(cfg["resolution"], "us");
    assert_eq!(cfg["forward"]["delay"], cfg["reverse"]["delay"], "--delay sets both directions");
    assert_eq!(cfg["forward"]["loss"]["model"], "none");
    assert_ne!(cfg["reverse"]["loss"], cfg["forward"]["loss"]);

    let bad: [(&[&str], &str); 8] = [
        (&["--delay", "gaussian:mean=1us"], "unknown model"),
        (&["--loss", "uniform:2"], "loss model"),
        (&["--source", "bundled", "--rate", "100"], "apply to synthetic traffic"),
        (&["--time-scale", "2"], "apply to a base pcap"),
        (&["--source", "/nonexistent.pcap"], "no such pcap file"),
        (&["--epoch", "0"], "epoch length must be positive"),
        (&["--dscp", "64"], "DSCP 64"),
        (&["--resolution", "ps"], "invalid value 'ps'"),
    ];
    let dir = scratch();
    for (args, expect) in bad {
        let o = wirelat().arg("gen-trace").args(args).arg("--out").arg(dir.path().join("x")).output();
        let o = o.expect("run wirelat");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", describe(&o));
        assert!(stderr.contains(expect) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("x").exists(), "nothing is written on a usage error");
    let o = wirelat().args(["gen-trace", "--seed", "3"]).output().expect("run wirelat");
    assert_eq!(o.status.code(), Some(2), "--out is required: {}", describe(&o));
}

/// A generated trace pair in a scratch directory.
fn pair() -> (tempfile::TempDir, PathBuf, Truth) {
    let dir = scratch();
    let out = dir.path().join("pair");
    let o = generate(&out, &["--seed", "11"]);
    assert!(o.status.success(), "{}", describe(&o));
    let truth = Truth::read(&out.join("truth.json")).expect("truth");
    (dir, out.join("truth.json"), truth)
}

#[test]
fn perfect_records_pass_tight_bounds_for_every_synopsis() {
    let (_dir, truth, _) = pair();
    let tight = [
        "lda.mean_rel_err_max=1e-12",
        "lda.std_rel_err_max=1e-9",
        "rda.mean_rel_err_max=1e-12",
        "lds.flow_mean_rel_err_p90=1e-12",
        "colate.flow_std_rel_err_median=1e-9",
        "fridge.fridge_log2_err_max=0",
        "fridge.min_records=4",
        "lds.min_records=50",
    ];
    let mut args = vec!["--truth".to_owned(), s(&truth), "--perfect".to_owned()];
    for b in tight {
        args.extend(["--bound".to_owned(), b.to_owned()]);
    }
    let o = wirelat().arg("check").args(&args).output().expect("run wirelat");
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for name in ["lda ", "rda ", "lds ", "colate ", "tcp_handshake", "dns"] {
        assert!(stdout.contains(name), "{name} missing: {stdout}");
    }
    assert_eq!(stdout.matches("PASS").count(), tight.len() + 1, "{stdout}");
    // --json gives the whole report.
    let o = wirelat().arg("check").args(&args).arg("--json").output().expect("run wirelat");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    assert_eq!(report["pass"], true);
}

/// The perfect records with every mean scaled by `factor`, as JSON lines with a foreign line.
fn perturbed_lines(truth: &Truth, factor: f64) -> String {
    let mut recs = score::truth_as_records(
        truth,
        Basis::SameEpoch,
        &[wirelat_dataplane::synopsis::SynopsisKind::Lda],
        &[wirelat_dataplane::synopsis::SynopsisKind::Lds],
    );
    for r in &mut recs {
        match r {
            Record::Segment(x) => x.mean_ns.iter_mut().for_each(|e| e.value *= factor),
            Record::Flow(x) => x.mean_ns.iter_mut().for_each(|e| e.value *= factor),
            _ => {}
        }
    }
    let mut text: String = recs.iter().map(|r| record::to_line(r) + "\n").collect();
    text.push_str("{\"record\":\"metrics\",\"rx\":12}\n");
    text
}

#[test]
fn perturbed_records_fail_exactly_where_the_error_exceeds_the_bound() {
    let (dir, truth, t) = pair();
    let jsonl = dir.path().join("run.jsonl");
    std::fs::write(&jsonl, perturbed_lines(&t, 1.10)).expect("write records");
    // Every mean is 10 % off: relative error 0.10 (to rounding) everywhere.
    let o = check(&["--truth", &s(&truth), "--records", &s(&jsonl), "--bound", "lda.mean_rel_err_max=0.05"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("check lda.mean_rel_err_max") && stdout.contains("FAIL"), "{stdout}");
    assert!(stdout.contains("1 input lines were not scoring records"), "{stdout}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("accuracy check failed: 1 of 1"));
    let o =
        check(&["--truth", &s(&truth), "--records", &s(&jsonl), "--bound", "lda.mean_rel_err_max=0.1001"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    // The same bounds from a TOML file; the flow bound fails too.
    let bounds = dir.path().join("bounds.toml");
    std::fs::write(&bounds, "[lda]\nmean_rel_err_median = 0.11\n[lds]\nflow_mean_rel_err_median = 0.09\n")
        .expect("write");
    let o = check(&["--truth", &s(&truth), "--records", &s(&jsonl), "--bounds", &s(&bounds)]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("lda.mean_rel_err_median") && stdout.contains("lds.flow_mean_rel_err_median"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("FAIL").count(), 2, "one failing check and the verdict: {stdout}");
    // A bound on a synopsis without records would hold vacuously: it fails instead.
    let o = check(&["--truth", &s(&truth), "--records", &s(&jsonl), "--bound", "rda.mean_rel_err_max=0.5"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("rda.records (bounded, none scored)"));
}

#[test]
fn unusable_inputs_exit_2() {
    let (dir, truth, _) = pair();
    let d = dir.path();
    let junk = d.join("junk.jsonl");
    std::fs::write(&junk, "{\"record\":\"segment\",\"epoch\":\"soon\"}\n").expect("write");
    let cases: [(Vec<String>, &str); 6] = [
        (
            vec!["--truth".into(), "/nonexistent/truth.json".into(), "--perfect".into()],
            "/nonexistent/truth.json",
        ),
        (vec!["--truth".into(), s(&truth)], "--records"),
        (vec!["--truth".into(), s(&truth), "--records".into(), s(&junk)], "junk.jsonl:1"),
        (vec!["--truth".into(), s(&junk), "--perfect".into()], "truth file"),
        (
            vec![
                "--truth".into(),
                s(&truth),
                "--perfect".into(),
                "--bound".into(),
                "lda.mean_rel_err=1".into(),
            ],
            "unknown bound",
        ),
        (
            vec![
                "--truth".into(),
                s(&truth),
                "--perfect".into(),
                "--bound".into(),
                "owd.min_records=1".into(),
            ],
            "unknown synopsis",
        ),
    ];
    for (args, expect) in cases {
        let o = wirelat().arg("check").args(&args).output().expect("run wirelat");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", describe(&o));
        assert!(stderr.contains(expect) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
