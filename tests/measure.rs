//! Measurement on the data path: the appliance in trace mode on DPDK's pcap device, with one and
//! with two workers, measures exactly what `wirelat offline` measures over the same pcaps, epoch
//! by epoch and byte for byte (LDA, LDS, RDA, COLATE and the fridge); a slow control thread
//! causes counted overruns but never stalls forwarding.

#![cfg(feature = "dpdk")]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use wirelat_dataplane::pipeline::steer;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::topology::{Point, Tap};
use wirelat_trace::traffic::TrafficConfig;

/// Every synopsis on, sized for a small trace.
const SYNOPSES: &str = r#"
[packet]
identity_seed = 99
[synopses.fridge]
seed = 5
[synopses.lda]
banks = [{ rows = 128, p = 0.5 }, { rows = 128, p = 0.25 }]
seed = 3
[synopses.lds]
rows = 2
width = 512
flow_capacity = 4096
[synopses.rda]
binding = { mode = "online", buckets_per_bank = 512 }
cache_capacity = 65536
[synopses.colate]
counters = 2003
cells_per_flow = 8
counter_bits = 48
epoch_threshold_ticks = 1000000000000
# µs ticks from the trace generator's start time.
tick_ns = 1000
origin_ns = 1700000000000000000
"#;

/// Point A's two pcaps of a seeded trace pair (ns timestamps: the µs truncation of the pcap
/// device and of the offline runner are part of what is compared).
fn trace(dir: &Path) -> [PathBuf; 2] {
    trace_at(dir, 8_000.0, 600_000_000)
}

/// [`trace`] at `packet_rate_pps` for `duration_ns`.
fn trace_at(dir: &Path, packet_rate_pps: f64, duration_ns: u64) -> [PathBuf; 2] {
    let traffic = TrafficConfig { packet_rate_pps, duration_ns, ..TrafficConfig::default() };
    let seg = SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Weibull { shape: 0.7, mean: 40_000.0 }),
        loss: LossModel::Uniform { rate: 0.01 },
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    let pair = generate(&GenConfig::synthetic(11, traffic, seg)).expect("generate a trace pair");
    let mut out = Vec::new();
    for port in 0..2u8 {
        let tap = Tap { point: Point::A, port };
        let path = dir.join(format!("{}.pcap", tap.name()));
        let frames: Vec<(u64, Vec<u8>)> =
            pair.capture(tap).iter().map(|c| (c.ts_ns, c.frame.clone())).collect();
        write_timed(&path, &frames);
        out.push(path);
    }
    [out[0].clone(), out[1].clone()]
}

/// Writes a nanosecond pcap.
fn write_timed(path: &Path, frames: &[(u64, Vec<u8>)]) {
    wirelat_trace::pcap_io::write_file(path, frames.iter().map(|(t, f)| (*t, f.as_slice())))
        .expect("write pcap");
}

fn read_timed(path: &Path) -> Vec<(u64, Vec<u8>)> {
    wirelat_trace::pcap_io::read_file(path)
        .expect("read pcap")
        .into_iter()
        .map(|r| (r.ts_ns, r.data))
        .collect()
}

/// The measurement part of the config, with outputs into `out`.
fn measurement_toml(out: &Path, extra: &str) -> String {
    format!(
        "[point]\nid = 1\n[segments]\nforward = 10\nreverse = 11\n[clock]\nsource = \"trace\"\n\
         [output]\njson = \"{}\"\ndump_dir = \"{}\"\n{extra}\n{SYNOPSES}",
        out.join("epochs.jsonl").display(),
        out.join("dump").display()
    )
}

