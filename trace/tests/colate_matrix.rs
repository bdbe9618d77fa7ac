//! The COLATE per-flow scenario matrix (issue 19, W12): trace pairs made by the generator on
//! delay, loss and load settings nobody tuned COLATE for, pushed through COLATE exactly as the
//! two points would (each point puts a packet in the epoch of its own timestamp), and every
//! flow with at least [`MIN_PACKETS`] packets in an epoch queried with its sent count (what the
//! LDS census supplies) and checked against the truth of that flow and epoch (`same_epoch`: the
//! flow's packets both points put in the epoch, which is what the cells can hold):
//!
//! - every such flow gets a count mean or a stated reason, and ≥ 95 % get a mean;
//! - every query uses the default latency floor, derived from the data (`Segment::new`), never
//!   the scenario's clock offset; the floor used is at or below the smallest latency of its
//!   group, and no mean is below min(0, offset), the floor of what the clocks can show;
//! - the per-flow error bound from the estimator's own standard error (sampling of cells,
//!   foreign noise, tick rounding; `Segment::counts_view`), 10·se, holds for at least 99 % of
//!   the flows, i.e. for the p99 flow (Chebyshev: at most 1/10² of any distribution lies beyond
//!   10 standard deviations, so this holds whatever the noise's shape if se is right);
//! - the 95 % intervals cover the truth for at least 95 % of the flows (less three binomial
//!   standard deviations);
//! - flows flagged `reliable` (95 % half-width ≤ 25 % of the estimate) are within 25 % for at
//!   least 95 % of them (less three binomial standard deviations).
//!
//! The old estimator (counts agreeing = same packets, an interval from foreign noise only, no
//! floor) fails the floor, p99 and coverage checks; the old default floor of 0 fails the
//! coverage and floor checks of the negative clock offsets. Queues at ρ ≥ 0.6 keep their
//! coverage with m = 64 or longer groups, and at ρ ≈ 0.8 with m derived from the load an
//! operator measures (`[synopses.colate] max_delay_us`, `max_flow_pps`: the `sized` scenarios;
//! `WIRELAT_COLATE_MATRIX_UNSIZED=1` keeps m = 20 there and fails); the table also says, for the
//! flows without a mean, how many of their own packets reached one point only. Sizes are kept small for CI (a few seconds);
//! `WIRELAT_COLATE_MATRIX_SCALE` multiplies the packet rate (and so the flows) for the larger
//! table in BENCHMARKS.md, through the same code.
//!
//! `WIRELAT_SIZE_FACTOR` (issue 24, W17; default 1) multiplies every scenario's counters
//! (rounded up to a prime), the sized scenarios' sizing input included. The error bound, the
//! intervals and the reliable flag come from the estimator's own standard error, which
//! accounts for the crowding of a smaller vector, so they are checked at any size; ≥ 95 % of
//! flows with a mean is the default sizing's promise, so at another factor a miss is marked
//! with its measured value instead of failing. Digests are compared at factor 1 only;
//! `scripts/size-curve.sh` collects the headline.

mod common;
mod golden;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::config::next_prime;
use wirelat_dataplane::synopsis::colate::coverage::ColateConfigKeys;
use wirelat_dataplane::synopsis::colate::query::FlowLatencyReport;
use wirelat_dataplane::synopsis::colate::{Colate, ColateConfig, CounterEpoch, QueryOptions, Segment};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::parse::{invariant_digest, parse};
use wirelat_trace::segment::{DelaySpec, PathClass, QueueModel, SegmentConfig};
use wirelat_trace::traffic::TrafficConfig;
use wirelat_trace::{Direction, Point, Tap};

/// Flows with fewer packets sent in an epoch are not checked (the issue's threshold).
const MIN_PACKETS: u64 = 10;
/// The per-flow error bound in standard errors: by Chebyshev's inequality at most 1/k² = 1 % of
/// the flows exceed k·se whatever the noise's shape, if the standard error is right, so the
/// p99 flow must meet it.
const BOUND_SE: f64 = 10.0;
/// Level of the intervals checked for coverage.
const COVER_LEVEL: f64 = 0.95;

