//! RDA benches: per-packet update including the cache append (online and late-binding
//! modes, L3-sized and DRAM-sized caches), decode time against the
//! difference size d, merge, encodings and the late-binding epoch-end steps; and a point's
//! retention of one epoch's cache with the first look-up the peer sends for it, from a cache
//! filed in bulk (a sorted run) and from one filled one by one (a table); and the control
//! thread's harvest of an epoch's worker logs, merged in order or all at once.
//!
//! Run: `cargo bench --no-default-features --bench rda`

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::packet::FlowKey;
use wirelat_dataplane::synopsis::rda::share::{FilingJob, Help};
use wirelat_dataplane::synopsis::rda::sim::{TraceSpec, generate};
use wirelat_dataplane::synopsis::rda::sorted::Sorter;
use wirelat_dataplane::synopsis::rda::{LocalCache, PeelGuards, Rda, RdaConfig, Side, reconcile, wire};
use wirelat_dataplane::synopsis::{Observation, Synopsis};

/// A realistic key stream: distinct random identities (the packet layer's xxh3 output is
/// uniform) with increasing timestamps.
fn keys(n: usize, seed: u64) -> Vec<(u64, u64)> {
    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let mut ts = 1_700_000_000_000_000_000u64;
    (0..n)
        .map(|_| {
            ts += r.random_range(1..200);
            (r.random::<u64>(), ts)
        })
        .collect()
}

/// CPU time this thread has run (user + system), from /proc/thread-self/stat, in clock ticks
/// of 10 ms. The bench machine is shared by several builds at once: wall time there mostly
/// measures the scheduler, on-CPU time measures the code (still inflated by the cache
/// pollution of the processes sharing the core). Falls back to wall time off Linux.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Times `run` by on-CPU time when available (see [`thread_cpu_time`]), else by wall time.
fn timed(run: impl FnOnce()) -> Duration {
    let (c0, w0) = (thread_cpu_time(), Instant::now());
    run();
    match (c0, thread_cpu_time()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => w0.elapsed(),
    }
}

/// One epoch of `n` packets into a reset structure per iteration; only the updates are timed
/// (on-CPU time, see [`thread_cpu_time`]).
fn bench_update(c: &mut Criterion) {
    let mut g = c.benchmark_group("rda_update");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));
    let flow = FlowKey::default();
    for (label, capacity) in [("cache_64k", 1usize << 16), ("cache_1m", 1 << 20)] {
        let n = capacity * 3 / 4;
        let ks = keys(n, 1);
        let obs: Vec<Observation<'_>> = ks
            .iter()
            .map(|&(identity, ts_ns)| Observation {
                ts_ns,
                flow: &flow,
                flow_hash: 0,
                identity,
                exchange: None,
                encap: wirelat_dataplane::packet::Encap::NONE,
            })
            .collect();
        g.throughput(Throughput::Elements(n as u64));
        for (mode, cfg) in [
            ("online_k2_m2500", RdaConfig::online(2, 2500, capacity as u64)),
            ("late_binding", RdaConfig::late_binding(2, capacity as u64)),
        ] {
            let mut rda = Rda::new(&cfg).expect("valid config");
            g.bench_function(BenchmarkId::new(format!("{mode}/per_packet"), label), |b| {
                b.iter_custom(|iters| {
                    let mut t = Duration::ZERO;
                    for _ in 0..iters {
                        rda.reset();
                        t += timed(|| {
                            for o in &obs {
                                rda.update(&mut (), o);
                            }
                        });
                        black_box(rda.counters());
                    }
                    t
                })
            });
        }
    }
    g.finish();
}

