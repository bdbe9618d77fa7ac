//! The peer on loopback, several processes: `wirelat collect` and simulated points
//! (`wirelat sim-point`, the dataplane's synopses over seeded traffic, shipped through the real
//! `NetworkSink`). Checks that the records equal the estimators run directly on the same
//! synopses, that a killed and restarted peer or point loses and duplicates nothing, and that
//! bad keys, frames and configurations are refused, logged and survived.

mod common;

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

/// A record's identity: (record type, synopsis, direction or point, epoch, flow).
type RecKey = (String, String, String, u64, String);

fn key_of(v: &Value) -> RecKey {
    let s = |k: &str| v.get(k).map(|x| x.to_string()).unwrap_or_default();
    let epoch = v.get("epoch").or_else(|| v.get("epoch_first")).and_then(Value::as_u64).unwrap_or(0);
    let who = if v.get("point").is_some() { s("point") + &s("kind") } else { s("direction") };
    (s("record"), s("synopsis"), who, epoch, s("flow"))
}

/// The numbers a record carries: (mean, std-dev) or quantile values.
fn numbers(v: &Value) -> Vec<Option<f64>> {
    if let Some(q) = v.get("quantiles").and_then(Value::as_array) {
        return q.iter().map(|x| x.get("delay_ns").and_then(Value::as_f64)).collect();
    }
    let val = |k: &str| v.get(k).and_then(|e| e.get("value")).and_then(Value::as_f64);
    vec![val("mean_ns"), val("std_dev_ns")]
}

fn direction(segment: u32) -> &'static str {
    if segment == SEGMENTS.forward { "\"forward\"" } else { "\"reverse\"" }
}

fn rec(record: &str, synopsis: &str, who: String, epoch: u64, flow: String) -> RecKey {
    let synopsis = if synopsis.is_empty() { String::new() } else { format!("\"{synopsis}\"") };
    (format!("\"{record}\""), synopsis, who, epoch, flow)
}

