//! One scenario run: the two points' COLATE synopses of every epoch, the flows' truths, and what
//! the checks tallied.

use super::*;

/// A packet at a point: (flow hash, identity, timestamp).
pub(super) type Packet = (u64, u64, u64);

/// One flow's truth in one epoch.
pub(super) struct FlowEpochTruth {
    pub(super) hash: u64,
    pub(super) sent: u64,
    pub(super) lost: u64,
    /// The flow's own packets that spoil a cell at one point only: lost, or crossing the
    /// group's edges in flight (sent in it and received in another, or the reverse).
    pub(super) one_sided: u64,
    pub(super) mean_ns: f64,
    pub(super) std_dev_ns: f64,
}

/// What one scenario measured.
#[derive(Default)]
pub(super) struct Tally {
    /// Every checked flow's query report, exactly (`{:?}`), for the golden digest.
    pub(super) golden: Vec<String>,
    /// Forward flows in the trace.
    pub(super) trace_flows: usize,
    /// Of those, with ≥ MIN_PACKETS packets in some epoch.
    pub(super) flows: usize,
    pub(super) checked: usize,
    pub(super) estimated: usize,
    pub(super) reliable: usize,
    pub(super) reliable_within: usize,
    pub(super) within_bound: usize,
    pub(super) covered: usize,
    pub(super) below_floor: usize,
    pub(super) lossy: usize,
    pub(super) rel: Vec<f64>,
    pub(super) rel_lossless: Vec<f64>,
    pub(super) sd_rel: Vec<f64>,
    pub(super) paper_rel: Vec<f64>,
    pub(super) paper_negative: usize,
    /// [`FlowEpochTruth::one_sided`] of the flow-epochs without and with a mean.
    pub(super) one_sided_none: Vec<f64>,
    pub(super) one_sided_mean: Vec<f64>,
    /// Why flow-epochs got no mean: reason → count.
    pub(super) reasons: BTreeMap<String, usize>,
    /// The floor each query group used (ns), and the smallest latency in that group.
    pub(super) floors: Vec<f64>,
    pub(super) smallest: Vec<f64>,
    /// Groups whose floor was derived (rather than 0 for too few single-packet cells).
    pub(super) floor_derived: usize,
    /// The queue's measured utilisation.
    pub(super) rho: Option<f64>,
    /// m used.
    pub(super) cells: u32,
    /// For sized scenarios: p99 delay (ns), p99 flow rate (packets/s), X, P(≥ m/2 clean).
    pub(super) sizing: Option<(f64, f64, u64, f64)>,
}