/// reconcile() (subtract, peel, repair, mean, variance) at m = 2,500, k = 2 against d.
fn bench_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("rda_decode_k2_m2500");
    g.sample_size(20);
    let cfg = RdaConfig::online(2, 2500, 1 << 15);
    for d in [0usize, 500, 1000, 2000, 3000, 4000] {
        let t = generate(&TraceSpec::paper(20_000, d, 5)).expect("valid trace");
        let mut a = Rda::new(&cfg).expect("valid config");
        let mut bpt = Rda::new(&cfg).expect("valid config");
        for p in &t.sender {
            a.update_raw(p.id, 0, p.ts_ns);
        }
        for p in &t.receiver {
            bpt.update_raw(p.id, 0, p.ts_ns);
        }
        let (ab, bb) = (a.banks().expect("online"), bpt.banks().expect("online"));
        g.bench_with_input(BenchmarkId::from_parameter(d), &d, |b, _| {
            b.iter(|| {
                reconcile(
                    black_box(ab),
                    black_box(bb),
                    LocalCache { side: Side::Sender, cache: a.cache() },
                    bpt.cache(),
                    &PeelGuards::default(),
                )
            })
        });
    }
    g.finish();
}

/// Control-side costs per epoch: shard merge, encodings, late-binding signature and bind.
fn bench_epoch_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("rda_epoch_end");
    g.sample_size(10);
    let cfg = RdaConfig::online(2, 2500, 1 << 17);
    let ks = keys(200_000, 2);
    let mut s1 = Rda::new(&cfg).expect("valid config");
    let mut s2 = Rda::new(&cfg).expect("valid config");
    for (i, &(id, ts)) in ks.iter().enumerate() {
        if i % 2 == 0 { &mut s1 } else { &mut s2 }.update_raw(id, 0, ts);
    }
    g.bench_function("merge_2x100k_online", |b| {
        b.iter_batched(|| s1.clone(), |mut m| m.merge(&s2).map(|_| m), criterion::BatchSize::LargeInput)
    });
    let bytes = s1.encode();
    g.bench_function("encode_online_k2_m2500", |b| b.iter(|| black_box(&s1).encode()));
    g.bench_function("decode_online_k2_m2500", |b| b.iter(|| Rda::decode(&cfg, black_box(&bytes))));
    g.bench_function("cache_export_100k", |b| b.iter(|| wire::encode_cache(&cfg, black_box(s1.cache()))));

    let late = RdaConfig::late_binding(2, 1 << 20);
    let mut lp = Rda::new(&late).expect("valid config");
    for &(id, ts) in &keys(750_000, 3) {
        lp.update_raw(id, 0, ts);
    }
    g.bench_function("signature_750k", |b| b.iter(|| black_box(&lp).signature()));
    g.bench_function("bind_750k_m2500", |b| b.iter(|| black_box(&lp).bind(2500)));
    g.finish();
}

