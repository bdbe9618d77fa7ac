//! LDS benches: per-packet update at the paper's 17500×4 = 70,000 cells (target ≤ 25 ns), with
//! and without the per-epoch flow log, the multi-bank k = 5 layout, shard merge, encode and
//! decode, estimator throughput in flows per second, and the harvest's drain of one or eight shards
//! (`BENCH_LDS_HARVEST_ONLY=1` runs only that).
//!
//! The key stream is the synthetic S1 trace of spec §11 (146,000 flows, packets in send-time
//! order, so flows interleave as on a link); flow hashes and identities are precomputed, as the
//! packet layer hands them to the synopsis.
//!
//! Time is the benchmarking thread's own on-CPU time (`/proc/thread-self/schedstat`, ns), not
//! wall-clock time: the 2-vCPU machine is shared, and time spent waiting for a CPU is not the
//! synopsis's cost. (Cache sharing with other processes still shows.) The kernel accounts that
//! time at scheduler ticks, so every sample runs for about a second (flat sampling, 10 samples).
//!
//! `cargo bench --no-default-features --bench lds`

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use std::hint::black_box;
use std::time::Duration;
use wirelat_dataplane::packet::FlowKey;
use wirelat_dataplane::synopsis::codec::Writer;
use wirelat_dataplane::synopsis::lds::config::DEFAULT_SIZED_ROWS;
use wirelat_dataplane::synopsis::lds::flows::share::FlowListJob;
use wirelat_dataplane::synopsis::lds::trace::{Trace, TraceConfig};
use wirelat_dataplane::synopsis::lds::{Estimator, FlowSet, Lds, LdsConfig, coverage};
use wirelat_dataplane::synopsis::{Observation, Synopsis};

/// On-CPU time of the calling thread in ns (Linux schedstat; first field).
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|f| f.parse().ok()))
        .unwrap_or(0)
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuNs
    }
}

struct CpuNs;

impl ValueFormatter for CpuNs {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = if typical < 1e3 {
            (1.0, "ns cpu")
        } else if typical < 1e6 {
            (1e3, "µs cpu")
        } else if typical < 1e9 {
            (1e6, "ms cpu")
        } else {
            (1e9, "s cpu")
        };
        values.iter_mut().for_each(|v| *v /= div);
        unit
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let n = match t {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => *n as f64,
            _ => 1.0,
        };
        // ns per element, the unit the targets are written in.
        values.iter_mut().for_each(|v| *v /= n);
        "ns cpu/elem"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Packets in the replayed stream (a contiguous slice of S1 in send order).
const STREAM: usize = 1 << 19;
/// Packets per timed batch.
const BATCH: usize = 4096;

struct Pkt {
    key: FlowKey,
    flow_hash: u64,
    identity: u64,
    ts_ns: u64,
}

fn stream(trace: &Trace) -> Vec<Pkt> {
    let start = trace.packets.len() / 2 - STREAM / 2;
    trace.packets[start..start + STREAM]
        .iter()
        .map(|p| {
            let f = &trace.flows[p.flow as usize];
            Pkt { key: f.key, flow_hash: f.flow_hash, identity: p.identity, ts_ns: p.send_ns }
        })
        .collect()
}

/// The appliance's allocator where it is built (transparent huge pages for blocks of 4 MiB and
/// more), so the flow logs' 32-MiB tables are laid out as in `wirelat`: on 4-KiB pages nearly
/// every probe of them would also miss the TLB.
#[cfg(feature = "dpdk")]
#[global_allocator]
static ALLOCATOR: wirelat_dataplane::dpdk::HugePageAlloc = wirelat_dataplane::dpdk::HugePageAlloc;

/// Ten flat samples of about a second each: long against the scheduler tick.
fn long_samples(g: &mut criterion::BenchmarkGroup<'_, ThreadCpu>) {
    g.sampling_mode(SamplingMode::Flat).sample_size(10).warm_up_time(Duration::from_secs(2));
    g.measurement_time(Duration::from_secs(10));
}

fn bench_update(c: &mut Criterion<ThreadCpu>, trace: &Trace, pkts: &[Pkt]) {
    let distinct = {
        let mut h: Vec<u64> = pkts.iter().map(|p| p.flow_hash).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    };
    eprintln!("stream: {} packets of {distinct} flows (S1, {} flows in all)", pkts.len(), trace.flows.len());
    let mut g = c.benchmark_group("lds_update");
    long_samples(&mut g);
    g.throughput(Throughput::Elements(BATCH as u64));
    let layouts = [
        ("17500x4_k1_raw", LdsConfig { flow_capacity: 0, ..LdsConfig::new(4, 17_500) }, false),
        ("17500x4_k1_with_flow_log", LdsConfig::new(4, 17_500), true),
        ("17500x4_k1_no_flow_log", LdsConfig { flow_capacity: 0, ..LdsConfig::new(4, 17_500) }, true),
        (
            "87500x4_k5_multibank_with_flow_log",
            LdsConfig { vlda_len: 5, sampling: vec![0.01, 0.1, 0.5, 1.0], ..LdsConfig::new(4, 87_500) },
            true,
        ),
    ];
    // W12: the layouts coverage sizing derives (`[synopses.lds] expected_flows`, 5 % loss,
    // flows of up to 200 packets per epoch) against the old default for the same flows
    // (k = 1, width = flows per epoch), all with the per-epoch flow log as a point runs them.
    let mut layouts = layouts.to_vec();
    for flows in [2_000u32, 20_000] {
        let t = coverage::CoverageTarget {
            expected_loss: 0.05,
            max_flow_packets: 200.0,
            ..coverage::CoverageTarget::new(f64::from(flows))
        };
        let sized = coverage::for_coverage(&t, DEFAULT_SIZED_ROWS).expect("a reachable target");
        let cfg = LdsConfig { vlda_len: sized.vlda_len, ..LdsConfig::new(sized.rows, sized.width) };
        let old = LdsConfig::new(4, flows);
        eprintln!(
            "{flows} flows: sized {}x{} k{} ({} B), old {}x{} k1 ({} B)",
            cfg.width,
            cfg.rows,
            cfg.vlda_len,
            cfg.sketch_bytes(),
            old.width,
            old.rows,
            old.sketch_bytes()
        );
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        layouts.push((leak(format!("old_{flows}x4_k1_with_flow_log")), old, true));
        layouts.push((
            leak(format!("sized_{flows}flows_{}x{}_k{}_with_flow_log", cfg.width, cfg.rows, cfg.vlda_len)),
            cfg,
            true,
        ));
    }
    for (name, cfg, via_trait) in layouts {
        let mut lds = Lds::new(&cfg).expect("valid config");
        let mut at = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                let batch = &pkts[at..at + BATCH];
                at = (at + BATCH) % pkts.len();
                if via_trait {
                    for p in batch {
                        let obs = Observation {
                            ts_ns: p.ts_ns,
                            flow: &p.key,
                            flow_hash: p.flow_hash,
                            identity: p.identity,
                            exchange: None,
                            encap: wirelat_dataplane::packet::Encap::NONE,
                        };
                        lds.update(&mut (), &obs);
                    }
                } else {
                    for p in batch {
                        lds.update_raw(p.flow_hash, p.identity, p.ts_ns, 1);
                    }
                }
            })
        });
        black_box(&lds);
    }
    g.finish();
}

