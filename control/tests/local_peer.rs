//! The peer inside the downstream appliance: point b feeds the engine through
//! `PeerHandle::local_sink` (no socket) while point a ships over loopback through a
//! `NetworkSink`; the RDA look-ups go to b's retained caches locally and to a over its
//! connection. The records must equal the estimators run directly on the same synopses.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use wirelat_control::peer::{self, PeerConfig};
use wirelat_control::ship::{NetworkSink, ShipConfig};
use wirelat_control::sim_point::{Harvest, SimSegments, SimTraffic, simulate};
use wirelat_control::sink::{EpochSink, RdaPairs};
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::synopsis::lda::{self, Lda};
use wirelat_dataplane::synopsis::rda::{self, LocalCache, PeelGuards, Rda, Side, TimestampCache};
use wirelat_dataplane::synopsis::{Synopsis, SynopsisKind};

const SYNOPSES: &str = r#"
[synopses.lda]
banks = [{ rows = 128, p = 1.0 }]
seed = 3
[synopses.rda]
banks = 2
binding = { mode = "online", buckets_per_bank = 256 }
cache_capacity = 16384
"#;

fn collector(dir: &Path, synopses: &str) -> PeerConfig {
    std::fs::write(dir.join("k"), "ab".repeat(32)).unwrap();
    let text = format!(
        "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{k}\"\nrecords = \"{r}\"\n\
         [[point]]\nid = 1\nname = \"a\"\n[[point]]\nid = 2\nname = \"b\"\n\
         [[segment]]\nid = 5\nupstream = 1\ndownstream = 2\n[[segment]]\nid = 6\nupstream = 2\ndownstream = 1\n{synopses}",
        k = dir.join("k").display(),
        r = dir.join("records.jsonl").display(),
    );
    PeerConfig::parse(&text, Path::new("collector.toml")).unwrap()
}

/// (synopsis, segment, epoch) → (mean, std-dev).
type Estimates = BTreeMap<(String, u32, u64), (Option<f64>, Option<f64>)>;

/// The segment records written so far.
fn segment_records(path: &Path) -> Estimates {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["record"] == "segment")
        .map(|v| {
            let n = |k: &str| v[k]["value"].as_f64();
            let key = (
                v["synopsis"].as_str().unwrap_or("").to_owned(),
                v["segment"].as_u64().unwrap_or(0) as u32,
                v["epoch"].as_u64().unwrap_or(0),
            );
            (key, (n("mean_ns"), n("std_dev_ns")))
        })
        .collect()
}

fn feed(sink: &mut dyn EpochSink, h: Option<&Harvest>) {
    let Some(h) = h else { return };
    for (s, c) in &h.rda_caches {
        sink.retain_rda_cache(*s, h.epoch, RdaPairs::Cache(c));
    }
    for m in &h.messages {
        sink.deliver(m);
    }
}

