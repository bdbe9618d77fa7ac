//! `wirelat offline` (also in a build without DPDK): the measurement over pcap files, its JSON
//! lines, its body dumps, exact shard merging with several emulated workers, and shipping
//! through `[ship]` to `wirelat collect`, whose records are scored against the generator's truth.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Child;

use common::*;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::lda::{Lda, LdaConfig};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::topology::{Point, Tap};
use wirelat_trace::traffic::TrafficConfig;

const CONFIG: &str = r#"
[point]
id = 4
[segments]
forward = 40
reverse = 41
[epochs]
length_ms = 100
[synopses.fridge]
[synopses.lda]
banks = [{ rows = 256, p = 1.0 }]
seed = 9
[synopses.rda]
binding = { mode = "online", buckets_per_bank = 256 }
cache_capacity = 65536
"#;

/// A generated two-point trace pair (4 pcaps and truth.json) in `dir`: 500 ms of synthetic
/// traffic at 6000 packets/s, a constant 30 µs segment delay, no loss. Returns A's two pcaps.
fn trace(dir: &Path) -> [PathBuf; 2] {
    let traffic =
        TrafficConfig { packet_rate_pps: 6_000.0, duration_ns: 500_000_000, ..TrafficConfig::default() };
    let seg = SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Constant { delay: 30_000.0 }),
        loss: LossModel::None,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    generate(&GenConfig::synthetic(3, traffic, seg))
        .expect("generate")
        .write_dir(dir)
        .expect("write the pair");
    [0, 1].map(|port| dir.join(format!("{}.pcap", Tap { point: Point::A, port }.name())))
}

fn offline(dir: &Path, pcaps: &[PathBuf; 2], workers: usize) -> PathBuf {
    let out = dir.join(format!("w{workers}"));
    std::fs::create_dir_all(&out).expect("mkdir");
    let config = out.join("c.toml");
    let text = format!(
        "[output]\njson = \"{}\"\ndump_dir = \"{}\"\n{CONFIG}",
        out.join("e.jsonl").display(),
        out.join("dump").display()
    );
    std::fs::write(&config, text).expect("config");
    run_offline(&config, pcaps, &["--workers", &workers.to_string()]);
    out
}

fn lines(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("e.jsonl"))
        .expect("json lines")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

/// Frames the packet layer measures: IPv4 or IPv6 directly on Ethernet (the generated traffic
/// has no VLAN tags; its only other frames are ARP).
fn ip_frames(pcaps: &[PathBuf; 2]) -> [u64; 2] {
    let count = |p: &Path| {
        read_frames(p).iter().filter(|f| matches!(f.get(12..14), Some([0x08, 0x00] | [0x86, 0xdd]))).count()
            as u64
    };
    [count(&pcaps[0]), count(&pcaps[1])]
}

/// Per epoch and fridge kind: the samples in each histogram bin (low_ns, high_ns, samples).
type FridgeBins = BTreeMap<(u64, String), Vec<(u64, u64, u64)>>;

fn fridge_bins(lines: &[serde_json::Value]) -> FridgeBins {
    let mut out = FridgeBins::new();
    for l in lines.iter().filter(|l| l["kind"] == "fridge") {
        let epoch = l["epoch"].as_u64().expect("epoch");
        for k in l["summary"]["report"]["kinds"].as_array().expect("kinds") {
            let bins = k["all"]["histogram"]
                .as_array()
                .expect("histogram")
                .iter()
                .map(|b| {
                    let field = |name: &str| b[name].as_u64().expect("histogram field");
                    (field("low_ns"), field("high_ns"), field("samples"))
                })
                .collect();
            out.insert((epoch, k["kind"].as_str().expect("kind").to_owned()), bins);
        }
    }
    out
}

fn dump(out: &Path) -> BTreeMap<String, Vec<u8>> {
    read_dump(&out.join("dump"))
}