/// The bodies a run dumped: file name → bytes.
fn dump(out: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(out.join("dump")).expect("dump directory") {
        let p = e.expect("entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        m.insert(name, std::fs::read(&p).expect("read body"));
    }
    m
}

/// Runs `wirelat offline` over the pcaps with `workers` emulated workers.
fn offline(dir: &Path, pcaps: &[PathBuf; 2], workers: usize) -> PathBuf {
    let epochs = "[epochs]\nlength_ms = 50\n";
    offline_in(dir, &format!("offline{workers}"), &pcaps[0], Some(&pcaps[1]), workers, epochs).0
}

/// [`offline`] into `dir/name`, `port1` optional, with `extra` (the `[epochs]` table, at
/// least) added to the config.
fn offline_in(
    dir: &Path,
    name: &str,
    port0: &Path,
    port1: Option<&Path>,
    workers: usize,
    extra: &str,
) -> (PathBuf, std::process::Output) {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).expect("mkdir");
    let config = out.join("offline.toml");
    std::fs::write(&config, measurement_toml(&out, extra)).expect("write config");
    let mut cmd = wirelat();
    cmd.args(["offline", "--config"]).arg(&config).arg("--port0").arg(port0);
    if let Some(p) = port1 {
        cmd.arg("--port1").arg(p);
    }
    let output = cmd
        .args(["--workers", &workers.to_string()])
        .env("RUST_LOG", "info")
        .output()
        .expect("run wirelat offline");
    assert!(output.status.success(), "{}", describe(&output));
    (out, output)
}

/// Runs the appliance in trace mode: each port's pcap split over `workers` rx queues by the
/// steering rule; returns the output directory and the run's output.
fn appliance(
    dir: &Path,
    pcaps: &[PathBuf; 2],
    workers: usize,
    extra: &str,
) -> (PathBuf, std::process::Output) {
    appliance_in(dir, &format!("run{workers}"), pcaps, workers, "", extra)
}

/// [`appliance`] into `dir/name`, with `workers_extra` added to `[workers]`.
fn appliance_in(
    dir: &Path,
    name: &str,
    pcaps: &[PathBuf; 2],
    workers: usize,
    workers_extra: &str,
    extra: &str,
) -> (PathBuf, std::process::Output) {
    let (out, config) = appliance_config(dir, name, pcaps, workers, workers_extra, extra);
    let output = run_config(&config);
    assert!(output.status.success(), "{}", describe(&output));
    (out, output)
}

/// The output directory and the configuration file of an [`appliance_in`] run, not started.
fn appliance_config(
    dir: &Path,
    name: &str,
    pcaps: &[PathBuf; 2],
    workers: usize,
    workers_extra: &str,
    extra: &str,
) -> (PathBuf, PathBuf) {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).expect("mkdir");
    let mut devices = Vec::new();
    for (port, pcap) in pcaps.iter().enumerate() {
        let frames = read_timed(pcap);
        let mut args = Vec::new();
        for q in 0..workers {
            let mine: Vec<(u64, Vec<u8>)> =
                frames.iter().filter(|(_, f)| steer::worker_of(f, workers) == q).cloned().collect();
            let rx = out.join(format!("in{port}_q{q}.pcap"));
            write_timed(&rx, &mine);
            args.push(format!("rx_pcap={}", rx.display()));
        }
        for q in 0..workers {
            args.push(format!("tx_pcap={}", out.join(format!("out{port}_q{q}.pcap")).display()));
        }
        devices.push(format!("net_pcap{port},{}", args.join(",")));
    }
    // Two lcores may share a CPU (this machine has two): worker 0 shares CPU 0 with the main lcore.
    let cores = if workers == 1 { "[1]" } else { "[0, 1]" };
    let text = format!(
        "[eal]\n{}\nmain_core = 0\n[workers]\ncores = {cores}\n{workers_extra}\n[mempool]\ndata_room_bytes = 9344\n\
         [stats]\ninterval_ms = 0\n[stop]\nidle_ms = 400\nafter_ms = 50000\n\
         [[port]]\ndevice = \"{}\"\n[[port]]\ndevice = \"{}\"\n{}",
        eal_args_toml(&out),
        devices[0],
        devices[1],
        measurement_toml(&out, extra)
    );
    let config = out.join("run.toml");
    std::fs::write(&config, text).expect("write config");
    (out, config)
}

/// Asserts both runs dumped the same epochs with byte-identical bodies, and returns how many
/// bodies per synopsis.
fn assert_same_bodies(
    a: &BTreeMap<String, Vec<u8>>,
    b: &BTreeMap<String, Vec<u8>>,
) -> BTreeMap<String, usize> {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "the same epochs and synopses");
    let mut per_kind = BTreeMap::new();
    for (name, bytes) in a {
        assert!(bytes == &b[name], "{name}: bodies differ");
        *per_kind.entry(name.split('-').next().unwrap_or("").to_owned()).or_insert(0) += 1;
    }
    per_kind
}

