//! MoonGen replays a generated trace pair into two points and a collector, and the records
//! agree with `wirelat offline` on the same pcaps:
//!
//! ```text
//! ns w13m:  MoonGen w13mg0 ⇄ w13ml0 ┐ point A (wirelat run) ┌ w13ml1 ⇄ w13mg1 MoonGen
//!           MoonGen w13mg2 ⇄ w13ml2 ┘ point B (wirelat run) └ w13ml3 ⇄ w13mg3 MoonGen
//!           collector on 127.0.0.1 (inside the namespace)
//! ```
//!
//! MoonGen (`moongen/replay-pair.lua`, one task, the four pcaps merged on one clock at their
//! recorded timing) sends a_port0/a_port1 into A and b_port0/b_port1 into B. Both points
//! measure with the fridge, LDA and RDA and ship to a collector; `wirelat offline` measures
//! the same pcaps and ships to a second collector. Checked:
//! - every frame was replayed and none was lost on the way (`imissed`, drops = 0);
//! - the fridge's requests, responses and samples per point and kind: exactly equal, no
//!   unmatched response (see the comment at the check for why, and for its limit);
//! - per segment and synopsis, the packets the estimates cover (Σ `loss.sent`): exactly equal;
//! - the packet-weighted mean delay within E of offline's stretched by the replay (MoonGen
//!   runs at `RATE` of the recorded speed, so every gap, delays included, is 1 / RATE longer).
//!   E is derived from the replay: a packet's measured delay is its stretched delay plus
//!   e = (L_B − L_A) + (S_B − S_A), L being MoonGen's send lateness (handed to the driver minus
//!   due, ≥ 0; with gaps kept it accumulates, and the maximum the script logs includes that)
//!   and S the time from hand-over to wirelat's stamp (≥ 0, bounded by `STAMP_ALLOWANCE_NS`).
//!   So |e| ≤ max L + max S = E, and a mean of such errors is within E too;
//! - lost packets: at most offline's plus those whose error can move them across an epoch
//!   boundary at one point only (then missing from one epoch's pairing): N·(E + d/RATE)/T for
//!   N packets of delay d and epochs of T, rounded up.
//!
//! MoonGen is built once from `../shared/tools/moongen` (beside the checkout in CI) into
//! `target/moongen` (about 4.5 min on 2 idle cores, 27 min measured with five builds sharing
//! them), or taken from `WIRELAT_MOONGEN` (its `MoonGen/` directory). Needs root; skips with a
//! message when not root, or when neither a built MoonGen nor its sources are found.
//! Everything it creates is named `w13m*` and removed by a Drop guard.

#![cfg(feature = "dpdk")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

const NS: &str = "w13m";
/// MoonGen's rate multiplier: the replay stretches every gap, delays included, by 1 / RATE.
const RATE: f64 = 0.25;
/// Epoch length of every point (run and offline).
const EPOCH_MS: u64 = 1000;
/// Bound on the time from MoonGen's hand-over of a frame to wirelat's stamp (kernel veth, the
/// af_packet ring, a busy-polling worker that shares its core and may be descheduled for a few
/// scheduler periods). An assumption of this machine, not a measurement: see the module text.
const STAMP_ALLOWANCE_NS: f64 = 50e6;

/// The namespace with four veth pairs; removed on drop.
struct Topology;

impl Topology {
    fn new() -> Topology {
        let _ = sh(&format!("ip netns del {NS} 2>/dev/null"));
        must(&format!("ip netns add {NS}"));
        let t = Topology;
        let x = format!("ip netns exec {NS}");
        must(&format!("{x} ip link set lo up"));
        must(&format!("{x} sysctl -qw net.ipv6.conf.all.disable_ipv6=1"));
        for i in 0..4 {
            must(&format!("{x} ip link add w13mg{i} type veth peer name w13ml{i}"));
            for dev in [format!("w13mg{i}"), format!("w13ml{i}")] {
                must(&format!("{x} ethtool -K {dev} tx off rx off tso off gso off gro off"));
                must(&format!("{x} ip link set {dev} mtu 1500 up"));
            }
        }
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = sh(&format!("ip netns del {NS} 2>/dev/null"));
    }
}