#[test]
fn offline_measures_every_packet_into_epochs_and_merges_workers_exactly() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let ip = ip_frames(&pcaps);
    assert!(ip[0] > 1000 && ip[1] > 1000, "both directions carry traffic: {ip:?}");
    let one = offline(d, &pcaps, 1);
    let three = offline(d, &pcaps, 3);
    let (a, b) = (lines(&one), lines(&three));
    // 500 ms of traffic in 100 ms epochs (plus the 30 ms segment delay and the server's think
    // time after the last request): 5 to 7 epochs, each with 1 fridge + 2 LDA + 2 RDA lines.
    let epochs: BTreeSet<u64> = a.iter().map(|l| l["epoch"].as_u64().expect("epoch")).collect();
    assert!((5..=7).contains(&epochs.len()), "{epochs:?}");
    assert_eq!(a.len(), epochs.len() * 5);
    assert_eq!(b.len(), a.len());
    for (lines, workers) in [(&a, 1), (&b, 3)] {
        for l in lines.iter() {
            assert_eq!(l["point"], 4);
            assert_eq!(l["epoch_len_ns"], 100_000_000);
            assert_eq!(l["complete"], true);
            assert_eq!(l["summary"]["shards"], workers, "every emulated worker gives a shard: {l}");
            let seg = l["segment"].as_u64().expect("segment");
            match l["kind"].as_str().expect("kind") {
                "fridge" => assert_eq!(seg, 0),
                "lda" | "rda" => assert!(seg == 40 || seg == 41, "{seg}"),
                k => panic!("unexpected kind {k}"),
            }
        }
    }
    // Every IP frame is measured exactly once, in the LDA epoch of its direction (port 0 is the
    // forward segment 40, port 1 the reverse segment 41), with one worker and with three.
    for lines in [&a, &b] {
        let measured = |seg: u64| -> u64 {
            lines
                .iter()
                .filter(|l| l["kind"] == "lda" && l["segment"] == seg)
                .map(|l| l["summary"]["measured"].as_u64().expect("measured"))
                .sum()
        };
        assert_eq!([measured(40), measured(41)], ip);
    }
    // Three emulated workers: LDA and RDA bodies are byte-identical to one worker's (exact
    // merge of shards; each flow stays on one worker).
    let (da, db) = (dump(&one), dump(&three));
    assert_eq!(da.keys().collect::<Vec<_>>(), db.keys().collect::<Vec<_>>());
    assert_eq!(da.len(), a.len(), "one body per JSON line");
    for (name, bytes) in &da {
        if !name.starts_with("fridge") {
            assert!(Some(bytes) == db.get(name), "{name} differs between 1 and 3 workers");
        }
    }
    // The fridge: each worker has its own slots, so the weights may differ with the worker
    // count, but with entry probability 1 and slots never full every response is matched on the
    // worker that holds its request: the same samples fall into the same bins, epoch by epoch.
    let (fa, fb) = (fridge_bins(&a), fridge_bins(&b));
    let samples: u64 = fa.values().flatten().map(|(_, _, n)| n).sum();
    assert!(samples > 20, "handshakes and DNS exchanges give fridge samples: {samples}");
    assert_eq!(fa, fb);
    // The bodies decode with the configuration and count the measured packets.
    let cfg = LdaConfig::single_bank(256, 1.0, 9);
    let total: u64 = da
        .iter()
        .filter(|(n, _)| n.starts_with("lda"))
        .map(|(_, b)| Lda::decode(&cfg, b).expect("decode").total_packets())
        .sum();
    assert_eq!(total, ip[0] + ip[1]);
}