/// Every record the peer must write, with its numbers.
fn expected(harvests: &[Vec<Harvest>; 2], syn: &SynopsesConfig) -> BTreeMap<RecKey, Vec<Option<f64>>> {
    let mut out = BTreeMap::new();
    // (segment, epoch, kind) -> [upstream body, downstream body]; caches likewise.
    type Sides = [Option<Vec<u8>>; 2];
    let mut bodies: BTreeMap<(u32, u64, u8), Sides> = BTreeMap::new();
    let mut caches: HashMap<(u32, u64, usize), TimestampCache> = HashMap::new();
    for (which, hs) in harvests.iter().enumerate() {
        let name = if which == 0 { "\"a\"" } else { "\"b\"" };
        for h in hs {
            for m in &h.messages {
                if m.kind == SynopsisKind::Fridge {
                    let f = FridgeSynopsis::decode(syn.fridge.as_ref().unwrap(), &m.body).unwrap();
                    for k in fridge::estimate(&f).kinds {
                        let d = &k.all;
                        let q: Vec<Option<f64>> = [&d.p50_ns, &d.p90_ns, &d.p95_ns, &d.p99_ns]
                            .into_iter()
                            .filter_map(|e| e.as_ref().ok().map(|e| Some(e.value)))
                            .collect();
                        out.insert(
                            rec("fridge_quantiles", "", format!("{name}\"dns\""), m.epoch, String::new()),
                            q,
                        );
                    }
                    continue;
                }
                // Point a is upstream of forward, b of reverse.
                let side = usize::from((m.segment == SEGMENTS.forward) != (which == 0));
                bodies.entry((m.segment, m.epoch, m.kind as u8)).or_default()[side] = Some(m.body.clone());
            }
            for (segment, c) in &h.rda_caches {
                let side = usize::from((*segment == SEGMENTS.forward) != (which == 0));
                caches.insert((*segment, h.epoch, side), c.clone());
            }
        }
    }
    let est =
        |e: &Result<wirelat_dataplane::synopsis::estimate::Estimate, _>| e.as_ref().ok().map(|e| e.value);
    let empty_cache = TimestampCache::new(1, 0);
    for ((segment, epoch, kind), [up, down]) in &bodies {
        let dir = direction(*segment).to_owned();
        let seg_rec = |syn: &str| rec("segment", syn, dir.clone(), *epoch, String::new());
        match SynopsisKind::from_u8(*kind).unwrap() {
            SynopsisKind::Lda => {
                let cfg = syn.lda.as_ref().unwrap();
                let get = |b: &Option<Vec<u8>>| {
                    b.as_ref().map_or_else(|| Lda::new(cfg).unwrap(), |b| Lda::decode(cfg, b).unwrap())
                };
                let r = lda::estimate(&get(up), &get(down)).unwrap();
                out.insert(seg_rec("lda"), vec![est(&r.mean_delay), est(&r.std_dev)]);
            }
            SynopsisKind::Rda => {
                let cfg = syn.rda.as_ref().unwrap();
                let get = |b: &Option<Vec<u8>>| {
                    b.as_ref().map_or_else(
                        || Rda::decode(cfg, &Rda::new(cfg).unwrap().encode()).unwrap(),
                        |b| Rda::decode(cfg, b).unwrap(),
                    )
                };
                let (a, b) = (get(up), get(down));
                let ca = caches.get(&(*segment, *epoch, 0)).unwrap_or(&empty_cache);
                let cb = caches.get(&(*segment, *epoch, 1)).unwrap_or(&empty_cache);
                let r = rda::reconcile(
                    a.banks().unwrap(),
                    b.banks().unwrap(),
                    LocalCache { side: Side::Sender, cache: ca },
                    cb,
                    &PeelGuards::default(),
                );
                out.insert(seg_rec("rda"), vec![est(&r.mean_ns), est(&r.std_dev_ns)]);
            }
            SynopsisKind::Lds => {
                let cfg = syn.lds.as_ref().unwrap();
                let get = |b: &Option<Vec<u8>>| {
                    b.as_ref().map_or_else(|| Lds::new(cfg).unwrap(), |b| Lds::decode(cfg, b).unwrap())
                };
                let (a, b) = (get(up), get(down));
                let r = lds::report(&a, &b, b.flows(), Some(TOP_FLOWS)).unwrap();
                out.insert(seg_rec("lds"), vec![est(&r.summary.aggregate_mean_delay_ns), None]);
                for f in &r.flows {
                    let flow = serde_json::to_value(FlowId::from(f.flow)).unwrap().to_string();
                    out.insert(
                        rec("flow", "lds", dir.clone(), *epoch, flow),
                        vec![est(&f.mean_delay_ns), None],
                    );
                }
            }
            SynopsisKind::Colate => {
                let cfg = syn.colate.as_ref().unwrap();
                let get = |b: &Option<Vec<u8>>| {
                    b.as_ref().map_or_else(|| Colate::new(cfg).unwrap(), |b| Colate::decode(cfg, b).unwrap())
                };
                let epoch_of = |data: Colate| CounterEpoch {
                    point: 0,
                    seq: *epoch,
                    first_window: *epoch,
                    last_window: *epoch,
                    windows: 1,
                    flags: 0,
                    data,
                };
                let (s, r) = (epoch_of(get(up)), epoch_of(get(down)));
                // The flows and packet counts of the same window, from LDS (both logs).
                let lcfg = syn.lds.as_ref().unwrap();
                let key = (*segment, *epoch, SynopsisKind::Lds as u8);
                let lget = |b: Option<&Option<Vec<u8>>>| {
                    b.and_then(|b| b.as_ref())
                        .map_or_else(|| Lds::new(lcfg).unwrap(), |b| Lds::decode(lcfg, b).unwrap())
                };
                let pair = bodies.get(&key);
                let (la, lb) = (lget(pair.map(|p| &p[0])), lget(pair.map(|p| &p[1])));
                let mut set = lb.flows().clone();
                set.merge(la.flows());
                let packets = lds::estimate_all(&la, &lb, &set).unwrap();
                let mut flows: Vec<_> =
                    set.entries().iter().zip(&packets).map(|(e, p)| (*e, p.packets)).collect();
                flows.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.key.cmp(&y.0.key)));
                flows.truncate(TOP_FLOWS);
                out.insert(
                    rec("epoch_summary", "colate", dir.clone(), *epoch, String::new()),
                    vec![None, None],
                );
                let opts = QueryOptions::default();
                for (e, n) in flows {
                    let q = colate::estimate(vec![&s], vec![&r], e.flow_hash, n, &opts).unwrap();
                    let flow = serde_json::to_value(FlowId::from(e.key)).unwrap().to_string();
                    out.insert(
                        rec("flow", "colate", dir.clone(), *epoch, flow),
                        vec![est(&q.mean_counts_ns), est(&q.std_dev_counts_ns)],
                    );
                }
            }
            SynopsisKind::Fridge => {}
        }
    }
    out
}