struct Scenario {
    name: &'static str,
    delay: DelaySpec,
    /// A constant shift on every packet (one path), ns.
    shift_ns: u64,
    loss: LossModel,
    pps: f64,
    seconds: f64,
    epoch_ns: u64,
    /// Counters (rounded up to a prime).
    counters: u32,
    tick_ns: u64,
    /// B's clock minus true time. Every query uses the default, derived latency floor
    /// (`Segment::new`), never this value: no mean may fall below min(0, offset), the floor
    /// of what the points' clocks can show.
    offset_ns: i64,
    /// Consecutive epochs summed into one query group at both points (the collector's
    /// `[colate] windows`); the truth is then over the packets both points put in the group.
    /// 0: the whole run is one group.
    group: u64,
    /// m, cells per flow (ignored when `sized`).
    cells: u32,
    /// Derive m from the load as an operator would configure it (`[synopses.colate]`
    /// `max_delay_us`, `max_flow_pps`, `expected_loss`, `window_ms`; coverage.rs): the queue's
    /// p99 one-way delay and the p99 flow rate measured on this trace, the scenario's loss rate.
    sized: bool,
    /// For the queue: the utilisation the scenario is named for, checked on the trace (bytes
    /// offered at A over the link rate). The generator's TCP conversations are closed-loop:
    /// from a measured ρ ≈ 0.6 the queue holds tens of milliseconds, a quarter of a flow's
    /// packets cross each 100-ms epoch edge in flight, and many flows keep fewer than half
    /// their cells (no mean, with that reason): see docs/colate.md.
    load: Option<f64>,
}