#[test]
fn offline_reports_bad_input_clearly() {
    let dir = scratch();
    let d = dir.path();
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).expect("config");
    std::fs::write(d.join("junk.pcap"), b"not a pcap at all").expect("junk");
    let run = || {
        wirelat()
            .args(["offline", "--config"])
            .arg(&config)
            .arg("--port0")
            .arg(d.join("junk.pcap"))
            .output()
            .expect("run")
    };
    let output = run();
    // Bad input: exit code 2 and one sentence naming the file.
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a pcap file"), "{}", describe(&output));
    // A directory given as a pcap: the OS's reason, not pcap-file's "Error reading bytes".
    std::fs::create_dir(d.join("dir.pcap")).expect("dir");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("dir.pcap"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(err.contains("cannot read") && err.contains("Is a directory"), "{err}");
    assert!(!err.contains("Error reading bytes"), "{err}");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("junk.pcap"))
        .args(["--workers", "0"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--workers"), "{}", describe(&output));
    // A configuration within every documented range whose RDA buffers cannot fit in this
    // machine: refused with the figure before anything is allocated (it aborted on
    // allocation).
    std::fs::write(
        &config,
        "[epochs]\nring = 64\n[synopses.rda]\nbinding = { mode = \"online\", buckets_per_bank = 256 }\n\
         cache_capacity = 134217728\n",
    )
    .expect("config");
    let output = run();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(err.contains("the RDA buffers alone need") && err.contains("MiB of memory and swap"), "{err}");
    std::fs::write(&config, "[epochs]\nlength_ms = 0\n").expect("config");
    let output = run();
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("epochs.length_ms"), "{}", describe(&output));
}