fn bench_epoch(c: &mut Criterion<ThreadCpu>, trace: &Trace) {
    let cfg = LdsConfig::new(4, 17_500);
    let (mut sender, mut receiver) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    for p in &trace.packets {
        let f = &trace.flows[p.flow as usize];
        let obs = |ts_ns| Observation {
            ts_ns,
            flow: &f.key,
            flow_hash: f.flow_hash,
            identity: p.identity,
            exchange: None,
            encap: wirelat_dataplane::packet::Encap::NONE,
        };
        sender.update(&mut (), &obs(p.send_ns));
        receiver.update(&mut (), &obs(p.recv_ns()));
    }
    let bytes = sender.encode();
    eprintln!("encoded sender sketch + flow log: {} bytes ({} flows)", bytes.len(), sender.flows().len());

    let mut g = c.benchmark_group("lds_epoch");
    long_samples(&mut g);
    g.bench_function("merge_17500x4_shards_with_flow_logs", |b| {
        b.iter_batched(|| receiver.clone(), |mut m| m.merge(&sender).map(|_| m), BatchSize::LargeInput)
    });
    g.bench_function("encode_17500x4_with_146k_flows", |b| b.iter(|| black_box(sender.encode())));
    g.bench_function("decode_17500x4_with_146k_flows", |b| b.iter(|| Lds::decode(&cfg, black_box(&bytes))));
    g.finish();

    let mut g = c.benchmark_group("lds_estimate");
    long_samples(&mut g);
    let flows = receiver.flows();
    g.throughput(Throughput::Elements(flows.len() as u64));
    let est = Estimator::new(&sender, &receiver).unwrap();
    g.bench_function("estimate_all_17500x4_k1_146k_flows", |b| b.iter(|| black_box(est.all(flows))));

    let mb = LdsConfig { vlda_len: 5, sampling: vec![0.01, 0.1, 0.5, 1.0], ..LdsConfig::new(4, 87_500) };
    let (mut s5, mut r5) = (Lds::new(&mb).unwrap(), Lds::new(&mb).unwrap());
    for p in &trace.packets {
        let f = &trace.flows[p.flow as usize];
        let obs = |ts_ns| Observation {
            ts_ns,
            flow: &f.key,
            flow_hash: f.flow_hash,
            identity: p.identity,
            exchange: None,
            encap: wirelat_dataplane::packet::Encap::NONE,
        };
        s5.update(&mut (), &obs(p.send_ns));
        r5.update(&mut (), &obs(p.recv_ns()));
    }
    let est5 = Estimator::new(&s5, &r5).unwrap();
    g.bench_function("estimate_all_87500x4_k5_multibank_146k_flows", |b| {
        b.iter(|| black_box(est5.all(r5.flows())))
    });
    g.finish();
}