#[test]
fn an_in_process_peer_pairs_local_and_remote_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = collector(dir.path(), SYNOPSES);
    let syn = cfg.synopses.clone();
    let handle = peer::start(cfg).unwrap();
    let segs = SimSegments { forward: 5, reverse: 6 };
    let t = SimTraffic {
        seed: 11,
        epochs: 4,
        epoch_len_ns: 5_000_000,
        first_epoch: 200,
        packets_per_epoch: 600,
        flows: 10,
        mean_delay_ns: 30_000.0,
        loss: 0.02,
        blackout_epochs: vec![],
        dns_per_epoch: 0,
    };
    let [ha, hb] = simulate(&t, &syn, &PacketConfig::default(), segs, [1, 2]).unwrap();
    let mut b = handle.local_sink(2, Duration::from_secs(60), Some(dir.path().join("spill-b"))).unwrap();
    let mut a = NetworkSink::new(
        1,
        &syn,
        &PacketConfig::default(),
        ShipConfig::new(handle.local_addr().to_string(), dir.path().join("k")),
    )
    .unwrap();
    // Epoch by epoch, as two running appliances would.
    for i in 0..ha.len().max(hb.len()) {
        feed(&mut a, ha.get(i));
        feed(&mut b, hb.get(i));
    }
    b.close();
    a.close();
    assert_eq!(a.counters().queue.queued, 0, "a's epochs were all acknowledged");

    // Expected: LDA and RDA per (segment, epoch), directly.
    let mut want = Estimates::new();
    // (segment, epoch, kind) -> [upstream body, downstream body].
    type Sides = [Option<Vec<u8>>; 2];
    let mut bodies: BTreeMap<(u32, u64, u8), Sides> = BTreeMap::new();
    let mut caches: BTreeMap<(u32, u64, usize), TimestampCache> = BTreeMap::new();
    for (which, hs) in [&ha, &hb].into_iter().enumerate() {
        for h in hs {
            for m in &h.messages {
                let side = usize::from((m.segment == segs.forward) != (which == 0));
                bodies.entry((m.segment, m.epoch, m.kind as u8)).or_default()[side] = Some(m.body.clone());
            }
            for (s, c) in &h.rda_caches {
                caches.insert((*s, h.epoch, usize::from((*s == segs.forward) != (which == 0))), c.clone());
            }
        }
    }
    let empty = TimestampCache::new(1, 0);
    let v = |e: &Result<wirelat_dataplane::synopsis::estimate::Estimate, _>| e.as_ref().ok().map(|e| e.value);
    for ((s, e, k), [up, down]) in &bodies {
        if *k == SynopsisKind::Lda as u8 {
            let c = syn.lda.as_ref().unwrap();
            let get = |b: &Option<Vec<u8>>| {
                b.as_ref().map_or_else(|| Lda::new(c).unwrap(), |b| Lda::decode(c, b).unwrap())
            };
            let r = lda::estimate(&get(up), &get(down)).unwrap();
            want.insert(("lda".into(), *s, *e), (v(&r.mean_delay), v(&r.std_dev)));
        } else {
            let c = syn.rda.as_ref().unwrap();
            let get = |b: &Option<Vec<u8>>| {
                b.as_ref().map_or_else(
                    || Rda::decode(c, &Rda::new(c).unwrap().encode()).unwrap(),
                    |b| Rda::decode(c, b).unwrap(),
                )
            };
            let (x, y) = (get(up), get(down));
            let r = rda::reconcile(
                x.banks().unwrap(),
                y.banks().unwrap(),
                LocalCache { side: Side::Sender, cache: caches.get(&(*s, *e, 0)).unwrap_or(&empty) },
                caches.get(&(*s, *e, 1)).unwrap_or(&empty),
                &PeelGuards::default(),
            );
            want.insert(("rda".into(), *s, *e), (v(&r.mean_ns), v(&r.std_dev_ns)));
        }
    }
    let records = dir.path().join("records.jsonl");
    let read = || segment_records(&records);
    let started = Instant::now();
    while read().len() < want.len() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read(), want);
    assert!(handle.metrics().total(wirelat_control::report::metrics::RDA_LOOKUPS) > 0.0);
    handle.shutdown();
}

const LATE: &str = r#"
[synopses.rda]
banks = 2
binding = { mode = "late_binding", min_buckets_per_bank = 64, max_buckets_per_bank = 4096, signature_len = 256 }
cache_capacity = 16384
"#;