/// MoonGen's `MoonGen/` directory, built if needed, or why the test cannot have it.
fn moongen() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("WIRELAT_MOONGEN") {
        return Ok(PathBuf::from(dir));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dest = root.join("target/moongen");
    if dest.join("MoonGen/build/MoonGen").is_file() {
        return Ok(dest.join("MoonGen"));
    }
    let build =
        [root.join("../shared/tools/moongen/build.sh"), root.join("../../shared/tools/moongen/build.sh")]
            .into_iter()
            .find(|p| p.is_file())
            .ok_or("no MoonGen built in target/moongen and no ../shared/tools/moongen/build.sh")?;
    eprintln!("moongen: building it once into {} (minutes)", dest.display());
    let started = std::time::Instant::now();
    let out = Command::new("bash").arg(&build).arg(&dest).output().expect("run build.sh");
    assert!(out.status.success(), "MoonGen build failed: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("moongen: built in {:.0} s", started.elapsed().as_secs_f64());
    Ok(dest.join("MoonGen"))
}

/// The synopses of every point and of both collectors.
const SYNOPSES: &str = "[synopses.fridge]\n[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n\
    [synopses.rda]\nbinding = { mode = \"online\", buckets_per_bank = 512 }\ncache_capacity = 65536\n";

/// The measurement part of a point's config: point `id`, shipping to `peer`, JSON lines into
/// `json`.
fn point_config(id: u32, peer: std::net::SocketAddr, key: &Path, json: &Path) -> String {
    format!(
        "[point]\nid = {id}\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = {EPOCH_MS}\n\
         [ship]\npeer = \"{peer}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 30000\n\
         [output]\njson = \"{}\"\n{SYNOPSES}",
        key.display(),
        json.display()
    )
}

/// Requests, responses, samples + unmatched responses, and samples per kind, summed over a
/// point's fridge epochs.
fn fridge_counts(path: &Path) -> std::collections::BTreeMap<String, [u64; 4]> {
    let mut out = std::collections::BTreeMap::new();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if v["kind"] != "fridge" {
            continue;
        }
        for k in v["summary"]["report"]["kinds"].as_array().expect("kinds") {
            let c = &k["diagnostics"]["counters"];
            let slot: &mut [u64; 4] = out.entry(k["kind"].as_str().expect("kind").to_owned()).or_default();
            let n = |key: &str| c[key].as_u64().unwrap_or_else(|| panic!("no {key} in {c}"));
            slot[0] += n("requests");
            slot[1] += n("responses");
            slot[2] += n("samples") + n("unmatched_responses");
            slot[3] += n("samples");
        }
    }
    out
}

/// Per (synopsis, segment): packets covered, lost (where known), and the packet-weighted mean
/// delay in ns, over a collector's segment records.
fn segments(path: &Path) -> std::collections::BTreeMap<(String, u64), (u64, u64, f64)> {
    let mut sums: std::collections::BTreeMap<(String, u64), (u64, u64, f64, u64)> = Default::default();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if r["record"] != "segment" {
            continue;
        }
        let key =
            (r["synopsis"].as_str().expect("synopsis").to_owned(), r["segment"].as_u64().expect("segment"));
        let s = sums.entry(key).or_default();
        let sent = r["loss"]["sent"].as_u64().unwrap_or(0);
        s.0 += sent;
        s.1 += r["loss"]["lost"].as_u64().unwrap_or(0);
        if let Some(mean) = r["mean_ns"]["value"].as_f64() {
            s.2 += mean * sent as f64;
            s.3 += sent;
        }
    }
    sums.into_iter().map(|(k, (sent, lost, sum, n))| (k, (sent, lost, sum / n.max(1) as f64))).collect()
}

