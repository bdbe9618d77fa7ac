//! The operator's view of the demo (issue 23): the real Prometheus (Debian's package, installed
//! by scripts/setup.sh) scrapes `wirelat demo --metrics-linger-s` — the peer and both points
//! (`wirelat run` on DPDK's pcap device) carrying the demo's traffic — every second, and the
//! test asks its HTTP API what the Grafana dashboard (docs/grafana/wirelat-two-point.json)
//! would: every panel's expression returns finite numbers (the `rate()` ones too), the fridge's
//! p50/p99 from `histogram_quantile` lie within one fixed bucket of the peer's records, and
//! the counters equal the processes' own totals at exit (the points' final log lines, the
//! peer's records file).
//!
//! With `WIRELAT_DASHBOARD_DATA=FILE` set, the test also writes every panel's series over the
//! run (range queries) to FILE: `scripts/dashboard-picture.sh` draws the README's picture from
//! it.

#![cfg(feature = "dpdk")]

mod common;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::*;

/// How long each point keeps its final values up after it finishes: the test evaluates every
/// query while all three processes are still scraped (an instant query right after a process
/// is gone returns nothing: Prometheus marks its series stale).
const LINGER_S: u64 = 20;
/// The demo's pause between the peer's endpoint and the points' start: the targets file's
/// refresh (1 s) and one scrape (1 s), with room.
const LEAD_S: u64 = 4;
/// The demo starts three processes and replays a few tens of thousands of frames (about 20 s
/// on this machine under load), plus the points' linger.
const DEMO_TIMEOUT: Duration = Duration::from_secs(600);
/// The collector's fixed bucket bounds (docs/monitoring.md).
const BUCKETS: [f64; 22] = wirelat_control::report::delay::BUCKETS_SECONDS;

/// A process killed (and reaped) when the test ends, failed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `s` percent-encoded for a URL query value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus's HTTP API at `addr`: `path` with `params`, its `data` (panics on an error).
fn prom_api(addr: SocketAddr, path: &str, params: &[(&str, String)]) -> serde_json::Value {
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect();
    let r = Collector::http_get(addr, &format!("{path}?{}", query.join("&")));
    let (head, body) = r.split_once("\r\n\r\n").unwrap_or((&r, ""));
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{params:?}: not JSON ({e}):\n{r}"));
    assert_eq!(v["status"], "success", "{params:?}:\n{v}");
    v["data"].clone()
}

