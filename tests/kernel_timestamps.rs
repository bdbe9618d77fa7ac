//! Two points on one host, one frame stream, a true delay of exactly 0 (issue 18).
//!
//! ```text
//! ns w11s: w11a ⇄ w11b: ns w11m ← point 1 (`wirelat run`, rx only)
//!                                ← point 2 (`wirelat run`, rx only)
//!                                   both ship to a collector (ns w11m, 127.0.0.1)
//! ```
//!
//! Both points listen on the same interface through DPDK's pcap device (`net_pcap0,iface=w11b`,
//! monitor mode), so every frame the sender in `w11s` sends reaches both at the same kernel
//! instant: for segment 40 (point 1 → point 2) the true one-way delay of every packet is 0,
//! constant. Each point drops frames of its own when its kernel ring fills while it is
//! descheduled (`dev_imissed`), which LDA and RDA must take as loss, not as delay.
//!
//! - `[clock] source = "kernel"`: every epoch's LDA and RDA mean must be within 1 µs of 0 (the
//!   issue's bound), and in fact within 100 ns: with the kernel's receive timestamping on (the
//!   point turns it on, `NetTimestamping`), both sockets report the one stamp the kernel took as
//!   the frame entered the receive path, so every packet's two stamps are equal. Without it each
//!   socket stamps at its own read and the means were 450–830 ns (measured), which the 100-ns
//!   check catches.
//! - `[clock] source = "tsc"`: cannot be held to 1 µs on this host. The TSC mapping of the two
//!   processes agrees within 80 ns (`dataplane/tests/clock_processes.rs`), but a TSC stamp is
//!   taken when the worker polls the burst, and the frame has waited since its arrival: in
//!   libpcap's ring (blocks handed over when full or on a timer) and while the worker was
//!   descheduled on the two shared cores. Each point measures that stamping delay per packet
//!   against the kernel's time (`stamping delay` log line); measured here it is milliseconds
//!   (mean 2.4–2.8 ms, maximum 24–36 ms at load ≈ 11), and the epoch means read −73 µs …
//!   +7.8 ms. The test asserts the bound that this delay explains: with a true delay of 0,
//!   a packet's reading is `w₂ − w₁` (its waits at the two points, each in `[0, max_i]`) plus
//!   the mapping disagreement (< 1 µs), so every epoch's mean lies in
//!   `[−max₁ − 1 µs, max₂ + 1 µs]`. It fails if the two mappings disagreed by more than the
//!   waits, or if a point stamped with anything else than its TSC.
//!
//! Needs root (namespaces) and `ip` and `python3` (scripts/setup.sh installs them); skips with a
//! message otherwise. Everything it creates is named `w11*` and removed by a Drop guard, also
//! when an assertion fails; the two tests share the names, so they hold one lock.

#![cfg(feature = "dpdk")]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use serde_json::Value;

static NETWORK: Mutex<()> = Mutex::new(());

const SENDER_NS: &str = "w11s";
const MONITOR_NS: &str = "w11m";
/// Frames sent per run, one every [`GAP_S`] seconds.
const FRAMES: u32 = 3000;
const GAP_S: f64 = 0.0005;
/// The frames' destination MAC is nobody's: the monitor side's kernel drops them after the
/// packet taps, so nothing answers and nothing else is sent.
const NOBODY_MAC: &str = "02:11:00:00:11:99";

/// Why the test cannot run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    missing_root_or_tools(&["ip", "python3"], "network namespaces need it")
}

/// The two namespaces and the veth pair between them; removed on drop.
struct Topology;

impl Topology {
    fn new() -> Topology {
        Self::remove();
        let t = Topology;
        for cmd in [
            format!("ip netns add {SENDER_NS}"),
            format!("ip netns add {MONITOR_NS}"),
            format!("ip link add w11a netns {SENDER_NS} type veth peer name w11b netns {MONITOR_NS}"),
            format!("ip -n {SENDER_NS} link set w11a up"),
            format!("ip -n {SENDER_NS} addr add 10.211.0.1/24 dev w11a"),
            format!("ip -n {SENDER_NS} neigh replace 10.211.0.2 lladdr {NOBODY_MAC} dev w11a nud permanent"),
            format!("ip netns exec {SENDER_NS} sysctl -qw net.ipv6.conf.all.disable_ipv6=1"),
            format!("ip netns exec {MONITOR_NS} sysctl -qw net.ipv6.conf.all.disable_ipv6=1"),
            format!("ip -n {MONITOR_NS} link set w11b up"),
            format!("ip -n {MONITOR_NS} link set lo up"),
        ] {
            must(&cmd);
        }
        t
    }

