//! LDA costs: the per-packet update on 1024 cells (target ≤ 5 ns/packet), the shard merge,
//! encoding, decoding and the estimator.
//!
//! `cargo bench --no-default-features --bench lda`
//!
//! The update runs over precomputed packet identities (the packet layer computes them once
//! per packet for every synopsis), so only the LDA's own work is timed.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use wirelat_dataplane::packet::FlowKey;
use wirelat_dataplane::synopsis::lda::{BankConfig, BankTarget, Lda, LdaConfig, estimate};
use wirelat_dataplane::synopsis::{Observation, Synopsis};

/// Packets per timed batch.
const BATCH: usize = 4096;

fn identities() -> Vec<u64> {
    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(1);
    (0..BATCH).map(|_| r.random()).collect()
}

/// The configurations of the target (1024 cells): one bank sampling everything (every
/// packet does the full work), one bank tuned to 0.1% loss at 5M packets, the paper's two
/// banks (most packets unsampled), and the same with emulated 40/32-bit hardware widths.
fn configs() -> Vec<(&'static str, LdaConfig)> {
    let two = LdaConfig::tuned(
        5_000_000,
        &[BankTarget { rows: 512, loss_rate: 0.005 }, BankTarget { rows: 512, loss_rate: 0.1 }],
        0.5,
        7,
    )
    .expect("feasible");
    let mut two_hw = two.clone();
    two_hw.ts_bits = 40;
    two_hw.count_bits = 32;
    vec![
        ("1x1024_p1", LdaConfig::single_bank(1024, 1.0, 7)),
        (
            "1x1024_p0.1",
            LdaConfig::tuned(5_000_000, &[BankTarget { rows: 1024, loss_rate: 0.001 }], 0.5, 7)
                .expect("feasible"),
        ),
        ("2x512_tuned", two),
        ("2x512_tuned_40_32bit", two_hw),
        (
            "2x512_p0.5_each",
            LdaConfig {
                banks: vec![BankConfig { rows: 512, p: 0.5 }, BankConfig { rows: 512, p: 0.5 }],
                ..LdaConfig::single_bank(2, 1.0, 7)
            },
        ),
    ]
}

fn update(c: &mut Criterion) {
    let ids = identities();
    let mut g = c.benchmark_group("lda_update");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, cfg) in configs() {
        let mut lda = Lda::new(&cfg).expect("valid config");
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut ts = 1u64 << 40;
                for &id in &ids {
                    ts += 1_000;
                    lda.update_raw(black_box(id), ts);
                }
            })
        });
        black_box(&lda);
    }
    // The runtime's path: the trait update with an Observation.
    let cfg = configs()[2].1.clone();
    let mut lda = Lda::new(&cfg).expect("valid config");
    let flow = FlowKey::default();
    g.bench_function("2x512_tuned_via_trait", |b| {
        b.iter(|| {
            let mut ts = 1u64 << 40;
            for &id in &ids {
                ts += 1_000;
                let obs = Observation {
                    ts_ns: ts,
                    flow: &flow,
                    flow_hash: id,
                    identity: black_box(id),
                    exchange: None,
                    encap: wirelat_dataplane::packet::Encap::NONE,
                };
                lda.update(&mut (), &obs);
            }
        })
    });
    black_box(&lda);
    g.finish();
}

fn filled(cfg: &LdaConfig, ids: &[u64]) -> Lda {
    let mut lda = Lda::new(cfg).expect("valid config");
    for (i, &id) in ids.iter().cycle().take(1_000_000).enumerate() {
        lda.update_raw(id.rotate_left(i as u32 % 64), i as u64 * 1_000);
    }
    lda
}

fn per_epoch(c: &mut Criterion) {
    let ids = identities();
    let mut g = c.benchmark_group("lda_epoch");
    for (name, cfg) in
        [("1x1024_64bit", LdaConfig::single_bank(1024, 1.0, 7)), ("2x512_40_32bit", configs()[3].1.clone())]
    {
        let a = filled(&cfg, &ids);
        let b = filled(&cfg, &ids[1..]);
        g.bench_function(format!("merge/{name}"), |bch| {
            bch.iter_batched_ref(|| a.clone(), |x| x.merge(black_box(&b)), BatchSize::SmallInput)
        });
        let mut buf = Vec::with_capacity(32 * 1024);
        g.bench_function(format!("encode/{name}"), |bch| {
            bch.iter(|| {
                buf.clear();
                black_box(&a).encode_into(&mut buf);
                buf.len()
            })
        });
        let bytes = a.encode();
        g.bench_function(format!("decode/{name}"), |bch| bch.iter(|| Lda::decode(&cfg, black_box(&bytes))));
        g.bench_function(format!("estimate/{name}"), |bch| {
            bch.iter(|| estimate(black_box(&a), black_box(&b)))
        });
    }
    g.finish();
}

/// A machine-speed reference measured in the same run: a dependent multiply-xor chain costs
/// 4 cycles an element on an idle core (imul latency 3 + xor 1), 1.54 ns at the VM's
/// 2.6 GHz. On a shared VM it shows how much CPU the run actually got.
fn reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("dependent_imul_xor_chain", |b| {
        b.iter(|| {
            let mut x = black_box(12_345u64);
            for _ in 0..BATCH {
                x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 1;
            }
            x
        })
    });
    g.finish();
}

criterion_group!(benches, reference, update, per_epoch);
criterion_main!(benches);