/// The records file as (key → numbers), asserting no key twice.
fn written(path: &Path) -> BTreeMap<RecKey, Vec<Option<f64>>> {
    let text = std::fs::read_to_string(path).expect("records");
    let parsed = wirelat_trace::record::parse_lines(&text, "records").expect("the scorer reads the records");
    assert!(!parsed.records.is_empty());
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("json line");
        if v["record"] == "run" {
            continue;
        }
        let (k, n) = (key_of(&v), numbers(&v));
        assert!(out.insert(k.clone(), n).is_none(), "record written twice: {k:?}");
    }
    out
}

fn assert_same(got: &BTreeMap<RecKey, Vec<Option<f64>>>, want: &BTreeMap<RecKey, Vec<Option<f64>>>) {
    for (k, v) in want {
        let Some(x) = got.get(k) else { panic!("missing record {k:?}") };
        assert_eq!(x, v, "numbers of {k:?}");
    }
    for k in got.keys() {
        assert!(want.contains_key(k), "unexpected record {k:?}");
    }
}

fn harvests(t: &SimTraffic) -> [Vec<Harvest>; 2] {
    simulate(t, &synopses(), &PacketConfig::default(), SEGMENTS, [1, 2]).expect("simulate")
}

#[test]
fn collector_estimates_equal_the_estimators_on_the_same_synopses() {
    let dir = scratch();
    let t = traffic(8);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "10"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "10"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "everything acknowledged: {counters}");
        assert!(counters["acked"].as_u64().unwrap() > 0);
        assert!(counters["rda_lookups"].as_u64().unwrap() > 0, "the peer looked timestamps up: {counters}");
        // W14: each RDA cache is dropped when its epoch is acknowledged, not kept for the
        // retention time (the points' RSS grew with every epoch of the soaks).
        assert_eq!(counters["rda_caches_released"], counters["rda_caches_retained"], "{counters}");
    }
    let want = expected(&harvests(&t), &synopses());
    let got = written(&dir.path().join("records.jsonl"));
    assert_same(&got, &want);
    // The blackout epoch (relative 2) is reported as 100 % loss, not waited for.
    let text = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    let blackout = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| {
            v["record"] == "segment"
                && v["synopsis"] == "lda"
                && v["epoch"] == 1002
                && v["direction"] == "forward"
        })
        .expect("blackout epoch record");
    assert_eq!(blackout["loss"]["rate"], 1.0, "{blackout}");
    assert_eq!(blackout["absent"], serde_json::json!(["downstream"]));
    // Metrics: counters and the latest estimates.
    let m = c.metrics();
    assert!(m.contains("wirelat_latest_mean_delay_ns{segment=\"10\",synopsis=\"lda\"}"), "{m}");
    assert!(c.metric("wirelat_peer_records_total") as usize >= want.len());
    assert_eq!(c.metric("wirelat_peer_pending_groups"), 0.0);
    assert!(dir.path().join("colate/s10-p1.colate").exists(), "COLATE windows archived");
    let log = c.stop();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_killed_and_restarted_peer_loses_no_epoch_and_duplicates_none() {
    let dir = scratch();
    let t = traffic(16);
    let cfg = collector_toml(dir.path(), "127.0.0.1:0", "");
    let c = Collector::start(&cfg);
    let addr = c.addr;
    // Restart on the same port (the points keep their peer address).
    let cfg = collector_toml(dir.path(), &addr.to_string(), "");
    let a = sim_point(&point_toml(dir.path(), "a", addr, &t, ""), &["--pace-ms", "60"]);
    let b = sim_point(&point_toml(dir.path(), "b", addr, &t, ""), &["--pace-ms", "60"]);
    let records = dir.path().join("records.jsonl");
    wait_for(60, "the first records", || {
        std::fs::read_to_string(&records).map_or(0, |s| s.lines().count()) > 30
    });
    c.kill();
    std::thread::sleep(Duration::from_millis(300));
    let c = Collector::start(&cfg);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert!(counters["connections"].as_u64().unwrap() >= 2, "reconnected: {counters}");
    }
    assert_same(&written(&records), &expected(&harvests(&t), &synopses()));
    c.stop();
}

