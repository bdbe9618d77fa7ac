//! The end-to-end check of issue 11: `wirelat demo` on a demo-sized trace runs point A, point B
//! (each `wirelat run` on DPDK's pcap device, shipping over the authenticated protocol) and the
//! peer (`wirelat collect`), and every synopsis's error against the ground truth stays within
//! `tests/data/demo-bounds.toml` (each bound's derivation is written next to it). The same
//! records, re-scored with a bound no estimator can meet, must fail: the check can fail. And the
//! same pcaps measured by `wirelat offline` (the pure-Rust path, no DPDK) and shipped to a second
//! peer give exactly the same estimates: the trace-mode appliance, its harvest, the network
//! path and the peer add nothing and lose nothing.

#![cfg(feature = "dpdk")]

mod common;
#[path = "../trace/tests/golden/mod.rs"]
mod golden;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// The demo starts three processes and replays a few hundred thousand frames.
const DEMO_TIMEOUT: Duration = Duration::from_secs(600);

#[test]
fn demo_estimates_are_within_every_synopsis_bound() {
    let dir = scratch();
    let out = dir.path().join("run");
    let summary = dir.path().join("summary.json");
    let child = wirelat()
        .args(["demo", "--duration", "1s", "--timeout-s", "500", "--out"])
        .arg(&out)
        .arg("--bounds")
        .arg(repo_path("tests/data/demo-bounds.toml"))
        .arg("--summary-json")
        .arg(&summary)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelat demo");
    let run = wait_with_timeout(child, DEMO_TIMEOUT);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "demo failed ({}):\n{stdout}\n{stderr}", run.status);

    // Every synopsis was estimated by the peer and printed next to its truth.
    for name in ["lda", "rda", "lds", "colate"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(name)), "no {name} row:\n{stdout}");
    }
    assert!(stdout.contains("tcp_handshake") && stdout.contains("dns"), "no fridge rows:\n{stdout}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary")).expect("summary JSON");
    assert_eq!(s["pass"], true);
    let checks = s["checks"].as_array().expect("checks");
    for name in ["fridge", "lda", "lds", "rda", "colate"] {
        assert!(
            checks.iter().any(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name))),
            "no bound was checked for {name}"
        );
    }

    // The picture exists and is an SVG with a curve per kind and point.
    let svg = std::fs::read_to_string(out.join("fridge-cdf.svg")).expect("fridge-cdf.svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.matches("<polyline").count() >= 4, "too few curves in the SVG");

    // Both points forwarded every frame they received, byte-identical (the appliance's first
    // promise), while measuring.
    for (point, rx, tx) in [("a", 0, 1), ("a", 1, 0), ("b", 0, 1), ("b", 1, 0)] {
        let sent = read_frames(&out.join(format!("pair/{point}_port{rx}.pcap")));
        let forwarded = read_frames(&out.join(format!("{point}_out{tx}.pcap")));
        assert!(!sent.is_empty());
        assert!(sent == forwarded, "point {point}: port {rx} → {tx} not forwarded byte-identical, in order");
    }

    // The same records against an impossible bound fail: the bounds above are really checked.
    let strict = wirelat()
        .args(["check", "--truth"])
        .arg(out.join("pair/truth.json"))
        .arg("--records")
        .arg(out.join("records.jsonl"))
        .args(["--bound", "lda.mean_rel_err_max=1e-12"])
        .output()
        .expect("run wirelat check");
    assert_eq!(strict.status.code(), Some(1), "{}", String::from_utf8_lossy(&strict.stdout));

    // The same pcaps, measured offline by both points and shipped to a second peer.
    let offline = dir.path().join("offline");
    std::fs::create_dir_all(&offline).unwrap();
    let records = out.join("records.jsonl");
    let records2 = offline.join("records.jsonl");
    let collector = std::fs::read_to_string(out.join("collector.toml"))
        .unwrap()
        .replace(&toml_str(&records), &toml_str(&records2));
    std::fs::write(offline.join("collector.toml"), collector).unwrap();
    let peer = Collector::start(&offline.join("collector.toml"));
    let addr = peer.addr;
    let mut points = Vec::new();
    for p in ["a", "b"] {
        let original = std::fs::read_to_string(out.join(format!("{p}.toml"))).unwrap();
        let old_peer = original.lines().find(|l| l.starts_with("peer = ")).expect("a [ship] peer line");
        let config = original.replace(old_peer, &format!("peer = \"{addr}\"")).replace(
            &toml_str(&out.join(format!("{p}.epochs.jsonl"))),
            &toml_str(&offline.join(format!("{p}.jsonl"))),
        );
        let path = offline.join(format!("{p}.toml"));
        std::fs::write(&path, config).unwrap();
        let child = wirelat()
            .args(["offline", "--config"])
            .arg(&path)
            .arg("--port0")
            .arg(out.join(format!("pair/{p}_port0.pcap")))
            .arg("--port1")
            .arg(out.join(format!("pair/{p}_port1.pcap")))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wirelat offline");
        points.push(child);
    }
    for child in points {
        let run = wait_with_timeout(child, DEMO_TIMEOUT);
        assert!(run.status.success(), "offline point failed: {}", describe(&run));
    }
    peer.stop();
    let appliance = scoring_records(&records);
    let pure = scoring_records(&records2);
    assert!(appliance.len() > 1000, "{} records", appliance.len());
    assert_eq!(appliance.len(), pure.len(), "different numbers of records");
    for (x, y) in appliance.iter().zip(&pure) {
        assert_eq!(x, y, "the appliance's and the offline run's estimates differ");
    }
    // Every line the collector and both points wrote, byte for byte, against the golden digests:
    // a refactor of the records' path (issue 22) must not change one of them.
    let mut digests = golden::Golden::default();
    let kind_of = |line: &str, field: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON record");
        let name = |k: &str| v[k].as_str().map(str::to_string);
        [name(field), name("synopsis")].into_iter().flatten().collect::<Vec<_>>().join("_")
    };
    for line in std::fs::read_to_string(&records).unwrap().lines() {
        digests.push(&format!("collector_{}", kind_of(line, "record")), line.to_string());
    }
    for p in ["a", "b"] {
        for line in std::fs::read_to_string(out.join(format!("{p}.epochs.jsonl"))).unwrap().lines() {
            digests.push(&format!("point_{p}_{}", kind_of(line, "kind")), line.to_string());
        }
    }
    digests.check("demo", &repo_path("tests/data/golden/demo.digest"));
}

/// A path as the TOML string the demo wrote for it.
fn toml_str(p: &Path) -> String {
    toml::Value::String(p.display().to_string()).to_string()
}

/// The scoring records of a records file (estimates, epochs, flows, quantiles), in a canonical
/// order; the peer's diagnostics (look-up rounds, timings) are left out.
fn scoring_records(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let parsed = wirelat_trace::record::parse_lines(&text, &path.display().to_string()).unwrap();
    let mut v: Vec<String> = parsed.records.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
    v.sort();
    v
}