/// The JSON lines of a run, parsed.
fn lines(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("epochs.jsonl")).expect("JSON lines");
    text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect()
}

fn appliance_equals_offline(workers: usize) -> std::process::Output {
    let dir = scratch();
    let d = dir.path().to_owned();
    let d = d.as_path();
    // WIRELAT_KEEP=1 keeps the pcaps and both runs' outputs for a look after a failure.
    if std::env::var_os("WIRELAT_KEEP").is_some() {
        eprintln!("keeping {}", d.display());
        std::mem::forget(dir);
    }
    let pcaps = trace(d);
    let off = offline(d, &pcaps, workers);
    let (run, output) = appliance(d, &pcaps, workers, "[epochs]\nlength_ms = 50\noverrun = \"wait\"\n");
    let per_kind = assert_same_bodies(&dump(&off), &dump(&run));
    // 600 ms of traffic in 50 ms epochs: every synopsis has about a dozen epochs (two-point ones
    // twice: one per direction).
    for kind in ["fridge", "lda", "lds", "rda", "colate"] {
        let n = per_kind.get(kind).copied().unwrap_or(0);
        assert!(n >= 10, "{kind}: {n} epoch bodies\n{per_kind:?}");
    }
    assert_eq!(per_kind["lda"], 2 * per_kind["fridge"]);
    // The JSON lines say the same.
    let (a, b) = (lines(&off), lines(&run));
    assert_eq!(a.len(), b.len());
    assert_eq!(a.len(), per_kind.values().sum::<usize>());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "JSON lines differ");
        assert_eq!(x["complete"], true);
    }
    // Measured packets, over LDA's per-direction lines, equal the packets of the trace that the
    // packet layer measures; every frame was forwarded.
    let measured: u64 =
        a.iter().filter(|l| l["kind"] == "lda").map(|l| l["summary"]["measured"].as_u64().unwrap()).sum();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("measured {measured} ")), "{}", describe(&output));
    assert!(stdout.contains("late 0 overrun_epochs 0 overrun_packets 0"), "{}", describe(&output));
    for (port, pcap) in pcaps.iter().enumerate() {
        let sent: usize =
            (0..workers).map(|q| read_frames(&run.join(format!("out{}_q{q}.pcap", 1 - port))).len()).sum();
        assert_eq!(sent, read_timed(pcap).len(), "every frame of port {port} was forwarded");
    }
    output
}

/// Asserts that every queue q built its epoch buffers on its own lcore (`lcores[q]`) before the
/// first port started: a started port whose worker is still building would take frames that
/// nobody polls.
fn assert_built_before_ports_started(output: &std::process::Output, lcores: &[u32]) {
    let log = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = log.lines().collect();
    let started = lines.iter().position(|l| l.contains("port started"));
    let Some(started) = started else { panic!("no port started\n{}", describe(output)) };
    for (q, lcore) in lcores.iter().enumerate() {
        let built = lines.iter().position(|l| {
            let f = log_fields(l);
            l.contains("worker built its epoch buffers")
                && f.get("queue") == Some(&q.to_string())
                && f.get("lcore") == Some(&lcore.to_string())
        });
        match built {
            Some(b) => assert!(b < started, "queue {q} built after a port started\n{}", describe(output)),
            None => panic!("queue {q} did not log its build on lcore {lcore}\n{}", describe(output)),
        }
    }
}

#[test]
fn one_worker_measures_exactly_what_offline_measures() {
    let output = appliance_equals_offline(1);
    // The worker (lcore 1; the main lcore is 0) built its own epoch buffers, so their pages
    // were first touched on its core (NUMA-local), not on the main lcore.
    assert_built_before_ports_started(&output, &[1]);
}

#[test]
fn two_workers_measure_exactly_what_offline_measures() {
    let output = appliance_equals_offline(2);
    // Workers on lcores 1 and 2 (cores 0 and 1; the main lcore shares core 0).
    assert_built_before_ports_started(&output, &[1, 2]);
}