#[test]
fn a_point_restarted_mid_run_resumes_from_its_spill_directory() {
    let dir = scratch();
    let t = traffic(10);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let spill = dir.path().join("spill-a");
    let extra = format!("spill_dir = \"{}\"\nspill_all = true", spill.display());
    let pa = point_toml(dir.path(), "a", c.addr, &t, &extra);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "40"]);
    // Point a crashes after epoch 4; what it had queued is on disk.
    let crashed = wait_with_timeout(
        sim_point(&pa, &["--pace-ms", "40", "--crash-after", "4"]),
        Duration::from_secs(60),
    );
    assert_eq!(crashed.status.code(), Some(3), "{}", describe(&crashed));
    let a = sim_point(&pa, &["--pace-ms", "40", "--from-epoch", "5"]);
    let (oa, _) = (finish(a, "restarted point a"), finish(b, "point b"));
    let counters: Value = serde_json::from_slice(&oa.stdout).unwrap();
    assert_eq!(counters["queued"], 0, "{counters}");
    let records = dir.path().join("records.jsonl");
    let want = expected(&harvests(&t), &synopses());
    assert_same(&written(&records), &want);
    // A clean restart that replays everything (trace mode) adds no record: all duplicates.
    let before = std::fs::read_to_string(&records).unwrap();
    finish(sim_point(&pa, &[]), "replaying point a");
    assert_eq!(std::fs::read_to_string(&records).unwrap(), before);
    assert!(c.metric("wirelat_peer_duplicates_total{point=\"1\",synopsis=\"lda\"}") > 0.0);
    c.stop();
}

/// A spill directory holding another point's epoch synopsis (point 2's, as a shared directory
/// or a changed `[point] id` leaves it): point 1 sets it aside with a reason, never sends it,
/// and delivers every one of its own epochs. Before, it sent the file first on every
/// connection, the collector cut the connection, and nothing was delivered.
#[test]
fn a_point_with_a_foreign_spill_file_sets_it_aside_and_delivers_everything() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let spill = dir.path().join("spill-a");
    std::fs::create_dir_all(&spill).unwrap();
    let [_, hb] = harvests(&t);
    let theirs = hb
        .iter()
        .flat_map(|h| &h.messages)
        .find(|m| m.kind == SynopsisKind::Lda)
        .expect("an LDA message of point b");
    let key =
        MessageKey { point: theirs.point, segment: theirs.segment, epoch: theirs.epoch, kind: theirs.kind };
    let frame = Message::Epoch(EpochFrame {
        key,
        fingerprint: theirs.fingerprint,
        complete: theirs.complete,
        epoch_len_ns: theirs.epoch_len_ns,
        synopsis: theirs.body.clone(),
    });
    let name = format!("p{}-s{}-e{}-k{}.wlq", key.point, key.segment, key.epoch, key.kind as u8);
    std::fs::write(spill.join(&name), frame.encode()).unwrap();
    let extra = format!("spill_dir = \"{}\"", spill.display());
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, &extra), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    let (oa, _) = (finish(a, "point a"), finish(b, "point b"));
    let counters: Value = serde_json::from_slice(&oa.stdout).unwrap();
    assert_eq!(counters["queued"], 0, "{counters}");
    assert_eq!(counters["loaded_from_spill"], 0, "{counters}");
    let log = String::from_utf8_lossy(&oa.stderr);
    assert!(log.contains("spill file set aside") && log.contains("foreign_point"), "{log}");
    assert!(spill.join("set-aside").join(format!("{name}.foreign_point")).exists());
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
    assert_eq!(c.metric("wirelat_peer_rejected_total{reason=\"protocol\"}"), 0.0);
    c.stop();
}

/// `n` unauthenticated clients that each send one byte every `every` and reconnect at once
/// when cut, until `stop`: the slow-drip attack on the handshake slots.
fn drip_clients(
    addr: SocketAddr,
    n: usize,
    every: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut conns: Vec<Option<(TcpStream, Instant)>> = (0..n).map(|_| None).collect();
        let mut connects = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for c in conns.iter_mut() {
                let alive = match c {
                    Some((s, last)) if last.elapsed() >= every => {
                        let ok = s.write_all(&[0x57]).is_ok();
                        *last = Instant::now();
                        ok
                    }
                    Some((s, _)) => {
                        // Cut by the collector? (a read of 0 bytes, without blocking)
                        let mut b = [0u8; 64];
                        let _ = s.set_nonblocking(true);
                        !matches!(s.read(&mut b), Ok(0))
                    }
                    None => false,
                };
                if !alive && let Ok(s) = TcpStream::connect(addr) {
                    connects += 1;
                    *c = Some((s, Instant::now()));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        connects
    })
}