    fn remove() {
        for cmd in [format!("ip netns del {SENDER_NS}"), format!("ip netns del {MONITOR_NS}")] {
            let _ = sh(&format!("{cmd} 2>/dev/null"));
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        Self::remove();
    }
}

/// `wirelat ARGS…` inside the monitor namespace.
fn in_monitor_ns(args: &[&str], config: &Path) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", MONITOR_NS, env!("CARGO_BIN_EXE_wirelat")]).args(args).arg(config);
    cmd
}

const SYNOPSES: &str = "[synopses.lda]\nbanks = [{ rows = 512, p = 1.0 }]\nseed = 3\n\
                        [synopses.rda]\nbanks = 2\nbinding = { mode = \"online\", buckets_per_bank = 1024 }\n\
                        cache_capacity = 65536\n";

/// One segment record's mean, as the collector wrote it.
#[derive(Debug)]
struct EpochMean {
    synopsis: String,
    epoch: u64,
    mean_ns: f64,
    samples: u64,
}

/// What one run of the two points gave.
struct Outcome {
    means: Vec<EpochMean>,
    /// Per point: the final "stamping delay" log fields (TSC mode), and port 0's rx count.
    stamp_delay: Vec<std::collections::BTreeMap<String, String>>,
    rx: Vec<u64>,
}

/// Runs the collector and both points with `[clock] source = clock` in `d`, sends the frames,
/// stops the points (SIGTERM: they ship their last epochs) and the collector, and reads the
/// forward segment's LDA and RDA means.
fn run_two_points(d: &Path, clock: &str) -> Outcome {
    let key = write_key(d);
    let records = d.join("records.jsonl");
    let collector_toml = collector_config(d, &key, SYNOPSES);
    let mut collector = Collector::spawn(in_monitor_ns(&["collect", "--config"], &collector_toml));
    collector.addr = collector.wait_for_line("listening on ").parse().expect("the collector's address");

    let empty = d.join("empty.pcap");
    write_frames(&empty, &[]);
    let mut points: Vec<Collector> = [1u32, 2]
        .into_iter()
        .map(|id| {
            let config = d.join(format!("point{id}.toml"));
            std::fs::write(
                &config,
                format!(
                    "[eal]\nargs = [\"--no-huge\", \"-m\", \"512\", \"--no-pci\", \"--no-shconf\", \"--no-telemetry\", \
                     \"--log-level=warning\", \"--file-prefix=w11k{}p{id}\"]\n\
                     [point]\nid = {id}\n[segments]\nforward = 40\nreverse = 41\n\
                     [clock]\nsource = \"{clock}\"\n[workers]\nmonitor = true\n[epochs]\nlength_ms = 200\n\
                     [stats]\ninterval_ms = 0\n\
                     [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nclose_timeout_ms = 30000\n\
                     [[port]]\ndevice = \"net_pcap0,iface=w11b\"\n\
                     [[port]]\ndevice = \"net_pcap1,rx_pcap={},tx_pcap={}\"\n{SYNOPSES}",
                    std::process::id(),
                    collector.addr,
                    key.display(),
                    empty.display(),
                    d.join(format!("tx{id}.pcap")).display()
                ),
            )
            .expect("point config");
            Collector::spawn(in_monitor_ns(&["run", "--config"], &config))
        })
        .collect();
    for p in &mut points {
        p.wait_for_line(" forwarding workers=");
    }

    // Distinct payloads (a counter), so that no two packets share an identity.
    let script = d.join("send.py");
    std::fs::write(
        &script,
        format!(
            "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for i in range({FRAMES}):\n    s.sendto(i.to_bytes(8, 'big') + b'w11' * 16, ('10.211.0.2', 9000 + i % 7))\n    \
             time.sleep({GAP_S})\n"
        ),
    )
    .expect("sender script");
    must(&format!("ip netns exec {SENDER_NS} python3 {}", script.display()));
    std::thread::sleep(Duration::from_millis(500));

    let mut stamp_delay = Vec::new();
    let mut rx = Vec::new();
    for p in points {
        let (status, log) = p.stop_with_status();
        assert!(status.success(), "point exit {status}:\n{log}");
        let closed =
            log.lines().find(|l| l.contains("network sink closed")).unwrap_or_else(|| panic!("{log}"));
        assert!(closed.contains("given_up=0"), "{closed}");
        let port0 = log
            .lines()
            .find(|l| l.contains("port counters") && l.contains("label=\"final\" port=0"))
            .unwrap_or_else(|| panic!("no final port 0 counters:\n{log}"));
        rx.push(log_fields(port0)["rx"].parse::<u64>().expect("rx"));
        let delay = log
            .lines()
            .find(|l| l.contains("stamping delay") && l.contains("label=\"final\""))
            .map(log_fields)
            .unwrap_or_default();
        stamp_delay.push(delay);
    }
    collector.stop();

    let text = std::fs::read_to_string(&records).expect("records");
    let means = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json line"))
        .filter(|v| v["record"] == "segment" && v["segment"] == 40)
        .filter_map(|v| {
            let mean = &v["mean_ns"];
            Some(EpochMean {
                synopsis: v["synopsis"].as_str()?.to_owned(),
                epoch: v["epoch"].as_u64()?,
                mean_ns: mean["value"].as_f64()?,
                samples: mean["samples"].as_u64()?,
            })
        })
        .collect();
    Outcome { means, stamp_delay, rx }
}