/// A trace replay (`overrun = "wait"`) ships with backpressure: through a queue to the peer
/// that holds one epoch synopsis, nothing is given up, as its workers wait for the control
/// thread too. (Without it, the demo lost COLATE epochs as `queue_full` once the peer fell 16
/// epochs behind; here nearly every epoch went, and the run exited 1.) The collector knows
/// none of these segments, so it acknowledges each synopsis as it arrives.
#[test]
fn a_trace_replay_waits_for_the_peer_instead_of_giving_epochs_up() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let key = write_key(d);
    let collector = Collector::start(&collector_config(d, &key, SYNOPSES));
    let extra = format!(
        "[epochs]\nlength_ms = 50\noverrun = \"wait\"\n[ship]\npeer = \"{}\"\nkey_file = \"{}\"\n\
         queue_messages = 1\nbackoff_initial_ms = 20\nclose_timeout_ms = 30000\n",
        collector.addr,
        key.display()
    );
    let (_, output) = appliance_in(d, "shipped", &pcaps, 1, "", &extra);
    let log = String::from_utf8_lossy(&output.stderr);
    let closed = log.lines().find(|l| l.contains("network sink closed")).unwrap_or_else(|| panic!("{log}"));
    assert!(closed.contains("given_up=0") && !closed.contains("delivered=0 "), "{closed}");
    collector.stop();
}

#[test]
fn a_slow_control_thread_causes_counted_overruns_and_no_stall() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    // 10 ms epochs, two buffers, and a control thread that sleeps 300 ms before each harvest:
    // the replay runs through many epochs while no buffer comes back.
    let (run, output) = appliance(
        d,
        &pcaps,
        1,
        "[epochs]\nlength_ms = 10\nring = 2\noverrun = \"skip\"\n[debug]\nharvest_delay_ms = 300\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| -> u64 {
        let i =
            stdout.find(&format!("{name} ")).unwrap_or_else(|| panic!("no {name}: {}", describe(&output)));
        stdout[i + name.len() + 1..].split_whitespace().next().and_then(|w| w.parse().ok()).expect("a number")
    };
    assert!(field("overrun_epochs") > 0, "{}", describe(&output));
    assert!(field("overrun_packets") > 0, "{}", describe(&output));
    // No stall: every frame went through, none dropped.
    for (port, pcap) in pcaps.iter().enumerate() {
        let n = read_timed(pcap).len();
        let sent = read_frames(&run.join(format!("out{}_q0.pcap", 1 - port))).len();
        assert_eq!(sent, n, "port {port}: every frame forwarded");
        assert!(stdout.contains(&format!("port {port}: rx {n} ")), "{stdout}");
    }
    assert!(stdout.contains("tx_dropped 0"), "{stdout}");
    // Whatever was measured was published; overrun packets were not measured into any epoch.
    let published: u64 = lines(&run)
        .iter()
        .filter(|l| l["kind"] == "lda")
        .map(|l| l["summary"]["measured"].as_u64().unwrap())
        .sum();
    assert_eq!(published + field("overrun_packets"), field("measured"), "{}", describe(&output));
}

/// A sparse trace (a burst of 32 frames spans dozens of epochs) replayed with `overrun =
/// "wait"` behind a slow control thread: the worker spends seconds on one burst, waiting for
/// epoch buffers, and reads nothing new meanwhile. That is not an idle link. Counted as one,
/// the run stopped by `[stop] idle_ms` with most of the trace never read and no counter
/// saying so (`wirelat demo` on sparse real captures replayed about 85 % of them).
#[test]
fn a_worker_waiting_for_epoch_buffers_is_not_idle() {
    let dir = scratch();
    let d = dir.path();
    // About 300 frames per second per direction: a 32-frame burst spans about ten of the 10-ms
    // epochs, and each harvest that frees a buffer comes 60 ms after the last, so one burst
    // takes longer than the 400-ms idle limit.
    let pcaps = trace_at(d, 600.0, 1_000_000_000);
    let (_, output) = appliance(
        d,
        &pcaps,
        1,
        "[epochs]\nlength_ms = 10\nring = 2\noverrun = \"wait\"\n[debug]\nharvest_delay_ms = 60\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for (port, pcap) in pcaps.iter().enumerate() {
        let n = read_timed(pcap).len();
        assert!(n > 100, "port {port}: {n} frames");
        assert!(stdout.contains(&format!("port {port}: rx {n} ")), "{}", describe(&output));
    }
    assert!(stdout.contains("overrun_epochs 0 "), "{}", describe(&output));
}