/// 70 clients dripping a byte every 3 s into their handshakes (more than the 64 connection
/// slots) while two points deliver every epoch: handshakes have their own budget, a per-address
/// budget and a total deadline, so the points get in and lose nothing.
#[test]
fn seventy_slow_handshakes_do_not_keep_two_points_out() {
    let dir = scratch();
    let t = traffic(8);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "handshake_timeout_ms = 3000"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drip = drip_clients(c.addr, 70, Duration::from_secs(3), stop.clone());
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let connects = drip.join().unwrap();
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert!(counters["given_up"].as_array().unwrap().iter().all(|g| g[1] == 0), "{counters}");
    }
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
    assert!(connects >= 70, "the attack ran: {connects} connections");
    let evicted = c.metric("wirelat_peer_rejected_total{reason=\"handshake_evicted_addr\"}")
        + c.metric("wirelat_peer_rejected_total{reason=\"handshake_evicted\"}");
    assert!(evicted > 0.0, "the budget evicted slow handshakes");
    assert!(took < Duration::from_secs(30), "the points took {took:?}");
    c.stop();
}

/// A collector that gives groups up (here: more groups waiting for point b than
/// `max_pending_groups`) says so when it stops: exit code 1 and one sentence counting them by
/// reason (it exited 0 before, the records silently missing).
#[test]
fn a_collector_that_gave_groups_up_exits_non_zero_with_a_summary() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_pending_groups = 1"));
    // Only point a: its groups wait for b, and all but one overflow.
    let mut a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "10"]);
    wait_for(60, "a pending overflow", || {
        c.metric("wirelat_peer_given_up_total{reason=\"pending_overflow\"}") > 0.0
    });
    let _ = a.kill();
    let _ = a.wait();
    let (status, log) = c.stop_with_status();
    assert_eq!(status.code(), Some(1), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(last.contains("groups were given up without records (pending_overflow "), "{log}");
}

/// W14: an overloaded collector (unpaced points, a 4 MiB `max_pending_bytes`) slows its
/// points down through their send windows (`[ship] window_bytes`, 1 MiB each: together under
/// the budget) instead of shedding what waits and making them resend their backlog. Nothing
/// is shed or resent, each point keeps its one connection, and every group is committed.
/// Without the window (the points sending as fast as TCP takes it) the same run sheds.
#[test]
fn an_overloaded_collector_slows_its_points_down_without_shedding_or_losing_anything() {
    let dir = scratch();
    let t = traffic(40);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_pending_bytes = 4194304"));
    let window = "window_bytes = 1048576";
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, window), &["--pace-ms", "0"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, window), &["--pace-ms", "0"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert_eq!(counters["resent"], 0, "nothing was shed and resent: {counters}");
        assert_eq!(counters["connections"], 1, "never cut: {counters}");
    }
    assert!(c.metric("wirelat_peer_records_total") > 0.0);
    let log = c.stop();
    assert!(!log.contains("dropped unacknowledged"), "the collector shed: {log}");
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
}

/// Connects as point 1 and completes the handshake; returns the raw stream too.
fn bad_client(
    addr: SocketAddr,
    psk: &PreSharedKey,
    hello: &Hello,
) -> (TcpStream, conn::FrameReader, conn::FrameWriter) {
    let s = TcpStream::connect(addr).unwrap();
    let raw = s.try_clone().unwrap();
    let (r, w) = conn::client_handshake(s, psk, hello, 1 << 20, Duration::from_secs(5)).expect("handshake");
    (raw, r, w)
}

