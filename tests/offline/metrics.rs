//! Metrics endpoints: the point's serves the totals its log prints, and the collector's delay
//! histograms agree with its records.

use super::*;

/// `[metrics]` on `wirelat offline`: the endpoint answers while the run goes, and its final
/// values (served for `linger_ms` after the end) equal the totals the run logs at exit.
#[test]
fn offline_metrics_endpoint_serves_the_totals_the_log_prints() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let config = d.join("m.toml");
    let text = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\nlinger_ms = 5000\n[output]\njson = \"{}\"\n{CONFIG}",
        d.join("e.jsonl").display()
    );
    std::fs::write(&config, text).expect("config");
    let mut cmd = wirelat();
    cmd.args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(&pcaps[0])
        .arg("--port1")
        .arg(&pcaps[1]);
    cmd.args(["--workers", "2"]);
    let mut p = Collector::spawn(cmd);
    let addr: std::net::SocketAddr =
        p.wait_for_line("metrics on http://").trim_end_matches("/metrics").parse().expect("metrics address");
    let early = Collector::http_get(addr, "/metrics");
    assert!(early.starts_with("HTTP/1.1 200"), "{early}");
    assert!(early.contains("wirelat_point_info{point=\"4\",mode=\"offline\"} 1"), "{early}");
    let page = scrape_final(addr);
    let log = log_fields(&p.wait_for_line("offline run finished"));
    let control = log_fields(&p.wait_for_line("control thread work"));
    let (status, text) = p.wait_exit();
    assert!(status.success(), "{text}");
    // The control thread's time (scripts/control-cost.sh reads it): publishing encoded every
    // epoch, and is part of the harvest polls.
    let ns = |k: &str| {
        control.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("{k} in {control:?}"))
    };
    assert!(ns("publish_ns_per_packet") > 0.0, "{control:?}");
    assert!(ns("control_ns_per_packet") >= ns("publish_ns_per_packet"), "{control:?}");
    assert!(
        (ns("merge_ns_per_packet") + ns("publish_ns_per_packet") - ns("control_ns_per_packet")).abs() < 0.02,
        "{control:?}"
    );
    assert_eq!(control.get("workers").map(String::as_str), Some("2"), "{control:?}");
    let logged =
        |k: &str| log.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("{k} in {log:?}"));
    let exposed = |s: &str| series_value(&page, s).unwrap_or_else(|| panic!("{s} missing:\n{page}"));
    assert_eq!(exposed("wirelat_port_rx_frames_total{port=\"0\"}"), logged("frames_port0"));
    assert_eq!(exposed("wirelat_port_rx_frames_total{port=\"1\"}"), logged("frames_port1"));
    assert_eq!(exposed("wirelat_measure_measured_packets_total"), logged("measured"));
    assert_eq!(exposed("wirelat_measure_late_packets_total"), logged("late"));
    let skipped: f64 = page
        .lines()
        .filter(|l| l.starts_with("wirelat_measure_skipped_frames_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(skipped, logged("skipped"));
    assert_eq!(exposed("wirelat_publish_epochs_total"), logged("epochs"));
    assert_eq!(exposed("wirelat_publish_messages_total"), logged("messages"));
    assert_eq!(exposed("wirelat_publish_body_bytes_total"), logged("body_bytes"));
    assert_eq!(exposed("wirelat_harvest_epochs_total"), logged("epochs"));
    assert!(logged("measured") > 1000.0 && logged("messages") > 10.0, "{log:?}");
}

/// The collector's delay families against its own records, two points shipping the seeded
/// trace: per segment, the histogram of epoch means counts and sums exactly the records'
/// means, the latest gauge is one of them, and the loss counters add the records' sent and
/// lost; per point and exchange kind, the fridge histogram's `histogram_quantile` p50 and p99
/// lie within one fixed bucket of the fridge record's own quantiles (one record per kind: the
/// group spans the whole run).
#[test]
fn collector_exposes_delay_histograms_that_agree_with_its_records() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[synopses.fridge]\n";
    let config = collector_config(d, &key, synopses);
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replace(
        "[collector]\n",
        "[report]\nfridge_epochs = 1000\n[collector]\nmetrics_listen = \"127.0.0.1:0\"\n",
    );
    std::fs::write(&config, text).expect("config");
    let mut collector = Collector::start(&config);
    ship_points(d, &collector, &key, synopses, &trace_pcaps(d), "");
    let addr: std::net::SocketAddr =
        collector.wait_for_line("metrics on http://").trim_end_matches("/metrics").parse().expect("address");
    // The fridge groups close with the points' final watermarks: wait for their records (the
    // series exist at 0 from the start, so wait for counts at both points).
    let started = std::time::Instant::now();
    let counted = |page: &str, point: &str| {
        page.lines()
            .filter(|l| l.starts_with(&format!("wirelat_fridge_delay_seconds_count{{point=\"{point}\"")))
            .any(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v > 0.0))
    };
    let page = loop {
        let page = Collector::http_get(addr, "/metrics");
        if (counted(&page, "a") && counted(&page, "b")) || started.elapsed() > RUN_TIMEOUT {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let log = collector.stop();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(d.join("records.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let value = |s: &str| series_value(&page, s).unwrap_or_else(|| panic!("{s} missing:\n{page}\n{log}"));
    for seg in [40, 41] {
        let mine: Vec<&serde_json::Value> =
            records.iter().filter(|r| r["record"] == "segment" && r["segment"] == seg).collect();
        let means: Vec<f64> =
            mine.iter().filter_map(|r| r["mean_ns"]["value"].as_f64()).map(|m| m * 1e-9).collect();
        assert!(means.len() >= 4, "segment {seg}: {mine:?}");
        let l = format!("{{segment=\"{seg}\",synopsis=\"lda\"}}");
        assert_eq!(value(&format!("wirelat_segment_delay_seconds_count{l}")), means.len() as f64);
        let sum: f64 = means.iter().sum();
        let got = value(&format!("wirelat_segment_delay_seconds_sum{l}"));
        assert!((got - sum).abs() <= 1e-9 * sum, "{got} vs {sum}");
        let latest = value(&format!("wirelat_segment_delay_latest_seconds{l}"));
        assert!(means.iter().any(|m| (m - latest).abs() <= 1e-12 * m), "{latest} not among {means:?}");
        let known: Vec<_> = mine.iter().filter(|r| r["loss"]["lost"].is_u64()).collect();
        let sent: u64 = known.iter().map(|r| r["loss"]["sent"].as_u64().expect("sent")).sum();
        let lost: u64 = known.iter().map(|r| r["loss"]["lost"].as_u64().expect("lost")).sum();
        assert_eq!(value(&format!("wirelat_segment_sent_packets_total{l}")), sent as f64);
        assert_eq!(value(&format!("wirelat_segment_lost_packets_total{l}")), lost as f64);
    }
    let bucket = |x: f64| BUCKETS.iter().position(|&ub| x <= ub).unwrap_or(BUCKETS.len()) as i64;
    let mut compared = 0;
    for r in records.iter().filter(|r| r["record"] == "fridge_quantiles") {
        let (point, kind) = (r["point"].as_str().expect("point"), r["kind"].as_str().expect("kind"));
        let buckets = histogram_buckets(
            &page,
            "wirelat_fridge_delay_seconds",
            &format!("point=\"{point}\",point_id=\"{}\",kind=\"{kind}\"", r["point_id"]),
        );
        for q in r["quantiles"].as_array().expect("quantiles") {
            let (p, want) = (q["q"].as_f64().expect("q"), q["delay_ns"].as_f64().expect("delay") * 1e-9);
            // The latest-quantile gauge holds this record's value exactly (one group per kind).
            let gauge = page
                .lines()
                .filter(|l| l.starts_with("wirelat_fridge_latest_quantile_ns{"))
                .filter(|l| {
                    [format!("point=\"{}\"", r["point_id"]), format!("kind=\"{kind}\""), format!("q=\"{p}\"")]
                        .iter()
                        .all(|label| l.contains(label.as_str()))
                })
                .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no latest-quantile gauge for {point} {kind} q{p}:\n{page}"));
            assert_eq!(gauge, q["delay_ns"].as_f64().expect("delay"), "{point} {kind} q{p}");
            if p != 0.5 && p != 0.99 {
                continue;
            }
            let got = histogram_quantile(p, &buckets).unwrap_or_else(|| panic!("{point} {kind}:\n{page}"));
            assert!(
                (bucket(got) - bucket(want)).abs() <= 1,
                "{point} {kind} q{p}: {got} s vs the record's {want} s"
            );
            compared += 1;
        }
    }
    assert!(compared >= 2, "no fridge quantile compared:\n{page}\n{log}");
    assert_eq!(value("wirelat_peer_metric_series_dropped_total"), 0.0);
}

/// The collector's fixed bucket bounds (docs/monitoring.md).
const BUCKETS: [f64; 22] = wirelat_control::report::delay::BUCKETS_SECONDS;