/// Two workers, one done within a few epochs and polling empty queues, the other on a sparse
/// flow whose bursts each span dozens of epochs, waiting for epoch buffers: the run goes on
/// until the busy one has read everything. Before: the idle worker followed the trace time only
/// as far as the busy one's last finished burst, so it never closed the epochs the busy one
/// waited on; the run stopped by `idle_ms` with 32 of the sparse flow's 100 frames read (or,
/// counting idle time only while every worker is idle, at the `after_ms` deadline).
#[test]
fn one_idle_worker_does_not_stop_a_busy_one() {
    let dir = scratch();
    let d = dir.path();
    let server = [203, 0, 113, 1];
    let on = |q: usize| {
        (1u8..=250)
            .map(|h| [198, 51, 100, h])
            .find(|&c| steer::worker_of(&udp_frame_between(64, c, server), 2) == q)
            .expect("a client address for each worker")
    };
    let (dense, sparse) = (on(0), on(1));
    let t0 = 1_700_000_000_000_000_000u64;
    let mut fwd: Vec<(u64, Vec<u8>)> =
        (0..64u64).map(|i| (t0 + i * 500_000, udp_frame_between(64, dense, server))).collect();
    fwd.extend((0..100u64).map(|i| (t0 + i * 10_000_000, udp_frame_between(64, sparse, server))));
    fwd.sort_by_key(|(t, _)| *t);
    // Replies to the dense flow only (steering is not symmetric: they may land on either worker).
    let rev: Vec<(u64, Vec<u8>)> =
        (0..64u64).map(|i| (t0 + 100_000 + i * 500_000, udp_frame_between(64, server, dense))).collect();
    let pcaps = [d.join("a_port0.pcap"), d.join("a_port1.pcap")];
    write_timed(&pcaps[0], &fwd);
    write_timed(&pcaps[1], &rev);
    let (_, output) = appliance(
        d,
        &pcaps,
        2,
        "[epochs]\nlength_ms = 10\nring = 2\noverrun = \"wait\"\n[debug]\nharvest_delay_ms = 60\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for (port, n) in [(0, fwd.len()), (1, rev.len())] {
        assert!(stdout.contains(&format!("port {port}: rx {n} ")), "{}", describe(&output));
    }
}