/// The peer ends the connection (with a Reject or by closing it).
fn assert_closed(r: &mut conn::FrameReader) -> String {
    r.set_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        match r.read() {
            Ok(Message::Reject { reason }) => return reason,
            Ok(Message::Ack(_)) => continue,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn bad_keys_frames_and_configurations_are_refused_and_the_peer_keeps_serving() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_body_bytes = 1048576"));
    let psk = PreSharedKey::from_hex(KEY).unwrap();
    let packet = PacketConfig::default();
    let hello = Hello {
        point: 1,
        watermark: 0,
        packet_identity: packet.identity_fingerprint(),
        fingerprints: synopses().fingerprints(&packet),
    };
    let key = MessageKey { point: 1, segment: SEGMENTS.forward, epoch: 5, kind: SynopsisKind::Lda };
    let lda = Lda::new(synopses().lda.as_ref().unwrap()).unwrap();
    let lda_frame = |packet: &PacketConfig| {
        Message::Epoch(EpochFrame {
            key,
            fingerprint: peer_fingerprint(SynopsisKind::Lda, lda.config().fingerprint(), packet),
            complete: true,
            epoch_len_ns: t.epoch_len_ns,
            synopsis: lda.encode(),
        })
        .encode()
    };
    let frame = lda_frame(&packet);
    // The same synopsis from a point whose packets hash with another seed: it would pair
    // nothing with the other point's.
    let other_packet = PacketConfig { identity_seed: 9, ..PacketConfig::default() };
    let other_frame = lda_frame(&other_packet);

    // A corrupt frame under a valid tag: the checksum catches it.
    let (_raw, mut r, mut w) = bad_client(c.addr, &psk, &hello);
    let mut bad = frame.clone();
    *bad.last_mut().unwrap() ^= 0x40;
    w.send_frame(&bad).unwrap();
    assert!(assert_closed(&mut r).contains("checksum"));
    // A frame with a wrong tag.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    raw.write_all(&frame).unwrap();
    raw.write_all(&[7u8; 32]).unwrap();
    assert!(assert_closed(&mut r).contains("authentication"));
    // A truncated frame, then the end of the stream.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    raw.write_all(&frame[..frame.len() / 2]).unwrap();
    raw.shutdown(std::net::Shutdown::Write).unwrap();
    let _ = assert_closed(&mut r);
    // An oversized length: refused from the header, before any body is read.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    let mut big = frame[..HEADER_LEN].to_vec();
    big[28..32].copy_from_slice(&(64u32 << 20).to_le_bytes());
    raw.write_all(&big).unwrap();
    assert!(assert_closed(&mut r).contains("exceeds the cap"));
    // An unknown format version: a point of the previous one.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    let mut v2 = frame.clone();
    v2[4] = WIRE_VERSION - 1;
    let sum = checksum(&v2[..HEADER_LEN], &v2[HEADER_LEN..]);
    v2[40..48].copy_from_slice(&sum.to_le_bytes());
    raw.write_all(&v2).unwrap();
    // The peer may refuse on the header and close before the tag arrives: that write can fail.
    let _ = raw.write_all(&[0u8; 32]);
    assert!(assert_closed(&mut r).contains("version"));
    // An epoch synopsis made under other packet settings (a spill file of an earlier run,
    // say) after a good hello: refused by its fingerprint.
    let (_raw, mut r, mut w) = bad_client(c.addr, &psk, &hello);
    w.send_frame(&other_frame).unwrap();
    let why = assert_closed(&mut r);
    assert!(why.contains("fingerprint") && why.contains("[packet]"), "{why}");

    // Now the good points run, while a wrong key and a mismatched fingerprint keep knocking.
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    for _ in 0..3 {
        let wrong = PreSharedKey::from_bytes(&[9u8; 32]).unwrap();
        let s = TcpStream::connect(c.addr).unwrap();
        assert!(conn::client_handshake(s, &wrong, &hello, 1 << 20, Duration::from_secs(5)).is_err());
        let mut h = hello.clone();
        h.fingerprints[1].1 ^= 1;
        let s = TcpStream::connect(c.addr).unwrap();
        let (mut r, _w) =
            conn::client_handshake(s, &psk, &h, 1 << 20, Duration::from_secs(5)).expect("handshake");
        assert!(assert_closed(&mut r).contains("fingerprint"));
        // A point whose packet settings differ: its hello says so, naming the settings.
        let h = Hello {
            packet_identity: other_packet.identity_fingerprint(),
            fingerprints: synopses().fingerprints(&other_packet),
            ..hello.clone()
        };
        let s = TcpStream::connect(c.addr).unwrap();
        let (mut r, _w) =
            conn::client_handshake(s, &psk, &h, 1 << 20, Duration::from_secs(5)).expect("handshake");
        let why = assert_closed(&mut r);
        assert!(why.contains("identity_seed") && why.contains("[packet]"), "{why}");
        std::thread::sleep(Duration::from_millis(50));
    }
    finish(a, "point a");
    finish(b, "point b");
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));

    for reason in [
        "bad_checksum",
        "bad_mac",
        "truncated",
        "oversized_length",
        "unknown_version",
        "fingerprint_mismatch",
    ] {
        let series = format!("wirelat_peer_rejected_total{{reason=\"{reason}\"}}");
        assert!(c.metric(&series) >= 1.0, "{series} not counted:\n{}", c.metrics());
    }
    let log = c.stop();
    for reason in [
        "bad_checksum",
        "bad_mac",
        "truncated",
        "oversized_length",
        "unknown_version",
        "fingerprint_mismatch",
    ] {
        assert!(log.contains(reason), "no log line names {reason}:\n{log}");
    }
}