pub(super) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The scenario's trace, COLATE at both points epoch by epoch, and every checked flow's query.
pub(super) fn run(sc: &Scenario, seed: u64, failures: &mut Vec<String>) -> Tally {
    let seg = SegmentConfig {
        delay: sc.delay,
        loss: sc.loss,
        fifo: false,
        reorder: None,
        paths: match sc.second_path {
            Some((w, extra)) => vec![
                PathClass { weight: 1.0 - w, extra_delay_ns: sc.shift_ns },
                PathClass { weight: w, extra_delay_ns: sc.shift_ns + extra },
            ],
            None if sc.shift_ns > 0 => vec![PathClass { weight: 1.0, extra_delay_ns: sc.shift_ns }],
            None => vec![],
        },
    };
    let traffic = TrafficConfig {
        packet_rate_pps: sc.pps * scale(),
        duration_ns: (sc.seconds * 1e9) as u64,
        ..TrafficConfig::default()
    };
    let mut g = GenConfig::synthetic(seed, traffic, seg);
    g.epoch_len_ns = sc.epoch_ns;
    g.clock_offset_ns = sc.offset_ns;
    let pair = generate(&g).unwrap();
    let mut tally = Tally::default();
    let mut fail = |what: String| failures.push(format!("{}: {what}", sc.name));

    if let (Some(load), DelaySpec::Queue(QueueModel::Queue { service_rate_bps, .. })) = (sc.load, sc.delay) {
        let up = pair.capture(Tap { point: Point::A, port: 0 });
        let bytes: usize = up.iter().map(|c| c.frame.len()).sum();
        let span = (up.last().unwrap().ts_ns - up.first().unwrap().ts_ns) as f64 / 1e9;
        let rho = bytes as f64 * 8.0 / span / service_rate_bps;
        tally.rho = Some(rho);
        if (rho - load).abs() > 0.1 {
            fail(format!("queue utilisation {rho:.2}, the scenario needs {load}"));
        }
    }

    // Each point's packets by its own query group (`group` epochs of its own clock), and the
    // truth from the packets themselves: a packet of flow h sent in group k at A counts in
    // (k, h)'s sent packets, and its delay counts when B put it in the same group too.
    let group_ns = if sc.group == 0 { u64::MAX } else { sc.epoch_ns * sc.group };
    let mut by_group: [BTreeMap<u64, Vec<Packet>>; 2] = Default::default();
    let mut sent_at: HashMap<(u64, u64), u64> = HashMap::new();
    let mut delivered: HashSet<(u64, u64)> = HashSet::new();
    let mut same: BTreeMap<(u64, u64), Vec<f64>> = BTreeMap::new();
    let mut crossing_in: HashMap<(u64, u64), u64> = HashMap::new();
    // Every delivered packet's one-way delay on the true clock (what an operator sizing the
    // queue would measure), for the sized scenarios.
    let mut delays: Vec<f64> = Vec::new();
    for (i, point) in [Point::A, Point::B].into_iter().enumerate() {
        for c in pair.capture(Tap { point, port: 0 }) {
            let (Some(key), Some(id)) = (parse(&c.frame).flow_key(), invariant_digest(&c.frame)) else {
                continue;
            };
            let h = key.hash(0);
            let k = c.ts_ns / group_ns;
            by_group[i].entry(k).or_default().push((h, id, c.ts_ns));
            if i == 0 {
                sent_at.insert((h, id), c.ts_ns);
            } else if let Some(&ta) = sent_at.get(&(h, id)) {
                delivered.insert((h, id));
                delays.push(c.ts_ns as f64 - ta as f64 - sc.offset_ns as f64);
                if ta / group_ns == k {
                    same.entry((k, h)).or_default().push(c.ts_ns as f64 - ta as f64);
                } else {
                    *crossing_in.entry((k, h)).or_default() += 1;
                }
            }
        }
    }
    let mut sent: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
    for (&(h, id), &ta) in &sent_at {
        let e = sent.entry((ta / group_ns, h)).or_default();
        e.0 += 1;
        e.1 += u64::from(!delivered.contains(&(h, id)));
    }
    let mut flows: BTreeMap<u64, Vec<FlowEpochTruth>> = BTreeMap::new();
    tally.trace_flows = pair.truth.flows.iter().filter(|f| f.direction == Direction::Forward).count();
    let mut seen = HashSet::new();
    for (&(k, h), &(n, lost)) in &sent {
        let Some(d) = same.get(&(k, h)).filter(|d| n >= MIN_PACKETS && !d.is_empty()) else { continue };
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64;
        seen.insert(h);
        flows.entry(k).or_default().push(FlowEpochTruth {
            hash: h,
            sent: n,
            lost,
            one_sided: n - d.len() as u64 + crossing_in.get(&(k, h)).copied().unwrap_or(0),
            mean_ns: mean,
            std_dev_ns: var.sqrt(),
        });
    }
    tally.flows = seen.len();
    let cells = if sc.sized {
        match sized_cells(sc, group_ns, &mut delays, &sent, &mut tally) {
            Ok(m) => m,
            Err(e) => {
                fail(format!("the sizing refuses this trace's load: {e}"));
                return tally;
            }
        }
    } else {
        sc.cells
    };
    tally.cells = cells;
    let cfg = ColateConfig {
        tick_ns: sc.tick_ns,
        origin_ns: g.start_ns - 1_000_000_000,
        seed: seed ^ 0xC01A,
        packet_counts: true,
        ..ColateConfig::new(counters(sc), cells, 48, u64::MAX)
    };
    // The smallest latency a clock pair can show is min(0, offset) plus the path's minimum:
    // no mean may be below min(0, offset), and the derived floor must not exceed the smallest
    // latency of any packet in its group (or it would drop clean cells).
    let floor_ns = sc.offset_ns.min(0);
    let group = |k: u64, packets: &[Packet]| {
        let mut data = Colate::new(&cfg).unwrap();
        for &(h, id, ts) in packets {
            data.update_raw(h, id, ts);
        }
        CounterEpoch { point: 0, seq: k, first_window: k, last_window: k, windows: 1, flags: 0, data }
    };
    let opts = QueryOptions { level: COVER_LEVEL, ..QueryOptions::default() };
    for (k, truths) in &flows {
        let (Some(ps), Some(pr)) = (by_group[0].get(k), by_group[1].get(k)) else { continue };
        let (es, er) = (group(*k, ps), group(*k, pr));
        let segment = Segment::new(vec![&es], vec![&er]).unwrap();
        let used = segment.latency_floor();
        let smallest = same
            .range((*k, 0)..=(*k, u64::MAX))
            .flat_map(|(_, d)| d.iter().copied())
            .fold(f64::INFINITY, f64::min);
        tally.floors.push(used.floor_ns as f64);
        tally.smallest.push(smallest);
        tally.floor_derived += usize::from(used.derived);
        if used.floor_ns as f64 > smallest {
            fail(format!(
                "group {k}: derived floor {} ns above the smallest latency {smallest} ns",
                used.floor_ns
            ));
        }
        for t in truths {
            let q = segment.query(t.hash, t.sent, &opts);
            tally.golden.push(format!("{k} {} {} {q:?}", t.hash, t.sent));
            check_flow(sc, *k, t, &q, floor_ns, &mut tally, &mut fail);
        }
    }
    tally
}

