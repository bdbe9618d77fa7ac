//! LDS benches: per-packet update at the paper's 17500×4 = 70,000 cells (target ≤ 25 ns), with
//! and without the per-epoch flow log, the multi-bank k = 5 layout, shard merge, encode and
//! decode, and estimator throughput in flows per second.
//!
//! The key stream is the synthetic S1 trace of spec §11 (146,000 flows, packets in send-time
//! order, so flows interleave as on a link); flow hashes and identities are precomputed, as the
//! packet layer hands them to the synopsis.
//!
//! `cargo bench --no-default-features --bench lds`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use wirelat_dataplane::packet::FlowKey;
use wirelat_dataplane::synopsis::lds::trace::{Trace, TraceConfig};
use wirelat_dataplane::synopsis::lds::{Estimator, Lds, LdsConfig};
use wirelat_dataplane::synopsis::{Observation, Synopsis};

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

fn bench_update(c: &mut Criterion, trace: &Trace, pkts: &[Pkt]) {
    let distinct = {
        let mut h: Vec<u64> = pkts.iter().map(|p| p.flow_hash).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    };
    eprintln!("stream: {} packets of {distinct} flows (S1, {} flows in all)", pkts.len(), trace.flows.len());
    let mut g = c.benchmark_group("lds_update");
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

fn bench_epoch(c: &mut Criterion, trace: &Trace) {
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
        };
        sender.update(&mut (), &obs(p.send_ns));
        receiver.update(&mut (), &obs(p.recv_ns()));
    }
    let bytes = sender.encode();
    eprintln!("encoded sender sketch + flow log: {} bytes ({} flows)", bytes.len(), sender.flows().len());

    let mut g = c.benchmark_group("lds_epoch");
    g.sample_size(20);
    g.bench_function("merge_17500x4_shards_with_flow_logs", |b| {
        b.iter_batched(|| receiver.clone(), |mut m| m.merge(&sender).map(|_| m), BatchSize::LargeInput)
    });
    g.bench_function("encode_17500x4_with_146k_flows", |b| b.iter(|| black_box(sender.encode())));
    g.bench_function("decode_17500x4_with_146k_flows", |b| b.iter(|| Lds::decode(&cfg, black_box(&bytes))));
    g.finish();

    let mut g = c.benchmark_group("lds_estimate");
    g.sample_size(20);
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

fn benches(c: &mut Criterion) {
    let trace = Trace::generate(&TraceConfig::s1(1)).expect("S1 parameters are valid");
    let pkts = stream(&trace);
    bench_update(c, &trace, &pkts);
    bench_epoch(c, &trace);
}

criterion_group!(lds, benches);
criterion_main!(lds);