fn scenarios() -> Vec<Scenario> {
    let base = |name, delay, loss| Scenario {
        name,
        delay,
        shift_ns: 0,
        loss,
        pps: 35_000.0,
        seconds: 2.0,
        epoch_ns: 100_000_000,
        counters: 262_144,
        tick_ns: 1,
        offset_ns: 0,
        group: 1,
        cells: 20,
        sized: false,
        load: None,
    };
    // A gamma-like body (Weibull shape 1.5) shifted by a 30-µs propagation delay: μ ≫ σ.
    let shifted = DelaySpec::Iid(DelayModel::Weibull { shape: 1.5, mean: 20_000.0 });
    // A log-normal body with a second, slower mode (5 %): heavy right tail.
    let lnmix =
        DelaySpec::Iid(DelayModel::Bimodal { low_mean: 30_000.0, high_mean: 600_000.0, p_high: 0.05 });
    let lognormal = DelaySpec::Iid(DelayModel::LogNormal { mu: 40_000f64.ln(), sigma: 0.8 });
    // A FIFO queue of `mbps` behind a 20-µs propagation delay. The generator's TCP
    // conversations are closed-loop, so the utilisation is measured, not set: at 35 000
    // packets/s, 35 Mb/s gives ≈ 0.55, 20 Mb/s ≈ 0.6 and 16 Mb/s ≈ 0.8 (checked per scenario).
    let queue = |mbps: f64| {
        DelaySpec::Queue(QueueModel::Queue {
            service_rate_bps: queue_mbps().unwrap_or(mbps) * 1e6,
            propagation_ns: 20_000,
        })
    };
    vec![
        Scenario { shift_ns: 30_000, ..base("shifted/none/µs-ticks", shifted, LossModel::None) },
        Scenario {
            shift_ns: 30_000,
            ..base("shifted/uniform-2%", shifted, LossModel::Uniform { rate: 0.02 })
        },
        base("lognormal-mix/bursty-5%", lnmix, LossModel::Bursty { rate: 0.05, mean_burst: 8.0 }),
        Scenario {
            load: Some(0.55),
            ..base(
                "queue-ρ0.55/bursty-1%",
                DelaySpec::Queue(QueueModel::Queue {
                    service_rate_bps: 35_000_000.0,
                    propagation_ns: 20_000,
                }),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.55),
            ..base(
                "queue-ρ0.55/none",
                DelaySpec::Queue(QueueModel::Queue {
                    service_rate_bps: 35_000_000.0,
                    propagation_ns: 20_000,
                }),
                LossModel::None,
            )
        },
        // A crowded vector: ≈ 0.2 packets per cell, so the foreign correction matters (at ≈ 0.3 the
        // normal 95 % interval covers only 92 %: foreign chunks are not normal).
        Scenario {
            counters: 20_000,
            pps: 40_000.0,
            seconds: 1.0,
            tick_ns: 1_000,
            ..base("lognormal/uniform-0.5%/crowded/µs-ticks", lognormal, LossModel::Uniform { rate: 0.005 })
        },
        Scenario {
            shift_ns: 5_000,
            offset_ns: -15_000,
            ..base("shifted/uniform-1%/clock-15µs", shifted, LossModel::Uniform { rate: 0.01 })
        },
        Scenario {
            shift_ns: 5_000,
            offset_ns: 15_000,
            ..base("shifted/uniform-1%/clock+15µs", shifted, LossModel::Uniform { rate: 0.01 })
        },
        // An offset larger than most latencies: nearly every packet reads negative.
        Scenario {
            offset_ns: -200_000,
            ..base(
                "lognormal/bursty-2%/clock-200µs",
                lognormal,
                LossModel::Bursty { rate: 0.02, mean_burst: 8.0 },
            )
        },
        // Issue 19 (W12, third session): at ρ ≥ 0.6 the queue holds milliseconds, so a flow
        // keeps packets in flight across every 100-ms epoch edge; each lands in one of its m
        // cells at one point only. About m·ln 2 such packets (14 for m = 20) leave fewer than
        // m/2 usable cells and no mean (docs/colate.md). m = 64, or 1-s groups, restore
        // coverage at ρ 0.8.
        Scenario {
            load: Some(0.6),
            ..base("queue-ρ0.6/bursty-1%", queue(24.0), LossModel::Bursty { rate: 0.01, mean_burst: 8.0 })
        },
        Scenario {
            load: Some(0.8),
            cells: 64,
            ..base("queue-ρ0.8/bursty-1%/m64", queue(16.0), LossModel::Bursty { rate: 0.01, mean_burst: 8.0 })
        },
        Scenario {
            load: Some(0.8),
            group: 10,
            ..base(
                "queue-ρ0.8/bursty-1%/1-s groups",
                queue(17.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.6),
            group: 0,
            ..base(
                "queue-ρ0.6/bursty-1%/whole run",
                queue(20.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        // Issue 19 (W12, fourth session): the same busy queues at 100-ms epochs with m derived
        // from the load an operator measures (coverage sizing), with and without a clock offset.
        Scenario {
            load: Some(0.8),
            sized: true,
            ..base(
                "queue-ρ0.8/bursty-1%/sized",
                queue(16.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.8),
            sized: true,
            offset_ns: -15_000,
            ..base("queue-ρ0.8/uniform-1%/sized/clock-15µs", queue(15.0), LossModel::Uniform { rate: 0.01 })
        },
        // At ρ 0.9 the queue's p99 delay reaches the 100-ms epoch (the sizing refuses a window
        // no longer than the delay), so the sized query groups 10 epochs.
        Scenario {
            load: Some(0.9),
            sized: true,
            group: 10,
            ..base(
                "queue-ρ0.9/bursty-1%/sized/1-s groups",
                queue(15.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            pps: 240_000.0,
            counters: 2_000_000,
            ..base("shifted/uniform-1%/20k-flows", shifted, LossModel::Uniform { rate: 0.01 })
        },
    ]
    .into_iter()
    .map(|mut s| {
        if s.name.starts_with("shifted/none") {
            s.tick_ns = 1_000;
        }
        s
    })
    .collect()
}

/// `WIRELAT_COLATE_MATRIX_QUEUE_MBPS` replaces every queue scenario's service rate (Mb/s): how
/// BENCHMARKS.md measures coverage against the utilisation (the ρ check then fails by design
/// where the measured load leaves the scenario's name).
fn queue_mbps() -> Option<f64> {
    std::env::var("WIRELAT_COLATE_MATRIX_QUEUE_MBPS").ok().and_then(|s| s.parse().ok())
}

/// `WIRELAT_COLATE_MATRIX_SEED` shifts every scenario's seed (default 0): how BENCHMARKS.md
/// repeats the sized queue scenarios on other traces (the ρ check may then fail by design: the
/// closed-loop traffic sets the utilisation).
fn seed_shift() -> u64 {
    std::env::var("WIRELAT_COLATE_MATRIX_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn scale() -> f64 {
    std::env::var("WIRELAT_COLATE_MATRIX_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

/// The scenario's counters times the size factor, rounded up to a prime (the scenario's own
/// count at factor 1).
fn counters(sc: &Scenario) -> u32 {
    next_prime(common::scaled(u64::from(sc.counters), common::size_factor(), 3)) as u32
}

/// A packet at a point: (flow hash, identity, timestamp).
type Packet = (u64, u64, u64);

/// One flow's truth in one epoch.
struct FlowEpochTruth {
    hash: u64,
    sent: u64,
    lost: u64,
    /// The flow's own packets that spoil a cell at one point only: lost, or crossing the
    /// group's edges in flight (sent in it and received in another, or the reverse).
    one_sided: u64,
    mean_ns: f64,
    std_dev_ns: f64,
}

/// What one scenario measured.
#[derive(Default)]
struct Tally {
    /// Every checked flow's query report, exactly (`{:?}`), for the golden digest.
    golden: Vec<String>,
    /// Forward flows in the trace.
    trace_flows: usize,
    /// Of those, with ≥ MIN_PACKETS packets in some epoch.
    flows: usize,
    checked: usize,
    estimated: usize,
    reliable: usize,
    reliable_within: usize,
    within_bound: usize,
    covered: usize,
    below_floor: usize,
    lossy: usize,
    rel: Vec<f64>,
    rel_lossless: Vec<f64>,
    sd_rel: Vec<f64>,
    paper_rel: Vec<f64>,
    paper_negative: usize,
    /// [`FlowEpochTruth::one_sided`] of the flow-epochs without and with a mean.
    one_sided_none: Vec<f64>,
    one_sided_mean: Vec<f64>,
    /// Why flow-epochs got no mean: reason → count.
    reasons: BTreeMap<String, usize>,
    /// The floor each query group used (ns), and the smallest latency in that group.
    floors: Vec<f64>,
    smallest: Vec<f64>,
    /// Groups whose floor was derived (rather than 0 for too few single-packet cells).
    floor_derived: usize,
    /// The queue's measured utilisation.
    rho: Option<f64>,
    /// m used.
    cells: u32,
    /// For sized scenarios: p99 delay (ns), p99 flow rate (packets/s), X, P(≥ m/2 clean).
    sizing: Option<(f64, f64, u64, f64)>,
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The scenario's trace, COLATE at both points epoch by epoch, and every checked flow's query.
fn run(sc: &Scenario, seed: u64, failures: &mut Vec<String>) -> Tally {
    let seg = SegmentConfig {
        delay: sc.delay,
        loss: sc.loss,
        fifo: false,
        reorder: None,
        paths: if sc.shift_ns > 0 {
            vec![PathClass { weight: 1.0, extra_delay_ns: sc.shift_ns }]
        } else {
            vec![]
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
fn sized_cells(
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

#[allow(clippy::too_many_arguments)]
fn check_flow(
    sc: &Scenario,
    k: u64,
    t: &FlowEpochTruth,
    q: &FlowLatencyReport,
    floor_ns: i64,
    tally: &mut Tally,
    fail: &mut impl FnMut(String),
) {
    tally.checked += 1;
    tally.lossy += usize::from(t.lost > 0);
    if let Ok(p) = &q.mean_ns {
        tally.paper_rel.push((p.value - t.mean_ns).abs() / t.mean_ns.abs());
        tally.paper_negative += usize::from(p.value < floor_ns as f64);
    }
    let e = match &q.mean_counts_ns {
        Ok(e) => e,
        Err(why) => {
            if why.to_string().is_empty() || q.unreliable_reason.is_none() {
                fail(format!("epoch {k} flow {:#x}: no mean and no reason", t.hash));
            }
            let why = why.to_string();
            let short = if why.starts_with("only ") { "fewer than m/2 usable cells" } else { why.as_str() };
            *tally.reasons.entry(short.to_owned()).or_default() += 1;
            tally.one_sided_none.push(t.one_sided as f64);
            return;
        }
    };
    tally.estimated += 1;
    tally.one_sided_mean.push(t.one_sided as f64);
    if e.value < floor_ns as f64 {
        tally.below_floor += 1;
        fail(format!("epoch {k} flow {:#x}: mean {} ns below the floor {floor_ns}", t.hash, e.value));
    }
    if !q.reliable && q.unreliable_reason.is_none() {
        fail(format!("epoch {k} flow {:#x}: unreliable without a reason", t.hash));
    }
    let err = (e.value - t.mean_ns).abs();
    let rel = err / t.mean_ns.abs().max(sc.tick_ns as f64);
    tally.rel.push(rel);
    if t.lost == 0 {
        tally.rel_lossless.push(rel);
    }
    if let Some(i) = e.interval {
        tally.covered += usize::from(i.low <= t.mean_ns && t.mean_ns <= i.high);
    }
    if let Some(se) = q.mean_counts_std_error_ns {
        tally.within_bound += usize::from(err <= BOUND_SE * se);
    }
    if q.reliable {
        tally.reliable += 1;
        tally.reliable_within += usize::from(err <= opts_reliable_half_width() * e.value.abs());
    }
    if let Ok(sd) = &q.std_dev_counts_ns
        && t.std_dev_ns > 0.0
    {
        tally.sd_rel.push((sd.value - t.std_dev_ns).abs() / t.std_dev_ns);
    }
}

fn opts_reliable_half_width() -> f64 {
    QueryOptions::default().reliable_half_width
}

/// p̂ ≥ p − 3·√(p(1 − p)/n): the share a check needs so it fails by chance only once in ~700.
fn at_least(hits: usize, of: usize, p: f64) -> bool {
    of == 0 || hits as f64 / of as f64 >= p - 3.0 * (p * (1.0 - p) / of as f64).sqrt()
}

#[test]
fn every_flow_of_every_scenario_is_within_the_estimators_bounds() {
    let mut failures = Vec::new();
    let factor = common::size_factor();
    let mut checks = common::Checks::new(factor);
    let mut golden = golden::Golden::default();
    // Headline over every scenario: the worst scenario's share with a mean, within 10·se and
    // covered, the worst p99 error, and the largest vector's bytes (u64 cell and packet count).
    let (mut worst_mean, mut worst_within, mut worst_cover) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let (mut worst_p99, mut bytes, mut flow_epochs) = (0.0f64, 0u64, 0usize);
    let mut all_rel = Vec::new();
    println!(
        "| scenario | flows in trace / checked / flow-epochs (lossy) | with mean | reliable (within 25 %) | rel. error median / p99 / max (lossless p99) | within 10·se | 95 % coverage | σ̂ rel. error median / p99 | paper Eq 3: negative, p99 rel. error | derived floor: median (smallest latency, median) | no mean: why | own one-sided packets, median: no mean / mean | m (sized from: p99 delay, p99 flow rate → X, P) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // `WIRELAT_COLATE_MATRIX_ONLY=substring` runs the scenarios whose name contains it.
    let only = std::env::var("WIRELAT_COLATE_MATRIX_ONLY").unwrap_or_default();
    for (i, sc) in scenarios().iter().enumerate() {
        if !sc.name.contains(only.as_str()) {
            continue;
        }
        let mut t = run(sc, 1900 + seed_shift() + i as u64, &mut failures);
        for line in t.golden.drain(..) {
            golden.push("colate_flow", format!("{} {line}", sc.name));
        }
        bytes = bytes.max(u64::from(counters(sc)) * 16);
        let n = t.checked;
        if t.checked > 0 {
            flow_epochs += n;
            worst_mean = worst_mean.min(t.estimated as f64 / n as f64);
            worst_within = worst_within.min(t.within_bound as f64 / t.estimated.max(1) as f64);
            worst_cover = worst_cover.min(t.covered as f64 / t.estimated.max(1) as f64);
            all_rel.extend(&t.rel);
        }
        if !at_least(t.estimated, n, 0.95) || t.estimated * 100 < n * 95 {
            checks.guarantee(format!(
                "{}: {} of {n} flow-epochs have a mean (< 95 %) with {} counters",
                sc.name,
                t.estimated,
                counters(sc)
            ));
        }
        let mut fail = |what: String| failures.push(format!("{}: {what}", sc.name));
        if t.flows < 50 {
            fail(format!(
                "only {} flows with ≥ {MIN_PACKETS} packets in an epoch: the scenario checks little",
                t.flows
            ));
        }
        // The p99 flow meets the bound: at most 1 % of the flows may miss it.
        if t.within_bound * 100 < t.estimated * 99 {
            fail(format!("{} of {} flows within {BOUND_SE}·se (< 99 %)", t.within_bound, t.estimated));
        }
        if !at_least(t.covered, t.estimated, COVER_LEVEL) {
            fail(format!("95 % intervals cover {} of {}", t.covered, t.estimated));
        }
        if !at_least(t.reliable_within, t.reliable, 0.95) {
            fail(format!("{} of {} reliable flows within 25 %", t.reliable_within, t.reliable));
        }
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        let lossless_p99 = quantile(&mut t.rel_lossless, 0.99);
        let (p99, max) = (quantile(&mut t.rel, 0.99), quantile(&mut t.rel, 1.0));
        if p99.is_finite() {
            worst_p99 = worst_p99.max(p99);
        }
        println!(
            "| {}{} | {} / {} / {n} ({}) | {:.1} % | {:.1} % ({:.1} %) | {:.2} % / {:.1} % / {:.1} % ({:.1} %) | {:.2} % | {:.1} % | {:.1} % / {:.0} % | {}, {:.0} % | {:.0} ns ({:.0} ns); {} of {} groups derived | {} | {} / {} | {}{} |",
            sc.name,
            t.rho.map(|r| format!(" (measured ρ {r:.2})")).unwrap_or_default(),
            t.trace_flows,
            t.flows,
            t.lossy,
            pct(t.estimated, n),
            pct(t.reliable, t.estimated),
            pct(t.reliable_within, t.reliable),
            100.0 * quantile(&mut t.rel, 0.5),
            100.0 * p99,
            100.0 * max,
            100.0 * lossless_p99,
            pct(t.within_bound, t.estimated),
            pct(t.covered, t.estimated),
            100.0 * quantile(&mut t.sd_rel, 0.5),
            100.0 * quantile(&mut t.sd_rel, 0.99),
            t.paper_negative,
            100.0 * quantile(&mut t.paper_rel, 0.99),
            quantile(&mut t.floors, 0.5),
            quantile(&mut t.smallest, 0.5),
            t.floor_derived,
            t.floors.len(),
            t.reasons.iter().map(|(r, c)| format!("{c} {r}")).collect::<Vec<_>>().join("; "),
            quantile(&mut t.one_sided_none, 0.5),
            quantile(&mut t.one_sided_mean, 0.5),
            t.cells,
            t.sizing
                .map(|(d, r, x, p)| format!(" ({:.1} ms, {r:.0}/s → X = {x}, P = {p:.3})", d / 1e6))
                .unwrap_or_default(),
        );
    }
    common::headline(
        "colate",
        "colate",
        factor,
        bytes,
        &[
            ("flow_epochs", flow_epochs.to_string()),
            ("with_mean_worst", format!("{worst_mean:.4}")),
            ("rel_err_p50", format!("{:.3e}", quantile(&mut all_rel, 0.5))),
            ("rel_err_p99_worst", format!("{worst_p99:.3e}")),
            ("within_10se_worst", format!("{worst_within:.4}")),
            ("ci95_coverage_worst", format!("{worst_cover:.4}")),
        ],
    );
    for f in failures {
        checks.fail(f);
    }
    checks.finish();
    // The estimates themselves, byte for byte, when no WIRELAT_COLATE_MATRIX_* knob changed the
    // matrix and the sizes are the default.
    if factor == 1.0 && std::env::vars().all(|(k, _)| !k.starts_with("WIRELAT_COLATE_MATRIX")) {
        golden.check(
            "colate_matrix",
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/colate_matrix.digest")),
        );
    }
}