/// m as an operator would derive it for this trace: `[synopses.colate]` with `max_delay_us` =
/// the p99 one-way delay, `max_flow_pps` = the p99 rate of the flows' (≥ [`MIN_PACKETS`]
/// packets) per window, `expected_loss` = the scenario's loss rate, `window_ms` = the query
/// window, target 0.95 (the key's default), read through the same table parser the points use.
/// `WIRELAT_COLATE_MATRIX_UNSIZED=1` keeps m = 20 instead (the mutation that shows the
/// sizing is what meets the coverage check).
pub(super) fn sized_cells(
    sc: &Scenario,
    group_ns: u64,
    delays: &mut [f64],
    sent: &BTreeMap<(u64, u64), (u64, u64)>,
    tally: &mut Tally,
) -> Result<u32, String> {
    let window_s = group_ns as f64 / 1e9;
    let mut rates: Vec<f64> =
        sent.values().filter(|(n, _)| *n >= MIN_PACKETS).map(|(n, _)| *n as f64 / window_s).collect();
    let (d99, r99) = (quantile(delays, 0.99), quantile(&mut rates, 0.99));
    let loss = match sc.loss {
        LossModel::None => 0.0,
        LossModel::Uniform { rate } | LossModel::Bursty { rate, .. } => rate,
    };
    let json = format!(
        r#"{{"counters": {}, "counter_bits": 48, "epoch_threshold_ticks": 1, "max_delay_us": {}, "max_flow_pps": {}, "expected_loss": {loss}, "window_ms": {}}}"#,
        counters(sc),
        (d99 / 1e3).ceil(),
        r99.ceil(),
        window_s * 1e3,
    );
    let keys: ColateConfigKeys = serde_json::from_str(&json).unwrap();
    let (cfg, sizing) = keys.resolve().map_err(|e| format!("{e} (p99 delay {d99} ns, p99 rate {r99}/s)"))?;
    let sizing = sizing.ok_or("no sizing derived")?;
    tally.sizing = Some((d99, r99, sizing.spoiled_packets, sizing.probability));
    Ok(if std::env::var_os("WIRELAT_COLATE_MATRIX_UNSIZED").is_some() { 20 } else { cfg.cells_per_flow })
}