/// The number after `key=` in a log line.
fn field(line: &str, key: &str) -> u64 {
    log_fields(line).get(key).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn moongen_replays_a_trace_pair_into_two_points_and_a_collector_as_offline_measures_it() {
    if must("id -u").trim() != "0" {
        eprintln!("SKIPPED moongen: not root (network namespaces and af_packet need it)");
        return;
    }
    let mg = match moongen() {
        Ok(dir) => dir,
        Err(why) => {
            eprintln!("SKIPPED moongen: {why}");
            return;
        }
    };
    let dir = scratch();
    let d = dir.path();
    let _topology = Topology::new();
    let generated = wirelat()
        .args(["gen-trace", "--out"])
        .arg(d.join("pair"))
        .args(["--duration", "2s", "--rate", "2000", "--seed", "7", "--delay", "constant:200us"])
        .output()
        .expect("gen-trace");
    assert!(generated.status.success(), "{}", describe(&generated));
    let pcaps = trace_pcaps(&d.join("pair"));
    let frames: usize = pcaps.iter().flatten().map(|p| read_frames(p).len()).sum();
    let key = write_key(d);

    // The offline reference: both points measure the pcaps and ship to their own collector.
    let off_dir = d.join("offline");
    std::fs::create_dir_all(&off_dir).expect("dir");
    let off_collector = Collector::start(&collector_config(&off_dir, &key, SYNOPSES));
    let points: Vec<_> = [(1, "a"), (2, "b")]
        .into_iter()
        .zip(&pcaps)
        .map(|((id, p), pcaps)| {
            let config = off_dir.join(format!("{p}.toml"));
            std::fs::write(
                &config,
                point_config(id, off_collector.addr, &key, &off_dir.join(format!("{p}.jsonl"))),
            )
            .expect("config");
            wirelat()
                .args(["offline", "--config"])
                .arg(&config)
                .arg("--port0")
                .arg(&pcaps[0])
                .arg("--port1")
                .arg(&pcaps[1])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("offline")
        })
        .collect();
    for p in points {
        let out = wait_with_timeout(p, RUN_TIMEOUT);
        assert!(out.status.success(), "{}", describe(&out));
    }

    // The replay: the collector and both points inside the namespace.
    let run_dir = d.join("run");
    std::fs::create_dir_all(&run_dir).expect("dir");
    let in_ns = |args: &[&str]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", NS, env!("CARGO_BIN_EXE_wirelat")]).args(args);
        c
    };
    let config = collector_config(&run_dir, &key, SYNOPSES);
    let mut run_collector = Collector::spawn({
        let mut c = in_ns(&["collect", "--config"]);
        c.arg(&config);
        c
    });
    let addr: std::net::SocketAddr = run_collector.wait_for_line("listening on ").parse().expect("address");
    let mut points = Vec::new();
    for (id, p, first) in [(1, "a", 0), (2, "b", 2)] {
        let config = run_dir.join(format!("{p}.toml"));
        std::fs::write(
            &config,
            format!(
                "[eal]\n{}\nmain_core = 0\n[workers]\ncores = [1]\n[stats]\ninterval_ms = 0\n\
                 [[port]]\ndevice = \"net_af_packet0,iface=w13ml{first}\"\nmtu = 1500\n\
                 [[port]]\ndevice = \"net_af_packet1,iface=w13ml{}\"\nmtu = 1500\n{}",
                eal_args_toml(&run_dir.join(p)),
                first + 1,
                point_config(id, addr, &key, &run_dir.join(format!("{p}.jsonl")))
            ),
        )
        .expect("config");
        let mut point = Collector::spawn({
            let mut c = in_ns(&["run", "--config"]);
            c.arg(&config);
            c
        });
        point.wait_for_line("forwarding");
        points.push(point);
    }
    let conf = d.join("dpdk-conf.lua");
    let vdevs: Vec<String> =
        (0..4).map(|i| format!("\"--vdev=net_af_packet{i},iface=w13mg{i},framecnt=4096\"")).collect();
    std::fs::write(
        &conf,
        format!(
            "DPDKConfig {{\n  cores = {{0, 1, 2, 3, 4, 5, 6, 7}}, lcoreCpus = \"0\",\n  cli = {{ \"--no-huge\", \"-m\", \"512\", \
             \"--no-pci\", \"--no-shconf\", \"--file-prefix\", \"w13mg\", {} }},\n}}\n",
            vdevs.join(", ")
        ),
    )
    .expect("dpdk conf");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("moongen/replay-pair.lua");
    // A quarter of the recorded speed, gaps kept (a late frame delays the next ones instead of
    // bunching a request with its response): at recorded speed without gaps kept, a response
    // handed over microseconds after its request reached the worker's port-1 poll before the
    // request reached its port-0 poll, and the fridge lost 17 of 93 DNS samples.
    let start_replay = || {
        Command::new("ip")
            .args(["netns", "exec", NS, "./build/MoonGen"])
            .arg(&script)
            .arg(format!("--dpdk-config={}", conf.display()))
            .args(["--dev", "0", "--dev", "1", "--dev", "2", "--dev", "3"])
            .args(pcaps.iter().flatten())
            .args(["-r", &RATE.to_string(), "--keep-gaps", "1"])
            .current_dir(&mg)
            .output()
            .expect("run MoonGen")
    };
    // MoonGen's DPDK 17.08 af_packet driver failed once to start ("could not set PACKET_FANOUT"),
    // before sending anything: its sockets take a fanout group id made from the process id,
    // which can clash with a group the points' sockets hold in the namespace (likely, not
    // verified). Another process id makes another id, so a refused start is tried again.
    let mut replay = start_replay();
    for _ in 0..2 {
        if replay.status.success() || !String::from_utf8_lossy(&replay.stdout).contains("PACKET_FANOUT") {
            break;
        }
        replay = start_replay();
    }
    let mg_log = String::from_utf8_lossy(&replay.stdout).replace("\x1b[", "");
    assert!(replay.status.success(), "{mg_log}{}", String::from_utf8_lossy(&replay.stderr));
    // Both points stop at once: each closes only once the collector paired its last epochs
    // with the other's.
    for p in &points {
        let _ = sh(&format!("kill -TERM {}", p.id()));
    }
    let logs: Vec<String> = points.into_iter().map(|p| p.stop()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let collector_log = run_collector.stop();
    let off_log = off_collector.stop();

    // Every frame replayed; the largest lateness of any stream.
    let number_after = |line: &str, word: &str| -> f64 {
        let rest = &line[line.find(word).unwrap_or_else(|| panic!("no {word} in {line}")) + word.len()..];
        rest.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("{line}"))
    };
    let sent: f64 =
        mg_log.lines().filter(|l| l.contains(" frames in ")).map(|l| number_after(l, "sent ")).sum();
    assert_eq!(sent as usize, frames, "{mg_log}");
    let lateness_max = mg_log
        .lines()
        .filter(|l| l.contains("lateness"))
        .map(|l| number_after(l, "max "))
        .fold(0.0, f64::max);
    assert!(lateness_max > 0.0, "{mg_log}");
    // Nothing lost between MoonGen and the points, or inside them.
    for log in &logs {
        for port in 0..2 {
            let line = log
                .lines()
                .find(|l| {
                    l.contains("port counters")
                        && l.contains("label=\"final\"")
                        && l.contains(&format!(" port={port} "))
                })
                .unwrap_or_else(|| panic!("no final counters:\n{log}"));
            for key in ["dev_imissed", "tx_dropped", "oversize_dropped", "truncated_dropped", "dev_rx_nombuf"]
            {
                assert_eq!(field(line, key), 0, "{line}");
            }
        }
    }

    // The fridge: every request, response and sample offline counted, exactly, at each point.
    //
    // Why this holds, and when it would not (issue 20; W13, fourth session):
    // - The stamps: DPDK 22.11's af_packet driver passes no kernel time, so a frame is stamped
    //   when its worker processes it, and the fridge pairs in processing order.
    // - The race: with port 0 polled and processed before port 1 is polled, a worker
    //   descheduled between the two polls (milliseconds on these shared cores) finds, when
    //   MoonGen handed a request (port 0) and its response (port 1, 1.6 ms later after the
    //   stretch) to the kernel during that time, the response in this iteration and the
    //   request in the next: an unmatched response and an orphan request. Measured with that
    //   loop: 4-20 of 90-93 samples missing per point and kind in 2 of 3 runs, 0-6 in the
    //   third (BENCHMARKS "W13 (fourth session)").
    // - The fix (`worker::run`): port 1 is polled first, port 0 second, and port 0's burst is
    //   processed first. A response in port 1's burst was handed over before that poll and
    //   its request earlier still (one CPU's backlog delivers them in order), so port 0's later
    //   poll holds the request, unless more than a burst (32 frames, about 200 ms of this
    //   replay) waited on port 0. Exact in 3 of 3 runs by hand, and asserted here.
    // - Its limit: exact only because this trace's requests all arrive on port 0. A request on
    //   port 1 whose response reaches port 0 before port 0's next poll is still processed
    //   after its response; no single order serves both directions. Exact pairing for both
    //   would need frames held back until every port has been polled past their arrival:
    //   arrival stamps (only net_pcap live ports give them, `[clock] source = "kernel"`),
    //   everything stamped before a poll visible to it (the kernel fills the ring on another
    //   CPU), and held mbufs carried across iterations. Not built. Inline on live traffic the
    //   race cannot happen either way: a response exists only after the worker forwarded its
    //   request.
    for p in ["a", "b"] {
        let run = fridge_counts(&run_dir.join(format!("{p}.jsonl")));
        let off = fridge_counts(&off_dir.join(format!("{p}.jsonl")));
        assert!(off.values().all(|c| c[2] == c[3] && c[3] > 40), "offline pairs everything: {off:?}");
        for (kind, o) in &off {
            let r = run.get(kind).unwrap_or_else(|| panic!("point {p}: no {kind} in run: {run:?}"));
            eprintln!(
                "point {p} {kind}: run requests/responses/samples {:?}, offline {:?}",
                [r[0], r[1], r[3]],
                [o[0], o[1], o[3]]
            );
            assert_eq!(
                [r[0], r[1], r[3], r[2] - r[3]],
                [o[0], o[1], o[3], 0],
                "point {p} {kind}: requests, responses, samples, unmatched responses: run vs offline"
            );
        }
    }
    // The segments: the same packets, the mean within E, the loss within the crossings.
    let run = segments(&run_dir.join("records.jsonl"));
    let off = segments(&off_dir.join("records.jsonl"));
    assert_eq!(run.len(), 4, "LDA and RDA for segments 40 and 41: {run:?}\n{collector_log}");
    assert_eq!(run.keys().collect::<Vec<_>>(), off.keys().collect::<Vec<_>>(), "{off_log}");
    let e = lateness_max + STAMP_ALLOWANCE_NS;
    for (k, &(sent_off, lost_off, mean_off)) in &off {
        let (sent_run, lost_run, mean_run) = run[k];
        eprintln!(
            "{k:?}: sent {sent_run} / {sent_off}, lost {lost_run} / {lost_off}, mean {mean_run:.0} / {mean_off:.0} ns, E {e:.0} ns"
        );
        assert_eq!(sent_run, sent_off, "{k:?}: packets covered, run vs offline");
        assert!(
            (mean_run - mean_off / RATE).abs() <= e,
            "{k:?}: mean {mean_run} ns vs offline's {mean_off} ns / {RATE}, E = {e} ns"
        );
        let crossings =
            (sent_off as f64 * (e + mean_off.abs() / RATE) / (EPOCH_MS as f64 * 1e6)).ceil() as u64;
        assert!(
            lost_run <= lost_off + crossings,
            "{k:?}: lost {lost_run} vs offline {lost_off} + {crossings}"
        );
    }
}