/// What a point's ship does per epoch and direction with RDA's cache (issue 24): retain a copy
/// (`RetainedCaches::retain`), answer the peer's first look-up (1 000 ids; a table's pairs
/// are sorted by it), release it. 2^20 packets: an epoch of 10 Mpps for 100 ms. The cache is
/// a sorted run where the control thread filed the logs in bulk (`Rda::settle`), and a table
/// where ids were inserted one by one (the direct path, and the control thread before W17).
fn bench_retention(c: &mut Criterion) {
    use wirelat_control::ship::retain::RetainedCaches;
    use wirelat_control::sink::RdaPairs;
    use wirelat_control::wire::CacheRef;
    let mut g = c.benchmark_group("rda_retain_and_first_lookup_1M");
    g.sample_size(10);
    g.throughput(Throughput::Elements(1 << 20));
    let cfg = RdaConfig::online(2, 2500, 1 << 20);
    let ks = keys(1 << 20, 4);
    let mut run = Rda::new(&cfg).expect("valid config");
    let mut table = Rda::new(&cfg).expect("valid config");
    for &(id, ts) in &ks {
        run.update_logged(id, 0, ts);
        table.update_raw(id, 0, ts);
    }
    run.settle();
    assert!(run.cache().sorted_pairs().is_some() && table.cache().sorted_pairs().is_none());
    let ids: Vec<u64> = ks.iter().step_by(1 << 10).map(|k| k.0).collect();
    for (name, rda) in [("sorted_run", &run), ("table", &table)] {
        g.bench_function(name, |b| {
            let mut store = RetainedCaches::new(1, None, Duration::from_secs(60), u64::MAX);
            let mut epoch = 0;
            b.iter(|| {
                epoch += 1;
                store.retain(0, epoch, RdaPairs::Cache(rda.cache()));
                let answer = store.lookup(&CacheRef { point: 1, segment: 0, epoch }, black_box(&ids));
                store.release(0, epoch);
                answer
            })
        });
    }
    // What the publisher does since the run is moved (`Publisher::retain_rda_cache`): trade
    // the store's spare buffer for the run, share it, and the release makes it the next spare.
    // The settled epoch is cloned for each iteration outside the timing.
    g.bench_function("sorted_run_moved", |b| {
        let mut store = RetainedCaches::new(1, None, Duration::from_secs(60), u64::MAX);
        let mut epoch = 0;
        b.iter_batched_ref(
            || run.clone(),
            |rda| {
                epoch += 1;
                let mut buf = store.spare_run(rda.cache().run_room()).unwrap_or_default();
                assert!(rda.swap_run(&mut buf));
                let moved = Arc::new(buf);
                store.retain(0, epoch, RdaPairs::Run(&moved));
                drop(moved);
                let answer = store.lookup(&CacheRef { point: 1, segment: 0, epoch }, black_box(&ids));
                store.release(0, epoch);
                answer
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// The control thread's harvest of one epoch of RDA (issue 24): `w` workers' logs of 2^20
/// packets in all (10 Mpps for 100 ms), merged into the reset accumulator and filed. Two ways:
/// `ordered` merges each shard (appending its log to the accumulator's) and settles, as the
/// harvest did; `all` is `Synopsis::merge_all`, which sorts the shards' logs where they lie.
/// The accumulator's reset is timed with both (it is part of every harvest).
///
/// `rda_harvest_1M` fills the logs to their capacity, past the 7/8 their regions hold, so its
/// harvest takes the overflow path (a scatter first). `rda_harvest_regions` logs 3/4 of the
/// capacity, all of it in the regions: the path of an epoch sized with room, as the appliance's
/// default and `scripts/control-cost.sh`'s trace are.
fn bench_harvest(c: &mut Criterion) {
    for (name, n) in [("rda_harvest_1M", 1usize << 20), ("rda_harvest_regions", 3 << 18)] {
        bench_harvest_of(c, name, n);
    }
}

fn bench_harvest_of(c: &mut Criterion, name: &str, n: usize) {
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    let cfg = RdaConfig::online(2, 2500, 1 << 20);
    let ks = keys(n, 5);
    for w in [1usize, 4] {
        let mut shards: Vec<Rda> = (0..w).map(|_| Rda::new(&cfg).expect("valid config")).collect();
        for (i, &(id, ts)) in ks.iter().enumerate() {
            shards[i % w].update_logged(id, 0, ts);
        }
        let refs: Vec<&Rda> = shards.iter().collect();
        let mut acc = Rda::new(&cfg).expect("valid config");
        g.bench_function(BenchmarkId::new("ordered", w), |b| {
            b.iter(|| {
                acc.reset();
                for s in &refs {
                    acc.merge(s).expect("same configuration");
                }
                acc.settle();
                acc.counters().cached
            })
        });
        g.bench_function(BenchmarkId::new("all", w), |b| {
            b.iter(|| {
                acc.reset();
                acc.merge_all(&refs).expect("same configuration");
                acc.counters().cached
            })
        });
    }
    g.finish();
}

/// A floor under any exact filing on the control thread (issue 24): the least an exact check for
/// ids repeated within an epoch does per pair, with the pairs already in their top-byte regions
/// as the workers' logs keep them. Each region's ids are probed into a table of the next power of
/// two above twice its ids (8 192 slots, 64 KiB, at ≈ 3 000 ids: in L2), zeroed for each region;
/// no pair is written, no run kept for the look-ups, no repeat taken out of the banks. The
/// zeroing (16 bytes of table per id) is part of the floor, as it is of any table reused region
/// by region; ids are random, so the repeat branch is all but never taken. What it costs per
/// pair against `rda_harvest_regions/all/1` (the same 786 432 pairs filed into the sorted run)
/// says how much any hash-based filing could save over the sort (BENCHMARKS.md, W17
/// twenty-first session), and so whether the control thread can reach a couple of ns per packet
/// at all.
fn bench_repeat_probe_floor(c: &mut Criterion) {
    let n = 3usize << 18;
    let mut regions: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 256];
    for (id, ts) in keys(n, 5) {
        if let Some(r) = regions.get_mut((id >> 56) as usize) {
            r.push((id, ts));
        }
    }
    let mut table: Vec<u64> = Vec::new();
    let mut g = c.benchmark_group("rda_repeat_probe_floor");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("regions", |b| {
        b.iter(|| {
            let (mut distinct, mut repeats) = (0usize, 0usize);
            for r in &regions {
                let bits = (usize::BITS - (2 * r.len()).max(2).leading_zeros()).max(4);
                let mask = (1usize << bits) - 1;
                table.clear();
                table.resize(mask + 1, 0);
                for &(id, _) in r {
                    let mut i = (id >> (56 - bits)) as usize & mask;
                    loop {
                        match table.get_mut(i) {
                            Some(t) if *t == 0 => {
                                *t = id;
                                distinct += 1;
                                break;
                            }
                            Some(t) if *t == id => {
                                repeats += 1;
                                break;
                            }
                            Some(_) => i = (i + 1) & mask,
                            None => break,
                        }
                    }
                }
            }
            black_box((distinct, repeats))
        })
    });
    g.finish();
}

/// Issue 24's way to a control thread of a couple of ns per packet: the workers share the
/// filing. A group of ids (one top byte) sorts on its own ([`Sorter::sort_unique_groups`]), so
/// chunks of groups can be sorted by different threads into outputs of their own; what is left
/// for the control thread is to put the outputs together. Over the pairs of
/// `rda_harvest_regions` (786 432 pairs, 4 workers' regions):
/// - `whole`: the filing as the control thread does it today, one sort of every group (the
///   cache's run allocated once, as in a steady state);
/// - `chunks/G`: the same in chunks of G groups, each into its own output: the sum of what G-group
///   shares would cost their threads, and per chunk (÷ 256/G) the stall of a worker taking one;
/// - `shared/control_part`: [`FilingJob`] with 4 shards' logs, the control thread's part only
///   (lending and taking back; a helper files every chunk in between, untimed);
/// - `shared/threads/2`: the same with the control thread and one helper thread both filing
///   (wall time; this machine has two cores);
/// - `concatenate`: copying the chunks' outputs into one run, the control thread's part if the
///   run must be one slice; `close_first_hole`: moving the whole run one pair down, what closing
///   a hole left in the first chunk by a repeated id costs (the worst case; a run without
///   repeats has no holes).
fn bench_shared_filing(c: &mut Criterion) {
    /// Untimed, before each lend: `shards` copied afresh into `lent` (a lend takes their logs)
    /// and `acc` reset.
    fn fresh<'a>(shards: &[Rda], lent: &'a mut [Rda], acc: &mut Rda) -> Vec<&'a mut Rda> {
        lent.clone_from_slice(shards);
        acc.reset();
        lent.iter_mut().collect()
    }
    const WAYS: usize = 4;
    let n = 3usize << 18;
    let mut split: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 256 * WAYS];
    for (i, (id, ts)) in keys(n, 5).into_iter().enumerate() {
        if let Some(r) = split.get_mut((id >> 56) as usize * WAYS + i % WAYS) {
            r.push((id, ts));
        }
    }
    let regions: Vec<&[(u64, u64)]> = split.iter().map(|v| v.as_slice()).collect();
    let group_len = |g: std::ops::Range<usize>| -> usize {
        regions[g.start * WAYS..g.end * WAYS].iter().map(|p| p.len()).sum()
    };
    let chunks_of = |size: usize| -> Vec<std::ops::Range<usize>> {
        (0..256).step_by(size).map(|g| g..(g + size).min(256)).collect()
    };
    let outputs_of = |chunks: &[std::ops::Range<usize>]| -> Vec<Vec<(u64, u64)>> {
        chunks.iter().map(|g| vec![(0u64, 0u64); group_len(g.clone())]).collect()
    };
    let sort_chunk = |sorter: &mut Sorter, g: &std::ops::Range<usize>, out: &mut [(u64, u64)]| {
        sorter
            .sort_unique_groups(&regions[g.start * WAYS..g.end * WAYS], WAYS, g.start, out, |_, _| {})
            .distinct
    };
    let mut g = c.benchmark_group("rda_shared_filing");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    let mut sorter = Sorter::default();
    let mut run: Vec<(u64, u64)> = Vec::new();
    g.bench_function("whole", |b| {
        b.iter(|| sorter.sort_unique_regions(&regions, WAYS, &mut run, |_, _| {}).distinct)
    });
    for size in [1usize, 8, 32] {
        let chunks = chunks_of(size);
        let mut outs = outputs_of(&chunks);
        g.bench_function(BenchmarkId::new("chunks", size), |b| {
            b.iter(|| {
                chunks.iter().zip(outs.iter_mut()).map(|(g, o)| sort_chunk(&mut sorter, g, o)).sum::<usize>()
            })
        });
    }
    // The shared filing itself: 4 workers' shards of the same pairs, lent, filed by one helper
    // thread, taken back.
    let cfg = RdaConfig::online(2, 2500, 1 << 20);
    let mut shards: Vec<Rda> = (0..WAYS).map(|_| Rda::new(&cfg).expect("valid config")).collect();
    for (i, (id, ts)) in keys(n, 5).into_iter().enumerate() {
        shards[i % WAYS].update_logged(id, 0, ts);
    }
    let mut acc = Rda::new(&cfg).expect("valid config");
    let mut job = FilingJob::default();
    let mut helper = Sorter::with_room(1 << 14);
    let mut lent_shards = shards.clone();
    // Control's part: lend and take back, timed; the helper's chunks in between are not.
    g.bench_function("shared/control_part", |b| {
        b.iter_custom(|iters| {
            let mut control = Duration::ZERO;
            for _ in 0..iters {
                let mut refs = fresh(&shards, &mut lent_shards, &mut acc);
                let t = Instant::now();
                assert!(acc.lend_logs(&mut refs, &mut job).expect("same configuration"));
                control += t.elapsed();
                while job.help(&mut helper) != Help::NoneLeft {}
                let t = Instant::now();
                let shared = acc.take_back_logs(&mut refs, &mut job);
                control += t.elapsed();
                assert_eq!(shared.by_control, 0);
            }
            control
        })
    });
    // Wall time with the control thread and one helper thread both filing.
    g.bench_function(BenchmarkId::new("shared/threads", 2), |b| {
        b.iter_custom(|iters| {
            let mut wall = Duration::ZERO;
            for _ in 0..iters {
                let mut refs = fresh(&shards, &mut lent_shards, &mut acc);
                let t = Instant::now();
                assert!(acc.lend_logs(&mut refs, &mut job).expect("same configuration"));
                std::thread::scope(|s| {
                    let job = &job;
                    let helper = &mut helper;
                    s.spawn(move || while job.help(helper) != Help::NoneLeft {});
                    let mut own = Sorter::with_room(1 << 14);
                    while job.help(&mut own) != Help::NoneLeft {}
                });
                acc.take_back_logs(&mut refs, &mut job);
                wall += t.elapsed();
            }
            wall
        })
    });
    let chunks = chunks_of(8);
    let mut outs = outputs_of(&chunks);
    let filled: Vec<usize> =
        chunks.iter().zip(outs.iter_mut()).map(|(g, o)| sort_chunk(&mut sorter, g, o)).collect();
    let mut joined: Vec<(u64, u64)> = Vec::with_capacity(n);
    g.bench_function("concatenate", |b| {
        b.iter(|| {
            joined.clear();
            for (o, &d) in outs.iter().zip(&filled) {
                joined.extend_from_slice(&o[..d]);
            }
            joined.len()
        })
    });
    g.bench_function("close_first_hole", |b| {
        b.iter(|| {
            let len = joined.len();
            joined.copy_within(1..len, 0);
            black_box(joined.as_ptr());
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_update,
    bench_decode,
    bench_epoch_end,
    bench_retention,
    bench_harvest,
    bench_repeat_probe_floor,
    bench_shared_filing
);
criterion_main!(benches);