/// Monitor mode (rx-only mirror ports, one direction each) measures exactly what inline mode
/// measures on the same frames, and transmits nothing.
#[test]
fn monitor_mode_measures_exactly_what_inline_mode_measures() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let extra = "[epochs]\nlength_ms = 50\noverrun = \"wait\"\n";
    let (inline, _) = appliance_in(d, "inline", &pcaps, 1, "", extra);
    let (monitor, output) = appliance_in(d, "monitor", &pcaps, 1, "monitor = true", extra);
    let per_kind = assert_same_bodies(&dump(&inline), &dump(&monitor));
    assert!(per_kind.get("fridge").copied().unwrap_or(0) >= 10, "{per_kind:?}");
    assert_eq!(lines(&inline), lines(&monitor), "JSON lines differ");
    for port in 0..2 {
        assert!(
            read_frames(&monitor.join(format!("out{port}_q0.pcap"))).is_empty(),
            "port {port} transmitted"
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    for (port, pcap) in pcaps.iter().enumerate() {
        let rx = read_timed(pcap).len();
        assert!(stdout.contains(&format!("port {port}: rx {rx} tx 0 ")), "{}", describe(&output));
    }
}

/// An IPv4/UDP frame of `len` bytes from 198.51.100.1 to 203.0.113.1 with a valid header
/// checksum.
fn udp_frame(len: usize) -> Vec<u8> {
    udp_frame_between(len, [198, 51, 100, 1], [203, 0, 113, 1])
}

/// An IPv4/UDP frame of `len` bytes from `src` to `dst` with a valid header checksum.
fn udp_frame_between(len: usize, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let sum: u32 = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

/// Monitor mode on ONE port that carries both directions (a mirror/SPAN port), each packet's
/// direction from `[monitor] inside` (the generator's client prefixes): `run` (the second port
/// receives nothing) and `offline` (one pcap) give byte-identical synopses to inline mode on
/// the two ports, and packets with both or neither address inside are counted, not measured.
#[test]
fn one_mirror_port_split_by_inside_prefixes_measures_what_inline_measures() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    // The mirror port's stream: both directions by time, port 0 first on ties (as `run` and
    // `offline` merge two ports), with one frame between two inside hosts and one between two
    // outside hosts in the middle.
    let (fwd, rev) = (read_timed(&pcaps[0]), read_timed(&pcaps[1]));
    let mut mirror: Vec<(u64, Vec<u8>)> = Vec::with_capacity(fwd.len() + rev.len() + 2);
    let (mut i, mut j) = (0, 0);
    while i < fwd.len() || j < rev.len() {
        if j == rev.len() || (i < fwd.len() && fwd[i].0 <= rev[j].0) {
            mirror.push(fwd[i].clone());
            i += 1;
        } else {
            mirror.push(rev[j].clone());
            j += 1;
        }
    }
    let (mid, at) = (mirror.len() / 2, mirror[mirror.len() / 2].0);
    mirror.insert(mid + 1, (at, udp_frame_between(80, [198, 51, 100, 7], [203, 0, 113, 9])));
    mirror.insert(mid + 2, (at, udp_frame_between(80, [192, 0, 2, 1], [192, 0, 2, 2])));
    let one = [d.join("mirror.pcap"), d.join("nothing.pcap")];
    write_timed(&one[0], &mirror);
    write_timed(&one[1], &[]);
    let extra = "[epochs]\nlength_ms = 50\noverrun = \"wait\"\n";
    let split = format!(
        "{extra}[monitor]\ninside = [\"198.51.100.0/24\", \"203.0.113.0/24\", \"2001:db8:c::/48\"]\n"
    );
    let (inline, _) = appliance_in(d, "inline", &pcaps, 1, "", extra);
    let (run, output) = appliance_in(d, "mirror", &one, 1, "monitor = true", &split);
    let per_kind = assert_same_bodies(&dump(&inline), &dump(&run));
    assert!(per_kind.get("fridge").copied().unwrap_or(0) >= 10, "{per_kind:?}");
    assert!(per_kind.get("lds").copied().unwrap_or(0) >= 10, "{per_kind:?}");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("split_neither=1 split_both=1"), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("port 0: rx {} tx 0 ", mirror.len())), "{}", describe(&output));
    let (off, output) = offline_in(d, "mirror-offline", &one[0], None, 1, &split);
    assert_same_bodies(&dump(&inline), &dump(&off));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("split_neither=1 split_both=1"), "{}", describe(&output));
}

/// `run` inspects every byte of a chained frame, as `offline` does: a 20 000-byte datagram
/// (three mbufs of the 9 344-byte data room) is measured, not cut at 16 KiB and skipped as
/// truncated (monitor mode, so no egress limit applies).
#[test]
fn run_measures_long_chained_frames_whole_like_offline() {
    let dir = scratch();
    let d = dir.path();
    let frames: Vec<(u64, Vec<u8>)> = [60usize, 20_000, 1514]
        .iter()
        .enumerate()
        .map(|(i, &n)| (1_700_000_000_000_000_000 + i as u64 * 1000, udp_frame(n)))
        .collect();
    let pcaps = [d.join("a.pcap"), d.join("b.pcap")];
    write_timed(&pcaps[0], &frames);
    write_timed(&pcaps[1], &[]);
    let extra = "[epochs]\nlength_ms = 50\noverrun = \"wait\"\n";
    let (_, output) = appliance_in(d, "monitor", &pcaps, 1, "monitor = true", extra);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("measured 3 skipped 0 "), "{}", describe(&output));
    let off = offline(d, &pcaps, 1);
    let measured: u64 = lines(&off)
        .iter()
        .filter(|l| l["kind"] == "lda")
        .map(|l| l["summary"]["measured"].as_u64().unwrap())
        .sum();
    assert_eq!(measured, 3, "offline measures the same three frames");
}

