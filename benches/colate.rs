//! COLATE benches: the per-packet update on a realistic key stream (heavy-tailed flows,
//! precomputed flow hashes and identities as the packet layer hands them over), with and without
//! per-cell packet counts, at the paper's 1 MB sizing (n = 441 499, 3.5 MB of u64 cells) and
//! at a cache-resident size; plus shard merge, window encode/decode, epoch encode/decode and a
//! flow query.
//!
//! Run: `cargo bench --no-default-features --bench colate`. Target: ≤ 10 ns per packet update.
//! On a shared machine also measure CPU time with `examples/colate_update_cost.rs` under perf.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::trace::{TraceConfig, generate};
use wirelat_dataplane::synopsis::colate::{Colate, ColateConfig, EpochAccumulator, QueryOptions, Segment};

/// (flow_hash, identity, ts_ns) in arrival order.
fn key_stream(packets: usize) -> Vec<(u64, u64, u64)> {
    let flows = (packets / 40).max(1) as u32;
    let tr = generate(&TraceConfig::new(11, flows, 10_000_000_000, 40.0));
    tr.packets
        .iter()
        .take(packets)
        .map(|p| (tr.flow_hashes[p.flow as usize], p.identity, p.ts_s_ns))
        .collect()
}

fn cfg(n: u32, counts: bool) -> ColateConfig {
    ColateConfig { packet_counts: counts, tick_ns: 1, ..ColateConfig::new(n, 20, 19, u64::MAX) }
}

fn update(c: &mut Criterion) {
    let stream = key_stream(1 << 20);
    let mut g = c.benchmark_group("colate_update");
    g.throughput(Throughput::Elements(stream.len() as u64));
    for (name, n) in [("n441499", 441_499u32), ("n10007", 10_007)] {
        for counts in [false, true] {
            let mut s = Colate::new(&cfg(n, counts)).expect("valid config");
            let label = format!("{name}_{}", if counts { "counts" } else { "paper" });
            g.bench_function(label.clone(), |b| {
                b.iter(|| {
                    for &(f, id, ts) in &stream {
                        s.update_raw(f, id, ts);
                    }
                    black_box(s.packets())
                })
            });
            // The runtime's burst loop: 32 packets at a time through `update_burst`.
            g.bench_function(format!("{label}_burst32"), |b| {
                b.iter(|| {
                    for burst in stream.chunks(32) {
                        s.update_burst(burst);
                    }
                    black_box(s.packets())
                })
            });
        }
    }
    g.finish();
}

fn per_window(c: &mut Criterion) {
    let stream = key_stream(1 << 18);
    let config = cfg(441_499, true);
    let mut a = Colate::new(&config).expect("valid config");
    let mut b = Colate::new(&config).expect("valid config");
    for (k, &(f, id, ts)) in stream.iter().enumerate() {
        if k % 2 == 0 { a.update_raw(f, id, ts) } else { b.update_raw(f, id, ts) }
    }
    let mut g = c.benchmark_group("colate_window");
    g.bench_function("merge_n441499_counts", |bch| {
        bch.iter_batched(
            || a.clone(),
            |mut x| x.merge(black_box(&b)).map(|_| x.packets()),
            BatchSize::LargeInput,
        )
    });
    let bytes = a.encode();
    g.bench_function("encode_n441499_counts", |bch| bch.iter(|| black_box(a.encode()).len()));
    g.bench_function("decode_n441499_counts", |bch| {
        bch.iter(|| Colate::decode(&config, black_box(&bytes)).map(|s| s.packets()))
    });
    let mut acc = EpochAccumulator::new(&config, 1, 0).expect("valid config");
    let _ = acc.push_window(0, &a);
    let epoch = acc.flush().expect("one epoch");
    let stored = epoch.encode();
    g.bench_function("epoch_encode_n441499_counts", |bch| bch.iter(|| black_box(epoch.encode()).len()));
    g.bench_function("epoch_decode_n441499_counts", |bch| {
        bch.iter(|| {
            wirelat_dataplane::synopsis::colate::CounterEpoch::decode(&config, black_box(&stored))
                .map(|e| e.seq)
        })
    });
    let seg = Segment::new(vec![&epoch], vec![&epoch]).expect("same config");
    let opts = QueryOptions::default();
    g.bench_function("query_one_flow_n441499_counts", |bch| {
        bch.iter(|| seg.query(black_box(stream[7].0), 40, &opts).packets)
    });
    g.bench_function("segment_build_n441499_counts", |bch| {
        bch.iter(|| Segment::new(vec![&epoch], vec![&epoch]).map(|s| s.config().counters))
    });
    g.finish();
}

/// The synopsis body a point ships each epoch, at the appliance's default size (10⁶ + 3 counters
/// with packet counts, `configs/measure-trace.toml`) and three fills: a demo window (847
/// packets), 1 Mpps and 10 Mpps in a 100-ms epoch. Encode and decode, as the control thread and
/// the peer pay them, and the peer's segment build (its noise and reference sums).
fn body(c: &mut Criterion) {
    let config = ColateConfig { packet_counts: true, ..ColateConfig::new(1_000_003, 20, 48, u64::MAX) };
    let stream = key_stream(1 << 21);
    assert!(stream.len() >= 1_000_000, "{} packets generated", stream.len());
    let mut g = c.benchmark_group("colate_body");
    g.sample_size(20);
    for packets in [847usize, 100_000, 1_000_000] {
        let mut s = Colate::new(&config).expect("valid config");
        for &(f, id, ts) in &stream[..packets] {
            s.update_raw(f, id, ts);
        }
        let bytes = s.encode();
        eprintln!("colate_body packets={packets} encoded_bytes={}", bytes.len());
        g.bench_function(format!("encode_{packets}"), |bch| bch.iter(|| black_box(s.encode()).len()));
        g.bench_function(format!("decode_{packets}"), |bch| {
            bch.iter(|| Colate::decode(&config, black_box(&bytes)).map(|s| s.packets()))
        });
        // What the peer builds per segment direction and epoch before it answers any flow.
        let mut acc = EpochAccumulator::new(&config, 1, 0).expect("valid config");
        let _ = acc.push_window(0, &s);
        let epoch = acc.flush().expect("one epoch");
        g.bench_function(format!("segment_build_{packets}"), |bch| {
            bch.iter(|| Segment::new(vec![&epoch], vec![black_box(&epoch)]).map(|s| s.config().counters))
        });
    }
    g.finish();
}

criterion_group!(benches, update, per_window, body);
criterion_main!(benches);