/// An HTTP/1.1 chunked body joined (Prometheus chunks its larger answers).
fn dechunk(body: &str) -> String {
    let mut rest = body.as_bytes();
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&rest[..eol]);
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        let tail = &rest[eol + 2..];
        if n == 0 || tail.len() < n {
            break;
        }
        out.extend_from_slice(&tail[..n]);
        rest = tail[n..].strip_prefix(b"\r\n").unwrap_or(&tail[n..]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The instant query `expr` at `time` (Unix seconds; now when `None`): its samples.
fn query(addr: SocketAddr, expr: &str, time: Option<f64>) -> Vec<serde_json::Value> {
    let mut p = vec![("query", expr.to_owned())];
    if let Some(t) = time {
        p.push(("time", format!("{t:.3}")));
    }
    prom_api(addr, "/api/v1/query", &p)["result"].as_array().cloned().unwrap_or_default()
}

/// The numeric value of one instant-vector sample.
fn sample_value(s: &serde_json::Value) -> f64 {
    s["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// The single value of `expr` at `time` (panics unless exactly one sample).
fn one(addr: SocketAddr, expr: &str, time: f64) -> f64 {
    let r = query(addr, expr, Some(time));
    assert_eq!(r.len(), 1, "{expr}: {r:?}");
    sample_value(&r[0])
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("clock").as_secs_f64()
}

/// The file-based service discovery list: one target group per scraped process.
fn write_targets(path: &Path, targets: &BTreeMap<String, SocketAddr>) {
    let groups: Vec<serde_json::Value> = targets
        .iter()
        .map(|(role, a)| serde_json::json!({"targets": [a.to_string()], "labels": {"role": role}}))
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string(&groups).expect("JSON")).expect("targets");
    std::fs::rename(&tmp, path).expect("targets");
}

/// The `key=value` fields of the last line of `log` that contains every one of `tags`.
fn last_fields(log: &str, tags: &[&str]) -> BTreeMap<String, String> {
    let line = log
        .lines()
        .rev()
        .find(|l| tags.iter().all(|t| l.contains(t)))
        .unwrap_or_else(|| panic!("no line with {tags:?} in:\n{log}"));
    log_fields(line)
}

fn field(f: &BTreeMap<String, String>, k: &str) -> f64 {
    f.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} in {f:?}"))
}

/// The fixed bucket index a value falls in (`BUCKETS.len()` for `+Inf`).
fn bucket(x: f64) -> i64 {
    BUCKETS.iter().position(|&ub| x <= ub).unwrap_or(BUCKETS.len()) as i64
}

#[test]
fn prometheus_scrapes_the_demo_and_every_dashboard_panel_returns_numbers() {
    let prometheus = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("prometheus is not installed: run scripts/setup.sh");
    let dir = scratch();
    let d = dir.path();
    let out = d.join("demo");

    // Prometheus first: it scrapes every second whatever the targets file lists; the test
    // adds the demo's endpoints as the demo prints them (ports are picked at start).
    let targets_file = d.join("targets.json");
    let mut targets = BTreeMap::new();
    write_targets(&targets_file, &targets);
    let prom_addr =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
    let prom_config = d.join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: wirelat\n    file_sd_configs:\n      - files: [\"{}\"]\n\
             \x20       refresh_interval: 1s\n",
            targets_file.display()
        ),
    )
    .expect("prometheus config");
    let prom_log_path = d.join("prometheus.log");
    let prom_log = std::fs::File::create(&prom_log_path).expect("log");
    let _prometheus = KillOnDrop(
        std::process::Command::new(prometheus)
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!("--storage.tsdb.path={}", d.join("tsdb").display()))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(prom_log)
            .spawn()
            .expect("start prometheus"),
    );
    let prom_log = || std::fs::read_to_string(&prom_log_path).unwrap_or_default();
    let started = Instant::now();
    while !(std::net::TcpStream::connect(prom_addr).is_ok()
        && Collector::http_get(prom_addr, "/-/ready").starts_with("HTTP/1.1 200"))
    {
        assert!(started.elapsed() < RUN_TIMEOUT, "Prometheus never became ready:\n{}", prom_log());
        std::thread::sleep(Duration::from_millis(100));
    }

    // The demo, its stdout read line by line for the endpoints.
    let mut demo = KillOnDrop(
        wirelat()
            .args(["demo", "--duration", "1s", "--timeout-s", "500", "--metrics-linger-s"])
            .arg(LINGER_S.to_string())
            // The 1-s replay can finish within a scrape interval: Prometheus must see the
            // peer's series at zero before its records, or rate() has no increase (NaN).
            .args(["--metrics-lead-s", &LEAD_S.to_string()])
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wirelat demo"),
    );
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = demo.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let stderr = demo.0.stderr.take().expect("stderr");
    let demo_err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut printed = String::new();
    let started = Instant::now();
    while targets.len() < 3 {
        let line = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
        for (tag, role) in [
            ("metrics of the peer on ", "peer"),
            ("metrics of point A on ", "a"),
            ("metrics of point B on ", "b"),
        ] {
            if let Some(url) = line.split(tag).nth(1) {
                let a: SocketAddr = url
                    .trim()
                    .trim_start_matches("http://")
                    .trim_end_matches("/metrics")
                    .parse()
                    .unwrap_or_else(|e| panic!("{line}: {e}"));
                targets.insert(role.to_owned(), a);
                write_targets(&targets_file, &targets);
            }
        }
        printed.push_str(&line);
        printed.push('\n');
        if let Ok(Some(status)) = demo.0.try_wait() {
            panic!("the demo exited ({status}) before printing its endpoints:\n{printed}");
        }
        assert!(started.elapsed() < DEMO_TIMEOUT, "the demo never printed its endpoints:\n{printed}");
    }
    let run_start = now_s();

    // Both points finished (their final values are up for LINGER_S) and the peer's last
    // records written (the fridge's group spans the run and closes last): three more scrapes
    // take every final value, then every query is evaluated at that instant, T.
    let target = |role: &str| targets[role];
    let ready = || {
        query(prom_addr, "count(wirelat_point_finished == 1)", None).first().map(sample_value) == Some(2.0)
            && query(prom_addr, "sum(wirelat_fridge_delay_seconds_count) > 0", None).len() == 1
    };
    while !ready() {
        if let Ok(Some(status)) = demo.0.try_wait() {
            panic!("the demo exited ({status}) before Prometheus saw both points finish:\n{}", prom_log());
        }
        assert!(started.elapsed() < DEMO_TIMEOUT, "Prometheus never saw both points finish:\n{}", prom_log());
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("Prometheus saw both points finish {:.1} s after the demo started", now_s() - run_start);
    std::thread::sleep(Duration::from_secs(3));
    let t = now_s();
    let up = query(prom_addr, "up", Some(t));
    assert!(up.len() == 3 && up.iter().all(|s| sample_value(s) == 1.0), "{up:?}");

    // Every panel's expression, as Grafana would ask it at T: data, and only finite numbers.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_path("docs/grafana/wirelat-two-point.json")).expect("dashboard"),
    )
    .expect("dashboard JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut exprs = 0;
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let result = query(prom_addr, expr, Some(t));
            assert!(!result.is_empty(), "panel {}: {expr} returned nothing", panel["title"]);
            for s in &result {
                assert!(sample_value(s).is_finite(), "panel {}: {expr} gave {s}", panel["title"]);
            }
            exprs += 1;
        }
    }
    assert!(exprs >= 20, "{exprs} expressions");
    if let Ok(path) = std::env::var("WIRELAT_DASHBOARD_DATA") {
        write_dashboard_data(Path::new(&path), prom_addr, panels, run_start - 2.0, t);
    }

    // The demo ends (the points' linger, then the peer's SIGTERM); its files are final.
    let deadline = Instant::now() + DEMO_TIMEOUT;
    let status = loop {
        if let Ok(Some(status)) = demo.0.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "the demo did not finish");
        std::thread::sleep(Duration::from_millis(100));
    };
    printed.extend(rx.try_iter().map(|l| l + "\n"));
    let err = demo_err.join().unwrap_or_default();
    assert!(status.success(), "demo failed ({status}):\n{printed}\n{err}");

    // The fridge's p50/p99 in Prometheus (over the whole run, and the dashboard's 5-min rate
    // at T, which spans the run) within one fixed bucket of the peer's own records.
    let records: Vec<serde_json::Value> = std::fs::read_to_string(out.join("records.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let mut compared = 0;
    for r in records.iter().filter(|r| r["record"] == "fridge_quantiles") {
        let labels = format!(
            "point=\"{}\",point_id=\"{}\",kind=\"{}\"",
            r["point"].as_str().expect("point"),
            r["point_id"],
            r["kind"].as_str().expect("kind")
        );
        for q in r["quantiles"].as_array().expect("quantiles") {
            let (p, want) = (q["q"].as_f64().expect("q"), q["delay_ns"].as_f64().expect("delay") * 1e-9);
            if p != 0.5 && p != 0.99 {
                continue;
            }
            for expr in [
                format!("histogram_quantile({p}, wirelat_fridge_delay_seconds_bucket{{{labels}}})"),
                format!("histogram_quantile({p}, rate(wirelat_fridge_delay_seconds_bucket{{{labels}}}[5m]))"),
            ] {
                let got = one(prom_addr, &expr, t);
                eprintln!("{labels} q{p}: record {want:.6e} s, Prometheus {got:.6e} s ({expr})");
                assert!((bucket(got) - bucket(want)).abs() <= 1, "{expr}: {got} s, the record's {want} s");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * 2 * 2, "p50 and p99 of two kinds at two points:\n{records:?}");

    // The peer's counters at T equal what it wrote.
    let peer = format!("instance=\"{}\"", target("peer"));
    let written = records.iter().filter(|r| r["record"] != "run").count() as f64;
    assert_eq!(one(prom_addr, &format!("wirelat_peer_records_total{{{peer}}}"), t), written);
    let segments: Vec<&serde_json::Value> = records.iter().filter(|r| r["record"] == "segment").collect();
    for seg in [1, 2] {
        for syn in ["lda", "lds", "rda"] {
            let mine: Vec<_> =
                segments.iter().filter(|r| r["segment"] == seg && r["synopsis"] == syn).collect();
            assert!(!mine.is_empty(), "no {syn} record of segment {seg}");
            let l = format!("{peer},segment=\"{seg}\",synopsis=\"{syn}\"");
            let means = mine.iter().filter(|r| r["mean_ns"]["value"].is_f64()).count() as f64;
            assert_eq!(one(prom_addr, &format!("wirelat_segment_delay_seconds_count{{{l}}}"), t), means);
            let known: Vec<_> = mine.iter().filter(|r| r["loss"]["lost"].is_u64()).collect();
            let sum =
                |k: &str| known.iter().map(|r| r["loss"][k].as_u64().expect("loss")).sum::<u64>() as f64;
            assert_eq!(one(prom_addr, &format!("wirelat_segment_sent_packets_total{{{l}}}"), t), sum("sent"));
            assert_eq!(one(prom_addr, &format!("wirelat_segment_lost_packets_total{{{l}}}"), t), sum("lost"));
        }
    }

    // The points' counters at T equal their final log lines.
    for name in ["a", "b"] {
        let log = std::fs::read_to_string(out.join(format!("{name}.log"))).expect("point log");
        let i = format!("instance=\"{}\"", target(name));
        let at = |expr: &str| one(prom_addr, expr, t);
        let measure = last_fields(&log, &["measure counters", "label=\"final\""]);
        assert_eq!(at(&format!("wirelat_measure_frames_total{{{i}}}")), field(&measure, "frames"));
        assert_eq!(
            at(&format!("wirelat_measure_measured_packets_total{{{i}}}")),
            field(&measure, "measured")
        );
        let skipped: f64 =
            measure.iter().filter(|(k, _)| k.starts_with("skipped_")).map(|(k, _)| field(&measure, k)).sum();
        assert_eq!(at(&format!("sum(wirelat_measure_skipped_frames_total{{{i}}})")), skipped);
        assert!(field(&measure, "measured") > 10_000.0, "{measure:?}");
        for port in [0, 1] {
            let p = last_fields(&log, &["port counters", "label=\"final\"", &format!("port={port} ")]);
            let l = format!("{i},port=\"{port}\"");
            assert_eq!(at(&format!("sum(wirelat_port_rx_frames_total{{{l}}})")), field(&p, "rx"));
            assert_eq!(at(&format!("sum(wirelat_port_tx_frames_total{{{l}}})")), field(&p, "tx"));
        }
        let harvest = last_fields(&log, &["harvest", "epochs="]);
        assert_eq!(at(&format!("wirelat_harvest_epochs_total{{{i}}}")), field(&harvest, "epochs"));
        let sink = last_fields(&log, &["network sink closed"]);
        assert_eq!(at(&format!("wirelat_ship_acked_total{{{i}}}")), field(&sink, "acked"));
        assert_eq!(field(&sink, "given_up"), 0.0, "{sink:?}");
    }
}

/// Every panel's series from `from` to `to` (1-s steps) as JSON for the dashboard picture.
fn write_dashboard_data(path: &Path, prom: SocketAddr, panels: &[serde_json::Value], from: f64, to: f64) {
    let out: Vec<serde_json::Value> = panels
        .iter()
        .map(|panel| {
            let targets: Vec<serde_json::Value> = panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let expr = t["expr"].as_str().unwrap_or_default();
                    let data = prom_api(
                        prom,
                        "/api/v1/query_range",
                        &[
                            ("query", expr.to_owned()),
                            ("start", format!("{from:.3}")),
                            ("end", format!("{to:.3}")),
                            ("step", "1".to_owned()),
                        ],
                    );
                    serde_json::json!({"expr": expr, "legend": t["legendFormat"], "result": data["result"]})
                })
                .collect();
            serde_json::json!({
                "title": panel["title"],
                "unit": panel["fieldConfig"]["defaults"]["unit"],
                "gridPos": panel["gridPos"],
                "targets": targets,
            })
        })
        .collect();
    std::fs::write(path, serde_json::to_string_pretty(&out).expect("JSON")).expect("dashboard data");
}