/// Late binding over the network: the peer picks m from the signatures, point a builds its
/// banks on request over its connection, point b locally; the result is the library's
/// late-binding sequence run on the two caches.
#[test]
fn late_binding_rda_is_bound_over_the_network() {
    use wirelat_dataplane::synopsis::rda::{banks_from_cache, late, sizing};
    let dir = tempfile::tempdir().unwrap();
    let cfg = collector(dir.path(), LATE);
    let syn = cfg.synopses.clone();
    let rcfg = syn.rda.clone().unwrap();
    let handle = peer::start(cfg).unwrap();
    let segs = SimSegments { forward: 5, reverse: 6 };
    let t = SimTraffic {
        seed: 12,
        epochs: 3,
        epoch_len_ns: 5_000_000,
        first_epoch: 300,
        packets_per_epoch: 800,
        flows: 10,
        mean_delay_ns: 30_000.0,
        loss: 0.05,
        blackout_epochs: vec![],
        dns_per_epoch: 0,
    };
    let [ha, hb] = simulate(&t, &syn, &PacketConfig::default(), segs, [1, 2]).unwrap();
    let mut b = handle.local_sink(2, Duration::from_secs(60), None).unwrap();
    let mut a = NetworkSink::new(
        1,
        &syn,
        &PacketConfig::default(),
        ShipConfig::new(handle.local_addr().to_string(), dir.path().join("k")),
    )
    .unwrap();
    for i in 0..ha.len().max(hb.len()) {
        feed(&mut a, ha.get(i));
        feed(&mut b, hb.get(i));
    }
    b.close();
    a.close();
    assert_eq!(a.counters().queue.queued, 0);
    assert!(a.counters().rda.rda_binds > 0, "point a built banks for the peer: {:?}", a.counters());

    let mut want = BTreeMap::new();
    let cache = |hs: &[Harvest], s: u32, e: u64| {
        hs.iter()
            .find(|h| h.epoch == e)
            .and_then(|h| h.rda_caches.iter().find(|c| c.0 == s))
            .map(|c| c.1.clone())
    };
    let sig = |hs: &[Harvest], s: u32, e: u64| {
        let body = hs
            .iter()
            .find(|h| h.epoch == e)
            .and_then(|h| h.messages.iter().find(|m| m.segment == s))
            .map(|m| m.body.clone());
        body.map_or_else(
            || Rda::decode(&rcfg, &Rda::new(&rcfg).unwrap().encode()).unwrap(),
            |b| Rda::decode(&rcfg, &b).unwrap(),
        )
        .signature()
    };
    let epochs: std::collections::BTreeSet<u64> = ha.iter().chain(&hb).map(|h| h.epoch).collect();
    for s in [segs.forward, segs.reverse] {
        let (up, down) = if s == segs.forward { (&ha, &hb) } else { (&hb, &ha) };
        for &e in &epochs {
            let (cu, cd) = (cache(up, s, e), cache(down, s, e));
            if cu.is_none() && cd.is_none() {
                continue;
            }
            let empty = TimestampCache::new(1, rcfg.cache_seed());
            let (cu, cd) = (cu.unwrap_or_else(|| empty.clone()), cd.unwrap_or(empty));
            let mut m = late::choose_buckets(&rcfg, &sig(up, s, e), &sig(down, s, e)).buckets_per_bank;
            let mut report;
            for attempt in 1u32.. {
                let (x, y) = (banks_from_cache(&rcfg, &cu, m), banks_from_cache(&rcfg, &cd, m));
                report = rda::reconcile(
                    &x,
                    &y,
                    LocalCache { side: Side::Sender, cache: &cu },
                    &cd,
                    &PeelGuards::default(),
                );
                match (report.reconciliation.complete, sizing::next_attempt(&rcfg, m, attempt)) {
                    (false, Some(next)) => m = next,
                    _ => {
                        let v = |e: &Result<wirelat_dataplane::synopsis::estimate::Estimate, _>| {
                            e.as_ref().ok().map(|e| e.value)
                        };
                        want.insert(("rda".to_owned(), s, e), (v(&report.mean_ns), v(&report.std_dev_ns)));
                        break;
                    }
                }
            }
        }
    }
    let records = dir.path().join("records.jsonl");
    let started = Instant::now();
    let read = || segment_records(&records);
    while read().len() < want.len() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read(), want);
    handle.shutdown();
}