#[test]
fn offline_points_ship_their_epochs_to_a_collector_that_estimates_the_segment() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    // A packet identity seed other than the default at both points and the collector: the
    // two-point fingerprints cover it, so a point that shipped under any other would be refused.
    let synopses =
        "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[packet]\nidentity_seed = 5\n";
    let collector = Collector::start(&collector_config(d, &key, synopses));
    ship_points(d, &collector, &key, synopses, &trace_pcaps(d), "");
    // Point a again, measuring with another identity seed: the collector refuses it by its
    // hello, naming the packet settings, and accepts none of its epochs.
    let config = d.join("a-other-seed.toml");
    std::fs::write(
        &config,
        format!(
            "[point]\nid = 1\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n\
             [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 1000\n\
             {}",
            collector.addr,
            key.display(),
            synopses.replace("identity_seed = 5", "identity_seed = 6")
        ),
    )
    .expect("point config");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("a_port0.pcap"))
        .arg("--port1")
        .arg(d.join("a_port1.pcap"))
        .env("RUST_LOG", "info")
        .output()
        .expect("run wirelat offline");
    let log = String::from_utf8_lossy(&output.stderr);
    let refused =
        log.lines().find(|l| l.contains("the peer refused this point")).unwrap_or_else(|| panic!("{log}"));
    assert!(refused.contains("identity_seed"), "{refused}");
    let closed = log.lines().find(|l| l.contains("network sink closed")).unwrap_or_else(|| panic!("{log}"));
    assert!(closed.contains("acked=0") && !closed.contains("given_up=0"), "{closed}");
    // A run that lost epochs says so and fails.
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(log.contains("epoch synopses were not delivered to the peer"), "{log}");
    let log = collector.stop();
    assert!(log.contains("fingerprint_mismatch"), "{log}");
    // The collector paired both points' epochs into one LDA record per segment and epoch; the
    // scorer compares each with the generator's truth. The delay is a constant 30 µs without
    // loss, so LDA's usable rows hold exactly equal packets with equal delays: the mean is exact
    // up to float rounding. Only a packet that crosses an epoch boundary inside the segment
    // (A's epoch k, B's epoch k+1) makes its row's counts differ, and LDA drops that row. The
    // 1e-6 bound leaves room for rounding only; 5 epochs × 2 directions must be scored.
    let output = wirelat()
        .args(["check", "--truth"])
        .arg(d.join("truth.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .args(["--bound", "lda.mean_rel_err_max=1e-6", "--bound", "lda.min_records=10"])
        .output()
        .expect("check");
    assert!(output.status.success(), "{}\n--- collector\n{log}", describe(&output));
}

/// A queue to the peer that holds one epoch synopsis: without backpressure nearly every epoch
/// was given up as `queue_full` (and the run still exited 0); offline now waits for the
/// collector's acknowledgements, so everything arrives and every record is scored.
#[test]
fn offline_waits_for_the_peer_instead_of_giving_epochs_up() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n";
    let collector = Collector::start(&collector_config(d, &key, synopses));
    ship_points(d, &collector, &key, synopses, &trace_pcaps(d), "queue_messages = 1");
    let log = collector.stop();
    let output = wirelat()
        .args(["check", "--truth"])
        .arg(d.join("truth.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .args(["--bound", "lda.min_records=10"])
        .output()
        .expect("check");
    assert!(output.status.success(), "{}\n--- collector\n{log}", describe(&output));
}

/// A peer that never answers: the run waits `close_timeout_ms` without an acknowledgement,
/// then gives up, and exits 1 with one sentence counting what was lost, by reason.
#[test]
fn offline_with_an_unreachable_peer_exits_non_zero_with_a_summary() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let key = write_key(d);
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let config = d.join("a.toml");
    std::fs::write(
        &config,
        format!(
            "[point]\nid = 1\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n\
             [ship]\npeer = \"127.0.0.1:{port}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\n\
             close_timeout_ms = 300\nqueue_messages = 2\n[synopses.lda]\nbanks = [{{ rows = 256, p = 1.0 }}]\n",
            key.display()
        ),
    )
    .expect("config");
    let output = offline_output(&config, &pcaps, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("wirelat: error: "), "{err}");
    assert!(last.contains("epoch synopses were not delivered to the peer (queue_full "), "{last}");
    assert!(last.contains("unacked_at_close 2"), "{last}");
}

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

/// Many collectors (`[[route]]`): three collectors, four points. Points 1 and 2 measure
/// segments 40 and 41, points 3 and 4 (the same traffic) segments 50 and 51. X owns 40, 41 and
/// the fridge of points 1 and 2; Y owns 50; Z owns 51 and the fridge of points 3 and 4, so
/// points 3 and 4 split their output over two collectors. (One collector owning segments of
/// both pairs is the next test.) Every segment's records are
/// at exactly one collector, and nothing is lost: every sink of every point had each delivered
/// epoch synopsis acknowledged.
#[test]
fn three_collectors_split_four_points_by_segment() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[synopses.fridge]\n";
    let start = |name: &str, points: [u32; 2], segments: &[(u32, u32, u32)]| {
        let mut text = format!(
            "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\n",
            key.display(),
            d.join(format!("records-{name}.jsonl")).display()
        );
        for (id, point) in points.iter().zip(["a", "b"]) {
            text.push_str(&format!("[[point]]\nid = {id}\nname = \"{point}\"\n"));
        }
        for (id, up, down) in segments {
            text.push_str(&format!("[[segment]]\nid = {id}\nupstream = {up}\ndownstream = {down}\n"));
        }
        text.push_str(synopses);
        let config = d.join(format!("collector-{name}.toml"));
        std::fs::write(&config, text).expect("collector config");
        Collector::start(&config)
    };
    let x = start("x", [1, 2], &[(40, 1, 2), (41, 2, 1)]);
    let y = start("y", [3, 4], &[(50, 3, 4)]);
    let z = start("z", [3, 4], &[(51, 4, 3)]);
    let ship = |c: &Collector| {
        format!(
            "ship = {{ peer = \"{}\", key_file = \"{}\", backoff_initial_ms = 20, close_timeout_ms = 30000 }}\n",
            c.addr,
            key.display()
        )
    };
    let route = |c: &Collector, segments: &str, fridge: bool| {
        format!("[[route]]\nsegments = [{segments}]\nfridge = {fridge}\n{}", ship(c))
    };
    let points = [
        (1, "a", 40, 41, route(&x, "40, 41", true)),
        (2, "b", 40, 41, route(&x, "40, 41", true)),
        (3, "a", 50, 51, route(&y, "50", false) + &route(&z, "51", true)),
        (4, "b", 50, 51, route(&y, "50", false) + &route(&z, "51", true)),
    ];
    let children: Vec<(usize, Child)> = points
        .iter()
        .map(|(id, pcaps, forward, reverse, routes)| {
            let config = d.join(format!("point{id}.toml"));
            let text = format!(
                "[point]\nid = {id}\n[segments]\nforward = {forward}\nreverse = {reverse}\n[epochs]\nlength_ms = 100\n\
                 {routes}{synopses}"
            );
            std::fs::write(&config, text).expect("point config");
            offline_logged(&config, &d.join(format!("{pcaps}_port0.pcap")), &d.join(format!("{pcaps}_port1.pcap")))
                .spawn()
                .map(|c| (routes.matches("[[route]]").count(), c))
                .expect("start wirelat offline")
        })
        .collect();
    for (routes, child) in children {
        let output = wait_with_timeout(child, RUN_TIMEOUT);
        assert!(output.status.success(), "{}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        let closed: Vec<_> =
            log.lines().filter(|l| l.contains("network sink closed")).map(log_fields).collect();
        assert_eq!(closed.len(), routes, "{log}");
        for c in closed {
            assert_eq!(c["given_up"], "0", "{c:?}");
            assert_eq!(c["acked"], c["delivered"], "{c:?}");
            assert!(c["delivered"].parse::<u64>().expect("delivered") >= 5, "{c:?}");
        }
    }
    let mut seen: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (name, c) in [("x", x), ("y", y), ("z", z)] {
        let log = c.stop();
        let text = std::fs::read_to_string(d.join(format!("records-{name}.jsonl"))).expect("records");
        let mut count: BTreeMap<String, usize> = BTreeMap::new();
        for r in text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON")) {
            let what = match r["record"].as_str() {
                Some("segment") => format!("segment {}", r["segment"]),
                Some("fridge_quantiles") => format!("fridge {}", r["point_id"]),
                _ => continue,
            };
            *count.entry(what).or_default() += 1;
        }
        for (what, n) in &count {
            assert!(*n >= 4, "collector {name}: {n} records of {what}\n{log}");
            seen.entry(what.clone()).or_default().insert(name);
        }
    }
    let expected: BTreeMap<String, BTreeSet<&str>> = [
        ("segment 40", "x"),
        ("segment 41", "x"),
        ("segment 50", "y"),
        ("segment 51", "z"),
        ("fridge 1", "x"),
        ("fridge 2", "x"),
        ("fridge 3", "z"),
        ("fridge 4", "z"),
    ]
    .into_iter()
    .map(|(w, c)| (w.to_owned(), BTreeSet::from([c])))
    .collect();
    assert_eq!(seen, expected);
}

