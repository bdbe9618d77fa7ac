//! What the records should say, computed directly from the simulated synopses with the
//! estimators, and the records file read back to compare.

use super::*;

/// A record's identity: (record type, synopsis, direction or point, epoch, flow).
pub(super) type RecKey = (String, String, String, u64, String);

pub(super) fn key_of(v: &Value) -> RecKey {
    let s = |k: &str| v.get(k).map(|x| x.to_string()).unwrap_or_default();
    let epoch = v.get("epoch").or_else(|| v.get("epoch_first")).and_then(Value::as_u64).unwrap_or(0);
    let who = if v.get("point").is_some() { s("point") + &s("kind") } else { s("direction") };
    (s("record"), s("synopsis"), who, epoch, s("flow"))
}

/// The numbers a record carries: (mean, std-dev) or quantile values.
pub(super) fn numbers(v: &Value) -> Vec<Option<f64>> {
    if let Some(q) = v.get("quantiles").and_then(Value::as_array) {
        return q.iter().map(|x| x.get("delay_ns").and_then(Value::as_f64)).collect();
    }
    let val = |k: &str| v.get(k).and_then(|e| e.get("value")).and_then(Value::as_f64);
    vec![val("mean_ns"), val("std_dev_ns")]
}

pub(super) fn direction(segment: u32) -> &'static str {
    if segment == SEGMENTS.forward { "\"forward\"" } else { "\"reverse\"" }
}

pub(super) fn rec(record: &str, synopsis: &str, who: String, epoch: u64, flow: String) -> RecKey {
    let synopsis = if synopsis.is_empty() { String::new() } else { format!("\"{synopsis}\"") };
    (format!("\"{record}\""), synopsis, who, epoch, flow)
}

/// Every record the peer must write, with its numbers.
pub(super) fn expected(
    harvests: &[Vec<Harvest>; 2],
    syn: &SynopsesConfig,
) -> BTreeMap<RecKey, Vec<Option<f64>>> {
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
pub(super) fn written(path: &Path) -> BTreeMap<RecKey, Vec<Option<f64>>> {
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

pub(super) fn assert_same(
    got: &BTreeMap<RecKey, Vec<Option<f64>>>,
    want: &BTreeMap<RecKey, Vec<Option<f64>>>,
) {
    for (k, v) in want {
        let Some(x) = got.get(k) else { panic!("missing record {k:?}") };
        assert_eq!(x, v, "numbers of {k:?}");
    }
    for k in got.keys() {
        assert!(want.contains_key(k), "unexpected record {k:?}");
    }
}

pub(super) fn harvests(t: &SimTraffic) -> [Vec<Harvest>; 2] {
    simulate(t, &synopses(), &PacketConfig::default(), SEGMENTS, [1, 2]).expect("simulate")
}