/// Every epoch of both synopses has a mean, and there are enough of them to mean something.
fn check_coverage(o: &Outcome) {
    for synopsis in ["lda", "rda"] {
        let epochs: Vec<&EpochMean> = o.means.iter().filter(|m| m.synopsis == synopsis).collect();
        let samples: u64 = epochs.iter().map(|m| m.samples).sum();
        assert!(epochs.len() >= 3 && samples >= 200, "{synopsis}: too little measured: {epochs:?}");
    }
    // Both points saw most frames (their own ring drops aside).
    for &rx in &o.rx {
        assert!(rx >= u64::from(FRAMES) / 4, "a point received only {rx} of {FRAMES} frames");
    }
}

fn prepared() -> Option<(std::sync::MutexGuard<'static, ()>, Topology, tempfile::TempDir)> {
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return None;
    }
    let lock = NETWORK.lock().unwrap_or_else(|e| e.into_inner());
    Some((lock, Topology::new(), scratch()))
}

#[test]
fn two_points_on_the_kernel_clock_agree_within_1_us_on_a_zero_delay_stream() {
    let Some((_lock, _topology, dir)) = prepared() else { return };
    let o = run_two_points(dir.path(), "kernel");
    check_coverage(&o);
    for m in &o.means {
        eprintln!(
            "kernel clock: {} epoch {} mean {:.1} ns over {} samples",
            m.synopsis, m.epoch, m.mean_ns, m.samples
        );
    }
    for m in &o.means {
        assert!(m.mean_ns.abs() <= 1000.0, "beyond 1 µs: {m:?}");
        // Both points report the kernel's one stamp per frame: equal stamps (see the module doc).
        assert!(m.mean_ns.abs() <= 100.0, "the two points' kernel stamps differ: {m:?}");
    }
}

#[test]
fn two_points_on_the_tsc_are_off_by_at_most_their_measured_stamping_delay() {
    let Some((_lock, _topology, dir)) = prepared() else { return };
    let o = run_two_points(dir.path(), "tsc");
    check_coverage(&o);
    let field = |p: usize, k: &str| -> u64 {
        o.stamp_delay[p].get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} of point {p}"))
    };
    for p in 0..2 {
        // Every frame the port received had the kernel's time, and its delay was measured.
        assert_eq!(field(p, "packets"), o.rx[p], "point {}: {:?}", p + 1, o.stamp_delay[p]);
        eprintln!("tsc clock: point {} stamping delay {:?}", p + 1, o.stamp_delay[p]);
    }
    let (max1, max2) = (field(0, "max_ns") as f64, field(1, "max_ns") as f64);
    let mut beyond_1us = 0;
    for m in &o.means {
        eprintln!(
            "tsc clock: {} epoch {} mean {:.1} ns over {} samples",
            m.synopsis, m.epoch, m.mean_ns, m.samples
        );
        assert!(
            m.mean_ns >= -max1 - 1000.0 && m.mean_ns <= max2 + 1000.0,
            "outside [−{max1} − 1 µs, {max2} + 1 µs], the stamping delays measured: {m:?}"
        );
        beyond_1us += usize::from(m.mean_ns.abs() > 1000.0);
    }
    eprintln!("tsc clock: {beyond_1us} of {} epoch means beyond 1 µs", o.means.len());
}