/// A collector owning segments of two point pairs (`[[point]]` 1–4; names repeat, ids tell
/// them apart): points 1 and 2 measure segments 40 and 41, points 3 and 4 the same traffic as
/// 50 and 51, all shipping to the one collector, which owns 40, 41 and 50 but not 51. Every
/// owned segment has a record for every epoch, and pair (3, 4)'s segment 50 gets exactly the
/// estimates pair (1, 2)'s segment 40 gets; each point's fridge is reported under its own id.
/// Segment 51 is misrouted: its epochs are acknowledged and dropped, counted per point and
/// segment in `wirelat_peer_unowned_epochs_total`, and logged once per point and segment.
#[test]
fn one_collector_owns_segments_of_two_point_pairs_and_names_misrouted_ones() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[synopses.fridge]\n";
    let mut text = format!(
        "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\nmetrics_listen = \"127.0.0.1:0\"\n",
        key.display(),
        d.join("records.jsonl").display()
    );
    for (id, name) in [(1, "a"), (2, "b"), (3, "a"), (4, "b")] {
        text.push_str(&format!("[[point]]\nid = {id}\nname = \"{name}\"\n"));
    }
    for (id, up, down) in [(40, 1, 2), (41, 2, 1), (50, 3, 4)] {
        text.push_str(&format!("[[segment]]\nid = {id}\nupstream = {up}\ndownstream = {down}\n"));
    }
    text.push_str(synopses);
    let config = d.join("collector.toml");
    std::fs::write(&config, text).expect("collector config");
    let mut collector = Collector::start(&config);
    let metrics: std::net::SocketAddr =
        collector.wait_for_line("metrics on http://").trim_end_matches("/metrics").parse().expect("address");
    let children: Vec<(u32, Child)> = [(1, "a", 40, 41), (2, "b", 40, 41), (3, "a", 50, 51), (4, "b", 50, 51)]
        .into_iter()
        .map(|(id, pcaps, forward, reverse)| {
            let config = d.join(format!("point{id}.toml"));
            let text = format!(
                "[point]\nid = {id}\n[segments]\nforward = {forward}\nreverse = {reverse}\n[epochs]\nlength_ms = 100\n\
                 [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 30000\n{synopses}",
                collector.addr,
                key.display()
            );
            std::fs::write(&config, text).expect("point config");
            let child =
                offline_logged(&config, &d.join(format!("{pcaps}_port0.pcap")), &d.join(format!("{pcaps}_port1.pcap")))
                    .spawn()
                    .expect("start wirelat offline");
            (id, child)
        })
        .collect();
    let mut epochs = BTreeMap::new();
    for (id, child) in children {
        let output = wait_with_timeout(child, RUN_TIMEOUT);
        assert!(output.status.success(), "point {id}: {}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        let closed = log.lines().find(|l| l.contains("network sink closed")).map(log_fields);
        let closed = closed.unwrap_or_else(|| panic!("point {id}: {log}"));
        assert_eq!(closed["given_up"], "0", "point {id}: {closed:?}");
        assert_eq!(closed["acked"], closed["delivered"], "point {id}: {closed:?}");
        let done = log.lines().find(|l| l.contains("offline run finished")).map(log_fields);
        let n: u64 = done.and_then(|f| f.get("epochs")?.parse().ok()).unwrap_or_else(|| panic!("{log}"));
        epochs.insert(id, n);
    }
    assert!(epochs.values().all(|&n| n == epochs[&1] && n >= 5), "{epochs:?}");
    let page = Collector::http_get(metrics, "/metrics");
    let log = collector.stop();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(d.join("records.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    // Per owned segment: one record per epoch; the estimates without the segment's own
    // names (segment id, points) are the same for both pairs.
    let of_segment = |seg: u64| -> Vec<serde_json::Value> {
        records
            .iter()
            .filter(|r| r["record"] == "segment" && r["segment"] == seg)
            .map(|r| {
                let mut r = r.clone();
                let o = r.as_object_mut().expect("object");
                for k in ["segment", "upstream", "downstream", "upstream_id", "downstream_id"] {
                    o.remove(k);
                }
                r
            })
            .collect()
    };
    for seg in [40, 41, 50] {
        assert_eq!(of_segment(seg).len() as u64, epochs[&1], "segment {seg}:\n{records:?}\n{log}");
    }
    assert_eq!(of_segment(50), of_segment(40));
    assert!(of_segment(51).is_empty());
    let fridge_ids: BTreeSet<u64> = records
        .iter()
        .filter(|r| r["record"] == "fridge_quantiles")
        .filter_map(|r| r["point_id"].as_u64())
        .collect();
    assert_eq!(fridge_ids, BTreeSet::from([1, 2, 3, 4]));
    // Same traffic at points 1 and 3 (both "a"): two series with the same counts.
    let count = |id: u32| {
        page.lines()
            .filter(|l| {
                l.starts_with(&format!("wirelat_fridge_delay_seconds_count{{point=\"a\",point_id=\"{id}\","))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert!(count(1) > 0.0 && count(1) == count(3), "{page}");
    // The misrouted segment: every epoch of it counted per point, one log line per point.
    for (point, n) in [(3, epochs[&3]), (4, epochs[&4])] {
        let s =
            format!("wirelat_peer_unowned_epochs_total{{point=\"{point}\",segment=\"51\",synopsis=\"lda\"}}");
        assert_eq!(series_value(&page, &s), Some(n as f64), "{s}:\n{page}");
        let logged: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("acknowledged and dropped") && l.contains(&format!("point={point}")))
            .collect();
        assert_eq!(logged.len(), 1, "point {point}: {logged:?}");
        assert!(logged[0].contains("segment=51"), "{logged:?}");
    }
    assert!(!page.contains("wirelat_peer_unowned_epochs_total{point=\"1\""), "{page}");
}