/// `[metrics]` on `wirelat run`: the endpoint answers while the appliance forwards, and its
/// final values (served for `linger_ms` after the end) equal the final counters of the log:
/// every port counter, every measurement counter and the harvest's epochs.
#[test]
fn run_metrics_endpoint_serves_the_final_counters_of_the_log() {
    let dir = scratch();
    let pcaps = trace(dir.path());
    let (_, config) = appliance_config(
        dir.path(),
        "metrics",
        &pcaps,
        2,
        "",
        "[epochs]\nlength_ms = 50\n[metrics]\nlisten = \"127.0.0.1:0\"\nlinger_ms = 5000\n",
    );
    let mut cmd = wirelat();
    cmd.args(["run", "--config"]).arg(&config);
    let mut p = Collector::spawn(cmd);
    let addr: std::net::SocketAddr =
        p.wait_for_line("metrics on http://").trim_end_matches("/metrics").parse().expect("metrics address");
    let early = Collector::http_get(addr, "/metrics");
    assert!(early.contains("wirelat_point_info{point=\"1\",mode=\"run\"} 1"), "{early}");
    let page = scrape_final(addr);
    let (status, log) = p.wait_exit();
    assert!(status.success(), "{log}");
    let exposed = |s: &str| series_value(&page, s).unwrap_or_else(|| panic!("{s} missing:\n{page}"));
    let final_line = |msg: &str, extra: &str| {
        let line = log
            .lines()
            .find(|l| {
                l.contains(msg) && l.contains("label=\"final\"") && l.contains(extra) && !l.contains("queue=")
            })
            .unwrap_or_else(|| panic!("no final {msg:?} {extra} line:\n{log}"));
        log_fields(line)
    };
    let num = |f: &std::collections::BTreeMap<String, String>, k: &str| -> f64 {
        f.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} in {f:?}"))
    };
    for port in 0..2 {
        let f = final_line("port counters", &format!("port={port} "));
        let name = f["name"].clone();
        let l = format!("port=\"{port}\",name=\"{name}\"");
        assert_eq!(exposed(&format!("wirelat_port_rx_frames_total{{{l}}}")), num(&f, "rx"));
        assert_eq!(exposed(&format!("wirelat_port_tx_frames_total{{{l}}}")), num(&f, "tx"));
        assert_eq!(exposed(&format!("wirelat_port_tx_retries_total{{{l}}}")), num(&f, "tx_retries"));
        for (reason, field) in
            [("tx_full", "tx_dropped"), ("oversize", "oversize_dropped"), ("truncated", "truncated_dropped")]
        {
            let s = format!("wirelat_port_dropped_frames_total{{{l},reason=\"{reason}\"}}");
            assert_eq!(exposed(&s), num(&f, field), "{s}");
        }
        for (counter, field) in [("rx", "dev_rx"), ("tx", "dev_tx"), ("imissed", "dev_imissed")] {
            let s = format!("wirelat_port_device_frames_total{{{l},counter=\"{counter}\"}}");
            assert_eq!(exposed(&s), num(&f, field), "{s}");
        }
        assert!(num(&f, "rx") > 1000.0, "{f:?}");
    }
    let m = log
        .lines()
        .rev()
        .find(|l| {
            l.contains("measure counters") && l.contains("label=\"final\"") && !l.contains("worker=Some")
        })
        .map(log_fields)
        .unwrap_or_else(|| panic!("no final measure counters:\n{log}"));
    assert_eq!(exposed("wirelat_measure_frames_total"), num(&m, "frames"));
    assert_eq!(exposed("wirelat_measure_measured_packets_total"), num(&m, "measured"));
    for reason in ["arp", "unknown_ethertype", "fragment", "truncated", "malformed", "encapsulation"] {
        let s = format!("wirelat_measure_skipped_frames_total{{reason=\"{reason}\"}}");
        assert_eq!(exposed(&s), num(&m, &format!("skipped_{reason}")), "{s}");
    }
    for (family, field) in [
        ("untimed_packets", "untimed"),
        ("late_packets", "late"),
        ("overrun_epochs", "overrun_epochs"),
        ("overrun_packets", "overrun_packets"),
        ("overrun_waits", "waits"),
    ] {
        assert_eq!(exposed(&format!("wirelat_measure_{family}_total")), num(&m, field), "{family}");
    }
    let h = log.lines().find(|l| l.contains(" harvest ") || l.ends_with("harvest")).map(log_fields);
    let h = h.unwrap_or_else(|| panic!("no harvest line:\n{log}"));
    assert_eq!(exposed("wirelat_harvest_epochs_total"), num(&h, "epochs"));
    assert_eq!(exposed("wirelat_harvest_incomplete_epochs_total"), num(&h, "incomplete"));
}