/// The harvest's step: 800 000 packets (the first of S1) steered by flow, as RSS would, to 1 or 8
/// shards of the deployment's shape (17 500 × 4 cells, 262 144 flows, 524 288 slots), drained
/// into an accumulator still holding the last epoch. One shard holds about 17 000 flows (31
/// slots per flow: `FlowSet::take_from` inserts them rather than copying the table), each of
/// eight about 2 200. `ordered` is the trait's default (reset, the merges
/// in order, a reset of each shard); `drain_all` is LDS's own.
fn bench_harvest(c: &mut Criterion<ThreadCpu>, trace: &Trace) {
    const PACKETS: usize = 800_000;
    let cfg = LdsConfig { flow_capacity: 262_144, ..LdsConfig::new(4, 17_500) };
    let mut g = c.benchmark_group("lds_harvest_800k");
    long_samples(&mut g);
    g.throughput(Throughput::Elements(PACKETS as u64));
    for n in [1usize, 8] {
        let mut shards: Vec<Lds> = (0..n).map(|_| Lds::new(&cfg).unwrap()).collect();
        for p in trace.packets.iter().take(PACKETS) {
            let f = &trace.flows[p.flow as usize];
            let obs = Observation {
                ts_ns: p.send_ns,
                flow: &f.key,
                flow_hash: f.flow_hash,
                identity: p.identity,
                exchange: None,
                encap: wirelat_dataplane::packet::Encap::NONE,
            };
            shards[p.flow as usize % n].update(&mut (), &obs);
        }
        eprintln!("harvest shards: {:?} flows", shards.iter().map(|s| s.flows().len()).collect::<Vec<_>>());
        let mut acc = Lds::new(&cfg).unwrap();
        acc.merge(&shards[0]).unwrap();
        g.bench_function(BenchmarkId::new("ordered", n), |b| {
            b.iter_batched(
                || (acc.clone(), shards.clone()),
                |(mut a, mut ss)| {
                    a.reset();
                    for s in &ss {
                        a.merge(s).unwrap();
                    }
                    for s in &mut ss {
                        s.reset();
                    }
                    (a, ss)
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function(BenchmarkId::new("drain_all", n), |b| {
            b.iter_batched(
                || (acc.clone(), shards.clone()),
                |(mut a, mut ss)| {
                    let mut refs: Vec<&mut Lds> = ss.iter_mut().collect();
                    a.drain_all(&mut refs).unwrap();
                    (a, ss)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// The flow logs' part of the harvest in `scripts/control-cost.sh`'s regime (`LOAD=replicas`,
/// eight workers): each of 8 shards holds `FLOWS` distinct flows in a set of the point's
/// capacity (2²¹ flows, a 32-MiB table, as each worker's shard has), drained into the
/// accumulator as `Lds::drain_all` drains them (the first taken, the rest merged, each cleared),
/// then the accumulator's flow list encoded. About 52 000 flows a shard is what a 100-ms epoch
/// of the control-cost trace gives each worker per direction.
fn bench_flow_merge(c: &mut Criterion<ThreadCpu>) {
    const SHARDS: usize = 8;
    const FLOWS: u64 = 52_000;
    const CAPACITY: u32 = 1 << 21;
    let shards: Vec<FlowSet> = (0..SHARDS as u64)
        .map(|s| {
            let mut set = FlowSet::new(CAPACITY);
            for i in 0..FLOWS {
                let n = s * FLOWS + i;
                let mut key = FlowKey {
                    ip_version: 4,
                    protocol: 6,
                    src_port: n as u16,
                    dst_port: 443,
                    ..FlowKey::default()
                };
                key.src_addr[10] = 0xff;
                key.src_addr[11] = 0xff;
                key.src_addr[12..].copy_from_slice(&(n as u32).to_be_bytes());
                key.dst_addr = key.src_addr;
                set.record(
                    &key,
                    wirelat_dataplane::synopsis::hash::mix64(n),
                    wirelat_dataplane::packet::Encap::NONE,
                );
            }
            set
        })
        .collect();
    let mut g = c.benchmark_group("lds_flow_merge_8x52k");
    long_samples(&mut g);
    g.throughput(Throughput::Elements(SHARDS as u64 * FLOWS));
    // An accumulator that has held an epoch, as the harvest's has: its pages are mapped.
    let mut acc = FlowSet::new(CAPACITY);
    for s in &shards {
        acc.merge(s);
    }
    g.bench_function("drain", |b| {
        b.iter_batched(
            || (acc.clone(), shards.clone()),
            |(mut a, mut ss)| {
                let (first, rest) = ss.split_first_mut().expect("shards");
                a.take_from(first);
                for s in rest.iter_mut() {
                    a.merge(s);
                    s.clear();
                }
                (a, ss)
            },
            BatchSize::LargeInput,
        )
    });
    // The harvest's way since the twenty-seventh session: the lists appended, no table probed.
    g.bench_function("gather", |b| {
        b.iter_batched(
            || (acc.clone(), shards.clone()),
            |(mut a, mut ss)| {
                let mut sets: Vec<&mut FlowSet> = ss.iter_mut().collect();
                assert!(a.gather(&mut sets));
                (a, ss)
            },
            BatchSize::LargeInput,
        )
    });
    // The thirtieth session's way: the control thread's part of a shared gathering (lend, then
    // take back once a helper thread, whose CPU time this thread's clock does not count, did
    // every chunk) ...
    // The accumulator's byte buffer is kept from epoch to epoch: an untimed first round grows
    // it, so the timed one allocates nothing, as a harvest after the first does.
    let shared_once = || {
        let (mut a, mut ss, mut job) = (acc.clone(), shards.clone(), FlowListJob::default());
        let mut sets: Vec<&mut FlowSet> = ss.iter_mut().collect();
        assert!(a.lend_lists(&mut sets, &mut job));
        while job.help() {}
        a.take_back_lists(&mut sets, &mut job);
        a
    };
    // Wall-clock time of the two steps alone (the helping between them untimed): this thread's
    // schedstat clock is only brought up to date when it is descheduled, so it charged the
    // untimed preparation to whichever timed step blocked first.
    g.bench_function("shared_control", |b| {
        b.iter_custom(|iters| {
            let mut ns = 0u64;
            for _ in 0..iters {
                let (mut a, mut ss, mut job) = (shared_once(), shards.clone(), FlowListJob::default());
                let mut sets: Vec<&mut FlowSet> = ss.iter_mut().collect();
                let lending = std::time::Instant::now();
                assert!(a.lend_lists(&mut sets, &mut job));
                ns += lending.elapsed().as_nanos() as u64;
                while job.help() {}
                let taking = std::time::Instant::now();
                let done = a.take_back_lists(&mut sets, &mut job);
                ns += taking.elapsed().as_nanos() as u64;
                assert_eq!(done.by_control, 0);
                black_box((a, ss));
            }
            ns
        })
    });
    // ... the helpers' part, all of it on one thread ...
    g.bench_function("shared_helpers", |b| {
        b.iter_batched(
            || {
                let (mut a, mut ss, mut job) = (shared_once(), shards.clone(), FlowListJob::default());
                let mut sets: Vec<&mut FlowSet> = ss.iter_mut().collect();
                assert!(a.lend_lists(&mut sets, &mut job));
                (a, ss, job)
            },
            |(a, ss, job)| {
                while job.help() {}
                (a, ss, job)
            },
            BatchSize::LargeInput,
        )
    });
    let mut shared = acc.clone();
    let mut lent = shards.clone();
    let mut sets: Vec<&mut FlowSet> = lent.iter_mut().collect();
    let mut job = FlowListJob::default();
    assert!(shared.lend_lists(&mut sets, &mut job));
    while job.help() {}
    shared.take_back_lists(&mut sets, &mut job);
    let merged = acc;
    let mut body = Vec::new();
    g.bench_function("encode", |b| {
        b.iter(|| {
            body.clear();
            merged.encode(&mut Writer::new(&mut body));
            black_box(body.len())
        })
    });
    // ... and the publish's encoding of what the helpers encoded: a copy of their parts.
    g.bench_function("encode_shared", |b| {
        b.iter(|| {
            body.clear();
            shared.encode(&mut Writer::new(&mut body));
            black_box(body.len())
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion<ThreadCpu>) {
    if std::env::var_os("BENCH_LDS_FLOW_MERGE_ONLY").is_some() {
        return bench_flow_merge(c);
    }
    let trace = Trace::generate(&TraceConfig::s1(1)).expect("S1 parameters are valid");
    if std::env::var_os("BENCH_LDS_HARVEST_ONLY").is_some() {
        return bench_harvest(c, &trace);
    }
    let pkts = stream(&trace);
    bench_update(c, &trace, &pkts);
    bench_epoch(c, &trace);
    bench_harvest(c, &trace);
    bench_flow_merge(c);
}

criterion_group! {
    name = lds;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = benches
}
criterion_main!(lds);
