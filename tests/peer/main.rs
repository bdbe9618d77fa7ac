//! The peer on loopback, several processes: `wirelat collect` and simulated points
//! (`wirelat sim-point`, the dataplane's synopses over seeded traffic, shipped through the real
//! `NetworkSink`). Checks that the records equal the estimators run directly on the same
//! synopses, that a killed and restarted peer or point loses and duplicates nothing, and that
//! bad keys, frames and configurations are refused, logged and survived.
//!
//! One test binary in three modules: [`oracle`] (the records the peer must write, computed
//! from the simulated synopses with the estimators), [`delivery`] (records equal the oracle,
//! also across a restarted peer or point and a foreign spill file) and [`hostile`] (slow
//! handshakes, overload, bad keys, frames and configurations). Here: the configurations, the
//! processes and the helpers they share.

#[path = "../common/mod.rs"]
mod common;
mod delivery;
mod hostile;
mod oracle;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use wirelat_control::auth::PreSharedKey;
use wirelat_control::conn;
use wirelat_control::sim_point::{Harvest, SimSegments, SimTraffic, simulate};
use wirelat_control::synopses::{SynopsesConfig, peer_fingerprint};
use wirelat_control::wire::{EpochFrame, HEADER_LEN, Hello, Message, MessageKey, WIRE_VERSION, checksum};
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::synopsis::colate::{self, Colate, CounterEpoch, QueryOptions};
use wirelat_dataplane::synopsis::fridge::{self, FridgeSynopsis};
use wirelat_dataplane::synopsis::lda::{self, Lda};
use wirelat_dataplane::synopsis::lds::{self, Lds};
use wirelat_dataplane::synopsis::rda::{self, LocalCache, PeelGuards, Rda, Side, TimestampCache};
use wirelat_dataplane::synopsis::{Synopsis, SynopsisConfig, SynopsisKind};
use wirelat_trace::record::FlowId;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SEGMENTS: SimSegments = SimSegments { forward: 10, reverse: 11 };
const TOP_FLOWS: usize = 8;

const SYNOPSES: &str = r#"
[synopses.fridge]
kinds = [{ kind = "dns", fridges = [{ slots = 4096, entry_probability = 1.0 }] }]
[synopses.lda]
banks = [{ rows = 256, p = 0.75 }, { rows = 256, p = 0.25 }]
seed = 7
[synopses.lds]
rows = 2
width = 4096
vlda_len = 2
flow_capacity = 4096
seed = 9
[synopses.rda]
banks = 2
binding = { mode = "online", buckets_per_bank = 512 }
cache_capacity = 65536
[synopses.colate]
counters = 10007
cells_per_flow = 20
counter_bits = 48
epoch_threshold_ticks = 100000000000000
packet_counts = true
tick_ns = 100
origin_ns = 1000000000
"#;

fn synopses() -> SynopsesConfig {
    #[derive(serde::Deserialize)]
    struct T {
        synopses: SynopsesConfig,
    }
    toml::from_str::<T>(SYNOPSES).expect("synopses").synopses
}

fn traffic(epochs: u64) -> SimTraffic {
    SimTraffic {
        seed: 5,
        epochs,
        epoch_len_ns: 20_000_000,
        first_epoch: 1000,
        packets_per_epoch: 1500,
        flows: 40,
        mean_delay_ns: 40_000.0,
        loss: 0.01,
        blackout_epochs: vec![2],
        dns_per_epoch: 40,
    }
}

fn traffic_toml(t: &SimTraffic) -> String {
    format!(
        "[sim]\nseed = {}\nepochs = {}\nepoch_len_ns = {}\nfirst_epoch = {}\npackets_per_epoch = {}\nflows = {}\nmean_delay_ns = {:?}\nloss = {:?}\nblackout_epochs = {:?}\ndns_per_epoch = {}\n",
        t.seed,
        t.epochs,
        t.epoch_len_ns,
        t.first_epoch,
        t.packets_per_epoch,
        t.flows,
        t.mean_delay_ns,
        t.loss,
        t.blackout_epochs,
        t.dns_per_epoch
    )
}

fn write_key(dir: &Path) -> PathBuf {
    let p = dir.join("peer.key");
    // Written aside and renamed: a point starting now (sim-point reads its key at once since
    // it streams) never reads a truncated file while another collector start rewrites it.
    let tmp = dir.join("peer.key.tmp");
    std::fs::write(&tmp, KEY).expect("key");
    std::fs::rename(&tmp, &p).expect("key");
    p
}

/// A collector config listening on `listen`.
fn collector_toml(dir: &Path, listen: &str, extra_collector: &str) -> PathBuf {
    let text = format!(
        r#"[collector]
listen = "{listen}"
key_file = "{key}"
records = "{records}"
metrics_listen = "127.0.0.1:0"
{extra_collector}
[report]
top_flows = {TOP_FLOWS}
[colate]
archive_dir = "{archive}"
[[point]]
id = 1
name = "a"
[[point]]
id = 2
name = "b"
[[segment]]
id = {fwd}
upstream = 1
downstream = 2
[[segment]]
id = {rev}
upstream = 2
downstream = 1
{SYNOPSES}"#,
        key = write_key(dir).display(),
        records = dir.join("records.jsonl").display(),
        archive = dir.join("colate").display(),
        fwd = SEGMENTS.forward,
        rev = SEGMENTS.reverse,
    );
    let p = dir.join("collector.toml");
    std::fs::write(&p, text).expect("collector config");
    p
}

/// A simulated point's config shipping to `peer`.
fn point_toml(dir: &Path, role: &str, peer: SocketAddr, t: &SimTraffic, ship_extra: &str) -> PathBuf {
    let (id, other) = if role == "a" { (1, 2) } else { (2, 1) };
    let text = format!(
        r#"other_point = {other}
[point]
id = {id}
role = "{role}"
[segments]
forward = {fwd}
reverse = {rev}
[ship]
peer = "{peer}"
key_file = "{key}"
backoff_initial_ms = 20
backoff_max_ms = 200
close_timeout_ms = 30000
{ship_extra}
{traffic}{SYNOPSES}"#,
        fwd = SEGMENTS.forward,
        rev = SEGMENTS.reverse,
        key = write_key(dir).display(),
        traffic = traffic_toml(t),
    );
    let p = dir.join(format!("point-{role}.toml"));
    std::fs::write(&p, text).expect("point config");
    p
}

/// The collector's Prometheus endpoint (these tests configure `metrics_listen`).
trait Metrics {
    fn metrics(&mut self) -> String;
    /// The value of one series (0 when absent).
    fn metric(&mut self, series: &str) -> f64;
}

impl Metrics for Collector {
    fn metrics(&mut self) -> String {
        let addr: SocketAddr = self
            .wait_for_line("metrics on http://")
            .trim_end_matches("/metrics")
            .parse()
            .expect("metrics addr");
        let mut s = TcpStream::connect(addr).expect("metrics connect");
        write!(s, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    }

    fn metric(&mut self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| {
                l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }
}

fn sim_point(config: &Path, args: &[&str]) -> Child {
    wirelat()
        .args(["sim-point", "--config"])
        .arg(config)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sim-point")
}

fn finish(child: Child, what: &str) -> std::process::Output {
    let out = wait_with_timeout(child, Duration::from_secs(120));
    assert!(out.status.success(), "{what}: {}", describe(&out));
    out
}

/// Waits until `cond` or panics after `secs` with `what`.
fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ----- what the records should say, computed directly from the simulated synopses -----
